/* Weight matrices and the GEMM y[n, rows] = x[n, cols] · Wᵀ on compact weights (every row of
 * the weight-format table, ops/wformat.h: bf16, f16, f32, fp8 e4m3 with block scales, int8,
 * int4, MXFP4), fp32 accumulate, one pass over the weights for all n tokens, threaded over
 * output rows. Runtime CPU dispatch (ops/cpu.h): each format's panel per level. */
#ifndef MLA_OPS_GEMM_H
#define MLA_OPS_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"

struct pool;

/* A (view of a) weight matrix [rows, cols], row-major with leading dimension ld elements.
 * For DT_F8_E4M3, element (r, c) of the view is
 *   fp8(data[r*ld + c]) * scale[((row0 + r) / blk_r) * scale_ld + (col0 + c) / blk_c]
 * where scale points at the FULL tensor's grid and (row0, col0) is the view's offset in the
 * full tensor, so a tensor-parallel slice at any row/col boundary is used in place. */
struct wmat {
	enum dtype dtype; /* its row of the format table (ops/wformat.h) says how every function
			   * here reads it: DT_F32, DT_F16, DT_BF16, DT_F8_E4M3, DT_I8 / DT_I4 (data
			   * holds packed blocks and their scales, ops/quant_int8.h, quant_int4.h),
			   * DT_F4_E2M1 (MXFP4 pairs, scale_e8m0) */
	const void *data; /* element (0, 0) of the view */
	int rows, cols;
	int64_t ld;
	/* the scale grid [ceil(full_rows/blk_r), scale_ld]: fp32 (fp8, WSCALE_F32 / UE8M0), or
	 * one byte 2^(e - 127) per block (fp4, WSCALE_E8M0: DeepSeek-V4's F8_E8M0 tensors) */
	union {
		const float *scale;
		const uint8_t *scale_e8m0;
	};
	int scale_ld, row0, col0, blk_r, blk_c;
	/* optional: the view's weights packed for the bf16 dot-product kernels (ops/prepack.h),
	 * packed_pairs column pairs per 32-row block (fp8: packed_scale, each row's block scale
	 * per 128-column segment); a sub-view keeps it when it starts on a 32-row block and at
	 * column 0 */
	const uint32_t *packed;
	int packed_pairs;
	int packed_kind; /* prepack.h: PREPACK_KIND_DP, or PREPACK_KIND_FP8_AVX2 (fp8 at the AVX2 level) */
	const float *packed_scale;
	/* Sums in one order whatever a call's token count (f32, f16, bf16, fp8): the row kernels'
	 * register blocks for every n (never packed per call), or fp8's AVX2 layout packed at load,
	 * so that row t of y is bit for bit the same in a call of 1 or 300 tokens at a given
	 * level: a prompt gives the same values however it is chunked (DeepSeek-V4's prefix
	 * caching, warm = cold). Set before packing at load. */
	bool fixed_order;
};

/* A sub-view: rows [r0, r0+nr), cols [c0, c0+nc) of w. */
struct wmat wmat_view(const struct wmat *w, int r0, int nr, int c0, int nc);
size_t wmat_bytes(const struct wmat *w);            /* bytes of the view's elements (+ its scales) */
float wmat_get(const struct wmat *w, int r, int c); /* one element, for tests and slow paths */

/* One GEMM: y[t*ldy + r] = (accumulate ? y : 0) + Σ_c x[t*ldx + c] · W[r, c] (then rounded to
 * bf16 if round_bf16). */
struct gemm_job {
	const struct wmat *w;
	const float *x; /* [n, ldx] */
	float *y;       /* [n, ldy] */
	int n, ldx, ldy;
	int accumulate;
	/* Every x value is exactly a bf16 (the model rounds its activations under --dtype
	 * bfloat16): bf16 and fp8 weights may then run bf16 dot products, whose products are
	 * exact, so only the fp32 summation order differs from the fp32 path. */
	int x_bf16;
	/* DeepSeek-V4's act_quant: x rounded to e4m3 per token and 128 columns under a ue8m0
	 * scale before the product (ops/wformat.h: wact_fp8_act128), by the rows whose GEMMs V4
	 * quantizes (fp8, fp4); the others read x as it is, as they all do without scratch
	 * memory for the rounded copy. 0: x exactly (V4's float32 mode). */
	int act_fp8;
	/* y rounded to bf16 (nearest even, as ops_round_bf16) once final, by the thread that
	 * computed it while it is in cache: the model's activation rounding without a serial
	 * pass over y */
	int round_bf16;
};

/* Dispatch levels (ops/cpu.h); the _at variants run a given level (tests compare them). */
#include "ops/cpu.h"

/* Runs all jobs in one parallel region (threads share the row panels of every job). */
void ops_gemm_multi(struct pool *p, int n_jobs, const struct gemm_job *jobs);
void ops_gemm_multi_at(enum ops_level lvl, struct pool *p, int n_jobs, const struct gemm_job *jobs);
void ops_gemm(struct pool *p, const struct wmat *w, const float *x, int ldx, int n, float *y, int ldy);

/* For the bench's compute peak (level OPS_AMX): iters x 4 chained tile products of
 * 16 x 16 x 32 (65536 FLOPs per iteration) on the calling thread; returns a value to keep. */
#define OPS_AMX_PEAK_FLOPS_PER_ITER 65536.0
float gemm_amx_peak_chain(long iters);

#endif
