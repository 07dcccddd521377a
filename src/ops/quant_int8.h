/* W8A8 int8 (--quantization int8): weights quantized at load to int8 with one fp32 scale per
 * row and group of INT8_GROUP columns; each GEMM quantizes its activations the same way per
 * token and group, multiplies int8 by int8 into exact int32 sums per group and scales those:
 *
 *   sw[r][g] = amax_{c in g} |w[r][c]| / 127      qw = rint(w / sw)      (0 where amax is 0)
 *   sx[t][g] = amax_{c in g} |x[t][c]| / 127      qx = rint(x / sx)
 *   y[t][r]  = fma(dot_g, sw[r][g] * sx[t][g], ...)  over g = 0, 1, ... in order, from 0
 *
 * with fp32 divisions, round-half-even, dot_g = Σ_{c in g} qw qx exact. Every kernel (portable,
 * AVX2, AVX-512 VNNI) computes exactly this, so the levels agree to the bit and a token's
 * result does not depend on its batch. Groups of 128 as DeepSeek's own fp8 inference quantizes
 * its activations (act_quant, block 128); the weights' groups are finer than its 128x128
 * blocks. Why: int8 products run 2x the multiply-adds per instruction of bf16 dot products
 * (vpdpbusd) and need no weight decoding, as llama.cpp's Q8_0 does with groups of 32.
 *
 * Packed layout of a DT_I8 wmat [rows, cols] (the only one: data is never row-major): blocks of
 * INT8_ROWS = 32 rows, each a run of its column groups, each group a 256-byte header, then the
 * group's steps of 4 columns:
 *   header: sw[32 rb + r][g] as 32 floats, then 128 Σ_c qw[32 rb + r][c in g] as 32 int32s
 *   step:   byte 4 r + c % 4 of step (c % 128) / 4 = qw[32 rb + r][c]
 * columns padded to a multiple of 4 and rows to 32 with zeros. A step is two zmm (16 rows x 4
 * bytes each: what vpdpbusd multiplies by a broadcast of 4 activation bytes) or four ymm; the
 * offset sums take vpdpbusd's 128 back out. One stream per thread: scales in arrays of their own
 * slowed one-token GEMMs. Activations are stored offset, qxu = qx + 128 (u8: vpdpbusd's
 * unsigned operand), rows int8_cols_pad(cols) bytes apart with the pad columns 128 (the AVX2
 * kernel without VNNI reads a layout of its own made from them: gemm_int8_quant_x). */
#ifndef MLA_OPS_QUANT_INT8_H
#define MLA_OPS_QUANT_INT8_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cpu.h"
#include "ops/gemm.h"

#define INT8_GROUP 128
#define INT8_ROWS 32
#define INT8_STEP 128                                             /* bytes per 4-column step of a block */
#define INT8_HDR 256                                              /* a group's scales and offset sums */
#define INT8_GROUP_BYTES (INT8_HDR + INT8_GROUP / 4 * INT8_STEP) /* a whole group of a block */

static inline int int8_cols_pad(int cols) { return (cols + 3) & ~3; }
static inline int int8_groups(int cols) { return (cols + INT8_GROUP - 1) / INT8_GROUP; }
static inline int int8_row_blocks(int rows) { return (rows + INT8_ROWS - 1) / INT8_ROWS; }
static inline size_t int8_block_bytes(int cols)
{
	return (size_t)int8_groups(cols) * INT8_HDR + (size_t)int8_cols_pad(cols) * INT8_ROWS;
}
static inline size_t int8_data_bytes(int rows, int cols) { return (size_t)int8_row_blocks(rows) * int8_block_bytes(cols); }
/* group g of row block rb: its header (scales, then offset sums), its steps after INT8_HDR */
static inline const char *int8_group(const struct wmat *w, int rb, int g)
{
	return (const char *)w->data + (size_t)rb * int8_block_bytes(w->cols) + (size_t)g * INT8_GROUP_BYTES;
}
static inline const float *int8_scales(const char *group) { return (const float *)(const void *)group; }
static inline const int32_t *int8_qsums(const char *group) { return (const int32_t *)(const void *)(group + 128); }
/* byte of data holding (r, c) */
static inline size_t int8_index(int cols, int r, int c)
{
	return (size_t)(r / INT8_ROWS) * int8_block_bytes(cols) + (size_t)(c / INT8_GROUP) * INT8_GROUP_BYTES + INT8_HDR +
	       (size_t)(c % INT8_GROUP / 4) * INT8_STEP + (size_t)(4 * (r % INT8_ROWS) + c % 4);
}

struct pool;

/* Quantizes rows [r0, r0 + nr) x cols [c0, c0 + nc) of src (f32, f16, bf16, or fp8 with its
 * block scales) into a DT_I8 wmat [nr, nc] (groups from column c0) whose data is the caller's
 * buffer of int8_data_bytes(nr, nc) (4-byte aligned). Returns 0, or -1 with (*bad_r, *bad_c) the
 * first NaN or infinite weight ((-1, -1): out of memory). */
int quant_int8_weights(struct pool *p, const struct wmat *src, int r0, int nr, int c0, int nc, char *data,
		       struct wmat *out, int *bad_r, int *bad_c);

/* One activation row: x[0, cols) → qxu[0, int8_cols_pad(cols)) (pad 128) and sx[groups]. A NaN
 * or infinity makes its group's scale NaN (the outputs then are NaN, as in float). */
void quant_int8_row(const float *x, int cols, uint8_t *qxu, float *sx);

/* the int8 kernels a level runs: "portable", "AVX2" or "AVX-512 VNNI" */
const char *gemm_int8_kernel_name(enum ops_level lvl);

/* w[r][c] as the GEMM sees it: qw x sw (tests, slow paths) */
float quant_int8_get(const struct wmat *w, int r, int c);

#endif
