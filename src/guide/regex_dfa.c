/* Regex tree (regex_parse.c) → Thompson NFA over UTF-8 bytes → DFA by subset construction
 * (regex_dfa.h). */
#include "guide/regex_dfa.h"

#include "base/grow.h"
#include "guide/regex_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NFA 200000

/* ---- NFA: byte states (lo..hi → to) and epsilon edges ---- */

struct nst {
	int16_t lo, hi; /* -1: an epsilon-only state */
	int32_t to;
};

struct nfa {
	int n, cap;
	struct nst *st;
	int n_eps, cap_eps;
	int32_t (*eps)[2]; /* edges from → to */
	struct err *e;
};

static int nstate(struct nfa *m, int lo, int hi)
{
	if (m->n >= MAX_NFA)
		return err_set(m->e, "regex: the expression is too large (more than %d automaton states)", MAX_NFA);
	struct nst *s = grow_array(m->st, &m->cap, m->n + 1, sizeof *s);
	if (!s)
		return err_set(m->e, "regex: out of memory");
	m->st = s;
	s[m->n] = (struct nst){(int16_t)lo, (int16_t)hi, -1};
	return m->n++;
}

static int eps(struct nfa *m, int from, int to)
{
	int32_t(*p)[2] = grow_array(m->eps, &m->cap_eps, m->n_eps + 1, sizeof *m->eps);
	if (!p)
		return err_set(m->e, "regex: out of memory");
	m->eps = p;
	m->eps[m->n_eps][0] = from;
	m->eps[m->n_eps][1] = to;
	m->n_eps++;
	return 0;
}

/* the UTF-8 byte sequences of code points [lo, hi] from s to e (RE2's range splitting) */
static int utf8_range(struct nfa *m, uint32_t lo, uint32_t hi, int s, int e)
{
	static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF};
	for (int i = 0; i < 3; i++)
		if (lo <= bounds[i] && hi > bounds[i])
			return utf8_range(m, lo, bounds[i], s, e) < 0 ? -1 : utf8_range(m, bounds[i] + 1, hi, s, e);
	if (lo < 0xE000 && hi >= 0xD800) { /* surrogates are not characters */
		if (lo < 0xD800 && utf8_range(m, lo, 0xD7FF, s, e) < 0)
			return -1;
		return hi > 0xDFFF ? utf8_range(m, 0xE000, hi, s, e) : 0;
	}
	int n = hi <= 0x7F ? 1 : hi <= 0x7FF ? 2 : hi <= 0xFFFF ? 3 : 4;
	for (int i = 1; i < n; i++) {
		uint32_t mask = (1u << (6 * i)) - 1;
		if ((lo & ~mask) != (hi & ~mask)) {
			if (lo & mask)
				return utf8_range(m, lo, lo | mask, s, e) < 0
					       ? -1
					       : utf8_range(m, (lo | mask) + 1, hi, s, e);
			if ((hi & mask) != mask)
				return utf8_range(m, lo, (hi & ~mask) - 1, s, e) < 0
					       ? -1
					       : utf8_range(m, hi & ~mask, hi, s, e);
		}
	}
	uint8_t a[4], b[4];
	for (int k = 0; k < 2; k++) {
		uint32_t c = k ? hi : lo;
		uint8_t *o = k ? b : a;
		if (n == 1)
			o[0] = (uint8_t)c;
		else {
			for (int i = n - 1; i > 0; i--, c >>= 6)
				o[i] = (uint8_t)(0x80 | (c & 0x3F));
			o[0] = (uint8_t)((0xF00 >> n) | c);
		}
	}
	int prev = s;
	for (int i = 0; i < n; i++) {
		int x = nstate(m, a[i], b[i]);
		if (x < 0 || (i == 0 ? eps(m, prev, x) : (m->st[prev].to = x, 0)) < 0)
			return -1;
		prev = x;
	}
	m->st[prev].to = e;
	return 0;
}

/* fragment of tree node i: start and end states (end: epsilon-only, no edges yet) */
static int build(struct nfa *m, const struct anode *t, int i, int *s, int *e)
{
	const struct anode *x = &t[i];
	if ((*s = nstate(m, -1, -1)) < 0 || (*e = nstate(m, -1, -1)) < 0)
		return -1;
	switch (x->kind) {
	case A_EMPTY: return eps(m, *s, *e);
	case A_SET:
		for (int k = 0; k < x->set.n; k++)
			if (utf8_range(m, x->set.r[k][0], x->set.r[k][1], *s, *e) < 0)
				return -1;
		return 0;
	case A_CAT:
	case A_ALT: {
		int as, ae, bs, be;
		if (build(m, t, x->a, &as, &ae) < 0 || build(m, t, x->b, &bs, &be) < 0)
			return -1;
		if (x->kind == A_CAT)
			return eps(m, *s, as) | eps(m, ae, bs) | eps(m, be, *e);
		return eps(m, *s, as) | eps(m, *s, bs) | eps(m, ae, *e) | eps(m, be, *e);
	}
	case A_REP: {
		int cur = *s;
		for (int k = 0; k < (x->max < 0 ? x->min : x->max); k++) {
			int as, ae;
			if (build(m, t, x->a, &as, &ae) < 0 || eps(m, cur, as) < 0)
				return -1;
			if (k >= x->min && eps(m, cur, *e) < 0) /* optional copies may be skipped */
				return -1;
			cur = ae;
		}
		if (x->max < 0) { /* then any number more */
			int as, ae;
			if (build(m, t, x->a, &as, &ae) < 0 || eps(m, cur, as) < 0 || eps(m, ae, as) < 0 ||
			    eps(m, ae, *e) < 0)
				return -1;
		}
		return eps(m, cur, *e);
	}
	}
	return -1;
}

/* ---- DFA by subset construction ---- */

/* Bounds on the work of one subset construction, so that any expression a request sends
 * compiles or is refused within a fraction of a second and a few tens of MB: NFA states
 * visited by all epsilon closures, and NFA states held by all DFA states' sets. */
#define DFA_MAX_CLOSURE_WORK 10000000L
#define DFA_MAX_SET_ENTRIES 8000000

struct dfa_build {
	const struct nfa *m;
	long work;                   /* NFA states visited by the closures so far */
	int32_t *eps_first, *eps_to; /* CSR of the epsilon edges */
	int32_t *mark, stamp;
	int32_t *stack;
	/* the DFA states' NFA sets, concatenated */
	int32_t *sets, *set_off;
	int n_sets, cap_sets, len_sets, cap_len;
	int32_t *hash; /* open addressing: DFA state + 1, 0 empty */
	int hash_cap;
};

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* closes set[0, n) under epsilon moves into itself (sorted); returns the new size, or -1
 * when the construction's work bound is spent */
static int closure(struct dfa_build *b, int32_t *set, int n, struct err *e)
{
	b->stamp++;
	int sp = 0, out = 0;
	for (int i = 0; i < n; i++)
		if (b->mark[set[i]] != b->stamp) {
			b->mark[set[i]] = b->stamp;
			b->stack[sp++] = set[i];
		}
	while (sp) {
		int x = b->stack[--sp];
		set[out++] = x;
		if (++b->work > DFA_MAX_CLOSURE_WORK)
			return err_set(e,
				       "regex: the expression is too complex (its automaton takes more than %ld steps "
				       "to build)",
				       DFA_MAX_CLOSURE_WORK);
		for (int k = b->eps_first[x]; k < b->eps_first[x + 1]; k++)
			if (b->mark[b->eps_to[k]] != b->stamp) {
				b->mark[b->eps_to[k]] = b->stamp;
				b->stack[sp++] = b->eps_to[k];
			}
	}
	int keep = 0; /* only byte states and the final state matter for identity */
	for (int i = 0; i < out; i++)
		if (b->m->st[set[i]].lo >= 0 || set[i] == 1)
			set[keep++] = set[i];
	if (keep > 32) { /* large sets come from many copies of one sub-expression */
		qsort(set, (size_t)keep, sizeof *set, cmp_i32);
		return keep;
	}
	for (int i = 1; i < keep; i++) { /* insertion sort: sets are small */
		int32_t v = set[i];
		int j = i;
		while (j > 0 && set[j - 1] > v) {
			set[j] = set[j - 1];
			j--;
		}
		set[j] = v;
	}
	return keep;
}

static uint32_t set_hash(const int32_t *s, int n)
{
	uint32_t h = 2166136261u;
	for (int i = 0; i < n; i++)
		h = (h ^ (uint32_t)s[i]) * 16777619u;
	return h;
}

/* the DFA state of set[0, n): found, or added (-1: too many / out of memory) */
static int intern(struct dfa_build *b, const int32_t *set, int n, struct err *e)
{
	uint32_t h = set_hash(set, n);
	for (uint32_t i = h & (uint32_t)(b->hash_cap - 1);; i = (i + 1) & (uint32_t)(b->hash_cap - 1)) {
		int d = b->hash[i] - 1;
		if (d < 0) {
			if (b->n_sets >= GUIDE_DFA_MAX_STATES)
				return err_set(e, "regex: the automaton needs more than %d states",
					       GUIDE_DFA_MAX_STATES);
			if (b->len_sets + n > DFA_MAX_SET_ENTRIES)
				return err_set(e,
					       "regex: the expression is too complex (its automaton's states hold "
					       "more than %d positions)",
					       DFA_MAX_SET_ENTRIES);
			if (b->len_sets + n > b->cap_len) {
				int cap = 2 * (b->len_sets + n) + 64;
				int32_t *p = realloc(b->sets, sizeof *p * (size_t)cap);
				if (!p)
					return err_set(e, "regex: out of memory");
				b->sets = p;
				b->cap_len = cap;
			}
			if (b->n_sets + 2 > b->cap_sets) {
				int cap = 2 * b->cap_sets + 64;
				int32_t *p = realloc(b->set_off, sizeof *p * (size_t)cap);
				if (!p)
					return err_set(e, "regex: out of memory");
				b->set_off = p;
				b->cap_sets = cap;
			}
			if (n) /* an empty set (nothing matches) may come first, before any storage */
				memcpy(b->sets + b->len_sets, set, sizeof *set * (size_t)n);
			b->set_off[b->n_sets] = b->len_sets;
			b->len_sets += n;
			b->set_off[b->n_sets + 1] = b->len_sets;
			b->hash[i] = ++b->n_sets;
			return b->n_sets - 1;
		}
		int dn = b->set_off[d + 1] - b->set_off[d];
		if (dn == n && !memcmp(b->sets + b->set_off[d], set, sizeof *set * (size_t)n))
			return d;
	}
}

static int determinize(const struct nfa *m, struct guide_dfa *d, struct err *e)
{
	struct dfa_build b = {.m = m, .hash_cap = 65536}; /* a power of two over 3x the states */
	int rc = -1;
	b.eps_first = calloc((size_t)m->n + 1, sizeof *b.eps_first);
	b.eps_to = malloc(sizeof *b.eps_to * (size_t)(m->n_eps + 1));
	b.mark = calloc((size_t)m->n, sizeof *b.mark);
	b.stack = malloc(sizeof *b.stack * (size_t)m->n);
	b.hash = calloc((size_t)b.hash_cap, sizeof *b.hash);
	int32_t *set = malloc(sizeof *set * (size_t)m->n);
	d->next = NULL;
	if (!b.eps_first || !b.eps_to || !b.mark || !b.stack || !b.hash || !set) {
		err_set(e, "regex: out of memory");
		goto out;
	}
	for (int k = 0; k < m->n_eps; k++)
		b.eps_first[m->eps[k][0] + 1]++;
	for (int i = 0; i < m->n; i++)
		b.eps_first[i + 1] += b.eps_first[i];
	for (int k = 0, *fill = (int *)b.mark; k < m->n_eps; k++) /* mark doubles as the fill count */
		b.eps_to[b.eps_first[m->eps[k][0]] + fill[m->eps[k][0]]++] = m->eps[k][1];
	memset(b.mark, 0, sizeof *b.mark * (size_t)m->n);
	/* byte classes: bytes no state tells apart share a representative */
	uint8_t cls_start[257] = {0};
	cls_start[0] = cls_start[256] = 1;
	for (int i = 0; i < m->n; i++)
		if (m->st[i].lo >= 0) {
			cls_start[m->st[i].lo] = 1;
			cls_start[m->st[i].hi + 1] = 1;
		}
	set[0] = 0; /* the start state */
	int n = closure(&b, set, 1, e);
	if (n < 0 || intern(&b, set, n, e) < 0)
		goto out;
	int cap_states = 64;
	d->next = malloc(sizeof *d->next * 256 * (size_t)cap_states);
	if (!d->next) {
		err_set(e, "regex: out of memory");
		goto out;
	}
	for (int s = 0; s < b.n_sets; s++) {
		if (s >= cap_states) {
			cap_states *= 2;
			int32_t *p = realloc(d->next, sizeof *p * 256 * (size_t)cap_states);
			if (!p) {
				err_set(e, "regex: out of memory");
				goto out;
			}
			d->next = p;
		}
		for (int c0 = 0; c0 < 256;) {
			int c1 = c0 + 1;
			while (c1 < 256 && !cls_start[c1])
				c1++;
			int k = 0;
			for (int j = b.set_off[s]; j < b.set_off[s + 1]; j++) {
				int x = b.sets[j];
				if (m->st[x].lo >= 0 && m->st[x].lo <= c0 && c0 <= m->st[x].hi)
					set[k++] = m->st[x].to;
			}
			int t = -1;
			if (k) {
				if ((k = closure(&b, set, k, e)) < 0 || (t = intern(&b, set, k, e)) < 0)
					goto out;
			}
			for (int c = c0; c < c1; c++)
				d->next[(size_t)s * 256 + (size_t)c] = t;
			c0 = c1;
		}
	}
	d->n_states = b.n_sets;
	size_t ns = b.n_sets > 0 ? (size_t)b.n_sets : 1;
	d->accept = calloc(ns, 1);
	d->live = calloc(ns, 1);
	if (!d->accept || !d->live) {
		err_set(e, "regex: out of memory");
		goto out;
	}
	for (int s = 0; s < b.n_sets; s++) {
		for (int j = b.set_off[s]; j < b.set_off[s + 1]; j++)
			d->accept[s] |= b.sets[j] == 1; /* state 1: the whole expression's end */
		for (int c = 0; c < 256 && !d->live[s]; c++)
			d->live[s] = d->next[(size_t)s * 256 + (size_t)c] >= 0;
	}
	rc = 0;
out:
	free(b.eps_first);
	free(b.eps_to);
	free(b.mark);
	free(b.stack);
	free(b.hash);
	free(b.sets);
	free(b.set_off);
	free(set);
	return rc;
}

int guide_dfa_compile(const char *re, size_t len, struct guide_dfa **out, struct err *e)
{
	*out = NULL;
	if (len > GUIDE_REGEX_MAX_LEN)
		return err_set(e, "regex: longer than %d bytes", GUIDE_REGEX_MAX_LEN);
	int la = regex_lookahead_compile(re, len, out, e);
	if (la <= 0)
		return la;
	struct anode *tree = NULL;
	int n_nodes = 0, root = regex_parse(re, len, &tree, &n_nodes, e);
	struct nfa m = {.e = e};
	struct guide_dfa *d = calloc(1, sizeof *d);
	int rc = -1, s, f;
	if (root >= 0 && d) {
		/* states 0 and 1: the start and the final state */
		if (nstate(&m, -1, -1) == 0 && nstate(&m, -1, -1) == 1 && build(&m, tree, root, &s, &f) == 0 &&
		    eps(&m, 0, s) == 0 && eps(&m, f, 1) == 0)
			rc = determinize(&m, d, e);
	} else if (!d) {
		err_set(e, "regex: out of memory");
	}
	regex_nodes_free(tree, n_nodes);
	free(m.st);
	free(m.eps);
	if (rc < 0) {
		guide_dfa_free(d);
		return -1;
	}
	*out = d;
	return 0;
}

void guide_dfa_free(struct guide_dfa *d)
{
	if (!d)
		return;
	free(d->next);
	free(d->accept);
	free(d->live);
	free(d);
}

int guide_dfa_literals(const char *const *lits, const size_t *lens, int n, struct guide_dfa **out, struct err *e)
{
	*out = NULL;
	size_t states = 1;
	for (int i = 0; i < n; i++)
		states += lens[i];
	if (states > GUIDE_DFA_MAX_STATES)
		states = GUIDE_DFA_MAX_STATES; /* the trie may share prefixes: checked as it grows */
	struct guide_dfa *d = calloc(1, sizeof *d);
	if (d) {
		d->next = malloc(sizeof *d->next * 256 * states);
		d->accept = calloc(states, 1);
		d->live = calloc(states, 1);
	}
	if (!d || !d->next || !d->accept || !d->live) {
		guide_dfa_free(d);
		return err_set(e, "out of memory");
	}
	memset(d->next, 0xff, sizeof *d->next * 256); /* -1 */
	d->n_states = 1;
	for (int i = 0; i < n; i++) {
		int s = 0;
		for (size_t k = 0; k < lens[i]; k++) {
			int32_t *t = &d->next[(size_t)s * 256 + (unsigned char)lits[i][k]];
			if (*t < 0) {
				if ((size_t)d->n_states >= states) {
					guide_dfa_free(d);
					return err_set(e, "the choices need more than %d automaton states",
						       GUIDE_DFA_MAX_STATES);
				}
				memset(d->next + (size_t)d->n_states * 256, 0xff, sizeof *d->next * 256);
				*t = d->n_states++;
				d->live[s] = 1;
			}
			s = *t;
		}
		d->accept[s] = 1;
	}
	*out = d;
	return 0;
}
