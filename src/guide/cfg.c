/* GBNF / xgrammar EBNF grammars compiled for the matcher (guide/cfg.h). */
#include "guide/cfg.h"

#include <stdio.h>
#include <string.h>

#include "base/grow.h"
#include "base/utf8.h"
#include "guide/cfg_unleft.h"

#define CFG_MAX_REPEAT 1000
#define CFG_MAX_NEST 64 /* ( ) groups inside each other */
#define LEFT_HIDDEN "left recursion behind a part that may match nothing, through rule "

/* a sequence being built (its elements go to the grammar's array when it is whole) */
struct seqbuf {
	struct cfg_elem *v;
	int n, cap;
};

struct intlist {
	int32_t *v;
	int n, cap;
};

struct builder {
	const char *p, *end, *start;
	struct err *e;
	bool failed;
	struct guide_cfg *c;
	int cap_rules, cap_seqs, cap_elems, cap_terms;
	struct intlist *alts;	   /* [n_rules] the alternatives' sequences of each rule */
	const char **defined_at;   /* [n_rules] its first definition (NULL: only used) */
	const char **used_at;	   /* [n_rules] its first use */
	int32_t *hash;		   /* named rules by name: rule + 1, 0 empty; HASH_CAP slots */
	int n_named;
	char **class_re;	   /* [n_terms] a class terminal's regex text (NULL: a string) */
	int32_t *class_hash;	   /* class terminals by regex text, to share DFAs: term + 1, 0
				    * empty; CLASS_HASH_CAP slots */
	int class_states;
	int nest;
	int n_parsed; /* rules from the text (b->alts, used_at); later ones come from cfg_unleft */
	bool regex_terms; /* CFG_REGEX_TERMS */
};

#define HASH_CAP 8192 /* a power of two over 2x CFG_MAX_RULES */
/* a power of two over 2x the distinct classes: each DFA has 2 states or more, so at most
 * CFG_MAX_CLASS_STATES / 2 of them */
#define CLASS_HASH_CAP 16384

static int line_of(const struct builder *b, const char *at)
{
	int line = 1;
	for (const char *q = b->start; q < at && q < b->end; q++)
		line += *q == '\n';
	return line;
}

static int fail_at(struct builder *b, const char *at, const char *fmt, const char *what)
{
	if (!b->failed)
		err_set(b->e, "grammar line %d: %s%s", line_of(b, at), fmt, what ? what : "");
	b->failed = true;
	return -1;
}

static int oom(struct builder *b)
{
	return fail_at(b, b->p, "out of memory", NULL);
}

static int list_add(struct intlist *l, int32_t v)
{
	int32_t *n = grow_array(l->v, &l->cap, l->n + 1, sizeof *n);
	if (!n)
		return -1;
	l->v = n;
	l->v[l->n++] = v;
	return 0;
}

static int seq_add(struct builder *b, struct seqbuf *s, uint8_t kind, int32_t id)
{
	if (b->c->n_elems + s->n >= CFG_MAX_ELEMS)
		return fail_at(b, b->p, "the grammar is too large (more than 65536 elements once repetitions are "
					"expanded)", NULL);
	struct cfg_elem *n = grow_array(s->v, &s->cap, s->n + 1, sizeof *n);
	if (!n)
		return oom(b);
	s->v = n;
	s->v[s->n].kind = kind;
	s->v[s->n++].id = id;
	return 0;
}

static uint32_t name_hash(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 16777619u;
	return h;
}

static int new_rule(struct builder *b, const char *name, size_t len)
{
	struct guide_cfg *c = b->c;
	if (c->n_rules == b->cap_rules) {
		int cap = b->cap_rules ? 2 * b->cap_rules : 64;
		struct cfg_rule *r = realloc(c->rules, sizeof *r * (size_t)cap);
		if (r)
			c->rules = r;
		char **nm = r ? realloc(c->names, sizeof *nm * (size_t)cap) : NULL;
		if (nm)
			c->names = nm;
		struct intlist *al = nm ? realloc(b->alts, sizeof *al * (size_t)cap) : NULL;
		if (al)
			b->alts = al;
		const char **d = al ? realloc(b->defined_at, sizeof *d * (size_t)cap) : NULL;
		if (d)
			b->defined_at = d;
		const char **u = d ? realloc(b->used_at, sizeof *u * (size_t)cap) : NULL;
		if (!u)
			return oom(b);
		b->used_at = u;
		b->cap_rules = cap;
	}
	int k = c->n_rules;
	memset(&c->rules[k], 0, sizeof c->rules[k]);
	memset(&b->alts[k], 0, sizeof b->alts[k]);
	b->defined_at[k] = b->used_at[k] = NULL;
	c->names[k] = NULL;
	c->n_rules++;
	if (name && !(c->names[k] = strndup(name, len)))
		return oom(b);
	return k;
}

static int rule_by_name(struct builder *b, const char *name, size_t len)
{
	uint32_t i = name_hash(name, len) & (HASH_CAP - 1);
	for (;; i = (i + 1) & (HASH_CAP - 1)) {
		int r = b->hash[i] - 1;
		if (r < 0)
			break;
		if (strlen(b->c->names[r]) == len && !memcmp(b->c->names[r], name, len))
			return r;
	}
	if (b->n_named >= CFG_MAX_RULES)
		return fail_at(b, name, "more than 4096 named rules", NULL);
	int r = new_rule(b, name, len);
	if (r < 0)
		return -1;
	b->hash[i] = r + 1;
	b->n_named++;
	return r;
}

/* the sequence as one of rule r's alternatives */
static int add_alt(struct builder *b, int r, struct seqbuf *s)
{
	struct guide_cfg *c = b->c;
	struct cfg_seq *q = grow_array(c->seqs, &b->cap_seqs, c->n_seqs + 1, sizeof *q);
	if (!q)
		return oom(b);
	c->seqs = q;
	struct cfg_elem *el = grow_array(c->elems, &b->cap_elems, c->n_elems + s->n + 1, sizeof *el);
	if (!el)
		return oom(b);
	c->elems = el;
	if (s->n)
		memcpy(c->elems + c->n_elems, s->v, sizeof *s->v * (size_t)s->n);
	c->seqs[c->n_seqs].start = c->n_elems;
	c->seqs[c->n_seqs].len = s->n;
	c->n_elems += s->n;
	if (list_add(&b->alts[r], c->n_seqs) < 0)
		return oom(b);
	c->n_seqs++;
	return 0;
}

/* ---- terminals: code points → our regex syntax → a byte DFA ---- */

/* one code point as regex text, literal wherever it stands (in a class too) */
static int put_regex_char(char *o, uint32_t cp)
{
	if (cp < 0x20 || cp == 0x7F)
		return snprintf(o, 8, "\\x%02X", cp);
	if (cp < 0x80 && !((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == ' ')) {
		o[0] = '\\';
		o[1] = (char)cp;
		return 2;
	}
	return utf8_encode(cp, o);
}

static int term_slot(struct builder *b)
{
	struct guide_cfg *c = b->c;
	if (c->n_terms == b->cap_terms) {
		int cap = b->cap_terms ? 2 * b->cap_terms : 64;
		struct cfg_term *t = realloc(c->terms, sizeof *t * (size_t)cap);
		if (t)
			c->terms = t;
		char **cr = t ? realloc(b->class_re, sizeof *cr * (size_t)cap) : NULL;
		if (!cr)
			return oom(b);
		b->class_re = cr;
		b->cap_terms = cap;
	}
	memset(&c->terms[c->n_terms], 0, sizeof c->terms[c->n_terms]);
	b->class_re[c->n_terms] = NULL;
	return c->n_terms++;
}

/* one character of a class (regex text re): a terminal, the same one for the same text */
static int add_class(struct builder *b, const char *re, size_t len, const char *at)
{
	struct guide_cfg *c = b->c;
	uint32_t h = name_hash(re, len) & (CLASS_HASH_CAP - 1);
	for (;; h = (h + 1) & (CLASS_HASH_CAP - 1)) {
		int i = b->class_hash[h] - 1;
		if (i < 0)
			break;
		if (strlen(b->class_re[i]) == len && !memcmp(b->class_re[i], re, len))
			return i;
	}
	struct guide_dfa *d;
	struct err e2;
	if (guide_dfa_compile(re, len, &d, &e2) < 0)
		return fail_at(b, at, "", e2.msg);
	if ((b->class_states += d->n_states) > CFG_MAX_CLASS_STATES) {
		guide_dfa_free(d);
		return fail_at(b, at, "the grammar's character classes are too large", NULL);
	}
	int t = term_slot(b);
	if (t < 0 || !(b->class_re[t] = strndup(re, len))) {
		guide_dfa_free(d);
		return t < 0 ? -1 : oom(b);
	}
	c->terms[t].dfa = d;
	b->class_hash[h] = t + 1;
	return t;
}

/* a string's bytes (len > 0; taken over): a terminal */
static int add_lit(struct builder *b, char *lit, size_t len)
{
	int t = term_slot(b);
	if (t < 0) {
		free(lit);
		return -1;
	}
	b->c->terms[t].lit = lit;
	b->c->terms[t].len = len;
	return t;
}

static int hexval(char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* one character of a string or class at b->p (escapes decoded) into *cp */
static int read_char(struct builder *b, uint32_t *cp)
{
	const char *at = b->p;
	uint8_t ch = (uint8_t)*b->p;
	if (ch == '\\') {
		if (++b->p >= b->end)
			return fail_at(b, at, "a backslash ends the grammar", NULL);
		char x = *b->p++;
		int digits = x == 'x' ? 2 : x == 'u' ? 4 : x == 'U' ? 8 : 0;
		if (digits) {
			uint32_t v = 0;
			for (int i = 0; i < digits; i++, b->p++) {
				int h = b->p < b->end ? hexval(*b->p) : -1;
				if (h < 0)
					return fail_at(b, at, "bad \\x / \\u / \\U escape", NULL);
				v = v << 4 | (uint32_t)h;
			}
			if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
				return fail_at(b, at, "the escape is not a Unicode character", NULL);
			*cp = v;
			return 0;
		}
		switch (x) {
		case 'n': *cp = '\n'; return 0;
		case 'r': *cp = '\r'; return 0;
		case 't': *cp = '\t'; return 0;
		case '\\': case '"': case '\'': case '[': case ']': case '-': case '^':
			*cp = (uint8_t)x;
			return 0;
		}
		return fail_at(b, at, "unknown escape \\", (char[]){x, 0});
	}
	/* a UTF-8 sequence */
	uint32_t v;
	size_t n = utf8_decode((const unsigned char *)b->p, (size_t)(b->end - b->p), &v);
	if (!n)
		return fail_at(b, at, "invalid UTF-8", NULL);
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
				oom(b);
				goto fail;
			}
			lit = r;
		}
		n += (size_t)utf8_encode(cp, lit + n);
	}
	if (b->p >= b->end) {
		fail_at(b, at, "unterminated string", NULL);
		goto fail;
	}
	b->p++;
	if (!n) {
		free(lit);
		return -2;
	}
	return add_lit(b, lit, n);
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
		return oom(b);
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
				fail_at(b, at, "character range out of order", NULL);
				goto out;
			}
		}
		if (n + 32 > cap) {
			char *r = realloc(re, cap = 2 * cap);
			if (!r) {
				oom(b);
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
		fail_at(b, at, "unterminated character class", NULL);
		goto out;
	}
	b->p++;
	if (!items) {
		fail_at(b, at, "empty character class", NULL);
		goto out;
	}
	re[n++] = ']';
	rc = add_class(b, re, n, at);
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
		return fail_at(b, at, "unterminated or empty regex /.../", NULL);
	int t = add_class(b, b->p, (size_t)(q - b->p), at);
	b->p = q + 1;
	if (t >= 0 && b->c->terms[t].dfa->accept[0])
		return fail_at(b, at, "a regex terminal must not match the empty string", NULL);
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
		if (seq_add(b, s, el.kind, el.id) < 0)
			return -1;
	if (max == min)
		return 0;
	struct seqbuf t = {0};
	int r;
	if (max < 0) { /* R ::= el R | "" */
		if ((r = new_rule(b, NULL, 0)) < 0 || seq_add(b, &t, el.kind, el.id) < 0 || seq_add(b, &t, CFG_REF, r) < 0 ||
		    add_alt(b, r, &t) < 0)
			goto fail;
		t.n = 0;
		if (add_alt(b, r, &t) < 0)
			goto fail;
	} else { /* O_k ::= el O_(k-1) | "", O_1 ::= el | "" */
		r = -1;
		for (int k = 1; k <= max - min; k++) {
			int o = new_rule(b, NULL, 0);
			t.n = 0;
			if (o < 0 || seq_add(b, &t, el.kind, el.id) < 0 || (r >= 0 && seq_add(b, &t, CFG_REF, r) < 0) ||
			    add_alt(b, o, &t) < 0)
				goto fail;
			t.n = 0;
			if (add_alt(b, o, &t) < 0)
				goto fail;
			r = o;
		}
	}
	free(t.v);
	return seq_add(b, s, CFG_REF, r);
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
					return fail_at(b, b->p, "repeat count over 1000", NULL);
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
		return fail_at(b, b->p, "bad repetition: {m}, {m,}, {m,n} or {,n}", NULL);
	*min = (int)v[0];
	*max = comma ? (int)v[1] : (int)v[0];
	if (*max >= 0 && *max < *min)
		return fail_at(b, b->p, "bad repetition {m,n}: n < m", NULL);
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
					return fail_at(b, b->p, "multiple repeat: group the repeated item with ( )", NULL);
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
			if ((el.id = add_class(b, any, sizeof any - 1, at)) < 0)
				return -1;
		} else if (ch == '(') {
			if (b->p + 1 < b->end && (b->p[1] == '=' || b->p[1] == '!'))
				return fail_at(b, at, "lookahead assertions are not supported", NULL);
			if (++b->nest > CFG_MAX_NEST)
				return fail_at(b, at, "groups nested too deep", NULL);
			b->p++;
			int r = new_rule(b, NULL, 0);
			if (r < 0 || parse_alternates(b, r) < 0)
				return -1;
			if (b->p >= b->end || *b->p != ')')
				return fail_at(b, at, "missing )", NULL);
			b->p++;
			b->nest--;
			el.kind = CFG_REF;
			el.id = r;
		} else if (name_len(b, b->p)) {
			size_t n = name_len(b, b->p);
			int r = rule_by_name(b, b->p, n);
			if (r < 0)
				return -1;
			if (!b->used_at[r])
				b->used_at[r] = at;
			b->p += n;
			el.kind = CFG_REF;
			el.id = r;
		} else {
			return fail_at(b, at, "unexpected character ", (char[]){ch, 0});
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
			return fail_at(b, b->p, "multiple repeat: group the repeated item with ( )", NULL);
		if (add_repeat(b, s, el, min, max) < 0)
			return -1;
	}
}

static int parse_alternates(struct builder *b, int rule)
{
	struct seqbuf s = {0};
	for (;;) {
		s.n = 0;
		if (parse_sequence(b, &s) < 0 || add_alt(b, rule, &s) < 0) {
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

/* ---- checks ---- */

static bool seq_nullable(const struct guide_cfg *c, const uint8_t *nullable, int q)
{
	for (int k = 0; k < c->seqs[q].len; k++) {
		const struct cfg_elem *el = &c->elems[c->seqs[q].start + k];
		if (el->kind == CFG_TERM || !nullable[el->id])
			return false;
	}
	return true;
}

/* left recursion: rule r reaches itself without consuming a byte. color: 0 new, 1 on the
 * path, 2 done. */
static int left_dfs(struct builder *b, const uint8_t *nullable, uint8_t *color, int r, int depth)
{
	const struct guide_cfg *c = b->c;
	if (color[r] == 2)
		return 0;
	if (depth > 1000)
		return fail_at(b, b->start, "rules that may match nothing nested more than 1000 deep", NULL);
	if (color[r] == 1) {
		const char *at = b->defined_at[r] ? b->defined_at[r] : b->start;
		return fail_at(b, at, LEFT_HIDDEN, c->names[r] ? c->names[r] : "( ... )");
	}
	color[r] = 1;
	for (int a = 0; a < c->rules[r].n_alts; a++) {
		const struct cfg_seq *q = &c->seqs[c->alt_seq[c->rules[r].first + a]];
		for (int k = 0; k < q->len; k++) {
			const struct cfg_elem *el = &c->elems[q->start + k];
			if (el->kind == CFG_TERM)
				break;
			if (left_dfs(b, nullable, color, el->id, depth + 1) < 0)
				return -1;
			if (!nullable[el->id])
				break;
		}
	}
	color[r] = 2;
	return 0;
}

static int finish(struct builder *b)
{
	struct guide_cfg *c = b->c;
	int root = -1;
	for (int i = 0; i < c->n_rules; i++) {
		if (c->names[i] && !b->defined_at[i])
			return fail_at(b, b->used_at[i] ? b->used_at[i] : b->start, "undefined rule ", c->names[i]);
		if (c->names[i] && !strcmp(c->names[i], "root"))
			root = i;
	}
	if (root < 0)
		return fail_at(b, b->start, "no rule \"root\" (the output is what root derives)", NULL);
	c->root = root;
	/* the alternatives, flat */
	int total = 0;
	for (int i = 0; i < c->n_rules; i++)
		total += b->alts[i].n;
	if (!(c->alt_seq = malloc(sizeof *c->alt_seq * (size_t)(total + 1))))
		return oom(b);
	for (int i = 0, at = 0; i < c->n_rules; i++) {
		c->rules[i].first = at;
		c->rules[i].n_alts = b->alts[i].n;
		if (b->alts[i].n)
			memcpy(c->alt_seq + at, b->alts[i].v, sizeof *c->alt_seq * (size_t)b->alts[i].n);
		at += b->alts[i].n;
	}
	c->n_alt = total;
	b->n_parsed = c->n_rules;
	int32_t *origin = NULL;
	int bad = -1, u = cfg_unleft(c, &origin, &bad);
	if (u != 0 && u != CFG_UNLEFT_OOM) {
		const char *why = u == CFG_UNLEFT_HIDDEN ? LEFT_HIDDEN
				  : u == CFG_UNLEFT_CYCLE
				      ? "left recursion whose other parts may all match nothing (a rule that derives itself), "
					"through rule "
				  : u == CFG_UNLEFT_NO_END ? "no output is whole: every alternative of the rule needs a rule "
							     "that never ends, rule "
							   : "the grammar is too large (more than 65536 elements) once the "
							     "left recursion is rewritten, through rule ";
		return fail_at(b, b->defined_at[bad] ? b->defined_at[bad] : b->start, why,
			       c->names[bad] ? c->names[bad] : "( ... )");
	}
	const char **d = u ? NULL : realloc(b->defined_at, sizeof *d * (size_t)c->n_rules);
	if (!d) {
		free(origin);
		return oom(b);
	}
	b->defined_at = d;
	for (int i = b->n_parsed; i < c->n_rules; i++)
		d[i] = d[origin[i]];
	free(origin);
	/* nullable and non-empty rules, to a fixed point */
	uint8_t *nullable = calloc((size_t)c->n_rules, 1), *nonempty = calloc((size_t)c->n_rules, 1);
	uint8_t *color = calloc((size_t)c->n_rules, 1);
	int rc = -1;
	if (!nullable || !nonempty || !color) {
		oom(b);
		goto out;
	}
	for (bool changed = true; changed;) {
		changed = false;
		for (int i = 0; i < c->n_rules; i++)
			for (int a = 0; a < c->rules[i].n_alts; a++) {
				int q = c->alt_seq[c->rules[i].first + a];
				if (!nullable[i] && seq_nullable(c, nullable, q))
					nullable[i] = 1, changed = true;
				for (int k = 0; k < c->seqs[q].len && !nonempty[i]; k++) {
					const struct cfg_elem *el = &c->elems[c->seqs[q].start + k];
					if (el->kind == CFG_TERM || nonempty[el->id])
						nonempty[i] = 1, changed = true;
				}
			}
	}
	for (int i = 0; i < c->n_rules; i++)
		if (!color[i] && left_dfs(b, nullable, color, i, 0) < 0)
			goto out;
	c->root_nullable = nullable[root];
	c->root_nonempty = nonempty[root];
	rc = 0;
out:
	free(nullable);
	free(nonempty);
	free(color);
	return rc;
}

int cfg_compile(const char *src, size_t len, struct guide_cfg **out, struct err *e)
{
	return cfg_compile_ex(src, len, 0, out, e);
}

int cfg_compile_ex(const char *src, size_t len, unsigned flags, struct guide_cfg **out, struct err *e)
{
	*out = NULL;
	if (len > CFG_MAX_SOURCE)
		return err_set(e, "grammar: longer than %d bytes", CFG_MAX_SOURCE);
	struct builder b = {.p = src, .end = src + len, .start = src, .e = e, .regex_terms = flags & CFG_REGEX_TERMS};
	b.c = calloc(1, sizeof *b.c);
	b.hash = calloc(HASH_CAP, sizeof *b.hash);
	b.class_hash = calloc(CLASS_HASH_CAP, sizeof *b.class_hash);
	if (!b.c || !b.hash || !b.class_hash) {
		free(b.class_hash);
		free(b.c);
		free(b.hash);
		return err_set(e, "grammar: out of memory");
	}
	skip_space(&b);
	if (b.p >= b.end)
		fail_at(&b, b.p, "empty grammar", NULL);
	while (!b.failed && b.p < b.end) {
		if (!rule_head(&b, b.p)) {
			fail_at(&b, b.p, "expected a rule \"name ::= ...\" (GBNF / EBNF) or \"name: ...\" (Lark)", NULL);
			break;
		}
		size_t n = name_len(&b, b.p);
		int r = rule_by_name(&b, b.p, n);
		if (r < 0)
			break;
		if (!b.defined_at[r])
			b.defined_at[r] = b.p;
		b.p = memchr(b.p, ':', (size_t)(b.end - b.p));
		b.p += 3;
		if (parse_alternates(&b, r) < 0)
			break;
		if (b.p < b.end && *b.p == ')') {
			fail_at(&b, b.p, "unbalanced )", NULL);
			break;
		}
		skip_space(&b);
	}
	if (!b.failed)
		finish(&b);
	for (int i = 0; i < (b.n_parsed ? b.n_parsed : b.c->n_rules); i++)
		free(b.alts[i].v);
	free(b.alts);
	free(b.defined_at);
	free(b.used_at);
	free(b.hash);
	free(b.class_hash);
	for (int i = 0; i < b.c->n_terms; i++)
		free(b.class_re[i]);
	free(b.class_re);
	if (b.failed) {
		cfg_free(b.c);
		return -1;
	}
	*out = b.c;
	return 0;
}

void cfg_free(struct guide_cfg *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n_terms; i++) {
		guide_dfa_free(c->terms[i].dfa);
		free(c->terms[i].lit);
	}
	for (int i = 0; i < c->n_rules; i++)
		free(c->names[i]);
	free(c->terms);
	free(c->names);
	free(c->rules);
	free(c->seqs);
	free(c->elems);
	free(c->alt_seq);
	free(c);
}
