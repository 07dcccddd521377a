/* MQA decode kernel per dispatch level: one thread runs mqa_run_at on every sequence of a
 * batch (n_tok query tokens each, all heads of a token in one tile) at amx and at avx512_bf16
 * in alternating order, and prints the median time per job and the ratio. bf16 cache, q and
 * P·V in bf16 (the bf16 model's path). The batch's caches, seqs x ctx x 1152 bytes, decide
 * where the keys come from (L2 for one short sequence, L3 or DRAM for a batch).
 *
 *   mqa_levels [--heads 16,128] [--ctx 512,4096] [--seqs 32] [--tok 1] [--reps 9]
 *              [--block-size 64]
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/kv_cache.h"
#include "attn/kernels/mqa.h"
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

struct batch {
	struct kv_cache kv;
	int32_t *bt; /* [seqs][mb] */
	int mb, seqs, ctx;
};

static int batch_make(struct batch *b, int seqs, int ctx, int bs, struct err *e)
{
	b->seqs = seqs, b->ctx = ctx, b->mb = (ctx + bs - 1) / bs;
	int nb = seqs * b->mb;
	if (kv_cache_init(&b->kv, 1, nb + 1, bs, 512, 64, DT_BF16, e))
		return -1;
	b->bt = malloc(sizeof(int32_t) * (size_t)nb);
	for (int k = 0; k < nb; k++) /* pages 1..nb in a random order, as a long-running server's */
		b->bt[k] = k + 1;
	for (int k = nb - 1; k > 0; k--) {
		int j = (int)((frand() + 1.0f) * 0.5f * (float)(k + 1)) % (k + 1), t = b->bt[k];
		b->bt[k] = b->bt[j], b->bt[j] = t;
	}
	float r[576];
	for (int s = 0; s < seqs; s++)
		for (int p = 0; p < ctx; p++) {
			for (int d = 0; d < 576; d++)
				r[d] = frand();
			int64_t slot = kv_cache_slot(b->bt + (size_t)s * b->mb, bs, p);
			kv_cache_write(&b->kv, 0, &slot, r, r + 512, 1);
		}
	return 0;
}

/* seconds per job: every sequence once at `lv` */
static double pass(const struct batch *b, const float *q, int H, int nt, enum ops_level lv, void *ws, float *out,
		   float *lse)
{
	int32_t vis[64];
	for (int t = 0; t < nt; t++)
		vis[t] = b->ctx - nt + t + 1;
	double t0 = mono_now_s();
	for (int s = 0; s < b->seqs; s++) {
		struct mqa_job j = {.kv = &b->kv,
				    .layer = 0,
				    .bt = b->bt + (size_t)s * b->mb,
				    .scale = 0.07f,
				    .q = q + (size_t)s * nt * H * 576,
				    .n_tok = nt,
				    .n_heads = H,
				    .vis = vis,
				    .k_begin = 0,
				    .k_end = b->ctx,
				    .out = out,
				    .lse = lse,
				    .q_bf16 = true,
				    .p_bf16 = true};
		mqa_run_at(&j, ws, lv);
	}
	return (mono_now_s() - t0) / b->seqs;
}

int main(int argc, char **argv)
{
	int heads[MAXV] = {16, 128}, nh = 2, ctxs[MAXV] = {512, 4096}, nc = 2;
	int seqs = 32, nt = 1, reps = 9, bs = 64;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int ok = v != NULL;
		if (ok && !strcmp(a, "--heads"))
			ok = !bench_list_parse(v, heads, &nh, MAXV, 1024);
		else if (ok && !strcmp(a, "--ctx"))
			ok = !bench_list_parse(v, ctxs, &nc, MAXV, 1 << 20);
		else if (ok && !strcmp(a, "--seqs"))
			seqs = atoi(v), ok = seqs > 0;
		else if (ok && !strcmp(a, "--tok"))
			nt = atoi(v), ok = nt > 0 && nt <= 64;
		else if (ok && !strcmp(a, "--reps"))
			reps = atoi(v), ok = reps > 0 && reps <= MAXREPS;
		else if (ok && !strcmp(a, "--block-size"))
			bs = atoi(v), ok = bs > 0;
		else
			ok = 0;
		if (!ok) {
			fprintf(stderr,
				"usage: mqa_levels [--heads 16,128] [--ctx 512,4096] [--seqs 32] [--tok 1] [--reps 9] "
				"[--block-size 64]\n");
			return 2;
		}
		i++;
	}
	if (ops_level_best() < OPS_AMX) {
		printf("no AMX on this CPU (level %s): nothing to compare\n", ops_level_name(ops_level_best()));
		return 0;
	}
	printf("%5s %6s %5s %4s | %10s %10s | %8s %8s | %6s\n", "heads", "ctx", "seqs", "tok", "amx us", "dp us",
	       "amx GF/s", "dp GF/s", "dp/amx");
	for (int ci = 0; ci < nc; ci++)
		for (int hi = 0; hi < nh; hi++) {
			int H = heads[hi], ctx = ctxs[ci], nr = nt * H;
			struct batch b;
			struct err e;
			if (batch_make(&b, seqs, ctx, bs, &e)) {
				fprintf(stderr, "cache: %s\n", e.msg);
				return 1;
			}
			float *q = malloc(sizeof(float) * (size_t)seqs * nr * 576);
			for (size_t k = 0; k < (size_t)seqs * nr * 576; k++)
				q[k] = bf16_to_f32(f32_to_bf16(2.0f * frand()));
			void *ws = aligned_alloc(64, (mqa_scratch_bytes(nr, 576) + 63) & ~(size_t)63);
			float *out = aligned_alloc(64, sizeof(float) * (size_t)nr * 512),
			      *lse = malloc(sizeof(float) * (size_t)nr);
			double ta[MAXREPS], td[MAXREPS], rat[MAXREPS];
			pass(&b, q, H, nt, OPS_AMX, ws, out, lse); /* warm up: pages, caches */
			pass(&b, q, H, nt, OPS_AVX512_BF16, ws, out, lse);
			for (int r = 0; r < reps; r++) {
				if (r % 2) {
					ta[r] = pass(&b, q, H, nt, OPS_AMX, ws, out, lse);
					td[r] = pass(&b, q, H, nt, OPS_AVX512_BF16, ws, out, lse);
				} else {
					td[r] = pass(&b, q, H, nt, OPS_AVX512_BF16, ws, out, lse);
					ta[r] = pass(&b, q, H, nt, OPS_AMX, ws, out, lse);
				}
				rat[r] = td[r] / ta[r];
			}
			qsort(ta, (size_t)reps, sizeof(double), bench_cmp_double);
			qsort(td, (size_t)reps, sizeof(double), bench_cmp_double);
			qsort(rat, (size_t)reps, sizeof(double), bench_cmp_double);
			double flop = 2.0 * nr * ctx * (576 + 512);
			printf("%5d %6d %5d %4d | %10.1f %10.1f | %8.1f %8.1f | %6.2f\n", H, ctx, seqs, nt,
			       ta[reps / 2] * 1e6, td[reps / 2] * 1e6, flop / ta[reps / 2] * 1e-9,
			       flop / td[reps / 2] * 1e-9, rat[reps / 2]);
			fflush(stdout);
			free(q), free(ws), free(out), free(lse);
			free(b.bt);
			kv_cache_fini(&b.kv);
		}
	return 0;
}
