/* int4 weights (ops/quant_int4.h, the format table's "int4" row): the quantizer against
 * compressed-tensors' symmetric definition written out here (scale amax / 7.5, q clamped to
 * [-8, 7]), its pad; the repack of a pack-quantized checkpoint (int32 words of eight q + 8,
 * bf16 scales) value for value; the W4A8 activation quantizer against the int8 row's
 * definition; the GEMM at every level the CPU has (avx2 with AVX-VNNI off and on): W4A8 to the
 * bit against the definition (exact int32 dots per group, fma per group in order) and within
 * float rounding of a double sum, W4A16 (bf16 x, AVX512_BF16 and AMX) within float rounding of
 * a double sum; odd shapes, token counts across tiles and chunks, accumulate, views, jobs
 * sharing x, x prepared by the panel itself. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "harness.h"
#include "ops/cpu.h"
#include "ops/gemm.h"
#include "ops/pool.h"
#include "ops/quant_int4.h"
#include "ops/quant_int8.h"

enum { R = 100, C = 300 }; /* a part 32-row block, a part 32-column group, a part 128 */

static uint64_t rng_state = 4040;
static uint32_t rbits(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}
static float frand(void) { return (float)(rbits() & 0xffffff) / (float)(1 << 23) - 1.0f; }

static struct pool *g_pool;
static uint16_t g_src[R * C]; /* bf16 */
static struct wmat g_bf16;
static char *g_data;
static struct wmat g_w; /* g_bf16 in int4 */

static void setup(void)
{
	if (g_pool)
		return;
	struct err e = {0};
	if (pool_new(2, &g_pool, &e))
		abort();
	for (int i = 0; i < R * C; i++) /* some groups all zero, some with one big value */
		g_src[i] = f32_to_bf16(i / C == 3 && i % C < 64 ? 0.0f : frand() * (i % 37 == 0 ? 5.0f : 0.7f));
	g_bf16 = (struct wmat){.dtype = DT_BF16, .data = g_src, .rows = R, .cols = C, .ld = C};
	g_data = aligned_alloc(64, int4_data_bytes(R, C));
	memset(g_data, 0x5a, int4_data_bytes(R, C)); /* every byte must be written */
	int br, bc;
	if (quant_int4_weights(g_pool, &g_bf16, 0, R, 0, C, g_data, &g_w, &br, &bc))
		abort();
}

/* compressed-tensors' symmetric int4 of one group, written out: the scale rounded to bf16 */
static float spec_scale(int r, int g)
{
	float amax = 0;
	for (int c = g * 32; c < C && c < g * 32 + 32; c++)
		amax = fmaxf(amax, fabsf(bf16_to_f32(g_src[r * C + c])));
	return bf16_to_f32(f32_to_bf16(fmaxf(amax / 7.5f, FLT_EPSILON)));
}

static void test_quantize(void)
{
	setup();
	int bad = 0;
	for (int r = 0; r < R; r++)
		for (int c = 0; c < C; c++) {
			float s = spec_scale(r, c / 32), q = rintf(bf16_to_f32(g_src[r * C + c]) / s);
			q = fminf(fmaxf(q, -8.0f), 7.0f);
			bad += quant_int4_q(&g_w, r, c) != (int)q || quant_int4_get(&g_w, r, c) != q * s;
		}
	EXPECTF(bad == 0, "%d values off the definition", bad);
	/* +amax is 7, -amax -7 or -8; pad rows and columns q 0 with scale 0 */
	int seen7 = 0, seen8 = 0, pad = 0;
	for (int r = 0; r < R; r++)
		for (int c = 0; c < C; c++) {
			seen7 += quant_int4_q(&g_w, r, c) == 7;
			seen8 += quant_int4_q(&g_w, r, c) == -8;
		}
	for (int r = R; r < int4_row_blocks(R) * 32; r++)
		for (int c = 0; c < int4_groups(C) * 32; c++)
			pad += quant_int4_q(&g_w, r, c) != 0 || quant_int4_get(&g_w, r, c) != 0;
	for (int r = 0; r < R; r++)
		for (int c = C; c < int4_groups(C) * 32; c++)
			pad += quant_int4_q(&g_w, r, c) != 0;
	EXPECTF(seen7 > 0 && seen8 > 0 && pad == 0, "7: %d, -8: %d, pad off: %d", seen7, seen8, pad);
	EXPECT(quant_int4_get(&g_w, 3, 5) == 0 && quant_int4_get(&g_w, 3, 40) == 0); /* an all-zero group */
	/* a region: its own groups from c0 */
	char *d = aligned_alloc(64, int4_data_bytes(40, 100));
	struct wmat w;
	int br, bc;
	EXPECT_EQ_INT(quant_int4_weights(g_pool, &g_bf16, 50, 40, 10, 100, d, &w, &br, &bc), 0);
	bad = 0;
	for (int r = 0; r < 40; r++)
		for (int c = 0; c < 100; c++) {
			float amax = 0;
			for (int k = c / 32 * 32; k < c / 32 * 32 + 32 && k < 100; k++)
				amax = fmaxf(amax, fabsf(bf16_to_f32(g_src[(50 + r) * C + 10 + k])));
			float s = bf16_to_f32(f32_to_bf16(fmaxf(amax / 7.5f, FLT_EPSILON)));
			float q = fminf(fmaxf(rintf(bf16_to_f32(g_src[(50 + r) * C + 10 + c]) / s), -8.0f), 7.0f);
			bad += quant_int4_get(&w, r, c) != q * s;
		}
	EXPECTF(bad == 0 && w.rows == 40 && w.cols == 100, "region: %d off", bad);
	free(d);
}

/* a pack-quantized checkpoint [R, C8] (C8 a multiple of 8): int32 words, bf16 scales */
static void test_from_packed(void)
{
	setup();
	enum { C8 = 320 };
	int32_t *pk = calloc((size_t)R * C8 / 8, 4);
	uint16_t *sc = malloc(sizeof(uint16_t) * R * (C8 / 32));
	int8_t *q = malloc((size_t)R * C8);
	for (int r = 0; r < R; r++) {
		for (int c = 0; c < C8; c++) {
			q[r * C8 + c] = (int8_t)((int)(rbits() % 16) - 8);
			pk[r * (C8 / 8) + c / 8] |= (int32_t)((uint32_t)(q[r * C8 + c] + 8) << 4 * (c % 8));
		}
		for (int g = 0; g < C8 / 32; g++)
			sc[r * (C8 / 32) + g] = f32_to_bf16(0.01f + (float)(rbits() % 1000) * 1e-4f);
	}
	/* the region rows [7, 87) x columns [64, 290) */
	char *d = aligned_alloc(64, int4_data_bytes(80, 226));
	struct wmat w;
	int br, bc, bad = 0;
	EXPECT_EQ_INT(quant_int4_from_packed(g_pool, pk, C8 / 8, sc, C8 / 32, 7, 80, 64, 226, d, &w, &br, &bc), 0);
	for (int r = 0; r < 80; r++)
		for (int c = 0; c < 226; c++) {
			int rr = 7 + r, cc = 64 + c;
			bad += quant_int4_q(&w, r, c) != q[rr * C8 + cc] ||
			       quant_int4_get(&w, r, c) !=
				       (float)q[rr * C8 + cc] * bf16_to_f32(sc[rr * (C8 / 32) + cc / 32]);
		}
	EXPECTF(bad == 0 && w.row0 == 7 && w.col0 == 64, "repacked: %d off", bad);
	sc[40 * (C8 / 32) + 5] = 0x7fc0; /* a NaN scale: named */
	EXPECT(quant_int4_from_packed(g_pool, pk, C8 / 8, sc, C8 / 32, 7, 80, 64, 226, d, &w, &br, &bc) == -1 &&
	       br == 40 && bc == 160);
	free(d), free(pk), free(sc), free(q);
}

/* the int8 row's activation definition (quant_int8.h), signed, with -8 Σ qx per 32 */
static void test_act(void)
{
	float x[C];
	for (int i = 0; i < C; i++)
		x[i] = frand() * (i % 11 == 0 ? 3.0f : 1.0f);
	int8_t qx[320];
	float sx[3];
	int32_t sums[10];
	quant_int4_x(x, C, qx, sx, sums);
	int bad = 0;
	for (int g = 0; g < 3; g++) {
		float amax = 0;
		for (int c = 128 * g; c < C && c < 128 * g + 128; c++)
			amax = fmaxf(amax, fabsf(x[c]));
		bad += sx[g] != amax / 127.0f;
		for (int c = 128 * g; c < C && c < 128 * g + 128; c++)
			bad += qx[c] != (int8_t)rintf(x[c] / sx[g]);
	}
	for (int c = C; c < 320; c++)
		bad += qx[c] != 0;
	for (int g = 0; g < 10; g++) {
		int s = 0;
		for (int c = 32 * g; c < 32 * g + 32; c++)
			s += qx[c];
		bad += sums[g] != -8 * s;
	}
	EXPECTF(bad == 0, "%d off", bad);
}

/* y of w (its q and scales through quant_int4_q / _get) for x [n, cols]: the W4A8 definition
 * in float (exact), and Σ w x in double with Σ |w x| (W4A16, and the W4A8 sum in double) */
static void reference(const struct wmat *w, const float *x, int n, float *y8, double *yd, double *ya, int w16)
{
	int cols = w->cols, ld = int4_x_ld(cols);
	int8_t *qx = malloc((size_t)ld);
	float sx[512];
	int32_t sums[2048];
	for (int t = 0; t < n; t++) {
		const float *xt = x + (size_t)t * cols;
		quant_int4_x(xt, cols, qx, sx, sums);
		for (int r = 0; r < w->rows; r++) {
			float tot = 0;
			double s = 0, a = 0;
			for (int g = 0; g < int4_groups(cols); g++) {
				int32_t dot = 0;
				float sw = int4_scale(int4_group(w, r / 32, g), r % 32);
				for (int c = 32 * g; c < cols && c < 32 * g + 32; c++)
					dot += quant_int4_q(w, r, c) * qx[c];
				tot = fmaf((float)dot, sw * sx[g / 4], tot);
				for (int c = 32 * g; c < cols && c < 32 * g + 32; c++) {
					double p = w16 ? (double)quant_int4_get(w, r, c) * xt[c]
						       : (double)quant_int4_get(w, r, c) * qx[c] * sx[c / 128];
					s += p, a += fabs(p);
				}
			}
			y8[(size_t)t * w->rows + r] = tot;
			yd[(size_t)t * w->rows + r] = s;
			ya[(size_t)t * w->rows + r] = a;
		}
	}
	free(qx);
}

/* ops_gemm at every level against the reference; W4A8 also to the bit */
static void check(const struct wmat *w, int n, int w16, const char *what)
{
	int rows = w->rows, cols = w->cols;
	float *x = malloc(sizeof(float) * (size_t)n * cols), *y = malloc(sizeof(float) * (size_t)n * rows);
	float *y8 = malloc(sizeof(float) * (size_t)n * rows);
	double *yd = malloc(sizeof(double) * (size_t)n * rows), *ya = malloc(sizeof(double) * (size_t)n * rows);
	for (int i = 0; i < n * cols; i++)
		x[i] = bf16_to_f32(f32_to_bf16(frand() * (i % 13 == 0 ? 4.0f : 1.0f)));
	reference(w, x, n, y8, yd, ya, w16);
	int vnni0 = ops_cpu_has_avx_vnni();
	for (int l = w16 ? OPS_AVX512_BF16 : 0; l <= (int)ops_level_best(); l++)
		for (int v = 0; v < (l == OPS_AVX2 ? 2 : 1); v++) {
			ops_cpu_set_avx_vnni(l == OPS_AVX2 ? v : vnni0);
			for (int acc = 0; acc < 2; acc++) {
				for (int i = 0; i < n * rows; i++)
					y[i] = acc ? 1.0f : NAN;
				struct gemm_job j = {.w = w,
						     .x = x,
						     .ldx = cols,
						     .y = y,
						     .ldy = rows,
						     .n = n,
						     .x_bf16 = w16,
						     .accumulate = acc};
				ops_gemm_multi_at((enum ops_level)l, g_pool, 1, &j);
				int off = 0;
				double worst = 0;
				for (int i = 0; i < n * rows; i++) {
					float want8 = acc ? 1.0f + y8[i] : y8[i];
					double d = fabs((double)y[i] - (acc ? 1.0 + yd[i] : yd[i]));
					worst = fmax(worst, d / (ya[i] + 1e-30));
					off += w16 ? !(d <= 1e-5 * ya[i] + (acc ? 1e-7 : 0))
						   : y[i] != want8 || !(d <= 1e-5 * ya[i] + 1e-7);
				}
				EXPECTF(off == 0, "%s %s, %d tokens, level %s%s%s: %d off (worst %g of Σ|w x|)", what,
					w16 ? "W4A16" : "W4A8", n, ops_level_name((enum ops_level)l),
					l == OPS_AVX2 && v ? " (AVX-VNNI)" : "", acc ? ", accumulate" : "", off,
					worst);
			}
		}
	ops_cpu_set_avx_vnni(vnni0);
	free(x), free(y), free(y8), free(yd), free(ya);
}

static void test_gemm(void)
{
	setup();
	static const int ns[] = {1, 2, 3, 7, 13, 70};
	for (int w16 = 0; w16 < 2; w16++) {
		if (w16 && ops_level_best() < OPS_AVX512_BF16)
			break;
		for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
			check(&g_w, ns[i], w16, "whole");
		struct wmat v = wmat_view(&g_w, 32, 60, 64, 150); /* rows from a block, columns from a group */
		EXPECT(wmat_get(&v, 5, 7) == wmat_get(&g_w, 37, 71) &&
		       wmat_get(&v, 59, 149) == wmat_get(&g_w, 91, 213));
		check(&v, 1, w16, "view");
		check(&v, 9, w16, "view");
	}
}

/* jobs sharing x (gate and up: the second reads the first's prepared x), and the panel with no
 * prepared x (the caller out of memory): the same outputs as alone */
static void test_shared_and_fallback(void)
{
	setup();
	int n = 5;
	float *x = malloc(sizeof(float) * (size_t)n * C);
	for (int i = 0; i < n * C; i++)
		x[i] = bf16_to_f32(f32_to_bf16(frand()));
	float *y0 = malloc(sizeof(float) * (size_t)n * R), *y1 = malloc(sizeof(float) * (size_t)n * R);
	float *y2 = malloc(sizeof(float) * (size_t)n * R);
	for (int w16 = 0; w16 < 2; w16++) {
		enum ops_level l = w16 ? ops_level_best() : OPS_AVX2;
		if (w16 && l < OPS_AVX512_BF16)
			break;
		struct gemm_job j = {.w = &g_w, .x = x, .ldx = C, .y = y0, .ldy = R, .n = n, .x_bf16 = w16};
		ops_gemm_multi_at(l, g_pool, 1, &j);
		struct gemm_job jj[2] = {j, j};
		jj[0].y = y1, jj[1].y = y2, jj[1].n = 3;
		ops_gemm_multi_at(l, g_pool, 2, jj);
		EXPECTF(!memcmp(y0, y1, sizeof(float) * (size_t)n * R) && !memcmp(y0, y2, sizeof(float) * 3 * R),
			"shared x, %s", w16 ? "W4A16" : "W4A8");
		memset(y1, 0, sizeof(float) * (size_t)n * R);
		j.y = y1;
		gemm_panel_int4(l, &j, NULL, 0, R);
		EXPECTF(!memcmp(y0, y1, sizeof(float) * (size_t)n * R), "no prepared x, %s", w16 ? "W4A16" : "W4A8");
	}
	free(x), free(y0), free(y1), free(y2);
}

TESTS(T(test_quantize), T(test_from_packed), T(test_act), T(test_gemm), T(test_shared_and_fallback))
