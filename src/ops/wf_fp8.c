/* The fp8 row of the weight format table (ops/wformat.h): e4m3fn values, row-major, with one
 * fp32 scale per blk_r x blk_c block (DeepSeek's fp8 checkpoints: weight_scale_inv, 128x128;
 * scale_fmt ue8m0 stores the same grid holding powers of two), addressed through the view's
 * (row0, col0) in the full grid. Quantized at load by --quantization fp8 (ops/quant_fp8.h),
 * packed at load for the bf16 dot-product kernels (bytes decoded to bf16 pairs) or, at the AVX2
 * level, in the AVX2 layout (ops/prepack.h), else run by the row-major kernels (gemm_rows.c). */
#include <string.h>

#include "ops/gemm_internal.h"
#include "ops/pool.h"
#include "ops/prepack.h"
#include "ops/quant_fp8.h"
#include "ops/wformat.h"

#define QBLK 128 /* --quantization fp8's blocks: 128 x 128, as DeepSeek's checkpoints */

static float fp8_get(const struct wmat *w, int r, int c)
{
	return gemm_elem(DT_F8_E4M3, w->data, (size_t)r * (size_t)w->ld + (size_t)c) * gemm_wscale(w, r, c);
}

/* The region widened to whole QBLK blocks, so that its scales are those of the whole matrix
 * (a tensor-parallel slice quantizes as the whole matrix does): out->row0 / col0 give its place
 * in src. The values may be dropped once packed; the scales stay. */
static int fp8_quantize(struct pool *p, const struct wmat *src, int r0, int nr, int c0, int nc, const struct walloc *a,
			struct wmat *out, int *bad_r, int *bad_c)
{
	int R0 = r0 / QBLK * QBLK, C0 = c0 / QBLK * QBLK;
	int R1 = (r0 + nr + QBLK - 1) / QBLK * QBLK, C1 = (c0 + nc + QBLK - 1) / QBLK * QBLK;
	R1 = R1 < src->rows ? R1 : src->rows;
	C1 = C1 < src->cols ? C1 : src->cols;
	int sr = (src->rows + QBLK - 1) / QBLK, sc = (src->cols + QBLK - 1) / QBLK;
	uint8_t *q = a->fn(a->ctx, (size_t)(R1 - R0) * (size_t)(C1 - C0), true);      /* [R1 - R0, C1 - C0] */
	float *scale = a->fn(a->ctx, sizeof(float) * (size_t)sr * (size_t)sc, false); /* [sr, sc] */
	if (!q || !scale)
		return -2;
	*bad_r = *bad_c = 0;
	if (quant_fp8_blocks(p, src, R0, R1 - R0, C0, C1 - C0, QBLK, q, scale, bad_r, bad_c))
		return -1;
	*out = (struct wmat){.dtype = DT_F8_E4M3,
			     .data = q,
			     .rows = R1 - R0,
			     .cols = C1 - C0,
			     .ld = C1 - C0,
			     .scale = scale,
			     .scale_ld = sc,
			     .row0 = R0,
			     .col0 = C0,
			     .blk_r = QBLK,
			     .blk_c = QBLK};
	return 0;
}

/* ---- packing at load (layouts: ops/prepack.h) ---- */

/* the packed kernels scale whole segments of pairs: even blocks, a view starting on one */
static bool fp8_packable(const struct wmat *w)
{
	return w->blk_c > 0 && w->blk_c % 2 == 0 && w->blk_c <= 2 * PREPACK_FP8_SEG_PAIRS && w->col0 % w->blk_c == 0;
}

/* below AVX512_BF16 the AVX2 kernel's byte order */
static int fp8_prepack_kind(const struct wmat *w)
{
	return ops_level_best() < OPS_AVX512_BF16 ? PREPACK_KIND_FP8_AVX2 : PREPACK_KIND_DP;
}

/* wmat.fixed_order: the AVX2 layout's kernel sums in one order for every token count (its
 * paths differ in exact power-of-two scalings only); the dot-product ones do not */
static bool fp8_prepack_wanted(const struct wmat *w, bool act_bf16)
{
	return fp8_packable(w) && prepack_level_wants(act_bf16) &&
	       (!w->fixed_order || fp8_prepack_kind(w) == PREPACK_KIND_FP8_AVX2);
}

static size_t blocks_of(const struct wmat *w) { return (size_t)((w->rows + PREPACK_ROWS - 1) / PREPACK_ROWS); }
static size_t segments_of(const struct wmat *w) { return (size_t)((w->cols + w->blk_c - 1) / w->blk_c); }

static size_t fp8_prepack_bytes(const struct wmat *w)
{
	return prepack_value_bytes(w) + blocks_of(w) * segments_of(w) * PREPACK_ROWS * sizeof(float);
}

struct pack_ctx {
	const struct wmat *w;
	uint32_t *dst;
	int kind; /* PREPACK_KIND_* */
};

/* blocks [b0, b1): the bytes pairwise per row, then each row's scale per segment */
static void pack_blocks_fp8(void *arg, int b0, int b1, int tid)
{
	(void)tid;
	const struct pack_ctx *c = arg;
	const struct wmat *w = c->w;
	size_t PP = (size_t)prepack_pairs(w->cols), S = segments_of(w);
	float *scale = (float *)(void *)((char *)c->dst + prepack_value_bytes(w));
	size_t (*byte)(int, int) = c->kind == PREPACK_KIND_FP8_AVX2 ? prepack_fp8_avx2_byte : prepack_fp8_byte;
	for (int b = b0; b < b1; b++) {
		uint8_t *d = (uint8_t *)c->dst + (size_t)b * PP * 2 * PREPACK_ROWS;
		memset(d, 0, PP * 2 * PREPACK_ROWS);
		float *sc = scale + (size_t)b * S * PREPACK_ROWS;
		for (int r = 0; r < PREPACK_ROWS; r++) {
			int row = b * PREPACK_ROWS + r;
			for (size_t g = 0; g < S; g++)
				sc[g * PREPACK_ROWS + (size_t)r] = row < w->rows
									   ? gemm_wscale(w, row, (int)g * w->blk_c)
									   : 0.0f;
			if (row >= w->rows)
				continue;
			const uint8_t *src = (const uint8_t *)w->data + (size_t)row * (size_t)w->ld;
			uint8_t *d0 = d + byte(r, 0), *d1 = d + byte(r, 1); /* the row's bytes in every step */
			int col = 0;
			for (; col + 1 < w->cols; col += 2) {
				d0[(size_t)col * PREPACK_ROWS] = src[col];
				d1[(size_t)col * PREPACK_ROWS] = src[col + 1];
			}
			if (col < w->cols)
				d0[(size_t)col * PREPACK_ROWS] = src[col];
		}
	}
}

static void fp8_prepack(struct wmat *w, uint32_t *dst, struct pool *p, int kind)
{
	CHECK(fp8_packable(w) && ((uintptr_t)dst & 63) == 0 &&
	      (kind == PREPACK_KIND_DP || kind == PREPACK_KIND_FP8_AVX2));
	struct pack_ctx c = {w, dst, kind};
	pool_for(p, (int)blocks_of(w), 1, pack_blocks_fp8, &c);
	w->packed = dst;
	w->packed_pairs = prepack_pairs(w->cols);
	w->packed_kind = kind;
	w->packed_scale = (const float *)(const void *)((const char *)dst + prepack_value_bytes(w));
}

/* the bf16 rows of the dot-product kernels on the packed copy; under gemm_job.act_fp8 x
 * rounded through fp8 first (those bf16 rows, or fp32 rows for every other kernel) */
static const struct wact *fp8_act(enum ops_level lvl, const struct gemm_job *j)
{
	const struct wmat *w = j->w;
	if (!j->act_fp8)
		return wformat_act_dp(lvl, j);
	return lvl >= OPS_AVX512_BF16 && w->packed && w->packed_kind == PREPACK_KIND_DP && w->cols > 0
		       ? &wact_fp8_act128_bf16
		       : &wact_fp8_act128;
}

/* from the AVX2 level on: the AVX2 layout's own kernel (whatever the level: tests pack it on
 * newer CPUs), else the row-major kernels, or the dot-product ones on the packed copy */
static int fp8_panel(enum ops_level lvl, const struct gemm_job *j, const void *act, int r0, int r1)
{
	struct gemm_job xj;
	if (act && j->act_fp8 && fp8_act(lvl, j) == &wact_fp8_act128) { /* the rounded x in fp32 */
		xj = wact_fp8_job(j, act);
		j = &xj;
		act = NULL;
	}
	if (lvl >= OPS_AVX2 && j->w->packed && j->w->packed_kind == PREPACK_KIND_FP8_AVX2 && j->w->cols > 0) {
		gemm_panel_fp8_avx2(j, r0, r1);
		return 0;
	}
	return gemm_panel_rows(lvl, j, act, r0, r1);
}

const struct wformat wformat_fp8 = {
	.name = "fp8",
	.dtype = DT_F8_E4M3,
	.bits = 8,
	.bf16_exact = true,
	.blk_k = QBLK,
	.blk_n = QBLK,
	.scale = WSCALE_F32,
	.get = fp8_get,
	.quantize = fp8_quantize,
	.transposable = true,
	.scale_unit = "block",
	.quant_help = "linear layers quantized to fp8 at load, fp8 checkpoints are read as they are",
	.usage = "bf16 checkpoints: linear layers quantized to fp8\n"
		 "at load (128x128 blocks, as DeepSeek's fp8 ones)",
	.quant_desc = "fp8 in 128x128 blocks",
	.prepack_wanted = fp8_prepack_wanted,
	.prepack_kind = fp8_prepack_kind,
	.prepack_bytes = fp8_prepack_bytes,
	.prepack = fp8_prepack,
	.act = fp8_act,
	.panel = {fp8_panel, fp8_panel, fp8_panel, fp8_panel, fp8_panel},
};
