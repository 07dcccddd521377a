/* The fp4 row of the weight format table (ops/wformat.h): MXFP4 as DeepSeek-V4's routed
 * experts ship it (ops/wf_fp4.h: e2m1 pairs per byte, an e8m0 scale byte per 32 along K),
 * read as the checkpoint stores it: never quantized at load nor packed. The activations: fp32
 * x for the fp32 kernels, bf16 rows for the bf16 dot-product one (x bf16-exact), or x rounded
 * through fp8 per 128 columns first when the job asks (gemm_job.act_fp8, V4's act_quant). */
#include "ops/wf_fp4.h"

#include "ops/gemm_internal.h"
#include "ops/prepack.h"
#include "ops/wformat.h"

struct wmat wf_fp4_wmat(const void *packed, const uint8_t *scales, int rows, int cols)
{
	CHECK(cols % 2 == 0);
	return (struct wmat){.dtype = DT_F4_E2M1,
			     .data = packed,
			     .rows = rows,
			     .cols = cols,
			     .ld = cols,
			     .scale_e8m0 = scales,
			     .scale_ld = (cols + FP4_GROUP - 1) / FP4_GROUP,
			     .blk_r = 1,
			     .blk_c = FP4_GROUP};
}

static float fp4_get(const struct wmat *w, int r, int c)
{
	uint8_t b = ((const uint8_t *)w->data)[((size_t)r * (size_t)w->ld + (size_t)c) / 2];
	uint8_t e = w->scale_e8m0[(size_t)((w->row0 + r) / w->blk_r) * (size_t)w->scale_ld +
				  (size_t)((w->col0 + c) / w->blk_c)];
	return wf_fp4_e2m1[(c & 1) ? b >> 4 : b & 15] * wf_fp4_e8m0(e);
}

/* any rows, columns from an even one (whole bytes; the scales through row0 / col0, so a cut
 * inside a group keeps its scale) */
static struct wmat fp4_view(const struct wmat *w, int r0, int nr, int c0, int nc)
{
	CHECK(c0 % 2 == 0 && w->ld % 2 == 0);
	struct wmat v = *w;
	v.data = (const uint8_t *)w->data + ((size_t)r0 * (size_t)w->ld + (size_t)c0) / 2;
	v.rows = nr;
	v.cols = nc;
	v.row0 = w->row0 + r0;
	v.col0 = w->col0 + c0;
	return v;
}

/* the view's bytes and the scale bytes of the groups it touches */
static size_t fp4_bytes(const struct wmat *w)
{
	size_t groups = w->cols ? (size_t)((w->col0 + w->cols - 1) / w->blk_c - w->col0 / w->blk_c + 1) : 0;
	return (size_t)w->rows * (((size_t)w->cols + 1) / 2) + (size_t)w->rows * groups;
}

/* The dot-product kernel for one token only: it takes a vdpbf16ps and an FMA per token and
 * group where the fp32 one takes two FMAs (on 256 x 4096 in L2, one thread: 51 vs 63 us at 1
 * token, 77 vs 74 at 2, 127 vs 98 at 4) */
#define DP_MAX_TOKENS 1

/* bf16 rows for the dot-product kernel (AVX512_BF16 on, one token) when x is bf16-exact or
 * rounded through fp8 first; fp32 rows of the rounded x for the others; else x as it is */
static const struct wact *fp4_act(enum ops_level lvl, const struct gemm_job *j)
{
	bool dp = lvl >= OPS_AVX512_BF16 && j->n <= DP_MAX_TOKENS && j->w->cols > 0;
	if (j->act_fp8)
		return dp ? &wact_fp8_act128_bf16 : &wact_fp8_act128;
	return dp && j->x_bf16 ? &wact_bf16_rows : NULL;
}

static int fp4_panel(enum ops_level lvl, const struct gemm_job *j, const void *act, int r0, int r1)
{
	const struct wact *k = act ? fp4_act(lvl, j) : NULL;
	if (k == &wact_fp8_act128)
		return gemm_panel_fp4(lvl, j, act, j->w->cols, NULL, 0, r0, r1);
	if (k) /* bf16 rows, as wact_bf16_rows lays them */
		return gemm_panel_fp4(lvl, j, NULL, 0, act, gemm_prepacked_ldxb(j->w->cols), r0, r1);
	return gemm_panel_fp4(lvl, j, j->x, j->ldx, NULL, 0, r0, r1);
}

const struct wformat wformat_fp4 = {
	.name = "fp4",
	.dtype = DT_F4_E2M1,
	.bits = 4,
	.bf16_exact = true,
	.blk_k = FP4_GROUP,
	.blk_n = 1,
	.scale = WSCALE_E8M0,
	.view = fp4_view,
	.bytes = fp4_bytes,
	.get = fp4_get,
	.transposable = false,
	.scale_unit = "group",
	.kernels = gemm_fp4_kernel_name,
	.act = fp4_act,
	.panel = {fp4_panel, fp4_panel, fp4_panel, fp4_panel, fp4_panel},
};
