/* mlaserve tokenize DIR --text "..." [--add-special-tokens]   → [id, id, ...]
 * mlaserve detokenize DIR --ids 1,2,3 [--skip-special-tokens] → the text
 * DIR is a checkpoint (or tokenizer-only) directory (tokenizer.json, or Kimi's tiktoken.model),
 * or a tokenizer.json or tiktoken.model path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/file.h"
#include "setup/cli_util.h"
#include "app/commands.h"
#include "tok/tokenizer.h"

int cmd_tokenize(int argc, char **argv)
{
	const char *dir = NULL, *text = NULL, *file = NULL;
	bool add_special = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--text") && i + 1 < argc)
			text = argv[++i];
		else if (!strcmp(argv[i], "--file") && i + 1 < argc)
			file = argv[++i];
		else if (!strcmp(argv[i], "--add-special-tokens"))
			add_special = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: mlaserve tokenize DIR (--text TEXT | --file PATH) "
			       "[--add-special-tokens]\n"
			       "prints the token ids as a JSON array\n");
			return 0;
		} else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else {
			fprintf(stderr, "mlaserve tokenize: unexpected argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (!dir || (!text == !file)) {
		fprintf(stderr, "usage: mlaserve tokenize DIR (--text TEXT | --file PATH) "
				"[--add-special-tokens]\n");
		return 2;
	}
	struct err e;
	struct tok *t;
	char *buf = NULL;
	size_t len = text ? strlen(text) : 0;
	if (file && file_read_all(file, &buf, &len, &e)) {
		fprintf(stderr, "mlaserve tokenize: %s\n", e.msg);
		return 1;
	}
	if (tok_load(dir, &t, &e)) {
		fprintf(stderr, "mlaserve tokenize: %s\n", e.msg);
		free(buf);
		return 1;
	}
	int32_t *ids;
	size_t n;
	int rc = tok_encode(t, buf ? buf : text, len, add_special, &ids, &n, &e);
	if (rc) {
		fprintf(stderr, "mlaserve tokenize: %s\n", e.msg);
	} else {
		putchar('[');
		for (size_t i = 0; i < n; i++)
			printf(i ? ", %d" : "%d", ids[i]);
		printf("]\n");
		free(ids);
	}
	tok_free(t);
	free(buf);
	return rc ? 1 : 0;
}

int cmd_detokenize(int argc, char **argv)
{
	const char *dir = NULL, *ids_arg = NULL;
	bool skip = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ids") && i + 1 < argc)
			ids_arg = argv[++i];
		else if (!strcmp(argv[i], "--skip-special-tokens"))
			skip = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: mlaserve detokenize DIR --ids 1,2,3 [--skip-special-tokens]\n"
			       "prints the decoded text\n");
			return 0;
		} else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else {
			fprintf(stderr, "mlaserve detokenize: unexpected argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (!dir || !ids_arg) {
		fprintf(stderr, "usage: mlaserve detokenize DIR --ids 1,2,3 [--skip-special-tokens]\n");
		return 2;
	}
	struct err e;
	int32_t *ids = NULL;
	size_t n = 0;
	if (cli_ids_parse("--ids", ids_arg, true, &ids, &n, &e)) {
		fprintf(stderr, "mlaserve detokenize: %s\n", e.msg);
		return 2;
	}
	struct tok *t;
	if (tok_load(dir, &t, &e)) {
		fprintf(stderr, "mlaserve detokenize: %s\n", e.msg);
		free(ids);
		return 1;
	}
	char *text;
	size_t len;
	int rc = tok_decode(t, ids, n, skip, &text, &len, &e);
	if (rc) {
		fprintf(stderr, "mlaserve detokenize: %s\n", e.msg);
	} else {
		fwrite(text, 1, len, stdout);
		putchar('\n');
		free(text);
	}
	tok_free(t);
	free(ids);
	return rc ? 1 : 0;
}
