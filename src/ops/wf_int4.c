/* The int4 row of the weight format table (ops/wformat.h): signed 4-bit weights in groups of
 * 32 columns with a bf16 scale per row and group (compressed-tensors' symmetric
 * pack-quantized), in blocks of 32 rows (never row-major: the layout of ops/quant_int4.h),
 * quantized at load from any float or fp8 matrix (or repacked from such a checkpoint,
 * quant_int4_from_packed). Each GEMM call prepares its activations once: bf16-exact x from the
 * AVX512_BF16 level on stays bf16 (W4A16: the nibbles decoded to bf16 for vdpbf16ps, or for
 * AMX tiles from 2 tokens at the amx level), else x is quantized per token and 128 columns as
 * the int8 row's (W4A8: exact int32 dots per group, vpdpbusd / AVX-VNNI / AVX2 / portable).
 * gemm_int4.c holds the kernels.
 *
 * --quantization int4 puts the routed experts in this row (model_quant_format's WQ_EXPERT) and
 * the other linear layers in --quantization-rest's (int8 by default). A pack-quantized
 * checkpoint's `<name>.weight_packed` (I32 [out, in / 8]) and `<name>.weight_scale` (BF16
 * [out, in / 32]) become this row through quant_int4_from_packed on the rank's region (columns
 * cut at multiples of 32). */
#include "ops/gemm_internal.h"
#include "ops/quant_int4.h"
#include "ops/wformat.h"

/* whole 32-row blocks, columns from a group on (ld keeps the blocks' stride) */
static struct wmat int4_view(const struct wmat *w, int r0, int nr, int c0, int nc)
{
	CHECK(r0 % INT4_ROWS == 0 && c0 % INT4_GROUP == 0);
	struct wmat v = *w;
	v.data = int4_group(w, r0 / INT4_ROWS, c0 / INT4_GROUP);
	v.rows = nr;
	v.cols = nc;
	v.row0 = w->row0 + r0;
	v.col0 = w->col0 + c0;
	return v;
}

/* the view's blocks and groups (a column view reads no more of each block) */
static size_t int4_bytes(const struct wmat *w)
{
	return (size_t)int4_row_blocks(w->rows) * (size_t)int4_groups(w->cols) * INT4_GROUP_BYTES;
}

/* exactly the region: out->row0 / col0 its start in src */
static int int4_quantize(struct pool *p, const struct wmat *src, int r0, int nr, int c0, int nc,
			 const struct walloc *a, struct wmat *out, int *bad_r, int *bad_c)
{
	char *d = a->fn(a->ctx, int4_data_bytes(nr, nc), false);
	if (!d)
		return -2;
	if (quant_int4_weights(p, src, r0, nr, c0, nc, d, out, bad_r, bad_c))
		return *bad_r < 0 ? -2 : -1;
	out->row0 = r0;
	out->col0 = c0;
	return 0;
}

static size_t int4_act_bytes(enum ops_level lvl, const struct gemm_job *j)
{
	return gemm_int4_act_bytes(gemm_int4_w16(lvl, j), j->n, j->w->cols);
}

static void int4_act_fill(enum ops_level lvl, const struct gemm_job *j, int t0, int t1, void *buf)
{
	gemm_int4_act_fill(gemm_int4_w16(lvl, j), j, t0, t1, buf);
}

/* two kinds, so that jobs sharing x share it only when both want the same */
static const struct wact wact_int4_a8 = {.name = "int8 groups (int4)", .bytes = int4_act_bytes, .fill = int4_act_fill};
static const struct wact wact_int4_a16 = {.name = "bf16 (int4)", .bytes = int4_act_bytes, .fill = int4_act_fill};

static const struct wact *int4_act(enum ops_level lvl, const struct gemm_job *j)
{
	return gemm_int4_w16(lvl, j) ? &wact_int4_a16 : &wact_int4_a8;
}

const struct wformat wformat_int4 = {
	.name = "int4",
	.dtype = DT_I4,
	.bits = 4,
	.blk_k = INT4_GROUP,
	.blk_n = 1,
	.scale = WSCALE_BF16,
	.view = int4_view,
	.bytes = int4_bytes,
	.get = quant_int4_get,
	.quantize = int4_quantize,
	.transposable = false,
	.scale_unit = "group",
	.quant_help = "W4A16 / W4A8, int4 weights in groups of 32",
	.usage = "int4 weights (a bf16 scale per row and 32 columns:\n"
		 "4.5 bits a weight) made at load; bf16 activations\n"
		 "where the CPU has bf16 dot products, else int8 per\n"
		 "token and 128 columns",
	.quant_desc = "int4 (a bf16 scale per row and 32 columns; bf16 or int8 activations)",
	.kernels = gemm_int4_kernel_name,
	.act = int4_act,
	.panel = {gemm_panel_int4, gemm_panel_int4, gemm_panel_int4, gemm_panel_int4, gemm_panel_int4},
};
