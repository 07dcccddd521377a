/* Guided decoding's per-step cost: guide_vocab_mask (the trie walk, and the string fast path)
 * against the obvious way (every token's bytes fed to a copy of the matcher state), over the
 * states of a JSON output, on a real tokenizer; then grammar outputs through free text, where
 * the walk visits the whole trie once and the kept masks serve the steps after.
 *   guide_mask TOKENIZER_DIR [--reps N]
 * Prints per state class the mean milliseconds of each way and their ratio, measured in the
 * same run (the kept masks cleared before each timing). The masks must be equal (the program
 * fails otherwise). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mono.h"
#include "guide/grammar.h"
#include "guide/matcher.h"
#include "guide/vocab.h"
#include "tok/tokenizer.h"

static const char SCHEMA[] =
	"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
	"\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
	"\"address\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}},"
	"\"required\":[\"name\",\"age\"]}";
static const char OUTPUT[] = "{\"name\": \"Ada Lovelace, née Byron\", \"age\": 36, \"tags\": [\"math\", \"poetry\"], "
			     "\"address\": {\"city\": \"London\"}}";

static int brute(const struct tok *t, int vocab, const struct guide_grammar *g, const struct jm_state *s,
		 struct jm_state *tmp, uint8_t *allow)
{
	int n = 0;
	memset(allow, 0, (size_t)vocab);
	for (int32_t id = 0; id < vocab; id++) {
		size_t len;
		const char *p = tok_id_bytes(t, id, &len);
		if (!p || !len || tok_is_special(t, id))
			continue;
		jm_copy(tmp, s);
		if (jm_feed_bytes(tmp, g, (const uint8_t *)p, len))
			allow[id] = 1, n++;
	}
	return n;
}

/* Grammar outputs inside free text: the first step's mask (a whole-trie walk), then 14 more
 * words, each step's mask from the kept ones (the state repeats). */
static int free_text_steps(struct guide_vocab *v, int vocab)
{
	static const char *const grammars[2] = {
		"root ::= \"SELECT \" cols \" FROM \" [a-z_]+ (\" WHERE \" cond)? \";\"\n"
		"cols ::= \"*\" | [a-z]+ (\", \" [a-z]+)*\ncond ::= [a-z]+ \" = \" ([0-9]+ | \"'\" [^']* \"'\")",
		"root ::= value\nvalue ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
		"object ::= \"{\" ws (string \":\" ws value (\",\" ws string \":\" ws value)*)? \"}\"\n"
		"array ::= \"[\" ws (value (\",\" ws value)*)? \"]\"\n"
		"string ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"\\\\/bfnrt])* \"\\\"\"\n"
		"number ::= \"-\"? [0-9]+ (\".\" [0-9]+)?\nws ::= [ \\n]*"};
	static const char *const names[2] = {"SQL grammar, inside '...'", "JSON grammar, inside a string"};
	static const char *const prefixes[2] = {"SELECT a, b FROM t WHERE x = '", "{\"a\": [1, {\"b\": \""};
	static const char *const words[] = {"The",  " quick", " brown", " fox", " jumps", " over",  " the", " lazy",
					    " dog", ".",      " It",    " was", " a",     " sunny", " day"};
	struct err e;
	for (int k = 0; k < 2; k++) {
		struct guide_grammar *g;
		if (guide_from_ebnf(grammars[k], strlen(grammars[k]), &g, &e) < 0) {
			fprintf(stderr, "guide_mask: %s\n", e.msg);
			return 1;
		}
		struct jm_state *s = malloc(sizeof *s);
		uint8_t *a = malloc((size_t)vocab);
		double first = 0, rest[2] = {0, 0}; /* [kept masks, cleared every step] */
		int n_first = 0, n_words = (int)(sizeof words / sizeof *words);
		for (int mode = 0; mode < 2; mode++) {
			jm_init(s, g);
			if (!jm_feed_bytes(s, g, (const uint8_t *)prefixes[k], strlen(prefixes[k]))) {
				fprintf(stderr, "guide_mask: the prefix is refused\n");
				return 1;
			}
			guide_vocab_cache_clear(v);
			for (int w = 0; w < n_words; w++) {
				if (mode == 1)
					guide_vocab_cache_clear(v);
				double x = mono_now_s();
				int n = guide_vocab_mask(v, g, s, NULL, 0, a);
				double dt = mono_now_s() - x;
				if (w == 0 && mode == 0) {
					first = dt;
					n_first = n;
				} else if (w > 0) {
					rest[mode] += dt;
				}
				if (!jm_feed_bytes(s, g, (const uint8_t *)words[w], strlen(words[w]))) {
					fprintf(stderr, "guide_mask: word %d refused\n", w);
					return 1;
				}
			}
		}
		printf("%-30s first step %.2f ms (%d tokens allowed); next %d steps: %.4f ms each, %.2f ms each "
		       "without the kept masks\n",
		       names[k], first * 1e3, n_first, n_words - 1, rest[0] / (n_words - 1) * 1e3,
		       rest[1] / (n_words - 1) * 1e3);
		free(a);
		free(s);
		guide_unref(g);
	}
	return 0;
}

/* A left-recursive grammar (rewritten at compile time) against the same language written as
 * repetition: each step's mask with the kept masks cleared, and whether the masks agree. */
static int left_recursive_steps(struct guide_vocab *v, int vocab)
{
	static const char *const grammars[2] = {"root ::= expr\nexpr ::= expr (\" + \" | \" - \") term | term\nterm "
						"::= term (\" * \" | \" / \") factor | factor\n"
						"factor ::= [0-9]+ | \"(\" expr \")\"",
						"root ::= expr\nexpr ::= term ((\" + \" | \" - \") term)*\nterm ::= "
						"factor ((\" * \" | \" / \") factor)*\n"
						"factor ::= [0-9]+ | \"(\" expr \")\""};
	static const char *const text = "(12 + 3) * 4 - (5 / (6 - 7)) + 8";
	struct guide_grammar *g[2] = {NULL, NULL};
	struct jm_state *s[2] = {malloc(sizeof **s), malloc(sizeof **s)};
	uint8_t *a[2] = {malloc((size_t)vocab), malloc((size_t)vocab)};
	double t[2] = {0, 0};
	int bad = 0, steps = 0;
	struct err e;
	for (int k = 0; k < 2; k++)
		if (guide_from_ebnf(grammars[k], strlen(grammars[k]), &g[k], &e) < 0) {
			fprintf(stderr, "guide_mask: %s\n", e.msg);
			bad = 1;
		}
	for (int k = 0; k < 2 && !bad; k++)
		jm_init(s[k], g[k]);
	for (size_t i = 0; !bad && i <= strlen(text); i += 3, steps++) {
		for (int k = 0; k < 2; k++) {
			guide_vocab_cache_clear(v);
			double x = mono_now_s();
			guide_vocab_mask(v, g[k], s[k], NULL, 0, a[k]);
			t[k] += mono_now_s() - x;
		}
		bad |= memcmp(a[0], a[1], (size_t)vocab) != 0;
		size_t n = strlen(text) - i < 3 ? strlen(text) - i : 3;
		for (int k = 0; k < 2 && n; k++)
			bad |= !jm_feed_bytes(s[k], g[k], (const uint8_t *)text + i, n);
	}
	printf("arithmetic, left recursive   %.3f ms a mask; written as repetition %.3f ms; %d masks %s\n",
	       t[0] / steps * 1e3, t[1] / steps * 1e3, steps, bad ? "DIFFER" : "equal");
	for (int k = 0; k < 2; k++) {
		guide_unref(g[k]);
		free(s[k]);
		free(a[k]);
	}
	return bad;
}

/* What compiling a request's regex costs (it runs in the request's thread), and the bound on
 * the automaton's construction for those that would take minutes. */
static void regex_compiles(void)
{
	static const char *const res[] = {
		"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}",
		"\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:\\d{2})",
		"\\d{1,1000}",
		"[^\\n]{0,500}",
		".{0,1000}",
		"(\\w*\\d*\\s*){200}",
		"(.?){1000}",
		"(.{0,50}){0,50}x"};
	for (size_t i = 0; i < sizeof res / sizeof *res; i++) {
		struct guide_grammar *g = NULL;
		struct err e;
		double x = mono_now_s();
		int rc = guide_from_regex(res[i], strlen(res[i]), &g, &e);
		double dt = mono_now_s() - x;
		printf("regex %-40.40s %8.2f ms  %s\n", res[i], dt * 1e3, rc < 0 ? e.msg : "compiled");
		guide_unref(g);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: guide_mask TOKENIZER_DIR [--reps N]\n");
		return 2;
	}
	int reps = argc > 3 && !strcmp(argv[2], "--reps") ? atoi(argv[3]) : 3;
	struct err e;
	struct tok *t;
	struct guide_vocab *v;
	struct guide_grammar *g;
	json_t *schema = json_loads(SCHEMA, 0, NULL);
	if (tok_load(argv[1], &t, &e) < 0 || guide_from_schema(schema, "schema", &g, &e) < 0) {
		fprintf(stderr, "guide_mask: %s\n", e.msg);
		return 1;
	}
	int vocab = tok_vocab_size(t);
	double t0 = mono_now_s();
	if (guide_vocab_new(t, vocab, &v, &e) < 0) {
		fprintf(stderr, "guide_mask: %s\n", e.msg);
		return 1;
	}
	printf("%s: %d tokens, trie and string classes built in %.1f ms\n", argv[1], vocab, (mono_now_s() - t0) * 1e3);
	uint8_t *a = malloc((size_t)vocab), *b = malloc((size_t)vocab);
	struct jm_state *s = malloc(sizeof *s), *tmp = malloc(sizeof *tmp);
	jm_init(s, g);
	double sum[2][2] = {{0}}; /* [in string][mask, brute] */
	int cnt[2] = {0}, bad = 0;
	for (size_t i = 0; i <= strlen(OUTPUT); i++) {
		const struct jm_frame *f = &s->s[0].f[s->s[0].depth - 1];
		int in_str = g->nodes[f->node].kind == GUIDE_STRING;
		double tm = 1e9, tb = 1e9;
		int nm = 0, nb = 0;
		for (int r = 0; r < reps; r++) {
			guide_vocab_cache_clear(v);
			double x = mono_now_s();
			nm = guide_vocab_mask(v, g, s, NULL, 0, a);
			double y = mono_now_s();
			nb = brute(t, vocab, g, s, tmp, b);
			double z = mono_now_s();
			tm = y - x < tm ? y - x : tm;
			tb = z - y < tb ? z - y : tb;
		}
		if (nm != nb || memcmp(a, b, (size_t)vocab))
			bad++;
		sum[in_str][0] += tm;
		sum[in_str][1] += tb;
		cnt[in_str]++;
		if (i < strlen(OUTPUT) && !jm_feed(s, g, (uint8_t)OUTPUT[i])) {
			fprintf(stderr, "guide_mask: the output is refused at byte %zu\n", i);
			return 1;
		}
	}
	static const char *const what[2] = {"outside strings", "inside strings"};
	for (int k = 0; k < 2; k++)
		if (cnt[k])
			printf("%-16s %3d states: mask %.3f ms, every token fed %.3f ms: %.0fx faster\n", what[k],
			       cnt[k], sum[k][0] / cnt[k] * 1e3, sum[k][1] / cnt[k] * 1e3, sum[k][1] / sum[k][0]);
	printf("masks equal to every-token-fed: %s\n", bad ? "NO" : "yes");
	bad += free_text_steps(v, vocab);
	bad += left_recursive_steps(v, vocab);
	regex_compiles();
	free(a);
	free(b);
	free(s);
	free(tmp);
	json_decref(schema);
	guide_vocab_free(v);
	guide_unref(g);
	tok_free(t);
	return bad ? 1 : 0;
}
