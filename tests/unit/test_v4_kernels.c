/* model_v4/v4_kernels (float32) against the double-precision references v4_attn_one and
 * v4_index_score / v4_index_select, at every CPU level this machine has, on random inputs:
 *   attention (in double, as the reference but for the dots' order): o and lse within 1e-6;
 *   indexer scores: within n u sum_h |w_h| sum_i |q_hi k_i| (n = di, u = 2^-24: the float32
 *     rounding bound of a di-term sum), the keys packed as the pool stores them and as floats,
 *     also with block scales far apart; at amx the tiles' path taken (bf16 queries only);
 *   selection: the reference's wherever the k-th and (k+1)-th scores are further apart than
 *     twice that bound;
 * and the pool's split (heads, key ranges) bit for bit the one-thread result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model_v4/v4_attn.h"
#include "model_v4/v4_indexer.h"
#include "model_v4/v4_ix_amx.h"
#include "model_v4/v4_ix_int.h"
#include "model_v4/v4_kernels.h"
#include "model_v4/v4_pack.h"
#include "model_v4/v4_quant.h"
#include "ops/pool.h"

static struct pool *g_pool;

static float *rand_vec(uint64_t *s, size_t n, float amp)
{
	float *v = malloc(n * sizeof *v);
	CHECK(v);
	for (size_t i = 0; i < n; i++)
		v[i] = amp * test_frand(s);
	return v;
}

static void attn_case(int H, int hd, int n_kv, int with_sink, uint64_t *s)
{
	float *q = rand_vec(s, (size_t)H * (size_t)hd, 1.0f), *kv = rand_vec(s, (size_t)(n_kv + 1) * (size_t)hd, 3.0f);
	float *sink = rand_vec(s, (size_t)H, 4.0f);
	const float **rows = malloc((size_t)(n_kv + 1) * sizeof *rows);
	size_t no = (size_t)H * (size_t)hd;
	float *ref = malloc(no * sizeof *ref), *o = malloc(no * sizeof *o), *op = malloc(no * sizeof *op);
	float *lr = malloc((size_t)H * sizeof *lr), *l = malloc((size_t)H * sizeof *l),
	      *lp = malloc((size_t)H * sizeof *lp);
	double *scratch = malloc(v4k_attn_scratch(H, hd, n_kv) * sizeof *scratch);
	CHECK(rows && ref && o && op && lr && l && lp && scratch);
	for (int j = 0; j < n_kv; j++) /* scattered rows, as the window and entries are */
		rows[j] = kv + (size_t)((j * 7) % (n_kv + 1)) * (size_t)hd;
	float scale = 1.0f / sqrtf((float)hd);
	const float *sk = with_sink ? sink : NULL;
	v4_attn_one(H, hd, scale, q, rows, n_kv, sk, ref, lr);
	for (int lv = 0; lv <= (int)ops_level_best(); lv++) {
		v4k_attn_heads((enum ops_level)lv, 0, H, hd, scale, q, rows, n_kv, sk, o, l, scratch);
		double d = 0, dl = 0;
		for (size_t i = 0; i < no; i++)
			d = fmax(d, fabs((double)o[i] - ref[i]));
		for (int h = 0; h < H; h++)
			dl = fmax(dl, isinf(lr[h]) ? (l[h] == lr[h] ? 0 : INFINITY) : fabs((double)l[h] - lr[h]));
		printf("# attn %s H %d hd %d keys %d sink %d: o %.3g lse %.3g\n", ops_level_name((enum ops_level)lv),
		       H, hd, n_kv, with_sink, d, dl);
		EXPECTF(d < 1e-6 && dl < 1e-6, "%s H %d hd %d keys %d: o %g lse %g",
			ops_level_name((enum ops_level)lv), H, hd, n_kv, d, dl);
	}
	double *fs = malloc(v4_attn_fast_scratch(H, hd, n_kv) * sizeof *fs);
	CHECK(fs);
	v4_attn_fast(g_pool, H, hd, scale, q, rows, n_kv, sk, op, lp, fs);
	free(fs);
	EXPECTF(!memcmp(o, op, no * sizeof *o) && !memcmp(l, lp, (size_t)H * sizeof *l),
		"the pool's split differs (H %d keys %d)", H, n_kv);
	free(q), free(kv), free(sink), free(rows), free(ref), free(o), free(op), free(lr), free(l), free(lp),
		free(scratch);
}

static void test_attn(void)
{
	uint64_t s = 42;
	attn_case(64, 512, 640, 1, &s); /* V4-Flash: window 128 + top-512 */
	attn_case(8, 512, 3000, 1, &s); /* more keys than the stack scratch */
	attn_case(5, 40, 37, 0, &s);    /* dims not a multiple of 16 */
	attn_case(3, 64, 1, 1, &s);
	attn_case(4, 32, 0, 1, &s); /* the sink alone */
	attn_case(4, 32, 0, 0, &s); /* nothing */
}

static const float *ptr_key(void *ctx, long e, float *buf) { return ((const float *const *)ctx)[e]; }

static int descending(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

/* x [n] in blocks of 32, each times 2^(-spread .. spread): block sums of different scales */
static void spread_blocks(float *x, int n, int spread, uint64_t *s)
{
	for (int b = 0; spread && b < n; b += 32) {
		float f = ldexpf(1.0f, (int)(test_rand(s) % (uint32_t)(2 * spread + 1)) - spread);
		for (int i = b; i < b + 32 && i < n; i++)
			x[i] *= f;
	}
}

static void ix_case(int H, int di, int visible, int topk, int spread, uint64_t *s)
{
	float *q = rand_vec(s, (size_t)H * (size_t)di, 2.0f), *w = rand_vec(s, (size_t)H, 1.0f);
	float *keys = rand_vec(s, (size_t)visible * (size_t)di, 1.5f);
	spread_blocks(q, H * di, spread, s);
	spread_blocks(keys, visible * di, spread, s);
	v4_fp4_sim(q, H * di, 32); /* as v4_index_query leaves it */
	v4_fp4_sim(keys, visible * di, 32);
	size_t pw = v4_pack_ix_floats(di);
	float *packed = malloc((size_t)visible * pw * sizeof *packed);
	const float **rows = malloc((size_t)visible * sizeof *rows), **prows = malloc((size_t)visible * sizeof *prows);
	double *ref = malloc((size_t)visible * sizeof *ref), *bound = malloc((size_t)visible * sizeof *bound);
	double *sc = malloc((size_t)visible * sizeof *sc), *sp = malloc((size_t)visible * sizeof *sp);
	int32_t *want = malloc((size_t)topk * sizeof *want), *got = malloc((size_t)topk * sizeof *got);
	int32_t *gotp = malloc((size_t)topk * sizeof *gotp);
	CHECK(packed && rows && prows && ref && bound && sc && sp && want && got && gotp);
	double worst_bound = 0;
	for (int e = 0; e < visible; e++) {
		const float *k = keys + (size_t)e * (size_t)di;
		rows[e] = k;
		v4_pack_ix(k, di, packed + (size_t)e * pw);
		prows[e] = packed + (size_t)e * pw;
		ref[e] = v4_index_score(H, di, q, w, k);
		double b = 0;
		for (int h = 0; h < H; h++) {
			double a = 0;
			for (int i = 0; i < di; i++)
				a += fabs((double)q[(size_t)h * (size_t)di + (size_t)i] * k[i]);
			b += fabs((double)w[h]) * a;
		}
		bound[e] = di * 0x1p-24 * b;
		worst_bound = fmax(worst_bound, bound[e]);
	}
	for (int lv = 0; lv <= (int)ops_level_best(); lv++)
		for (int packed_keys = 0; packed_keys < 2; packed_keys++) {
			struct v4k_keys kk = {packed_keys ? prows : rows, packed_keys};
			v4k_index_scores((enum ops_level)lv, H, di, q, w, &kk, 0, visible, sc);
			double d = 0;
			int over = 0;
			for (int e = 0; e < visible; e++) {
				d = fmax(d, fabs(sc[e] - ref[e]));
				over += fabs(sc[e] - ref[e]) > bound[e];
			}
			printf("# indexer %s %s H %d di %d keys %d: max |diff| %.3g (bound up to %.3g)\n",
			       ops_level_name((enum ops_level)lv), packed_keys ? "packed" : "floats", H, di, visible,
			       d, worst_bound);
			EXPECTF(over == 0, "%s: %d scores past the bound", ops_level_name((enum ops_level)lv), over);
		}
	if (ops_level_best() >= OPS_AMX) { /* the tiles run (not the fallback), and refuse a non-bf16 q */
		struct v4k_keys kk = {prows, 1};
		EXPECT_EQ_INT(v4k_ix_amx_scores(H, di, q, w, &kk, 0, visible, sc), 0);
		float q0 = q[0];
		q[0] = 1.0f + 0x1p-20f;
		EXPECT_EQ_INT(v4k_ix_amx_scores(H, di, q, w, &kk, 0, visible, sc), -1);
		q[0] = q0;
	}
	/* the selection, the pool's against one thread's and against the reference */
	int ng = v4_index_select_fast(NULL, H, di, q, w, prows, 1, visible, topk, sc, got);
	int np = v4_index_select_fast(g_pool, H, di, q, w, prows, 1, visible, topk, sp, gotp);
	EXPECTF(ng == np && !memcmp(got, gotp, (size_t)ng * sizeof *got) &&
			!memcmp(sc, sp, sizeof(double) * (size_t)visible),
		"the pool's split differs (keys %d)", visible);
	int nr = v4_index_select(H, di, q, w, ptr_key, rows, visible, topk, want);
	EXPECT_EQ_INT(ng, nr);
	double *sorted = malloc((size_t)visible * sizeof *sorted);
	CHECK(sorted);
	memcpy(sorted, ref, (size_t)visible * sizeof *sorted);
	qsort(sorted, (size_t)visible, sizeof *sorted, descending);
	double gap = topk < visible ? sorted[topk - 1] - sorted[topk] : INFINITY;
	printf("# indexer top-%d of %d: gap at the k-th score %.3g, selections %s\n", topk, visible, gap,
	       !memcmp(got, want, (size_t)nr * sizeof *got) ? "equal" : "differ");
	EXPECTF(gap <= 2 * worst_bound || !memcmp(got, want, (size_t)nr * sizeof *got),
		"top-%d of %d differs from the reference with a gap of %g", topk, visible, gap);
	free(sorted);
	free(q), free(w), free(keys), free(packed), free(rows), free(prows), free(ref), free(bound), free(sc),
		free(sp), free(want), free(got), free(gotp);
}

static void test_indexer(void)
{
	uint64_t s = 7;
	ix_case(64, 128, 1000, 512, 0, &s); /* V4-Flash's indexer: 64 heads x 128, top-512 */
	ix_case(5, 64, 37, 8, 0, &s);       /* heads not a multiple of 8, a partial tile */
	ix_case(3, 32, 16, 4, 0, &s);
	ix_case(80, 96, 300, 64, 12, &s); /* two passes of head groups (amx), block scales 2^-12 .. 2^12 apart */
}

/* The scores' float32 arithmetic spelled out: per head each 32-dim block's exact sum (in double:
 * fp4 products and their sums are exact there), the blocks added in order in float32, relu,
 * w_h x that summed over the heads in order in double. */
static void ix_blockwise_ref(int H, int di, const float *q, const float *w, const float *k, double *out)
{
	double sum = 0;
	for (int h = 0; h < H; h++) {
		float a = 0;
		for (int b = 0; b < di; b += 32) {
			double p = 0;
			for (int i = b; i < b + 32; i++)
				p += (double)q[(size_t)h * (size_t)di + (size_t)i] * k[i];
			a = a + (float)p;
		}
		sum += (double)w[h] * (double)(a > 0 ? a : 0);
	}
	*out = sum;
}

/* Fp4 keys and query (block scales 2^-spread .. 2^spread apart on each side): every level's
 * scores, packed keys and float rows, and the integer path called directly, are the blockwise
 * float32 reference's bit for bit (amx's tiles on packed keys only with one scale throughout); the integer path refuses a query that is not fp4, and hands
 * the float kernel the tile of a key whose scales leave float32's normal range. */
static void ix_exact_case(int H, int di, int n, int spread, uint64_t *s)
{
	float *q = rand_vec(s, (size_t)H * (size_t)di, 2.0f), *w = rand_vec(s, (size_t)H, 1.0f);
	float *keys = rand_vec(s, (size_t)n * (size_t)di, 1.5f);
	spread_blocks(q, H * di, spread, s);
	spread_blocks(keys, n * di, spread, s);
	v4_fp4_sim(q, H * di, 32);
	size_t pw = v4_pack_ix_floats(di);
	float *packed = malloc((size_t)n * pw * sizeof *packed);
	const float **rows = malloc((size_t)n * sizeof *rows), **prows = malloc((size_t)n * sizeof *prows);
	double *ref = malloc((size_t)n * sizeof *ref), *sc = malloc((size_t)n * sizeof *sc);
	CHECK(packed && rows && prows && ref && sc);
	for (int e = 0; e < n; e++) {
		float *k = keys + (size_t)e * (size_t)di;
		v4_pack_ix(k, di, packed + (size_t)e * pw);
		v4_unpack_ix(packed + (size_t)e * pw, di, k); /* the values the packed key stands for */
		rows[e] = k;
		prows[e] = packed + (size_t)e * pw;
		ix_blockwise_ref(H, di, q, w, k, &ref[e]);
	}
	for (int lv = 0; lv <= (int)ops_level_best(); lv++)
		for (int packed_keys = 0; packed_keys < 2; packed_keys++) {
			if (lv >= OPS_AMX && packed_keys && spread) /* tdpbf16ps rounds within a block's */
				continue;                           /* pairs: test_indexer's bound */
			struct v4k_keys kk = {packed_keys ? prows : rows, packed_keys};
			memset(sc, 0, (size_t)n * sizeof *sc);
			v4k_index_scores((enum ops_level)lv, H, di, q, w, &kk, 0, n, sc);
			int diff = 0;
			for (int e = 0; e < n; e++)
				diff += memcmp(&sc[e], &ref[e], sizeof sc[e]) != 0;
			EXPECTF(diff == 0,
				"%s %s H %d di %d spread %d: %d of %d scores not the blockwise float32 ones",
				ops_level_name((enum ops_level)lv), packed_keys ? "packed" : "floats", H, di, spread,
				diff, n);
		}
	struct v4k_keys kk = {prows, 1};
	for (int avx512 = 0; avx512 < 2 && (int)ops_level_best() >= OPS_AVX2 + avx512; avx512++) {
		memset(sc, 0, (size_t)n * sizeof *sc);
		EXPECT_EQ_INT((int)v4k_ix_int_scores(avx512, H, di, q, w, &kk, 0, n, sc), n);
		EXPECTF(!memcmp(sc, ref, (size_t)n * sizeof *sc), "integer path (avx512 %d) spread %d differs", avx512,
			spread);
		float q0 = q[0];
		q[0] = 1.0f + 0x1p-20f; /* not a 4-bit mantissa */
		EXPECT_EQ_INT((int)v4k_ix_int_scores(avx512, H, di, q, w, &kk, 0, n, sc), -1);
		q[0] = q0;
		if (n >
		    20) { /* key 20's first block scale 2^-127: its tile (keys 16 .. / 0 .. at avx512) is the floats' */
			uint8_t *exps = (uint8_t *)prows[20] + di / 2, e0 = exps[0];
			exps[0] = 0;
			EXPECT_EQ_INT((int)v4k_ix_int_scores(avx512, H, di, q, w, &kk, 0, n, sc), avx512 ? 0 : 16);
			EXPECT_EQ_INT((int)v4k_ix_int_scores(avx512, H, di, q, w, &kk, 32, n, sc), n - 32);
			exps[0] = e0;
		}
	}
	free(q), free(w), free(keys), free(packed), free(rows), free(prows), free(ref), free(sc);
}

static void test_indexer_exact(void)
{
	uint64_t s = 11;
	ix_exact_case(64, 128, 200, 0, &s);
	ix_exact_case(64, 128, 200, 12, &s); /* block scales 2^-12 .. 2^12 apart, each side */
	ix_exact_case(7, 96, 45, 40, &s);    /* 2^-40 .. 2^40; heads not a multiple of 4; a partial tile */
	ix_exact_case(3, 32, 5, 20, &s);
}

static void setup(void)
{
	struct err e = {{0}};
	CHECK(pool_new(2, &g_pool, &e) == 0);
}

static void teardown(void) { pool_free(g_pool); }

TESTS(T(setup), T(test_attn), T(test_indexer), T(test_indexer_exact), T(teardown))
