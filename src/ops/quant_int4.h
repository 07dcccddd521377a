/* int4 weights (the weight format table's "int4" row, ops/wf_int4.c): signed 4-bit values in
 * groups of INT4_GROUP = 32 columns (K) with one bf16 scale per row and group, the numbers of
 * compressed-tensors' symmetric pack-quantized (Kimi K2-Thinking, W4A16 DeepSeek quants:
 * weight_packed int32 [out, in / 8], eight values per int32 along K, lowest nibble first, each
 * stored as q + 8; weight_scale bf16 [out, in / 32]), either repacked from such a checkpoint
 * (quant_int4_from_packed: bf16 scales kept bit for bit) or quantized at load from any float or
 * fp8 matrix as compressed-tensors quantizes a bf16 model (calculate_qparams, symmetric):
 *
 *   sw[r][g] = bf16(max(amax_{c in g} |w[r][c]| / 7.5, FLT_EPSILON))  (7.5 = (7 - (-8)) / 2;
 *                                                                     fp32, then nearest even)
 *   q        = clamp(rint(w / sw), -8, 7)                             (fp32, ties to even)
 *
 * so q is against the rounded scale: amax / sw is 7.5 within 2^-8, so +amax becomes 7 (7 or 8,
 * clamped) and -amax -7 or -8. (compressed-tensors divides w / sw in bf16, we in fp32: q may differ
 * at rounding ties.)
 *
 * Layout of a DT_I4 wmat (never row-major, as DT_I8's): blocks of INT4_ROWS = 32 rows, each a
 * run of its column groups, each group INT4_GROUP_BYTES = 576 bytes (9 cache lines):
 *   header: sw[32 rb + r][g] as 32 bf16 (64 bytes; the kernels widen them by a 16-bit shift)
 *   then 8 chunks of 64 bytes, chunk 2 p + h (p: 8 columns 8p..8p+7 of the group, h: rows
 *   16h..16h+15): byte 4 i + k holds u = q + 8 of row 16 h + i, column 8 p + k in its low
 *   nibble and of column 8 p + 4 + k in its high one (k = 0..3).
 * So `v & 15` of a chunk is one vpdpbusd step (16 rows x 4 columns, unsigned bytes: the u8
 * operand, activations the s8 one) and `v >> 4 & 15` the next; a ymm half of a chunk is 8 rows
 * for the AVX2 kernels. Pad rows and columns hold u = 8 (q = 0) and scale 0. 4.5 bits per
 * weight, as in the checkpoint.
 *
 * A view keeps whole 32-row blocks and starts on a group (c0 % 32 == 0): data moves to its
 * first group; ld stays the full matrix's columns (rounded up to 32), which give the block's
 * stride. */
#ifndef MLA_OPS_QUANT_INT4_H
#define MLA_OPS_QUANT_INT4_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/dtype.h"
#include "ops/cpu.h"
#include "ops/gemm.h"

#define INT4_GROUP 32
#define INT4_ROWS 32
#define INT4_HDR 64                                  /* a group's 32 bf16 scales */
#define INT4_CHUNK 64                                /* 16 rows x 8 columns */
#define INT4_GROUP_BYTES (INT4_HDR + 8 * INT4_CHUNK) /* 576: a whole group of a block */

static inline int int4_groups(int cols) { return (cols + INT4_GROUP - 1) / INT4_GROUP; }
static inline int int4_row_blocks(int rows) { return (rows + INT4_ROWS - 1) / INT4_ROWS; }
static inline size_t int4_block_bytes(int cols) { return (size_t)int4_groups(cols) * INT4_GROUP_BYTES; }
static inline size_t int4_data_bytes(int rows, int cols)
{
	return (size_t)int4_row_blocks(rows) * int4_block_bytes(cols);
}
/* group g of row block rb of w (the view's): its scales, then its chunks at + INT4_HDR */
static inline const char *int4_group(const struct wmat *w, int rb, int g)
{
	return (const char *)w->data + (size_t)rb * int4_block_bytes((int)w->ld) + (size_t)g * INT4_GROUP_BYTES;
}
/* the scale of row i (0..31) of a group */
static inline float int4_scale(const char *grp, int i)
{
	uint16_t h;
	memcpy(&h, grp + 2 * (size_t)i, 2);
	return bf16_to_f32(h);
}
/* byte of a group holding (r % 32, c % 32), and whether in its high nibble */
static inline size_t int4_byte(int r, int c)
{
	return (size_t)(INT4_HDR + (2 * (c % 32 / 8) + r % 32 / 16) * INT4_CHUNK + 4 * (r % 16) + c % 4);
}
static inline int int4_high(int c) { return c % 8 >= 4; }

struct pool;

/* Quantizes rows [r0, r0 + nr) x cols [c0, c0 + nc) of src (f32, f16, bf16, or fp8 with its
 * block scales) into a DT_I4 wmat [nr, nc] (groups from column c0) whose data is the caller's
 * buffer of int4_data_bytes(nr, nc) (64-byte aligned). Returns 0, or -1 with (*bad_r, *bad_c)
 * the first NaN or infinite weight ((-1, -1): out of memory). */
int quant_int4_weights(struct pool *p, const struct wmat *src, int r0, int nr, int c0, int nc, char *data,
		       struct wmat *out, int *bad_r, int *bad_c);

/* A compressed-tensors pack-quantized checkpoint's region [r0, r0 + nr) x [c0, c0 + nc)
 * (c0 % 32 == 0) into the layout above: packed int32 [rows, ldp] (eight q + 8 per word, lowest
 * nibble first: column 8 j + i in bits 4 i.. of word j), scale bf16 [rows, lds] (column group
 * c / 32, kept as they are). data: int4_data_bytes(nr, nc) bytes. Returns 0, or -1 with
 * (*bad_r, *bad_c) the first scale that is not finite (or negative). */
int quant_int4_from_packed(struct pool *p, const int32_t *packed, int64_t ldp, const uint16_t *scale, int64_t lds,
			   int r0, int nr, int c0, int nc, char *data, struct wmat *out, int *bad_r, int *bad_c);

/* w[r][c] as the GEMM sees it: q x sw (tests, slow paths) */
float quant_int4_get(const struct wmat *w, int r, int c);
/* q of (r, c), -8..7 */
int quant_int4_q(const struct wmat *w, int r, int c);

/* ---- activations ----
 * W4A8: x quantized per token and 128 columns exactly as the int8 row does (ops/quant_int8.h:
 * sx = amax / 127, qx = rint(x / sx)), stored signed, rows int4_x_ld(cols) bytes apart (pad 0),
 * with each 32-column group's -8 Σ qx (the kernels multiply u = q + 8 by qx: the dot is
 * Σ u qx - 8 Σ qx, their sums start from it). Per weight group the int32 dot is exact (|Σ q qx| <= 32 x 8 x 127; the AVX2
 * kernel's int16 partial sums reach at most 16 x 15 x 127 = 30480), and
 *   y[t][r] = fma(dot_g, sw[r][g] * sx[t][g / 4], ...)  over g = 0, 1, ... in order, from 0
 * on every level, so the W4A8 levels agree to the bit. Per 128 as the int8 row (one activation
 * quantizer for both, DeepSeek's act_quant block); per 32 would not change the exactness.
 * W4A16 (bf16-exact x, AVX512_BF16 and AMX levels): x as bf16, each 8 columns in the order
 * 0 2 4 6 1 3 5 7 (the pairs a chunk's nibbles decode to), rows int4_x_ld(cols) apart, pad 0. */
static inline int int4_x_ld(int cols) { return int4_groups(cols) * INT4_GROUP; }
/* one token: x[cols] → qx [int4_x_ld(cols)], sx [int8_groups(cols)], sums [int4_groups(cols)] */
void quant_int4_x(const float *x, int cols, int8_t *qx, float *sx, int32_t *sums);
/* one token: x[cols] → xb [int4_x_ld(cols)] in the W4A16 order */
void quant_int4_x_bf16(const float *x, int cols, uint16_t *xb);

/* ---- the GEMM (gemm_int4.c) ---- */
/* whether job j runs W4A16 at lvl (bf16-exact x from the AVX512_BF16 level on), else W4A8 */
int gemm_int4_w16(enum ops_level lvl, const struct gemm_job *j);
/* the kernels a level runs, for the log */
const char *gemm_int4_kernel_name(enum ops_level lvl);
/* a call's prepared x (n tokens, W4A16 or W4A8): its bytes, and tokens [t0, t1) of j->x into buf */
size_t gemm_int4_act_bytes(int w16, int n, int cols);
void gemm_int4_act_fill(int w16, const struct gemm_job *j, int t0, int t1, void *buf);
/* rows [r0, r1) (r0 a multiple of 32) of j for all its tokens; act: gemm_int4_act_fill's for
 * gemm_int4_w16(lvl, j) (NULL: made here a token at a time). Applies j->round_bf16 (returns 1). */
int gemm_panel_int4(enum ops_level lvl, const struct gemm_job *j, const void *act, int r0, int r1);

#endif
