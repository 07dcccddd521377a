/* Weights packed once at load for the AVX512_BF16 dot-product GEMM (ops/gemm_prepacked512.c),
 * the AMX one (ops/gemm_amx.c) and, bf16 at the AVX2 level, ops/gemm_bf16_avx2.c.
 *
 * Layout of a bf16 matrix [rows, cols]: blocks of 32 rows, each k-major as column pairs,
 *   packed[(rb * P + p) * 32 + r] = bf16 W[32 rb + r, 2p] | bf16 W[32 rb + r, 2p + 1] << 16
 * with P = prepack_pairs(cols), ceil(cols / 2) rounded up to 16; rows past `rows`, an odd last
 * column and the pairs past the columns are zero. 16 pairs x 16 rows are one AMX B tile (1 KB
 * at a stride of 128 bytes), so the AMX kernel (ops/gemm_amx.c) reads the same layout. One step of a
 * block is two zmm (32 rows x one pair), exactly what vdpbf16ps multiplies by a broadcast x
 * pair, and a thread's rows are one contiguous stream: no transposes, no horizontal sums,
 * no runtime packing, and the DRAM prefetchers see a single sequential stream.
 *
 * fp8 e4m3 (DeepSeek's 128x128 block-scaled weights, packed when the view's columns start on
 * a scale block): the same blocks with one byte per value, 64 bytes per step, the bf16 words
 * of rows 0-15 (2 r + i) and of rows 16-31 alternating, so that each 16-bit lane holds one
 * word of each half (the decode needs no byte shuffle, ops/fp8_512.h):
 *   packed8[(rb * P + p) * 64 + prepack_fp8_byte(r, i)] = W[32 rb + r, 2p + i]
 * followed by the scales, packed_scale[(rb * S + g) * 32 + r] = scale of row 32 rb + r in
 * column segment g (S = ceil(cols / blk_c)): the kernel decodes a step to bf16 pairs through
 * a table and scales each segment's partial sums per row. Half the bytes of bf16.
 *
 * fp8 at the AVX2 level (PREPACK_KIND_FP8_AVX2, w->packed_kind): the same blocks, steps and
 * scales, the bytes of a step ordered for ops/gemm_fp8_avx2.c instead, rows 0-15 in the first
 * 32 bytes, rows 16-31 in the second; in each half dword j holds rows j and 8 + j of both
 * columns, row r column i in byte 2 (r % 16 / 8) + i (prepack_fp8_avx2_byte): 16-bit shifts then
 * decode two bytes of every dword at once, each into the lanes of its 8 rows.
 *
 * A packed wmat keeps its `data` (the checkpoint's mapping): the other kernels, wmat_get and
 * views that cut a block or columns still use it; a view that starts on a block at column 0
 * keeps `packed`. Why one layout for every token count: one kernel per level, and each
 * (row, token) summed in the same order whatever the batch. The prefill attention packs its
 * per-head K and V^T the same way (prepack_f32) and runs prepack_gemm_1t per thread. */
#ifndef MLA_OPS_PREPACK_H
#define MLA_OPS_PREPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/gemm.h"

#define PREPACK_ROWS 32          /* rows per block */
#define PREPACK_FP8_SEG_PAIRS 64 /* fp8: most pairs per scale segment (blk_c <= 128) */
#define PREPACK_PAIR_ALIGN 16    /* pairs per block padded to this: one AMX tile's k depth */

/* byte of a packed fp8 step holding row r (0-31), column i (0-1) of the pair */
static inline size_t prepack_fp8_byte(int r, int i) { return (size_t)(2 * (2 * (r % 16) + i) + r / 16); }

/* the same in the AVX2 fp8 layout */
static inline size_t prepack_fp8_avx2_byte(int r, int i)
{
	return (size_t)(32 * (r / 16) + 4 * (r % 8) + 2 * (r % 16 / 8) + i);
}

#define PREPACK_KIND_DP 0       /* the dot-product kernels' layout (AVX512_BF16, AMX) */
#define PREPACK_KIND_FP8_AVX2 1 /* fp8 bytes for the AVX2 kernel (ops/gemm_fp8_avx2.c) */

/* pairs per block of a packed matrix with `cols` columns */
static inline int prepack_pairs(int cols)
{
	return ((cols + 1) / 2 + PREPACK_PAIR_ALIGN - 1) / PREPACK_PAIR_ALIGN * PREPACK_PAIR_ALIGN;
}

struct pool;

/* Each entry below asks w's format (ops/wformat.h: its prepack_* fields). */

/* Bytes of w's packed copy (the view's rows and columns, padded as above). */
size_t prepack_bytes(const struct wmat *w);

/* Whether packing w pays: bf16 weights (or fp8 ones whose columns start on a scale block), a
 * CPU with bf16 dot products, bf16 activations; or at the AVX2 level, any activations, bf16
 * weights (in this layout, for ops/gemm_bf16_avx2.c) and fp8 ones (columns on a scale block,
 * in the AVX2 layout). MLASERVE_PREPACK=0: never. */
bool prepack_wanted(const struct wmat *w, bool act_bf16);

/* Packs the view w (bf16 or fp8) into dst (prepack_bytes(w), 64-byte aligned) over the pool's
 * threads and sets w->packed = dst, w->packed_pairs = P (fp8: and w->packed_scale), and
 * w->packed_kind: fp8 below the AVX512_BF16 level takes the AVX2 layout. */
void prepack_weights(struct wmat *w, uint32_t *dst, struct pool *p);
/* The same in a given layout (PREPACK_KIND_FP8_AVX2: fp8 only), whatever the CPU's level: for
 * tests of the AVX2 kernel on a newer CPU */
void prepack_weights_kind(struct wmat *w, uint32_t *dst, struct pool *p, int kind);

/* For the format rows: the level rule of the packed kernels (the AVX2 level, any activations;
 * from AVX512_BF16 on, bf16 ones), the bytes of a packed copy's values (64-byte aligned; fp8's
 * scales follow), and bf16's packer (kind PREPACK_KIND_DP). */
bool prepack_level_wants(bool act_bf16);
size_t prepack_value_bytes(const struct wmat *w);
void prepack_bf16(struct wmat *w, uint32_t *dst, struct pool *p);

/* 32-bit words per pair step of a block of values of `bits` bits (bf16 32, fp8 16) and fp8
 * scale segments per block */
static inline int prepack_words_per_pair(int bits) { return PREPACK_ROWS * bits / 16; }
static inline int prepack_segments(const struct wmat *w) { return (2 * w->packed_pairs + w->blk_c - 1) / w->blk_c; }

/* Packs columns [c0, c0 + nc) (c0 even) of a [rows, cols] matrix of bf16-exact fp32 values, element
 * (r, c0 + c) = src[r * ld_r + c * ld_c], into dst laid out for `cols` columns (prepack_pairs(cols)
 * pairs per block), padding rows up to the block and an odd last column of the range with zeros
 * (the range that ends at cols also zeroes the pad pairs). Strides let the caller pack a transpose
 * (the prefill's Vᵀ) or concatenate column ranges (its [k_nope | k_pe] keys) without a copy. */
void prepack_f32(uint32_t *dst, int rows, int cols, int c0, int nc, const float *src, size_t ld_r, size_t ld_c);

/* Single-threaded y = x · Wᵀ on packed weights (w->data unused), for callers that divide the
 * work themselves (the prefill attention): ops_level_best() >= OPS_AVX512_BF16, j->x values
 * bf16-exact; xb: scratch of prepack_x_elems(j->n, w->cols) elements. */
size_t prepack_x_elems(int n, int cols);
int prepack_x_ld(int cols); /* elements between xb's rows */
void prepack_gemm_1t(const struct gemm_job *j, uint16_t *xb);
/* The same on x already in xb (j->x unused): rows prepack_x_ld(w->cols) elements apart,
 * bf16 of the row's cols values, then zeros to the end of the row; prepack_x_elems(j->n,
 * w->cols) elements (rows past n are read, never stored). */
void prepack_gemm_1t_xb(const struct gemm_job *j, const uint16_t *xb);

#endif
