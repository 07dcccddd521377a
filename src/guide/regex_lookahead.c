/* A regex that starts with a lookahead, (?=X) or (?!X), as one DFA: the rest's automaton
 * intersected with the texts the lookahead lets through (guide/dfa_ops.h). pydantic writes
 * Decimal fields so: ^(?!^[-+.]*$)[+-]?0*\d*\.?\d*$ (a number, but not only signs and dots).
 * X ending in "$" must match the whole text (or not); otherwise some prefix of it. */
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

/* The texts the lookahead lets through, as a complete DFA over all bytes (X's states, then a
 * dead one and a matched one): with whole, those X matches (or, neg, does not); else those
 * with a prefix X matches (or none): once X matches, the rest is free. */
static struct guide_dfa *condition(const struct guide_dfa *x, bool whole, bool neg)
{
	int n = x->n_states, dead = n, hit = n + 1, total = n + 2;
	struct guide_dfa *c = calloc(1, sizeof *c);
	if (!c || !(c->next = malloc(sizeof *c->next * 256 * (size_t)total)) ||
	    !(c->accept = calloc((size_t)total, 1)) || !(c->live = malloc((size_t)total))) {
		guide_dfa_free(c);
		return NULL;
	}
	c->n_states = total;
	for (int s = 0; s < total; s++) {
		bool matched = s == hit || (!whole && s < n && x->accept[s]);
		for (int ch = 0; ch < 256; ch++) {
			int32_t t = s < n ? x->next[(size_t)s * 256 + (size_t)ch] : -1;
			c->next[(size_t)s * 256 + (size_t)ch] = matched ? hit : s == dead || t < 0 ? dead : t;
		}
		c->accept[s] = (bool)(s == hit || (s < n && x->accept[s])) != neg;
		c->live[s] = 1;
	}
	return c;
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
	struct guide_dfa *y = NULL, *x = NULL, *c = NULL;
	int rc = -1;
	if (guide_dfa_compile(re + rest, len - rest, &y, e) == 0 &&
	    guide_dfa_compile(re + x0, x1 - x0 - (whole ? 1 : 0), &x, e) == 0) {
		if (!(c = condition(x, whole, neg)))
			err_set(e, "regex: out of memory");
		else
			rc = guide_dfa_intersect(
				y, c, "regex: no text matches it (its lookahead excludes every match)", out, e);
	}
	guide_dfa_free(y);
	guide_dfa_free(x);
	guide_dfa_free(c);
	return rc;
}
