/* The float rows of the weight format table (ops/wformat.h): f32, f16 and bf16, row-major as
 * the checkpoint stores them, run by the row-major kernels (gemm_rows.c). bf16 is packed at
 * load for the bf16 dot-product kernels (AVX512_BF16, AMX: x as bf16 rows, wact_bf16_rows) and
 * for the AVX2 ones (ops/prepack.h). */
#include "ops/gemm_internal.h"
#include "ops/prepack.h"
#include "ops/wformat.h"

static float float_get(const struct wmat *w, int r, int c)
{
	return gemm_elem(w->dtype, w->data, (size_t)r * (size_t)w->ld + (size_t)c);
}

/* ---- x as bf16 rows, for weights packed in the dot-product layout (bf16, fp8) ---- */
static size_t bf16_rows_bytes(enum ops_level lvl, const struct gemm_job *j)
{
	return prepack_x_elems(j->n, j->w->cols) * sizeof(uint16_t);
}

static void bf16_rows_fill(enum ops_level lvl, const struct gemm_job *j, int t0, int t1, void *buf)
{
	gemm_x_to_bf16(j->x, j->ldx, t0, t1, j->w->cols, buf, gemm_prepacked_ldxb(j->w->cols));
}

const struct wact wact_bf16_rows = {.name = "bf16 rows", .bytes = bf16_rows_bytes, .fill = bf16_rows_fill};

/* the bf16 dot-product kernels on the load-time packed copy: bf16-exact x, from AVX512_BF16 on */
const struct wact *wformat_act_dp(enum ops_level lvl, const struct gemm_job *j)
{
	const struct wmat *w = j->w;
	return lvl >= OPS_AVX512_BF16 && w->packed && w->packed_kind == PREPACK_KIND_DP && j->x_bf16 && w->cols > 0
		       ? &wact_bf16_rows
		       : NULL;
}

/* ---- bf16 ---- */
/* wmat.fixed_order: the row kernels (the packed ones sum in another order for many tokens) */
static bool bf16_prepack_wanted(const struct wmat *w, bool act_bf16)
{
	return !w->fixed_order && prepack_level_wants(act_bf16);
}
static int bf16_prepack_kind(const struct wmat *w) { return PREPACK_KIND_DP; }
static size_t bf16_prepack_bytes(const struct wmat *w) { return prepack_value_bytes(w); }

static void bf16_prepack(struct wmat *w, uint32_t *dst, struct pool *p, int kind)
{
	CHECK(kind == PREPACK_KIND_DP);
	prepack_bf16(w, dst, p);
}

/* the AVX2 level: the packed copy's own kernel (fp32 FMAs on the bf16 pairs) */
static int bf16_panel_avx2(enum ops_level lvl, const struct gemm_job *j, const void *act, int r0, int r1)
{
	if (j->w->packed && j->w->packed_kind == PREPACK_KIND_DP && j->w->cols > 0) {
		gemm_panel_bf16_avx2(j, r0, r1);
		return 0;
	}
	return gemm_panel_rows(lvl, j, act, r0, r1);
}

#define ROWS_ALL_LEVELS                                                                             \
	{                                                                                           \
		gemm_panel_rows, gemm_panel_rows, gemm_panel_rows, gemm_panel_rows, gemm_panel_rows \
	}

const struct wformat wformat_f32 = {
	.name = "f32", .dtype = DT_F32, .bits = 32, .get = float_get, .panel = ROWS_ALL_LEVELS};

const struct wformat wformat_f16 = {
	.name = "f16", .dtype = DT_F16, .bits = 16, .get = float_get, .panel = ROWS_ALL_LEVELS};

const struct wformat wformat_bf16 = {
	.name = "bf16",
	.dtype = DT_BF16,
	.bits = 16,
	.bf16_exact = true,
	.get = float_get,
	.prepack_wanted = bf16_prepack_wanted,
	.prepack_kind = bf16_prepack_kind,
	.prepack_bytes = bf16_prepack_bytes,
	.prepack = bf16_prepack,
	.act = wformat_act_dp,
	.panel = {[OPS_PORTABLE] = gemm_panel_rows,
		  [OPS_AVX2] = bf16_panel_avx2,
		  [OPS_AVX512] = gemm_panel_rows,
		  [OPS_AVX512_BF16] = gemm_panel_rows,
		  [OPS_AMX] = gemm_panel_rows},
};
