/* Prepacked bf16 weights (ops/prepack.h): the packed layout word by word, the prepacked
 * AVX512_BF16 GEMM against a double reference on odd shapes, views that keep or drop the
 * packed copy, batch invariance, mixed packed / unpacked jobs in one call. The lower levels
 * (and CPUs without AVX512_BF16, where the level is capped) must ignore `packed`. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/cpu.h"
#include "ops/gemm.h"
#include "ops/gemm_internal.h"
#include "ops/pool.h"
#include "ops/prepack.h"
#include "ops/vec.h"

static uint64_t rng_state = 4242;
static uint32_t rbits(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}
static float frand(void) /* uniform [-1, 1) */ { return (float)(rbits() & 0xffffff) / (float)(1 << 23) - 1.0f; }

static struct pool *g_pool;

/* A random bf16 weight [rows, cols] (never exactly 0, so zero padding is told apart) and
 * room for its packed copy. */
struct pbuf {
	struct wmat w;
	uint16_t *data;
	uint32_t *pk;
};

static uint32_t *pk_alloc(size_t bytes)
{
	size_t sz = (bytes + 63) / 64 * 64;
	uint32_t *p = aligned_alloc(64, sz ? sz : 64);
	memset(p, 0xa5, sz ? sz : 64); /* garbage: the packer must write every word */
	return p;
}

static void pbuf_make(struct pbuf *b, int rows, int cols)
{
	size_t n = (size_t)rows * (size_t)cols;
	b->data = malloc(n * sizeof(uint16_t) + 2);
	for (size_t i = 0; i < n; i++) {
		uint16_t h = f32_to_bf16(frand());
		b->data[i] = h ? h : 0x3f80;
	}
	b->w = (struct wmat){.dtype = DT_BF16, .data = b->data, .rows = rows, .cols = cols, .ld = cols};
	b->pk = NULL;
}

/* Packs the full matrix (b->w.packed set). */
static void pbuf_pack(struct pbuf *b, struct pool *p)
{
	b->pk = pk_alloc(prepack_bytes(&b->w));
	prepack_weights(&b->w, b->pk, p);
}

static void pbuf_free(struct pbuf *b)
{
	free(b->data);
	free(b->pk);
}

/* ref[t*ldr + r] = Σ_c W[r, c] x[t*ldx + c] in double (bf16 products are exact in fp32). */
static void ref_gemm(const struct wmat *w, const float *x, int ldx, int n, double *ref, int ldr)
{
	float *wf = malloc(sizeof(float) * (size_t)w->rows * (size_t)w->cols + 4);
	for (int r = 0; r < w->rows; r++)
		for (int c = 0; c < w->cols; c++)
			wf[(size_t)r * w->cols + c] = wmat_get(w, r, c);
	for (int t = 0; t < n; t++)
		for (int r = 0; r < w->rows; r++) {
			const float *wr = wf + (size_t)r * w->cols, *xt = x + (size_t)t * ldx;
			double s = 0;
			for (int c = 0; c < w->cols; c++)
				s += (double)wr[c] * xt[c];
			ref[(size_t)t * ldr + r] = s;
		}
	free(wf);
}

/* x [n, ldx]: bf16-exact values in the first cols columns, `pad` in the rest. */
static float *make_x(int n, int cols, int ldx, float pad)
{
	float *x = malloc(sizeof(float) * (size_t)n * (size_t)ldx); /* exactly: no reads past the end */
	for (int t = 0; t < n; t++) {
		float *xt = x + (size_t)t * ldx;
		for (int c = 0; c < cols; c++)
			xt[c] = frand();
		ops_round_bf16(xt, cols);
		for (int c = cols; c < ldx; c++)
			xt[c] = pad;
	}
	return x;
}

#define Y_INIT 0.25f

/* Runs job j (y [n, ldy] filled with Y_INIT first) at lvl and checks it against ref
 * [n, ldr]: relative error < 2e-6 over the job's outputs, every other y value untouched. */
static void run_check(enum ops_level lvl, struct pool *p, struct gemm_job j, const double *ref, int ldr,
		      const char *what)
{
	size_t ny = (size_t)j.n * (size_t)j.ldy;
	for (size_t i = 0; i < ny; i++)
		j.y[i] = Y_INIT;
	ops_gemm_multi_at(lvl, p, 1, &j);
	double num = 0, den = 1e-30;
	int untouched = 1, rows = j.w->rows;
	for (int t = 0; t < j.n; t++)
		for (int r = 0; r < j.ldy; r++) {
			float got = j.y[(size_t)t * j.ldy + r];
			if (r >= rows) {
				untouched &= got == Y_INIT;
				continue;
			}
			double want = ref[(size_t)t * ldr + r] + (j.accumulate ? Y_INIT : 0);
			double d = fabs(got - want); /* NaN fails below */
			num = isnan(got) ? INFINITY : fmax(num, d);
			den = fmax(den, fabs(want));
		}
	EXPECTF(num / den < 2e-6, "%s: %dx%d (packed %s) n=%d ldx=%d ldy=%d acc=%d level %s pool %s: rel err %g", what,
		rows, j.w->cols, j.w->packed ? "yes" : "no", j.n, j.ldx, j.ldy, j.accumulate, ops_level_name(lvl),
		p ? "2" : "none", num / den);
	EXPECTF(untouched, "%s: %dx%d n=%d level %s: wrote y past the view's rows", what, rows, j.w->cols, j.n,
		ops_level_name(lvl));
}

/* ---- 1. layout ---- */

/* Every word of w's packed copy against the formula in prepack.h. */
static int check_layout(const struct wmat *w, const uint32_t *pk)
{
	int P = prepack_pairs(w->cols), blocks = (w->rows + PREPACK_ROWS - 1) / PREPACK_ROWS, bad = 0;
	const uint16_t *d = w->data;
	for (int rb = 0; rb < blocks; rb++)
		for (int p = 0; p < P; p++)
			for (int r = 0; r < PREPACK_ROWS; r++) {
				int row = rb * PREPACK_ROWS + r, c0 = 2 * p, c1 = 2 * p + 1;
				uint32_t lo = 0, hi = 0;
				if (row < w->rows && c0 < w->cols) { /* pairs past the columns: zero */
					lo = d[(size_t)row * (size_t)w->ld + (size_t)c0];
					if (c1 < w->cols)
						hi = d[(size_t)row * (size_t)w->ld + (size_t)c1];
				}
				uint32_t want = lo | hi << 16, got = pk[((size_t)rb * P + p) * PREPACK_ROWS + r];
				if (got != want && bad++ < 3)
					harness_fail(
						__FILE__, __LINE__,
						"%dx%d (ld %lld): block %d pair %d row %d: 0x%08x, expected 0x%08x",
						w->rows, w->cols, (long long)w->ld, rb, p, r, got, want);
			}
	return bad;
}

static void test_layout(void)
{
	int rows[] = {1, 31, 32, 33, 70}, cols[] = {1, 2, 3, 64, 129};
	for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
		for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
			int R = rows[ri], C = cols[ci];
			struct pbuf b;
			pbuf_make(&b, R, C);
			size_t want = (size_t)((R + 31) / 32) * 32 * ((size_t)((C + 1) / 2 + 15) / 16 * 16) * 4;
			EXPECT_EQ_INT(prepack_bytes(&b.w), want);
			for (int use_pool = 0; use_pool < 2; use_pool++) {
				uint32_t *pk = pk_alloc(prepack_bytes(&b.w));
				b.w.packed = NULL;
				prepack_weights(&b.w, pk, use_pool ? g_pool : NULL);
				EXPECT(b.w.packed == pk);
				check_layout(&b.w, pk);
				free(pk);
			}
			pbuf_free(&b);
		}
}

/* Packing a view packs the view's elements (its ld, row and column offsets). */
static void test_layout_view(void)
{
	struct pbuf b;
	pbuf_make(&b, 100, 150);
	struct {
		int r0, nr, c0, nc;
	} vs[] = {{13, 50, 7, 101}, {0, 33, 1, 2}, {64, 36, 149, 1}, {31, 1, 20, 129}};
	for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
		struct wmat v = wmat_view(&b.w, vs[i].r0, vs[i].nr, vs[i].c0, vs[i].nc);
		EXPECT_EQ_INT(prepack_bytes(&v),
			      (size_t)((vs[i].nr + 31) / 32) * 32 * ((size_t)((vs[i].nc + 1) / 2 + 15) / 16 * 16) * 4);
		uint32_t *pk = pk_alloc(prepack_bytes(&v));
		prepack_weights(&v, pk, g_pool);
		EXPECT(v.packed == pk);
		EXPECT(v.data == b.data + (size_t)vs[i].r0 * 150 + (size_t)vs[i].c0 && v.ld == 150);
		check_layout(&v, pk);
		free(pk);
	}
	pbuf_free(&b);
}

static void test_prepack_wanted(void)
{
	struct pbuf b;
	pbuf_make(&b, 64, 64);
	bool bf16 = ops_level_best() >= OPS_AVX512_BF16, avx2 = ops_level_best() == OPS_AVX2;
	/* the AVX2 kernel (ops/gemm_bf16_avx2.c) multiplies fp32 x: any activations */
	EXPECT(prepack_wanted(&b.w, true) == (bf16 || avx2));
	EXPECT(prepack_wanted(&b.w, false) == avx2);
	struct wmat f = b.w;
	f.dtype = DT_F32;
	EXPECT(!prepack_wanted(&f, true));
	pbuf_free(&b);
}

/* ---- 2. GEMM correctness ---- */

static const enum ops_level levels[] = {OPS_PORTABLE, OPS_AVX2, OPS_AVX512, OPS_AVX512_BF16};
#define N_LEVELS (int)(sizeof levels / sizeof levels[0])

/* Every n of ns on w (packed), strided x and y: at AVX512_BF16 (capped to the CPU's best)
 * and at AMX where the CPU has it, with and without a pool, plain and accumulate; at the
 * lower levels once per n. */
static void check_packed_gemm(const struct wmat *w, const int *ns, int n_ns, const char *what)
{
	int nmax = 0;
	for (int i = 0; i < n_ns; i++)
		nmax = ns[i] > nmax ? ns[i] : nmax;
	int ldx = w->cols + 3, ldy = w->rows + 5;
	float *x = make_x(nmax, w->cols, ldx, 1e30f);
	double *ref = malloc(sizeof(double) * (size_t)nmax * (size_t)w->rows);
	ref_gemm(w, x, ldx, nmax, ref, w->rows); /* token t's row does not depend on n */
	for (int i = 0; i < n_ns; i++) {
		int n = ns[i];
		float *y = malloc(sizeof(float) * (size_t)n * (size_t)ldy); /* exactly n rows */
		struct gemm_job j = {.w = w, .x = x, .ldx = ldx, .y = y, .ldy = ldy, .n = n, .x_bf16 = 1};
		for (int acc = 0; acc < 2; acc++) {
			j.accumulate = acc;
			run_check(OPS_AVX512_BF16, acc ? NULL : g_pool, j, ref, w->rows, what);
			if (ops_level_best() >= OPS_AMX)
				run_check(OPS_AMX, acc ? g_pool : NULL, j, ref, w->rows, what);
		}
		for (int l = 0; l < N_LEVELS - 1; l++) {
			j.accumulate = (i + l) & 1;
			run_check(levels[l], g_pool, j, ref, w->rows, what);
		}
		free(y);
	}
	free(x);
	free(ref);
}

/* check_packed_gemm on every rows x cols of the lists, packed with pack_pool */
static void check_gemm_grid(const int *rows, int n_rows, const int *cols, int n_cols, const int *ns, int n_ns,
			    struct pool *pack_pool, const char *what)
{
	for (int ri = 0; ri < n_rows; ri++)
		for (int ci = 0; ci < n_cols; ci++) {
			struct pbuf b;
			pbuf_make(&b, rows[ri], cols[ci]);
			pbuf_pack(&b, pack_pool);
			check_packed_gemm(&b.w, ns, n_ns, what);
			pbuf_free(&b);
		}
}
#define LEN(a) (int)(sizeof a / sizeof a[0])

static void test_gemm_shapes(void)
{
	int rows[] = {32, 64, 96, 100, 577}, cols[] = {2, 64, 127, 128, 513, 2048};
	int ns[] = {1, 2, 5, 12, 13, 16, 25, 64, 100};
	check_gemm_grid(rows, LEN(rows), cols, LEN(cols), ns, LEN(ns), NULL, "shapes");
}

/* Long k (more than one 2048-column chunk of the AMX kernel's multi-pass path, a partial last
 * chunk) and more blocks than one group, at the token counts of one pass, of that path (33-256)
 * and past it. */
static void test_gemm_long_k(void)
{
	int rows[] = {100, 577}, cols[] = {3000, 2050};
	int ns[] = {7, 33, 64, 100, 129, 256, 300, 520};
	check_gemm_grid(rows, LEN(rows), cols, LEN(cols), ns, LEN(ns), g_pool, "long k");
}

/* x columns past cols (ldx > cols) are never used, even as 0 × NaN on an odd last column;
 * with ldx == cols nothing past the last token's row is read. */
static void test_x_padding_not_read(void)
{
	int shapes[][2] = {{96, 127}, {100, 513}, {33, 1}, {64, 3}};
	int ns[] = {1, 3, 5, 16, 64};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		struct pbuf b;
		pbuf_make(&b, shapes[s][0], shapes[s][1]);
		pbuf_pack(&b, g_pool);
		int C = b.w.cols, R = b.w.rows;
		for (int tight = 0; tight < 2; tight++) {
			int ldx = tight ? C : C + 1;
			float *x = make_x(64, C, ldx, NAN);
			double *ref = malloc(sizeof(double) * 64 * (size_t)R);
			ref_gemm(&b.w, x, ldx, 64, ref, R);
			for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
				float *y = malloc(sizeof(float) * (size_t)ns[i] * (size_t)R);
				struct gemm_job j = {
					.w = &b.w, .x = x, .ldx = ldx, .y = y, .ldy = R, .n = ns[i], .x_bf16 = 1};
				for (int l = 0; l < N_LEVELS; l++)
					run_check(levels[l], g_pool, j, ref, R,
						  tight ? "ldx == cols" : "NaN x padding");
				free(y);
			}
			free(x);
			free(ref);
		}
		pbuf_free(&b);
	}
}

/* prepack_f32 packs bf16-exact fp32 values exactly as prepack_weights packs the same values:
 * straight, as two column ranges (the prefill keys [k_nope | k_pe]) and from a transposed
 * source (its Vᵀ); prepack_gemm_1t on the result (column-prefix views included) matches the
 * reference. */
/* prepack_f32 on values that are not bf16 (rounded to nearest even), specials (NaN stays
 * quiet, inf, denormals), odd ranges and rows past a block: every word against the layout
 * formula, for both source strides (the prefill's K and its Vᵀ) */
static void test_prepack_f32_words(void)
{
	static const float special[] = {NAN, -INFINITY, INFINITY, 1e-40f, -3e-39f, 0.0f, -0.0f, 65504.0f};
	int shapes[][4] = {
		{70, 67, 0, 67}, {33, 200, 64, 136}, {16, 9, 2, 7}, {100, 2, 0, 2}}; /* rows, cols, c0, nc */
	for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
		int R = shapes[si][0], C = shapes[si][1], c0 = shapes[si][2], nc = shapes[si][3], P = prepack_pairs(C);
		float *f = malloc(sizeof(float) * (size_t)R * C), *ft = malloc(sizeof(float) * (size_t)R * C);
		for (int r = 0; r < R; r++)
			for (int c = 0; c < C; c++) {
				float v = (r * 7 + c) % 13 == 5 ? special[(r + c) % 8]
								: (float)(rbits() >> 8) * 1.1920929e-7f - 1.0f;
				f[(size_t)r * C + c] = ft[(size_t)c * R + r] = v;
			}
		size_t words = (size_t)(R + 31) / 32 * 32 * (size_t)P;
		uint32_t *p1 = pk_alloc(words * 4), *p2 = pk_alloc(words * 4);
		memset(p1, 0xab, words * 4), memset(p2, 0xab, words * 4);
		prepack_f32(p1, R, C, c0, nc, f + c0, (size_t)C, 1);
		prepack_f32(p2, R, C, c0, nc, ft + (size_t)c0 * R, 1, (size_t)R);
		int bad = 0;
		for (int r = 0; r < (R + 31) / 32 * 32; r++)
			for (int c = c0; c < c0 + nc; c += 2) {
				uint32_t want =
					r >= R ? 0
					       : (uint32_t)f32_to_bf16(f[(size_t)r * C + c]) |
							 (c + 1 < c0 + nc
								  ? (uint32_t)f32_to_bf16(f[(size_t)r * C + c + 1])
									    << 16
								  : 0);
				size_t at = ((size_t)(r / 32) * P + (size_t)c / 2) * 32 + (size_t)(r % 32);
				bad += (p1[at] != want) + (p2[at] != want);
			}
		EXPECTF(!bad, "%dx%d columns [%d, %d): %d words differ", R, C, c0, c0 + nc, bad);
		free(f), free(ft), free(p1), free(p2);
	}
}

static void test_prepack_f32_and_1t(void)
{
	int shapes[][2] = {{1, 2}, {33, 7}, {64, 192}, {128, 151}};
	for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
		int R = shapes[si][0], C = shapes[si][1];
		struct pbuf b;
		pbuf_make(&b, R, C);
		pbuf_pack(&b, NULL);
		float *f = malloc(sizeof(float) * (size_t)R * C), *ft = malloc(sizeof(float) * (size_t)R * C);
		for (int r = 0; r < R; r++)
			for (int c = 0; c < C; c++)
				f[(size_t)r * C + c] = ft[(size_t)c * R + r] = bf16_to_f32(b.data[(size_t)r * C + c]);
		size_t bytes = prepack_bytes(&b.w);
		uint32_t *p1 = pk_alloc(bytes), *p2 = pk_alloc(bytes), *p3 = pk_alloc(bytes);
		prepack_f32(p1, R, C, 0, C, f, (size_t)C, 1);
		int split = C > 2 ? (C / 2) & ~1 : C;
		prepack_f32(p2, R, C, 0, split, f, (size_t)C, 1);
		if (split < C)
			prepack_f32(p2, R, C, split, C - split, f + split, (size_t)C, 1);
		prepack_f32(p3, R, C, 0, C, ft, 1, (size_t)R);
		EXPECTF(!memcmp(p1, b.pk, bytes) && !memcmp(p2, b.pk, bytes) && !memcmp(p3, b.pk, bytes),
			"%dx%d: prepack_f32 differs from prepack_weights", R, C);
		if (ops_level_best() >= OPS_AVX512_BF16)
			for (int nc = C; nc >= 1; nc = nc > 1 ? nc / 2 : 0) { /* the full width, then prefixes */
				struct wmat w = {.dtype = DT_BF16,
						 .rows = R,
						 .cols = C,
						 .ld = C,
						 .packed = p1,
						 .packed_pairs = prepack_pairs(C)};
				struct wmat v = wmat_view(&w, 0, R, 0, nc);
				struct wmat ref_w = wmat_view(&b.w, 0, R, 0, nc);
				int n = 13;
				float *x = make_x(n, nc, nc + 3, 0.0f), *y = malloc(sizeof(float) * (size_t)n * R);
				double *ref = malloc(sizeof(double) * (size_t)n * R);
				uint16_t *xb = malloc(sizeof(uint16_t) * prepack_x_elems(n, nc));
				ref_gemm(&ref_w, x, nc + 3, n, ref, R);
				struct gemm_job j = {
					.w = &v, .x = x, .ldx = nc + 3, .y = y, .ldy = R, .n = n, .x_bf16 = 1};
				prepack_gemm_1t(&j, xb);
				double worst = 0, big = 1e-30; /* error relative to the largest output */
				for (int i = 0; i < n * R; i++) {
					double d = fabs(y[i] - ref[i]);
					worst = d > worst ? d : worst;
					big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
				}
				EXPECTF(worst / big < 2e-6, "1t %dx%d prefix %d: rel err %g", R, C, nc, worst / big);
				free(x), free(y), free(ref), free(xb);
			}
		free(f), free(ft), free(p1), free(p2), free(p3);
		pbuf_free(&b);
	}
}

/* fp8 e4m3 with 128x128 block scales: packed views (row offsets off the scale blocks, column
 * offsets on them) hold every byte and each row's scale per segment as prepack.h says, and
 * the GEMM on them matches the double reference (decoding is exact) at every token count,
 * each token's result independent of its batch. Column offsets off a scale block: not
 * packed. */
/* rows x cols random e4m3 bytes (no NaN) with 128 x 128 block scales 0.01, 0.02, ... (row-major
 * blocks); fp8_free releases both */
static struct wmat fp8_make(int rows, int cols)
{
	uint8_t *d = malloc((size_t)rows * (size_t)cols);
	for (size_t i = 0; i < (size_t)rows * (size_t)cols; i++) {
		uint8_t q = (uint8_t)(rbits() >> 5);
		d[i] = (q & 0x7f) == 0x7f ? 0x3c : q;
	}
	int sr = (rows + 127) / 128, sc = (cols + 127) / 128;
	float *scale = malloc(sizeof(float) * (size_t)sr * (size_t)sc);
	for (int i = 0; i < sr * sc; i++)
		scale[i] = 0.01f * (float)(i + 1);
	return (struct wmat){.dtype = DT_F8_E4M3,
			     .data = d,
			     .rows = rows,
			     .cols = cols,
			     .ld = cols,
			     .scale = scale,
			     .scale_ld = sc,
			     .blk_r = 128,
			     .blk_c = 128};
}

static void fp8_free(struct wmat *w)
{
	free((void *)w->data);
	free((void *)w->scale);
}

static void test_fp8(void)
{
	enum { R = 300, C = 520 }; /* 3 x 5 scale blocks, partial ones at both ends */
	struct wmat full = fp8_make(R, C);
	const float *scale = full.scale;
	int sc = full.scale_ld;
	struct {
		int r0, nr, c0, nc;
	} vs[] = {{0, R, 0, C}, {40, 200, 128, 392}, {97, 33, 256, 7}, {1, 31, 384, 136}};
	int ns[] = {1, 3, 8, 9, 17, 40, 100, 200, 600}; /* 200, 600: AMX groups of blocks, one and two token groups */
	for (size_t vi = 0; vi < sizeof vs / sizeof vs[0]; vi++) {
		struct wmat v = wmat_view(&full, vs[vi].r0, vs[vi].nr, vs[vi].c0, vs[vi].nc);
		/* at the AVX2 level in the AVX2 kernel's byte order (gemm_fp8_avx2.c) */
		bool avx2 = ops_level_best() == OPS_AVX2;
		EXPECT(prepack_wanted(&v, true) == (ops_level_best() >= OPS_AVX512_BF16 || avx2));
		uint32_t *pk = pk_alloc(prepack_bytes(&v));
		prepack_weights(&v, pk, vi & 1 ? g_pool : NULL);
		EXPECT(v.packed_kind ==
		       (ops_level_best() < OPS_AVX512_BF16 ? PREPACK_KIND_FP8_AVX2 : PREPACK_KIND_DP));
		/* layout */
		const uint8_t *b8 = (const uint8_t *)pk;
		int P = prepack_pairs(v.cols), S = (v.cols + 127) / 128, bad = 0;
		for (int r = 0; r < (v.rows + 31) / 32 * 32; r++) {
			for (int c = 0; c < 2 * P; c++) {
				uint8_t want = r < v.rows && c < v.cols ? ((const uint8_t *)v.data)[(size_t)r * C + c]
									: 0;
				/* rows 0-15 of the block at even bytes, 16-31 at odd ones (ops/prepack.h) */
				size_t q = 2 * (size_t)(r % 16) + (size_t)(c & 1), half = (size_t)(r % 32) / 16;
				size_t at = v.packed_kind == PREPACK_KIND_FP8_AVX2
						    ? 32 * half + 4 * (size_t)(r % 8) + 2 * (size_t)(r % 16 / 8) +
							      (size_t)(c & 1)
						    : 2 * q + half;
				bad += b8[((size_t)(r / 32) * P + (size_t)c / 2) * 64 + at] != want;
			}
			for (int g = 0; g < S; g++) {
				float want = r < v.rows ? scale[(size_t)((v.row0 + r) / 128) * sc +
								(size_t)((v.col0 + g * 128) / 128)]
							: 0.0f;
				bad += v.packed_scale[((size_t)(r / 32) * S + (size_t)g) * 32 + (size_t)(r % 32)] !=
				       want;
			}
		}
		EXPECTF(!bad, "fp8 view %zu: %d packed bytes or scales wrong", vi, bad);
		/* the GEMM, and batch invariance */
		int nmax = 600;
		float *x = make_x(nmax, v.cols, v.cols + 1, 0.0f), *y = malloc(sizeof(float) * (size_t)nmax * v.rows);
		float *y1 = malloc(sizeof(float) * (size_t)v.rows);
		double *ref = malloc(sizeof(double) * (size_t)nmax * v.rows);
		ref_gemm(&v, x, v.cols + 1, nmax, ref, v.rows);
		for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
			int n = ns[ni];
			struct gemm_job j = {
				.w = &v, .x = x, .ldx = v.cols + 1, .y = y, .ldy = v.rows, .n = n, .x_bf16 = 1};
			ops_gemm_multi(g_pool, 1, &j);
			double worst = 0, big = 1e-30;
			for (int i = 0; i < n * v.rows; i++) {
				worst = fabs(y[i] - ref[i]) > worst ? fabs(y[i] - ref[i]) : worst;
				big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
			}
			EXPECTF(worst / big < 2e-6, "fp8 view %zu n=%d: rel err %g", vi, n, worst / big);
			if (ops_level_best() >= OPS_AVX512_BF16 || avx2) { /* the last token alone, bit for bit */
				struct gemm_job j1 = {.w = &v,
						      .x = x + (size_t)(n - 1) * (v.cols + 1),
						      .ldx = v.cols + 1,
						      .y = y1,
						      .ldy = v.rows,
						      .n = 1,
						      .x_bf16 = 1};
				ops_gemm_multi(NULL, 1, &j1);
				EXPECTF(!memcmp(y1, y + (size_t)(n - 1) * v.rows, sizeof(float) * (size_t)v.rows),
					"fp8 view %zu: token %d alone differs from within %d", vi, n - 1, n);
				/* and adding to y (the AMX kernel sums past 16 tokens in a buffer) */
				for (int t = 0; t < n; t++)
					for (int r = 0; r < v.rows; r++)
						y[(size_t)t * v.rows + r] = 0.37f * (float)((t + 3 * r) % 11) - 1.5f;
				for (int r = 0; r < v.rows; r++)
					y1[r] = y[(size_t)(n - 1) * v.rows + r];
				j.accumulate = j1.accumulate = 1;
				ops_gemm_multi(g_pool, 1, &j);
				ops_gemm_multi(NULL, 1, &j1);
				EXPECTF(!memcmp(y1, y + (size_t)(n - 1) * v.rows, sizeof(float) * (size_t)v.rows),
					"fp8 view %zu, accumulate: token %d alone differs from within %d", vi, n - 1,
					n);
			}
		}
		/* the dp kernels with either step decoder: the same bits (on a CPU with VBMI the
		 * arithmetic one runs only here; Cooper Lake runs nothing else) */
		if (ops_level_best() >= OPS_AVX512_BF16 && ops_cpu_has_vbmi())
			for (int n = 1; n <= 200; n = n < 9 ? n + 4 : n * 3) {
				float *y0 = malloc(sizeof(float) * (size_t)n * v.rows);
				struct gemm_job j = {.w = &v,
						     .x = x,
						     .ldx = v.cols + 1,
						     .y = y0,
						     .ldy = v.rows,
						     .n = n,
						     .x_bf16 = 1};
				gemm_prepacked512_fp8_decoder(1);
				ops_gemm_multi_at(OPS_AVX512_BF16, g_pool, 1, &j);
				gemm_prepacked512_fp8_decoder(0);
				j.y = y;
				ops_gemm_multi_at(OPS_AVX512_BF16, g_pool, 1, &j);
				gemm_prepacked512_fp8_decoder(-1);
				EXPECTF(!memcmp(y0, y, sizeof(float) * (size_t)n * v.rows),
					"fp8 view %zu n=%d: the dp kernels' decoders differ", vi, n);
				free(y0);
			}
		free(x), free(y), free(y1), free(ref), free(pk);
	}
	struct wmat off = wmat_view(&full, 0, 64, 100, 200); /* columns start inside a scale block */
	EXPECT(!prepack_wanted(&off, true));
	EXPECT(!prepack_wanted(&off, false));
	fp8_free(&full);
}

/* whether a GEMM at lvl (capped to the CPU's) reads a bf16 weight's packed copy: the
 * dot-product kernels with bf16 x, the AVX2 one (fp32 FMAs) whatever x */
static bool packed_used(enum ops_level lvl, bool x_bf16)
{
	enum ops_level l = lvl < ops_level_best() ? lvl : ops_level_best();
	return (l >= OPS_AVX512_BF16 && x_bf16) || l == OPS_AVX2;
}

/* Which copy runs (packed_used), elsewhere `data`. A weight whose packed copy holds other
 * values than its data tells them apart. */
static void test_packed_copy_used(void)
{
	enum { R = 70, C = 99 };
	struct pbuf a, b;
	pbuf_make(&a, R, C);
	pbuf_make(&b, R, C);
	pbuf_pack(&a, g_pool);
	struct wmat mixed = b.w; /* data: b, packed: a */
	mixed.packed = a.pk;
	mixed.packed_pairs = a.w.packed_pairs;
	float *x = make_x(16, C, C, 0), *y = malloc(sizeof(float) * 16 * R);
	double *ra = malloc(sizeof(double) * 16 * R), *rb = malloc(sizeof(double) * 16 * R);
	ref_gemm(&a.w, x, C, 16, ra, R);
	ref_gemm(&b.w, x, C, 16, rb, R);
	int ns[] = {1, 3, 16};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		struct gemm_job j = {.w = &mixed, .x = x, .ldx = C, .y = y, .ldy = R, .n = ns[i], .x_bf16 = 1};
		for (int l = 0; l < N_LEVELS; l++) {
			bool used = packed_used(levels[l], true);
			run_check(levels[l], g_pool, j, used ? ra : rb, R,
				  used ? "packed copy used" : "packed copy ignored");
		}
		j.x_bf16 = 0; /* x not declared bf16: never the dot-product kernels' packed copy */
		bool used = packed_used(OPS_AVX512_BF16, false);
		run_check(OPS_AVX512_BF16, g_pool, j, used ? ra : rb, R,
			  used ? "x_bf16 = 0 at the AVX2 level: the packed copy still"
			       : "x_bf16 = 0 ignores the packed copy");
	}
	free(x);
	free(y);
	free(ra);
	free(rb);
	pbuf_free(&a);
	pbuf_free(&b);
}

/* x not bf16-exact with x_bf16 = 0 on a packed weight: the fp32 path's precision. */
static void test_fp32_x_on_packed(void)
{
	enum { R = 96, C = 513 };
	struct pbuf b;
	pbuf_make(&b, R, C);
	pbuf_pack(&b, g_pool);
	float *x = malloc(sizeof(float) * 64 * C), *y = malloc(sizeof(float) * 64 * R);
	for (int i = 0; i < 64 * C; i++)
		x[i] = frand(); /* 24 bits: rounding to bf16 would show as ~1e-3 */
	double *ref = malloc(sizeof(double) * 64 * R);
	ref_gemm(&b.w, x, C, 64, ref, R);
	int ns[] = {1, 5, 64};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
		for (int l = 0; l < N_LEVELS; l++) {
			struct gemm_job j = {.w = &b.w, .x = x, .ldx = C, .y = y, .ldy = R, .n = ns[i]};
			run_check(levels[l], g_pool, j, ref, R, "fp32 x");
		}
	free(x);
	free(y);
	free(ref);
	pbuf_free(&b);
}

/* ---- 3. views ---- */

static void test_views(void)
{
	enum { R = 100, C = 130 };
	struct pbuf b;
	pbuf_make(&b, R, C);
	pbuf_pack(&b, g_pool);
	size_t blk = (size_t)prepack_pairs(C) * PREPACK_ROWS; /* words per 32-row block */
	int ns[] = {1, 4, 13, 64};
	struct {
		int r0, nr, c0, nc;
		const uint32_t *want;
	} vs[] = {
		{32, 64, 0, C, b.pk + blk},     /* whole blocks */
		{32, 40, 0, C, b.pk + blk},     /* ends inside a block of real rows */
		{64, 36, 0, C, b.pk + 2 * blk}, /* runs into the zero-padded last block */
		{0, R, 0, C, b.pk},             /* the whole matrix */
		{16, 40, 0, C, NULL},           /* starts inside a block */
		{1, 99, 0, C, NULL},
		{0, 64, 0, C - 1, b.pk}, /* a column prefix: the blocks' first pairs */
		{32, 64, 0, 1, b.pk + blk},
		{32, 64, 1, C - 1, NULL}, /* columns cut at the front */
		{0, 64, 64, 2, NULL},
	};
	for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
		struct wmat v = wmat_view(&b.w, vs[i].r0, vs[i].nr, vs[i].c0, vs[i].nc);
		EXPECTF(v.packed == vs[i].want, "view (%d+%d, %d+%d): packed %p, expected %p", vs[i].r0, vs[i].nr,
			vs[i].c0, vs[i].nc, (const void *)v.packed, (const void *)vs[i].want);
		check_packed_gemm(&v, ns, (int)(sizeof ns / sizeof ns[0]), "view");
	}
	/* a view of a view keeps it too */
	struct wmat v1 = wmat_view(&b.w, 32, 68, 0, C), v2 = wmat_view(&v1, 32, 36, 0, C);
	EXPECT(v2.packed == b.pk + 2 * blk);
	check_packed_gemm(&v2, ns, (int)(sizeof ns / sizeof ns[0]), "view of view");
	/* an unpacked weight's views stay unpacked */
	struct wmat u = b.w;
	u.packed = NULL;
	struct wmat uv = wmat_view(&u, 32, 64, 0, C);
	EXPECT(uv.packed == NULL);
	pbuf_free(&b);
}

/* ---- 4. batch invariance ---- */

/* Token t's outputs are the same bits alone (n = 1) and inside any batch. */
static void check_batch_invariance(int R, int C, struct pool *p)
{
	struct pbuf b;
	pbuf_make(&b, R, C);
	pbuf_pack(&b, g_pool);
	enum { NMAX = 600 }; /* past 512 tokens the AMX blocked path takes two groups of token tiles */
	int ldx = C + 2, ldy = R + 1;
	float *x = make_x(NMAX, C, ldx, 7.0f);
	float *y1 = malloc(sizeof(float) * NMAX * (size_t)ldy), *yn = malloc(sizeof(float) * NMAX * (size_t)ldy);
	for (int t = 0; t < NMAX; t++) {
		struct gemm_job j = {.w = &b.w,
				     .x = x + (size_t)t * ldx,
				     .ldx = ldx,
				     .y = y1 + (size_t)t * ldy,
				     .ldy = ldy,
				     .n = 1,
				     .x_bf16 = 1};
		ops_gemm_multi(p, 1, &j);
	}
	int ns[] = {2, 3, 7, 13, 30, 64, 100, 129, 520, 600};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		struct gemm_job j = {.w = &b.w, .x = x, .ldx = ldx, .y = yn, .ldy = ldy, .n = ns[i], .x_bf16 = 1};
		ops_gemm_multi(p, 1, &j);
		int bad_t = -1;
		for (int t = 0; t < ns[i] && bad_t < 0; t++)
			if (memcmp(y1 + (size_t)t * ldy, yn + (size_t)t * ldy, sizeof(float) * (size_t)R))
				bad_t = t;
		if (bad_t >= 0) {
			int r = 0;
			while (y1[(size_t)bad_t * ldy + r] == yn[(size_t)bad_t * ldy + r])
				r++;
			harness_fail(__FILE__, __LINE__,
				     "%dx%d level %s pool %s: token %d row %d: n=1 gives %.9g, n=%d gives %.9g", R, C,
				     ops_level_name(ops_level_best()), p ? "2" : "none", bad_t, r,
				     y1[(size_t)bad_t * ldy + r], ns[i], yn[(size_t)bad_t * ldy + r]);
		}
	}
	free(x);
	free(y1);
	free(yn);
	pbuf_free(&b);
}

static void test_batch_invariance(void)
{
	if (ops_level_best() < OPS_AVX512_BF16) { /* the unpacked kernels switch tiles with n */
		printf("  no AVX512_BF16 on this CPU (level %s): skipped\n", ops_level_name(ops_level_best()));
		return;
	}
	check_batch_invariance(100, 513, g_pool);
	check_batch_invariance(577, 128, NULL);
	check_batch_invariance(64, 2048, g_pool);
	check_batch_invariance(300, 4200, g_pool); /* k in chunks past 32 tokens: C tiles parked */
}

/* The fp32-FMA kernel that replaces vdpbf16ps from 8 tokens on where vdpbf16ps is the slower
 * (ops_cpu_bf16_dp_slow), forced on and off whatever the CPU: against the reference, odd and
 * even columns, partial row blocks and tiles of every size; where the CPU measures it slow (and
 * runs it), test_batch_invariance holds it to vdpbf16ps's sums at one token, bit for bit. */
static void test_fma_pairs(void)
{
	if (ops_level_best() < OPS_AVX512_BF16) {
		printf("  no AVX512_BF16 on this CPU (level %s): skipped\n", ops_level_name(ops_level_best()));
		return;
	}
	int rows[] = {32, 100}, cols[] = {64, 127, 514, 2048};
	int ns[] = {7, 8, 12, 13, 20, 25, 64};
	for (int on = 1; on >= 0; on--) {
		ops_cpu_set_bf16_dp_slow(on);
		check_gemm_grid(rows, LEN(rows), cols, LEN(cols), ns, LEN(ns), g_pool,
				on ? "fp32 FMA pairs" : "vdpbf16ps");
	}
	ops_cpu_set_bf16_dp_slow(-1);
}

/* ---- 5. several jobs in one call ---- */

/* MoE style: gate and up (packed) share x, an unpacked weight and a packed view share
 * another x, an empty job between; one call equals one call per job, bit for bit. */
static void check_multi(struct pool *p)
{
	enum { C = 192, N = 9 };
	struct pbuf gate, up, dense, big, half;
	pbuf_make(&gate, 96, C);
	pbuf_make(&up, 96, C);
	pbuf_make(&dense, 70, C);
	pbuf_make(&big, 200, C);
	pbuf_make(&half, 64, C / 2 + 1);
	pbuf_pack(&gate, g_pool);
	pbuf_pack(&up, NULL);
	pbuf_pack(&big, g_pool);
	pbuf_pack(&half, g_pool);
	struct wmat bigv = wmat_view(&big.w, 64, 100, 0, C);
	EXPECT(bigv.packed != NULL);
	float *x1 = make_x(N, C, C, 0), *x2 = make_x(64, C, C + 4, 0);
	struct {
		const struct wmat *w;
		const float *x;
		int n, ldx, acc;
	} spec[] = {
		{&gate.w, x1, 3, C, 0}, /* gate and up on the same x */
		{&up.w, x1, 3, C, 0},
		{&up.w, x1, N, C, 1},       /* same x, more tokens */
		{&half.w, x1, N, C, 0},     /* same x and ldx, fewer columns */
		{&dense.w, x1, N, C, 1},    /* unpacked */
		{&gate.w, x2, 0, C + 4, 0}, /* empty */
		{&bigv, x2, 64, C + 4, 1},  /* packed view */
		{&up.w, x2 + 5 * (C + 4), 1, C + 4, 0},
		{&dense.w, x2, 17, C + 4, 0},
		{&gate.w, x2, 30, C, 0}, /* same x, other ldx */
	};
	enum { NJ = sizeof spec / sizeof spec[0] };
	struct gemm_job one[NJ], all[NJ];
	float *yo[NJ], *ya[NJ];
	for (int i = 0; i < NJ; i++) {
		size_t ny = (size_t)(spec[i].n > 0 ? spec[i].n : 1) * (size_t)(spec[i].w->rows + 2);
		yo[i] = malloc(sizeof(float) * ny);
		ya[i] = malloc(sizeof(float) * ny);
		for (size_t k = 0; k < ny; k++)
			yo[i][k] = ya[i][k] = frand();
		one[i] = (struct gemm_job){.w = spec[i].w,
					   .x = spec[i].x,
					   .ldx = spec[i].ldx,
					   .y = yo[i],
					   .ldy = spec[i].w->rows + 2,
					   .n = spec[i].n,
					   .accumulate = spec[i].acc,
					   .x_bf16 = 1};
		all[i] = one[i];
		all[i].y = ya[i];
	}
	for (int i = 0; i < NJ; i++)
		ops_gemm_multi(p, 1, &one[i]);
	ops_gemm_multi(p, NJ, all);
	for (int i = 0; i < NJ; i++) {
		size_t ny = (size_t)(spec[i].n > 0 ? spec[i].n : 1) * (size_t)(spec[i].w->rows + 2);
		EXPECTF(!memcmp(yo[i], ya[i], sizeof(float) * ny),
			"job %d (%dx%d packed %s n=%d) pool %s: one call "
			"differs from one call per job",
			i, spec[i].w->rows, C, spec[i].w->packed ? "yes" : "no", spec[i].n, p ? "2" : "none");
	}
	/* and the values are right */
	for (int i = 0; i < NJ; i++)
		if (spec[i].n > 0) {
			double *ref = malloc(sizeof(double) * (size_t)spec[i].n * (size_t)spec[i].w->rows);
			ref_gemm(spec[i].w, spec[i].x, spec[i].ldx, spec[i].n, ref, spec[i].w->rows);
			run_check(OPS_AVX512_BF16, p, one[i], ref, spec[i].w->rows, "multi");
			free(ref);
		}
	for (int i = 0; i < NJ; i++) {
		free(yo[i]);
		free(ya[i]);
	}
	free(x1);
	free(x2);
	pbuf_free(&gate);
	pbuf_free(&up);
	pbuf_free(&dense);
	pbuf_free(&big);
	pbuf_free(&half);
}

static void test_multi_jobs(void)
{
	check_multi(NULL);
	check_multi(g_pool);
}

/* More jobs than one parallel region takes (MoE: experts x gate/up/down), packed and not,
 * token counts 0-3 and a few big ones: equal to one call per job, bit for bit. */
static void test_many_jobs(void)
{
	enum { NJ = 1100, C = 64, NX = 40 };
	struct pbuf w[4];
	int rows[4] = {32, 64, 100, 50};
	for (int i = 0; i < 4; i++) {
		pbuf_make(&w[i], rows[i], C);
		if (i < 3)
			pbuf_pack(&w[i], g_pool);
	}
	float *x = make_x(NX, C, C, 0);
	struct gemm_job *one = malloc(sizeof *one * NJ), *all = malloc(sizeof *all * NJ);
	float *yo = malloc(sizeof(float) * NJ * NX * 100), *ya = malloc(sizeof(float) * NJ * NX * 100);
	for (int i = 0; i < NJ; i++) {
		int n = i % 97 == 5 ? NX : i % 4, t0 = n == NX ? 0 : (i / 4) % (NX - 3);
		one[i] = (struct gemm_job){.w = &w[i % 4].w,
					   .x = x + (size_t)t0 * C,
					   .ldx = C,
					   .y = yo + (size_t)i * NX * 100,
					   .ldy = 100,
					   .n = n,
					   .x_bf16 = 1};
		all[i] = one[i];
		all[i].y = ya + (size_t)i * NX * 100;
	}
	memset(yo, 0, sizeof(float) * NJ * NX * 100);
	memset(ya, 0, sizeof(float) * NJ * NX * 100);
	for (int i = 0; i < NJ; i++)
		ops_gemm_multi(g_pool, 1, &one[i]);
	ops_gemm_multi(g_pool, NJ, all);
	int bad = 0;
	for (int i = 0; i < NJ; i++)
		if (memcmp(one[i].y, all[i].y, sizeof(float) * NX * 100) && bad++ < 3)
			harness_fail(__FILE__, __LINE__, "job %d of %d (rows %d n %d): differs from its own call", i,
				     NJ, one[i].w->rows, one[i].n);
	double *ref = malloc(sizeof(double) * NX * 100);
	ref_gemm(&w[1].w, x, C, NX, ref, 100);
	run_check(OPS_AVX512_BF16, g_pool, one[5], ref, 100, "many jobs"); /* job 5: w[1], all tokens */
	free(ref);
	free(one);
	free(all);
	free(yo);
	free(ya);
	free(x);
	for (int i = 0; i < 4; i++)
		pbuf_free(&w[i]);
}

/* job.round_bf16 on weights w (RO_R x RO_C, packed where the level packs them): the bits of
 * the unrounded job followed by ops_round_bf16 over its outputs, at every level (fp32 and bf16
 * x), plain and accumulating, with and without the pool, and through prepack_gemm_1t (the
 * prepacked AVX-512 kernels round as they store the last chunk, the others after the panel) */
enum { RO_R = 100, RO_C = 513 };
static void round_output_on(const struct wmat *w, const char *what)
{
	enum { R = RO_R, C = RO_C, LDY = 103, NMAX = 600 };
	float *y0 = malloc(sizeof(float) * NMAX * LDY), *y1 = malloc(sizeof(float) * NMAX * LDY);
	uint16_t *xb = malloc(sizeof(uint16_t) * prepack_x_elems(NMAX, C));
	int ns[] = {1, 5, 33, 64, 100, 600}; /* 100, 600: the AMX blocked path, one and two token groups */
	for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
		int n = ns[ni];
		float *x = make_x(n, C, C, 0.0f);
		for (int lvl = OPS_PORTABLE; lvl <= OPS_N_LEVELS; lvl++) /* OPS_N_LEVELS: prepack_gemm_1t */
			for (int v = 0; v < 8; v++) {                    /* bit 0: accumulate, 1: pool, 2: bf16 x */
				if (lvl == OPS_N_LEVELS && (ops_level_best() < OPS_AVX512_BF16 || !(v & 4)))
					continue;
				for (int i = 0; i < n * LDY; i++) /* not bf16-exact: the rounding shows */
					y0[i] = y1[i] = frand() * 1.001f;
				struct gemm_job j = {.w = w,
						     .x = x,
						     .ldx = C,
						     .y = y0,
						     .ldy = LDY,
						     .n = n,
						     .accumulate = v & 1,
						     .x_bf16 = (v >> 2) & 1};
				for (int pass = 0; pass < 2; pass++) {
					if (lvl == OPS_N_LEVELS)
						prepack_gemm_1t(&j, xb);
					else
						ops_gemm_multi_at((enum ops_level)lvl, v & 2 ? g_pool : NULL, 1, &j);
					j.y = y1, j.round_bf16 = 1;
				}
				for (int t = 0; t < n; t++)
					ops_round_bf16(y0 + (size_t)t * LDY, R);
				EXPECTF(!memcmp(y0, y1, sizeof(float) * (size_t)n * LDY),
					"%s: rounded output differs: n=%d level %d acc %d pool %d bf16 x %d", what, n,
					lvl, v & 1, (v >> 1) & 1, (v >> 2) & 1);
			}
		free(x);
	}
	free(y0), free(y1), free(xb);
}

static void test_round_output(void)
{
	struct pbuf b;
	pbuf_make(&b, RO_R, RO_C);
	pbuf_pack(&b, g_pool);
	round_output_on(&b.w, "bf16");
	pbuf_free(&b);
	/* fp8 with 128 x 128 block scales: one token (two blocks at a time), a few (decoded in
	 * the kernel) and many (decoded once per chunk) take different kernels */
	struct wmat f = fp8_make(RO_R, RO_C);
	uint32_t *pk = NULL;
	if (prepack_wanted(&f, true)) {
		pk = pk_alloc(prepack_bytes(&f));
		prepack_weights(&f, pk, g_pool);
	}
	round_output_on(&f, "fp8");
	free(pk);
	fp8_free(&f);
}

int main(int argc, char **argv)
{
	struct err e;
	if (pool_new(2, &g_pool, &e))
		return 1;
	static const struct test_case cases[] = {
		T(test_layout),
		T(test_prepack_f32_and_1t),
		T(test_prepack_f32_words),
		T(test_fp8),
		T(test_layout_view),
		T(test_prepack_wanted),
		T(test_gemm_shapes),
		T(test_gemm_long_k),
		T(test_x_padding_not_read),
		T(test_packed_copy_used),
		T(test_fp32_x_on_packed),
		T(test_views),
		T(test_batch_invariance),
		T(test_fma_pairs),
		T(test_multi_jobs),
		T(test_many_jobs),
		T(test_round_output),
	};
	int rc = harness_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
	pool_free(g_pool);
	return rc;
}
