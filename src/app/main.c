/* mlaserve: an OpenAI-compatible inference server for DeepSeek (MLA + MoE) models. */
#include <stdio.h>
#include <string.h>

#include "app/commands.h"
#include "tools/tools.h"

#include "base/env.h"
#include "base/version.h"

static int cmd_version(int argc, char **argv)
{
	printf("mlaserve %s\n", MLASERVE_VERSION);
	return 0;
}

/* One line per command, in the order --help lists them. */
static const struct command commands[] = {
	{"version", "print the version", cmd_version},
	{"dist-check", "check MPI ranks, TP/DCP groups and collectives (-tp T -dcp D)", cmd_dist_check},
	{"logits", "write the logits of a token sequence as raw float32 (--tokens, --out)", cmd_logits},
	{"generate",
	 "offline batch generation through the engine (MODEL_DIR --prompts-file F.jsonl | --prompt T | --prompt-ids "
	 "0,5,9)",
	 cmd_generate},
	{"tokenize", "print the token ids of a text as a JSON array (DIR --text T)", cmd_tokenize},
	{"detokenize", "print the text of token ids (DIR --ids 1,2,3)", cmd_detokenize},
	{"chat-template", "print the prompt rendered by DIR's chat template (DIR --messages F.json)",
	 cmd_chat_template},
	{"serve", "serve the OpenAI-compatible HTTP API (vLLM flags; default model tests/fixtures/tiny-v3)",
	 cmd_serve},
	{"bench", "benchmarks: bench latency MODEL_DIR --batch-size B --input-len I --output-len O", cmd_bench},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: mlaserve COMMAND [options]   (mlaserve COMMAND --help for its options)\n\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nenvironment:\n");
	for (int v = 0; v < ENV_COUNT; v++)
		fprintf(f, "  %-27s %s\n", env_name((enum env_var)v), env_help((enum env_var)v));
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "mlaserve: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
