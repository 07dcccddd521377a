/* The weight format table (ops/wformat.h), row by row: every row complete (a name, an element,
 * a panel per level; a quantizing row its messages), looked up by dtype and name, --quantization
 * taking exactly the rows that quantize; and for each row a matrix made in it (floats as they
 * are, fp8, int8 and int4 quantized at load through the row's quantize), whose views read the same
 * elements, whose bytes add up, and whose GEMM at every level, packed at load or not, agrees
 * with the sum of wmat_get x x (int8 and int4 within their activation rounding); a quantizer's
 * errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "harness.h"
#include "model_v4/fp4.h"
#include "ops/gemm.h"
#include "ops/pool.h"
#include "ops/prepack.h"
#include "ops/wf_fp4.h"
#include "ops/wformat.h"

#define R 96  /* rows: three 32-row blocks */
#define C 300 /* columns: 128-column blocks and a part one */

static struct pool *g_pool;
static uint64_t g_seed = 0x5eed0f0f;

static void setup(void)
{
	struct err e = {0};
	if (!g_pool && pool_new(2, &g_pool, &e))
		abort();
}

static void test_table(void)
{
	int rows = 0;
	for (int dt = 0; dt < DT_COUNT; dt++) {
		const struct wformat *f = wformat_of((enum dtype)dt);
		if (!f)
			continue;
		rows++;
		EXPECTF(f->dtype == (enum dtype)dt && f->name && f->get && f->bits > 0, "row %d", dt);
		EXPECTF(wformat_by_name(f->name) == f, "%s by name", f->name);
		for (int l = 0; l < OPS_N_LEVELS; l++)
			EXPECTF(f->panel[l], "%s: no panel at level %s", f->name, ops_level_name((enum ops_level)l));
		EXPECTF(!f->quantize || (f->scale_unit && f->quant_help && f->usage && f->quant_desc), "%s's messages",
			f->name);
		EXPECTF(!f->prepack || (f->prepack_wanted && f->prepack_bytes), "%s's packing", f->name);
		EXPECTF((f->scale == WSCALE_NONE) == (f->blk_k == 0), "%s's scale blocks", f->name);
		struct err e = {0};
		const struct wformat *q = NULL;
		int rc = wformat_parse_quantization(f->name, &q, &e);
		EXPECTF(f->quantize ? rc == 0 && q == f : rc < 0, "--quantization %s", f->name);
	}
	EXPECT(rows >= 5 && !wformat_of(DT_I32) && !wformat_of(DT_COUNT) && !wformat_by_name("awq"));
	struct err e = {0};
	const struct wformat *q = NULL;
	EXPECT(wformat_parse_quantization("awq", &q, &e) < 0 && !q);
	EXPECTF(strstr(e.msg, "'awq'") && strstr(e.msg, "fp8: ") && strstr(e.msg, "int8: "), "%s", e.msg);
	char names[64], small[6];
	wformat_quant_names(names, sizeof names, "|");
	wformat_quant_names(small, sizeof small, "|"); /* cut, terminated */
	EXPECTF(!strcmp(names, "fp8|int8|int4") && !strcmp(small, "fp8|i"), "'%s', '%s'", names, small);
}

/* owned by the test: every allocation kept, freed at the end */
struct test_alloc {
	void *p[8];
	int n, fail;
};

static void *alloc_fn(void *ctx, size_t bytes, bool drop_when_packed)
{
	(void)drop_when_packed;
	struct test_alloc *a = ctx;
	if (a->fail || a->n == 8)
		return NULL;
	return a->p[a->n++] = aligned_alloc(64, (bytes + 63) / 64 * 64);
}

static void alloc_free(struct test_alloc *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->p[i]);
	a->n = 0;
}

/* A [R, C] matrix in format f from the float source (bf16 values) src */
static void make(const struct wformat *f, const struct wmat *src, struct test_alloc *a, struct wmat *w)
{
	if (f->quantize) {
		struct walloc wa = {alloc_fn, a};
		int br, bc;
		EXPECT_EQ_INT(f->quantize(g_pool, src, 0, R, 0, C, &wa, w, &br, &bc), 0);
		return;
	}
	if (f->dtype == DT_F4_E2M1) { /* MXFP4 as DeepSeek's converter makes it: 2^ceil(log2(amax / 6)) */
		int G = (C + 31) / 32;
		uint8_t *q = alloc_fn(a, (size_t)R * C / 2, false), *sc = alloc_fn(a, (size_t)R * (size_t)G, false);
		for (int r = 0; r < R; r++)
			for (int g = 0; g < G; g++) {
				int c1 = g * 32 + 32 < C ? g * 32 + 32 : C;
				float amax = 0;
				for (int c = g * 32; c < c1; c++)
					amax = fmaxf(amax, fabsf(wmat_get(src, r, c)));
				int e = amax > 0 ? (int)ceil(log2(amax / 6.0)) : -127;
				sc[r * G + g] = (uint8_t)(e + 127);
				for (int c = g * 32; c < c1; c += 2)
					q[(r * C + c) / 2] =
						(uint8_t)(fp4_f32_to_e2m1(ldexpf(wmat_get(src, r, c), -e)) |
							  fp4_f32_to_e2m1(ldexpf(wmat_get(src, r, c + 1), -e)) << 4);
			}
		*w = wf_fp4_wmat(q, sc, R, C);
		return;
	}
	size_t esz = (size_t)f->bits / 8;
	char *d = alloc_fn(a, (size_t)R * C * esz, false);
	for (int r = 0; r < R; r++)
		for (int c = 0; c < C; c++) {
			float v = wmat_get(src, r, c);
			char *o = d + ((size_t)r * C + (size_t)c) * esz;
			if (f->dtype == DT_F32) {
				memcpy(o, &v, 4);
			} else if (f->dtype == DT_BF16) {
				uint16_t h = f32_to_bf16(v);
				memcpy(o, &h, 2);
			} else { /* f16: a bf16 value is an f16 one from 2^-14 on (the rest: 0) */
				uint32_t u;
				memcpy(&u, &v, 4);
				int ex = (int)(u >> 23 & 0xff) - 127 + 15;
				uint16_t h = (uint16_t)(u >> 16 & 0x8000);
				if (ex > 0)
					h |= (uint16_t)(ex << 10 | (u >> 13 & 0x3ff));
				memcpy(o, &h, 2);
			}
		}
	*w = (struct wmat){.dtype = f->dtype, .data = d, .rows = R, .cols = C, .ld = C};
}

/* y = x · Wᵀ (w [rows, cols]) at every level against Σ wmat_get x x in double: tol relative to Σ |w x| */
static void check_gemm(const struct wmat *w, int n, double tol, const char *what)
{
	const int nr = w->rows, nc = w->cols;
	float *x = malloc(sizeof(float) * (size_t)n * nc), *y = malloc(sizeof(float) * (size_t)n * nr);
	for (int i = 0; i < n * nc; i++)
		x[i] = bf16_to_f32(f32_to_bf16(test_frand(&g_seed)));
	for (int l = 0; l <= (int)ops_level_best(); l++) {
		struct gemm_job j = {.w = w, .x = x, .ldx = nc, .y = y, .ldy = nr, .n = n, .x_bf16 = 1};
		ops_gemm_multi_at((enum ops_level)l, g_pool, 1, &j);
		int bad = 0;
		double worst = 0;
		for (int t = 0; t < n; t++)
			for (int r = 0; r < nr; r++) {
				double s = 0, m = 0;
				for (int c = 0; c < nc; c++) {
					double p = (double)wmat_get(w, r, c) * x[(size_t)t * nc + (size_t)c];
					s += p;
					m += fabs(p);
				}
				double d = fabs(y[(size_t)t * nr + (size_t)r] - s);
				worst = fmax(worst, d / m);
				bad += !(d <= tol * m + 1e-6);
			}
		EXPECTF(bad == 0, "%s, %d tokens, level %s: %d outputs off (worst %g of the sum of |w x|)", what, n,
			ops_level_name((enum ops_level)l), bad, worst);
	}
	free(x), free(y);
}

static void check_gemm_view(const struct wmat *v, double tol, const char *what)
{
	char buf[64];
	snprintf(buf, sizeof buf, "%s column view", what);
	check_gemm(v, 1, tol, buf);
	check_gemm(v, 45, tol, buf);
}

static void test_rows(void)
{
	setup();
	uint16_t *s = malloc(sizeof(uint16_t) * R * C);
	for (int i = 0; i < R * C; i++)
		s[i] = f32_to_bf16(test_frand(&g_seed) * (i % 7 == 0 ? 4.0f : 0.5f));
	struct wmat src = {.dtype = DT_BF16, .data = s, .rows = R, .cols = C, .ld = C};
	for (int dt = 0; dt < DT_COUNT; dt++) {
		const struct wformat *f = wformat_of((enum dtype)dt);
		if (!f)
			continue;
		struct test_alloc a = {0};
		struct wmat w;
		make(f, &src, &a, &w);
		EXPECTF(w.dtype == f->dtype && w.rows >= R && w.cols >= C, "%s", f->name);
		/* the quantized values stay near the source: within half a step of the scale */
		int far = 0;
		for (int r = 0; r < R; r++)
			for (int c = 0; c < C; c++) {
				double v = wmat_get(&src, r, c), d = fabs(wmat_get(&w, r, c) - v);
				/* fp4: half a step, |v| / 4, or a quarter of the group's scale (<= 1) */
				if (f->dtype == DT_F4_E2M1) {
					far += !(d <= fabs(v) / 4 + 0.25);
					continue;
				}
				/* fp8: 3 mantissa bits; int8: half a step of a row group's amax (<= 4) / 127;
				 * int4: a step of amax / 7.5 (+amax becomes 7) */
				far += !(d <= (f->dtype == DT_F8_E4M3 ? fabs(v) / 16 + 1e-4
					       : f->dtype == DT_I8    ? 2.0 / 127 + 1e-6
					       : f->dtype == DT_I4    ? 4.0 / 7.5 + 1e-6
								      : 1e-4));
			}
		EXPECTF(far == 0, "%s: %d values far from the source", f->name, far);
		/* a view on whole 32-row blocks of all the columns (the only one int8 has) */
		struct wmat v = wmat_view(&w, 32, 40, 0, C);
		int diff = 0;
		for (int r = 0; r < 40; r++)
			for (int c = 0; c < C; c++)
				diff += wmat_get(&v, r, c) != wmat_get(&w, 32 + r, c);
		EXPECTF(diff == 0 && wmat_bytes(&v) < wmat_bytes(&w), "%s view", f->name);
		/* row-major (fp4 from even columns): any columns too (a tensor-parallel slice inside a
		 * scale block) */
		if (!f->view || f->dtype == DT_F4_E2M1) {
			v = wmat_view(&w, 7, 50, 100, 150);
			diff = 0;
			for (int r = 0; r < 50; r++)
				for (int c = 0; c < 150; c++)
					diff += wmat_get(&v, r, c) != wmat_get(&w, 7 + r, 100 + c);
			EXPECTF(diff == 0 && !v.packed, "%s column view", f->name);
			check_gemm_view(&v, f->dtype == DT_I8 ? 0.03 : 1e-5, f->name);
		} else if (f->dtype == DT_I4) { /* columns from a 32-column group on */
			v = wmat_view(&w, 64, 32, 64, 150);
			diff = 0;
			for (int r = 0; r < 32; r++)
				for (int c = 0; c < 150; c++)
					diff += wmat_get(&v, r, c) != wmat_get(&w, 64 + r, 64 + c);
			EXPECTF(diff == 0 && wmat_bytes(&v) == 5 * 576, "%s column view", f->name);
			check_gemm_view(&v, 0.03, f->name);
		}
		EXPECTF(wmat_bytes(&w) >= (size_t)R * C * (size_t)f->bits / 8, "%s bytes", f->name);
		/* int8 and int4 (below bf16 dot products) quantize their activations: a step of 1/127 of
		 * each group's amax */
		double tol = f->dtype == DT_I8 || f->dtype == DT_I4 ? 0.03 : 1e-5;
		check_gemm(&w, 1, tol, f->name);
		check_gemm(&w, 45, tol, f->name);
		if (f->prepack && prepack_wanted(&w, true)) { /* the packed copy, as the model's */
			uint32_t *d = aligned_alloc(64, (prepack_bytes(&w) + 63) / 64 * 64);
			struct wmat p = w;
			prepack_weights(&p, d, g_pool);
			char what[64];
			snprintf(what, sizeof what, "%s packed", f->name);
			check_gemm(&p, 1, tol, what);
			check_gemm(&p, 45, tol, what);
			free(d);
		}
		alloc_free(&a);
	}
	free(s);
}

/* the quantizers' errors: no memory (-2), a weight that is not finite (-1, named) */
static void test_quantize_errors(void)
{
	setup();
	float *s = malloc(sizeof(float) * R * C);
	for (int i = 0; i < R * C; i++)
		s[i] = test_frand(&g_seed);
	s[70 * C + 200] = NAN;
	struct wmat src = {.dtype = DT_F32, .data = s, .rows = R, .cols = C, .ld = C};
	for (int dt = 0; dt < DT_COUNT; dt++) {
		const struct wformat *f = wformat_of((enum dtype)dt);
		if (!f || !f->quantize)
			continue;
		struct test_alloc a = {.fail = 1};
		struct walloc wa = {alloc_fn, &a};
		struct wmat w;
		int br = 0, bc = 0;
		EXPECTF(f->quantize(g_pool, &src, 0, R, 0, C, &wa, &w, &br, &bc) == -2, "%s without memory", f->name);
		a.fail = 0;
		EXPECTF(f->quantize(g_pool, &src, 0, R, 0, C, &wa, &w, &br, &bc) == -1 && br == 70 && bc == 200,
			"%s: NaN at [%d, %d]", f->name, br, bc);
		alloc_free(&a);
	}
	free(s);
}

TESTS(T(test_table), T(test_rows), T(test_quantize_errors))
