/* Tokenizer throughput on one core: encode MB/s for English prose and for C source, decode
 * MB/s, incremental detokenizer tokens/s. The inputs come from the repository itself:
 * prose = every *.md file plus the comment text of src/ (C comments are English
 * sentences); code = the src/ C files as they are.
 *
 *   tokenizer_bench DIR [--min-seconds S] --prose FILE... --code FILE...
 *
 * "cold" is the first pass over the corpus with a fresh tokenizer (empty piece cache), best
 * of 5: the number to quote. "again" is the best of further passes over the same text, where every
 * short line and word is already cached (an upper bound, e.g. for a repeated system
 * prompt). Times are the thread's CPU time, so a busy
 * machine does not distort the per-core numbers. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tok/tokenizer.h"

struct corpus {
	char *p;
	size_t n, cap;
};

static void add(struct corpus *c, const char *s, size_t n)
{
	if (c->n + n + 1 > c->cap) {
		c->cap = (c->n + n + 1) * 2;
		c->p = realloc(c->p, c->cap);
		if (!c->p) {
			fprintf(stderr, "out of memory\n");
			exit(1);
		}
	}
	memcpy(c->p + c->n, s, n);
	c->n += n;
	c->p[c->n] = 0;
}

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = malloc((size_t)len + 1);
	*n = s ? fread(s, 1, (size_t)len, f) : 0;
	fclose(f);
	if (s)
		s[*n] = 0;
	return s;
}

/* prose from a C file: the text inside its comments, one paragraph per comment */
static void add_comments(struct corpus *c, const char *s, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++) {
		if (s[i] != '/' || s[i + 1] != '*')
			continue;
		const char *end = strstr(s + i + 2, "*/");
		if (!end)
			break;
		for (const char *p = s + i + 2; p < end; p++) {
			if (*p == '*' && (p == s + i + 2 || p[-1] == ' ' || p[-1] == '\n' || p[-1] == '\t'))
				continue; /* the " * " margin */
			if (*p == '\t' || (*p == ' ' && p[-1] == '\n'))
				continue;
			add(c, p, 1);
		}
		add(c, "\n\n", 2);
		i = (size_t)(end - s) + 1;
	}
}

/* CPU time of this thread: the machine may be shared, and the question is what one core
 * does */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Encodes the corpus in chunks of about chunk bytes (split at newlines, like documents);
 * returns seconds, adds the token count. */
static double encode_pass(const struct tok *t, const struct corpus *c, size_t chunk, size_t *n_tok)
{
	double t0 = now();
	struct err e;
	size_t i = 0;
	while (i < c->n) {
		size_t j = i + chunk < c->n ? i + chunk : c->n;
		while (j < c->n && c->p[j - 1] != '\n')
			j++;
		int32_t *ids;
		size_t n;
		if (tok_encode(t, c->p + i, j - i, false, &ids, &n, &e)) {
			fprintf(stderr, "encode: %s\n", e.msg);
			exit(1);
		}
		*n_tok += n;
		free(ids);
		i = j;
	}
	return now() - t0;
}

static void bench_encode(const char *dir, const char *name, const struct corpus *c, double min_s)
{
	struct tok *t = NULL;
	struct err e;
	/* cold: best of 5 fresh tokenizers (a shared machine only ever makes a pass slower) */
	double cold = 1e30;
	size_t tokens = 0;
	for (int r = 0; r < 5; r++) {
		tok_free(t);
		if (tok_load(dir, &t, &e)) {
			fprintf(stderr, "%s\n", e.msg);
			exit(1);
		}
		tokens = 0;
		double s = encode_pass(t, c, 4096, &tokens);
		cold = s < cold ? s : cold;
	}
	double best = 1e30, total = 0;
	int rounds = 0;
	while (total < min_s || rounds < 3) {
		size_t n_tok = 0;
		double s = encode_pass(t, c, 4096, &n_tok);
		best = s < best ? s : best;
		total += s;
		rounds++;
	}
	double mb = c->n / 1e6;
	printf("encode %-6s %8.3f MB  %8zu tokens (%.2f bytes/token)  cold %7.2f MB/s  again %7.2f "
	       "MB/s\n",
	       name, mb, tokens, (double)c->n / (double)tokens, mb / cold, mb / best);

	/* decode and incremental detokenization of the same tokens */
	int32_t *ids;
	size_t n;
	if (tok_encode(t, c->p, c->n, false, &ids, &n, &e)) {
		fprintf(stderr, "encode: %s\n", e.msg);
		exit(1);
	}
	double t0 = now();
	char *text;
	size_t len;
	tok_decode(t, ids, n, false, &text, &len, &e);
	double dec = now() - t0;
	if (len != c->n || memcmp(text, c->p, len)) {
		fprintf(stderr, "decode(encode(%s)) differs from the input\n", name);
		exit(1);
	}
	free(text);
	struct tok_detok *d;
	tok_detok_new(t, false, NULL, 0, &d, &e);
	t0 = now();
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		const char *delta;
		size_t dl;
		tok_detok_push(d, ids[i], &delta, &dl, &e);
		out += dl;
	}
	double inc = now() - t0;
	tok_detok_free(d);
	printf("decode %-6s one-shot %7.1f MB/s   incremental %6.2f M tokens/s (%zu bytes)\n", name, mb / dec,
	       n / inc / 1e6, out);
	free(ids);
	tok_free(t);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: tokenizer_bench DIR [--min-seconds S] --prose FILE... "
				"--code FILE...\n");
		return 2;
	}
	const char *dir = argv[1];
	struct corpus prose = {0}, code = {0};
	double min_s = 1.0;
	int mode = 0;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--prose")) {
			mode = 1;
			continue;
		}
		if (!strcmp(argv[i], "--code")) {
			mode = 2;
			continue;
		}
		if (!strcmp(argv[i], "--min-seconds") && i + 1 < argc) {
			min_s = atof(argv[++i]);
			continue;
		}
		size_t n;
		char *s = slurp(argv[i], &n);
		if (!s) {
			fprintf(stderr, "cannot read %s\n", argv[i]);
			return 1;
		}
		size_t len = strlen(argv[i]);
		bool is_c = len > 2 && (!strcmp(argv[i] + len - 2, ".c") || !strcmp(argv[i] + len - 2, ".h"));
		if (mode == 1 && is_c)
			add_comments(&prose, s, n);
		else if (mode == 1 || mode == 2)
			add(mode == 1 ? &prose : &code, s, n);
		free(s);
	}
	struct tok *t;
	struct err e;
	double t0 = now();
	if (tok_load(dir, &t, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return 1;
	}
	printf("tokenizer %s: vocab %d, load %.0f ms\n", dir, tok_vocab_size(t), (now() - t0) * 1e3);
	tok_free(t);
	if (prose.n)
		bench_encode(dir, "prose", &prose, min_s);
	if (code.n)
		bench_encode(dir, "code", &code, min_s);
	free(prose.p);
	free(code.p);
	return 0;
}
