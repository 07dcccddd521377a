/* JSON Schema's multipleOf on numbers and integers as a DFA over their plain decimals
 * ([-]I[.F], no exponent, no leading zeros, "-" only before a non-zero value), for the matcher
 * and for intersecting with the bounds' automaton (guide/dfa_ops.h). The step is read as the
 * shortest decimal that gives back the same double (0.01 is 0.01), with at most 6 decimals. */
#ifndef MLA_GUIDE_NUM_MULTIPLE_H
#define MLA_GUIDE_NUM_MULTIPLE_H

#include <stdbool.h>

#include "base/err.h"
#include "guide/regex_dfa.h"

/* The multiples of m (integers only when integer is set); -1 with e set */
int guide_dfa_multiple(double m, bool integer, struct guide_dfa **out, struct err *e);

#endif
