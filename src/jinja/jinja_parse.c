/* Jinja parser: tokens -> AST, following jinja2/parser.py's grammar and precedence
 * (condexpr < or < and < not < compare < + - < ~ < * / // % < ** < unary < postfix/filter/test).
 * Unsupported statements, filters and tests are compile errors naming the construct and
 * its line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja_parse.h"

int jp_nvec_push(struct parser *P, struct nvec *a, struct jnode *x)
{
	if (a->n == a->cap) {
		int cap = a->cap ? a->cap * 2 : 8;
		struct jnode **v = realloc(a->v, (size_t)cap * sizeof *v);
		if (!v)
			return err_set(P->e, "chat template: out of memory");
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = x;
	return 0;
}

struct jnode **jp_nvec_done(struct parser *P, struct nvec *a)
{
	struct jnode **r = NULL;
	if (a->n) {
		r = jpool_alloc(P->pool, (size_t)a->n * sizeof *r);
		if (r)
			memcpy(r, a->v, (size_t)a->n * sizeof *r);
	}
	free(a->v);
	a->v = NULL;
	return r;
}

const char *jp_tokdesc(const struct jtoken *k)
{
	switch (k->t) {
	case TK_EOF: return "end of template";
	case TK_DATA: return "template data";
	case TK_BLOCK_BEGIN: return "'{%'";
	case TK_BLOCK_END: return "'%}'";
	case TK_VAR_BEGIN: return "'{{'";
	case TK_VAR_END: return "'}}'";
	case TK_NAME: return k->s;
	case TK_STRING: return "string";
	case TK_INT: return "integer";
	case TK_FLOAT: return "float";
	case TK_OP: return "operator";
	}
	return "?";
}

int jp_fail_unexpected(struct parser *P, const char *what)
{
	return err_set(P->e, "chat template line %d: expected %s, got %s", cur(P)->line, what, jp_tokdesc(cur(P)));
}

int jp_expect_op(struct parser *P, int op, const char *what)
{
	if (!is_op(P, op))
		return jp_fail_unexpected(P, what);
	adv(P);
	return 0;
}

struct jnode *jp_node(struct parser *P, enum jnkind k, int line)
{
	struct jnode *x = jpool_alloc(P->pool, sizeof *x);
	if (!x) {
		err_set(P->e, "chat template: out of memory");
		return NULL;
	}
	x->kind = k;
	x->line = line;
	return x;
}

static struct jnode *parse_unary(struct parser *P, bool with_filter);
static struct jnode *parse_or(struct parser *P);

/* (args, name=kw) after '(' has been consumed; stops after ')' */
static int parse_call_args(struct parser *P, struct jnode *x)
{
	struct nvec args = {0}, kwv = {0};
	const char *kwn[64];
	int nk = 0;
	while (!is_op(P, OP_RPAREN)) {
		if (args.n + nk > 0 && jp_expect_op(P, OP_COMMA, "',' or ')'") < 0)
			goto fail;
		if (is_op(P, OP_RPAREN))
			break;
		if (is_op(P, OP_MUL) || is_op(P, OP_POW)) {
			err_set(P->e, "chat template line %d: unsupported *args/**kwargs in call", cur(P)->line);
			goto fail;
		}
		if (cur(P)->t == TK_NAME && peek(P, 1)->t == TK_OP && peek(P, 1)->op == OP_ASSIGN) {
			if (nk == 64) {
				err_set(P->e, "chat template line %d: too many keyword arguments", cur(P)->line);
				goto fail;
			}
			kwn[nk++] = cur(P)->s;
			adv(P);
			adv(P);
			struct jnode *v = jp_parse_expr(P, true);
			if (!v || jp_nvec_push(P, &kwv, v) < 0)
				goto fail;
		} else {
			if (nk) {
				err_set(P->e, "chat template line %d: positional argument after keyword argument",
					cur(P)->line);
				goto fail;
			}
			struct jnode *v = jp_parse_expr(P, true);
			if (!v || jp_nvec_push(P, &args, v) < 0)
				goto fail;
		}
	}
	adv(P);
	x->n = args.n;
	x->list = jp_nvec_done(P, &args);
	x->nnames = nk;
	x->list2 = jp_nvec_done(P, &kwv);
	if (nk) {
		x->names = jpool_alloc(P->pool, (size_t)nk * sizeof *x->names);
		if (!x->names)
			return err_set(P->e, "chat template: out of memory");
		memcpy(x->names, kwn, (size_t)nk * sizeof *kwn);
	}
	return 0;
fail:
	free(args.v);
	free(kwv.v);
	return -1;
}

static struct jnode *parse_primary(struct parser *P)
{
	const struct jtoken *k = cur(P);
	struct jnode *x;
	if (k->t == TK_NAME) {
		x = jp_node(P, E_CONST, k->line);
		if (!x)
			return NULL;
		if (!strcmp(k->s, "true") || !strcmp(k->s, "True"))
			x->val = jv_bool(true);
		else if (!strcmp(k->s, "false") || !strcmp(k->s, "False"))
			x->val = jv_bool(false);
		else if (!strcmp(k->s, "none") || !strcmp(k->s, "None"))
			x->val = jv_none();
		else {
			x->kind = E_NAME;
			x->name = k->s;
		}
		adv(P);
		return x;
	}
	if (k->t == TK_STRING) {
		x = jp_node(P, E_CONST, k->line);
		if (!x)
			return NULL;
		struct strbuf b = {0};
		while (cur(P)->t == TK_STRING) { /* adjacent literals concatenate */
			strbuf_put(&b, cur(P)->s, cur(P)->n);
			adv(P);
		}
		char *s = jpool_strdup(P->pool, b.p ? b.p : "", b.n);
		size_t bn = b.n;
		free(b.p);
		if (!s) {
			err_set(P->e, "chat template: out of memory");
			return NULL;
		}
		x->val = jv_str(s, bn);
		return x;
	}
	if (k->t == TK_INT || k->t == TK_FLOAT) {
		x = jp_node(P, E_CONST, k->line);
		if (!x)
			return NULL;
		x->val = k->t == TK_INT ? jv_int(k->i) : jv_float(k->f);
		adv(P);
		return x;
	}
	if (is_op(P, OP_LPAREN)) {
		adv(P);
		x = jp_parse_tuple(P, true, true);
		if (!x || jp_expect_op(P, OP_RPAREN, "')'") < 0)
			return NULL;
		return x;
	}
	if (is_op(P, OP_LBRACKET) || is_op(P, OP_LBRACE)) {
		bool dict = is_op(P, OP_LBRACE);
		int close = dict ? OP_RBRACE : OP_RBRACKET;
		x = jp_node(P, dict ? E_DICT : E_LIST, k->line);
		if (!x)
			return NULL;
		adv(P);
		struct nvec keys = {0}, vals = {0};
		while (!is_op(P, close)) {
			if (keys.n && jp_expect_op(P, OP_COMMA, dict ? "',' or '}'" : "',' or ']'") < 0)
				goto fail;
			if (is_op(P, close))
				break;
			struct jnode *a = jp_parse_expr(P, true);
			if (!a || jp_nvec_push(P, &keys, a) < 0)
				goto fail;
			if (dict) {
				if (jp_expect_op(P, OP_COLON, "':'") < 0)
					goto fail;
				struct jnode *v = jp_parse_expr(P, true);
				if (!v || jp_nvec_push(P, &vals, v) < 0)
					goto fail;
			}
		}
		adv(P);
		x->n = keys.n;
		x->list = jp_nvec_done(P, &keys);
		x->n2 = vals.n;
		x->list2 = jp_nvec_done(P, &vals);
		return x;
fail:
		free(keys.v);
		free(vals.v);
		return NULL;
	}
	jp_fail_unexpected(P, "an expression");
	return NULL;
}

static struct jnode *parse_postfix(struct parser *P, struct jnode *x)
{
	while (x) {
		int line = cur(P)->line;
		if (is_op(P, OP_DOT)) {
			adv(P);
			if (cur(P)->t == TK_NAME) {
				struct jnode *g = jp_node(P, E_GETATTR, line);
				if (!g)
					return NULL;
				g->a = x;
				g->name = cur(P)->s;
				adv(P);
				x = g;
			} else if (cur(P)->t == TK_INT) {
				struct jnode *g = jp_node(P, E_GETITEM, line), *c = jp_node(P, E_CONST, line);
				if (!g || !c)
					return NULL;
				c->val = jv_int(cur(P)->i);
				g->a = x;
				g->b = c;
				adv(P);
				x = g;
			} else {
				jp_fail_unexpected(P, "an attribute name");
				return NULL;
			}
		} else if (is_op(P, OP_LBRACKET)) {
			adv(P);
			struct jnode *parts[3] = {0};
			int np = 0;
			bool slice = false;
			for (;;) {
				if (!is_op(P, OP_COLON) && !is_op(P, OP_RBRACKET)) {
					parts[np] = jp_parse_expr(P, true);
					if (!parts[np])
						return NULL;
				}
				if (is_op(P, OP_COLON) && np < 2) {
					slice = true;
					np++;
					adv(P);
					continue;
				}
				break;
			}
			if (jp_expect_op(P, OP_RBRACKET, "']'") < 0)
				return NULL;
			if (!slice && !parts[0]) {
				err_set(P->e, "chat template line %d: empty subscript", line);
				return NULL;
			}
			struct jnode *g = jp_node(P, slice ? E_SLICE : E_GETITEM, line);
			if (!g)
				return NULL;
			g->a = x;
			g->b = parts[0];
			g->c = parts[1];
			g->d = parts[2];
			x = g;
		} else if (is_op(P, OP_LPAREN)) {
			adv(P);
			struct jnode *c = jp_node(P, E_CALL, line);
			if (!c)
				return NULL;
			c->a = x;
			if (parse_call_args(P, c) < 0)
				return NULL;
			x = c;
		} else {
			break;
		}
	}
	return x;
}

/* filter/test name: NAME ("." NAME)*, consumed; NULL on error */
static const char *dotted_name(struct parser *P)
{
	const char *name = cur(P)->s;
	adv(P);
	while (is_op(P, OP_DOT)) {
		adv(P);
		if (cur(P)->t != TK_NAME) {
			jp_fail_unexpected(P, "a name");
			return NULL;
		}
		size_t a = strlen(name), b = strlen(cur(P)->s);
		char *joined = jpool_alloc(P->pool, a + b + 2);
		if (!joined) {
			err_set(P->e, "chat template: out of memory");
			return NULL;
		}
		memcpy(joined, name, a);
		joined[a] = '.';
		memcpy(joined + a + 1, cur(P)->s, b + 1);
		name = joined;
		adv(P);
	}
	return name;
}

/* The (dotted) name of a filter or test at the cursor, refused when `known` does not know it. */
static const char *known_name(struct parser *P, const char *what, bool (*known)(const char *), int line)
{
	if (cur(P)->t != TK_NAME) {
		char expect[16];
		snprintf(expect, sizeof expect, "a %s name", what);
		jp_fail_unexpected(P, expect);
		return NULL;
	}
	const char *name = dotted_name(P);
	if (name && !known(name)) {
		err_set(P->e, "chat template line %d: unsupported %s \"%s\"", line, what, name);
		return NULL;
	}
	return name;
}

static struct jnode *parse_filter_expr(struct parser *P, struct jnode *x)
{
	while (x) {
		int line = cur(P)->line;
		if (is_op(P, OP_PIPE)) {
			adv(P);
			const char *name = known_name(P, "filter", jinja_filter_known, line);
			if (!name)
				return NULL;
			struct jnode *f = jp_node(P, E_FILTER, line);
			if (!f)
				return NULL;
			f->a = x;
			f->name = name;
			if (is_op(P, OP_LPAREN)) {
				adv(P);
				if (parse_call_args(P, f) < 0)
					return NULL;
			}
			x = f;
		} else if (is_name(P, "is")) {
			adv(P);
			struct jnode *t = jp_node(P, E_TEST, line);
			if (!t)
				return NULL;
			if (is_name(P, "not")) {
				t->op = 1;
				adv(P);
			}
			const char *name = known_name(P, "test", jinja_test_known, line);
			if (!name)
				return NULL;
			t->a = x;
			t->name = name;
			const struct jtoken *k = cur(P);
			if (is_op(P, OP_LPAREN)) {
				adv(P);
				if (parse_call_args(P, t) < 0)
					return NULL;
			} else if ((k->t == TK_NAME || k->t == TK_STRING || k->t == TK_INT || k->t == TK_FLOAT ||
				    is_op(P, OP_LBRACKET) || is_op(P, OP_LBRACE)) &&
				   !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") &&
				   !is_name(P, "is") && !is_name(P, "if") && !is_name(P, "in") && !is_name(P, "not")) {
				struct jnode *arg = parse_postfix(P, parse_primary(P));
				if (!arg)
					return NULL;
				t->list = jpool_alloc(P->pool, sizeof *t->list);
				if (!t->list) {
					err_set(P->e, "chat template: out of memory");
					return NULL;
				}
				t->list[0] = arg;
				t->n = 1;
			}
			x = t;
		} else {
			break;
		}
	}
	return x;
}

static struct jnode *parse_unary(struct parser *P, bool with_filter)
{
	if (++P->depth > 4 * JINJA_MAX_DEPTH) {
		err_set(P->e, "chat template line %d: expression nested too deeply", cur(P)->line);
		return NULL;
	}
	int line = cur(P)->line;
	struct jnode *x;
	if (is_op(P, OP_SUB) || is_op(P, OP_ADD)) {
		int op = is_op(P, OP_SUB) ? OP_NEG : OP_POS;
		adv(P);
		struct jnode *a = parse_unary(P, false);
		x = a ? jp_node(P, E_UNARY, line) : NULL;
		if (x) {
			x->op = op;
			x->a = a;
		}
	} else {
		x = parse_primary(P);
	}
	x = parse_postfix(P, x);
	if (with_filter)
		x = parse_filter_expr(P, x);
	P->depth--;
	return x;
}

static struct jnode *binary(struct parser *P, enum jnkind k, int op, int line, struct jnode *a, struct jnode *b)
{
	if (!a || !b)
		return NULL;
	struct jnode *x = jp_node(P, k, line);
	if (x) {
		x->op = op;
		x->a = a;
		x->b = b;
	}
	return x;
}

static struct jnode *parse_pow(struct parser *P)
{
	struct jnode *x = parse_unary(P, true);
	while (x && is_op(P, OP_POW)) {
		int line = cur(P)->line;
		adv(P);
		x = binary(P, E_BINARY, OP_POW, line, x, parse_unary(P, true));
	}
	return x;
}

static struct jnode *parse_math2(struct parser *P)
{
	struct jnode *x = parse_pow(P);
	while (x && (is_op(P, OP_MUL) || is_op(P, OP_DIV) || is_op(P, OP_FLOORDIV) || is_op(P, OP_MOD))) {
		int op = cur(P)->op, line = cur(P)->line;
		adv(P);
		x = binary(P, E_BINARY, op, line, x, parse_pow(P));
	}
	return x;
}

static struct jnode *parse_concat(struct parser *P)
{
	struct jnode *x = parse_math2(P);
	while (x && is_op(P, OP_TILDE)) {
		int line = cur(P)->line;
		adv(P);
		x = binary(P, E_BINARY, OP_TILDE, line, x, parse_math2(P));
	}
	return x;
}

static struct jnode *parse_math1(struct parser *P)
{
	struct jnode *x = parse_concat(P);
	while (x && (is_op(P, OP_ADD) || is_op(P, OP_SUB))) {
		int op = cur(P)->op, line = cur(P)->line;
		adv(P);
		x = binary(P, E_BINARY, op, line, x, parse_concat(P));
	}
	return x;
}

static struct jnode *parse_compare(struct parser *P)
{
	int line = cur(P)->line;
	struct jnode *first = parse_math1(P);
	if (!first)
		return NULL;
	struct nvec operands = {0};
	int ops[32], nops = 0;
	if (jp_nvec_push(P, &operands, first) < 0)
		return NULL;
	for (;;) {
		int op = 0;
		if (cur(P)->t == TK_OP && cur(P)->op >= OP_EQ && cur(P)->op <= OP_GE) {
			op = cur(P)->op;
			adv(P);
		} else if (is_name(P, "in")) {
			op = OP_IN;
			adv(P);
		} else if (is_name(P, "not") && peek(P, 1)->t == TK_NAME && !strcmp(peek(P, 1)->s, "in")) {
			op = OP_NOTIN;
			adv(P);
			adv(P);
		} else {
			break;
		}
		if (nops == 32) {
			free(operands.v);
			err_set(P->e, "chat template line %d: comparison chain too long", line);
			return NULL;
		}
		struct jnode *b = parse_math1(P);
		if (!b || jp_nvec_push(P, &operands, b) < 0) {
			free(operands.v);
			return NULL;
		}
		ops[nops++] = op;
	}
	if (!nops) {
		free(operands.v);
		return first;
	}
	struct jnode *x = jp_node(P, E_COMPARE, line);
	if (!x) {
		free(operands.v);
		return NULL;
	}
	x->n = operands.n;
	x->list = jp_nvec_done(P, &operands);
	x->ops = jpool_alloc(P->pool, (size_t)nops * sizeof *x->ops);
	if (!x->list || !x->ops) {
		err_set(P->e, "chat template: out of memory");
		return NULL;
	}
	memcpy(x->ops, ops, (size_t)nops * sizeof *ops);
	return x;
}

static struct jnode *parse_not(struct parser *P)
{
	if (is_name(P, "not")) {
		int line = cur(P)->line;
		adv(P);
		if (++P->depth > 4 * JINJA_MAX_DEPTH) {
			err_set(P->e, "chat template line %d: expression nested too deeply", line);
			return NULL;
		}
		struct jnode *a = parse_not(P);
		P->depth--;
		struct jnode *x = a ? jp_node(P, E_NOT, line) : NULL;
		if (x)
			x->a = a;
		return x;
	}
	return parse_compare(P);
}

static struct jnode *parse_and(struct parser *P)
{
	struct jnode *x = parse_not(P);
	while (x && is_name(P, "and")) {
		int line = cur(P)->line;
		adv(P);
		x = binary(P, E_AND, 0, line, x, parse_not(P));
	}
	return x;
}

static struct jnode *parse_or(struct parser *P)
{
	struct jnode *x = parse_and(P);
	while (x && is_name(P, "or")) {
		int line = cur(P)->line;
		adv(P);
		x = binary(P, E_OR, 0, line, x, parse_and(P));
	}
	return x;
}

struct jnode *jp_parse_expr(struct parser *P, bool condexpr)
{
	struct jnode *x = parse_or(P);
	while (condexpr && x && is_name(P, "if")) {
		int line = cur(P)->line;
		adv(P);
		struct jnode *cond = parse_or(P), *other = NULL;
		if (!cond)
			return NULL;
		if (is_name(P, "else")) {
			adv(P);
			if (++P->depth > 4 * JINJA_MAX_DEPTH) {
				err_set(P->e, "chat template line %d: expression nested too deeply", line);
				return NULL;
			}
			other = jp_parse_expr(P, true);
			P->depth--;
			if (!other)
				return NULL;
		}
		struct jnode *c = jp_node(P, E_COND, line);
		if (!c)
			return NULL;
		c->a = x;
		c->b = cond;
		c->c = other;
		x = c;
	}
	return x;
}

/* expr or "a, b, ..." (a tuple); explicit_parens allows "()" and "(a,)" */
struct jnode *jp_parse_tuple(struct parser *P, bool condexpr, bool explicit_parens)
{
	int line = cur(P)->line;
	if (explicit_parens && is_op(P, OP_RPAREN))
		return jp_node(P, E_TUPLE, line);
	struct jnode *x = jp_parse_expr(P, condexpr);
	if (!x || !is_op(P, OP_COMMA))
		return x;
	struct nvec items = {0};
	if (jp_nvec_push(P, &items, x) < 0)
		return NULL;
	while (is_op(P, OP_COMMA)) {
		adv(P);
		if (is_op(P, OP_RPAREN) || cur(P)->t == TK_VAR_END || cur(P)->t == TK_BLOCK_END)
			break;
		struct jnode *y = jp_parse_expr(P, condexpr);
		if (!y || jp_nvec_push(P, &items, y) < 0) {
			free(items.v);
			return NULL;
		}
	}
	struct jnode *t = jp_node(P, E_TUPLE, line);
	if (!t) {
		free(items.v);
		return NULL;
	}
	t->n = items.n;
	t->list = jp_nvec_done(P, &items);
	return t;
}
