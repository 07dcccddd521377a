/* Internal to the Jinja parser (jinja_parse.c: expressions, jinja_stmt.c: statements). */
#ifndef MLA_JINJA_JINJA_PARSE_H
#define MLA_JINJA_JINJA_PARSE_H

#include <stdbool.h>
#include <string.h>

#include "jinja/jinja.h"

struct parser {
	const struct jtoken *t;
	size_t n, i;
	struct jpool *pool;
	struct err *e;
	int depth;      /* expression nesting (bounded: no stack overflow on "((((...") */
	int loop_depth; /* for break/continue */
};

/* growable node-pointer array backed by malloc, moved into the pool when done */
struct nvec {
	struct jnode **v;
	int n, cap;
};

static inline const struct jtoken *cur(struct parser *P) { return &P->t[P->i]; }
static inline const struct jtoken *peek(struct parser *P, size_t k)
{
	return P->i + k < P->n ? &P->t[P->i + k] : &P->t[P->n - 1];
}
static inline void adv(struct parser *P)
{
	if (P->i + 1 < P->n)
		P->i++;
}
static inline bool is_op(struct parser *P, int op) { return cur(P)->t == TK_OP && cur(P)->op == op; }
static inline bool is_name(struct parser *P, const char *s) { return cur(P)->t == TK_NAME && !strcmp(cur(P)->s, s); }

int jp_nvec_push(struct parser *P, struct nvec *a, struct jnode *x);
struct jnode **jp_nvec_done(struct parser *P, struct nvec *a);
const char *jp_tokdesc(const struct jtoken *k);
int jp_fail_unexpected(struct parser *P, const char *what);
int jp_expect_op(struct parser *P, int op, const char *what);
struct jnode *jp_node(struct parser *P, enum jnkind k, int line);
/* expr [if cond [else expr]] (condexpr false: no inline if, for "for x in xs if c") */
struct jnode *jp_parse_expr(struct parser *P, bool condexpr);
/* expr or "a, b, ..." as a tuple; explicit_parens allows "()" and "(a,)" */
struct jnode *jp_parse_tuple(struct parser *P, bool condexpr, bool explicit_parens);

#endif
