/* mlaserve: an OpenAI-compatible inference server for DeepSeek (MLA + MoE) models. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

#define MLASERVE_VERSION "0.1.0"

static int cmd_version(int argc, char **argv)
{
	printf("mlaserve %s\n", MLASERVE_VERSION);
	return 0;
}

/* One line per command, in the order --help lists them. */
static const struct command commands[] = {
	{"version", "print the version", cmd_version},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: mlaserve COMMAND [options]   (mlaserve COMMAND --help for its options)\n\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
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
