/* Deterministic random weights for --load-format dummy (dummy.c), shared by the loaders of
 * every format (weights.c, weights_ct.c, tensors_v4.c). */
#ifndef MLA_MODEL_DUMMY_H
#define MLA_MODEL_DUMMY_H

#include "model/model_internal.h"

/* Deterministic random values for `name` (seeded by it and the dummy seed; any thread count
 * gives the same): DT_BF16 n values, |v| in [amp/16, amp) with random signs; DT_F8_E4M3 n
 * e4m3 bytes, |v| in [1/8, 2) (amp unused); DT_U8 n random bytes. -1 for another dtype. */
int model_dummy_fill(struct model *m, const char *name, enum dtype dt, void *dst, size_t n, float amp);

#endif
