/* Left-recursive grammars (src/guide/cfg_unleft.c): thousands of random small grammars, most of
 * them left recursive, directly or through other rules. Each one the compiler takes must
 * agree with an independent recognizer of the grammar as written (a fixed point over spans,
 * which left recursion and empty rules do not trouble) on every text over {a, b} up to 7
 * bytes: whole outputs exactly, and no prefix of a whole output refused. It must refuse
 * exactly those with left recursion behind a part that may match nothing (checked here on
 * the grammar as written). */
#include <stdio.h>
#include <string.h>

#include "guide/grammar.h"
#include "guide/matcher.h"
#include "harness.h"

#define MAX_RULES 4
#define MAX_ALTS 3
#define MAX_SYMS 3
#define MAX_TEXT 7

/* a symbol: 'a' or 'b', or rule k as -1 - k */
struct rgram {
	int n_rules, n_alts[MAX_RULES], len[MAX_RULES][MAX_ALTS], sym[MAX_RULES][MAX_ALTS][MAX_SYMS];
};

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static const char *const names[MAX_RULES] = {"root", "b1", "c1", "d1"};

static void random_grammar(struct rgram *g, uint64_t *s)
{
	g->n_rules = 1 + (int)(rng(s) % MAX_RULES);
	for (int r = 0; r < g->n_rules; r++) {
		g->n_alts[r] = 1 + (int)(rng(s) % MAX_ALTS);
		for (int a = 0; a < g->n_alts[r]; a++) {
			g->len[r][a] = rng(s) % 8 == 0 ? 0 : 1 + (int)(rng(s) % MAX_SYMS);
			for (int k = 0; k < g->len[r][a]; k++) {
				/* left recursion is common; most rules have an alternative of bytes alone
				 * (else most grammars would never end) */
				bool ref = rng(s) % 100 < (k == 0 ? 60u : 35u) &&
					   !(a == g->n_alts[r] - 1 && r % 2 == 0);
				g->sym[r][a][k] = ref          ? -1 - (int)(rng(s) % (uint64_t)g->n_rules)
						  : rng(s) % 2 ? 'a'
							       : 'b';
			}
		}
	}
}

static int to_text(const struct rgram *g, char *out, size_t cap)
{
	int n = 0;
	for (int r = 0; r < g->n_rules; r++) {
		n += snprintf(out + n, cap - (size_t)n, "%s ::=", names[r]);
		for (int a = 0; a < g->n_alts[r]; a++) {
			n += snprintf(out + n, cap - (size_t)n, "%s", a ? " |" : "");
			if (!g->len[r][a])
				n += snprintf(out + n, cap - (size_t)n, " \"\"");
			for (int k = 0; k < g->len[r][a]; k++) {
				int y = g->sym[r][a][k];
				n += y < 0 ? snprintf(out + n, cap - (size_t)n, " %s", names[-1 - y])
					   : snprintf(out + n, cap - (size_t)n, " \"%c\"", y);
			}
		}
		n += snprintf(out + n, cap - (size_t)n, "\n");
	}
	return n;
}

/* der[r][i]: bit j set when rule r derives t[i, j) */
static bool in_language(const struct rgram *g, const char *t, int n)
{
	unsigned der[MAX_RULES][MAX_TEXT + 1] = {{0}};
	for (bool changed = true; changed;) {
		changed = false;
		for (int r = 0; r < g->n_rules; r++)
			for (int a = 0; a < g->n_alts[r]; a++)
				for (int i = 0; i <= n; i++) {
					unsigned at = 1u << i; /* positions reached after the symbols so far */
					for (int k = 0; k < g->len[r][a] && at; k++) {
						unsigned nx = 0;
						int y = g->sym[r][a][k];
						for (int p = 0; p <= n; p++)
							if (at >> p & 1)
								nx |= y < 0                ? der[-1 - y][p]
								      : p < n && t[p] == y ? 1u << (p + 1)
											   : 0;
						at = nx;
					}
					if ((der[r][i] | at) != der[r][i])
						der[r][i] |= at, changed = true;
				}
	}
	return der[0][0] >> n & 1;
}

/* Does some rule call itself, first thing, behind a part that may match nothing (the form
 * the compiler refuses)? Edges r -> s where s follows only rules that may match nothing; a
 * cycle through an edge with something before it. */
/* the rules some output ends: ends[r] */
static void ending(const struct rgram *g, bool *ends)
{
	memset(ends, 0, sizeof *ends * MAX_RULES);
	for (bool changed = true; changed;) {
		changed = false;
		for (int r = 0; r < g->n_rules; r++)
			for (int a = 0; a < g->n_alts[r]; a++) {
				bool e = true;
				for (int k = 0; k < g->len[r][a]; k++)
					e &= g->sym[r][a][k] >= 0 || ends[-1 - g->sym[r][a][k]];
				if (e && !ends[r])
					ends[r] = changed = true;
			}
	}
}

/* g without the alternatives that never end (the compiler drops them first) */
static void drop_endless(struct rgram *g)
{
	bool ends[MAX_RULES];
	ending(g, ends);
	for (int r = 0; r < g->n_rules; r++) {
		int m = 0;
		for (int a = 0; a < g->n_alts[r]; a++) {
			bool e = true;
			for (int k = 0; k < g->len[r][a]; k++)
				e &= g->sym[r][a][k] >= 0 || ends[-1 - g->sym[r][a][k]];
			if (e) {
				g->len[r][m] = g->len[r][a];
				memcpy(g->sym[r][m++], g->sym[r][a], sizeof g->sym[r][a]);
			}
		}
		g->n_alts[r] = m;
	}
}

static bool hidden_left_recursion(const struct rgram *g0)
{
	struct rgram gc = *g0, *g = &gc;
	drop_endless(g);
	bool nullable[MAX_RULES] = {false}, edge[MAX_RULES][MAX_RULES] = {{false}},
	     hid[MAX_RULES][MAX_RULES] = {{false}};
	for (bool changed = true; changed;) {
		changed = false;
		for (int r = 0; r < g->n_rules; r++)
			for (int a = 0; a < g->n_alts[r]; a++) {
				int k = 0;
				while (k < g->len[r][a] && g->sym[r][a][k] < 0 && nullable[-1 - g->sym[r][a][k]])
					k++;
				if (k == g->len[r][a] && !nullable[r])
					nullable[r] = changed = true;
			}
	}
	for (int r = 0; r < g->n_rules; r++)
		for (int a = 0; a < g->n_alts[r]; a++)
			for (int k = 0; k < g->len[r][a] && g->sym[r][a][k] < 0; k++) {
				int s = -1 - g->sym[r][a][k];
				edge[r][s] = true;
				hid[r][s] |= k > 0;
				if (!nullable[s])
					break;
			}
	/* unit[r][s]: s is in an alternative of r whose other elements are all nullable rules
	 * (r derives s); ctx: one with other elements */
	bool unit[MAX_RULES][MAX_RULES] = {{false}}, ctx[MAX_RULES][MAX_RULES] = {{false}};
	for (int r = 0; r < g->n_rules; r++)
		for (int a = 0; a < g->n_alts[r]; a++)
			for (int k = 0; k < g->len[r][a]; k++) {
				bool others = true;
				for (int j = 0; j < g->len[r][a]; j++)
					others &= j == k || (g->sym[r][a][j] < 0 && nullable[-1 - g->sym[r][a][j]]);
				if (g->sym[r][a][k] < 0 && others) {
					unit[r][-1 - g->sym[r][a][k]] = true;
					ctx[r][-1 - g->sym[r][a][k]] |= g->len[r][a] > 1;
				}
			}
	for (int m = 0; m < g->n_rules; m++) /* edge and unit become "reaches" */
		for (int x = 0; x < g->n_rules; x++)
			for (int y = 0; y < g->n_rules; y++) {
				edge[x][y] |= edge[x][m] && edge[m][y];
				unit[x][y] |= unit[x][m] && unit[m][y];
			}
	for (int r = 0; r < g->n_rules; r++)
		for (int s = 0; s < g->n_rules; s++)
			if ((hid[r][s] && edge[s][r]) || (ctx[r][s] && unit[s][r]))
				return true;
	return false;
}

/* 1: whole, 0: a prefix, -1: refused; *cut: the matcher gave up a parse on the way */
static int verdict(const struct guide_grammar *gg, const char *t, int n, bool *cut)
{
	struct jm_state s;
	jm_init(&s, gg);
	bool ok = true;
	for (int i = 0; i < n && ok; i++)
		ok = jm_feed(&s, gg, (uint8_t)t[i]);
	*cut = s.cut;
	return !ok ? -1 : jm_complete(&s, gg) ? 1 : 0;
}

static void test_random_left_recursive(void)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	int taken = 0, refused = 0, endless = 0, left_recursive = 0, failures = 0, texts_cut = 0;
	/* every text up to MAX_TEXT bytes over {a, b}: text i is the binary digits of i + 1 after
	 * its leading 1 */
	enum { N_TEXTS = (2 << MAX_TEXT) - 1 };
	static char texts[N_TEXTS][MAX_TEXT + 1];
	static int lens[N_TEXTS];
	for (int i = 0; i < N_TEXTS; i++) {
		int v = i + 1, n = 0;
		while (v >> (n + 1))
			n++;
		for (int k = 0; k < n; k++)
			texts[i][k] = v >> (n - 1 - k) & 1 ? 'b' : 'a';
		lens[i] = n;
	}
	for (int iter = 0; iter < 3000 && failures < 5; iter++) {
		struct rgram g;
		random_grammar(&g, &seed);
		char src[1024];
		int len = to_text(&g, src, sizeof src);
		bool lr = false; /* some alternative starts with a rule (maybe its own) */
		for (int r = 0; r < g.n_rules; r++)
			for (int a = 0; a < g.n_alts[r]; a++)
				lr |= g.len[r][a] && g.sym[r][a][0] == -1 - r;
		struct guide_grammar *gg = NULL;
		struct err e = {0};
		bool ends[MAX_RULES];
		ending(&g, ends);
		bool hidden = ends[0] && hidden_left_recursion(&g);
		if (guide_from_ebnf(src, (size_t)len, &gg, &e) < 0) {
			refused++;
			endless += !ends[0];
			const char *want = !ends[0] ? "no output is whole" : "left recursion";
			if ((!(hidden || !ends[0]) || !strstr(e.msg, want)) && failures++ < 5)
				harness_fail(__FILE__, __LINE__, "refused:\n%s%s", src, e.msg);
			continue;
		}
		if ((hidden || !ends[0]) && failures++ < 5)
			harness_fail(__FILE__, __LINE__, "taken, though it %s:\n%s",
				     hidden ? "has left recursion beside parts that may match nothing" : "never ends",
				     src);
		taken++;
		left_recursive += lr;
		bool whole[N_TEXTS], prefix[N_TEXTS];
		for (int i = 0; i < N_TEXTS; i++)
			whole[i] = prefix[i] = in_language(&g, texts[i], lens[i]);
		for (int i = N_TEXTS - 1; i > 0; i--) /* text i's parent drops its last byte */
			if (prefix[i])
				prefix[(i + 1) / 2 - 1] = true;
		for (int i = 0; i < N_TEXTS; i++) {
			bool cut;
			int v = verdict(gg, texts[i], lens[i], &cut);
			texts_cut += cut;
			/* never a wrong acceptance; a refusal only where the matcher's bound cut a parse */
			if ((v == 1 && !whole[i]) || (!cut && (whole[i] != (v == 1) || (prefix[i] && v < 0))))
				if (failures++ < 5)
					harness_fail(__FILE__, __LINE__,
						     "grammar\n%son '%.*s': matcher %d (cut %d), recognizer %d (a "
						     "prefix: %d)",
						     src, lens[i], texts[i], v, cut, whole[i], prefix[i]);
		}
		guide_unref(gg);
	}
	/* the test means something: most grammars are taken, hundreds of them directly left
	 * recursive */
	EXPECTF(taken > 2500 && left_recursive > 1000 && texts_cut < taken * N_TEXTS / 20,
		"taken %d (refused %d), directly left recursive %d, texts cut %d", taken, refused, left_recursive,
		texts_cut);
	printf("# %d grammars taken (%d directly left recursive), %d refused (%d never end); %d of %d texts cut\n",
	       taken, left_recursive, refused, endless, texts_cut, taken * N_TEXTS);
}

TESTS(T(test_random_left_recursive))
