/* Jinja builtins used by chat templates: filters, tests, global functions (range, namespace,
 * dict, raise_exception, strftime_now), attribute access and the str/dict methods templates
 * call. Lists and dicts are immutable, as in HF's ImmutableSandboxedEnvironment. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja/jinja.h"

enum { F_RANGE = 1, F_NAMESPACE, F_DICT, F_RAISE, F_STRFTIME };

static const struct {
	const char *name;
	int id;
} globals[] = {
	{"range", F_RANGE},           {"namespace", F_NAMESPACE},   {"dict", F_DICT},
	{"raise_exception", F_RAISE}, {"strftime_now", F_STRFTIME},
};

bool jinja_global_lookup(const char *name, struct jval *out)
{
	for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
		if (!strcmp(name, globals[i].name)) {
			out->k = JV_FUNC;
			out->u.i = globals[i].id;
			return true;
		}
	return false;
}

static const char *const filter_names[] = {
	"abs",    "attr",   "capitalize", "count",      "d",      "default",    "dictsort", "first",
	"float",  "indent", "int",        "items",      "join",   "last",       "length",   "list",
	"lower",  "map",    "max",        "min",        "reject", "rejectattr", "replace",  "reverse",
	"round",  "safe",   "select",     "selectattr", "sort",   "string",     "sum",      "title",
	"tojson", "trim",   "unique",     "upper",      NULL};
static const char *const test_names[] = {"boolean", "callable", "defined",  "divisibleby", "eq",   "equalto",
					 "escaped", "even",     "false",    "float",       "ge",   "greaterthan",
					 "gt",      "in",       "integer",  "iterable",    "le",   "lessthan",
					 "lower",   "lt",       "mapping",  "ne",          "none", "number",
					 "odd",     "sameas",   "sequence", "string",      "true", "undefined",
					 "upper",   "==",       "!=",       "<",           "<=",   ">",
					 ">=",      NULL};

static bool in_names(const char *s, const char *const *l)
{
	for (; *l; l++)
		if (!strcmp(s, *l))
			return true;
	return false;
}
bool jinja_filter_known(const char *name) { return in_names(name, filter_names); }
bool jinja_test_known(const char *name) { return in_names(name, test_names); }

static int oom(struct jctx *c) { return jerr(c, "memory limit exceeded"); }

static int undef_err(struct jctx *c, const struct jval *v)
{
	return jerr(c, "%s", v->u.s.p ? v->u.s.p : "value is undefined");
}

const struct jval *jinja_arg(const struct jval *args, int nargs, const char **kwn, const struct jval *kw, int nkw,
			     int i, const char *name)
{
	if (i >= 0 && i < nargs)
		return &args[i];
	for (int k = 0; k < nkw; k++)
		if (name && !strcmp(kwn[k], name))
			return &kw[k];
	return NULL;
}
#define ARG(i, name) jinja_arg(args, nargs, kwn, kw, nkw, i, name)

static int need_str(struct jctx *c, const struct jval *v, const char *what)
{
	if (!v || v->k != JV_STR)
		return jerr(c, "%s must be a string, not %s", what, v ? jv_typename(v) : "nothing");
	return 0;
}

int jinja_pool_str(struct jctx *c, struct strbuf *b, struct jval *out)
{
	if (b->oom) {
		free(b->p);
		return oom(c);
	}
	char *s = jpool_strdup(c->pool, b->p ? b->p : "", b->n);
	size_t n = b->n;
	free(b->p);
	if (!s)
		return oom(c);
	*out = jv_str(s, n);
	return 0;
}

/* ---- string helpers ---- */

static bool ws(unsigned char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f); }

/* does the character at s[i] belong to `chars` (UTF-8 set) */
static size_t char_len(const char *s, size_t n, size_t i)
{
	size_t j = i + 1;
	while (j < n && ((unsigned char)s[j] & 0xc0) == 0x80)
		j++;
	return j - i;
}

static bool in_set(const struct jval *chars, const char *p, size_t k)
{
	if (!chars)
		return jinja_space_len(p, k, 0) == k;
	for (size_t i = 0; i < chars->u.s.n;) {
		size_t m = char_len(chars->u.s.p, chars->u.s.n, i);
		if (m == k && !memcmp(chars->u.s.p + i, p, k))
			return true;
		i += m;
	}
	return false;
}

struct jval jinja_strip(const struct jval *s, const struct jval *chars, bool left, bool right)
{
	const char *p = s->u.s.p;
	size_t a = 0, b = s->u.s.n;
	while (left && a < b) {
		size_t k = char_len(p, b, a);
		if (!in_set(chars, p + a, k))
			break;
		a += k;
	}
	while (right && b > a) {
		size_t st = b - 1;
		while (st > a && ((unsigned char)p[st] & 0xc0) == 0x80)
			st--;
		if (!in_set(chars, p + st, b - st))
			break;
		b = st;
	}
	return jv_str(p + a, b - a);
}

int jinja_change_case(struct jctx *c, const struct jval *s, int mode, struct jval *out)
{
	/* mode 0 lower, 1 upper, 2 capitalize, 3 title (Jinja's: words split at -, space, brackets) */
	char *p = jpool_strdup(c->pool, s->u.s.p, s->u.s.n);
	if (!p)
		return oom(c);
	bool start = true;
	for (size_t i = 0; i < s->u.s.n; i++) {
		char ch = p[i];
		bool up = mode == 1 || (mode == 2 && i == 0) || (mode == 3 && start);
		if (up && ch >= 'a' && ch <= 'z')
			p[i] = (char)(ch - 32);
		else if (!up && ch >= 'A' && ch <= 'Z')
			p[i] = (char)(ch + 32);
		if (mode == 3)
			start = ws((unsigned char)ch) || strchr("-({[<", ch) != NULL;
	}
	*out = jv_str(p, s->u.s.n);
	return 0;
}

int jinja_replace(struct jctx *c, const struct jval *s, const struct jval *old, const struct jval *new,
		  long long count, struct jval *out)
{
	struct strbuf b = {.limit = JINJA_MAX_OUT};
	const char *p = s->u.s.p, *end = p + s->u.s.n;
	long long done = 0;
	if (old->u.s.n == 0) { /* Python inserts `new` between characters */
		for (size_t i = 0; i <= s->u.s.n;) {
			if (count < 0 || done < count) {
				strbuf_put(&b, new->u.s.p, new->u.s.n);
				done++;
			}
			if (i == s->u.s.n)
				break;
			size_t k = char_len(p, s->u.s.n, i);
			strbuf_put(&b, p + i, k);
			i += k;
		}
		return jinja_pool_str(c, &b, out);
	}
	while (p < end) {
		const char *q = (count < 0 || done < count) ? memmem(p, (size_t)(end - p), old->u.s.p, old->u.s.n)
							    : NULL;
		if (!q) {
			strbuf_put(&b, p, (size_t)(end - p));
			break;
		}
		strbuf_put(&b, p, (size_t)(q - p));
		strbuf_put(&b, new->u.s.p, new->u.s.n);
		p = q + old->u.s.n;
		done++;
	}
	return jinja_pool_str(c, &b, out);
}

static int str_split(struct jctx *c, const struct jval *s, const struct jval *sep, long long maxsplit, bool rsplit,
		     struct jval *out)
{
	*out = jv_list(c->pool, 4);
	if (out->k != JV_LIST)
		return oom(c);
	const char *p = s->u.s.p;
	size_t n = s->u.s.n;
	if (sep && sep->k == JV_STR) {
		if (sep->u.s.n == 0)
			return jerr(c, "empty separator");
		const char *sp = sep->u.s.p;
		size_t sn = sep->u.s.n;
		if (!rsplit) {
			size_t a = 0;
			long long k = 0;
			for (;;) {
				const char *q = (maxsplit < 0 || k < maxsplit) ? memmem(p + a, n - a, sp, sn) : NULL;
				if (!q)
					break;
				if (jlist_push(c->pool, out->u.l, jv_str(p + a, (size_t)(q - p) - a)) < 0)
					return oom(c);
				a = (size_t)(q - p) + sn;
				k++;
			}
			return jlist_push(c->pool, out->u.l, jv_str(p + a, n - a)) < 0 ? oom(c) : 0;
		}
		/* rsplit: collect from the right, then reverse */
		size_t b = n;
		long long k = 0;
		while (maxsplit < 0 || k < maxsplit) {
			size_t i = b;
			bool found = false;
			while (i >= sn) {
				if (!memcmp(p + i - sn, sp, sn)) {
					found = true;
					break;
				}
				i--;
			}
			if (!found)
				break;
			if (jlist_push(c->pool, out->u.l, jv_str(p + i, b - i)) < 0)
				return oom(c);
			b = i - sn;
			k++;
		}
		if (jlist_push(c->pool, out->u.l, jv_str(p, b)) < 0)
			return oom(c);
		struct jlist *l = out->u.l;
		for (size_t i = 0; i < l->n / 2; i++) {
			struct jval t = l->v[i];
			l->v[i] = l->v[l->n - 1 - i];
			l->v[l->n - 1 - i] = t;
		}
		return 0;
	}
	if (rsplit && maxsplit >= 0)
		return jerr(c, "rsplit() without separator and with maxsplit is not supported");
	/* split on runs of (Unicode) whitespace */
	size_t i = 0, w;
	long long k = 0;
	while (i < n) {
		while (i < n && (w = jinja_space_len(p, n, i)))
			i += w;
		if (i >= n)
			break;
		size_t j = i;
		if (maxsplit >= 0 && k >= maxsplit) {
			j = n; /* Python keeps the remainder as is, trailing whitespace included */
		} else {
			while (j < n && !jinja_space_len(p, n, j))
				j++;
		}
		if (jlist_push(c->pool, out->u.l, jv_str(p + i, j - i)) < 0)
			return oom(c);
		k++;
		i = j;
	}
	return 0;
}

static bool prefix_match(const struct jval *s, const struct jval *x, bool suffix)
{
	if (x->u.s.n > s->u.s.n)
		return false;
	return !memcmp(s->u.s.p + (suffix ? s->u.s.n - x->u.s.n : 0), x->u.s.p, x->u.s.n);
}

static long long intarg(const struct jval *v, long long dflt)
{
	return v && v->k == JV_INT ? v->u.i : v && v->k == JV_BOOL ? v->u.b : dflt;
}

int jinja_join(struct jctx *c, const struct jval *seq, const struct jval *sep, const char *attr, struct jval *out)
{
	struct jval items;
	if (jv_iter_list(c, seq, &items) < 0)
		return -1;
	struct strbuf b = {.limit = JINJA_MAX_OUT};
	for (size_t i = 0; i < items.u.l->n; i++) {
		struct jval v = items.u.l->v[i];
		if (i && sep)
			strbuf_put(&b, sep->u.s.p, sep->u.s.n);
		if (attr && jinja_getattr(c, &items.u.l->v[i], attr, &v) < 0) {
			free(b.p);
			return -1;
		}
		if (jv_to_str(c, &v, &b) < 0) {
			free(b.p);
			return -1;
		}
	}
	return jinja_pool_str(c, &b, out);
}

static int call_method(struct jctx *c, const struct jmethod *m, const struct jval *args, int nargs, const char **kwn,
		       const struct jval *kw, int nkw, struct jval *out)
{
	const struct jval *s = &m->self;
	const char *name = m->name;
	const struct jval *a0 = ARG(0, NULL), *a1 = ARG(1, NULL);
	if (s->k == JV_DICT) {
		if (!strcmp(name, "get")) {
			if (!a0)
				return jerr(c, "get expected at least 1 argument");
			for (size_t i = 0; i < s->u.d->n; i++)
				if (jv_equal(&s->u.d->keys[i], a0))
					return *out = s->u.d->vals[i], 0;
			*out = a1 ? *a1 : jv_none();
			return 0;
		}
		bool items = !strcmp(name, "items"), keys = !strcmp(name, "keys");
		*out = jv_list(c->pool, s->u.d->n);
		if (out->k != JV_LIST)
			return oom(c);
		for (size_t i = 0; i < s->u.d->n; i++) {
			struct jval v = keys ? s->u.d->keys[i] : s->u.d->vals[i];
			if (items) {
				v = jv_list(c->pool, 2);
				if (v.k != JV_LIST)
					return oom(c);
				v.u.l->tuple = true;
				v.u.l->v[0] = s->u.d->keys[i];
				v.u.l->v[1] = s->u.d->vals[i];
				v.u.l->n = 2;
			}
			out->u.l->v[out->u.l->n++] = v;
		}
		return 0;
	}
	/* str methods */
	if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
		if (a0 && a0->k != JV_NONE && need_str(c, a0, "strip chars") < 0)
			return -1;
		*out = jinja_strip(s, a0 && a0->k == JV_STR ? a0 : NULL, name[0] != 'r', name[0] != 'l');
		return 0;
	}
	if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
		const struct jval *sep = ARG(0, "sep"), *mx = ARG(1, "maxsplit");
		if (sep && sep->k != JV_NONE && need_str(c, sep, "separator") < 0)
			return -1;
		return str_split(c, s, sep, intarg(mx, -1), name[0] == 'r', out);
	}
	if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
		bool suffix = name[0] == 'e', r = false;
		if (a0 && a0->k == JV_LIST) {
			for (size_t i = 0; i < a0->u.l->n; i++) {
				if (need_str(c, &a0->u.l->v[i], name) < 0)
					return -1;
				r |= prefix_match(s, &a0->u.l->v[i], suffix);
			}
		} else {
			if (need_str(c, a0, name) < 0)
				return -1;
			r = prefix_match(s, a0, suffix);
		}
		*out = jv_bool(r);
		return 0;
	}
	if (!strcmp(name, "replace")) {
		if (need_str(c, a0, "replace old") < 0 || need_str(c, a1, "replace new") < 0)
			return -1;
		return jinja_replace(c, s, a0, a1, intarg(ARG(2, "count"), -1), out);
	}
	int mode = !strcmp(name, "lower")        ? 0
		   : !strcmp(name, "upper")      ? 1
		   : !strcmp(name, "capitalize") ? 2
		   : !strcmp(name, "title")      ? 3
						 : -1;
	if (mode >= 0)
		return jinja_change_case(c, s, mode, out);
	if (!strcmp(name, "find") || !strcmp(name, "count")) {
		if (need_str(c, a0, name) < 0)
			return -1;
		const char *q = memmem(s->u.s.p, s->u.s.n, a0->u.s.p, a0->u.s.n);
		if (name[0] == 'f') {
			*out = jv_int(q ? (long long)utf8_len(s->u.s.p, (size_t)(q - s->u.s.p)) : -1);
			return 0;
		}
		long long k = 0;
		if (a0->u.s.n == 0) {
			k = (long long)utf8_len(s->u.s.p, s->u.s.n) + 1;
		} else {
			while (q) {
				k++;
				q += a0->u.s.n;
				q = memmem(q, (size_t)(s->u.s.p + s->u.s.n - q), a0->u.s.p, a0->u.s.n);
			}
		}
		*out = jv_int(k);
		return 0;
	}
	if (!strcmp(name, "join")) {
		if (!a0)
			return jerr(c, "join expected 1 argument");
		struct jval items;
		if (jv_iter_list(c, a0, &items) < 0)
			return -1;
		for (size_t i = 0; i < items.u.l->n; i++)
			if (items.u.l->v[i].k != JV_STR)
				return jerr(c, "sequence item %zu: expected str instance, %s found", i,
					    jv_typename(&items.u.l->v[i]));
		return jinja_join(c, &items, s, NULL, out);
	}
	if (!strncmp(name, "is", 2)) {
		bool r = s->u.s.n > 0;
		for (size_t i = 0; i < s->u.s.n; i++) {
			unsigned char ch = (unsigned char)s->u.s.p[i];
			if (!strcmp(name, "isdigit"))
				r &= ch >= '0' && ch <= '9';
			else if (!strcmp(name, "isspace"))
				r &= ws(ch);
			else if (!strcmp(name, "isalpha"))
				r &= (ch | 32) >= 'a' && (ch | 32) <= 'z';
			else
				r &= ((ch | 32) >= 'a' && (ch | 32) <= 'z') || (ch >= '0' && ch <= '9');
		}
		*out = jv_bool(r);
		return 0;
	}
	return jerr(c, "'%s' object has no method '%s'", jv_typename(s), name);
}

static const char *const str_methods[] = {
	"strip",      "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "lower",   "upper",
	"capitalize", "title",  "find",   "count", "join",   "isdigit",    "isspace",  "isalpha", "isalnum", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", NULL};

int jinja_getattr(struct jctx *c, const struct jval *obj, const char *attr, struct jval *out)
{
	if (obj->k == JV_UNDEF)
		return undef_err(c, obj);
	if ((obj->k == JV_STR && in_names(attr, str_methods)) || (obj->k == JV_DICT && in_names(attr, dict_methods))) {
		struct jmethod *m = jpool_alloc(c->pool, sizeof *m);
		if (!m)
			return oom(c);
		m->self = *obj;
		m->name = attr;
		out->k = JV_METHOD;
		out->u.m = m;
		return 0;
	}
	if (obj->k == JV_DICT || obj->k == JV_NS) {
		struct jval *v = jdict_get(obj->u.d, attr, strlen(attr));
		if (v) {
			*out = *v;
			return 0;
		}
	}
	char tmp[200];
	snprintf(tmp, sizeof tmp, "'%s object' has no attribute '%.100s'", jv_typename(obj), attr);
	*out = jv_undef(jpool_strdup(c->pool, tmp, strlen(tmp)));
	return 0;
}

static int kw_dict(struct jctx *c, enum jkind k, const struct jval *args, int nargs, const char **kwn,
		   const struct jval *kw, int nkw, struct jval *out)
{
	*out = jv_dict(c->pool, (size_t)nkw + 1);
	if (out->k != JV_DICT)
		return oom(c);
	if (nargs > 1)
		return jerr(c, "%s expected at most 1 positional argument", k == JV_NS ? "namespace" : "dict");
	if (nargs == 1) {
		if (args[0].k != JV_DICT)
			return jerr(c, "%s argument must be a mapping", k == JV_NS ? "namespace" : "dict");
		for (size_t i = 0; i < args[0].u.d->n; i++)
			if (jdict_set(c->pool, out->u.d, args[0].u.d->keys[i], args[0].u.d->vals[i]) < 0)
				return oom(c);
	}
	for (int i = 0; i < nkw; i++)
		if (jdict_set(c->pool, out->u.d, jv_cstr(kwn[i]), kw[i]) < 0)
			return oom(c);
	out->k = k;
	return 0;
}

int jinja_call(struct jctx *c, const struct jval *fn, const struct jval *args, int nargs, const char **kwn,
	       const struct jval *kw, int nkw, struct jval *out)
{
	switch (fn->k) {
	case JV_UNDEF: return undef_err(c, fn);
	case JV_MACRO: return jinja_call_macro(c, fn->u.macro, args, nargs, kwn, kw, nkw, out);
	case JV_METHOD: return call_method(c, fn->u.m, args, nargs, kwn, kw, nkw, out);
	case JV_FUNC: break;
	default: return jerr(c, "'%s' object is not callable", jv_typename(fn));
	}
	switch ((int)fn->u.i) {
	case F_RAISE: {
		struct jval msg = jv_cstr("");
		if (nargs > 0 && jv_stringify(c, &args[0], &msg) < 0)
			return -1;
		return err_set(c->e, "chat template: %.*s", (int)(msg.u.s.n > 900 ? 900 : msg.u.s.n), msg.u.s.p);
	}
	case F_STRFTIME: {
		if (nargs < 1 || need_str(c, &args[0], "strftime_now format") < 0)
			return jerr(c, "strftime_now expects a format string");
		char tmp[256];
		time_t now = time(NULL);
		struct tm tm;
		localtime_r(&now, &tm);
		size_t n = strftime(tmp, sizeof tmp, args[0].u.s.p, &tm);
		char *s = jpool_strdup(c->pool, tmp, n);
		if (!s)
			return oom(c);
		*out = jv_str(s, n);
		return 0;
	}
	case F_NAMESPACE: return kw_dict(c, JV_NS, args, nargs, kwn, kw, nkw, out);
	case F_DICT: return kw_dict(c, JV_DICT, args, nargs, kwn, kw, nkw, out);
	case F_RANGE: {
		long long a = 0, b = 0, st = 1;
		for (int i = 0; i < nargs; i++)
			if (args[i].k != JV_INT && args[i].k != JV_BOOL)
				return jerr(c, "range() arguments must be integers, not %s", jv_typename(&args[i]));
		if (nargs == 1)
			b = intarg(&args[0], 0);
		else if (nargs >= 2) {
			a = intarg(&args[0], 0);
			b = intarg(&args[1], 0);
			st = nargs > 2 ? intarg(&args[2], 1) : 1;
		} else {
			return jerr(c, "range expected at least 1 argument");
		}
		if (st == 0)
			return jerr(c, "range() arg 3 must not be zero");
		long double cnt = st > 0 ? ((long double)b - a) / st : ((long double)a - b) / -st;
		if (cnt > 1000000)
			return jerr(c, "range too big");
		*out = jv_list(c->pool, cnt > 0 ? (size_t)ceill(cnt) : 0);
		if (out->k != JV_LIST)
			return oom(c);
		for (long long i = a; st > 0 ? i < b : i > b; i += st)
			out->u.l->v[out->u.l->n++] = jv_int(i);
		return 0;
	}
	}
	return jerr(c, "unknown function");
}

/* ---- tests ---- */

int jinja_test(struct jctx *c, const char *name, const struct jval *v, const struct jval *args, int nargs, bool *out)
{
	const struct jval *a = nargs > 0 ? &args[0] : NULL;
	enum jkind k = v->k;
	if (!strcmp(name, "defined"))
		*out = k != JV_UNDEF;
	else if (!strcmp(name, "undefined"))
		*out = k == JV_UNDEF;
	else if (!strcmp(name, "none"))
		*out = k == JV_NONE;
	else if (!strcmp(name, "string"))
		*out = k == JV_STR;
	else if (!strcmp(name, "mapping"))
		*out = k == JV_DICT;
	else if (!strcmp(name, "iterable"))
		*out = k == JV_STR || k == JV_LIST || k == JV_DICT || k == JV_UNDEF;
	else if (!strcmp(name, "sequence"))
		*out = k == JV_STR || k == JV_LIST || k == JV_DICT || k == JV_UNDEF;
	else if (!strcmp(name, "number"))
		*out = k == JV_INT || k == JV_FLOAT || k == JV_BOOL;
	else if (!strcmp(name, "integer"))
		*out = k == JV_INT;
	else if (!strcmp(name, "float"))
		*out = k == JV_FLOAT;
	else if (!strcmp(name, "boolean"))
		*out = k == JV_BOOL;
	else if (!strcmp(name, "true"))
		*out = k == JV_BOOL && v->u.b;
	else if (!strcmp(name, "false"))
		*out = k == JV_BOOL && !v->u.b;
	else if (!strcmp(name, "callable"))
		*out = k == JV_MACRO || k == JV_FUNC || k == JV_METHOD || k == JV_UNDEF;
	else if (!strcmp(name, "escaped"))
		*out = false;
	else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
		struct jval s;
		if (jv_stringify(c, v, &s) < 0)
			return -1;
		bool up = name[0] == 'u', cased = false, ok = true;
		for (size_t i = 0; i < s.u.s.n; i++) {
			char ch = s.u.s.p[i];
			if (ch >= 'a' && ch <= 'z') {
				cased = true;
				ok &= !up;
			}
			if (ch >= 'A' && ch <= 'Z') {
				cased = true;
				ok &= up;
			}
		}
		*out = cased && ok;
	} else {
		if (!a && strcmp(name, "odd") && strcmp(name, "even"))
			return jerr(c, "test \"%s\" needs an argument", name);
		if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
			if (k != JV_INT && k != JV_BOOL)
				return jerr(c, "test \"%s\" needs an integer", name);
			long long x = intarg(v, 0);
			if (name[0] == 'o')
				*out = (x % 2) != 0;
			else if (name[0] == 'e')
				*out = x % 2 == 0;
			else {
				long long d = intarg(a, 0);
				if (d == 0)
					return jerr(c, "integer division or modulo by zero");
				*out = x % d == 0;
			}
			return 0;
		}
		if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "=="))
			*out = jv_equal(v, a);
		else if (!strcmp(name, "ne") || !strcmp(name, "!="))
			*out = !jv_equal(v, a);
		else if (!strcmp(name, "sameas"))
			*out = jv_equal(v, a) && v->k == a->k;
		else if (!strcmp(name, "in"))
			return jv_contains(c, a, v, out);
		else {
			int cmp;
			if (jv_compare(c, v, a, &cmp) < 0)
				return -1;
			if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<"))
				*out = cmp < 0;
			else if (!strcmp(name, "le") || !strcmp(name, "<="))
				*out = cmp <= 0;
			else if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">"))
				*out = cmp > 0;
			else
				*out = cmp >= 0;
		}
	}
	return 0;
}
