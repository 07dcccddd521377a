/* W8A8 int8 (ops/quant_int8.h, --quantization int8): the weight quantizer and its packed
 * layout, the activation quantizer (vector against a scalar copy of the definition), and the
 * GEMM at every level the CPU has (and at avx2 with AVX-VNNI off and on) against the definition
 * computed here in plain C, to the bit:
 * odd shapes (rows not a multiple of the 32-row block, columns not of 4 or of the 128-column
 * group), token counts across the tiles and chunks, accumulate, views, jobs sharing x, x
 * quantized over the pool, NaN activations; the error against the float GEMM within what the
 * two roundings allow. Then whole models against golden logits of our float64 reference
 * (scripts/mtp_reference.py --quantize-int8, which quantizes as the definition says) on every
 * attention backend, float32: bf16 checkpoints, the lm_head too, an fp8 checkpoint
 * requantized. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "fwd_util.h"
#include "harness.h"
#include "base/dtype.h"
#include "model/model.h"
#include "ops/cpu.h"
#include "ops/gemm.h"
#include "ops/gemm_internal.h"
#include "ops/pool.h"
#include "ops/quant_int8.h"

static uint64_t rng_state = 8080;
static uint32_t rbits(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}
static float frand(void) { return (float)(rbits() & 0xffffff) / (float)(1 << 23) - 1.0f; }

static struct pool *g_pool;

enum { R = 300, C = 517 };
static uint16_t *g_src; /* bf16 [R, C] */
static struct wmat g_bf16;

struct q8 {
	struct wmat w;
	char *data;
};

static int quantize(const struct wmat *src, int r0, int nr, int c0, int nc, struct q8 *q, int *br, int *bc)
{
	q->data = malloc(int8_data_bytes(nr, nc));
	memset(q->data, 0x5a, int8_data_bytes(nr, nc)); /* the quantizer must write every byte */
	return quant_int8_weights(g_pool, src, r0, nr, c0, nc, q->data, &q->w, br, bc);
}

static void q8_free(struct q8 *q) { free(q->data); }

/* the activation quantizer, written out from the definition */
static void spec_row(const float *x, int cols, uint8_t *qxu, float *sx)
{
	for (int g = 0; g * INT8_GROUP < cols; g++) {
		int a = g * INT8_GROUP, b = a + INT8_GROUP < cols ? a + INT8_GROUP : cols;
		float amax = 0;
		int finite = 1;
		for (int k = a; k < b; k++) {
			finite &= isfinite(x[k]);
			amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
		}
		sx[g] = finite ? amax / 127.0f : NAN;
		for (int k = a; k < b; k++)
			qxu[k] = (uint8_t)(128 + (finite && amax > 0 ? (int)rintf(x[k] / sx[g]) : 0));
	}
	for (int k = cols; k < int8_cols_pad(cols); k++)
		qxu[k] = 128;
}

static int8_t qw_at(const struct wmat *w, int r, int c) { return ((const int8_t *)w->data)[int8_index(w->cols, r, c)]; }
static float sw_at(const struct wmat *w, int r, int g)
{
	return int8_scales(int8_group(w, r / INT8_ROWS, g))[r % INT8_ROWS];
}

/* y[t][r] by the definition (x quantized by spec_row) */
static void spec_gemm(const struct wmat *w, const float *x, int ldx, int n, float *y)
{
	int G = int8_groups(w->cols);
	uint8_t *qx = malloc((size_t)int8_cols_pad(w->cols));
	float *sx = malloc(sizeof(float) * (size_t)(G + 1));
	for (int t = 0; t < n; t++) {
		spec_row(x + (size_t)t * ldx, w->cols, qx, sx);
		for (int r = 0; r < w->rows; r++) {
			float acc = 0;
			for (int g = 0; g < G; g++) {
				int32_t dot = 0;
				for (int c = g * INT8_GROUP; c < w->cols && c < (g + 1) * INT8_GROUP; c++)
					dot += qw_at(w, r, c) * ((int)qx[c] - 128);
				float comb = sw_at(w, r, g) * sx[g];
				acc = fmaf((float)dot, comb, acc);
			}
			y[(size_t)t * w->rows + r] = acc;
		}
	}
	free(qx), free(sx);
}

static void make_src(void)
{
	g_src = malloc(sizeof(uint16_t) * (size_t)R * C);
	for (size_t i = 0; i < (size_t)R * C; i++) /* small rows and an all-zero group too */
		g_src[i] = f32_to_bf16((i / C) % 9 == 5 ? frand() * 1e-4f : (i / C == 7 && i % C < 200) ? 0.0f : frand());
	g_bf16 = (struct wmat){.dtype = DT_BF16, .data = g_src, .rows = R, .cols = C, .ld = C};
}

static void test_quantize_weights(void)
{
	struct q8 q;
	int br, bc;
	int r0 = 7, nr = 250, c0 = 9, nc = 390; /* a region: groups start at its column 0 */
	EXPECT_EQ_INT(quantize(&g_bf16, r0, nr, c0, nc, &q, &br, &bc), 0);
	EXPECT_EQ_INT(q.w.dtype, DT_I8);
	EXPECT_EQ_INT(q.w.rows, nr);
	int G = int8_groups(nc), bad = 0;
	for (int r = 0; r < nr; r++)
		for (int g = 0; g < G; g++) {
			float amax = 0;
			int sum = 0;
			for (int c = g * INT8_GROUP; c < nc && c < (g + 1) * INT8_GROUP; c++) {
				float v = fabsf(bf16_to_f32(g_src[(size_t)(r0 + r) * C + c0 + c]));
				amax = v > amax ? v : amax;
			}
			float s = sw_at(&q.w, r, g);
			bad += s != amax / 127.0f;
			for (int c = g * INT8_GROUP; c < nc && c < (g + 1) * INT8_GROUP; c++) {
				float v = bf16_to_f32(g_src[(size_t)(r0 + r) * C + c0 + c]);
				int want = amax > 0 ? (int)rintf(v / s) : 0;
				bad += qw_at(&q.w, r, c) != want;
				/* half a step, and v / s rounded in fp32 (at a tie q is off by 127 x 2^-24 more) */
				bad += fabsf(wmat_get(&q.w, r, c) - v) > s * (0.5f + 1e-5f);
				sum += want;
			}
			bad += int8_qsums(int8_group(&q.w, r / INT8_ROWS, g))[r % INT8_ROWS] != 128 * sum;
		}
	EXPECT_EQ_INT(bad, 0);
	/* the pads are zero: columns past nc (to a multiple of 4), rows past nr (to 32), their scales
	 * and sums */
	for (int r = 0; r < int8_row_blocks(nr) * INT8_ROWS; r++) {
		for (int c = (r < nr ? nc : 0); c < int8_cols_pad(nc); c++)
			bad += qw_at(&q.w, r, c) != 0;
		for (int g = 0; r >= nr && g < G; g++)
			bad += sw_at(&q.w, r, g) != 0 || int8_qsums(int8_group(&q.w, r / INT8_ROWS, g))[r % INT8_ROWS] != 0;
	}
	EXPECT_EQ_INT(bad, 0);
	q8_free(&q);

	/* a NaN weight is named */
	uint16_t keep = g_src[(size_t)40 * C + 33];
	g_src[(size_t)40 * C + 33] = 0x7fc0;
	EXPECT_EQ_INT(quantize(&g_bf16, 32, 64, 0, C, &q, &br, &bc), -1);
	EXPECT_EQ_INT(br, 40);
	EXPECT_EQ_INT(bc, 33);
	g_src[(size_t)40 * C + 33] = keep;
	q8_free(&q);
}

static void test_quantize_row(void)
{
	int cols = C;
	float *x = malloc(sizeof(float) * cols);
	uint8_t *a = malloc(int8_cols_pad(cols)), *b = malloc(int8_cols_pad(cols));
	float sa[8], sb[8];
	for (int round = 0; round < 40; round++) {
		for (int c = 0; c < cols; c++) /* exact halves now and then: round-half-even */
			x[c] = round % 4 == 1 ? (float)((int)(frand() * 254)) * 0.5f : frand() * (round + 1);
		if (round == 3)
			for (int c = 128; c < 256; c++)
				x[c] = 0; /* a zero group: scale 0, bytes 128 */
		if (round == 5)
			x[300] = NAN;
		if (round == 6)
			x[10] = -INFINITY;
		quant_int8_row(x, cols, a, sa);
		spec_row(x, cols, b, sb);
		EXPECT(!memcmp(a, b, int8_cols_pad(cols)));
		for (int g = 0; g < int8_groups(cols); g++)
			EXPECTF(sa[g] == sb[g] || (isnan(sa[g]) && isnan(sb[g])), "round %d group %d: %g vs %g", round,
				g, sa[g], sb[g]);
	}
	free(x), free(a), free(b);
}

#define Y_INIT 0.625f

/* Every int8 kernel this CPU has: each level, and the avx2 level with AVX-VNNI off and on
 * (ops_cpu_set_avx_vnni) where the CPU has it. */
struct variant {
	enum ops_level lvl;
	int vnni;
};

static int g_vnni0; /* AVX-VNNI as the process started */

static int variants(struct variant *v)
{
	int n = 0;
	ops_cpu_set_avx_vnni(1);
	int has = ops_cpu_has_avx_vnni();
	ops_cpu_set_avx_vnni(g_vnni0);
	for (int l = 0; l <= (int)ops_level_best(); l++) {
		v[n++] = (struct variant){(enum ops_level)l, 0};
		if (l == OPS_AVX2 && has)
			v[n++] = (struct variant){OPS_AVX2, 1};
	}
	return n;
}

/* switches the process to variant v; its name */
static const char *variant_use(struct variant v)
{
	ops_cpu_set_avx_vnni(v.vnni);
	return gemm_int8_kernel_name(v.lvl);
}

/* job(s) at every level: to the bit the definition (+ Y_INIT accumulated; or rounded to
 * bf16), y past the rows untouched */
static void check_levels(const struct wmat *w, int n, const char *what)
{
	int ldx = w->cols + 3, ldy = w->rows + 2;
	float *x = malloc(sizeof(float) * (size_t)n * ldx), *y = malloc(sizeof(float) * (size_t)n * ldy);
	float *ref = malloc(sizeof(float) * (size_t)n * w->rows);
	for (int t = 0; t < n; t++)
		for (int c = 0; c < ldx; c++)
			x[(size_t)t * ldx + c] = c < w->cols ? frand() * (1 + t % 3) : NAN; /* padding never read */
	spec_gemm(w, x, ldx, n, ref);
	struct variant vs[OPS_N_LEVELS + 1];
	int nv = variants(vs);
	for (int vi = 0; vi < nv; vi++) {
		int lvl = (int)vs[vi].lvl;
		const char *kname = variant_use(vs[vi]);
		for (int mode = 0; mode < 3; mode++) { /* y =, y +=, y = rounded to bf16 */
			int acc = mode == 1, rnd = mode == 2;
			for (size_t i = 0; i < (size_t)n * ldy; i++)
				y[i] = Y_INIT;
			struct gemm_job j = {.w = w, .x = x, .ldx = ldx, .y = y, .ldy = ldy, .n = n, .accumulate = acc,
					     .round_bf16 = rnd};
			ops_gemm_multi_at((enum ops_level)lvl, (n + acc) % 2 ? g_pool : NULL, 1, &j);
			int bad = 0;
			for (int t = 0; t < n; t++)
				for (int r = 0; r < ldy; r++) {
					float v = y[(size_t)t * ldy + r];
					float want = r >= w->rows ? Y_INIT
						     : acc	  ? Y_INIT + ref[(size_t)t * w->rows + r]
								  : ref[(size_t)t * w->rows + r];
					if (rnd && r < w->rows)
						want = bf16_to_f32(f32_to_bf16(want));
					if (memcmp(&v, &want, 4) && bad++ < 2)
						harness_fail(__FILE__, __LINE__,
							     "%s, %s kernel, n=%d, mode %d: y[%d][%d] = %.9g, want %.9g",
							     what, kname, n, mode, t, r, v, want);
				}
		}
	}
	ops_cpu_set_avx_vnni(g_vnni0);
	free(x), free(y), free(ref);
}

static void test_gemm_levels(void)
{
	struct q8 q;
	int br, bc;
	EXPECT_EQ_INT(quantize(&g_bf16, 0, R, 0, C, &q, &br, &bc), 0);
	static const int ns[] = {1, 2, 3, 5, 6, 7, 13, 64, 65, 71};
	char what[64];
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		snprintf(what, sizeof what, "%dx%d", R, C);
		check_levels(&q.w, ns[i], what);
	}
	/* the panel that quantizes its own x, a token at a time (the call had no memory for it) */
	{
		int n = 5, ldy = R + 1;
		float *x = malloc(sizeof(float) * n * C), *y = malloc(sizeof(float) * n * ldy), *ref = malloc(sizeof(float) * n * R);
		for (int i = 0; i < n * C; i++)
			x[i] = frand();
		spec_gemm(&q.w, x, C, n, ref);
		struct variant vs[OPS_N_LEVELS + 1];
		int nv = variants(vs);
		for (int vi = 0; vi < nv; vi++) {
			const char *kname = variant_use(vs[vi]);
			struct gemm_job j = {.w = &q.w, .x = x, .ldx = C, .y = y, .ldy = ldy, .n = n};
			EXPECT_EQ_INT(gemm_panel_int8(vs[vi].lvl, &j, NULL, NULL, 0, R), 1);
			int bad = 0;
			for (int t = 0; t < n; t++)
				bad += memcmp(y + (size_t)t * ldy, ref + (size_t)t * R, sizeof(float) * R) != 0;
			EXPECTF(bad == 0, "%s kernel: %d tokens differ", kname, bad);
		}
		ops_cpu_set_avx_vnni(g_vnni0);
		free(x), free(y), free(ref);
	}
	struct wmat v = wmat_view(&q.w, 64, 100, 0, C); /* whole blocks on, a part one at the end */
	check_levels(&v, 3, "view rows 64..164");
	check_levels(&v, 9, "view rows 64..164");
	q8_free(&q);
	/* fewer columns than one step and than a group, one row */
	EXPECT_EQ_INT(quantize(&g_bf16, 3, 1, 2, 3, &q, &br, &bc), 0);
	check_levels(&q.w, 4, "1x3");
	q8_free(&q);
}

/* two jobs on one x (the MoE gate and up): one quantization, both right; and more values than
 * the serial limit, quantized over the pool */
static void test_shared_and_pooled_x(void)
{
	struct q8 a, b;
	int br, bc;
	EXPECT_EQ_INT(quantize(&g_bf16, 0, 96, 0, C, &a, &br, &bc), 0);
	EXPECT_EQ_INT(quantize(&g_bf16, 100, 64, 0, C, &b, &br, &bc), 0);
	for (int round = 0; round < 2; round++) {
		int n = round ? 1100 : 5; /* 1100 x 520 bytes: past the serial limit */
		float *x = malloc(sizeof(float) * (size_t)n * C);
		for (size_t i = 0; i < (size_t)n * C; i++)
			x[i] = frand();
		float *ya = malloc(sizeof(float) * (size_t)n * 96), *yb = malloc(sizeof(float) * (size_t)n * 64);
		float *ra = malloc(sizeof(float) * (size_t)n * 96), *rb = malloc(sizeof(float) * (size_t)n * 64);
		struct gemm_job j[2] = {{.w = &a.w, .x = x, .ldx = C, .y = ya, .ldy = 96, .n = n},
					{.w = &b.w, .x = x, .ldx = C, .y = yb, .ldy = 64, .n = n}};
		ops_gemm_multi(g_pool, 2, j);
		spec_gemm(&a.w, x, C, n, ra);
		spec_gemm(&b.w, x, C, n, rb);
		EXPECT(!memcmp(ya, ra, sizeof(float) * (size_t)n * 96));
		EXPECT(!memcmp(yb, rb, sizeof(float) * (size_t)n * 64));
		free(x), free(ya), free(yb), free(ra), free(rb);
	}
	q8_free(&a), q8_free(&b);
}

/* a NaN in a token's activations makes that token's outputs NaN, the others' finite */
static void test_nan_x(void)
{
	struct q8 q;
	int br, bc;
	EXPECT_EQ_INT(quantize(&g_bf16, 0, 64, 0, C, &q, &br, &bc), 0);
	float x[3 * C], y[3 * 64];
	for (int i = 0; i < 3 * C; i++)
		x[i] = frand();
	x[C + 400] = NAN;
	struct variant vs[OPS_N_LEVELS + 1];
	int nv = variants(vs);
	for (int vi = 0; vi < nv; vi++) {
		const char *kname = variant_use(vs[vi]);
		struct gemm_job j = {.w = &q.w, .x = x, .ldx = C, .y = y, .ldy = 64, .n = 3};
		ops_gemm_multi_at(vs[vi].lvl, NULL, 1, &j);
		int ok = 1;
		for (int r = 0; r < 64; r++)
			ok &= isfinite(y[r]) && isnan(y[64 + r]) && isfinite(y[128 + r]);
		EXPECTF(ok, "%s kernel", kname);
	}
	ops_cpu_set_avx_vnni(g_vnni0);
	q8_free(&q);
}

/* against the float GEMM on the unquantized weights: each term off by at most
 * |w| sx/2 + |x| sw/2 + sw sx/4 (plus fp32 rounding) */
static void test_accuracy(void)
{
	struct q8 q;
	int br, bc, n = 4;
	EXPECT_EQ_INT(quantize(&g_bf16, 0, R, 0, C, &q, &br, &bc), 0);
	float *x = malloc(sizeof(float) * (size_t)n * C), *y = malloc(sizeof(float) * (size_t)n * R);
	for (int i = 0; i < n * C; i++)
		x[i] = frand() * (i % 17 == 0 ? 8.0f : 1.0f);
	struct gemm_job j = {.w = &q.w, .x = x, .ldx = C, .y = y, .ldy = R, .n = n};
	ops_gemm_multi(g_pool, 1, &j);
	int bad = 0;
	double worst = 0;
	for (int t = 0; t < n; t++) {
		float sx[8];
		uint8_t qx[C + 3];
		spec_row(x + (size_t)t * C, C, qx, sx);
		for (int r = 0; r < R; r++) {
			double ref = 0, bound = 0;
			for (int c = 0; c < C; c++) {
				double w = bf16_to_f32(g_src[(size_t)r * C + c]), xv = x[(size_t)t * C + c];
				double sw = sw_at(&q.w, r, c / INT8_GROUP), s = sx[c / INT8_GROUP];
				ref += w * xv;
				bound += fabs(w) * s / 2 + fabs(xv) * sw / 2 + sw * s / 4 + fabs(w * xv) * 0x1p-20;
			}
			double err = fabs(y[(size_t)t * R + r] - ref);
			worst = err / (bound + 1e-30) > worst ? err / (bound + 1e-30) : worst;
			bad += !(err <= bound + 1e-30);
		}
	}
	EXPECTF(bad == 0, "%d outputs past the bound (worst %.3g of it)", bad, worst);
	free(x), free(y);
	q8_free(&q);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static struct model *load_model(const char *fixture, bool int8, bool head, bool dummy, enum dtype act, struct err *e)
{
	return fwd_load_quant(fixture, g_pool, false, int8, head, dummy, act, e);
}

/* The int8 model's logits within 1e-3 of the reference's (golden NAME.SUFFIX.f32): the whole
 * prompt (prefill), chunks of 7 (multi-token decode), one token at a time (decode). Where the
 * float64 reference and our float32 (or two of our paths, their float sums in other orders)
 * round an activation to either side of a half step, that position and the ones attending to
 * it part by ~0.05 (seen: position 13 of tiny-v3-fp8's len17, 0.07; one of len64's 64 on the
 * reference backend's prefill, 0.05), as any dynamic activation quantization does: so up to
 * one position in 16 (at least one) may. A wrong scale, group or layer moves them all. */
static void check_golden(const char *fixture, const char *name, const char *suffix, bool head)
{
	struct err e;
	struct model *m = load_model(fixture, true, head, false, DT_F32, &e);
	EXPECTF(m, "%s: %s", fixture, e.msg);
	if (!m)
		return;
	int n, V = model_config(m)->vocab_size;
	int32_t *tok;
	float *gold = fwd_golden(fixture, name, suffix, V, &tok, &n);
	char what[128];
	snprintf(what, sizeof what, "%s %s", fixture, name);
	if (tok && gold)
		fwd_check_golden_runs(m, what, tok, n, gold, V, n / 16 > 1 ? n / 16 : 1);
	free(gold);
	free(tok);
	model_free(m);
}

static void test_golden_v3(void) { check_golden("tiny-v3", "len64", "int8q", false); } /* q_lora, sigmoid routing */
static void test_golden_v2(void) { check_golden("tiny-v2", "len17", "int8q", false); } /* q_proj, softmax routing */
static void test_golden_lm_head(void) { check_golden("tiny-v3", "len17", "int8qh", true); }
static void test_golden_fp8_checkpoint(void) { check_golden("tiny-v3-fp8", "len5", "int8q", false); }

/* Bytes: int8 weights are one byte plus 8 per row and 128 columns (scale and offset sum, in the
 * blocks: int8_data_bytes); the
 * head quantized saves exactly its bf16 bytes less those; kv_b_proj stays as the checkpoint has it */
static void test_weight_bytes(void)
{
	struct err e;
	struct model *plain = load_model("tiny-v3", false, false, false, DT_F32, &e),
		     *q = load_model("tiny-v3", true, false, false, DT_F32, &e),
		     *qh = load_model("tiny-v3", true, true, false, DT_F32, &e);
	EXPECTF(plain && q && qh, "%s", e.msg);
	if (plain && q && qh) {
		EXPECTF(model_weight_bytes(q) < model_weight_bytes(plain) * 3 / 4, "%zu int8, %zu bf16",
			model_weight_bytes(q), model_weight_bytes(plain));
		int V = model_config(q)->vocab_size, D = model_config(q)->hidden_size;
		size_t head_saves = (size_t)V * D * 2 - int8_data_bytes(V, D);
		EXPECTF(model_weight_bytes(q) - model_weight_bytes(qh) == head_saves, "%zu, %zu with the head",
			model_weight_bytes(q), model_weight_bytes(qh));
	}
	model_free(plain), model_free(q), model_free(qh);
}

/* bf16 activations (rounded between the layers; the GEMMs quantize them as any float) and
 * dummy weights of an fp8 config (quantized as a checkpoint's): finite logits, the bf16 ones
 * within bf16's tolerance of the float32 golden */
static void test_bf16_and_dummy(void)
{
	struct err e;
	int n, V = 1024;
	int32_t *tok = fwd_prompt("tiny-v3", "len17", &n);
	float *gold = fwd_read_f32(fixture_path("tiny-v3/golden/len17.int8q.f32"), (size_t)n * V),
	      *out = malloc(sizeof(float) * (size_t)n * V);
	struct model *m = load_model("tiny-v3", true, false, false, DT_BF16, &e);
	EXPECTF(m && tok && gold, "%s", e.msg);
	if (m && tok && gold) {
		struct fwd_seq sq;
		EXPECT_EQ_INT(fwd_seq_init(&sq, model_config(m), n, DT_BF16, &e), 0);
		EXPECT_EQ_INT(fwd_step(m, &sq, attn_backend_by_name("FLASHMLA"), tok, 0, n, 0, out, &e), 0);
		float d = fwd_max_abs_diff(out, gold, (size_t)n * V);
		/* typically 0.2-0.5 a position; a routing choice near a tie moves one by ~4 (seen at
		 * the avx2 level): the median position, and everything finite */
		float pos[64];
		for (int t = 0; t < n; t++)
			pos[t] = fwd_max_abs_diff(out + (size_t)t * V, gold + (size_t)t * V, (size_t)V);
		qsort(pos, (size_t)n, sizeof(float), cmp_float);
		EXPECTF(pos[n / 2] < 0.5f && isfinite(d), "bf16 activations: median position's max |logit - float32 int8 "
							  "golden| %g (max %g)", pos[n / 2], d);
		fwd_seq_fini(&sq);
	}
	model_free(m);
	m = load_model("tiny-v3-fp8", true, false, true, DT_F32, &e);
	EXPECTF(m, "%s", e.msg);
	if (m && tok) {
		struct fwd_seq sq;
		EXPECT_EQ_INT(fwd_seq_init(&sq, model_config(m), 5, DT_F32, &e), 0);
		EXPECT_EQ_INT(fwd_step(m, &sq, NULL, tok, 0, 5, 0, out, &e), 0);
		int finite = 1;
		for (int i = 0; i < 5 * V; i++)
			finite &= isfinite(out[i]) != 0;
		EXPECT(finite);
		fwd_seq_fini(&sq);
	}
	model_free(m);
	free(tok), free(gold), free(out);
}

int main(int argc, char **argv)
{
	struct err e;
	if (pool_new(2, &g_pool, &e))
		return 1;
	make_src();
	g_vnni0 = ops_cpu_has_avx_vnni();
	static const struct test_case cases[] = {T(test_quantize_weights), T(test_quantize_row), T(test_gemm_levels),
						 T(test_shared_and_pooled_x), T(test_nan_x), T(test_accuracy),
						 T(test_golden_v3), T(test_golden_v2), T(test_golden_lm_head),
						 T(test_golden_fp8_checkpoint), T(test_weight_bytes), T(test_bf16_and_dummy)};
	int rc = harness_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
	free(g_src);
	pool_free(g_pool);
	return rc;
}
