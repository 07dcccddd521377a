/* compressed-tensors pack-quantized int4 checkpoints (cfg.ct_int4; weights_ct.c), for
 * weights.c and load.c: the config's ignore list compiled for the load, and the Linear rows not
 * in it loaded from <module>.weight_packed / .weight_scale / .weight_shape into the int4 row
 * whatever --quantization says, the others as a bf16 checkpoint's. */
#ifndef MLA_MODEL_WEIGHTS_CT_H
#define MLA_MODEL_WEIGHTS_CT_H

#include "model/model_internal.h"

/* the ignore list of DIR/config.json for the load (nothing without cfg.ct_int4); model_ct_end
 * frees it */
int model_ct_begin(struct model *m, const char *dir, struct err *e);
void model_ct_end(struct model *m);
/* whether the matrix `name` (a linear layer's: a row that may be quantized) is pack-quantized */
bool model_ct_packed(const struct model *m, const char *name, bool linear);
/* its region [r0, r0 + nr) x [c0, c0 + nc) (c0 on a group of 32) into the int4 row; *w's
 * (row0, col0) is where it starts, as a quantized matrix's. absorbed: kv_b_proj (refused: the
 * absorbed attention multiplies its transpose) */
int model_ct_load(struct model *m, const char *name, int rows, int cols, bool absorbed, int r0, int nr, int c0, int nc,
		  struct wmat *w, struct err *e);

#endif
