/* wmat.fixed_order: a GEMM's row t of y is bit for bit the same whatever the call's token count
 * (1, 3, 17, 64, 300 tokens, from any offset of the same x) at every level this CPU runs, for
 * fp8 with 128x128 block scales (whole, and a view cut inside a block as V4's TP cuts wo_a;
 * row-major, and packed at load in the AVX2 layout) and for the float formats; and the same weights without the flag give the same values within
 * rounding (the flag changes only which kernels run). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "harness.h"
#include "ops/gemm.h"
#include "ops/pool.h"
#include "ops/prepack.h"
#include "ops/wformat.h"

#define R 200  /* rows: several panels and a partial one */
#define C 1100 /* columns: 128-column blocks, a part one, a tail of 12 */
#define LDX (C + 7)
#define NMAX 300

static struct pool *g_pool;
static uint64_t g_seed = 0x0dde12;

static const int g_counts[] = {1, 3, 17, 64, NMAX};

/* an e4m3 byte that is not NaN (0x7f, 0xff) */
static uint8_t rand_e4m3(void)
{
	uint8_t b;
	do
		b = (uint8_t)test_rand(&g_seed);
	while ((b & 0x7f) == 0x7f);
	return b;
}

/* y [NMAX, ldy] of w x for every count n, calls of n tokens from offsets 0, 5 and NMAX - n,
 * compared with the one call of NMAX tokens */
static void check_counts(const struct wmat *w, const float *x, enum ops_level lvl, const char *what)
{
	int rows = w->rows;
	float *full = malloc(sizeof(float) * NMAX * (size_t)rows), *part = malloc(sizeof(float) * NMAX * (size_t)rows);
	struct gemm_job j = {.w = w, .x = x, .y = full, .n = NMAX, .ldx = LDX, .ldy = rows};
	ops_gemm_multi_at(lvl, g_pool, 1, &j);
	int bad = 0;
	for (size_t k = 0; k < sizeof g_counts / sizeof g_counts[0] && !bad; k++) {
		int n = g_counts[k], offs[3] = {0, n + 5 <= NMAX ? 5 : 0, NMAX - n};
		for (int o = 0; o < 3 && !bad; o++) {
			memset(part, 0xff, sizeof(float) * (size_t)n * (size_t)rows);
			struct gemm_job p = {
				.w = w, .x = x + (size_t)offs[o] * LDX, .y = part, .n = n, .ldx = LDX, .ldy = rows};
			ops_gemm_multi_at(lvl, g_pool, 1, &p);
			for (int t = 0; t < n && !bad; t++)
				if (memcmp(part + (size_t)t * (size_t)rows,
					   full + (size_t)(offs[o] + t) * (size_t)rows,
					   sizeof(float) * (size_t)rows)) {
					EXPECTF(0, "%s at %s: token %d of a call of %d from %d differs from the call of %d",
						what, ops_level_name(lvl), t, n, offs[o], NMAX);
					bad = 1;
				}
		}
	}
	/* without the flag: the other kernels, the same values within fp32 rounding */
	struct wmat u = *w;
	u.fixed_order = false;
	j.w = &u;
	j.y = part;
	ops_gemm_multi_at(lvl, g_pool, 1, &j);
	double worst = 0;
	for (size_t i = 0; i < (size_t)NMAX * (size_t)rows; i++) {
		double d = fabs((double)part[i] - (double)full[i]) / (1.0 + fabs((double)full[i]));
		worst = d > worst ? d : worst;
	}
	EXPECTF(worst < 1e-4, "%s at %s: unflagged kernels differ by %g", what, ops_level_name(lvl), worst);
	free(full);
	free(part);
}

static float *rand_x(void)
{
	float *x = malloc(sizeof(float) * NMAX * LDX);
	for (size_t i = 0; i < (size_t)NMAX * LDX; i++)
		x[i] = test_frand(&g_seed);
	return x;
}

static void each_level(const struct wmat *w, const float *x, const char *what)
{
	for (int l = 0; l <= (int)ops_level_best(); l++)
		check_counts(w, x, (enum ops_level)l, what);
}

/* fp8 packed at load in the AVX2 layout (what the AVX2 level packs a fixed_order weight in),
 * run by its kernel at every level from AVX2 */
static void each_level_avx2_packed(const struct wmat *w, const float *x, const char *what)
{
	if (ops_level_best() < OPS_AVX2)
		return;
	struct wmat p = *w;
	size_t bytes = (prepack_bytes(&p) + 63) / 64 * 64;
	uint32_t *d = aligned_alloc(64, bytes);
	prepack_weights_kind(&p, d, g_pool, PREPACK_KIND_FP8_AVX2);
	for (int l = OPS_AVX2; l <= (int)ops_level_best(); l++)
		check_counts(&p, x, (enum ops_level)l, what);
	free(d);
}

/* fp8 e4m3 with a 128x128 grid of scales: powers of two (ue8m0, V4's) and any fp32 */
static void test_fp8(void)
{
	if (!g_pool) {
		struct err e = {0};
		if (pool_new(2, &g_pool, &e))
			abort();
	}
	uint8_t *q = malloc((size_t)R * C);
	for (size_t i = 0; i < (size_t)R * C; i++)
		q[i] = rand_e4m3();
	int sr = (R + 127) / 128, sc = (C + 127) / 128;
	float *s_pow2 = malloc(sizeof(float) * (size_t)sr * (size_t)sc),
	      *s_any = malloc(sizeof(float) * (size_t)sr * (size_t)sc);
	for (int i = 0; i < sr * sc; i++) {
		s_pow2[i] = ldexpf(1.0f, -8 + (int)(test_rand(&g_seed) % 5));
		s_any[i] = 0.001f + 0.01f * (test_frand(&g_seed) + 1.0f);
	}
	float *x = rand_x();
	struct wmat w = {.dtype = DT_F8_E4M3,
			 .data = q,
			 .rows = R,
			 .cols = C,
			 .ld = C,
			 .scale = s_pow2,
			 .scale_ld = sc,
			 .blk_r = 128,
			 .blk_c = 128,
			 .fixed_order = true};
	each_level(&w, x, "fp8 ue8m0");
	each_level_avx2_packed(&w, x, "fp8 ue8m0 avx2-packed");
	w.scale = s_any;
	each_level(&w, x, "fp8");
	each_level_avx2_packed(&w, x, "fp8 avx2-packed");
	/* a view cut inside the blocks: rows from 40, columns from 200 (a TP rank's wo_a group) */
	struct wmat v = wmat_view(&w, 40, R - 40, 200, C - 200);
	EXPECT(v.fixed_order);
	each_level(&v, x, "fp8 view");
	v = wmat_view(&w, 64, R - 64, 0, C - 300); /* whole 32-row blocks from column 0 */
	each_level_avx2_packed(&v, x, "fp8 view avx2-packed");
	free(q);
	free(s_pow2);
	free(s_any);
	free(x);
}

static void test_floats(void)
{
	float *f = malloc(sizeof(float) * (size_t)R * C);
	uint16_t *h = malloc(sizeof(uint16_t) * (size_t)R * C);
	for (size_t i = 0; i < (size_t)R * C; i++) {
		f[i] = test_frand(&g_seed) * 0.05f;
		h[i] = f32_to_bf16(f[i]);
	}
	float *x = rand_x();
	struct wmat w = {.dtype = DT_F32, .data = f, .rows = R, .cols = C, .ld = C, .fixed_order = true};
	each_level(&w, x, "f32");
	w = (struct wmat){.dtype = DT_BF16, .data = h, .rows = R, .cols = C, .ld = C, .fixed_order = true};
	each_level(&w, x, "bf16");
	free(f);
	free(h);
	free(x);
}

TESTS(T(test_fp8), T(test_floats))
