/* Decode attention over an fp8 latent cache (--kv-cache-dtype fp8) against a bf16 one: one
 * thread runs mqa_run_at on every sequence of a batch (one query token, all heads in a tile) over
 * two caches of the same random rows, bf16 and fp8, in alternating order, and prints the median
 * time per sequence and the ratio bf16 / fp8 (> 1: fp8 faster). --f32 runs the float32 model's
 * path (fp32 q and scores); by default q and P·V are bf16, the bf16 model's path. Times are the
 * process's CPU time (it runs one thread), not wall time. The caches hold
 * seqs x ctx x 1152 (bf16) and x 596 (fp8; 656 with --sparse) bytes: past the last-level cache
 * the keys come from DRAM, as a model's (61 layers x 32K x 1152 B = 2.3 GB a sequence) do. A
 * 480 MB L3 takes --seqs 32 at --ctx 32768 (1.2 GB / 0.61 GB a pass) for that.
 *
 *   kv_fp8_decode [--heads 16,128] [--ctx 8192,32768] [--seqs 4] [--reps 7] [--level amx|...]
 *                 [--f32] [--sparse] [--only bf16|fp8]
 * --only times one cache (for a profiler); the other column and the ratio are then 0.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/kernels/mqa.h"
#include "attn/kv_cache.h"
#include "base/dtype.h"
#include "base/err.h"
#include "base/mono.h"
#include "ops/cpu.h"

#include "bench_util.h"

#define MAXV 8
#define MAXREPS 64

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)(uint32_t)(rng >> 32) / 4294967296.0f * 2.0f - 1.0f;
}

struct caches {
	struct kv_cache kv[2]; /* bf16, fp8 */
	int32_t *bt;           /* [seqs][mb] */
	int mb, seqs, ctx;
};

static int caches_make(struct caches *c, int seqs, int ctx, bool sparse, struct err *e)
{
	int bs = 64;
	c->seqs = seqs, c->ctx = ctx, c->mb = (ctx + bs - 1) / bs;
	int nb = seqs * c->mb;
	/* a sparse model's cache carries its indexer keys (index_dim 128): fp8_ds_mla rows */
	if (kv_cache_init_indexed(&c->kv[0], 1, nb + 1, bs, 512, 64, DT_BF16, sparse ? 128 : 0, e) ||
	    kv_cache_init_indexed(&c->kv[1], 1, nb + 1, bs, 512, 64, DT_F8_E4M3, sparse ? 128 : 0, e))
		return -1;
	c->bt = malloc(sizeof(int32_t) * (size_t)nb);
	for (int k = 0; k < nb; k++) /* pages in a random order, as a long-running server's */
		c->bt[k] = k + 1;
	for (int k = nb - 1; k > 0; k--) {
		int j = (int)((frand() + 1.0f) * 0.5f * (float)(k + 1)) % (k + 1), t = c->bt[k];
		c->bt[k] = c->bt[j], c->bt[j] = t;
	}
	float r[576];
	for (int s = 0; s < seqs; s++)
		for (int p = 0; p < ctx; p++) {
			for (int d = 0; d < 576; d++)
				r[d] = frand() * (d < 512 ? 1.0f : 4.0f);
			int64_t slot = kv_cache_slot(c->bt + (size_t)s * c->mb, bs, p);
			kv_cache_write(&c->kv[0], 0, &slot, r, r + 512, 1);
			kv_cache_write(&c->kv[1], 0, &slot, r, r + 512, 1);
		}
	return 0;
}

/* CPU seconds per sequence (one thread: co-tenants of a shared machine do not count): every
 * sequence once over cache kv */
static double pass(const struct caches *c, const struct kv_cache *kv, const float *q, int H, bool bf16,
		   enum ops_level lv, void *ws, float *out, float *lse)
{
	int32_t vis[1] = {c->ctx};
	double t0 = proc_cpu_s();
	for (int s = 0; s < c->seqs; s++) {
		struct mqa_job j = {.kv = kv,
				    .layer = 0,
				    .bt = c->bt + (size_t)s * c->mb,
				    .scale = 0.04f,
				    .q = q,
				    .n_tok = 1,
				    .n_heads = H,
				    .vis = vis,
				    .k_begin = 0,
				    .k_end = c->ctx,
				    .out = out,
				    .lse = lse,
				    .q_bf16 = bf16,
				    .p_bf16 = bf16};
		mqa_run_at(&j, ws, lv);
	}
	return (proc_cpu_s() - t0) / c->seqs;
}

static int level_parse(const char *v, enum ops_level *lv)
{
	for (int l = 0; l < OPS_N_LEVELS; l++)
		if (!strcmp(v, ops_level_name((enum ops_level)l))) {
			*lv = (enum ops_level)l;
			return 0;
		}
	return -1;
}

int main(int argc, char **argv)
{
	int heads[MAXV] = {16, 128}, nh = 2, ctxs[MAXV] = {8192, 32768}, nc = 2;
	int seqs = 4, reps = 7;
	bool f32 = false, sparse = false;
	int only = -1; /* 0: bf16 alone, 1: fp8 alone */
	enum ops_level lv = ops_level_best();
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--f32") || !strcmp(a, "--sparse")) {
			*(a[2] == 'f' ? &f32 : &sparse) = true;
			continue;
		}
		int ok = v != NULL;
		if (ok && !strcmp(a, "--heads"))
			ok = !bench_list_parse(v, heads, &nh, MAXV, 1024);
		else if (ok && !strcmp(a, "--ctx"))
			ok = !bench_list_parse(v, ctxs, &nc, MAXV, 1 << 20);
		else if (ok && !strcmp(a, "--seqs"))
			seqs = atoi(v), ok = seqs > 0;
		else if (ok && !strcmp(a, "--reps"))
			reps = atoi(v), ok = reps > 0 && reps <= MAXREPS;
		else if (ok && !strcmp(a, "--only"))
			only = !strcmp(v, "bf16") ? 0 : !strcmp(v, "fp8") ? 1 : -2, ok = only >= 0;
		else if (ok && !strcmp(a, "--level"))
			ok = !level_parse(v, &lv) && lv <= ops_level_best();
		else
			ok = 0;
		if (!ok) {
			fprintf(stderr,
				"usage: kv_fp8_decode [--heads 16,128] [--ctx 8192,32768] [--seqs 4] [--reps 7] "
				"[--level amx|avx512_bf16|avx512|avx2|portable] [--f32] [--sparse] [--only "
				"bf16|fp8]\n");
			return 2;
		}
		i++;
	}
	printf("level %s, %s path, %s rows, one thread\n", ops_level_name(lv), f32 ? "float32" : "bf16",
	       sparse ? "fp8_ds_mla (656-byte)" : "dense (596-byte)");
	printf("%5s %6s %5s | %10s %10s | %9s\n", "heads", "ctx", "seqs", "bf16 us", "fp8 us", "bf16/fp8");
	for (int ci = 0; ci < nc; ci++)
		for (int hi = 0; hi < nh; hi++) {
			int H = heads[hi], ctx = ctxs[ci];
			struct caches c;
			struct err e;
			if (caches_make(&c, seqs, ctx, sparse, &e)) {
				fprintf(stderr, "cache: %s\n", e.msg);
				return 1;
			}
			float *q = malloc(sizeof(float) * (size_t)H * 576);
			for (size_t k = 0; k < (size_t)H * 576; k++)
				q[k] = bf16_to_f32(f32_to_bf16(2.0f * frand()));
			void *ws = aligned_alloc(64, (mqa_scratch_bytes(H, 576) + 63) & ~(size_t)63);
			float *out = aligned_alloc(64, sizeof(float) * (size_t)H * 512),
			      *lse = malloc(sizeof(float) * H);
			double tb[MAXREPS], tf[MAXREPS], rat[MAXREPS];
			for (int k = 0; k < 2; k++) /* warm up: pages, caches */
				if (only < 0 || only == k)
					pass(&c, &c.kv[k], q, H, !f32, lv, ws, out, lse);
			for (int r = 0; r < reps; r++) {
				int first = r % 2;
				double t[2] = {0, 0};
				for (int k = 0; k < 2; k++) {
					int which = k ? !first : first;
					if (only < 0 || only == which)
						t[which] = pass(&c, &c.kv[which], q, H, !f32, lv, ws, out, lse);
				}
				tb[r] = t[0];
				tf[r] = t[1];
				rat[r] = only < 0 ? tb[r] / tf[r] : 0;
			}
			qsort(tb, (size_t)reps, sizeof(double), bench_cmp_double);
			qsort(tf, (size_t)reps, sizeof(double), bench_cmp_double);
			qsort(rat, (size_t)reps, sizeof(double), bench_cmp_double);
			printf("%5d %6d %5d | %10.1f %10.1f | %9.2f\n", H, ctx, seqs, tb[reps / 2] * 1e6,
			       tf[reps / 2] * 1e6, rat[reps / 2]);
			fflush(stdout);
			free(q), free(ws), free(out), free(lse);
			free(c.bt);
			kv_cache_fini(&c.kv[0]);
			kv_cache_fini(&c.kv[1]);
		}
	return 0;
}
