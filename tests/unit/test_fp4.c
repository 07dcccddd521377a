/* The fp4 row (ops/wf_fp4.h, MXFP4) and V4's activation rule (gemm_job.act_fp8,
 * wact_fp8_act128): the GEMM at every level, 1 to 9 tokens, fp32 and bf16 x, on whole and
 * part groups and on views cut inside a group, against model_v4/fp4.c's fp4_gemv_ref (sums
 * in double); the rounding of x against model_v4/v4_quant.c's v4_fp8_sim (bitwise), and fp8
 * and fp4 GEMMs with the rule against a double reference on x rounded by v4_fp8_sim; tiny-v4's
 * expert tensors (I8 weight, F8_E8M0 scale) read from the checkpoint and multiplied against
 * fp4_gemv_ref, its fp8 shared expert under the rule. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "io/safetensors.h"
#include "model_v4/fp4.h"
#include "model_v4/v4_quant.h"
#include "ops/gemm.h"
#include "ops/pool.h"
#include "ops/prepack.h"
#include "ops/wf_fp4.h"
#include "ops/wformat.h"

static struct pool *g_pool;
static uint64_t g_seed = 0xf04f04;
static double g_worst, g_worst_rule; /* the largest errors seen, for the log */

static void setup(void)
{
	struct err e = {0};
	if (!g_pool && pool_new(2, &g_pool, &e))
		abort();
}

/* a random MXFP4 matrix [rows, cols]: any codes, scales 2^-8 .. 2^3 */
static struct wmat random_fp4(int rows, int cols, uint8_t **packed, uint8_t **scales)
{
	int nb = (cols + 31) / 32;
	*packed = malloc((size_t)rows * (size_t)cols / 2);
	*scales = malloc((size_t)rows * (size_t)nb);
	for (int i = 0; i < rows * cols / 2; i++)
		(*packed)[i] = (uint8_t)(test_frand(&g_seed) * 1e6);
	for (int i = 0; i < rows * nb; i++)
		(*scales)[i] = (uint8_t)(119 + (int)((test_frand(&g_seed) + 1) * 5.5));
	return wf_fp4_wmat(*packed, *scales, rows, cols);
}

/* y [n, rows] of every level against want [n, rows]: relative to Σ |w x| (mag) */
static double max_rel(const float *y, const double *want, const double *mag, int count)
{
	double worst = 0;
	for (int i = 0; i < count; i++)
		worst = fmax(worst, fabs(y[i] - want[i]) / (mag[i] + 1e-30));
	return worst;
}

/* Σ_c W[r, c] x[t, c] in double through wmat_get, and Σ |W x| */
static void reference(const struct wmat *w, const float *x, int n, double *want, double *mag)
{
	for (int t = 0; t < n; t++)
		for (int r = 0; r < w->rows; r++) {
			double s = 0, m = 0;
			for (int c = 0; c < w->cols; c++) {
				double p = (double)wmat_get(w, r, c) * x[(size_t)t * (size_t)w->cols + (size_t)c];
				s += p;
				m += fabs(p);
			}
			want[(size_t)t * (size_t)w->rows + (size_t)r] = s;
			mag[(size_t)t * (size_t)w->rows + (size_t)r] = m;
		}
}

/* the GEMM of w at every level on n tokens (x fp32, or bf16-exact with x_bf16) against the
 * double reference; accumulate adds onto y */
static void check_levels(const struct wmat *w, int n, int bf16, const char *what)
{
	int R = w->rows, C = w->cols;
	float *x = malloc(sizeof(float) * (size_t)n * C), *y = malloc(sizeof(float) * (size_t)n * R);
	double *want = malloc(sizeof(double) * (size_t)n * R), *mag = malloc(sizeof(double) * (size_t)n * R);
	for (int i = 0; i < n * C; i++) {
		x[i] = test_frand(&g_seed);
		if (bf16)
			x[i] = bf16_to_f32(f32_to_bf16(x[i]));
	}
	reference(w, x, n, want, mag);
	for (int l = 0; l <= (int)ops_level_best(); l++) {
		for (int acc = 0; acc < 2; acc++) {
			for (int i = 0; i < n * R; i++)
				y[i] = acc ? 1.0f : NAN;
			struct gemm_job j = {
				.w = w, .x = x, .ldx = C, .y = y, .ldy = R, .n = n, .x_bf16 = bf16, .accumulate = acc};
			ops_gemm_multi_at((enum ops_level)l, g_pool, 1, &j);
			for (int i = 0; acc && i < n * R; i++)
				y[i] -= 1.0f;
			double worst = max_rel(y, want, mag, n * R);
			g_worst = acc ? g_worst : fmax(g_worst, worst);
			EXPECTF(worst < (acc ? 1e-5 : 2e-6), "%s, %d tokens%s%s, level %s: %g of Σ|w x|", what, n,
				bf16 ? ", bf16 x" : "", acc ? ", accumulate" : "", ops_level_name((enum ops_level)l),
				worst);
		}
	}
	free(x), free(y), free(want), free(mag);
}

static void test_gemm(void)
{
	setup();
	uint8_t *p, *s;
	struct wmat w = random_fp4(70, 300, &p, &s); /* 17 blocks of 4 rows and 2; 9 groups and 12 columns */
	/* the row is wf_fp4's and reads what fp4_decode_row reads */
	const struct wformat *f = wformat_of(DT_F4_E2M1);
	EXPECT(f && !strcmp(f->name, "fp4") && f->bits == 4 && f->scale == WSCALE_E8M0 && !f->quantize);
	float row[300];
	int diff = 0;
	for (int r = 0; r < 70; r++) {
		fp4_decode_row(p + (size_t)r * 150, s + (size_t)r * 10, 300, row);
		for (int c = 0; c < 300; c++)
			diff += wmat_get(&w, r, c) != row[c];
	}
	EXPECT_EQ_INT(diff, 0);
	EXPECT_EQ_INT(wmat_bytes(&w), 70 * 150 + 70 * 10);
	int ns[] = {1, 2, 3, 5, 9};
	for (int k = 0; k < 5; k++) {
		check_levels(&w, ns[k], 0, "fp4");
		check_levels(&w, ns[k], 1, "fp4");
	}
	/* views: rows from 5, columns from 36 (inside a group) and from 64 (on a boundary), to
	 * inside a group; one inside a single group */
	struct wmat v = wmat_view(&w, 5, 61, 36, 230);
	EXPECT(v.col0 == 36 && v.row0 == 5 && wmat_get(&v, 3, 7) == wmat_get(&w, 8, 43));
	EXPECT_EQ_INT(wmat_bytes(&v), 61 * 115 + 61 * 8);
	check_levels(&v, 1, 0, "fp4 view from column 36");
	check_levels(&v, 5, 1, "fp4 view from column 36");
	v = wmat_view(&w, 0, 64, 64, 200);
	check_levels(&v, 1, 1, "fp4 view from column 64");
	check_levels(&v, 4, 0, "fp4 view from column 64");
	v = wmat_view(&w, 8, 8, 70, 20);
	check_levels(&v, 3, 0, "fp4 view inside a group");
	/* the scales at both ends of fp32's range: the codes meet x in bf16 unscaled, the scale
	 * multiplies in fp32, so none is flushed (2^-126 .. 2^-119) or out of range (2^109 .. 2^116) */
	for (int i = 0; i < 70 * 10; i++)
		s[i] = (uint8_t)(i % 2 ? 1 + i % 8 : 236 + i % 8);
	check_levels(&w, 1, 1, "fp4 with extreme scales");
	check_levels(&w, 5, 0, "fp4 with extreme scales");
	free(p), free(s);

	/* against fp4_gemv_ref itself, on a V4 shape slice: 256 x 2048 */
	struct wmat b = random_fp4(256, 2048, &p, &s);
	float *x = malloc(sizeof(float) * 2048), y[256], ref[256];
	double mag[256];
	for (int i = 0; i < 2048; i++)
		x[i] = test_frand(&g_seed);
	fp4_gemv_ref(p, s, 256, 2048, x, ref);
	for (int r = 0; r < 256; r++) {
		mag[r] = 0;
		for (int c = 0; c < 2048; c++)
			mag[r] += fabs((double)wmat_get(&b, r, c) * x[c]);
	}
	for (int l = 0; l <= (int)ops_level_best(); l++) {
		ops_gemm_multi_at((enum ops_level)l, g_pool, 1,
				  &(struct gemm_job){.w = &b, .x = x, .ldx = 2048, .y = y, .ldy = 256, .n = 1});
		double worst = 0;
		for (int r = 0; r < 256; r++)
			worst = fmax(worst, fabs(y[r] - ref[r]) / mag[r]);
		g_worst = fmax(g_worst, worst);
		EXPECTF(worst < 2e-6, "fp4 256x2048 level %s vs fp4_gemv_ref: %g of Σ|w x|",
			ops_level_name((enum ops_level)l), worst);
	}
	free(x), free(p), free(s);
	printf("# fp4 GEMM, every level, 1-9 tokens, views: max %.2g of sum |w x| (accumulate apart)\n", g_worst);
}

/* wact_fp8_round is v4_fp8_sim with blocks of 128, bit for bit, over magnitudes from 1e-9 to
 * 1e6 (subnormal e4m3 values, ties, the 1e-4 floor, saturation at 448 s) */
static void test_act_round(void)
{
	enum { N = 128 * 40 + 37 };
	float *x = malloc(sizeof(float) * N), *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
	for (int i = 0; i < N; i++) {
		double mag = pow(10.0, -9 + 15 * (i / 128) / 40.0);
		x[i] = (float)(test_frand(&g_seed) * mag);
		if (i % 17 == 0) /* a value halfway between two e4m3 steps of 1 */
			x[i] = (float)(mag * (1.0 + 1.0 / 16));
	}
	x[5] = 0, x[6] = -0.0f;
	memcpy(a, x, sizeof(float) * N);
	v4_fp8_sim(a, N, 128);
	wact_fp8_round(x, N, b);
	int diff = 0;
	for (int i = 0; i < N; i++)
		diff += memcmp(&a[i], &b[i], 4) != 0 && !(a[i] == 0 && b[i] == 0);
	EXPECTF(diff == 0, "%d of %d values differ from v4_fp8_sim", diff, N);
	free(x), free(a), free(b);
}

/* memory for the fp8 row's quantizer */
struct mem {
	void *p[4];
	int n;
};

static void *mem_alloc(void *ctx, size_t bytes, bool drop_when_packed)
{
	(void)drop_when_packed;
	struct mem *m = ctx;
	return m->n < 4 ? (m->p[m->n++] = aligned_alloc(64, (bytes + 63) / 64 * 64)) : NULL;
}

/* the rule on w at every level against the double reference on x rounded by v4_fp8_sim per
 * token; without it, exactly on x (V4's float32 mode) */
static void check_act_rule(const struct wmat *w, int n, const char *what)
{
	int R = w->rows, C = w->cols;
	float *x = malloc(sizeof(float) * (size_t)n * C), *xr = malloc(sizeof(float) * (size_t)n * C);
	float *y = malloc(sizeof(float) * (size_t)n * R);
	double *want = malloc(sizeof(double) * (size_t)n * R), *mag = malloc(sizeof(double) * (size_t)n * R);
	double *want_x = malloc(sizeof(double) * (size_t)n * R), *mag_x = malloc(sizeof(double) * (size_t)n * R);
	for (int i = 0; i < n * C; i++)
		x[i] = test_frand(&g_seed) * (i % 300 < 128 ? 1e-3f : 1.0f);
	memcpy(xr, x, sizeof(float) * (size_t)n * C);
	for (int t = 0; t < n; t++)
		v4_fp8_sim(xr + (size_t)t * C, C, 128);
	reference(w, xr, n, want, mag);
	reference(w, x, n, want_x, mag_x);
	double far = 0; /* how far the rounding moves y: the check tells the two apart */
	for (int i = 0; i < n * R; i++)
		far = fmax(far, fabs(want[i] - want_x[i]) / (mag[i] + 1e-30));
	EXPECTF(far > 1e-4, "%s: the rounding moves y by %g only", what, far);
	for (int l = 0; l <= (int)ops_level_best(); l++)
		for (int rule = 0; rule < 2; rule++) {
			struct gemm_job j = {.w = w, .x = x, .ldx = C, .y = y, .ldy = R, .n = n, .act_fp8 = rule};
			ops_gemm_multi_at((enum ops_level)l, g_pool, 1, &j);
			double worst = max_rel(y, rule ? want : want_x, rule ? mag : mag_x, n * R);
			g_worst_rule = fmax(g_worst_rule, worst);
			EXPECTF(worst < 2e-6, "%s, %d tokens, %s, level %s: %g of Σ|w x|", what, n,
				rule ? "x rounded through fp8" : "x as it is", ops_level_name((enum ops_level)l),
				worst);
		}
	free(x), free(xr), free(y), free(want), free(mag), free(want_x), free(mag_x);
}

static void test_act_rule(void)
{
	setup();
	uint8_t *p, *s;
	struct wmat w = random_fp4(68, 300, &p, &s);
	check_act_rule(&w, 1, "fp4");
	check_act_rule(&w, 7, "fp4");
	struct wmat v = wmat_view(&w, 4, 60, 36, 260);
	check_act_rule(&v, 3, "fp4 view");
	free(p), free(s);
	/* fp8 (quantized by its row), row-major and packed at load as the model does */
	float *src = malloc(sizeof(float) * 96 * 300);
	for (int i = 0; i < 96 * 300; i++)
		src[i] = test_frand(&g_seed);
	struct wmat fs = {.dtype = DT_F32, .data = src, .rows = 96, .cols = 300, .ld = 300}, f8;
	struct mem m = {0};
	struct walloc wa = {mem_alloc, &m};
	int br, bc;
	EXPECT_EQ_INT(wformat_of(DT_F8_E4M3)->quantize(g_pool, &fs, 0, 96, 0, 300, &wa, &f8, &br, &bc), 0);
	check_act_rule(&f8, 1, "fp8");
	check_act_rule(&f8, 45, "fp8");
	if (prepack_wanted(&f8, true)) {
		struct wmat pk = f8;
		prepack_weights(&pk, mem_alloc(&m, prepack_bytes(&pk), false), g_pool);
		check_act_rule(&pk, 1, "fp8 packed");
		check_act_rule(&pk, 45, "fp8 packed");
	}
	for (int i = 0; i < m.n; i++)
		free(m.p[i]);
	free(src);
	printf("# fp8 / fp4 under the rule and without: max %.2g of sum |w x|\n", g_worst_rule);
}

/* tiny-v4's routed experts (I8 [out, in/2] + F8_E8M0 [out, in/32]) into fp4 wmats, every level
 * against fp4_gemv_ref; its shared expert (F8_E4M3 + F8_E8M0 per 128x128, the bytes as the fp8
 * row's fp32 grid) under the act rule against x rounded by v4_fp8_sim */
static void test_checkpoint(void)
{
	setup();
	struct st_set *set = NULL;
	struct err e = {0};
	EXPECTF(st_open(fixture_path("tiny-v4"), -1, &set, &e) == 0, "%s", e.msg);
	if (!set)
		return;
	static const struct {
		const char *w;
		int rows, cols;
	} mats[] = {{"w1", 128, 256}, {"w2", 256, 128}, {"w3", 128, 256}};
	double worst = 0;
	int n_mats = 0;
	for (int L = 0; L < 4; L++)
		for (int E = 0; E < 8; E += 7)
			for (int m = 0; m < 3; m++) {
				char name[96], sname[96];
				snprintf(name, sizeof name, "layers.%d.ffn.experts.%d.%s.weight", L, E, mats[m].w);
				snprintf(sname, sizeof sname, "layers.%d.ffn.experts.%d.%s.scale", L, E, mats[m].w);
				int R = mats[m].rows, C = mats[m].cols;
				const struct st_tensor *tw, *ts;
				if (st_expect(set, name, ST_DT(DT_I8), R, C / 2, &tw, &e) ||
				    st_expect(set, sname, ST_DT(DT_F8_E8M0), R, C / 32, &ts, &e)) {
					EXPECTF(0, "%s", e.msg);
					continue;
				}
				struct wmat w = wf_fp4_wmat(tw->data, ts->data, R, C);
				float x[256], y[256], ref[256];
				for (int c = 0; c < C; c++)
					x[c] = test_frand(&g_seed);
				fp4_gemv_ref(tw->data, ts->data, R, C, x, ref);
				for (int l = 0; l <= (int)ops_level_best(); l++) {
					struct gemm_job j = {.w = &w, .x = x, .ldx = C, .y = y, .ldy = R, .n = 1};
					ops_gemm_multi_at((enum ops_level)l, g_pool, 1, &j);
					for (int r = 0; r < R; r++) {
						double mag = 0;
						for (int c = 0; c < C; c++)
							mag += fabs((double)wmat_get(&w, r, c) * x[c]);
						worst = fmax(worst, fabs(y[r] - ref[r]) / mag);
					}
				}
				n_mats++;
			}
	EXPECTF(n_mats == 24 && worst < 1e-6, "%d experts' matrices, worst %g of Σ|w x|", n_mats, worst);
	printf("# tiny-v4 experts: %d matrices at every level vs fp4_gemv_ref: max %.2g of sum |w x|\n", n_mats,
	       worst);

	const struct st_tensor *tw, *ts;
	if (st_expect(set, "layers.2.ffn.shared_experts.w1.weight", ST_DT(DT_F8_E4M3), 128, 256, &tw, &e) ||
	    st_expect(set, "layers.2.ffn.shared_experts.w1.scale", ST_DT(DT_F8_E8M0), 1, 2, &ts, &e)) {
		EXPECTF(0, "%s", e.msg);
	} else {
		float grid[2];
		for (int i = 0; i < 2; i++)
			grid[i] = fp4_e8m0_to_f32(((const uint8_t *)ts->data)[i]);
		struct wmat w = {.dtype = DT_F8_E4M3,
				 .data = tw->data,
				 .rows = 128,
				 .cols = 256,
				 .ld = 256,
				 .scale = grid,
				 .scale_ld = 2,
				 .blk_r = 128,
				 .blk_c = 128};
		check_act_rule(&w, 3, "tiny-v4 shared expert w1 (fp8)");
	}
	st_close(set);
}

TESTS(T(test_gemm), T(test_act_round), T(test_act_rule), T(test_checkpoint))
