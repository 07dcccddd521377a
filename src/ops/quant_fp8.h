/* Weights quantized at load (--quantization fp8) into DeepSeek's own fp8 format, so that the
 * kernels of native fp8 checkpoints run them: e4m3fn values with one fp32 scale per
 * blk x blk block, scale = amax / 448 (1 for an all-zero block), q = e4m3(w / scale) rounded
 * to nearest even; the weight is then q x scale, as a checkpoint's weight_scale_inv. */
#ifndef MLA_OPS_QUANT_FP8_H
#define MLA_OPS_QUANT_FP8_H

#include <stdint.h>

#include "ops/gemm.h"

struct pool;

/* Quantizes rows [r0, r0 + nr) x cols [c0, c0 + nc) of the whole matrix src (f32, f16 or
 * bf16, row0 = col0 = 0). r0 and c0 are multiples of blk and the region ends on a block edge
 * or at src's last row / column, so every block is whole and its scale does not depend on the
 * region (a tensor-parallel slice quantizes as the whole matrix does). Writes q [nr, nc]
 * (row stride nc) and the region's blocks of scale [ceil(rows / blk), ceil(cols / blk)].
 * Returns 0, or -1 with (*bad_r, *bad_c) the first NaN or infinite weight. */
int quant_fp8_blocks(struct pool *p, const struct wmat *src, int r0, int nr, int c0, int nc, int blk, uint8_t *q,
		     float *scale, int *bad_r, int *bad_c);

#endif
