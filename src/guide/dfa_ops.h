/* Operations on guide DFAs (regex_dfa.h) built elsewhere: trimming to the states that can
 * still finish a match, and the intersection of two automata. */
#ifndef MLA_GUIDE_DFA_OPS_H
#define MLA_GUIDE_DFA_OPS_H

#include "base/err.h"
#include "guide/regex_dfa.h"

/* Drops every edge into a state from which no accepting state can be reached, and recomputes
 * live; the matcher then never lets an output start down a dead end. -1 (e: what) when not
 * even the start state can finish a match. */
int guide_dfa_trim(struct guide_dfa *d, const char *what, struct err *e);

/* The texts both a and b accept, trimmed; -1 with e set past GUIDE_DFA_MAX_STATES, or when
 * there are none (e: what). */
int guide_dfa_intersect(const struct guide_dfa *a, const struct guide_dfa *b, const char *what, struct guide_dfa **out,
			struct err *e);

#endif
