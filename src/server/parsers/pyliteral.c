/* Python literals as JSON (pyliteral.h). */
#include "server/parsers/pyliteral.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/pyjson.h"
#include "base/strbuf.h"
#include "base/utf8.h"

#define MAX_DEPTH 64

struct lit {
	const char *p, *end;
	bool oom;
};

static void skip_space(struct lit *l)
{
	while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r' || *l->p == '\f'))
		l->p++;
}

static bool eat(struct lit *l, char c)
{
	skip_space(l);
	if (l->p < l->end && *l->p == c) {
		l->p++;
		return true;
	}
	return false;
}

static bool is_ident(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static bool word(struct lit *l, const char *w)
{
	size_t n = strlen(w);
	if ((size_t)(l->end - l->p) < n || memcmp(l->p, w, n) || (l->p + n < l->end && is_ident(l->p[n])))
		return false;
	l->p += n;
	return true;
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* n hex digits at *p → *cp */
static bool hex_run(const char **p, const char *end, int n, uint32_t *cp)
{
	*cp = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		int d = *p < end ? hex_digit(**p) : -1;
		if (d < 0)
			return false;
		*cp = *cp * 16 + (uint32_t)d;
	}
	return true;
}

/* one quoted string's body into b (Python's escapes); false when it is not one */
static bool string_body(struct lit *l, struct strbuf *b)
{
	char q = *l->p++;
	while (l->p < l->end && *l->p != q) {
		char c = *l->p++;
		if (c == '\n')
			return false; /* a single-quoted string is one line */
		if (c != '\\') {
			if (strbuf_putc(b, c) < 0)
				return l->oom = true, false;
			continue;
		}
		if (l->p >= l->end)
			return false;
		char e = *l->p++;
		uint32_t cp;
		static const char from[] = "\\'\"abfnrtv", to[] = "\\'\"\a\b\f\n\r\t\v";
		const char *simple = e ? strchr(from, e) : NULL;
		if (e == '\n')
			continue; /* a line continuation */
		if (simple) {
			cp = (unsigned char)to[simple - from];
		} else if (e >= '0' && e <= '7') {
			cp = (uint32_t)(e - '0');
			for (int i = 0; i < 2 && l->p < l->end && *l->p >= '0' && *l->p <= '7'; i++)
				cp = cp * 8 + (uint32_t)(*l->p++ - '0');
		} else if (e == 'x' || e == 'u' || e == 'U') {
			if (!hex_run(&l->p, l->end, e == 'x' ? 2 : e == 'u' ? 4 : 8, &cp) || cp > 0x10FFFF)
				return false;
		} else { /* an unknown escape keeps its backslash */
			if (strbuf_putc(b, '\\') < 0 || strbuf_putc(b, e) < 0)
				return l->oom = true, false;
			continue;
		}
		if (cp >= 0xD800 && cp <= 0xDFFF)
			return false; /* a lone surrogate: not text JSON can hold */
		char u[4];
		size_t k = utf8_encode(cp, u);
		if (strbuf_put(b, u, k) < 0)
			return l->oom = true, false;
	}
	if (l->p >= l->end)
		return false;
	l->p++;
	return true;
}

/* a string, adjacent quoted pieces joined */
static json_t *string_lit(struct lit *l)
{
	struct strbuf b = {0};
	bool ok = true;
	do
		ok = string_body(l, &b);
	while (ok && (skip_space(l), l->p < l->end && (*l->p == '\'' || *l->p == '"')));
	json_t *j = ok && utf8_valid(b.p ? b.p : "", b.n, NULL) ? json_stringn(b.p ? b.p : "", b.n) : NULL;
	if (ok && !j && utf8_valid(b.p ? b.p : "", b.n, NULL))
		l->oom = true;
	strbuf_fini(&b);
	return j;
}

static json_t *number_lit(struct lit *l)
{
	char buf[128];
	size_t n = 0;
	bool real = false;
	const char *p = l->p;
	if (p < l->end && (*p == '+' || *p == '-'))
		buf[n++] = *p++;
	int base = 10;
	if (l->end - p > 2 && p[0] == '0' && strchr("xXoObB", p[1])) {
		base = p[1] == 'x' || p[1] == 'X' ? 16 : p[1] == 'o' || p[1] == 'O' ? 8 : 2;
		p += 2;
	}
	for (; p < l->end && n < sizeof buf - 1; p++) {
		char c = *p;
		if (c == '_')
			continue;
		bool digit = base == 16 ? hex_digit(c) >= 0 : c >= '0' && c <= '9';
		bool exp_sign = base == 10 && (c == '+' || c == '-') && n && (buf[n - 1] == 'e' || buf[n - 1] == 'E');
		if (base == 10 && (c == '.' || c == 'e' || c == 'E' || exp_sign))
			real = true;
		else if (!digit)
			break;
		buf[n++] = c;
	}
	if (p < l->end && is_ident(*p))
		return NULL; /* 1j, 1L, a name */
	buf[n] = 0;
	char *stop;
	errno = 0;
	json_t *j = NULL;
	if (real) {
		double d = strtod(buf, &stop);
		if (*stop || errno || stop == buf)
			return NULL;
		j = json_real(d);
	} else {
		long long v = strtoll(buf, &stop, base);
		if (*stop || errno || stop == buf || (stop == buf + 1 && (buf[0] == '+' || buf[0] == '-')))
			return NULL;
		/* Python 3 refuses a decimal with leading zeros ("012") */
		const char *d = buf + (buf[0] == '+' || buf[0] == '-');
		if (base == 10 && d[0] == '0' && d[1])
			for (const char *z = d; *z; z++)
				if (*z != '0')
					return NULL;
		j = json_integer(v);
	}
	if (!j)
		l->oom = true;
	l->p = p;
	return j;
}

static json_t *value(struct lit *l, int depth);

/* json.dumps's text for a dict key, or NULL */
static char *key_text(const json_t *k, bool *oom)
{
	if (json_is_string(k))
		return strdup(json_string_value(k));
	struct strbuf b = {0};
	if (json_is_true(k) || json_is_false(k) || json_is_null(k) || json_is_integer(k) || json_is_real(k)) {
		if (pyjson_dump(k, &b) < 0 || strbuf_putc(&b, 0) < 0) {
			*oom = true;
			strbuf_fini(&b);
			return NULL;
		}
		return b.p;
	}
	return NULL;
}

/* [..], (..) or {..} after its opening bracket */
static json_t *container(struct lit *l, char close, int depth)
{
	bool dict = close == '}';
	json_t *out = dict ? json_object() : json_array();
	int n = 0;
	bool comma = false;
	if (!out)
		return l->oom = true, NULL;
	while (!eat(l, close)) {
		if (n && !comma)
			goto bad;
		json_t *k = value(l, depth + 1);
		if (!k)
			goto bad;
		if (dict) {
			json_t *v = eat(l, ':') ? value(l, depth + 1) : NULL;
			char *kt = v ? key_text(k, &l->oom) : NULL;
			json_decref(k);
			int rc = kt ? json_object_set_new(out, kt, v) : (json_decref(v), -1);
			free(kt);
			if (rc < 0)
				goto bad;
		} else if (json_array_append_new(out, k) < 0) {
			l->oom = true;
			goto bad;
		}
		n++;
		comma = eat(l, ',');
	}
	if (close == ')' && n == 1 && !comma) { /* (x) is x */
		json_t *x = json_incref(json_array_get(out, 0));
		json_decref(out);
		return x;
	}
	if (dict && !n && comma)
		goto bad;
	return out;
bad:
	json_decref(out);
	return NULL;
}

static json_t *value(struct lit *l, int depth)
{
	skip_space(l);
	if (depth > MAX_DEPTH || l->p >= l->end)
		return NULL;
	char c = *l->p;
	json_t *j = NULL;
	if (c == '\'' || c == '"')
		return string_lit(l);
	if (c == '[' || c == '(' || c == '{') {
		l->p++;
		return container(l, c == '[' ? ']' : c == '(' ? ')' : '}', depth);
	}
	if (word(l, "None"))
		j = json_null();
	else if (word(l, "True"))
		j = json_true();
	else if (word(l, "False"))
		j = json_false();
	else if ((c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-')
		return number_lit(l);
	else
		return NULL;
	if (!j)
		l->oom = true;
	return j;
}

json_t *py_literal_json(const char *s, size_t n, bool *oom)
{
	struct lit l = {s, s + n, false};
	json_t *j = value(&l, 0);
	skip_space(&l);
	*oom = l.oom;
	if (j && l.p != l.end) {
		json_decref(j);
		return NULL;
	}
	return j;
}
