/* Regex text → tree (guide/regex_internal.h), with the syntax of guide/regex_dfa.h. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "guide/regex_internal.h"

#define MAX_REPEAT 1000

/* ---- sets of code points: sorted, disjoint ranges ---- */

static int cset_add(struct cset *s, uint32_t lo, uint32_t hi)
{
	uint32_t(*r)[2] = grow_array(s->r, &s->cap, s->n + 1, sizeof *s->r);
	if (!r)
		return -1;
	s->r = r;
	s->r[s->n][0] = lo;
	s->r[s->n][1] = hi;
	s->n++;
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void cset_normalize(struct cset *s)
{
	if (!s->n)
		return;
	qsort(s->r, (size_t)s->n, sizeof *s->r, cmp_range);
	int m = 0;
	for (int i = 1; i < s->n; i++) {
		if (s->r[i][0] <= s->r[m][1] + 1) {
			if (s->r[i][1] > s->r[m][1])
				s->r[m][1] = s->r[i][1];
		} else {
			s->r[++m][0] = s->r[i][0];
			s->r[m][1] = s->r[i][1];
		}
	}
	s->n = m + 1;
}

/* the complement within the Unicode scalar values (surrogates are not characters) */
static int cset_negate(struct cset *s)
{
	cset_normalize(s);
	struct cset t = {0};
	uint32_t next = 0;
	for (int i = 0; i < s->n; i++) {
		if (s->r[i][0] > next && cset_add(&t, next, s->r[i][0] - 1) < 0)
			return -1;
		next = s->r[i][1] + 1;
	}
	if (next <= REGEX_MAX_CP && cset_add(&t, next, REGEX_MAX_CP) < 0)
		return -1;
	free(s->r);
	*s = t;
	return 0;
}

/* ---- the expression's tree ---- */

struct parser {
	const char *p, *end, *start;
	struct anode *n;
	int n_nodes, cap;
	struct err *e;
	bool failed;
};

static int fail(struct parser *ps, const char *fmt, const char *what)
{
	if (!ps->failed)
		err_set(ps->e, fmt, what, (int)(ps->p - ps->start));
	ps->failed = true;
	return -1;
}

static int node(struct parser *ps, int kind, int a, int b)
{
	struct anode *n = grow_array(ps->n, &ps->cap, ps->n_nodes + 1, sizeof *n);
	if (!n)
		return fail(ps, "regex: out of memory%s (at %d)", "");
	ps->n = n;
	struct anode *x = &ps->n[ps->n_nodes];
	memset(x, 0, sizeof *x);
	x->kind = kind;
	x->a = a;
	x->b = b;
	return ps->n_nodes++;
}

static int set_node(struct parser *ps, struct cset s)
{
	int i = node(ps, A_SET, 0, 0);
	if (i < 0) {
		free(s.r);
		return -1;
	}
	ps->n[i].set = s;
	return i;
}

/* one UTF-8 character of the pattern */
static int32_t utf8_char(struct parser *ps)
{
	const unsigned char *u = (const unsigned char *)ps->p;
	size_t left = (size_t)(ps->end - ps->p);
	int n = u[0] < 0x80 ? 1 : u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC0 ? 2 : 0;
	if (!n || (size_t)n > left)
		return fail(ps, "regex: invalid UTF-8%s at byte %d", "");
	uint32_t c = n == 1 ? u[0] : (uint32_t)(u[0] & (0x7F >> n));
	for (int i = 1; i < n; i++)
		c = c << 6 | (u[i] & 0x3F);
	ps->p += n;
	return (int32_t)c;
}

static int hex(struct parser *ps, int digits)
{
	int v = 0;
	for (int i = 0; i < digits; i++, ps->p++) {
		char c = ps->p < ps->end ? *ps->p : 0;
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return fail(ps, "regex: bad hex escape%s at byte %d", "");
		v = v * 16 + d;
	}
	return v;
}

/* an escape after the backslash: into s (a class), or *cp for a single character */
static int escape(struct parser *ps, struct cset *s)
{
	if (ps->p >= ps->end)
		return fail(ps, "regex: a trailing backslash%s at byte %d", "");
	char c = *ps->p++;
	static const char *const single = "ntrfv0";
	static const char values[] = {'\n', '\t', '\r', '\f', '\v', 0};
	const char *k = strchr(single, c);
	if (k && c)
		return cset_add(s, (uint32_t)(unsigned char)values[k - single],
				(uint32_t)(unsigned char)values[k - single]);
	switch (c) {
	case 'd':
	case 'D':
	case 'w':
	case 'W':
	case 's':
	case 'S': {
		struct cset t = {0};
		int rc = 0;
		if (c == 'd' || c == 'D')
			rc = cset_add(&t, '0', '9');
		else if (c == 'w' || c == 'W')
			rc = cset_add(&t, '0', '9') | cset_add(&t, 'A', 'Z') | cset_add(&t, 'a', 'z') |
			     cset_add(&t, '_', '_');
		else
			rc = cset_add(&t, ' ', ' ') | cset_add(&t, '\t', '\r');
		if (c >= 'A' && c <= 'Z')
			rc |= cset_negate(&t);
		for (int i = 0; !rc && i < t.n; i++)
			rc = cset_add(s, t.r[i][0], t.r[i][1]);
		free(t.r);
		return rc;
	}
	case 'x':
	case 'u': {
		int v = hex(ps, c == 'x' ? 2 : 4);
		return v < 0 ? -1 : cset_add(s, (uint32_t)v, (uint32_t)v);
	}
	}
	if ((c >= '0' && c <= '9') || c == 'b' || c == 'B' || c == 'A' || c == 'Z' || c == 'z' || c == 'G' ||
	    c == 'k' || c == 'p' || c == 'P') {
		ps->p--;
		return fail(ps,
			    "regex: escape \\%.1s (backreference, anchor or property) is not supported, at byte %d",
			    ps->p);
	}
	if ((unsigned char)c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
		ps->p--;
		return fail(ps, "regex: unknown escape \\%.1s at byte %d", ps->p);
	}
	return cset_add(s, (uint32_t)(unsigned char)c, (uint32_t)(unsigned char)c);
}

/* [...] after the '[' */
static int parse_class(struct parser *ps)
{
	struct cset s = {0};
	bool neg = ps->p < ps->end && *ps->p == '^';
	ps->p += neg;
	bool first = true;
	while (ps->p < ps->end && (*ps->p != ']' || first)) {
		first = false;
		int32_t lo;
		if (*ps->p == '\\') {
			ps->p++;
			struct cset t = {0};
			if (escape(ps, &t) < 0) {
				free(t.r);
				free(s.r);
				return -1;
			}
			if (t.n != 1 || t.r[0][0] != t.r[0][1]) { /* \d and the like: no range from them */
				for (int i = 0; i < t.n; i++)
					cset_add(&s, t.r[i][0], t.r[i][1]);
				free(t.r);
				continue;
			}
			lo = (int32_t)t.r[0][0];
			free(t.r);
		} else if ((lo = utf8_char(ps)) < 0) {
			free(s.r);
			return -1;
		}
		int32_t hi = lo;
		if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
			ps->p++;
			if (*ps->p == '\\') {
				ps->p++;
				struct cset t = {0};
				if (escape(ps, &t) < 0 || t.n != 1 || t.r[0][0] != t.r[0][1]) {
					free(t.r);
					free(s.r);
					return fail(ps, "regex: bad class range%s at byte %d", "");
				}
				hi = (int32_t)t.r[0][0];
				free(t.r);
			} else if ((hi = utf8_char(ps)) < 0) {
				free(s.r);
				return -1;
			}
			if (hi < lo) {
				free(s.r);
				return fail(ps, "regex: class range out of order%s at byte %d", "");
			}
		}
		if (cset_add(&s, (uint32_t)lo, (uint32_t)hi) < 0) {
			free(s.r);
			return fail(ps, "regex: out of memory%s at byte %d", "");
		}
	}
	if (ps->p >= ps->end) {
		free(s.r);
		return fail(ps, "regex: unterminated [%s at byte %d", "");
	}
	ps->p++;
	if (neg && cset_negate(&s) < 0) {
		free(s.r);
		return fail(ps, "regex: out of memory%s at byte %d", "");
	}
	cset_normalize(&s);
	return set_node(ps, s);
}

static int parse_alt(struct parser *ps);

static int parse_atom(struct parser *ps)
{
	char c = *ps->p;
	struct cset s = {0};
	if (c == '(') {
		ps->p++;
		if (ps->p < ps->end && *ps->p == '?') {
			if (ps->end - ps->p >= 2 && ps->p[1] == ':')
				ps->p += 2;
			else if (ps->end - ps->p >= 3 && (ps->p[1] == '<' || (ps->p[1] == 'P' && ps->p[2] == '<')) &&
				 ps->p[ps->p[1] == 'P' ? 3 : 2] != '=' && ps->p[ps->p[1] == 'P' ? 3 : 2] != '!') {
				const char *gt = memchr(ps->p, '>', (size_t)(ps->end - ps->p));
				if (!gt)
					return fail(ps, "regex: unterminated group name%s at byte %d", "");
				ps->p = gt + 1;
			} else {
				return fail(ps,
					    "regex: (?%s... (lookaround, flags, conditionals) is not supported, "
					    "at byte %d",
					    "");
			}
		}
		int g = parse_alt(ps);
		if (g < 0)
			return -1;
		if (ps->p >= ps->end || *ps->p != ')')
			return fail(ps, "regex: missing )%s at byte %d", "");
		ps->p++;
		return g;
	}
	if (c == '[') {
		ps->p++;
		return parse_class(ps);
	}
	if (c == '.') {
		ps->p++;
		if (cset_add(&s, 0, '\n' - 1) < 0 || cset_add(&s, '\n' + 1, REGEX_MAX_CP) < 0) {
			free(s.r);
			return fail(ps, "regex: out of memory%s at byte %d", "");
		}
		return set_node(ps, s);
	}
	if (c == '\\') {
		ps->p++;
		if (escape(ps, &s) < 0) {
			free(s.r);
			return -1;
		}
		cset_normalize(&s);
		return set_node(ps, s);
	}
	if (c == '^' && ps->p == ps->start) { /* fullmatch anyway */
		ps->p++;
		return node(ps, A_EMPTY, 0, 0);
	}
	if (c == '$' && ps->p + 1 == ps->end) {
		ps->p++;
		return node(ps, A_EMPTY, 0, 0);
	}
	if (c == '^' || c == '$')
		return fail(ps, "regex: anchor %.1s inside the expression is not supported, at byte %d", ps->p);
	if (c == '*' || c == '+' || c == '?')
		return fail(ps, "regex: nothing to repeat before %.1s at byte %d", ps->p);
	int32_t cp = utf8_char(ps);
	if (cp < 0 || cset_add(&s, (uint32_t)cp, (uint32_t)cp) < 0) {
		free(s.r);
		return fail(ps, "regex: out of memory%s at byte %d", "");
	}
	return set_node(ps, s);
}

/* {m}, {m,}, {m,n}: 1 and the counts, 0 when this is not a quantifier ('{' is then literal) */
static int counts(struct parser *ps, int *min, int *max)
{
	const char *p = ps->p + 1;
	long a = 0, b;
	if (p >= ps->end || ((*p < '0' || *p > '9') && *p != ',') ||
	    (*p == ',' && (p + 1 >= ps->end || p[1] < '0' || p[1] > '9')))
		return 0; /* {,n} is {0,n}, as in Python; "{" "{," "{,}" are literal text */
	for (; p < ps->end && *p >= '0' && *p <= '9'; p++)
		if ((a = a * 10 + (*p - '0')) > MAX_REPEAT)
			a = MAX_REPEAT + 1; /* refused by the caller */
	b = a;
	if (p < ps->end && *p == ',') {
		p++;
		b = -1;
		if (p < ps->end && *p >= '0' && *p <= '9')
			for (b = 0; p < ps->end && *p >= '0' && *p <= '9'; p++)
				if ((b = b * 10 + (*p - '0')) > MAX_REPEAT)
					b = MAX_REPEAT + 1;
	}
	if (p >= ps->end || *p != '}')
		return 0;
	ps->p = p + 1;
	*min = (int)a;
	*max = (int)b;
	return 1;
}

static int parse_rep(struct parser *ps)
{
	int t = parse_atom(ps);
	while (t >= 0 && ps->p < ps->end) {
		char c = *ps->p;
		int min, max;
		if (c == '*' || c == '+' || c == '?') {
			ps->p++;
			min = c == '+';
			max = c == '?' ? 1 : -1;
		} else if (c != '{' || !counts(ps, &min, &max)) {
			break;
		}
		if (min > MAX_REPEAT || max > MAX_REPEAT || (max >= 0 && max < min))
			return fail(ps, "regex: bad repeat count (at most %s) at byte %d", "1000, and min <= max");
		if (ps->p < ps->end && (*ps->p == '?' || *ps->p == '+')) /* lazy / possessive: same texts */
			ps->p++;
		/* another quantifier right after is Python's "multiple repeat" error (and stacked
		 * repeats would each double the automaton) */
		int min2, max2;
		if (ps->p < ps->end &&
		    (*ps->p == '*' || *ps->p == '+' || *ps->p == '?' ||
		     (*ps->p == '{' && counts(&(struct parser){.p = ps->p, .end = ps->end}, &min2, &max2))))
			return fail(ps, "regex: multiple repeat%s at byte %d", "");
		int r = node(ps, A_REP, t, 0);
		if (r < 0)
			return -1;
		ps->n[r].min = min;
		ps->n[r].max = max;
		t = r;
	}
	return t;
}

static int parse_cat(struct parser *ps)
{
	int t = node(ps, A_EMPTY, 0, 0);
	while (t >= 0 && ps->p < ps->end && *ps->p != '|' && *ps->p != ')') {
		int r = parse_rep(ps);
		if (r < 0)
			return -1;
		t = node(ps, A_CAT, t, r);
	}
	return t;
}

static int parse_alt(struct parser *ps)
{
	int t = parse_cat(ps);
	while (t >= 0 && ps->p < ps->end && *ps->p == '|') {
		ps->p++;
		int r = parse_cat(ps);
		if (r < 0)
			return -1;
		t = node(ps, A_ALT, t, r);
	}
	return t;
}

int regex_parse(const char *re, size_t len, struct anode **nodes, int *n_nodes, struct err *e)
{
	struct parser ps = {.p = re, .end = re + len, .start = re, .e = e};
	int root = parse_alt(&ps);
	if (root >= 0 && ps.p < ps.end) /* a ')' without its '(' */
		root = fail(&ps, "regex: unbalanced )%s at byte %d", "");
	*nodes = ps.n;
	*n_nodes = ps.n_nodes;
	return root;
}

void regex_nodes_free(struct anode *nodes, int n_nodes)
{
	for (int i = 0; i < n_nodes; i++)
		free(nodes[i].set.r);
	free(nodes);
}
