/* Jinja statements: if/elif/else, for (with else and an if filter), set (plain, tuple,
 * namespace attribute, block capture), macro, break/continue, generation, print. Anything
 * else (include, extends, block, call, filter blocks...) is a compile error naming it. */
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja_parse.h"

/* ---- statements ---- */

static int expect_block_end(struct parser *P, const char *stmt)
{
	if (cur(P)->t != TK_BLOCK_END)
		return err_set(P->e, "chat template line %d: expected '%%}' to end \"%s\", got %s", cur(P)->line, stmt,
			       jp_tokdesc(cur(P)));
	adv(P);
	return 0;
}

/* Parse statements until "{% <one of ends> " (left positioned on that name) or EOF. */
static int parse_body(struct parser *P, const char *const *ends, const char *opener, int open_line,
		      struct jnode ***body, int *nbody);

static bool in_list(const char *s, const char *const *l)
{
	for (; l && *l; l++)
		if (!strcmp(s, *l))
			return true;
	return false;
}

static const char *const end_words[] = {"endif",    "endfor", "else",          "elif", "endset",
					"endmacro", "endraw", "endgeneration", NULL};
static const char *const unsupported[] = {"block",    "extends",    "include",   "import",  "from",
					  "with",     "autoescape", "filter",    "call",    "do",
					  "endblock", "endwith",    "endfilter", "endcall", "endautoescape",
					  "trans",    "pluralize",  "endtrans",  NULL};

static int parse_names(struct parser *P, const char ***names, int *n)
{
	const char *tmp[16];
	int k = 0;
	bool paren = is_op(P, OP_LPAREN);
	if (paren)
		adv(P);
	for (;;) {
		if (cur(P)->t != TK_NAME || k == 16)
			return jp_fail_unexpected(P, "a variable name");
		tmp[k++] = cur(P)->s;
		adv(P);
		if (!is_op(P, OP_COMMA))
			break;
		adv(P);
	}
	if (paren && jp_expect_op(P, OP_RPAREN, "')'") < 0)
		return -1;
	*names = jpool_alloc(P->pool, (size_t)k * sizeof **names);
	if (!*names)
		return err_set(P->e, "chat template: out of memory");
	memcpy(*names, tmp, (size_t)k * sizeof *tmp);
	*n = k;
	return 0;
}

/* after "if"/"elif": cond %} body [elif ...|else body] endif %} */
static struct jnode *parse_if(struct parser *P, int line)
{
	struct jnode *x = jp_node(P, N_IF, line);
	if (!x || !(x->a = jp_parse_tuple(P, false, false)) || expect_block_end(P, "if") < 0)
		return NULL;
	static const char *const ends[] = {"elif", "else", "endif", NULL};
	if (parse_body(P, ends, "if", line, &x->list, &x->n) < 0)
		return NULL;
	const char *word = cur(P)->s;
	int wline = cur(P)->line;
	adv(P);
	if (!strcmp(word, "elif")) {
		/* a nested if in the else branch; it consumes the endif */
		if (++P->depth > 4 * JINJA_MAX_DEPTH) {
			err_set(P->e, "chat template line %d: too many elif branches", wline);
			return NULL;
		}
		struct jnode *sub = parse_if(P, wline);
		P->depth--;
		if (!sub || !(x->list2 = jpool_alloc(P->pool, sizeof *x->list2)))
			return NULL;
		x->list2[0] = sub;
		x->n2 = 1;
		return x;
	}
	if (!strcmp(word, "else")) {
		static const char *const ends2[] = {"endif", NULL};
		if (expect_block_end(P, "else") < 0 || parse_body(P, ends2, "if", line, &x->list2, &x->n2) < 0)
			return NULL;
		adv(P);
	}
	if (expect_block_end(P, "endif") < 0)
		return NULL;
	return x;
}

/* after "for": names in iterable [if cond] %} body [else body] endfor %} */
static struct jnode *parse_for(struct parser *P, int line)
{
	struct jnode *x = jp_node(P, N_FOR, line);
	if (!x || parse_names(P, &x->names, &x->nnames) < 0)
		return NULL;
	if (!is_name(P, "in")) {
		jp_fail_unexpected(P, "'in'");
		return NULL;
	}
	adv(P);
	if (!(x->a = jp_parse_tuple(P, false, false)))
		return NULL;
	if (is_name(P, "if")) {
		adv(P);
		if (!(x->b = jp_parse_expr(P, true)))
			return NULL;
	}
	if (is_name(P, "recursive")) {
		err_set(P->e, "chat template line %d: unsupported recursive for loop", line);
		return NULL;
	}
	if (expect_block_end(P, "for") < 0)
		return NULL;
	static const char *const ends[] = {"endfor", "else", NULL};
	P->loop_depth++;
	int r = parse_body(P, ends, "for", line, &x->list, &x->n);
	P->loop_depth--;
	if (r < 0)
		return NULL;
	if (!strcmp(cur(P)->s, "else")) {
		adv(P);
		static const char *const ends2[] = {"endfor", NULL};
		if (expect_block_end(P, "else") < 0 || parse_body(P, ends2, "for", line, &x->list2, &x->n2) < 0)
			return NULL;
	}
	adv(P);
	if (expect_block_end(P, "endfor") < 0)
		return NULL;
	return x;
}

/* after "set": name = expr, ns.attr = expr, or a block set (name %} body endset %}) */
static struct jnode *parse_set(struct parser *P, int line)
{
	struct jnode *x;
	if (cur(P)->t != TK_NAME) {
		jp_fail_unexpected(P, "a variable name");
		return NULL;
	}
	if (peek(P, 1)->t == TK_OP && peek(P, 1)->op == OP_DOT) {
		x = jp_node(P, N_SET_ATTR, line);
		if (!x)
			return NULL;
		x->name = cur(P)->s;
		adv(P);
		adv(P);
		if (cur(P)->t != TK_NAME) {
			jp_fail_unexpected(P, "an attribute name");
			return NULL;
		}
		x->names = jpool_alloc(P->pool, sizeof *x->names);
		if (!x->names)
			return NULL;
		x->names[0] = cur(P)->s;
		x->nnames = 1;
		adv(P);
		if (jp_expect_op(P, OP_ASSIGN, "'='") < 0)
			return NULL;
	} else {
		x = jp_node(P, N_SET, line);
		if (!x || parse_names(P, &x->names, &x->nnames) < 0)
			return NULL;
		x->name = x->names[0];
		if (!is_op(P, OP_ASSIGN)) {
			if (x->nnames != 1) {
				jp_fail_unexpected(P, "'='");
				return NULL;
			}
			if (is_op(P, OP_PIPE)) {
				err_set(P->e, "chat template line %d: unsupported filtered block set", line);
				return NULL;
			}
			x->kind = N_SET_BLOCK;
			if (expect_block_end(P, "set") < 0)
				return NULL;
			static const char *const ends[] = {"endset", NULL};
			if (parse_body(P, ends, "set", line, &x->list, &x->n) < 0)
				return NULL;
			adv(P);
			if (expect_block_end(P, "endset") < 0)
				return NULL;
			return x;
		}
		adv(P);
	}
	if (!(x->a = jp_parse_tuple(P, true, false)) || expect_block_end(P, "set") < 0)
		return NULL;
	return x;
}

/* after "macro": name(params [= defaults]) %} body endmacro %} */
static struct jnode *parse_macro(struct parser *P, int line)
{
	struct jnode *x = jp_node(P, N_MACRO, line);
	if (!x)
		return NULL;
	if (cur(P)->t != TK_NAME) {
		jp_fail_unexpected(P, "a macro name");
		return NULL;
	}
	x->name = cur(P)->s;
	adv(P);
	if (jp_expect_op(P, OP_LPAREN, "'('") < 0)
		return NULL;
	const char *names[32];
	struct jnode *defs[32];
	int k2 = 0;
	while (!is_op(P, OP_RPAREN)) {
		if (k2 && jp_expect_op(P, OP_COMMA, "',' or ')'") < 0)
			return NULL;
		if (cur(P)->t != TK_NAME || k2 == 32) {
			jp_fail_unexpected(P, "a parameter name");
			return NULL;
		}
		names[k2] = cur(P)->s;
		defs[k2] = NULL;
		adv(P);
		if (is_op(P, OP_ASSIGN)) {
			adv(P);
			if (!(defs[k2] = jp_parse_expr(P, true)))
				return NULL;
		}
		k2++;
	}
	adv(P);
	if (expect_block_end(P, "macro") < 0)
		return NULL;
	x->nnames = x->n2 = k2;
	x->names = jpool_alloc(P->pool, (size_t)(k2 + 1) * sizeof *x->names);
	x->list2 = jpool_alloc(P->pool, (size_t)(k2 + 1) * sizeof *x->list2);
	if (!x->names || !x->list2)
		return NULL;
	memcpy(x->names, names, (size_t)k2 * sizeof *names);
	memcpy(x->list2, defs, (size_t)k2 * sizeof *defs);
	static const char *const ends[] = {"endmacro", NULL};
	int saved = P->loop_depth;
	P->loop_depth = 0;
	int r = parse_body(P, ends, "macro", line, &x->list, &x->n);
	P->loop_depth = saved;
	if (r < 0)
		return NULL;
	adv(P);
	if (expect_block_end(P, "endmacro") < 0)
		return NULL;
	return x;
}

static struct jnode *parse_statement(struct parser *P)
{
	const struct jtoken *k = cur(P);
	int line = k->line;
	const char *w = k->s;
	struct jnode *x = NULL;
	adv(P);
	if (!strcmp(w, "if"))
		return parse_if(P, line);
	if (!strcmp(w, "for"))
		return parse_for(P, line);
	if (!strcmp(w, "set"))
		return parse_set(P, line);
	if (!strcmp(w, "macro"))
		return parse_macro(P, line);
	if (!strcmp(w, "break") || !strcmp(w, "continue")) {
		if (!P->loop_depth) {
			err_set(P->e, "chat template line %d: \"%s\" outside a for loop", line, w);
			return NULL;
		}
		x = jp_node(P, w[0] == 'b' ? N_BREAK : N_CONTINUE, line);
		if (!x || expect_block_end(P, w) < 0)
			return NULL;
		return x;
	}
	if (!strcmp(w, "generation")) { /* transformers' AssistantTracker: renders its body */
		x = jp_node(P, N_BODY, line);
		if (!x || expect_block_end(P, "generation") < 0)
			return NULL;
		static const char *const ends[] = {"endgeneration", NULL};
		if (parse_body(P, ends, "generation", line, &x->list, &x->n) < 0)
			return NULL;
		adv(P);
		if (expect_block_end(P, "endgeneration") < 0)
			return NULL;
		return x;
	}
	if (!strcmp(w, "print")) {
		x = jp_node(P, N_OUTPUT, line);
		if (!x || !(x->a = jp_parse_tuple(P, true, false)) || expect_block_end(P, "print") < 0)
			return NULL;
		return x;
	}
	if (in_list(w, end_words))
		err_set(P->e, "chat template line %d: unexpected \"%s\"", line, w);
	else if (in_list(w, unsupported))
		err_set(P->e, "chat template line %d: unsupported statement \"%s\"", line, w);
	else
		err_set(P->e, "chat template line %d: unknown statement \"%s\"", line, w);
	return NULL;
}

static int parse_body(struct parser *P, const char *const *ends, const char *opener, int open_line,
		      struct jnode ***body, int *nbody)
{
	struct nvec v = {0};
	for (;;) {
		const struct jtoken *k = cur(P);
		struct jnode *x = NULL;
		if (k->t == TK_EOF) {
			if (ends) {
				free(v.v);
				return err_set(P->e,
					       "chat template line %d: unclosed \"%s\" block (opened on line %d)",
					       k->line, opener, open_line);
			}
			break;
		}
		if (k->t == TK_DATA) {
			x = jp_node(P, N_DATA, k->line);
			if (x) {
				x->name = k->s;
				x->name_n = k->n;
			}
			adv(P);
		} else if (k->t == TK_VAR_BEGIN) {
			adv(P);
			x = jp_node(P, N_OUTPUT, k->line);
			if (x && !(x->a = jp_parse_tuple(P, true, false)))
				x = NULL;
			if (x && cur(P)->t != TK_VAR_END) {
				jp_fail_unexpected(P, "'}}'");
				x = NULL;
			}
			adv(P);
		} else if (k->t == TK_BLOCK_BEGIN) {
			adv(P);
			if (cur(P)->t != TK_NAME) {
				jp_fail_unexpected(P, "a statement name");
			} else if (in_list(cur(P)->s, ends)) {
				break;
			} else if (++P->depth > 4 * JINJA_MAX_DEPTH) {
				err_set(P->e, "chat template line %d: blocks nested too deeply", cur(P)->line);
			} else {
				x = parse_statement(P);
				P->depth--;
			}
		} else {
			jp_fail_unexpected(P, "template data or a tag");
		}
		if (!x || jp_nvec_push(P, &v, x) < 0) {
			free(v.v);
			return -1;
		}
	}
	*nbody = v.n;
	*body = jp_nvec_done(P, &v);
	if (v.n && !*body)
		return err_set(P->e, "chat template: out of memory");
	return 0;
}

int jinja_parse(const struct jtoken *toks, size_t n, struct jpool *pool, struct jnode **out, struct err *e)
{
	struct parser P = {.t = toks, .n = n, .pool = pool, .e = e};
	if (e)
		e->msg[0] = 0;
	struct jnode *root = jp_node(&P, N_BODY, 1);
	if (!root || parse_body(&P, NULL, NULL, 0, &root->list, &root->n) < 0) {
		if (e && !e->msg[0]) /* an allocation failed without a message */
			err_set(e, "chat template: out of memory");
		return -1;
	}
	*out = root;
	return 0;
}
