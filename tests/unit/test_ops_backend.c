/* The ops-backend table (ops/backend.h): the CPU implementation declares every operation, and
 * each one gives the bits of the kernels it wraps (the forward's goldens rest on that). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kv_cache.h"
#include "harness.h"
#include "ops/backend.h"
#include "ops/pool.h"
#include "ops/vec.h"

static struct pool *g_pool;
static uint64_t g_seed = 0x0b5eed;

static float *rand_buf(size_t n)
{
	float *x = malloc(sizeof(float) * n);
	for (size_t i = 0; i < n; i++)
		x[i] = test_frand(&g_seed) * 3.0f;
	return x;
}

static struct compute_ctx cpu_cx(void)
{
	struct err e;
	if (!g_pool)
		CHECK(pool_new(2, &g_pool, &e) == 0);
	return (struct compute_ctx){.ops = &ops_backend_cpu, .pool = g_pool};
}

static void test_table_complete(void)
{
	const struct ops_backend *o = &ops_backend_cpu;
	EXPECT(o->name && strcmp(o->name, "cpu") == 0);
	EXPECT(o->gemm && o->rmsnorm && o->mla_rope && o->swiglu && o->round_bf16 && o->add);
	EXPECT(o->moe_route && o->moe_gather && o->moe_combine && o->kv_write && o->embed && o->copy_rows && o->zero);
}

/* the elementwise ones over the pool (sizes past one chunk) against the serial kernels */
static void test_elementwise_bits(void)
{
	struct compute_ctx cx = cpu_cx();
	for (int round = 0; round < 2; round++) {
		size_t n = 3 * 8192 + 77;
		float *g = rand_buf(n), *u = rand_buf(n), *a = malloc(sizeof(float) * n),
		      *b = malloc(sizeof(float) * n);
		ops_silu_mul(a, g, u, (int)n);
		if (round)
			ops_round_bf16(a, (int64_t)n);
		cx.ops->swiglu(&cx, b, g, u, n, round);
		EXPECT(memcmp(a, b, sizeof(float) * n) == 0);
		/* h += y, rounded */
		memcpy(b, a, sizeof(float) * n);
		for (size_t i = 0; i < n; i++)
			a[i] += g[i];
		if (round)
			ops_round_bf16(a, (int64_t)n);
		cx.ops->add(&cx, b, g, n, round);
		EXPECT(memcmp(a, b, sizeof(float) * n) == 0);
		/* rmsnorm of 37 rows of 300 in place, then rounded */
		int rows = 37, d = 300;
		float *w = rand_buf((size_t)d);
		memcpy(b, g, sizeof(float) * (size_t)rows * d);
		ops_rmsnorm(a, d, g, d, w, rows, d, 1e-6f);
		if (round)
			ops_round_bf16(a, (int64_t)rows * d);
		cx.ops->rmsnorm(&cx, b, d, b, d, w, rows, d, 1e-6f, round);
		EXPECT(memcmp(a, b, sizeof(float) * (size_t)rows * d) == 0);
		free(g), free(u), free(a), free(b), free(w);
	}
}

/* gather by slot, combine back with the weights: h += Σ tw·dd, as forward.c's MoE expects */
static void test_moe_gather_combine(void)
{
	struct compute_ctx cx = cpu_cx();
	int n = 9, k = 3, d = 40, nk = n * k;
	int slot_of[27];
	for (int j = 0; j < nk; j++) /* a permutation of the slots */
		slot_of[j] = (j * 7 + 4) % nk;
	float *x = rand_buf((size_t)n * d), *xg = malloc(sizeof(float) * nk * d), *tw = rand_buf((size_t)nk);
	cx.ops->moe_gather(&cx, xg, x, slot_of, n, k, d);
	for (int t = 0; t < n; t++)
		for (int s = 0; s < k; s++)
			EXPECT(memcmp(xg + (size_t)slot_of[t * k + s] * d, x + (size_t)t * d, sizeof(float) * d) == 0);
	float *h = rand_buf((size_t)n * d), *h0 = malloc(sizeof(float) * n * d), *r = malloc(sizeof(float) * n * d);
	memcpy(h0, h, sizeof(float) * n * d);
	cx.ops->moe_combine(&cx, r, h, xg, tw, slot_of, n, k, d, false);
	for (int t = 0; t < n; t++)
		for (int i = 0; i < d; i++) {
			float want = 0;
			for (int s = 0; s < k; s++) {
				int j = slot_of[t * k + s];
				want += tw[j] * xg[(size_t)j * d + i];
			}
			EXPECT_NEAR(r[(size_t)t * d + i], want, 1e-5);
			EXPECT(h[(size_t)t * d + i] == h0[(size_t)t * d + i] + r[(size_t)t * d + i]);
		}
	free(x), free(xg), free(tw), free(h), free(h0), free(r);
}

/* the KV write through the table: the rows kv_cache_write gives, -1 slots skipped */
static void test_kv_write(void)
{
	struct compute_ctx cx = cpu_cx();
	enum dtype dts[2] = {DT_F32, DT_BF16};
	for (int di = 0; di < 2; di++) {
		struct kv_cache a, b;
		struct err e;
		CHECK(kv_cache_init(&a, 2, 4, 4, 24, 8, dts[di], &e) == 0);
		CHECK(kv_cache_init(&b, 2, 4, 4, 24, 8, dts[di], &e) == 0);
		int n = 5, row = 32;
		int64_t slots[5] = {3, -1, 9, 15, 4};
		float *rows = rand_buf((size_t)n * row);
		kv_cache_write_strided(&a, 1, slots, rows, row, rows + 24, row, n);
		cx.ops->kv_write(&cx, kv_cache_layer_rows(&b, 1), b.dtype, row, 24, slots, n, rows, row, rows + 24,
				 row);
		size_t bytes = (size_t)2 * 16 * row * dtype_size(dts[di]);
		EXPECT(memcmp(a.data, b.data, bytes) == 0);
		float buf[32];
		const float *got = kv_cache_row_f32(&b, 1, 9, buf);
		EXPECT_NEAR(got[0], rows[2 * row], dts[di] == DT_F32 ? 0 : 0.02);
		free(rows);
		kv_cache_fini(&a);
		kv_cache_fini(&b);
	}
}

static void test_copy_rows(void)
{
	struct compute_ctx cx = cpu_cx();
	float *src = rand_buf(6 * 10), dst[4 * 5];
	int32_t rows[4] = {5, 0, 3, 3};
	cx.ops->copy_rows(&cx, dst, 5, src + 2, 10, rows, 4, 5);
	for (int i = 0; i < 4; i++)
		EXPECT(memcmp(dst + i * 5, src + rows[i] * 10 + 2, sizeof(float) * 5) == 0);
	cx.ops->copy_rows(&cx, dst, 5, src, 10, NULL, 4, 5);
	EXPECT(memcmp(dst + 3 * 5, src + 30, sizeof(float) * 5) == 0);
	cx.ops->zero(&cx, dst, 20);
	for (int i = 0; i < 20; i++)
		EXPECT(dst[i] == 0);
	free(src);
}

TESTS(T(test_table_complete), T(test_elementwise_bits), T(test_moe_gather_combine), T(test_kv_write),
      T(test_copy_rows))
