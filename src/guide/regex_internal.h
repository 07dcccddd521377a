/* Internals of guide/regex_dfa.c: the parser's tree (regex_parse.c), built into a DFA there. */
#ifndef MLA_GUIDE_REGEX_INTERNAL_H
#define MLA_GUIDE_REGEX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define REGEX_MAX_CP 0x10FFFF

/* a set of code points: sorted, disjoint ranges */
struct cset {
	int n, cap;
	uint32_t (*r)[2];
};

enum { A_EMPTY, A_SET, A_CAT, A_ALT, A_REP };

/* a tree node: A_SET a character of set; A_CAT / A_ALT nodes a then b; A_REP a, min to max
 * times (max -1: unbounded) */
struct anode {
	int kind, a, b, min, max;
	struct cset set;
};

/* Parses the expression (regex_dfa.h's syntax): *nodes (malloc'd, free with
 * regex_nodes_free) and the root's index, or -1 with e naming what and where. */
int regex_parse(const char *re, size_t len, struct anode **nodes, int *n_nodes, struct err *e);
void regex_nodes_free(struct anode *nodes, int n_nodes);

/* regex_lookahead.c: a regex that starts with (?=X) or (?!X) compiled as the product of
 * X's automaton and the rest's; 1 when it does not start with one (nothing done), 0 with
 * *out, or -1 with e set */
struct guide_dfa;
int regex_lookahead_compile(const char *re, size_t len, struct guide_dfa **out, struct err *e);

#endif
