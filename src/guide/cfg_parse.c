/* The GBNF / xgrammar EBNF text parser of guide/cfg.c: rules, sequences, groups,
 * repetitions, strings and character classes, handed to the builder (cfg_build.h). */
#include "guide/cfg_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

/* one code point as regex text, literal wherever it stands (in a class too) */
static int put_regex_char(char *o, uint32_t cp)
{
	if (cp < 0x20 || cp == 0x7F)
		return snprintf(o, 8, "\\x%02X", cp);
	if (cp < 0x80 &&
	    !((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == ' ')) {
		o[0] = '\\';
		o[1] = (char)cp;
		return 2;
	}
	return utf8_encode(cp, o);
}

static int hexval(char ch)
{
	return ch >= '0' && ch <= '9'   ? ch - '0'
	       : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
	       : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
					: -1;
}

/* one character of a string or class at b->p (escapes decoded) into *cp */
static int read_char(struct builder *b, uint32_t *cp)
{
	const char *at = b->p;
	uint8_t ch = (uint8_t)*b->p;
	if (ch == '\\') {
		if (++b->p >= b->end)
			return cfgb_fail_at(b, at, "a backslash ends the grammar", NULL);
		char x = *b->p++;
		int digits = x == 'x' ? 2 : x == 'u' ? 4 : x == 'U' ? 8 : 0;
		if (digits) {
			uint32_t v = 0;
			for (int i = 0; i < digits; i++, b->p++) {
				int h = b->p < b->end ? hexval(*b->p) : -1;
				if (h < 0)
					return cfgb_fail_at(b, at, "bad \\x / \\u / \\U escape", NULL);
				v = v << 4 | (uint32_t)h;
			}
			if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
				return cfgb_fail_at(b, at, "the escape is not a Unicode character", NULL);
			*cp = v;
			return 0;
		}
		switch (x) {
		case 'n': *cp = '\n'; return 0;
		case 'r': *cp = '\r'; return 0;
		case 't': *cp = '\t'; return 0;
		case '\\':
		case '"':
		case '\'':
		case '[':
		case ']':
		case '-':
		case '^': *cp = (uint8_t)x; return 0;
		}
		return cfgb_fail_at(b, at, "unknown escape \\", (char[]){x, 0});
	}
	/* a UTF-8 sequence */
	uint32_t v;
	size_t n = utf8_decode((const unsigned char *)b->p, (size_t)(b->end - b->p), &v);
	if (!n)
		return cfgb_fail_at(b, at, "invalid UTF-8", NULL);
	b->p += n;
	*cp = v;
	return 0;
}

/* "..." at b->p → a terminal id, or -2 for the empty string (nothing to match) */
static int parse_string(struct builder *b)
{
	const char *at = b->p++;
	char *lit = NULL;
	size_t n = 0, cap = 0;
	while (b->p < b->end && *b->p != '"') {
		uint32_t cp;
		if (read_char(b, &cp) < 0)
			goto fail;
		if (n + 4 > cap) {
			cap = 2 * cap + 64;
			char *r = realloc(lit, cap);
			if (!r) {
				cfgb_oom(b);
				goto fail;
			}
			lit = r;
		}
		n += (size_t)utf8_encode(cp, lit + n);
	}
	if (b->p >= b->end) {
		cfgb_fail_at(b, at, "unterminated string", NULL);
		goto fail;
	}
	b->p++;
	if (!n) {
		free(lit);
		return -2;
	}
	return cfgb_add_lit(b, lit, n);
fail:
	free(lit);
	return -1;
}

/* [...] at b->p → a terminal id */
static int parse_class(struct builder *b)
{
	const char *at = b->p++;
	char *re = NULL;
	size_t n = 0, cap = 0;
	int rc = -1, items = 0;
	if (!(re = malloc(cap = 64)))
		return cfgb_oom(b);
	re[n++] = '[';
	if (b->p < b->end && *b->p == '^')
		re[n++] = '^', b->p++;
	while (b->p < b->end && *b->p != ']') {
		uint32_t lo, hi;
		if (read_char(b, &lo) < 0)
			goto out;
		hi = lo;
		if (b->p + 1 < b->end && *b->p == '-' && b->p[1] != ']') {
			b->p++;
			if (read_char(b, &hi) < 0)
				goto out;
			if (hi < lo) {
				cfgb_fail_at(b, at, "character range out of order", NULL);
				goto out;
			}
		}
		if (n + 32 > cap) {
			char *r = realloc(re, cap = 2 * cap);
			if (!r) {
				cfgb_oom(b);
				goto out;
			}
			re = r;
		}
		n += (size_t)put_regex_char(re + n, lo);
		if (hi != lo) {
			re[n++] = '-';
			n += (size_t)put_regex_char(re + n, hi);
		}
		items++;
	}
	if (b->p >= b->end) {
		cfgb_fail_at(b, at, "unterminated character class", NULL);
		goto out;
	}
	b->p++;
	if (!items) {
		cfgb_fail_at(b, at, "empty character class", NULL);
		goto out;
	}
	re[n++] = ']';
	rc = cfgb_add_class(b, re, n, at);
out:
	free(re);
	return rc;
}

/* /regex/ at b->p (CFG_REGEX_TERMS) → a terminal id: the regex's DFA, which must not match
 * the empty string (a terminal consumes bytes) */
static int parse_regex(struct builder *b)
{
	const char *at = b->p++;
	const char *q = b->p;
	while (q < b->end && *q != '/')
		q += *q == '\\' && q + 1 < b->end ? 2 : 1;
	if (q >= b->end || q == b->p)
		return cfgb_fail_at(b, at, "unterminated or empty regex /.../", NULL);
	int t = cfgb_add_class(b, b->p, (size_t)(q - b->p), at);
	b->p = q + 1;
	if (t >= 0 && b->c->terms[t].dfa->accept[0])
		return cfgb_fail_at(b, at, "a regex terminal must not match the empty string", NULL);
	return t;
}

/* ---- the syntax ---- */

static bool name_char(char ch, bool first)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
	       (!first && ((ch >= '0' && ch <= '9') || ch == '-' || ch == '.'));
}

static void skip_space(struct builder *b)
{
	while (b->p < b->end) {
		if (*b->p == ' ' || *b->p == '\t' || *b->p == '\n' || *b->p == '\r')
			b->p++;
		else if (*b->p == '#')
			while (b->p < b->end && *b->p != '\n')
				b->p++;
		else
			break;
	}
}

/* a name at b->p; its length (0: none) */
static size_t name_len(const struct builder *b, const char *p)
{
	size_t n = 0;
	while (p + n < b->end && name_char(p[n], n == 0))
		n++;
	return n;
}

/* "name ::=" at p (a new rule begins) */
static bool rule_head(const struct builder *b, const char *p)
{
	size_t n = name_len(b, p);
	if (!n)
		return false;
	p += n;
	while (p < b->end && (*p == ' ' || *p == '\t'))
		p++;
	return b->end - p >= 3 && !memcmp(p, "::=", 3);
}

static int parse_alternates(struct builder *b, int rule);

/* x{m,n} and friends: appends what the element el repeats to into s */
static int add_repeat(struct builder *b, struct seqbuf *s, struct cfg_elem el, int min, int max)
{
	for (int i = 0; i < min; i++)
		if (cfgb_seq_add(b, s, el.kind, el.id) < 0)
			return -1;
	if (max == min)
		return 0;
	struct seqbuf t = {0};
	int r;
	if (max < 0) { /* R ::= el R | "" */
		if ((r = cfgb_new_rule(b, NULL, 0)) < 0 || cfgb_seq_add(b, &t, el.kind, el.id) < 0 ||
		    cfgb_seq_add(b, &t, CFG_REF, r) < 0 || cfgb_add_alt(b, r, &t) < 0)
			goto fail;
		t.n = 0;
		if (cfgb_add_alt(b, r, &t) < 0)
			goto fail;
	} else { /* O_k ::= el O_(k-1) | "", O_1 ::= el | "" */
		r = -1;
		for (int k = 1; k <= max - min; k++) {
			int o = cfgb_new_rule(b, NULL, 0);
			t.n = 0;
			if (o < 0 || cfgb_seq_add(b, &t, el.kind, el.id) < 0 ||
			    (r >= 0 && cfgb_seq_add(b, &t, CFG_REF, r) < 0) || cfgb_add_alt(b, o, &t) < 0)
				goto fail;
			t.n = 0;
			if (cfgb_add_alt(b, o, &t) < 0)
				goto fail;
			r = o;
		}
	}
	free(t.v);
	return cfgb_seq_add(b, s, CFG_REF, r);
fail:
	free(t.v);
	return -1;
}

/* {m}, {m,}, {m,n} or {,n} at b->p (a '{'): the counts, or -1 */
static int read_counts(struct builder *b, int *min, int *max)
{
	const char *p = b->p + 1;
	long v[2] = {0, -1};
	bool comma = false, digits = false;
	for (int k = 0; k < 2; k++) {
		while (p < b->end && *p == ' ')
			p++;
		if (p < b->end && *p >= '0' && *p <= '9') {
			digits = true;
			for (v[k] = 0; p < b->end && *p >= '0' && *p <= '9'; p++)
				if ((v[k] = v[k] * 10 + (*p - '0')) > CFG_MAX_REPEAT)
					return cfgb_fail_at(b, b->p, "repeat count over 1000", NULL);
		}
		while (p < b->end && *p == ' ')
			p++;
		if (k == 0 && p < b->end && *p == ',') {
			comma = true;
			p++;
			continue;
		}
		break;
	}
	if (p >= b->end || *p != '}' || !digits)
		return cfgb_fail_at(b, b->p, "bad repetition: {m}, {m,}, {m,n} or {,n}", NULL);
	*min = (int)v[0];
	*max = comma ? (int)v[1] : (int)v[0];
	if (*max >= 0 && *max < *min)
		return cfgb_fail_at(b, b->p, "bad repetition {m,n}: n < m", NULL);
	b->p = p + 1;
	return 0;
}

/* a sequence up to "|", ")", the next rule or the end, into s */
static int parse_sequence(struct builder *b, struct seqbuf *s)
{
	for (;;) {
		skip_space(b);
		if (b->p >= b->end || *b->p == '|' || *b->p == ')' || rule_head(b, b->p))
			return 0;
		const char *at = b->p;
		struct cfg_elem el = {CFG_TERM, -1};
		char ch = *b->p;
		if (ch == '"') {
			int t = parse_string(b);
			if (t == -1)
				return -1;
			if (t == -2) { /* "" matches nothing: a repetition of it too */
				int m1, m2;
				if (b->p < b->end && (*b->p == '*' || *b->p == '+' || *b->p == '?'))
					b->p++;
				else if (b->p < b->end && *b->p == '{' && read_counts(b, &m1, &m2) < 0)
					return -1;
				if (b->p < b->end && (*b->p == '*' || *b->p == '+' || *b->p == '?' || *b->p == '{'))
					return cfgb_fail_at(b, b->p,
							    "multiple repeat: group the repeated item with ( )", NULL);
				continue;
			}
			el.id = t;
		} else if (ch == '[') {
			if ((el.id = parse_class(b)) < 0)
				return -1;
		} else if (ch == '/' && b->regex_terms) {
			if ((el.id = parse_regex(b)) < 0)
				return -1;
		} else if (ch == '.') {
			b->p++;
			static const char any[] = "(?:.|\\n)";
			if ((el.id = cfgb_add_class(b, any, sizeof any - 1, at)) < 0)
				return -1;
		} else if (ch == '(') {
			if (b->p + 1 < b->end && (b->p[1] == '=' || b->p[1] == '!'))
				return cfgb_fail_at(b, at, "lookahead assertions are not supported", NULL);
			if (++b->nest > CFG_MAX_NEST)
				return cfgb_fail_at(b, at, "groups nested too deep", NULL);
			b->p++;
			int r = cfgb_new_rule(b, NULL, 0);
			if (r < 0 || parse_alternates(b, r) < 0)
				return -1;
			if (b->p >= b->end || *b->p != ')')
				return cfgb_fail_at(b, at, "missing )", NULL);
			b->p++;
			b->nest--;
			el.kind = CFG_REF;
			el.id = r;
		} else if (name_len(b, b->p)) {
			size_t n = name_len(b, b->p);
			int r = cfgb_rule_by_name(b, b->p, n);
			if (r < 0)
				return -1;
			if (!b->used_at[r])
				b->used_at[r] = at;
			b->p += n;
			el.kind = CFG_REF;
			el.id = r;
		} else {
			return cfgb_fail_at(b, at, "unexpected character ", (char[]){ch, 0});
		}
		/* repetition */
		int min = 1, max = 1;
		if (b->p < b->end && (*b->p == '*' || *b->p == '+' || *b->p == '?')) {
			min = *b->p == '+';
			max = *b->p == '?' ? 1 : -1;
			b->p++;
		} else if (b->p < b->end && *b->p == '{' && read_counts(b, &min, &max) < 0) {
			return -1;
		}
		if (b->p < b->end && (*b->p == '*' || *b->p == '+' || *b->p == '?' || *b->p == '{'))
			return cfgb_fail_at(b, b->p, "multiple repeat: group the repeated item with ( )", NULL);
		if (add_repeat(b, s, el, min, max) < 0)
			return -1;
	}
}

static int parse_alternates(struct builder *b, int rule)
{
	struct seqbuf s = {0};
	for (;;) {
		s.n = 0;
		if (parse_sequence(b, &s) < 0 || cfgb_add_alt(b, rule, &s) < 0) {
			free(s.v);
			return -1;
		}
		if (b->p < b->end && *b->p == '|') {
			b->p++;
			continue;
		}
		free(s.v);
		return 0;
	}
}

void cfg_parse_rules(struct builder *b)
{
	skip_space(b);
	if (b->p >= b->end)
		cfgb_fail_at(b, b->p, "empty grammar", NULL);
	while (!b->failed && b->p < b->end) {
		if (!rule_head(b, b->p)) {
			cfgb_fail_at(b, b->p, "expected a rule \"name ::= ...\" (GBNF / EBNF) or \"name: ...\" (Lark)",
				     NULL);
			break;
		}
		size_t n = name_len(b, b->p);
		int r = cfgb_rule_by_name(b, b->p, n);
		if (r < 0)
			break;
		if (!b->defined_at[r])
			b->defined_at[r] = b->p;
		b->p = memchr(b->p, ':', (size_t)(b->end - b->p));
		b->p += 3;
		if (parse_alternates(b, r) < 0)
			break;
		if (b->p < b->end && *b->p == ')') {
			cfgb_fail_at(b, b->p, "unbalanced )", NULL);
			break;
		}
		skip_space(b);
	}
}
