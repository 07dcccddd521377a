/* Lark grammars translated into guide/cfg.h's EBNF, line for line (guide/lark.h). */
#include "guide/lark.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"

#define IGNORE_RULE "__lark_ignore"

/* Lark's common.lark terminals, written in this EBNF */
#define EXP "[eE] [+\\-]? [0-9]+"
#define DECIMAL_BODY "[0-9]+ \".\" [0-9]* | \".\" [0-9]+"
#define FLOAT_BODY "[0-9]+ " EXP " | (" DECIMAL_BODY ") (" EXP ")?"
#define NUMBER_BODY "[0-9]+ (" EXP ")? | (" DECIMAL_BODY ") (" EXP ")?"
static const struct {
	const char *name, *body;
} common[] = {
	{"DIGIT", "[0-9]"},
	{"HEXDIGIT", "[a-fA-F0-9]"},
	{"INT", "[0-9]+"},
	{"SIGNED_INT", "[+\\-]? [0-9]+"},
	{"DECIMAL", DECIMAL_BODY},
	{"FLOAT", FLOAT_BODY},
	{"SIGNED_FLOAT", "[+\\-]? (" FLOAT_BODY ")"},
	{"NUMBER", NUMBER_BODY},
	{"SIGNED_NUMBER", "[+\\-]? (" NUMBER_BODY ")"},
	{"ESCAPED_STRING", "\"\\\"\" ([^\"\\\\\\n] | \"\\\\\" [^\\n])* \"\\\"\""},
	{"LCASE_LETTER", "[a-z]"},
	{"UCASE_LETTER", "[A-Z]"},
	{"LETTER", "[a-zA-Z]"},
	{"WORD", "[a-zA-Z]+"},
	{"CNAME", "[_a-zA-Z] [_a-zA-Z0-9]*"},
	{"WS_INLINE", "[ \\t]+"},
	{"WS", "[ \\t\\x0C\\r\\n]+"},
	{"CR", "\"\\r\""},
	{"LF", "\"\\n\""},
	{"NEWLINE", "(\"\\r\"? \"\\n\")+"},
	{"SH_COMMENT", "\"#\" [^\\n]*"},
	{"CPP_COMMENT", "\"//\" [^\\n]*"},
	{"SQL_COMMENT", "\"--\" [^\\n]*"},
	{"C_COMMENT", "\"/*\" ([^*] | \"*\"+ [^*/])* \"*\"+ \"/\""},
};

struct lark {
	const char *end;
	struct err *e;
	struct strbuf out, tail; /* tail: definitions appended after the last line */
	struct strbuf ignore;    /* the %ignore alternatives */
	int line;
	bool failed, ignoring, in_rule; /* in_rule: a lowercase rule's body (tokens may be ignored before) */
	char first[64], start[64];
};

static int fail(struct lark *l, const char *what, const char *detail)
{
	if (!l->failed)
		err_set(l->e, "grammar line %d: %s%s (Lark)", l->line, what, detail ? detail : "");
	l->failed = true;
	return -1;
}

static bool name_char(char ch, bool first)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || (!first && ch >= '0' && ch <= '9');
}

static size_t name_len(const char *p, const char *end)
{
	size_t n = 0;
	while (p + n < end && name_char(p[n], n == 0))
		n++;
	return n;
}

/* Lark's terminals are uppercase names (leading underscores aside) */
static bool is_terminal(const char *p, size_t n)
{
	while (n && *p == '_')
		p++, n--;
	return n && *p >= 'A' && *p <= 'Z';
}

static const char *skip_blank(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* A definition head at p: [?!]name[.priority] ":" (not "::"). Returns the body's start, or
 * NULL; *name / *n the name. */
static const char *head(const char *p, const char *end, const char **name, size_t *n)
{
	p = skip_blank(p, end);
	if (p < end && (*p == '?' || *p == '!'))
		p++;
	if (!(*n = name_len(p, end)))
		return NULL;
	*name = p;
	p += *n;
	if (p < end && *p == '.') { /* priority */
		p++;
		if (p < end && *p == '-')
			p++;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	p = skip_blank(p, end);
	if (p >= end || *p != ':' || (p + 1 < end && p[1] == ':'))
		return NULL;
	return p + 1;
}

/* The end of a quoted text whose opening quote q is at p[-1], or NULL */
static const char *quoted_end(const char *p, const char *end, char q)
{
	for (; p < end; p++) {
		if (*p == '\\' && p + 1 < end)
			p++;
		else if (*p == q)
			return p;
	}
	return NULL;
}

static void token_start(struct lark *l, struct strbuf *o)
{
	if (l->ignoring && l->in_rule && o == &l->out)
		strbuf_puts(o, IGNORE_RULE "* ");
}

/* One character of a "a".."z" range bound (the text between the quotes), for a class */
static int range_char(struct lark *l, struct strbuf *o, const char *p, const char *q)
{
	size_t n = (size_t)(q - p);
	bool one = false;
	if (n && *p == '\\') {
		char x = n > 1 ? p[1] : 0;
		one = (x == 'x' && n == 4) || (x == 'u' && n == 6) || (x == 'U' && n == 10) ||
		      (n == 2 && x && !strchr("xuU", x));
	} else if (n) {
		uint8_t c = (uint8_t)*p;
		size_t want = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
		one = n == want;
	}
	if (!one)
		return fail(l, "a range \"a\"..\"z\" needs one character on each side", NULL);
	if (n == 1 && strchr("]-^[", *p))
		strbuf_put(o, "\\", 1);
	strbuf_put(o, p, n);
	return 0;
}

/* "text"i: ASCII letters as [xX] classes, the other bytes as strings */
static int folded_string(struct lark *l, struct strbuf *o, const char *p, const char *q)
{
	if (memchr(p, '\\', (size_t)(q - p)))
		return fail(l, "case-insensitive strings (\"...\"i) with escapes are not supported", NULL);
	strbuf_puts(o, "(");
	while (p < q) {
		char lo = *p | 0x20;
		if (lo >= 'a' && lo <= 'z') {
			char b[8];
			snprintf(b, sizeof b, " [%c%c]", lo, lo - 32);
			strbuf_puts(o, b);
			p++;
			continue;
		}
		strbuf_puts(o, " \"");
		for (; p < q && !((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z'); p++)
			strbuf_put(o, *p == '"' ? "\\\"" : p, *p == '"' ? 2 : 1);
		strbuf_puts(o, "\"");
	}
	strbuf_puts(o, " )");
	return 0;
}

/* A count of x~n..m, digits at *p before end; -1 if none or over 1000 */
static long count(const char **p, const char *end)
{
	long v = 0;
	const char *s = *p;
	while (s < end && *s >= '0' && *s <= '9' && v <= 1000)
		v = v * 10 + (*s++ - '0');
	if (s == *p || v > 1000)
		return -1;
	*p = s;
	return v;
}

/* A string token at p (its quote), translated into o; returns what follows it */
static const char *string_token(struct lark *l, struct strbuf *o, const char *p, const char *end)
{
	char quote = *p;
	const char *q = quoted_end(p + 1, end, quote);
	if (!q)
		return fail(l, "unterminated string", NULL), NULL;
	const char *after = q + 1;
	const char *r = skip_blank(after, end);
	token_start(l, o);
	if (r + 1 < end && r[0] == '.' && r[1] == '.') { /* "a".."z" */
		r = skip_blank(r + 2, end);
		const char *q2 = r < end && (*r == '"' || *r == '\'') ? quoted_end(r + 1, end, *r) : NULL;
		if (!q2)
			return fail(l, "a range \"a\"..\"z\" needs a string after ..", NULL), NULL;
		strbuf_puts(o, "[");
		if (range_char(l, o, p + 1, q) < 0)
			return NULL;
		strbuf_puts(o, "-");
		if (range_char(l, o, r + 1, q2) < 0)
			return NULL;
		strbuf_puts(o, "]");
		return q2 + 1;
	}
	if (after < end && *after == 'i') {
		if (folded_string(l, o, p + 1, q) < 0)
			return NULL;
		return after + 1;
	}
	strbuf_put(o, "\"", 1);
	for (const char *s = p + 1; s < q; s++) {
		if (quote == '\'' && *s == '"') {
			strbuf_put(o, "\\\"", 2);
		} else if (*s == '\\' && s + 1 < q && s[1] == '\'') {
			strbuf_put(o, "'", 1);
			s++;
		} else if (*s == '\\' && s + 1 < q) {
			strbuf_put(o, s, 2);
			s++;
		} else {
			strbuf_put(o, s, 1);
		}
	}
	strbuf_put(o, "\"", 1);
	return after;
}

/* The body of a definition (or a part of one on a later line), from p to the line's end */
static int body(struct lark *l, struct strbuf *o, const char *p, const char *end)
{
	while (p < end && !l->failed) {
		char c = *p;
		if (c == ' ' || c == '\t' || c == '\r') {
			strbuf_put(o, " ", 1);
			p++;
		} else if (c == '#' || (c == '/' && p + 1 < end && p[1] == '/')) {
			break;
		} else if (c == '"' || c == '\'') {
			p = string_token(l, o, p, end);
		} else if (c == '/') { /* a regex: kept as it is, the compiler takes /.../ */
			const char *q = quoted_end(p + 1, end, '/');
			if (!q || q == p + 1)
				return fail(l, "unterminated regex /.../", NULL);
			if (q + 1 < end && q[1] && strchr("imslux", q[1]))
				return fail(l, "regex flags are not supported: /.../", (char[]){q[1], 0});
			token_start(l, o);
			strbuf_put(o, p, (size_t)(q + 1 - p));
			p = q + 1;
		} else if (c == '[') {
			strbuf_put(o, "(", 1);
			p++;
		} else if (c == ']') {
			strbuf_put(o, ")?", 2);
			p++;
		} else if (strchr("()|*+?", c)) {
			strbuf_put(o, p, 1);
			p++;
		} else if (c == '~') {
			p = skip_blank(p + 1, end);
			long lo = count(&p, end), hi = lo;
			if (lo >= 0 && p + 1 < end && p[0] == '.' && p[1] == '.') {
				p += 2;
				hi = count(&p, end);
			}
			if (lo < 0 || hi < lo)
				return fail(l, "~ needs counts up to 1000: x~n or x~n..m with n <= m", NULL);
			char b[48];
			snprintf(b, sizeof b, lo == hi ? "{%ld}" : "{%ld,%ld}", lo, hi);
			strbuf_puts(o, b);
		} else if (c == '-' && p + 1 < end && p[1] == '>') {
			p = skip_blank(p + 2, end);
			size_t n = name_len(p, end);
			if (!n)
				return fail(l, "-> needs an alias name", NULL);
			p += n;
		} else if (name_char(c, true)) {
			size_t n = name_len(p, end);
			if (n == 4 && !memcmp(p, "root", 4))
				return fail(l, "a rule named root is not supported (rename it)", NULL);
			if (is_terminal(p, n))
				token_start(l, o);
			strbuf_put(o, p, n);
			p += n;
		} else if (c == '{') {
			return fail(l, "templates (name{...}) are not supported", NULL);
		} else {
			return fail(l, "unexpected character ", (char[]){c, 0});
		}
	}
	return l->failed ? -1 : 0;
}

/* %import common.NAME [-> ALIAS], %import common (A, B, ...) */
static int import_line(struct lark *l, const char *p, const char *end)
{
	p = skip_blank(p, end);
	if (end - p < 6 || memcmp(p, "common", 6))
		return fail(l, "only Lark's common terminals can be imported (%import common.NAME)", NULL);
	p += 6;
	bool list = false;
	if (p < end && *p == '.') {
		p++;
	} else {
		p = skip_blank(p, end);
		if (p >= end || *p != '(')
			return fail(l, "expected %import common.NAME or %import common (A, B)", NULL);
		list = true;
		p++;
	}
	for (;;) {
		p = skip_blank(p, end);
		size_t n = name_len(p, end);
		if (!n)
			return fail(l, "expected a terminal's name after %import common", NULL);
		const char *name = p, *alias = p;
		size_t an = n;
		p = skip_blank(p + n, end);
		if (!list && p + 1 < end && p[0] == '-' && p[1] == '>') {
			p = skip_blank(p + 2, end);
			if (!(an = name_len(p, end)))
				return fail(l, "-> needs an alias name", NULL);
			alias = p;
			p += an;
		}
		size_t k = 0;
		while (k < sizeof common / sizeof *common &&
		       (strlen(common[k].name) != n || memcmp(common[k].name, name, n)))
			k++;
		if (k == sizeof common / sizeof *common) {
			char nm[64];
			snprintf(nm, sizeof nm, "%.*s", (int)(n < 60 ? n : 60), name);
			return fail(l, "not one of Lark's common terminals that are supported: ", nm);
		}
		strbuf_put(&l->tail, alias, an);
		strbuf_puts(&l->tail, " ::= ");
		strbuf_puts(&l->tail, common[k].body);
		strbuf_puts(&l->tail, "\n");
		p = skip_blank(p, end);
		if (!list)
			break;
		if (p < end && *p == ',') {
			p++;
			continue;
		}
		if (p < end && *p == ')') {
			p++;
			break;
		}
		return fail(l, "expected , or ) in %import common (...)", NULL);
	}
	p = skip_blank(p, end);
	if (p < end && *p != '\r' && *p != '#' && !(*p == '/' && p + 1 < end && p[1] == '/'))
		return fail(l, "unexpected text after %import", NULL);
	return 0;
}

static int directive(struct lark *l, const char *p, const char *end)
{
	size_t n = name_len(p + 1, end);
	if (n == 6 && !memcmp(p + 1, "import", 6))
		return import_line(l, p + 7, end);
	if (n == 6 && !memcmp(p + 1, "ignore", 6)) {
		if (l->ignore.n)
			strbuf_puts(&l->ignore, " |");
		strbuf_puts(&l->ignore, " (");
		bool was = l->in_rule;
		l->in_rule = false;
		int rc = body(l, &l->ignore, p + 7, end);
		l->in_rule = was;
		strbuf_puts(&l->ignore, " )");
		return rc;
	}
	char nm[32];
	snprintf(nm, sizeof nm, "%%%.*s", (int)(n < 24 ? n : 24), p + 1);
	return fail(l, "this directive is not supported: ", nm);
}

bool lark_likely(const char *src, size_t len)
{
	for (size_t i = 0; i + 3 <= len; i++)
		if (!memcmp(src + i, "::=", 3))
			return false;
	for (const char *p = src, *end = src + len; p < end;) {
		const char *le = memchr(p, '\n', (size_t)(end - p));
		le = le ? le : end;
		const char *name;
		size_t n;
		if (head(p, le, &name, &n))
			return true;
		p = le + 1;
	}
	return false;
}

static void set_name(char *dst, const char *p, size_t n) { snprintf(dst, 64, "%.*s", (int)(n < 63 ? n : 63), p); }

int lark_translate(const char *src, size_t len, char **out, size_t *out_len, struct err *e)
{
	*out = NULL;
	*out_len = 0;
	struct lark l = {.end = src + len, .e = e};
	if (memchr(src, 0, len)) {
		l.line = 1;
		return fail(&l, "the grammar holds a NUL byte", NULL);
	}
	for (const char *p = src; p < l.end;) { /* %ignore anywhere applies to every rule */
		const char *le = memchr(p, '\n', (size_t)(l.end - p));
		le = le ? le : l.end;
		const char *q = skip_blank(p, le);
		l.ignoring |= le - q >= 7 && !memcmp(q, "%ignore", 7);
		p = le + 1;
	}
	bool have_def = false;
	for (const char *p = src; p < l.end && !l.failed;) {
		const char *le = memchr(p, '\n', (size_t)(l.end - p));
		le = le ? le : l.end;
		l.line++;
		const char *q = skip_blank(p, le), *name, *b;
		size_t n;
		if (q == le || *q == '\r' || *q == '#' || (*q == '/' && q + 1 < le && q[1] == '/')) {
			/* blank or a comment */
		} else if (*q == '%') {
			directive(&l, q, le);
		} else if ((b = head(q, le, &name, &n))) {
			if (n == 4 && !memcmp(name, "root", 4)) {
				fail(&l, "a rule named root is not supported (rename it)", NULL);
				break;
			}
			have_def = true;
			l.in_rule = !is_terminal(name, n);
			if (!l.first[0] && l.in_rule) {
				if (n >= sizeof l.first) {
					fail(&l, "the first rule's name is longer than 63 bytes", NULL);
					break;
				}
				set_name(l.first, name, n);
			}
			if (n == 5 && !memcmp(name, "start", 5))
				set_name(l.start, name, n);
			strbuf_put(&l.out, name, n);
			strbuf_puts(&l.out, " ::=");
			body(&l, &l.out, b, le);
		} else if (have_def) {
			body(&l, &l.out, q, le);
		} else {
			fail(&l, "expected a definition \"name: ...\"", NULL);
		}
		strbuf_puts(&l.out, "\n");
		p = le + 1;
	}
	if (!l.failed && !l.first[0] && !l.start[0]) {
		l.line = 1;
		fail(&l, "no rule (a lowercase name) to start from", NULL);
	}
	if (!l.failed) {
		strbuf_put(&l.out, l.tail.p ? l.tail.p : "", l.tail.n);
		if (l.ignoring) {
			strbuf_puts(&l.out, IGNORE_RULE " ::=");
			strbuf_put(&l.out, l.ignore.p ? l.ignore.p : "", l.ignore.n);
			strbuf_puts(&l.out, "\n");
		}
		strbuf_puts(&l.out, "root ::= ");
		strbuf_puts(&l.out, l.start[0] ? l.start : l.first);
		strbuf_puts(&l.out, l.ignoring ? " " IGNORE_RULE "*\n" : "\n");
	}
	free(l.tail.p);
	free(l.ignore.p);
	if (!l.failed && (l.out.oom || l.tail.oom || l.ignore.oom))
		err_set(e, "grammar: out of memory"), l.failed = true;
	if (l.failed) {
		free(l.out.p);
		return -1;
	}
	*out = l.out.p;
	*out_len = l.out.n;
	return 0;
}
