/* DeepSeek-V4's indexer scan (docs/PERFORMANCE.md, "DeepSeek-V4"): the CPU time a key of
 * v4k_index_scores on one thread at each CPU level this machine has, and of the step's
 * v4_index_select_fast (scores over the pool, then the top-k), on packed fp4 keys (as the paged
 * pool stores them: 16 a block, the blocks scattered; all distinct, 4.4 MB at 65536) and an
 * fp4-rounded query, V4-Flash's shape by default.
 *
 *   v4_indexer [--keys N] [--heads 64] [--dim 128] [--topk 512] [--reps 5] [--threads 2]
 *
 * Prints per level the best of reps of ns a key (CPU time of the process).
 */
#include <stdint.h>

#include "base/err.h"
#include "model_v4/v4_indexer.h"
#include "model_v4/v4_kernels.h"
#include "model_v4/v4_pack.h"
#include "model_v4/v4_quant.h"
#include "ops/pool.h"

#include "bench_util.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)(rng >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static long arg_long(int argc, char **argv, const char *name, long dflt)
{
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], name))
			return strtol(argv[i + 1], NULL, 10);
	return dflt;
}

int main(int argc, char **argv)
{
	long N = arg_long(argc, argv, "--keys", 65536);
	int H = (int)arg_long(argc, argv, "--heads", 64), di = (int)arg_long(argc, argv, "--dim", 128);
	int topk = (int)arg_long(argc, argv, "--topk", 512), reps = (int)arg_long(argc, argv, "--reps", 5);
	int threads = (int)arg_long(argc, argv, "--threads", 2);
	if (N < 1 || N > (1L << 24) || H < 1 || H > 512 || di < 32 || di % 32 || di > V4K_MAX_DI || topk < 1 ||
	    topk > 2048 || reps < 1 || threads < 1) {
		fprintf(stderr, "v4_indexer: bad arguments\n");
		return 2;
	}
	size_t pw = v4_pack_ix_floats(di);
	float *q = malloc(sizeof(float) * (size_t)H * (size_t)di), *w = malloc(sizeof(float) * (size_t)H);
	float *key = malloc(sizeof(float) * (size_t)di),
	      *packed = malloc(sizeof(float) * pw * (size_t)(N + 15) / 16 * 16);
	const float **rows = malloc(sizeof *rows * (size_t)N);
	double *s = malloc(sizeof(double) * (size_t)N);
	int32_t *sel = malloc(sizeof(int32_t) * (size_t)topk);
	if (!q || !w || !key || !packed || !rows || !s || !sel) {
		fprintf(stderr, "v4_indexer: out of memory\n");
		return 1;
	}
	for (int i = 0; i < H * di; i++)
		q[i] = 2 * frand();
	for (int h = 0; h < H; h++)
		w[h] = frand();
	v4_fp4_sim(q, H * di, 32);
	for (long r = 0; r < (N + 15) / 16 * 16; r++) {
		for (int i = 0; i < di; i++)
			key[i] = 1.5f * frand();
		v4_fp4_sim(key, di, 32);
		v4_pack_ix(key, di, packed + (size_t)r * pw);
	}
	/* as the paged pool holds them: 16 keys of a block in a row, the blocks in no order */
	long nb = (N + 15) / 16, *perm = malloc(sizeof *perm * (size_t)nb);
	if (!perm) {
		fprintf(stderr, "v4_indexer: out of memory\n");
		return 1;
	}
	for (long b = 0; b < nb; b++)
		perm[b] = b;
	for (long b = nb - 1; b > 0; b--) {
		long j = (long)((frand() + 1) / 2 * (float)(b + 1)) % (b + 1), t = perm[b];
		perm[b] = perm[j];
		perm[j] = t;
	}
	for (long e = 0; e < N; e++) {
		long r = perm[e / 16] * 16 + e % 16;
		rows[e] = packed + (size_t)r * pw;
	}
	free(perm);
	struct v4k_keys kk = {rows, 1};
	printf("indexer scan: %ld keys, %d heads x %d dims, packed fp4\n", N, H, di);
	for (int lv = 0; lv <= (int)ops_level_best(); lv++) {
		double best = 1e30;
		for (int r = 0; r < reps; r++) {
			double t0 = proc_cpu_s();
			v4k_index_scores((enum ops_level)lv, H, di, q, w, &kk, 0, N, s);
			double t = proc_cpu_s() - t0;
			best = t < best ? t : best;
		}
		printf("  scores, one thread, %-11s %8.1f ns a key\n", ops_level_name((enum ops_level)lv),
		       best / N * 1e9);
	}
	struct pool *pool;
	struct err e = {{0}};
	if (pool_new(threads, &pool, &e)) {
		fprintf(stderr, "v4_indexer: %s\n", e.msg);
		return 1;
	}
	double best = 1e30, wall = 1e30;
	for (int r = 0; r < reps; r++) {
		double t0 = proc_cpu_s(), w0 = mono_now_s();
		v4_index_select_fast(pool, H, di, q, w, rows, 1, (int)N, topk, s, sel);
		double t = proc_cpu_s() - t0, tw = mono_now_s() - w0;
		best = t < best ? t : best;
		wall = tw < wall ? tw : wall;
	}
	printf("  select top-%d, %d threads, %s: %.1f ns of CPU a key (%.1f ns wall)\n", topk, threads,
	       ops_level_name(ops_level_best()), best / N * 1e9, wall / N * 1e9);
	pool_free(pool);
	free(q), free(w), free(key), free(packed), free(rows), free(s), free(sel);
	return 0;
}
