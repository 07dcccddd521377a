/* A regex that starts with a lookahead, (?=X) or (?!X), as one DFA: the product of the rest's
 * automaton and X's, which follows X along the same bytes. pydantic writes Decimal fields so:
 * ^(?!^[-+.]*$)[+-]?0*\d*\.?\d*$ (a number, but not only signs and dots). X ending in "$"
 * must match the whole text (or not); otherwise some prefix of it. */
#include "guide/regex_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "guide/dfa_ops.h"
#include "guide/regex_dfa.h"

/* Where the leading lookahead's text lies: re[*x0, *x1) inside "(?=" / "(?!" ... ")", the rest
 * from *rest. false when the regex does not start with one (after an optional "^"). */
static bool split(const char *re, size_t len, size_t *x0, size_t *x1, size_t *rest, bool *neg)
{
	size_t i = len && re[0] == '^' ? 1 : 0;
	if (len - i < 3 || re[i] != '(' || re[i + 1] != '?' || (re[i + 2] != '=' && re[i + 2] != '!'))
		return false;
	*neg = re[i + 2] == '!';
	int depth = 0;
	bool in_class = false;
	for (size_t j = i + 3; j < len; j++) {
		char c = re[j];
		if (c == '\\') {
			j++;
		} else if (in_class) {
			in_class = c != ']';
		} else if (c == '[') {
			in_class = true;
			if (j + 1 < len && re[j + 1] == '^')
				j++;
			if (j + 1 < len && re[j + 1] == ']') /* a leading ] is literal */
				j++;
		} else if (c == '(') {
			depth++;
		} else if (c == ')' && depth-- == 0) {
			*x0 = i + 3;
			*x1 = j;
			*rest = j + 1;
			return true;
		}
	}
	return false;
}

struct product {
	const struct guide_dfa *y, *x;
	bool neg, whole;
	struct guide_dfa *d;
	int cap;
	int64_t *keys; /* hash of (y, x, seen) → state + 1 in vals */
	int32_t *vals;
	size_t hcap;
	struct err *e;
};

/* The state of (y, x, seen): x -1 when X can no longer match; seen: X matched a prefix.
 * Returns its number (a new one is appended), or -1 out of memory or past the bound. */
static int32_t intern(struct product *p, int32_t y, int32_t x, int seen)
{
	int64_t key = ((int64_t)y * (p->x->n_states + 1) + (x + 1)) * 2 + seen;
	size_t h = (size_t)((uint64_t)key * 0x9e3779b97f4a7c15ull) & (p->hcap - 1);
	for (; p->vals[h]; h = (h + 1) & (p->hcap - 1))
		if (p->keys[h] == key)
			return p->vals[h] - 1;
	struct guide_dfa *d = p->d;
	if (d->n_states >= GUIDE_DFA_MAX_STATES || (size_t)d->n_states * 2 >= p->hcap) {
		err_set(p->e, "regex: the lookahead makes the automaton too large (more than %d states)",
			GUIDE_DFA_MAX_STATES);
		return -1;
	}
	if (d->n_states == p->cap) {
		int cap = p->cap * 2;
		int32_t *n = realloc(d->next, sizeof *n * 256 * (size_t)cap);
		uint8_t *a = n ? realloc(d->accept, (size_t)cap) : NULL;
		uint8_t *l = a ? realloc(d->live, (size_t)cap) : NULL;
		d->next = n ? n : d->next;
		d->accept = a ? a : d->accept;
		d->live = l ? l : d->live;
		if (!l) {
			err_set(p->e, "regex: out of memory");
			return -1;
		}
		p->cap = cap;
	}
	int32_t s = d->n_states++;
	bool x_whole = x >= 0 && p->x->accept[x];
	bool holds = p->whole ? x_whole != p->neg : (bool)seen != p->neg;
	d->accept[s] = p->y->accept[y] && holds;
	p->keys[h] = key;
	p->vals[h] = s + 1;
	/* y, x and seen of state s, kept in its own next row until it is filled */
	d->next[(size_t)s * 256] = y;
	d->next[(size_t)s * 256 + 1] = x;
	d->next[(size_t)s * 256 + 2] = seen;
	return s;
}

static int product(const struct guide_dfa *y, const struct guide_dfa *x, bool neg, bool whole, struct guide_dfa **out,
		   struct err *e)
{
	struct product p = {.y = y, .x = x, .neg = neg, .whole = whole, .cap = 64, .hcap = 1, .e = e};
	while (p.hcap < 4 * (size_t)GUIDE_DFA_MAX_STATES)
		p.hcap *= 2;
	p.keys = malloc(sizeof *p.keys * p.hcap);
	p.vals = calloc(p.hcap, sizeof *p.vals);
	struct guide_dfa *d = p.d = calloc(1, sizeof *d);
	int rc = -1;
	if (!p.keys || !p.vals || !d || !(d->next = malloc(sizeof *d->next * 256 * 64)) || !(d->accept = malloc(64)) ||
	    !(d->live = malloc(64))) {
		err_set(e, "regex: out of memory");
		goto out;
	}
	/* a prefix match of X counts from the empty prefix on */
	if (intern(&p, 0, 0, !whole && x->accept[0]) < 0)
		goto out;
	for (int s = 0; s < d->n_states; s++) { /* the table grows as new states are met */
		int32_t ys = d->next[(size_t)s * 256], xs = d->next[(size_t)s * 256 + 1];
		int seen = d->next[(size_t)s * 256 + 2];
		int32_t row[256];
		for (int c = 0; c < 256; c++) {
			int32_t y2 = y->next[(size_t)ys * 256 + (size_t)c];
			int32_t x2 = xs >= 0 ? x->next[(size_t)xs * 256 + (size_t)c] : -1;
			row[c] = y2 < 0 ? -1 : intern(&p, y2, x2, seen || (!whole && x2 >= 0 && x->accept[x2]));
			if (y2 >= 0 && row[c] < 0)
				goto out;
		}
		memcpy(d->next + (size_t)s * 256, row, sizeof row);
	}
	rc = guide_dfa_trim(d, "regex: no text matches it (its lookahead excludes every match)", e);
out:
	free(p.keys);
	free(p.vals);
	if (rc < 0) {
		guide_dfa_free(d);
		return -1;
	}
	*out = d;
	return 0;
}

int regex_lookahead_compile(const char *re, size_t len, struct guide_dfa **out, struct err *e)
{
	size_t x0, x1, rest;
	bool neg;
	*out = NULL;
	if (!split(re, len, &x0, &x1, &rest, &neg))
		return 1;
	/* X: a leading ^ means nothing here, a trailing (unescaped) $ asks for the whole text */
	if (x1 > x0 && re[x0] == '^')
		x0++;
	size_t bs = 0;
	while (x1 - bs > x0 + 1 && re[x1 - 2 - bs] == '\\')
		bs++;
	bool whole = x1 > x0 && re[x1 - 1] == '$' && bs % 2 == 0;
	struct guide_dfa *y = NULL, *x = NULL;
	int rc = -1;
	if (guide_dfa_compile(re + rest, len - rest, &y, e) == 0 &&
	    guide_dfa_compile(re + x0, x1 - x0 - (whole ? 1 : 0), &x, e) == 0)
		rc = product(y, x, neg, whole, out, e);
	guide_dfa_free(y);
	guide_dfa_free(x);
	return rc;
}
