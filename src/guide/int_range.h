/* JSON Schema's integer bounds (minimum, maximum, exclusiveMinimum, exclusiveMaximum) as a
 * regular expression of the decimal integers in the range (no leading zeros, "-" only before
 * a non-zero), for guide/regex_dfa.h. An unbounded side stops at int64's limit. */
#ifndef MLA_GUIDE_INT_RANGE_H
#define MLA_GUIDE_INT_RANGE_H

#include <stdbool.h>

#include "base/err.h"

/* *out: malloc'd NUL-terminated regex; -1 with e set when the range is empty. */
int guide_int_range_regex(bool has_lo, long long lo, bool has_hi, long long hi, char **out, struct err *e);

#endif
