/* JSON Schema's numeric bounds (minimum, maximum, exclusiveMinimum, exclusiveMaximum) as a
 * regular expression of the numbers in the range (no leading zeros, "-" only before a
 * non-zero), for guide/regex_dfa.h. An unbounded side stops at int64's limit. */
#ifndef MLA_GUIDE_INT_RANGE_H
#define MLA_GUIDE_INT_RANGE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* *out: malloc'd NUL-terminated regex; -1 with e set when the range is empty. */
int guide_int_range_regex(bool has_lo, long long lo, bool has_hi, long long hi, char **out, struct err *e);

/* The same for JSON numbers between bounds, each inclusive or not (lo_excl, hi_excl): plain
 * decimals, [-]I[.F] without an exponent (a subset of the numbers in the range, all of which
 * JSON Schema accepts). A bound is taken as the shortest decimal that reads back as the same
 * double (0.1 is 0.1), with at most 18 decimals; outputs are compared with it exactly. */
int guide_num_range_regex(bool has_lo, double lo, bool lo_excl, bool has_hi, double hi, bool hi_excl, char **out,
			  struct err *e);

#endif
