/* The AVX2 kernels on weights packed at load, packed whatever the CPU's level
 * (prepack_weights_kind): fp8 in its own layout (ops/gemm_fp8_avx2.c, PREPACK_KIND_FP8_AVX2;
 * it runs at every level from AVX2 up) and bf16 in the dot-product layout
 * (ops/gemm_bf16_avx2.c, PREPACK_KIND_DP; it runs at the AVX2 level, the levels above run their
 * own kernels on the same copy or on `data`), against a double reference at every level the
 * CPU has (the portable level reads `data`): odd shapes, k not a multiple of 128, rows not a
 * multiple of the 32-row block, views (row offsets off the blocks; fp8 columns from a scale
 * block on: packed, from inside one: left unpacked), prefix views that keep the parent's
 * packed copy (an odd column count ends inside a packed pair), token counts 1..N across the
 * stream / tile switch and two token chunks, accumulate, x padding (NaN) never read. Errors are
 * bounded as any fp32 summation order allows; a token's result must not depend on its batch
 * (each kernel sums in one order). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/dtype.h"
#include "ops/cpu.h"
#include "ops/gemm.h"
#include "ops/pool.h"
#include "ops/prepack.h"
#include "ops/vec.h"

static uint64_t rng_state = 2727;
static uint32_t rbits(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}
static float frand(void) { return (float)(rbits() & 0xffffff) / (float)(1 << 23) - 1.0f; }

static struct pool *g_pool;

enum { R = 300, C = 520 }; /* fp8: 3 x 5 scale blocks of 128, partial ones at both ends */
static uint8_t *g_d8;
static uint16_t *g_d16;
static float *g_scale;
static struct wmat g_fp8, g_bf16;

static void make_full(void)
{
	g_d8 = malloc((size_t)R * C);
	for (size_t i = 0; i < (size_t)R * C; i++) {
		uint8_t q = (uint8_t)(rbits() >> 7);
		if (i % 7 == 3)
			q &= 0x87;                       /* subnormals and zeros, often */
		g_d8[i] = (q & 0x7f) == 0x7f ? 0x3c : q; /* no NaN */
	}
	int sr = (R + 127) / 128, sc = (C + 127) / 128;
	g_scale = malloc(sizeof(float) * (size_t)sr * sc);
	for (int i = 0; i < sr * sc; i++)
		g_scale[i] = 0.003f * (float)(i + 1);
	g_fp8 = (struct wmat){.dtype = DT_F8_E4M3,
			      .data = g_d8,
			      .rows = R,
			      .cols = C,
			      .ld = C,
			      .scale = g_scale,
			      .scale_ld = sc,
			      .blk_r = 128,
			      .blk_c = 128};
	g_d16 = malloc(sizeof(uint16_t) * (size_t)R * C);
	for (size_t i = 0; i < (size_t)R * C; i++) /* small values often, and negative zeros */
		g_d16[i] = f32_to_bf16(i % 11 == 4 ? -0.0f : frand() * (i % 5 == 1 ? 1e-3f : 1.0f));
	g_bf16 = (struct wmat){.dtype = DT_BF16, .data = g_d16, .rows = R, .cols = C, .ld = C};
}

/* the layout the AVX2 level packs w in */
static int kind_of(const struct wmat *w) { return w->dtype == DT_BF16 ? PREPACK_KIND_DP : PREPACK_KIND_FP8_AVX2; }

/* x [n, ldx]: values in the first cols columns, `pad` past them */
static float *make_x(int n, int cols, int ldx, float pad)
{
	float *x = malloc(sizeof(float) * (size_t)n * (size_t)ldx); /* exactly: nothing past the last row */
	for (int t = 0; t < n; t++)
		for (int c = 0; c < ldx; c++)
			x[(size_t)t * ldx + c] = c < cols ? frand() : pad;
	return x;
}

/* ref and bound[t][r] = Σ|w x| · (cols + 4) · 2^-23: what any fp32 order of the sums (and an
 * fp8 scale's rounding) can be off by */
static void reference(const struct wmat *w, const float *x, int ldx, int n, double *ref, double *bound)
{
	for (int t = 0; t < n; t++)
		for (int r = 0; r < w->rows; r++) {
			double s = 0, a = 0;
			for (int c = 0; c < w->cols; c++) {
				double p = (double)wmat_get(w, r, c) * x[(size_t)t * ldx + c];
				s += p;
				a += fabs(p);
			}
			ref[(size_t)t * w->rows + r] = s;
			bound[(size_t)t * w->rows + r] = a * (w->cols + 4) * 0x1p-23 + 1e-30;
		}
}

#define Y_INIT 0.625f

/* job at lvl: within the bound of the reference (plus Y_INIT when accumulating), y outside
 * the job's rows untouched; returns the number of bad values */
static int check(enum ops_level lvl, const struct wmat *w, const float *x, int ldx, int n, int acc, const double *ref,
		 const double *bound, float *y, int ldy, const char *what)
{
	for (size_t i = 0; i < (size_t)n * ldy; i++)
		y[i] = Y_INIT;
	struct gemm_job j = {.w = w, .x = x, .ldx = ldx, .y = y, .ldy = ldy, .n = n, .accumulate = acc};
	ops_gemm_multi_at(lvl, (n + w->rows) % 2 ? g_pool : NULL, 1, &j);
	int bad = 0;
	for (int t = 0; t < n; t++)
		for (int r = 0; r < ldy; r++) {
			float v = y[(size_t)t * ldy + r];
			if (r >= w->rows) {
				bad += v != Y_INIT;
				continue;
			}
			double want = ref[(size_t)t * w->rows + r] + (acc ? Y_INIT : 0);
			if (!(fabs(v - want) <= bound[(size_t)t * w->rows + r] + (acc ? 0x1p-23 : 0)) && bad++ < 2)
				harness_fail(__FILE__, __LINE__,
					     "%s, level %s, n=%d, acc %d: y[%d][%d] = %.9g, want %.9g", what,
					     ops_level_name(lvl), n, acc, t, r, v, want);
		}
	return bad;
}

/* view v (packed when pack, in the AVX2 level's layout) at every level and every n of ns */
static void check_view(struct wmat v, bool pack, const int *ns, int n_ns, const char *what)
{
	uint32_t *pk = NULL;
	if (pack) {
		pk = aligned_alloc(64, (prepack_bytes(&v) + 63) / 64 * 64);
		memset(pk, 0xa5, (prepack_bytes(&v) + 63) / 64 * 64);
		prepack_weights_kind(&v, pk, g_pool, kind_of(&v));
	}
	int nmax = ns[n_ns - 1], ldx = v.cols + 3, ldy = v.rows + 2;
	float *x = make_x(nmax, v.cols, ldx, NAN), *y = malloc(sizeof(float) * (size_t)nmax * ldy);
	float *y1 = malloc(sizeof(float) * (size_t)ldy);
	double *ref = malloc(sizeof(double) * (size_t)nmax * v.rows),
	       *bound = malloc(sizeof(double) * (size_t)nmax * v.rows);
	reference(&v, x, ldx, nmax, ref, bound);
	int bad = 0;
	for (int i = 0; i < n_ns; i++)
		for (int l = OPS_PORTABLE; l <= (int)ops_level_best(); l++) {
			int n = ns[i];
			bad += check((enum ops_level)l, &v, x, ldx, n, (i + l) & 1, ref, bound, y, ldy, what);
			if (!pack || l < OPS_AVX2 || (v.dtype == DT_BF16 && l != OPS_AVX2) || (i + l) & 1)
				continue;
			/* the last token alone: the same bits as within the batch */
			struct gemm_job j1 = {
				.w = &v, .x = x + (size_t)(n - 1) * ldx, .ldx = ldx, .y = y1, .ldy = ldy, .n = 1};
			ops_gemm_multi_at((enum ops_level)l, NULL, 1, &j1);
			if (memcmp(y1, y + (size_t)(n - 1) * ldy, sizeof(float) * (size_t)v.rows) && bad++ < 2)
				harness_fail(__FILE__, __LINE__, "%s, level %s: token %d alone differs from within %d",
					     what, ops_level_name((enum ops_level)l), n - 1, n);
		}
	EXPECTF(!bad, "%s: %d wrong", what, bad);
	free(x), free(y), free(y1), free(ref), free(bound), free(pk);
}

static const int ns_all[] = {1, 2, 3, 4, 5, 6, 7, 8, 13, 40, 130}; /* 130: two token chunks */
#define N_ALL (int)(sizeof ns_all / sizeof ns_all[0])

/* whole matrices of odd shapes: rows off the 32-row block, k off 128 and odd */
static void test_shapes(void)
{
	static const int rows[] = {1, 31, 33, 100}, cols[] = {1, 2, 127, 129, 300, 520};
	const struct wmat *full[] = {&g_fp8, &g_bf16};
	for (int d = 0; d < 2; d++)
		for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
			for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
				char what[64];
				snprintf(what, sizeof what, "%s %dx%d", d ? "bf16" : "fp8", rows[ri], cols[ci]);
				check_view(wmat_view(full[d], 0, rows[ri], 0, cols[ci]), true, ns_all, N_ALL, what);
			}
}

/* views of the full matrix: row offsets off the blocks (fp8 scale rows change inside a 32-row
 * block), fp8 columns from a scale block on (packed) or inside one (not packable); bf16 views
 * at any offset are packed */
static void test_views(void)
{
	struct {
		int r0, nr, c0, nc;
	} vs[] = {{0, R, 0, C}, {40, 200, 128, 392}, {97, 33, 256, 7}, {1, 31, 384, 136}, {30, 70, 100, 300}};
	for (int d = 0; d < 2; d++)
		for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
			struct wmat v = wmat_view(d ? &g_bf16 : &g_fp8, vs[i].r0, vs[i].nr, vs[i].c0, vs[i].nc);
			bool packable = d || vs[i].c0 % 128 == 0;
			EXPECT(prepack_wanted(&v, false) == (packable && ops_level_best() == OPS_AVX2));
			if (!packable)
				EXPECT(!prepack_wanted(&v, true));
			char what[64];
			snprintf(what, sizeof what, "%s view %zu", d ? "bf16" : "fp8", i);
			check_view(v, packable, ns_all, N_ALL, what);
		}
}

/* sub-views of a packed matrix: at a 32-row block and column 0 they keep its packed copy
 * (the parent's pairs per block; an odd column count ends inside a pair whose other column
 * must not count), elsewhere they drop it */
static void packed_subviews(const struct wmat *full)
{
	struct wmat v = wmat_view(full, 0, R, 0, C);
	uint32_t *pk = aligned_alloc(64, (prepack_bytes(&v) + 63) / 64 * 64);
	prepack_weights_kind(&v, pk, g_pool, kind_of(&v));
	struct {
		int r0, nr, c0, nc;
		bool keeps;
	} sv[] = {{0, 100, 0, 255, true},  {64, 236, 0, 129, true},  {32, 1, 0, 1, true},   {96, 70, 0, 520, true},
		  {33, 40, 0, 200, false}, {0, 64, 128, 200, false}, {64, 64, 1, 30, false}};
	for (size_t i = 0; i < sizeof sv / sizeof sv[0]; i++) {
		struct wmat s = wmat_view(&v, sv[i].r0, sv[i].nr, sv[i].c0, sv[i].nc);
		EXPECTF((s.packed != NULL) == sv[i].keeps, "sub-view %zu: packed %p", i, (const void *)s.packed);
		char what[64];
		snprintf(what, sizeof what, "%s sub-view %zu of a packed matrix",
			 full->dtype == DT_BF16 ? "bf16" : "fp8", i);
		check_view(s, false, ns_all, N_ALL, what);
	}
	free(pk);
}

static void test_packed_subviews(void)
{
	packed_subviews(&g_fp8);
	packed_subviews(&g_bf16);
}

/* x with ldx == cols: nothing past the last token's row is read (ASan would tell), and the
 * AVX2 kernel's odd last column multiplies no x past the row */
static void test_tight_x(void)
{
	static const int shapes[][2] = {{33, 127}, {64, 1}, {40, 257}};
	for (size_t s = 0; s < 2 * sizeof shapes / sizeof shapes[0]; s++) {
		const int *sh = shapes[s % 3];
		struct wmat v = wmat_view(s < 3 ? &g_fp8 : &g_bf16, 0, sh[0], 0, sh[1]);
		uint32_t *pk = aligned_alloc(64, (prepack_bytes(&v) + 63) / 64 * 64);
		prepack_weights_kind(&v, pk, g_pool, kind_of(&v));
		for (int n = 1; n <= 9; n += 4) {
			float *x = make_x(n, v.cols, v.cols, 0), *y = malloc(sizeof(float) * (size_t)n * v.rows);
			double *ref = malloc(sizeof(double) * (size_t)n * v.rows),
			       *bound = malloc(sizeof(double) * (size_t)n * v.rows);
			reference(&v, x, v.cols, n, ref, bound);
			int bad = 0;
			for (int l = OPS_PORTABLE; l <= (int)ops_level_best(); l++)
				bad += check((enum ops_level)l, &v, x, v.cols, n, 0, ref, bound, y, v.rows,
					     "ldx == cols");
			EXPECT(!bad);
			free(x), free(y), free(ref), free(bound);
		}
		free(pk);
	}
}

/* Every e4m3 byte but NaN decodes exactly in the packed fp8 kernel, in every row of a block
 * (each row its bytes rotated) and in blocks taken alone and in pairs, on the stream (1 and 2
 * tokens) and the tile path (3), subnormals included, with either decode, for x from 1e-30 to
 * 2^100: a one-hot x of v at column c gives each row's byte at c times v times its block's
 * scale exactly. The integer decode is 2^-120 small (subnormal bytes become fp32 denormals)
 * and x is scaled up by up to 2^112 (less when |x| >= 2^15): a flushed denormal, an
 * overflowing x, a scale not undone or a row in the wrong lane all show here. */
static void test_fp8_packed_all_bytes(void)
{
	enum { NC = 256, NR = 104 }; /* 104 rows: two pairs of blocks, the last pair's second 8 rows */
	static const float vs[] = {1.0f, -393216.0f /* -3 x 2^17 */, 1e-30f, 0x1p100f};
	static uint8_t wq[NR * NC];
	float sc[2] = {1.0f, 0.5f};
	for (int r = 0; r < NR; r++)
		for (int i = 0; i < NC; i++) {
			int b = (i + 3 * r) % 256;
			wq[r * NC + i] = (b & 0x7f) == 0x7f ? 0 : (uint8_t)b;
		}
	struct wmat w = {.dtype = DT_F8_E4M3,
			 .data = wq,
			 .rows = NR,
			 .cols = NC,
			 .ld = NC,
			 .scale = sc,
			 .scale_ld = 2,
			 .blk_r = 128,
			 .blk_c = 128};
	uint32_t *pk = aligned_alloc(64, (prepack_bytes(&w) + 63) / 64 * 64);
	prepack_weights_kind(&w, pk, NULL, PREPACK_KIND_FP8_AVX2);
	float x[3 * NC], y[3 * NR];
	int bad = 0;
	for (int n = 1; n <= 3; n++)
		for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++)
			for (int i = 0; i < NC; i++) {
				memset(x, 0, sizeof x);
				for (int t = 0; t < n; t++) /* token t: v_(k + t) at column (i + 37 t) */
					x[t * NC + (i + 37 * t) % NC] =
						vs[(k + (size_t)t) % (sizeof vs / sizeof vs[0])];
				for (int l = OPS_AVX2; l <= (int)ops_level_best(); l++)
					for (int dz = 0; dz < 2; dz++) { /* the f16 decode, then the integer one */
						ops_cpu_set_denormals_fast(dz);
						struct gemm_job j = {
							.w = &w, .x = x, .ldx = NC, .y = y, .ldy = NR, .n = n};
						ops_gemm_multi_at((enum ops_level)l, NULL, 1, &j);
						for (int t = 0; t < n; t++)
							for (int r = 0; r < NR; r++) {
								int c = (i + 37 * t) % NC;
								float v = x[t * NC + c], got = y[t * NR + r],
								      want = fp8_e4m3_to_f32(wq[r * NC + c]) * v *
									     sc[c / 128];
								/* != : ±0 alike, as sums of zeros are +0 */
								if (got != want && bad++ < 3)
									harness_fail(__FILE__, __LINE__,
										     "n=%d level %s, integer decode "
										     "%d: token %d "
										     "row %d: byte 0x%02x x %g: %.9g, "
										     "want %.9g",
										     n,
										     ops_level_name((enum ops_level)l),
										     ops_cpu_denormals_fast(), t, r,
										     wq[r * NC + c], (double)v,
										     (double)got, (double)want);
							}
					}
			}
	ops_cpu_set_denormals_fast(-1);
	EXPECTF(!bad, "%d wrong", bad);
	free(pk);
}

int main(int argc, char **argv)
{
	struct err e;
	if (pool_new(2, &g_pool, &e))
		return 1;
	make_full();
	static const struct test_case cases[] = {T(test_shapes), T(test_views), T(test_packed_subviews),
						 T(test_tight_x), T(test_fp8_packed_all_bytes)};
	int rc = harness_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
	free(g_d8), free(g_d16), free(g_scale);
	pool_free(g_pool);
	return rc;
}
