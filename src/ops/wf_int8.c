/* The int8 row of the weight format table (ops/wformat.h): W8A8 (--quantization int8), int8
 * weights with a scale per row and 128 columns in blocks of 32 rows (never row-major: the
 * layout of ops/quant_int8.h), quantized at load from any float or fp8 matrix; each GEMM call
 * quantizes its activations per token and 128 columns once (wact_int8_groups), and the
 * kernels of gemm_int8.c multiply int8 by int8 into exact int32 sums. */
#include "ops/gemm_internal.h"
#include "ops/quant_int8.h"
#include "ops/wformat.h"

/* whole 32-row blocks of all the columns only */
static struct wmat int8_view(const struct wmat *w, int r0, int nr, int c0, int nc)
{
	CHECK(r0 % INT8_ROWS == 0 && c0 == 0 && nc == w->cols);
	struct wmat v = *w;
	v.data = (const char *)w->data + (size_t)(r0 / INT8_ROWS) * int8_block_bytes(w->cols);
	v.rows = nr;
	return v;
}

static size_t int8_bytes(const struct wmat *w) { return int8_data_bytes(w->rows, w->cols); }

/* exactly the region: out->row0 / col0 its start in src */
static int int8_quantize(struct pool *p, const struct wmat *src, int r0, int nr, int c0, int nc,
			 const struct walloc *a, struct wmat *out, int *bad_r, int *bad_c)
{
	char *d = a->fn(a->ctx, int8_data_bytes(nr, nc), false);
	if (!d)
		return -2;
	if (quant_int8_weights(p, src, r0, nr, c0, nc, d, out, bad_r, bad_c))
		return *bad_r < 0 ? -2 : -1;
	out->row0 = r0;
	out->col0 = c0;
	return 0;
}

/* ---- x as int8 per token and group: the kernel's bytes (rounded to 4), then the scales ---- */
static size_t qx_bytes(enum ops_level lvl, const struct gemm_job *j)
{
	return (gemm_int8_x_bytes(lvl, j->n, j->w->cols) + 3) / 4 * 4;
}

static size_t int8_act_bytes(enum ops_level lvl, const struct gemm_job *j)
{
	return qx_bytes(lvl, j) + sizeof(float) * (size_t)j->n * (size_t)int8_groups(j->w->cols);
}

static void int8_act_fill(enum ops_level lvl, const struct gemm_job *j, int t0, int t1, void *buf)
{
	int cols = j->w->cols;
	float *sx = (float *)(void *)((char *)buf + qx_bytes(lvl, j)); /* [n, groups] */
	for (int t = t0; t < t1; t++)
		gemm_int8_quant_x(lvl, j->x + (size_t)t * (size_t)j->ldx, cols, j->n, t, buf,
				  sx + (size_t)t * (size_t)int8_groups(cols));
}

const struct wact wact_int8_groups = {.name = "int8 groups", .bytes = int8_act_bytes, .fill = int8_act_fill};

static const struct wact *int8_act(enum ops_level lvl, const struct gemm_job *j) { return &wact_int8_groups; }

/* every level: gemm_int8.c picks its kernel (portable, AVX2, AVX-VNNI, AVX-512 VNNI) */
static int int8_panel(enum ops_level lvl, const struct gemm_job *j, const void *act, int r0, int r1)
{
	const uint8_t *qx = act;
	const float *sx = act ? (const float *)(const void *)(qx + qx_bytes(lvl, j)) : NULL;
	return gemm_panel_int8(lvl, j, qx, sx, r0, r1);
}

const struct wformat wformat_int8 = {
	.name = "int8",
	.dtype = DT_I8,
	.bits = 8,
	.blk_k = INT8_GROUP,
	.blk_n = 1,
	.scale = WSCALE_F32,
	.view = int8_view,
	.bytes = int8_bytes,
	.get = quant_int8_get,
	.quantize = int8_quantize,
	.transposable = false,
	.scale_unit = "row",
	.quant_help = "W8A8, int8 weights and activations",
	.usage = "W8A8: linear layers (bf16 or fp8) quantized to int8\n"
		 "at load, activations to int8 at each GEMM (scales\n"
		 "per row / token and 128 columns): int8 products",
	.quant_desc = "int8 (a scale per row and 128 columns; activations per token and 128 columns)",
	.kernels = gemm_int8_kernel_name,
	.act = int8_act,
	.panel = {int8_panel, int8_panel, int8_panel, int8_panel, int8_panel},
};
