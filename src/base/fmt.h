/* Doubles as the shortest decimal text that reads back as the same double: Python's repr (for
 * JSON written as Python writes it and for the chat templates' str()), and a plain decimal
 * with bounded places (structured outputs' numeric bounds and steps). */
#ifndef MLA_BASE_FMT_H
#define MLA_BASE_FMT_H

#include <stddef.h>

/* Python's repr(x) of a finite x: the shortest digits that round-trip, fixed notation for
 * 1e-4 <= |x| < 1e16 ("0.1", "100000.0", "-2.5"), else "1e-05", "1.5e+16". cap >= 32. */
void fmt_double_repr(double x, char *out, size_t cap);
/* The shortest plain decimal "%.<p>f" of a >= 0 that reads back as the same double, with p at
 * most max_places (a bound or a step written 0.1 is 0.1, not the double's expansion): its p,
 * the text in out, or -1 when none is that short. Unlike the repr, never an exponent. */
int fmt_double_fixed(double a, int max_places, char *out, size_t cap);

#endif
