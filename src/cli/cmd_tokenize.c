/* mlaserve tokenize DIR --text "..." [--add-special-tokens]   → [id, id, ...]
 * mlaserve detokenize DIR --ids 1,2,3 [--skip-special-tokens] → the text
 * DIR is a checkpoint (or tokenizer-only) directory, or a tokenizer.json path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "cli/commands.h"
#include "tok/tokenizer.h"

static int read_file(const char *path, char **out, size_t *n, struct err *e)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return err_set(e, "%s: cannot open: %s", path, strerror(errno));
	size_t cap = 4096, len = 0;
	char *s = malloc(cap);
	size_t k;
	while (s && (k = fread(s + len, 1, cap - len, f)) > 0) {
		len += k;
		if (len == cap) {
			char *g = realloc(s, cap *= 2);
			if (!g)
				free(s);
			s = g;
		}
	}
	int bad = ferror(f);
	fclose(f);
	if (!s || bad) {
		free(s);
		return err_set(e, "%s: read error", path);
	}
	*out = s;
	*n = len;
	return 0;
}

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
	if (file && read_file(file, &buf, &len, &e)) {
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

/* "1,2,3", "1 2 3" or "[1, 2, 3]" */
static int parse_ids(const char *s, int32_t **out, size_t *n, struct err *e)
{
	size_t cap = 16, cnt = 0;
	int32_t *v = malloc(cap * sizeof *v);
	if (!v)
		return err_set(e, "--ids: out of memory");
	const char *p = s;
	for (;;) {
		while (*p == ' ' || *p == ',' || *p == '[' || *p == ']' || *p == '\n' || *p == '\t')
			p++;
		if (!*p)
			break;
		char *end;
		errno = 0;
		long x = strtol(p, &end, 10);
		if (errno || end == p || x < 0 || x > INT32_MAX) {
			free(v);
			return err_set(e, "--ids: invalid token id list '%s'", s);
		}
		if (cnt == cap) {
			int32_t *g = realloc(v, (cap *= 2) * sizeof *v);
			if (!g) {
				free(v);
				return err_set(e, "--ids: out of memory");
			}
			v = g;
		}
		v[cnt++] = (int32_t)x;
		p = end;
	}
	*out = v;
	*n = cnt;
	return 0;
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
			printf(
			    "usage: mlaserve detokenize DIR --ids 1,2,3 [--skip-special-tokens]\n"
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
		fprintf(stderr,
			"usage: mlaserve detokenize DIR --ids 1,2,3 [--skip-special-tokens]\n");
		return 2;
	}
	struct err e;
	int32_t *ids = NULL;
	size_t n = 0;
	if (parse_ids(ids_arg, &ids, &n, &e)) {
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
