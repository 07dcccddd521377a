/* Jinja evaluator: statements (if/for/set/macro/break/continue), expressions and Python
 * operator semantics. Scoping follows Jinja: each for-loop iteration and each macro call has
 * its own scope (a `set` inside a loop does not leak out; namespace() objects are how
 * templates carry state across iterations), if-blocks do not. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"

struct jscope {
	struct jscope *parent;
	struct jdict vars;
};

int jerr(struct jctx *c, const char *fmt, ...)
{
	char msg[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return err_set(c->e, "chat template line %d: %s", c->line, msg);
}

struct jscope *jscope_new(struct jctx *c, struct jscope *parent)
{
	struct jscope *s = jpool_alloc(c->pool, sizeof *s);
	if (s)
		s->parent = parent;
	return s;
}

void jscope_set(struct jctx *c, struct jscope *s, const char *name, struct jval v)
{
	if (jdict_set(c->pool, &s->vars, jv_cstr(name), v) < 0)
		c->pool->over = true;
}

static int oom(struct jctx *c) { return jerr(c, "memory limit exceeded"); }

static const char *undef_hint(struct jctx *c, const char *fmt, const char *name)
{
	char tmp[256];
	snprintf(tmp, sizeof tmp, fmt, name);
	return jpool_strdup(c->pool, tmp, strlen(tmp));
}

static struct jval lookup(struct jctx *c, const char *name)
{
	size_t n = strlen(name);
	for (struct jscope *s = c->cur; s; s = s->parent) {
		struct jval *v = jdict_get(&s->vars, name, n);
		if (v)
			return *v;
	}
	struct jval g;
	if (jinja_global_lookup(name, &g))
		return g;
	return jv_undef(undef_hint(c, "'%s' is undefined", name));
}

static int undefined_error(struct jctx *c, const struct jval *v)
{
	return jerr(c, "%s", v->u.s.p ? v->u.s.p : "value is undefined");
}

/* ---- operators ---- */

static bool is_intlike(const struct jval *v) { return v->k == JV_INT || v->k == JV_BOOL; }
static bool is_num(const struct jval *v) { return is_intlike(v) || v->k == JV_FLOAT; }
static long long ival(const struct jval *v) { return v->k == JV_INT ? v->u.i : v->u.b; }
static double fval(const struct jval *v) { return v->k == JV_FLOAT ? v->u.f : (double)ival(v); }

static const char *opname(int op)
{
	switch (op) {
	case OP_ADD: return "+";
	case OP_SUB: return "-";
	case OP_MUL: return "*";
	case OP_DIV: return "/";
	case OP_FLOORDIV: return "//";
	case OP_MOD: return "%";
	case OP_POW: return "**";
	default: return "?";
	}
}

static int seq_repeat(struct jctx *c, const struct jval *s, long long k, struct jval *out)
{
	if (k < 0)
		k = 0;
	if (s->k == JV_STR) {
		if (s->u.s.n && (unsigned long long)k > JINJA_MAX_OUT / s->u.s.n)
			return jerr(c, "string repetition too large");
		char *p = jpool_alloc(c->pool, s->u.s.n * (size_t)k + 1);
		if (!p)
			return oom(c);
		for (long long i = 0; i < k; i++)
			memcpy(p + (size_t)i * s->u.s.n, s->u.s.p, s->u.s.n);
		*out = jv_str(p, s->u.s.n * (size_t)k);
		return 0;
	}
	if (s->u.l->n && (unsigned long long)k > 1000000 / s->u.l->n)
		return jerr(c, "list repetition too large");
	*out = jv_list(c->pool, s->u.l->n * (size_t)k);
	if (out->k != JV_LIST)
		return oom(c);
	out->u.l->tuple = s->u.l->tuple;
	for (long long i = 0; i < k; i++)
		for (size_t j = 0; j < s->u.l->n; j++)
			out->u.l->v[out->u.l->n++] = s->u.l->v[j];
	return 0;
}

static int binop(struct jctx *c, int op, const struct jval *a, const struct jval *b, struct jval *out)
{
	if (op == OP_TILDE) {
		struct strbuf buf = {.limit = JINJA_MAX_OUT};
		int r = jv_to_str(c, a, &buf);
		if (r == 0)
			r = jv_to_str(c, b, &buf);
		char *s = r == 0 ? jpool_strdup(c->pool, buf.p ? buf.p : "", buf.n) : NULL;
		size_t n = buf.n;
		free(buf.p);
		if (r < 0)
			return -1;
		if (!s)
			return oom(c);
		*out = jv_str(s, n);
		return 0;
	}
	if (a->k == JV_UNDEF)
		return undefined_error(c, a);
	if (b->k == JV_UNDEF)
		return undefined_error(c, b);
	if (is_num(a) && is_num(b)) {
		bool ints = is_intlike(a) && is_intlike(b);
		long long x = ints ? ival(a) : 0, y = ints ? ival(b) : 0, r = 0;
		double fx = fval(a), fy = fval(b);
		switch (op) {
		case OP_ADD:
			if (ints && !__builtin_add_overflow(x, y, &r))
				return *out = jv_int(r), 0;
			return *out = jv_float(fx + fy), 0;
		case OP_SUB:
			if (ints && !__builtin_sub_overflow(x, y, &r))
				return *out = jv_int(r), 0;
			return *out = jv_float(fx - fy), 0;
		case OP_MUL:
			if (ints && !__builtin_mul_overflow(x, y, &r))
				return *out = jv_int(r), 0;
			return *out = jv_float(fx * fy), 0;
		case OP_DIV:
			if (fy == 0)
				return jerr(c, "division by zero");
			return *out = jv_float(fx / fy), 0;
		case OP_FLOORDIV:
		case OP_MOD:
			if (ints) {
				if (y == 0)
					return jerr(c, "integer division or modulo by zero");
				if (x == INT64_MIN && y == -1)
					return jerr(c, "integer overflow");
				long long q = x / y, m = x % y;
				if (m != 0 && ((m < 0) != (y < 0))) {
					q--;
					m += y;
				}
				return *out = jv_int(op == OP_MOD ? m : q), 0;
			}
			if (fy == 0)
				return jerr(c, "float division by zero");
			if (op == OP_FLOORDIV)
				return *out = jv_float(floor(fx / fy)), 0;
			{
				double m = fmod(fx, fy);
				if (m != 0 && ((m < 0) != (fy < 0)))
					m += fy;
				return *out = jv_float(m), 0;
			}
		case OP_POW:
			if (ints && y >= 0) {
				long long acc = 1;
				bool ovf = false;
				for (long long i = 0; i < y && !ovf; i++)
					ovf = __builtin_mul_overflow(acc, x, &acc);
				if (!ovf)
					return *out = jv_int(acc), 0;
			}
			return *out = jv_float(pow(fx, fy)), 0;
		}
	}
	if (op == OP_ADD && a->k == JV_STR && b->k == JV_STR) {
		if (a->u.s.n + b->u.s.n > JINJA_MAX_OUT)
			return jerr(c, "string size limit exceeded");
		char *p = jpool_alloc(c->pool, a->u.s.n + b->u.s.n + 1);
		if (!p)
			return oom(c);
		memcpy(p, a->u.s.p, a->u.s.n);
		memcpy(p + a->u.s.n, b->u.s.p, b->u.s.n);
		*out = jv_str(p, a->u.s.n + b->u.s.n);
		return 0;
	}
	if (op == OP_ADD && a->k == JV_LIST && b->k == JV_LIST && a->u.l->tuple == b->u.l->tuple) {
		*out = jv_list(c->pool, a->u.l->n + b->u.l->n);
		if (out->k != JV_LIST)
			return oom(c);
		out->u.l->tuple = a->u.l->tuple;
		for (size_t i = 0; i < a->u.l->n; i++)
			out->u.l->v[out->u.l->n++] = a->u.l->v[i];
		for (size_t i = 0; i < b->u.l->n; i++)
			out->u.l->v[out->u.l->n++] = b->u.l->v[i];
		return 0;
	}
	if (op == OP_MUL && (a->k == JV_STR || a->k == JV_LIST) && is_intlike(b))
		return seq_repeat(c, a, ival(b), out);
	if (op == OP_MUL && (b->k == JV_STR || b->k == JV_LIST) && is_intlike(a))
		return seq_repeat(c, b, ival(a), out);
	if (op == OP_ADD && a->k == JV_STR)
		return jerr(c, "can only concatenate str (not \"%s\") to str", jv_typename(b));
	return jerr(c, "unsupported operand type(s) for %s: '%s' and '%s'", opname(op), jv_typename(a),
		    jv_typename(b));
}

/* Python slice indices for a sequence of length n. */
static void slice_indices(long long n, const struct jval *st, const struct jval *sp, long long step, long long *start,
			  long long *stop)
{
	bool has_st = st && st->k != JV_NONE && st->k != JV_UNDEF;
	bool has_sp = sp && sp->k != JV_NONE && sp->k != JV_UNDEF;
	long long lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
	long long a = has_st ? ival(st) : (step < 0 ? hi : lo);
	long long b = has_sp ? ival(sp) : (step < 0 ? lo : hi);
	if (has_st) {
		if (a < 0)
			a += n;
		a = a < lo ? lo : a > hi ? hi : a;
	}
	if (has_sp) {
		if (b < 0)
			b += n;
		b = b < lo ? lo : b > hi ? hi : b;
	}
	*start = a;
	*stop = b;
}

static int do_slice(struct jctx *c, const struct jval *obj, const struct jval *st, const struct jval *sp,
		    const struct jval *stp, struct jval *out)
{
	for (int i = 0; i < 3; i++) {
		const struct jval *p = i == 0 ? st : i == 1 ? sp : stp;
		if (p && p->k != JV_NONE && p->k != JV_UNDEF && !is_intlike(p))
			return jerr(c, "slice indices must be integers or None");
	}
	long long step = stp && is_intlike(stp) ? ival(stp) : 1;
	if (step == 0)
		return jerr(c, "slice step cannot be zero");
	if (obj->k == JV_UNDEF)
		return undefined_error(c, obj);
	if (obj->k == JV_STR) {
		size_t n = utf8_len(obj->u.s.p, obj->u.s.n);
		long long a, b;
		slice_indices((long long)n, st, sp, step, &a, &b);
		if (step == 1) {
			size_t o1 = a < b ? utf8_offset(obj->u.s.p, obj->u.s.n, (size_t)a) : 0;
			size_t o2 = a < b ? utf8_offset(obj->u.s.p, obj->u.s.n, (size_t)b) : 0;
			*out = jv_str(obj->u.s.p + o1, o2 - o1);
			return 0;
		}
		struct jval chars;
		if (jv_iter_list(c, obj, &chars) < 0)
			return -1;
		struct strbuf buf = {0};
		for (long long i = a; step > 0 ? i < b : i > b; i += step)
			strbuf_put(&buf, chars.u.l->v[i].u.s.p, chars.u.l->v[i].u.s.n);
		char *s = jpool_strdup(c->pool, buf.p ? buf.p : "", buf.n);
		size_t bn = buf.n;
		free(buf.p);
		if (!s)
			return oom(c);
		*out = jv_str(s, bn);
		return 0;
	}
	if (obj->k == JV_LIST) {
		long long a, b;
		slice_indices((long long)obj->u.l->n, st, sp, step, &a, &b);
		*out = jv_list(c->pool, obj->u.l->n);
		if (out->k != JV_LIST)
			return oom(c);
		out->u.l->tuple = obj->u.l->tuple;
		for (long long i = a; step > 0 ? i < b : i > b; i += step)
			out->u.l->v[out->u.l->n++] = obj->u.l->v[i];
		return 0;
	}
	*out = jv_undef(undef_hint(c, "'%s' object is not subscriptable", jv_typename(obj)));
	return 0;
}

static int getitem(struct jctx *c, const struct jval *obj, const struct jval *key, struct jval *out)
{
	if (obj->k == JV_UNDEF)
		return undefined_error(c, obj);
	if ((obj->k == JV_LIST || obj->k == JV_STR) && is_intlike(key)) {
		long long i = ival(key);
		long long n = obj->k == JV_LIST ? (long long)obj->u.l->n : (long long)utf8_len(obj->u.s.p, obj->u.s.n);
		if (i < 0)
			i += n;
		if (i < 0 || i >= n) {
			*out = jv_undef(undef_hint(c, "%s index out of range", jv_typename(obj)));
			return 0;
		}
		if (obj->k == JV_LIST) {
			*out = obj->u.l->v[i];
		} else {
			size_t o1 = utf8_offset(obj->u.s.p, obj->u.s.n, (size_t)i);
			size_t o2 = utf8_offset(obj->u.s.p, obj->u.s.n, (size_t)i + 1);
			*out = jv_str(obj->u.s.p + o1, o2 - o1);
		}
		return 0;
	}
	if (obj->k == JV_DICT) {
		for (size_t i = 0; i < obj->u.d->n; i++)
			if (jv_equal(&obj->u.d->keys[i], key)) {
				*out = obj->u.d->vals[i];
				return 0;
			}
	}
	if (key->k == JV_STR) /* Jinja falls back to getattr for string keys */
		return jinja_getattr(c, obj, key->u.s.p, out);
	*out = jv_undef(undef_hint(c, "'%s' object has no such element", jv_typename(obj)));
	return 0;
}

static int eval_args(struct jctx *c, const struct jnode *x, struct jval *args, struct jval *kw)
{
	for (int i = 0; i < x->n; i++)
		if (jinja_eval(c, x->list[i], &args[i]) < 0)
			return -1;
	for (int i = 0; i < x->nnames; i++)
		if (jinja_eval(c, x->list2[i], &kw[i]) < 0)
			return -1;
	return 0;
}

static int eval_inner(struct jctx *c, const struct jnode *x, struct jval *out)
{
	struct jval a, b;
	switch (x->kind) {
	case E_CONST: *out = x->val; return 0;
	case E_NAME: *out = lookup(c, x->name); return 0;
	case E_GETATTR:
		if (jinja_eval(c, x->a, &a) < 0)
			return -1;
		c->line = x->line;
		return jinja_getattr(c, &a, x->name, out);
	case E_GETITEM:
		if (jinja_eval(c, x->a, &a) < 0 || jinja_eval(c, x->b, &b) < 0)
			return -1;
		c->line = x->line;
		return getitem(c, &a, &b, out);
	case E_SLICE: {
		struct jval p[3] = {jv_none(), jv_none(), jv_none()};
		const struct jnode *q[3] = {x->b, x->c, x->d};
		if (jinja_eval(c, x->a, &a) < 0)
			return -1;
		for (int i = 0; i < 3; i++)
			if (q[i] && jinja_eval(c, q[i], &p[i]) < 0)
				return -1;
		c->line = x->line;
		return do_slice(c, &a, &p[0], &p[1], &p[2], out);
	}
	case E_CALL:
	case E_FILTER:
	case E_TEST: {
		struct jval args[x->n + 1], kw[x->nnames + 1];
		if (x->kind == E_CALL) {
			if (jinja_eval(c, x->a, &a) < 0)
				return -1;
		} else if (jinja_eval(c, x->a, &a) < 0) {
			return -1;
		}
		if (eval_args(c, x, args, kw) < 0)
			return -1;
		c->line = x->line;
		if (x->kind == E_CALL)
			return jinja_call(c, &a, args, x->n, x->names, kw, x->nnames, out);
		if (x->kind == E_FILTER)
			return jinja_filter(c, x->name, &a, args, x->n, x->names, kw, x->nnames, out);
		bool r;
		if (jinja_test(c, x->name, &a, args, x->n, &r) < 0)
			return -1;
		*out = jv_bool(x->op ? !r : r);
		return 0;
	}
	case E_UNARY:
		if (jinja_eval(c, x->a, &a) < 0)
			return -1;
		c->line = x->line;
		if (a.k == JV_UNDEF)
			return undefined_error(c, &a);
		if (!is_num(&a))
			return jerr(c, "bad operand type for unary %s: '%s'", x->op == OP_NEG ? "-" : "+",
				    jv_typename(&a));
		if (x->op == OP_POS)
			*out = a.k == JV_BOOL ? jv_int(a.u.b) : a;
		else
			*out = a.k == JV_FLOAT ? jv_float(-a.u.f) : jv_int(-ival(&a));
		return 0;
	case E_BINARY:
		if (jinja_eval(c, x->a, &a) < 0 || jinja_eval(c, x->b, &b) < 0)
			return -1;
		c->line = x->line;
		return binop(c, x->op, &a, &b, out);
	case E_COMPARE: {
		if (jinja_eval(c, x->list[0], &a) < 0)
			return -1;
		for (int i = 1; i < x->n; i++) {
			if (jinja_eval(c, x->list[i], &b) < 0)
				return -1;
			c->line = x->line;
			int op = x->ops[i - 1], cmp = 0;
			bool r;
			if (op == OP_EQ || op == OP_NE) {
				r = jv_equal(&a, &b) == (op == OP_EQ);
			} else if (op == OP_IN || op == OP_NOTIN) {
				if (jv_contains(c, &b, &a, &r) < 0)
					return -1;
				r = op == OP_IN ? r : !r;
			} else {
				if (jv_compare(c, &a, &b, &cmp) < 0)
					return -1;
				r = op == OP_LT ? cmp < 0 : op == OP_LE ? cmp <= 0 : op == OP_GT ? cmp > 0 : cmp >= 0;
			}
			if (!r) {
				*out = jv_bool(false);
				return 0;
			}
			a = b;
		}
		*out = jv_bool(true);
		return 0;
	}
	case E_AND:
	case E_OR:
		if (jinja_eval(c, x->a, &a) < 0)
			return -1;
		if (jv_truthy(&a) == (x->kind == E_OR)) {
			*out = a;
			return 0;
		}
		return jinja_eval(c, x->b, out);
	case E_NOT:
		if (jinja_eval(c, x->a, &a) < 0)
			return -1;
		*out = jv_bool(!jv_truthy(&a));
		return 0;
	case E_COND:
		if (jinja_eval(c, x->b, &a) < 0)
			return -1;
		if (jv_truthy(&a))
			return jinja_eval(c, x->a, out);
		if (x->c)
			return jinja_eval(c, x->c, out);
		*out = jv_undef("the inline if-expression evaluated to false and no else section was defined");
		return 0;
	case E_LIST:
	case E_TUPLE:
		*out = jv_list(c->pool, (size_t)x->n);
		if (out->k != JV_LIST)
			return oom(c);
		out->u.l->tuple = x->kind == E_TUPLE;
		for (int i = 0; i < x->n; i++)
			if (jinja_eval(c, x->list[i], &out->u.l->v[out->u.l->n++]) < 0)
				return -1;
		return 0;
	case E_DICT:
		*out = jv_dict(c->pool, (size_t)x->n);
		if (out->k != JV_DICT)
			return oom(c);
		for (int i = 0; i < x->n; i++) {
			if (jinja_eval(c, x->list[i], &a) < 0 || jinja_eval(c, x->list2[i], &b) < 0)
				return -1;
			if (a.k == JV_LIST || a.k == JV_DICT || a.k == JV_NS || a.k == JV_UNDEF) {
				c->line = x->line;
				return jerr(c, "unhashable type: '%s'", jv_typename(&a));
			}
			if (jdict_set(c->pool, out->u.d, a, b) < 0)
				return oom(c);
		}
		return 0;
	default: c->line = x->line; return jerr(c, "internal error: not an expression");
	}
}

int jinja_eval(struct jctx *c, const struct jnode *x, struct jval *out)
{
	if (c->pool->over)
		return oom(c);
	if (c->nest >= JINJA_MAX_NEST)
		return jerr(c, "nesting limit exceeded");
	c->nest++;
	int r = eval_inner(c, x, out);
	c->nest--;
	if (r == 0 && c->pool->over)
		return oom(c);
	return r;
}

/* ---- statements ---- */

static int exec_list(struct jctx *c, struct jnode *const *list, int n)
{
	for (int i = 0; i < n; i++) {
		if (jinja_exec(c, list[i]) < 0)
			return -1;
		if (c->loop_ctl)
			return 0;
	}
	return 0;
}

static int bind_targets(struct jctx *c, struct jscope *s, const char **names, int n, const struct jval *v)
{
	if (n == 1) {
		jscope_set(c, s, names[0], *v);
		return 0;
	}
	struct jval items;
	if (v->k != JV_LIST) {
		if (jv_iter_list(c, v, &items) < 0)
			return -1;
	} else {
		items = *v;
	}
	if (items.u.l->n != (size_t)n)
		return jerr(c,
			    items.u.l->n > (size_t)n ? "too many values to unpack (expected %d)"
						     : "not enough values to unpack (expected %d)",
			    n);
	for (int i = 0; i < n; i++)
		jscope_set(c, s, names[i], items.u.l->v[i]);
	return 0;
}

static int exec_for(struct jctx *c, const struct jnode *x)
{
	struct jval it, items;
	if (jinja_eval(c, x->a, &it) < 0)
		return -1;
	c->line = x->line;
	if (jv_iter_list(c, &it, &items) < 0)
		return -1;
	struct jscope *outer = c->cur;
	if (x->b) { /* "for x in xs if cond": filter first, so loop.length counts kept items */
		struct jval kept = jv_list(c->pool, items.u.l->n);
		if (kept.k != JV_LIST)
			return oom(c);
		for (size_t i = 0; i < items.u.l->n; i++) {
			struct jscope *s = jscope_new(c, outer);
			struct jval cond;
			if (!s)
				return oom(c);
			c->cur = s;
			int r = bind_targets(c, s, x->names, x->nnames, &items.u.l->v[i]);
			if (r == 0)
				r = jinja_eval(c, x->b, &cond);
			c->cur = outer;
			if (r < 0)
				return -1;
			if (jv_truthy(&cond))
				kept.u.l->v[kept.u.l->n++] = items.u.l->v[i];
		}
		items = kept;
	}
	size_t n = items.u.l->n;
	static const char *const keys[] = {"index",  "index0",   "revindex", "revindex0", "first", "last",
					   "length", "previtem", "nextitem", "depth",     "depth0"};
	/* One scope and one loop object per loop, reset each iteration (equivalent to fresh ones:
	 * nothing can hold a reference to a scope, and a saved `loop` is rare enough). */
	struct jscope *s = jscope_new(c, outer);
	struct jval lv = jv_dict(c->pool, 12);
	if (!s || lv.k != JV_DICT)
		return oom(c);
	for (size_t i = 0; i < n; i++) {
		if (++c->steps > JINJA_MAX_STEPS) {
			c->line = x->line;
			return jerr(c, "loop iteration limit exceeded");
		}
		struct jval vals[] = {jv_int((long long)i + 1),
				      jv_int((long long)i),
				      jv_int((long long)(n - i)),
				      jv_int((long long)(n - i - 1)),
				      jv_bool(i == 0),
				      jv_bool(i + 1 == n),
				      jv_int((long long)n),
				      i > 0 ? items.u.l->v[i - 1] : jv_undef("there is no previous item"),
				      i + 1 < n ? items.u.l->v[i + 1] : jv_undef("there is no next item"),
				      jv_int(1),
				      jv_int(0)};
		lv.u.d->n = 0;
		for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
			lv.u.d->keys[k] = jv_cstr(keys[k]);
			lv.u.d->vals[k] = vals[k];
		}
		lv.u.d->n = sizeof keys / sizeof keys[0];
		s->vars.n = 0;
		c->cur = s;
		jscope_set(c, s, "loop", lv);
		int r = bind_targets(c, s, x->names, x->nnames, &items.u.l->v[i]);
		if (r == 0)
			r = exec_list(c, x->list, x->n);
		c->cur = outer;
		if (r < 0)
			return -1;
		int ctl = c->loop_ctl;
		c->loop_ctl = 0;
		if (ctl == 1)
			break;
	}
	if (n == 0 && x->n2)
		return exec_list(c, x->list2, x->n2);
	return 0;
}

static int capture(struct jctx *c, struct jnode *const *list, int n, struct jval *out)
{
	struct strbuf buf = {.limit = JINJA_MAX_OUT}, *saved = c->out;
	c->out = &buf;
	int r = exec_list(c, list, n);
	c->out = saved;
	if (r == 0) {
		char *s = jpool_strdup(c->pool, buf.p ? buf.p : "", buf.n);
		if (!s)
			r = oom(c);
		else
			*out = jv_str(s, buf.n);
	}
	free(buf.p);
	return r;
}

int jinja_call_macro(struct jctx *c, const struct jnode *m, const struct jval *args, int nargs, const char **kwnames,
		     const struct jval *kwargs, int nkw, struct jval *out)
{
	if (c->depth >= JINJA_MAX_DEPTH || ++c->steps > JINJA_MAX_STEPS)
		return jerr(c, "macro recursion limit exceeded");
	if (nargs > m->nnames)
		return jerr(c, "macro '%s' takes not more than %d argument(s)", m->name, m->nnames);
	struct jscope *s = jscope_new(c, c->root);
	if (!s)
		return oom(c);
	struct jscope *saved = c->cur;
	c->cur = s;
	int r = 0;
	for (int i = 0; i < m->nnames && r == 0; i++) {
		struct jval v = jv_undef(undef_hint(c, "'%s' is undefined", m->names[i]));
		bool set = false;
		if (i < nargs) {
			v = args[i];
			set = true;
		}
		for (int k = 0; k < nkw; k++)
			if (!strcmp(kwnames[k], m->names[i])) {
				if (set) {
					c->cur = saved;
					return jerr(c, "macro '%s' got multiple values for argument '%s'", m->name,
						    m->names[i]);
				}
				v = kwargs[k];
				set = true;
			}
		if (!set && m->list2[i])
			r = jinja_eval(c, m->list2[i], &v); /* defaults see earlier parameters */
		jscope_set(c, s, m->names[i], v);
	}
	for (int k = 0; k < nkw && r == 0; k++) {
		bool known = false;
		for (int i = 0; i < m->nnames; i++)
			known |= !strcmp(kwnames[k], m->names[i]);
		if (!known)
			r = jerr(c, "macro '%s' takes no keyword argument '%s'", m->name, kwnames[k]);
	}
	int saved_ctl = c->loop_ctl;
	c->depth++;
	if (r == 0)
		r = capture(c, m->list, m->n, out);
	c->depth--;
	c->loop_ctl = saved_ctl;
	c->cur = saved;
	return r;
}

static int exec_inner(struct jctx *c, const struct jnode *x);

int jinja_exec(struct jctx *c, const struct jnode *x)
{
	if (c->pool->over)
		return oom(c);
	if (c->nest >= JINJA_MAX_NEST)
		return jerr(c, "nesting limit exceeded");
	c->nest++;
	int r = exec_inner(c, x);
	c->nest--;
	return r;
}

static int exec_inner(struct jctx *c, const struct jnode *x)
{
	struct jval v;
	c->line = x->line;
	switch (x->kind) {
	case N_DATA:
		if (strbuf_put(c->out, x->name, x->name_n) < 0)
			return jerr(c, "output size limit exceeded");
		return 0;
	case N_OUTPUT:
		if (jinja_eval(c, x->a, &v) < 0)
			return -1;
		return jv_to_str(c, &v, c->out);
	case N_IF:
		if (jinja_eval(c, x->a, &v) < 0)
			return -1;
		return jv_truthy(&v) ? exec_list(c, x->list, x->n) : exec_list(c, x->list2, x->n2);
	case N_FOR: return exec_for(c, x);
	case N_SET:
		if (jinja_eval(c, x->a, &v) < 0)
			return -1;
		c->line = x->line;
		return bind_targets(c, c->cur, x->names, x->nnames, &v);
	case N_SET_ATTR: {
		struct jval ns = lookup(c, x->name);
		if (jinja_eval(c, x->a, &v) < 0)
			return -1;
		c->line = x->line;
		if (ns.k != JV_NS)
			return jerr(c, "cannot assign attribute on non-namespace object");
		if (jdict_set(c->pool, ns.u.d, jv_cstr(x->names[0]), v) < 0)
			return oom(c);
		return 0;
	}
	case N_SET_BLOCK:
		if (capture(c, x->list, x->n, &v) < 0)
			return -1;
		jscope_set(c, c->cur, x->name, v);
		return 0;
	case N_MACRO:
		v.k = JV_MACRO;
		v.u.macro = x;
		jscope_set(c, c->cur, x->name, v);
		return 0;
	case N_BREAK: c->loop_ctl = 1; return 0;
	case N_CONTINUE: c->loop_ctl = 2; return 0;
	case N_BODY: return exec_list(c, x->list, x->n);
	default: return jerr(c, "internal error: not a statement");
	}
}
