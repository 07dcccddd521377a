/* Jinja values with Python semantics: truthiness, ==, <, `in`, str(), repr(), and HF's
 * tojson (json.dumps(ensure_ascii=False)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/pyjson.h"
#include "jinja/jinja.h"

struct jval jv_undef(const char *hint)
{
	struct jval v = {.k = JV_UNDEF};
	v.u.s.p = hint;
	return v;
}
struct jval jv_none(void) { return (struct jval){.k = JV_NONE}; }
struct jval jv_bool(bool b)
{
	struct jval v = {.k = JV_BOOL};
	v.u.b = b;
	return v;
}
struct jval jv_int(long long i)
{
	struct jval v = {.k = JV_INT};
	v.u.i = i;
	return v;
}
struct jval jv_float(double f)
{
	struct jval v = {.k = JV_FLOAT};
	v.u.f = f;
	return v;
}
struct jval jv_str(const char *p, size_t n)
{
	struct jval v = {.k = JV_STR};
	v.u.s.p = p;
	v.u.s.n = n;
	return v;
}
struct jval jv_cstr(const char *p) { return jv_str(p, strlen(p)); }

struct jval jv_list(struct jpool *p, size_t cap)
{
	struct jval v = {.k = JV_LIST};
	v.u.l = jpool_alloc(p, sizeof *v.u.l);
	if (v.u.l && cap) {
		v.u.l->v = jpool_alloc(p, cap * sizeof *v.u.l->v);
		v.u.l->cap = v.u.l->v ? cap : 0;
	}
	if (!v.u.l)
		v.k = JV_UNDEF;
	return v;
}

struct jval jv_dict(struct jpool *p, size_t cap)
{
	struct jval v = {.k = JV_DICT};
	v.u.d = jpool_alloc(p, sizeof *v.u.d);
	if (v.u.d && cap) {
		v.u.d->keys = jpool_alloc(p, cap * sizeof *v.u.d->keys);
		v.u.d->vals = jpool_alloc(p, cap * sizeof *v.u.d->vals);
		v.u.d->cap = v.u.d->keys && v.u.d->vals ? cap : 0;
	}
	if (!v.u.d)
		v.k = JV_UNDEF;
	return v;
}

int jlist_push(struct jpool *p, struct jlist *l, struct jval v)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		struct jval *nv = jpool_alloc(p, cap * sizeof *nv);
		if (!nv)
			return -1;
		if (l->n)
			memcpy(nv, l->v, l->n * sizeof *nv);
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
	return 0;
}

static bool key_eq(const struct jval *k, const char *s, size_t n)
{
	return k->k == JV_STR && k->u.s.n == n && !memcmp(k->u.s.p, s, n);
}

struct jval *jdict_get(const struct jdict *d, const char *k, size_t n)
{
	for (size_t i = 0; i < d->n; i++)
		if (key_eq(&d->keys[i], k, n))
			return &d->vals[i];
	return NULL;
}

int jdict_set(struct jpool *p, struct jdict *d, struct jval key, struct jval v)
{
	for (size_t i = 0; i < d->n; i++)
		if (jv_equal(&d->keys[i], &key)) {
			d->vals[i] = v;
			return 0;
		}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 4;
		struct jval *nk = jpool_alloc(p, cap * sizeof *nk), *nv = jpool_alloc(p, cap * sizeof *nv);
		if (!nk || !nv)
			return -1;
		if (d->n) {
			memcpy(nk, d->keys, d->n * sizeof *nk);
			memcpy(nv, d->vals, d->n * sizeof *nv);
		}
		d->keys = nk;
		d->vals = nv;
		d->cap = cap;
	}
	d->keys[d->n] = key;
	d->vals[d->n++] = v;
	return 0;
}

bool jv_truthy(const struct jval *v)
{
	switch (v->k) {
	case JV_UNDEF:
	case JV_NONE: return false;
	case JV_BOOL: return v->u.b;
	case JV_INT: return v->u.i != 0;
	case JV_FLOAT: return v->u.f != 0.0;
	case JV_STR: return v->u.s.n != 0;
	case JV_LIST: return v->u.l->n != 0;
	case JV_DICT: return v->u.d->n != 0;
	default: return true;
	}
}

static bool is_num(const struct jval *v) { return v->k == JV_BOOL || v->k == JV_INT || v->k == JV_FLOAT; }
static double num(const struct jval *v)
{
	return v->k == JV_FLOAT ? v->u.f : v->k == JV_INT ? (double)v->u.i : (double)v->u.b;
}
static long long inum(const struct jval *v) { return v->k == JV_INT ? v->u.i : (long long)v->u.b; }

bool jv_equal(const struct jval *a, const struct jval *b)
{
	if (is_num(a) && is_num(b)) {
		if (a->k != JV_FLOAT && b->k != JV_FLOAT)
			return inum(a) == inum(b);
		return num(a) == num(b);
	}
	if (a->k != b->k)
		return false;
	switch (a->k) {
	case JV_UNDEF:
	case JV_NONE: return true;
	case JV_STR: return a->u.s.n == b->u.s.n && !memcmp(a->u.s.p, b->u.s.p, a->u.s.n);
	case JV_LIST:
		if (a->u.l->tuple != b->u.l->tuple || a->u.l->n != b->u.l->n)
			return false;
		for (size_t i = 0; i < a->u.l->n; i++)
			if (!jv_equal(&a->u.l->v[i], &b->u.l->v[i]))
				return false;
		return true;
	case JV_DICT:
		if (a->u.d->n != b->u.d->n)
			return false;
		for (size_t i = 0; i < a->u.d->n; i++) {
			size_t j = 0;
			for (; j < b->u.d->n; j++)
				if (jv_equal(&a->u.d->keys[i], &b->u.d->keys[j]))
					break;
			if (j == b->u.d->n || !jv_equal(&a->u.d->vals[i], &b->u.d->vals[j]))
				return false;
		}
		return true;
	case JV_NS: return a->u.d == b->u.d;
	case JV_MACRO: return a->u.macro == b->u.macro;
	case JV_FUNC: return a->u.i == b->u.i;
	default: return false;
	}
}

const char *jv_typename(const struct jval *v)
{
	switch (v->k) {
	case JV_UNDEF: return "Undefined";
	case JV_NONE: return "NoneType";
	case JV_BOOL: return "bool";
	case JV_INT: return "int";
	case JV_FLOAT: return "float";
	case JV_STR: return "str";
	case JV_LIST: return v->u.l->tuple ? "tuple" : "list";
	case JV_DICT: return "dict";
	case JV_NS: return "Namespace";
	case JV_MACRO: return "Macro";
	default: return "builtin_function_or_method";
	}
}

int jv_compare(struct jctx *c, const struct jval *a, const struct jval *b, int *cmp)
{
	if (is_num(a) && is_num(b)) {
		if (a->k != JV_FLOAT && b->k != JV_FLOAT)
			*cmp = inum(a) < inum(b) ? -1 : inum(a) > inum(b);
		else
			*cmp = num(a) < num(b) ? -1 : num(a) > num(b);
		return 0;
	}
	if (a->k == JV_STR && b->k == JV_STR) { /* UTF-8 byte order == code point order */
		size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
		int r = memcmp(a->u.s.p, b->u.s.p, n);
		*cmp = r ? (r < 0 ? -1 : 1) : a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n;
		return 0;
	}
	if (a->k == JV_LIST && b->k == JV_LIST && a->u.l->tuple == b->u.l->tuple) {
		for (size_t i = 0; i < a->u.l->n && i < b->u.l->n; i++) {
			if (jv_equal(&a->u.l->v[i], &b->u.l->v[i]))
				continue;
			return jv_compare(c, &a->u.l->v[i], &b->u.l->v[i], cmp);
		}
		*cmp = a->u.l->n < b->u.l->n ? -1 : a->u.l->n > b->u.l->n;
		return 0;
	}
	if (a->k == JV_UNDEF || b->k == JV_UNDEF)
		return jerr(c, "%s is undefined",
			    a->k == JV_UNDEF && a->u.s.p   ? a->u.s.p
			    : b->k == JV_UNDEF && b->u.s.p ? b->u.s.p
							   : "value");
	return jerr(c, "comparison not supported between instances of '%s' and '%s'", jv_typename(a), jv_typename(b));
}

int jv_contains(struct jctx *c, const struct jval *hay, const struct jval *needle, bool *res)
{
	*res = false;
	switch (hay->k) {
	case JV_STR:
		if (needle->k != JV_STR)
			return jerr(c, "'in <string>' requires string as left operand, not %s", jv_typename(needle));
		*res = needle->u.s.n == 0 || memmem(hay->u.s.p, hay->u.s.n, needle->u.s.p, needle->u.s.n);
		return 0;
	case JV_LIST:
		for (size_t i = 0; i < hay->u.l->n && !*res; i++)
			*res = jv_equal(&hay->u.l->v[i], needle);
		return 0;
	case JV_DICT:
	case JV_NS:
		for (size_t i = 0; i < hay->u.d->n && !*res; i++)
			*res = jv_equal(&hay->u.d->keys[i], needle);
		return 0;
	case JV_UNDEF: return 0; /* iterating Undefined yields nothing */
	default: return jerr(c, "argument of type '%s' is not iterable", jv_typename(hay));
	}
}

int jv_iter_list(struct jctx *c, const struct jval *v, struct jval *out)
{
	if (v->k == JV_LIST) {
		*out = *v;
		return 0;
	}
	if (v->k == JV_UNDEF) {
		*out = jv_list(c->pool, 0);
		return out->k == JV_LIST ? 0 : jerr(c, "out of memory");
	}
	if (v->k == JV_DICT || v->k == JV_NS) {
		*out = jv_list(c->pool, v->u.d->n);
		if (out->k != JV_LIST)
			return jerr(c, "out of memory");
		for (size_t i = 0; i < v->u.d->n; i++)
			out->u.l->v[out->u.l->n++] = v->u.d->keys[i];
		return 0;
	}
	if (v->k == JV_STR) {
		*out = jv_list(c->pool, v->u.s.n);
		if (out->k != JV_LIST)
			return jerr(c, "out of memory");
		const char *s = v->u.s.p;
		size_t n = v->u.s.n;
		for (size_t i = 0; i < n;) {
			size_t j = i + 1;
			while (j < n && ((unsigned char)s[j] & 0xc0) == 0x80)
				j++;
			out->u.l->v[out->u.l->n++] = jv_str(s + i, j - i);
			i = j;
		}
		return 0;
	}
	return jerr(c, "'%s' object is not iterable", jv_typename(v));
}

/* Python str(float): repr, and nan / inf / -inf */
static void float_repr(double f, char *out, size_t cap)
{
	if (isnan(f))
		snprintf(out, cap, "nan");
	else if (isinf(f))
		snprintf(out, cap, f < 0 ? "-inf" : "inf");
	else
		fmt_double_repr(f, out, cap);
}

static int put_num(struct strbuf *b, const struct jval *v)
{
	char tmp[64];
	if (v->k == JV_INT)
		snprintf(tmp, sizeof tmp, "%lld", v->u.i);
	else
		float_repr(v->u.f, tmp, sizeof tmp);
	return strbuf_puts(b, tmp);
}

/* Decode the UTF-8 character at s; true if Python's str.isprintable() is false for it
 * (C1 controls, non-ASCII spaces, line/paragraph separators, common format characters). */
static bool nonprintable(const char *s, size_t n, unsigned long *cp, size_t *len)
{
	unsigned char c0 = (unsigned char)s[0];
	size_t k = c0 >= 0xf0 ? 4 : c0 >= 0xe0 ? 3 : 2;
	if (k > n)
		return false;
	unsigned long v = c0 & (k == 2 ? 0x1f : k == 3 ? 0x0f : 0x07);
	for (size_t i = 1; i < k; i++)
		v = v << 6 | ((unsigned char)s[i] & 0x3f);
	*cp = v;
	*len = k;
	return (v >= 0x80 && v <= 0xa0) || v == 0xad || v == 0x1680 || (v >= 0x2000 && v <= 0x200f) ||
	       (v >= 0x2028 && v <= 0x202f) || (v >= 0x205f && v <= 0x206f) || v == 0x3000 || v == 0xfeff;
}

static int repr_str(struct strbuf *b, const char *s, size_t n)
{
	bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
	char q = sq && !dq ? '"' : '\'';
	strbuf_putc(b, q);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		char tmp[16];
		unsigned long cp;
		size_t len;
		if (ch == '\\' || ch == (unsigned char)q) {
			strbuf_putc(b, '\\');
			strbuf_putc(b, (char)ch);
		} else if (ch == '\n') {
			strbuf_puts(b, "\\n");
		} else if (ch == '\r') {
			strbuf_puts(b, "\\r");
		} else if (ch == '\t') {
			strbuf_puts(b, "\\t");
		} else if (ch < 0x20 || ch == 0x7f) {
			snprintf(tmp, sizeof tmp, "\\x%02x", ch);
			strbuf_puts(b, tmp);
		} else if (ch >= 0xc2 && i + 1 < n && nonprintable(s + i, n - i, &cp, &len)) {
			/* Python escapes non-printable code points (separators, format chars) */
			snprintf(tmp, sizeof tmp, cp < 0x100 ? "\\x%02x" : "\\u%04x", (unsigned)cp);
			strbuf_puts(b, tmp);
			i += len - 1;
		} else {
			strbuf_putc(b, (char)ch);
		}
	}
	return strbuf_putc(b, q);
}

int jv_repr(struct jctx *c, const struct jval *v, struct strbuf *b)
{
	if (++c->depth > JINJA_MAX_DEPTH * 4)
		return jerr(c, "value nested too deeply");
	int r = 0;
	switch (v->k) {
	case JV_STR: r = repr_str(b, v->u.s.p, v->u.s.n); break;
	case JV_UNDEF: r = strbuf_puts(b, "Undefined"); break;
	case JV_LIST:
		strbuf_putc(b, v->u.l->tuple ? '(' : '[');
		for (size_t i = 0; i < v->u.l->n && r == 0; i++) {
			if (i)
				strbuf_puts(b, ", ");
			r = jv_repr(c, &v->u.l->v[i], b);
		}
		if (v->u.l->tuple && v->u.l->n == 1)
			strbuf_putc(b, ',');
		strbuf_putc(b, v->u.l->tuple ? ')' : ']');
		break;
	case JV_DICT:
	case JV_NS:
		if (v->k == JV_NS)
			strbuf_puts(b, "<Namespace ");
		strbuf_putc(b, '{');
		for (size_t i = 0; i < v->u.d->n && r == 0; i++) {
			if (i)
				strbuf_puts(b, ", ");
			r = jv_repr(c, &v->u.d->keys[i], b);
			strbuf_puts(b, ": ");
			if (r == 0)
				r = jv_repr(c, &v->u.d->vals[i], b);
		}
		strbuf_putc(b, '}');
		if (v->k == JV_NS)
			strbuf_putc(b, '>');
		break;
	default: r = jv_to_str(c, v, b);
	}
	c->depth--;
	if (r == 0 && b->oom)
		return jerr(c, "output size limit exceeded");
	return r;
}

int jv_to_str(struct jctx *c, const struct jval *v, struct strbuf *b)
{
	int r = 0;
	switch (v->k) {
	case JV_UNDEF: break;
	case JV_NONE: r = strbuf_puts(b, "None"); break;
	case JV_BOOL: r = strbuf_puts(b, v->u.b ? "True" : "False"); break;
	case JV_INT:
	case JV_FLOAT: r = put_num(b, v); break;
	case JV_STR: r = strbuf_put(b, v->u.s.p, v->u.s.n); break;
	case JV_LIST:
	case JV_DICT:
	case JV_NS: return jv_repr(c, v, b);
	case JV_MACRO: r = strbuf_puts(b, "<Macro>"); break;
	default: r = strbuf_puts(b, "<built-in function>"); break;
	}
	return r < 0 ? jerr(c, "output size limit exceeded") : 0;
}

int jv_stringify(struct jctx *c, const struct jval *v, struct jval *out)
{
	if (v->k == JV_STR) {
		*out = *v;
		return 0;
	}
	struct strbuf b = {.limit = JINJA_MAX_OUT};
	if (jv_to_str(c, v, &b) < 0) {
		free(b.p);
		return -1;
	}
	char *s = jpool_strdup(c->pool, b.p ? b.p : "", b.n);
	size_t n = b.n;
	free(b.p);
	if (!s)
		return jerr(c, "memory limit exceeded");
	*out = jv_str(s, n);
	return 0;
}

static void newline_indent(struct strbuf *b, const char *indent, int level)
{
	strbuf_putc(b, '\n');
	for (int i = 0; i < level; i++)
		strbuf_puts(b, indent);
}

int jv_to_json(struct jctx *c, const struct jval *v, struct strbuf *b, const char *indent, const char *item_sep,
	       const char *key_sep, bool sort_keys, int level)
{
	if (level > JINJA_MAX_DEPTH * 4)
		return jerr(c, "value nested too deeply for tojson");
	int r = 0;
	switch (v->k) {
	case JV_NONE: strbuf_puts(b, "null"); break;
	case JV_BOOL: strbuf_puts(b, v->u.b ? "true" : "false"); break;
	case JV_INT: put_num(b, v); break;
	case JV_FLOAT: pyjson_put_real(b, v->u.f); break;
	case JV_STR: pyjson_put_string(b, v->u.s.p, v->u.s.n); break;
	case JV_LIST:
		if (!v->u.l->n) {
			strbuf_puts(b, "[]");
			break;
		}
		strbuf_putc(b, '[');
		for (size_t i = 0; i < v->u.l->n && r == 0; i++) {
			if (i)
				strbuf_puts(b, item_sep);
			if (indent)
				newline_indent(b, indent, level + 1);
			r = jv_to_json(c, &v->u.l->v[i], b, indent, item_sep, key_sep, sort_keys, level + 1);
		}
		if (indent)
			newline_indent(b, indent, level);
		strbuf_putc(b, ']');
		break;
	case JV_DICT: {
		const struct jdict *d = v->u.d;
		if (!d->n) {
			strbuf_puts(b, "{}");
			break;
		}
		size_t *ord = jpool_alloc(c->pool, d->n * sizeof *ord);
		if (!ord)
			return jerr(c, "memory limit exceeded");
		for (size_t i = 0; i < d->n; i++) {
			if (d->keys[i].k != JV_STR)
				return jerr(c, "tojson: keys must be str, not %s", jv_typename(&d->keys[i]));
			ord[i] = i;
		}
		if (sort_keys) /* insertion sort: dicts here are small */
			for (size_t i = 1; i < d->n; i++)
				for (size_t j = i; j > 0; j--) {
					int cmp = 0;
					jv_compare(c, &d->keys[ord[j - 1]], &d->keys[ord[j]], &cmp);
					if (cmp <= 0)
						break;
					size_t t = ord[j];
					ord[j] = ord[j - 1];
					ord[j - 1] = t;
				}
		strbuf_putc(b, '{');
		for (size_t i = 0; i < d->n && r == 0; i++) {
			if (i)
				strbuf_puts(b, item_sep);
			if (indent)
				newline_indent(b, indent, level + 1);
			pyjson_put_string(b, d->keys[ord[i]].u.s.p, d->keys[ord[i]].u.s.n);
			strbuf_puts(b, key_sep);
			r = jv_to_json(c, &d->vals[ord[i]], b, indent, item_sep, key_sep, sort_keys, level + 1);
		}
		if (indent)
			newline_indent(b, indent, level);
		strbuf_putc(b, '}');
		break;
	}
	default: return jerr(c, "Object of type %s is not JSON serializable", jv_typename(v));
	}
	if (r == 0 && b->oom)
		return jerr(c, "output size limit exceeded");
	return r;
}
