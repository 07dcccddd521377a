/* Jinja filters (jinja2/filters.py semantics) plus transformers' tojson override:
 * json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"

static int oom(struct jctx *c) { return jerr(c, "memory limit exceeded"); }

#define ARG(i, name) jinja_arg(args, nargs, kwn, kw, nkw, i, name)

static bool present(const struct jval *v) { return v && v->k != JV_NONE && v->k != JV_UNDEF; }

static int length(struct jctx *c, const struct jval *v, long long *n)
{
	switch (v->k) {
	case JV_UNDEF: *n = 0; return 0;
	case JV_STR: *n = (long long)utf8_len(v->u.s.p, v->u.s.n); return 0;
	case JV_LIST: *n = (long long)v->u.l->n; return 0;
	case JV_DICT:
	case JV_NS: *n = (long long)v->u.d->n; return 0;
	default: return jerr(c, "object of type '%s' has no len()", jv_typename(v));
	}
}

static int tojson(struct jctx *c, const struct jval *v, const struct jval *args, int nargs, const char **kwn,
		  const struct jval *kw, int nkw, struct jval *out)
{
	const struct jval *ea = ARG(0, "ensure_ascii"), *ind = ARG(1, "indent"), *sep = ARG(2, "separators"),
			  *sk = ARG(3, "sort_keys");
	if (ea && jv_truthy(ea))
		return jerr(c, "tojson: ensure_ascii=True is not supported");
	char spaces[64];
	const char *indent = NULL;
	if (present(ind)) {
		if (ind->k == JV_STR) {
			indent = jpool_strdup(c->pool, ind->u.s.p, ind->u.s.n);
		} else if (ind->k == JV_INT) {
			long long w = ind->u.i < 0 ? 0 : ind->u.i > 32 ? 32 : ind->u.i;
			memset(spaces, ' ', (size_t)w);
			spaces[w] = 0;
			indent = spaces;
		} else {
			return jerr(c, "tojson: indent must be an integer or a string");
		}
	}
	const char *item_sep = indent ? "," : ", ", *key_sep = ": ";
	if (present(sep)) {
		if (sep->k != JV_LIST || sep->u.l->n != 2 || sep->u.l->v[0].k != JV_STR || sep->u.l->v[1].k != JV_STR)
			return jerr(c, "tojson: separators must be a pair of strings");
		item_sep = jpool_strdup(c->pool, sep->u.l->v[0].u.s.p, sep->u.l->v[0].u.s.n);
		key_sep = jpool_strdup(c->pool, sep->u.l->v[1].u.s.p, sep->u.l->v[1].u.s.n);
		if (!item_sep || !key_sep)
			return oom(c);
	}
	struct strbuf b = {.limit = JINJA_MAX_OUT};
	if (jv_to_json(c, v, &b, indent, item_sep, key_sep, sk && jv_truthy(sk), 0) < 0) {
		free(b.p);
		return -1;
	}
	return jinja_pool_str(c, &b, out);
}

/* str() of v; Undefined -> "" */
static int soft_str(struct jctx *c, const struct jval *v, struct jval *out) { return jv_stringify(c, v, out); }

static int indent_filter(struct jctx *c, const struct jval *s, const struct jval *width, bool first, bool blank,
			 struct jval *out)
{
	struct jval ind = jv_cstr("    ");
	if (width && width->k == JV_STR) {
		ind = *width;
	} else if (width && width->k == JV_INT) {
		long long w = width->u.i < 0 ? 0 : width->u.i > 256 ? 256 : width->u.i;
		char *p = jpool_alloc(c->pool, (size_t)w + 1);
		if (!p)
			return oom(c);
		memset(p, ' ', (size_t)w);
		ind = jv_str(p, (size_t)w);
	}
	struct strbuf b = {.limit = JINJA_MAX_OUT};
	const char *p = s->u.s.p, *end = p + s->u.s.n;
	bool first_line = true;
	/* Jinja: (s + "\n").splitlines(), i.e. the pieces of s split at "\n" */
	for (;;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		if (!first_line)
			strbuf_putc(&b, '\n');
		if (first_line ? first : (blank || le > p))
			strbuf_put(&b, ind.u.s.p, ind.u.s.n);
		strbuf_put(&b, p, (size_t)(le - p));
		first_line = false;
		if (!nl)
			break;
		p = nl + 1;
	}
	return jinja_pool_str(c, &b, out);
}

/* case-insensitive ordering for strings, as Jinja's sort/unique/min/max default */
static int cmp_ci(struct jctx *c, const struct jval *a, const struct jval *b, bool cs, int *r)
{
	if (!cs && a->k == JV_STR && b->k == JV_STR) {
		struct jval la, lb;
		if (jinja_change_case(c, a, 0, &la) < 0 || jinja_change_case(c, b, 0, &lb) < 0)
			return -1;
		return jv_compare(c, &la, &lb, r);
	}
	return jv_compare(c, a, b, r);
}

/* The stable order of keys[0, n) (insertion sort: template lists are short), ascending
 * unless rev; strings compared case-insensitively unless cs. *ord is pool memory. */
static int sort_order(struct jctx *c, const struct jval *keys, size_t n, bool cs, bool rev, size_t **ord)
{
	size_t *o = jpool_alloc(c->pool, (n + 1) * sizeof *o);
	if (!o)
		return oom(c);
	for (size_t i = 0; i < n; i++)
		o[i] = i;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0; j--) {
			int cmp;
			if (cmp_ci(c, &keys[o[j - 1]], &keys[o[j]], cs, &cmp) < 0)
				return -1;
			if (rev ? cmp >= 0 : cmp <= 0)
				break;
			size_t t = o[j];
			o[j] = o[j - 1];
			o[j - 1] = t;
		}
	*ord = o;
	return 0;
}

static int key_of(struct jctx *c, const struct jval *v, const struct jval *attr, struct jval *out)
{
	if (!present(attr)) {
		*out = *v;
		return 0;
	}
	if (attr->k == JV_INT) {
		if (v->k == JV_LIST && attr->u.i >= 0 && (size_t)attr->u.i < v->u.l->n)
			*out = v->u.l->v[attr->u.i];
		else
			*out = jv_undef("no such item");
		return 0;
	}
	if (attr->k != JV_STR)
		return jerr(c, "attribute must be a string");
	/* dotted paths: "function.name" */
	struct jval cur = *v;
	const char *p = attr->u.s.p, *end = p + attr->u.s.n;
	while (p <= end) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		const char *e = dot ? dot : end;
		char *name = jpool_strdup(c->pool, p, (size_t)(e - p));
		if (!name)
			return oom(c);
		struct jval nx;
		if (cur.k == JV_UNDEF) {
			*out = cur;
			return 0;
		}
		if (jinja_getattr(c, &cur, name, &nx) < 0)
			return -1;
		cur = nx;
		if (!dot)
			break;
		p = dot + 1;
	}
	*out = cur;
	return 0;
}

static int select_filter(struct jctx *c, const char *fname, const struct jval *v, const struct jval *args, int nargs,
			 const char **kwn, const struct jval *kw, int nkw, struct jval *out)
{
	bool attr_mode = strstr(fname, "attr") != NULL, reject = fname[0] == 'r';
	struct jval items;
	if (jv_iter_list(c, v, &items) < 0)
		return -1;
	int ti = attr_mode ? 1 : 0;
	const struct jval *attr = attr_mode ? ARG(0, NULL) : NULL;
	const struct jval *test = ti < nargs ? &args[ti] : NULL;
	if (attr_mode && (!attr || attr->k != JV_STR))
		return jerr(c, "%s needs an attribute name", fname);
	if (test && (test->k != JV_STR || !jinja_test_known(jpool_strdup(c->pool, test->u.s.p, test->u.s.n))))
		return jerr(c, "%s: unknown test", fname);
	*out = jv_list(c->pool, items.u.l->n);
	if (out->k != JV_LIST)
		return oom(c);
	for (size_t i = 0; i < items.u.l->n; i++) {
		struct jval x = items.u.l->v[i];
		if (attr && key_of(c, &items.u.l->v[i], attr, &x) < 0)
			return -1;
		bool r;
		if (test) {
			if (jinja_test(c, jpool_strdup(c->pool, test->u.s.p, test->u.s.n), &x, args + ti + 1,
				       nargs - ti - 1, &r) < 0)
				return -1;
		} else {
			r = jv_truthy(&x);
		}
		if (r != reject)
			out->u.l->v[out->u.l->n++] = items.u.l->v[i];
	}
	return 0;
}

/* The filters on the items of a sequence (list, string characters, dict keys). */
static int seq_filter(struct jctx *c, const char *name, const struct jval *v, const struct jval *args, int nargs,
		      const char **kwn, const struct jval *kw, int nkw, struct jval *out)
{
	struct jval items;
	if (jv_iter_list(c, v, &items) < 0)
		return -1;
	struct jlist *l = items.u.l;
	if (!strcmp(name, "list")) {
		*out = jv_list(c->pool, l->n);
		if (out->k != JV_LIST)
			return oom(c);
		memcpy(out->u.l->v, l->v, l->n * sizeof *l->v);
		out->u.l->n = l->n;
		return 0;
	}
	if (!strcmp(name, "first") || !strcmp(name, "last")) {
		if (!l->n)
			*out = jv_undef(name[0] == 'f' ? "No first item, sequence was empty."
						       : "No last item, sequence was empty.");
		else
			*out = l->v[name[0] == 'f' ? 0 : l->n - 1];
		return 0;
	}
	if (!strcmp(name, "reverse")) {
		if (v->k == JV_STR) {
			struct strbuf b = {0};
			for (size_t i = l->n; i-- > 0;)
				strbuf_put(&b, l->v[i].u.s.p, l->v[i].u.s.n);
			return jinja_pool_str(c, &b, out);
		}
		*out = jv_list(c->pool, l->n);
		if (out->k != JV_LIST)
			return oom(c);
		for (size_t i = l->n; i-- > 0;)
			out->u.l->v[out->u.l->n++] = l->v[i];
		return 0;
	}
	if (!strcmp(name, "map")) {
		const struct jval *attr = ARG(-1, "attribute"), *dflt = ARG(-1, "default");
		*out = jv_list(c->pool, l->n);
		if (out->k != JV_LIST)
			return oom(c);
		if (!attr && (nargs < 1 || args[0].k != JV_STR))
			return jerr(c, "map needs a filter name or attribute=");
		const char *fname = attr ? NULL : jpool_strdup(c->pool, args[0].u.s.p, args[0].u.s.n);
		if (fname && !jinja_filter_known(fname))
			return jerr(c, "map: unsupported filter \"%s\"", fname);
		for (size_t i = 0; i < l->n; i++) {
			struct jval r;
			if (attr) {
				if (key_of(c, &l->v[i], attr, &r) < 0)
					return -1;
				if (r.k == JV_UNDEF && dflt)
					r = *dflt;
			} else if (jinja_filter(c, fname, &l->v[i], args + 1, nargs - 1, kwn, kw, nkw, &r) < 0) {
				return -1;
			}
			out->u.l->v[out->u.l->n++] = r;
		}
		return 0;
	}
	const struct jval *attr = ARG(-1, "attribute"), *csv = ARG(-1, "case_sensitive");
	bool cs = csv && jv_truthy(csv);
	struct jval *keys = jpool_alloc(c->pool, (l->n + 1) * sizeof *keys);
	if (!keys)
		return oom(c);
	for (size_t i = 0; i < l->n; i++)
		if (key_of(c, &l->v[i], attr, &keys[i]) < 0)
			return -1;
	if (!strcmp(name, "sort")) {
		const struct jval *rev = ARG(0, "reverse");
		size_t *ord;
		if (sort_order(c, keys, l->n, cs, rev && jv_truthy(rev), &ord) < 0)
			return -1;
		*out = jv_list(c->pool, l->n);
		if (out->k != JV_LIST)
			return oom(c);
		for (size_t i = 0; i < l->n; i++)
			out->u.l->v[out->u.l->n++] = l->v[ord[i]];
		return 0;
	}
	if (!strcmp(name, "unique")) {
		*out = jv_list(c->pool, l->n);
		if (out->k != JV_LIST)
			return oom(c);
		for (size_t i = 0; i < l->n; i++) {
			bool seen = false;
			for (size_t j = 0; j < i && !seen; j++) {
				int cmp = 1;
				if (keys[i].k == JV_STR && keys[j].k == JV_STR) {
					if (cmp_ci(c, &keys[i], &keys[j], cs, &cmp) < 0)
						return -1;
					seen = cmp == 0;
				} else {
					seen = jv_equal(&keys[i], &keys[j]);
				}
			}
			if (!seen)
				out->u.l->v[out->u.l->n++] = l->v[i];
		}
		return 0;
	}
	if (!strcmp(name, "min") || !strcmp(name, "max")) {
		if (!l->n) {
			*out = jv_undef("No aggregated item, sequence was empty.");
			return 0;
		}
		size_t best = 0;
		for (size_t i = 1; i < l->n; i++) {
			int cmp;
			if (cmp_ci(c, &keys[i], &keys[best], cs, &cmp) < 0)
				return -1;
			if (name[1] == 'i' ? cmp < 0 : cmp > 0)
				best = i;
		}
		*out = l->v[best];
		return 0;
	}
	if (!strcmp(name, "sum")) {
		const struct jval *st = ARG(1, "start");
		struct jval acc = st ? *st : jv_int(0);
		for (size_t i = 0; i < l->n; i++) {
			struct jval a = acc, b = keys[i];
			bool ints = (a.k == JV_INT || a.k == JV_BOOL) && (b.k == JV_INT || b.k == JV_BOOL);
			bool nums = ints || ((a.k == JV_INT || a.k == JV_FLOAT || a.k == JV_BOOL) &&
					     (b.k == JV_INT || b.k == JV_FLOAT || b.k == JV_BOOL));
			if (!nums)
				return jerr(c, "sum: unsupported operand types '%s' and '%s'", jv_typename(&a),
					    jv_typename(&b));
			double fa = a.k == JV_FLOAT ? a.u.f : (double)(a.k == JV_INT ? a.u.i : a.u.b);
			double fb = b.k == JV_FLOAT ? b.u.f : (double)(b.k == JV_INT ? b.u.i : b.u.b);
			long long r; /* an int sum that overflows goes to float, as + does */
			if (ints &&
			    !__builtin_add_overflow(a.k == JV_INT ? a.u.i : a.u.b, b.k == JV_INT ? b.u.i : b.u.b, &r))
				acc = jv_int(r);
			else
				acc = jv_float(fa + fb);
		}
		*out = acc;
		return 0;
	}
	return jerr(c, "unsupported filter \"%s\"", name);
}

/* abs, int, float, round */
static int num_filter(struct jctx *c, const char *name, const struct jval *v, const struct jval *args, int nargs,
		      const char **kwn, const struct jval *kw, int nkw, struct jval *out)
{
	if (!strcmp(name, "abs")) {
		if (v->k == JV_INT && v->u.i == LLONG_MIN) /* llabs would overflow: a float, as + does */
			*out = jv_float(-(double)LLONG_MIN);
		else if (v->k == JV_INT || v->k == JV_BOOL)
			*out = jv_int(llabs(v->k == JV_INT ? v->u.i : v->u.b));
		else if (v->k == JV_FLOAT)
			*out = jv_float(fabs(v->u.f));
		else
			return jerr(c, "bad operand type for abs(): '%s'", jv_typename(v));
		return 0;
	}
	if (!strcmp(name, "int") || !strcmp(name, "float")) {
		bool is_int = name[0] == 'i';
		const struct jval *dv = ARG(0, "default");
		double f = 0;
		bool ok = true;
		if (v->k == JV_INT || v->k == JV_BOOL)
			f = (double)(v->k == JV_INT ? v->u.i : v->u.b);
		else if (v->k == JV_FLOAT)
			f = v->u.f;
		else if (v->k == JV_STR) {
			char *t = jpool_strdup(c->pool, v->u.s.p, v->u.s.n), *e;
			if (!t)
				return oom(c);
			if (is_int) {
				long long i = strtoll(t, &e, 10);
				while (*e == ' ' || *e == '\n' || *e == '\t')
					e++;
				if (*e == 0 && e != t) {
					*out = jv_int(i);
					return 0;
				}
			}
			f = strtod(t, &e);
			while (*e == ' ' || *e == '\n' || *e == '\t')
				e++;
			ok = *e == 0 && e != t;
		} else {
			ok = false;
		}
		if (!ok) {
			*out = dv ? *dv : is_int ? jv_int(0) : jv_float(0.0);
			return 0;
		}
		if (is_int && v->k == JV_INT) {
			*out = *v;
			return 0;
		}
		*out = is_int ? jv_int((long long)f) : jv_float(f);
		return 0;
	}
	if (!strcmp(name, "round")) {
		const struct jval *pr = ARG(0, "precision"), *me = ARG(1, "method");
		double f = v->k == JV_FLOAT  ? v->u.f
			   : v->k == JV_INT  ? (double)v->u.i
			   : v->k == JV_BOOL ? v->u.b
					     : NAN;
		if (isnan(f) && v->k != JV_FLOAT)
			return jerr(c, "round needs a number");
		double m = pow(10, (double)(pr && pr->k == JV_INT ? pr->u.i : 0));
		const char *meth = me && me->k == JV_STR ? me->u.s.p : "common";
		double x = f * m;
		x = !strcmp(meth, "ceil") ? ceil(x) : !strcmp(meth, "floor") ? floor(x) : nearbyint(x);
		*out = jv_float(x / m);
		return 0;
	}
	return jerr(c, "unsupported filter \"%s\"", name);
}

int jinja_filter(struct jctx *c, const char *name, struct jval *v, const struct jval *args, int nargs,
		 const char **kwn, const struct jval *kw, int nkw, struct jval *out)
{
	struct jval s;
	if (!strcmp(name, "safe")) {
		*out = *v;
		return 0;
	}
	if (!strcmp(name, "tojson"))
		return tojson(c, v, args, nargs, kwn, kw, nkw, out);
	if (!strcmp(name, "default") || !strcmp(name, "d")) {
		const struct jval *dv = ARG(0, "default_value"), *bo = ARG(1, "boolean");
		bool use = v->k == JV_UNDEF || (bo && jv_truthy(bo) && !jv_truthy(v));
		*out = use ? (dv ? *dv : jv_cstr("")) : *v;
		return 0;
	}
	if (!strcmp(name, "length") || !strcmp(name, "count")) {
		long long n = 0;
		if (length(c, v, &n) < 0)
			return -1;
		*out = jv_int(n);
		return 0;
	}
	if (!strcmp(name, "string"))
		return soft_str(c, v, out);
	if (!strcmp(name, "trim")) {
		const struct jval *ch = ARG(0, "chars");
		if (soft_str(c, v, &s) < 0)
			return -1;
		*out = jinja_strip(&s, present(ch) && ch->k == JV_STR ? ch : NULL, true, true);
		return 0;
	}
	int mode = !strcmp(name, "lower")        ? 0
		   : !strcmp(name, "upper")      ? 1
		   : !strcmp(name, "capitalize") ? 2
		   : !strcmp(name, "title")      ? 3
						 : -1;
	if (mode >= 0)
		return soft_str(c, v, &s) < 0 ? -1 : jinja_change_case(c, &s, mode, out);
	if (!strcmp(name, "replace")) {
		const struct jval *o = ARG(0, "old"), *n = ARG(1, "new"), *cnt = ARG(2, "count");
		if (!o || !n || o->k != JV_STR || n->k != JV_STR)
			return jerr(c, "replace needs two string arguments");
		if (soft_str(c, v, &s) < 0)
			return -1;
		return jinja_replace(c, &s, o, n, cnt && cnt->k == JV_INT ? cnt->u.i : -1, out);
	}
	if (!strcmp(name, "join")) {
		const struct jval *sep = ARG(0, "d"), *attr = ARG(1, "attribute");
		struct jval sv = jv_cstr("");
		if (sep && soft_str(c, sep, &sv) < 0)
			return -1;
		const char *an = NULL;
		if (present(attr)) {
			if (attr->k != JV_STR)
				return jerr(c, "join attribute must be a string");
			an = jpool_strdup(c->pool, attr->u.s.p, attr->u.s.n);
		}
		return jinja_join(c, v, &sv, an, out);
	}
	if (!strcmp(name, "indent")) {
		const struct jval *w = ARG(0, "width"), *f = ARG(1, "first"), *bl = ARG(2, "blank");
		if (soft_str(c, v, &s) < 0)
			return -1;
		return indent_filter(c, &s, w, f && jv_truthy(f), bl && jv_truthy(bl), out);
	}
	if (!strcmp(name, "attr")) {
		const struct jval *a = ARG(0, "name");
		if (!a || a->k != JV_STR)
			return jerr(c, "attr needs a name");
		return jinja_getattr(c, v, jpool_strdup(c->pool, a->u.s.p, a->u.s.n), out);
	}
	if (!strcmp(name, "abs") || !strcmp(name, "int") || !strcmp(name, "float") || !strcmp(name, "round"))
		return num_filter(c, name, v, args, nargs, kwn, kw, nkw, out);
	if (!strcmp(name, "items")) {
		if (v->k == JV_UNDEF) {
			*out = jv_list(c->pool, 0);
			return out->k == JV_LIST ? 0 : oom(c);
		}
		if (v->k != JV_DICT)
			return jerr(c, "items filter needs a mapping, not %s", jv_typename(v));
		struct jmethod m = {.self = *v, .name = "items"};
		struct jval mv = {.k = JV_METHOD};
		mv.u.m = &m;
		return jinja_call(c, &mv, NULL, 0, NULL, NULL, 0, out);
	}
	if (!strcmp(name, "dictsort")) {
		const struct jval *csv = ARG(0, "case_sensitive"), *by = ARG(1, "by"), *rev = ARG(2, "reverse");
		if (v->k != JV_DICT)
			return jerr(c, "dictsort needs a mapping, not %s", jv_typename(v));
		bool by_value = by && by->k == JV_STR && by->u.s.n == 5 && !memcmp(by->u.s.p, "value", 5);
		const struct jdict *d = v->u.d;
		size_t *ord;
		if (sort_order(c, by_value ? d->vals : d->keys, d->n, csv && jv_truthy(csv), rev && jv_truthy(rev),
			       &ord) < 0)
			return -1;
		*out = jv_list(c->pool, d->n);
		if (out->k != JV_LIST)
			return oom(c);
		for (size_t i = 0; i < d->n; i++) {
			struct jval pair = jv_list(c->pool, 2);
			if (pair.k != JV_LIST)
				return oom(c);
			pair.u.l->tuple = true;
			pair.u.l->v[0] = d->keys[ord[i]];
			pair.u.l->v[1] = d->vals[ord[i]];
			pair.u.l->n = 2;
			out->u.l->v[out->u.l->n++] = pair;
		}
		return 0;
	}
	if (!strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") ||
	    !strcmp(name, "rejectattr"))
		return select_filter(c, name, v, args, nargs, kwn, kw, nkw, out);
	return seq_filter(c, name, v, args, nargs, kwn, kw, nkw, out);
}
