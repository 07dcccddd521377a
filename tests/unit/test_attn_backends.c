/* Decode attention backends against REFERENCE_MLA (docs/mla-dcp.md §2.6, §3, §4): random paged
 * batches, permuted block tables, fp32 and bf16 caches,
 * multi-token causal decodes, DCP shards simulated in one process, the FlashMLA scheduler. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/backends/backends.h"
#include "attn/dcp.h"
#include "attn/backends/flashmla_sched.h"
#include "attn/kv_cache.h"
#include "attn/kernels/mqa.h"
#include "attn/prefill.h"
#include "harness.h"
#include "ops/vec.h"
#include "ops/pool.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) { return test_rand(&rng); }
static float frand(void) { return test_frand(&rng); }

#define MAXS 16

/* A batch: per-sequence global rows (the truth), queries, and one or more caches. */
struct batch_spec {
	int n_seqs;
	int L[MAXS], q[MAXS];
	int H, Lkv, R, bs;
	enum dtype dt;
};

struct world {
	struct batch_spec s;
	int row, T, max_blocks;
	float *rows[MAXS]; /* [L, row] each */
	float *qbuf;       /* [T, H, row] */
	int32_t qs[MAXS + 1];
};

static void world_make(struct world *w, const struct batch_spec *s)
{
	memset(w, 0, sizeof *w);
	w->s = *s;
	w->row = s->Lkv + s->R;
	for (int i = 0; i < s->n_seqs; i++) {
		w->rows[i] = malloc(sizeof(float) * (size_t)(s->L[i] ? s->L[i] : 1) * w->row);
		for (int k = 0; k < s->L[i] * w->row; k++)
			w->rows[i][k] = frand();
		w->qs[i + 1] = w->qs[i] + s->q[i];
	}
	w->T = w->qs[s->n_seqs];
	w->qbuf = malloc(sizeof(float) * (size_t)(w->T ? w->T : 1) * s->H * w->row);
	for (int k = 0; k < w->T * s->H * w->row; k++)
		w->qbuf[k] = 2.0f * frand();
}

static void world_free(struct world *w)
{
	for (int i = 0; i < w->s.n_seqs; i++)
		free(w->rows[i]);
	free(w->qbuf);
}

/* One rank's paged cache of the world: rank r of W at interleave I (W = 1: everything).
 * Blocks are handed out in a random order starting at block 1 (block 0 stays null) unless
 * `arange`. The block table rows hold virtual blocks of bs * W tokens. */
struct shard {
	struct kv_cache kv;
	int32_t *bt; /* [n_seqs][max_blocks] */
	int max_blocks;
	int32_t local[MAXS];
};

static void shard_make(struct shard *sh, const struct world *w, int W, int r, int I, int arange, const int32_t *bt_in)
{
	const struct batch_spec *s = &w->s;
	int vb = s->bs * W, need = 0, maxb = 1;
	for (int i = 0; i < s->n_seqs; i++) {
		int nb = (s->L[i] + vb - 1) / vb;
		need += nb;
		maxb = nb > maxb ? nb : maxb;
	}
	struct err e;
	CHECK(kv_cache_init(&sh->kv, 2, need + 1, s->bs, s->Lkv, s->R, s->dt, &e) == 0);
	sh->max_blocks = maxb;
	sh->bt = calloc((size_t)s->n_seqs * maxb, sizeof(int32_t));
	if (bt_in) {
		memcpy(sh->bt, bt_in, sizeof(int32_t) * s->n_seqs * maxb);
	} else {
		int *perm = malloc(sizeof(int) * (need + 1));
		for (int k = 0; k < need; k++)
			perm[k] = k + 1;
		for (int k = need - 1; k > 0 && !arange; k--) {
			int j = rnd() % (k + 1), t = perm[k];
			perm[k] = perm[j];
			perm[j] = t;
		}
		int c = 0;
		for (int i = 0; i < s->n_seqs; i++)
			for (int b = 0; b < (s->L[i] + vb - 1) / vb; b++)
				sh->bt[i * maxb + b] = perm[c++];
		free(perm);
	}
	for (int i = 0; i < s->n_seqs; i++) {
		sh->local[i] = dcp_local_seq_len(s->L[i], W, r, I);
		for (int p = 0; p < s->L[i]; p++) {
			int64_t slot = dcp_slot(sh->bt + i * maxb, s->bs, W, r, I, p);
			/* layer 1 holds the data; layer 0 stays zero to catch a wrong layer */
			kv_cache_write(&sh->kv, 1, &slot, w->rows[i] + (size_t)p * w->row,
				       w->rows[i] + (size_t)p * w->row + s->Lkv, 1);
		}
	}
}

static void shard_free(struct shard *sh)
{
	kv_cache_fini(&sh->kv);
	free(sh->bt);
}

/* Runs `be` on a shard; out [T, H, Lkv], lse [T, H]. */
static void run_backend(const struct attn_backend *be, const struct world *w, struct shard *sh, int W, int r, int I,
			struct pool *pool, int n_parts, float *out, float *lse)
{
	const struct batch_spec *s = &w->s;
	struct arena ar;
	CHECK(arena_init(&ar, 64 << 20) == 0);
	struct attn_meta m = {
		.n_seqs = s->n_seqs,
		.n_tokens = w->T,
		.query_start = w->qs,
		.seq_lens = (const int32_t *)s->L,
		.block_table = sh->bt,
		.max_blocks = sh->max_blocks,
		.n_decodes = s->n_seqs,
		.n_decode_tokens = w->T,
		.dcp_size = W,
		.dcp_rank = r,
		.dcp_interleave = I,
		.local_seq_lens = sh->local,
	};
	struct err e;
	if (n_parts > 0)
		CHECK(flashmla_plan_with_parts(&m, s->H, n_parts, &ar, &e) == 0);
	else if (be->plan)
		CHECK(be->plan(&m, s->H, &(struct compute_ctx){.scratch = &ar}, &e) == 0);
	for (int k = 0; k < w->T * s->H * s->Lkv; k++)
		out[k] = NAN;
	struct attn_decode_args a = {
		.meta = &m,
		.kv = &sh->kv,
		.layer = 1,
		.n_heads = s->H,
		.scale = 1.0f / sqrtf((float)w->row),
		.q = w->qbuf,
		.out = out,
		.lse = lse,
		.cx = &(struct compute_ctx){.pool = pool, .scratch = &ar},
	};
	be->decode(&a);
	if (be->plan || n_parts > 0) /* a second layer reuses the plan and its workspace */
		be->decode(&a);
	arena_fini(&ar);
}

static double max_diff(const float *a, const float *b, size_t n)
{
	double d = 0;
	for (size_t i = 0; i < n; i++) {
		if (isinf(a[i]) && a[i] == b[i])
			continue;
		double x = fabs((double)a[i] - b[i]);
		if (!(x <= d))
			d = x; /* NaN propagates as a failure */
	}
	return d;
}

/* Unsharded reference over the world (the truth). */
static void truth(const struct world *w, float *out, float *lse)
{
	struct shard sh;
	shard_make(&sh, w, 1, 0, 1, 0, NULL);
	run_backend(&attn_backend_reference_mla, w, &sh, 1, 0, 1, NULL, 0, out, lse);
	shard_free(&sh);
}

/* Decode of `be` on W simulated DCP ranks, combined with dcp_lse_correct + a sum over ranks
 * (the reduce-scatter), against the unsharded reference. */
static double dcp_vs_truth(const struct attn_backend *be, const struct batch_spec *s, int W, int I, struct pool *pool)
{
	struct world w;
	world_make(&w, s);
	size_t no = (size_t)w.T * s->H * s->Lkv, nl = (size_t)w.T * s->H;
	float *ref = malloc(sizeof(float) * (no + 1)), *rl = malloc(sizeof(float) * (nl + 1));
	float *outs = malloc(sizeof(float) * (no * W + 1)), *lses = malloc(sizeof(float) * (nl * W + 1));
	float *sum = calloc(no + 1, sizeof(float)), *lg = malloc(sizeof(float) * (nl + 1));
	truth(&w, ref, rl);
	int32_t *bt0 = NULL;
	for (int r = 0; r < W; r++) {
		struct shard sh;
		shard_make(&sh, &w, W, r, I, 0, bt0);
		if (!bt0) { /* every rank uses the same block ids */
			bt0 = malloc(sizeof(int32_t) * s->n_seqs * sh.max_blocks);
			memcpy(bt0, sh.bt, sizeof(int32_t) * s->n_seqs * sh.max_blocks);
		}
		run_backend(be, &w, &sh, W, r, I, pool, 0, outs + r * no, lses + r * nl);
		shard_free(&sh);
	}
	for (int r = 0; r < W; r++) {
		dcp_lse_correct(lses, W, w.T, s->H, r, outs + r * no, s->Lkv, lg);
		for (size_t k = 0; k < no; k++)
			sum[k] += outs[r * no + k];
	}
	double d = fmax(max_diff(sum, ref, no), max_diff(lg, rl, nl));
	free(bt0);
	free(ref), free(rl), free(outs), free(lses), free(sum), free(lg);
	world_free(&w);
	return d;
}

/* `be` vs the reference on an unsharded batch; `n_parts` > 0 forces FlashMLA partitions. */
static double vs_reference(const struct attn_backend *be, const struct batch_spec *s, struct pool *pool, int n_parts)
{
	struct world w;
	world_make(&w, s);
	size_t no = (size_t)w.T * s->H * s->Lkv, nl = (size_t)w.T * s->H;
	float *ref = malloc(sizeof(float) * (no + 1)), *rl = malloc(sizeof(float) * (nl + 1));
	float *o = malloc(sizeof(float) * (no + 1)), *l = malloc(sizeof(float) * (nl + 1));
	truth(&w, ref, rl);
	struct shard sh;
	shard_make(&sh, &w, 1, 0, 1, 0, NULL);
	run_backend(be, &w, &sh, 1, 0, 1, pool, n_parts, o, l);
	shard_free(&sh);
	double d = fmax(max_diff(o, ref, no), max_diff(l, rl, nl));
	free(ref), free(rl), free(o), free(l);
	world_free(&w);
	return d;
}

static struct batch_spec spec(int n, const int *L, const int *q, int H, enum dtype dt)
{
	struct batch_spec s = {.n_seqs = n, .H = H, .Lkv = 512, .R = 64, .bs = 16, .dt = dt};
	for (int i = 0; i < n; i++) {
		s.L[i] = L[i];
		s.q[i] = q[i];
	}
	return s;
}

#define TOL 1e-5

static const struct attn_backend *fast[] = {&attn_backend_flashmla, &attn_backend_flash_attn_mla};

static void test_reference_matches_dense(void)
{
	/* the oracle itself against a dense softmax written here, q_len 3, small dims */
	struct batch_spec s = {.n_seqs = 1, .L = {20}, .q = {3}, .H = 2, .Lkv = 8, .R = 4, .bs = 4, .dt = DT_F32};
	struct world w;
	world_make(&w, &s);
	float out[3 * 2 * 8], lse[6];
	struct shard sh;
	shard_make(&sh, &w, 1, 0, 1, 0, NULL);
	run_backend(&attn_backend_reference_mla, &w, &sh, 1, 0, 1, NULL, 0, out, lse);
	for (int t = 0; t < 3; t++)
		for (int h = 0; h < 2; h++) {
			const float *q = w.qbuf + (t * 2 + h) * 12;
			double sc[20], mx = -1e30, l = 0;
			int nvis = 20 - 3 + t + 1;
			for (int j = 0; j < nvis; j++) {
				sc[j] = 0;
				for (int d = 0; d < 12; d++)
					sc[j] += q[d] * w.rows[0][j * 12 + d];
				sc[j] /= sqrt(12.0);
				mx = fmax(mx, sc[j]);
			}
			for (int j = 0; j < nvis; j++)
				l += exp(sc[j] - mx);
			EXPECT_NEAR(lse[t * 2 + h], mx + log(l), 1e-5);
			for (int d = 0; d < 8; d++) {
				double o = 0;
				for (int j = 0; j < nvis; j++)
					o += exp(sc[j] - mx) / l * w.rows[0][j * 12 + d];
				EXPECT_NEAR(out[(t * 2 + h) * 8 + d], o, 1e-5);
			}
		}
	shard_free(&sh);
	world_free(&w);
}

static void test_pure_decode(void)
{
	int L[] = {32, 40, 1, 130, 64, 65, 700, 3}, q[] = {1, 1, 1, 1, 1, 1, 1, 1};
	struct pool *pool;
	struct err e;
	CHECK(pool_new(2, &pool, &e) == 0);
	for (int b = 0; b < 2; b++)
		for (int dt = 0; dt < 2; dt++) {
			struct batch_spec s = spec(8, L, q, dt ? 16 : 4, dt ? DT_BF16 : DT_F32);
			double d = vs_reference(fast[b], &s, b ? pool : NULL, 0);
			EXPECTF(d <= TOL, "%s dtype %d: max diff %g", fast[b]->name, dt, d);
		}
	pool_free(pool);
}

static void test_uniform_multi_token(void)
{
	/* q_len 2/4/8, bottom-right causal: query t sees positions <= L - q + t */
	for (int qi = 0; qi < 3; qi++) {
		int ql = 2 << qi;
		int L[] = {128, 256, 9, 77}, q[] = {ql, ql, ql, ql};
		for (int b = 0; b < 2; b++) {
			struct batch_spec s = spec(4, L, q, 8, qi == 1 ? DT_BF16 : DT_F32);
			double d = vs_reference(fast[b], &s, NULL, 0);
			EXPECTF(d <= TOL, "%s q_len %d: max diff %g", fast[b]->name, ql, d);
		}
	}
	/* many heads x tokens: several query tiles per request */
	int L[] = {300, 200}, q[] = {40, 40};
	struct batch_spec s = spec(2, L, q, 16, DT_F32);
	double d = vs_reference(&attn_backend_flashmla, &s, NULL, 3);
	EXPECTF(d <= TOL, "flashmla multi-tile: %g", d);
}

static void test_varlen_mixed(void)
{
	int L[] = {32, 40, 48, 56, 300, 7}, q[] = {1, 1, 5, 5, 17, 7};
	struct batch_spec s = spec(6, L, q, 8, DT_F32);
	double d = vs_reference(&attn_backend_flash_attn_mla, &s, NULL, 0);
	EXPECTF(d <= TOL, "varlen: %g", d);
	s.dt = DT_BF16;
	d = vs_reference(&attn_backend_flash_attn_mla, &s, NULL, 0);
	EXPECTF(d <= TOL, "varlen bf16: %g", d);
	/* odd dims exercise the non-multiple-of-8/64 tails of the kernels */
	s.Lkv = 36;
	s.R = 5;
	s.bs = 5;
	d = vs_reference(&attn_backend_flash_attn_mla, &s, NULL, 0);
	EXPECTF(d <= TOL, "varlen odd dims: %g", d);
	d = vs_reference(
		&attn_backend_flashmla,
		&(struct batch_spec){
			.n_seqs = 2, .L = {70, 3}, .q = {2, 2}, .H = 3, .Lkv = 36, .R = 5, .bs = 5, .dt = DT_BF16},
		NULL, 2);
	EXPECTF(d <= TOL, "flashmla odd dims: %g", d);
}

static void test_flashmla_rejects_non_uniform(void)
{
	int32_t qs[] = {0, 1, 3}, L[] = {10, 10}, bt[] = {1, 1};
	struct attn_meta m = {.n_seqs = 2,
			      .n_tokens = 3,
			      .query_start = qs,
			      .seq_lens = L,
			      .block_table = bt,
			      .max_blocks = 1,
			      .n_decodes = 2,
			      .n_decode_tokens = 3,
			      .dcp_size = 1,
			      .dcp_interleave = 1};
	struct arena ar;
	CHECK(arena_init(&ar, 1 << 16) == 0);
	struct err e;
	EXPECT(attn_backend_flashmla.plan(&m, 4, &(struct compute_ctx){.scratch = &ar}, &e) < 0);
	EXPECT(strstr(e.msg, "uniform") != NULL);
	arena_fini(&ar);
}

static void test_permuted_blocks_bit_identical(void)
{
	int L[] = {100, 37, 250}, q[] = {2, 2, 2};
	struct batch_spec s = spec(3, L, q, 4, DT_BF16);
	struct world w;
	world_make(&w, &s);
	size_t no = (size_t)w.T * 4 * 512, nl = (size_t)w.T * 4;
	for (int b = 0; b < 2; b++) {
		float *o1 = malloc(no * 4), *o2 = malloc(no * 4), *l1 = malloc(nl * 4), *l2 = malloc(nl * 4);
		struct shard a, p;
		shard_make(&a, &w, 1, 0, 1, 1, NULL);
		shard_make(&p, &w, 1, 0, 1, 0, NULL);
		EXPECT(memcmp(a.bt, p.bt, sizeof(int32_t) * 3 * a.max_blocks) != 0);
		run_backend(fast[b], &w, &a, 1, 0, 1, NULL, 0, o1, l1);
		run_backend(fast[b], &w, &p, 1, 0, 1, NULL, 0, o2, l2);
		EXPECT(memcmp(o1, o2, no * 4) == 0 && memcmp(l1, l2, nl * 4) == 0);
		shard_free(&a), shard_free(&p);
		free(o1), free(o2), free(l1), free(l2);
	}
	world_free(&w);
}

static void test_slot_minus_one_skipped(void)
{
	for (int dt = 0; dt < 2; dt++) {
		struct kv_cache kv;
		struct err e;
		CHECK(kv_cache_init(&kv, 2, 4, 4, 6, 2, dt ? DT_BF16 : DT_F32, &e) == 0);
		size_t n = kv_cache_n_slots(&kv) * 2 * 8;
		for (size_t k = 0; k < n; k++) {
			if (dt)
				((uint16_t *)kv.data)[k] = 0x7f7f;
			else
				((float *)kv.data)[k] = -12345.0f;
		}
		int64_t slots[4] = {-1, 5, -1, 9};
		float c[4 * 6], pe[4 * 2];
		for (int k = 0; k < 24; k++)
			c[k] = (float)k;
		for (int k = 0; k < 8; k++)
			pe[k] = 100.0f + k;
		kv_cache_write(&kv, 1, slots, c, pe, 4);
		float buf[8];
		for (int64_t sl = 0; sl < kv_cache_n_slots(&kv); sl++)
			for (int layer = 0; layer < 2; layer++) {
				const float *r = kv_cache_row_f32(&kv, layer, sl, buf);
				int who = layer == 1 && sl == 5 ? 1 : layer == 1 && sl == 9 ? 3 : -1;
				for (int d = 0; d < 8; d++) {
					float want = who < 0 ? (dt ? bf16_to_f32(0x7f7f) : -12345.0f)
						     : d < 6 ? c[who * 6 + d]
							     : pe[who * 2 + d - 6];
					EXPECT(r[d] == want);
				}
			}
		kv_cache_fini(&kv);
	}
	struct kv_cache kv;
	struct err e;
	EXPECT(kv_cache_init(&kv, 1, 4, 16, 512, 64, DT_F16, &e) < 0);
	/* fp8: a latent width that is no whole number of its scale groups */
	EXPECT(kv_cache_init(&kv, 1, 4, 16, 192, 64, DT_F8_E4M3, &e) < 0 && strstr(e.msg, "192"));
	EXPECT(kv_cache_init(&kv, 1, 0, 16, 512, 64, DT_F32, &e) < 0);
	/* the indexer cache: a key width not a whole number of scale groups, more keys than it addresses */
	EXPECT(kv_cache_init_indexed(&kv, 1, 4, 16, 512, 64, DT_F32, 192, &e) < 0);
	EXPECT(kv_cache_init_indexed(&kv, 1, 1 << 20, 16, 512, 64, DT_F32, 128, &e) < 0 &&
	       strstr(e.msg, "--kv-cache-memory"));
	EXPECT(kv_cache_init_indexed(&kv, 2, 4, 16, 512, 64, DT_BF16, 32, &e) == 0 && kv.index_groups == 1);
	EXPECT_EQ_INT(kv_cache_index_bytes_per_block(2, 16, 32), 2 * 16 * (32 + 4));
	kv_cache_fini(&kv);
	EXPECT_EQ_INT(kv_cache_bytes_per_block(3, 16, 576, DT_BF16), 3 * 16 * 576 * 2);
}

static void test_dcp_decode_q1(void)
{
	int L[] = {1, 2, 5, 64, 129, 300, 17}, q[] = {1, 1, 1, 1, 1, 1, 1};
	int Ws[] = {2, 4, 8}, Is[] = {1, 16};
	const struct attn_backend *bes[] = {&attn_backend_reference_mla, &attn_backend_flashmla,
					    &attn_backend_flash_attn_mla};
	for (int wi = 0; wi < 3; wi++)
		for (int ii = 0; ii < 2; ii++)
			for (int b = 0; b < 3; b++) {
				struct batch_spec s = spec(7, L, q, 4, DT_F32);
				double d = dcp_vs_truth(bes[b], &s, Ws[wi], Is[ii], NULL);
				EXPECTF(d <= TOL, "%s W %d I %d: %g", bes[b]->name, Ws[wi], Is[ii], d);
			}
}

static void test_dcp_all_empty(void)
{
	/* L = 0: every shard empty, the combined output is 0 and never NaN */
	int L[] = {0, 3}, q[] = {1, 1};
	struct batch_spec s = spec(2, L, q, 2, DT_F32);
	struct world w;
	world_make(&w, &s);
	struct shard sh;
	shard_make(&sh, &w, 2, 1, 1, 0, NULL);
	float o[2 * 2 * 512], l[4], lses[2][4];
	run_backend(&attn_backend_flashmla, &w, &sh, 2, 1, 1, NULL, 0, o, l);
	for (int k = 0; k < 512; k++)
		EXPECT(o[k] == 0.0f);
	EXPECT(l[0] == -INFINITY && l[1] == -INFINITY);
	memcpy(lses[0], l, sizeof l);
	memcpy(lses[1], l, sizeof l);
	lses[1][0] = INFINITY; /* FA2-style empty marker */
	lses[1][1] = NAN;
	float lg[4];
	dcp_lse_correct(&lses[0][0], 2, 2, 2, 0, o, 512, lg);
	for (int k = 0; k < 2 * 512; k++)
		EXPECT(o[k] == 0.0f);
	EXPECT(lg[0] == -INFINITY && lg[1] == -INFINITY);
	shard_free(&sh);
	world_free(&w);
}

static void test_dcp_multi_token_global_mask(void)
{
	int L[] = {6, 40, 130, 3, 200}, q[] = {4, 4, 4, 4, 4};
	int Ws[] = {2, 4}, Is[] = {1, 2, 16};
	for (int wi = 0; wi < 2; wi++)
		for (int ii = 0; ii < 3; ii++) {
			struct batch_spec s = spec(5, L, q, 4, ii == 1 ? DT_BF16 : DT_F32);
			double d = dcp_vs_truth(&attn_backend_flashmla, &s, Ws[wi], Is[ii], NULL);
			EXPECTF(d <= TOL, "flashmla W %d I %d: %g", Ws[wi], Is[ii], d);
			d = dcp_vs_truth(&attn_backend_reference_mla, &s, Ws[wi], Is[ii], NULL);
			EXPECTF(d <= TOL, "reference W %d I %d: %g", Ws[wi], Is[ii], d);
		}
	int Lv[] = {6, 40, 130, 9}, qv[] = {4, 1, 7, 2};
	struct batch_spec s = spec(4, Lv, qv, 4, DT_F32);
	double d = dcp_vs_truth(&attn_backend_flash_attn_mla, &s, 2, 1, NULL);
	EXPECTF(d <= TOL, "flash_attn_mla varlen W 2 I 1: %g", d);
}

static void test_dcp_naive_local_mask_is_wrong(void)
{
	/* negative: running each shard with DCP off (local bottom-right mask) breaks q_len > 1 */
	int L[] = {6}, q[] = {4};
	struct batch_spec s = spec(1, L, q, 2, DT_F32);
	struct world w;
	world_make(&w, &s);
	size_t no = (size_t)4 * 2 * 512;
	float ref[4 * 2 * 512], rl[8], outs[2][4 * 2 * 512], lses[2][8], lg[8];
	truth(&w, ref, rl);
	for (int r = 0; r < 2; r++) {
		struct shard sh;
		shard_make(&sh, &w, 2, r, 1, 0, NULL);
		struct world lw = w; /* the shard as if it were a whole sequence of local_len */
		lw.s.L[0] = sh.local[0];
		run_backend(&attn_backend_flashmla, &lw, &sh, 1, 0, 1, NULL, 0, outs[r], lses[r]);
		shard_free(&sh);
	}
	for (int r = 0; r < 2; r++)
		dcp_lse_correct(&lses[0][0], 2, 4, 2, r, outs[r], 512, lg);
	for (size_t k = 0; k < no; k++)
		outs[0][k] += outs[1][k];
	EXPECT(max_diff(outs[0], ref, no) > 1e-3);
	world_free(&w);
}

static void test_capabilities(void)
{
	EXPECT_EQ_INT(attn_backend_count(), 5);
	EXPECT(attn_backend_by_name("FLASHMLA") == &attn_backend_flashmla);
	EXPECT(attn_backend_by_name("FLASH_ATTN_MLA") == &attn_backend_flash_attn_mla);
	EXPECT(attn_backend_by_name("REFERENCE_MLA") == &attn_backend_reference_mla);
	EXPECT(attn_backend_by_name("nope") == NULL && attn_backend_by_name(NULL) == NULL);
	EXPECT(attn_backend_by_name("FLASHMLA_SPARSE") == &attn_backend_flashmla_sparse);
	EXPECT(attn_backend_by_name("DEEPSEEK_V4") == &attn_backend_deepseek_v4);
	EXPECT(attn_backend_at(5) == NULL && attn_backend_at(-1) == NULL);
	/* the dense backends, the one sparse one (V3.2) and V4's (no work entry: the family's
	 * forward runs it); each kind's default is its first */
	for (int i = 0; i < attn_backend_count(); i++) {
		const struct attn_backend *b = attn_backend_at(i);
		EXPECT((b->sparse != NULL) == (b == &attn_backend_flashmla_sparse) &&
		       b->v4 == (b == &attn_backend_deepseek_v4));
		EXPECTF(b->v4 ? !b->decode && !b->sparse && !b->prefill && !b->plan
			      : (b->decode != NULL) != (b->sparse != NULL),
			"%s", b->name);
	}
	EXPECT(attn_backend_default(false) == &attn_backend_flashmla);
	EXPECT(attn_backend_default(true) == &attn_backend_flashmla_sparse);
	EXPECT(attn_backend_default_kind(ATTN_KIND_V4) == &attn_backend_deepseek_v4);
	struct err e;
	EXPECT(attn_backend_check(&attn_backend_flashmla, false, &e) == 0);
	EXPECT(attn_backend_check(&attn_backend_flashmla_sparse, true, &e) == 0);
	EXPECT(attn_backend_check(&attn_backend_flashmla, true, &e) < 0 && strstr(e.msg, "FLASHMLA_SPARSE"));
	EXPECT(attn_backend_check(&attn_backend_flashmla_sparse, false, &e) < 0 && strstr(e.msg, "REFERENCE_MLA"));
	/* V4's backend serves V4 only, and V4 models take no other */
	EXPECT(attn_backend_check_kind(&attn_backend_deepseek_v4, ATTN_KIND_V4, &e) == 0);
	EXPECT(attn_backend_check(&attn_backend_deepseek_v4, false, &e) < 0 && strstr(e.msg, "FLASHMLA"));
	EXPECT(attn_backend_check(&attn_backend_deepseek_v4, true, &e) < 0 && strstr(e.msg, "FLASHMLA_SPARSE"));
	EXPECT(attn_backend_check_kind(&attn_backend_flashmla, ATTN_KIND_V4, &e) < 0 && strstr(e.msg, "DEEPSEEK_V4") &&
	       strstr(e.msg, "needs DeepSeek-V4"));
	EXPECT(attn_backend_deepseek_v4.query_len_support == QLEN_VARLEN && attn_backend_deepseek_v4.returns_lse &&
	       attn_backend_deepseek_v4.supports_dcp_multi_token(1) &&
	       attn_backend_deepseek_v4.supports_dcp_multi_token(64));
	EXPECT(attn_backend_flashmla_sparse.supports_dcp_multi_token(1) &&
	       attn_backend_flashmla_sparse.supports_dcp_multi_token(64));
	EXPECT(attn_backend_reference_mla.query_len_support == QLEN_SINGLE_ONLY);
	EXPECT(attn_backend_reference_mla.reorder_batch_threshold == 1);
	EXPECT(attn_backend_reference_mla.supports_dcp_multi_token == NULL);
	EXPECT(attn_backend_flashmla.supports_dcp_multi_token(1));
	EXPECT(attn_backend_flashmla.supports_dcp_multi_token(64));
	EXPECT(attn_backend_flash_attn_mla.supports_dcp_multi_token(1));
	EXPECT(!attn_backend_flash_attn_mla.supports_dcp_multi_token(64));
	for (int i = 0; i < attn_backend_count(); i++)
		EXPECT(attn_backend_at(i)->returns_lse);
	/* every MLA backend runs a step's prefill tokens: a dense one by its prefill entry (the CPU
	 * ones share attn_prefill), a sparse one by its sparse entry */
	for (int i = 0; i < attn_backend_count(); i++) {
		const struct attn_backend *b = attn_backend_at(i);
		if (b->v4)
			continue;
		EXPECTF((b->prefill != NULL) == (b->sparse == NULL), "%s", b->name);
		EXPECTF(!b->prefill || b->prefill == attn_prefill, "%s", b->name);
	}
}

/* ---- FlashMLA scheduler ---- */

static void test_sched_hand_example(void)
{
	int32_t L[] = {64, 640}, ns[3];
	struct flashmla_part parts[2];
	EXPECT_EQ_INT(flashmla_sched_compute(L, 2, 2, parts, ns), 2);
	/* the rows as FlashMLA's tile_scheduler_metadata holds them */
	const int32_t *meta = (const int32_t *)parts;
	int32_t want[16] = {0, 0, 1, 320, 0, 0, 0, 0, 1, 320, 1, 640, 1, 0, 0, 0};
	for (int k = 0; k < 16; k++)
		EXPECTF(meta[k] == want[k], "meta[%d] = %d, want %d", k, meta[k], want[k]);
	EXPECT(ns[0] == 0 && ns[1] == 1 && ns[2] == 3);
}

static void test_sched_properties(void)
{
	int parts_list[] = {1, 3, 16, 132};
	for (int trial = 0; trial < 200; trial++) {
		int B = 1 + rnd() % 12;
		int32_t L[12];
		for (int i = 0; i < B; i++) {
			int k = rnd() % 4;
			L[i] = k == 0 ? (int)(rnd() % 2) : k == 1 ? (int)(rnd() % 130) : (int)(rnd() % 3000);
		}
		int P = parts_list[trial % 4];
		struct flashmla_part *meta = malloc(sizeof *meta * (size_t)P);
		int32_t ns[13];
		EXPECT_EQ_INT(flashmla_sched_compute(L, B, P, meta, ns), B);
		EXPECT_EQ_INT(ns[0], 0);
		for (int i = 0; i < B; i++)
			EXPECT(ns[i + 1] > ns[i]);
		/* every key of every request covered once; pieces numbered 0.. per request */
		int cover[12][3000 + 64] = {{0}};
		int pieces[12] = {0};
		for (int p = 0; p < P; p++) {
			const struct flashmla_part *m = &meta[p];
			if (m->begin_req >= B)
				continue;
			for (int r = m->begin_req; r <= m->end_req; r++) {
				int kb = r == m->begin_req ? m->begin_tok : 0,
				    ke = r == m->end_req ? m->end_tok : L[r];
				int split = r == m->begin_req ? m->begin_split : 0;
				EXPECT_EQ_INT(split, pieces[r]);
				pieces[r]++;
				EXPECT(kb % 64 == 0 && kb <= ke && ke <= L[r]);
				for (int k = kb; k < ke; k++)
					cover[r][k]++;
			}
		}
		for (int i = 0; i < B; i++) {
			EXPECT_EQ_INT(pieces[i], ns[i + 1] - ns[i]);
			for (int k = 0; k < L[i]; k++)
				EXPECT(cover[i][k] == 1);
		}
		free(meta);
		if (harness_failed)
			return;
	}
}

static void test_split_combine_matches_unsplit(void)
{
	int L[] = {1, 0, 640, 2000, 65, 129}, q[] = {1, 1, 1, 1, 1, 1};
	int parts_list[] = {1, 3, 16, 132};
	struct pool *pool;
	struct err e;
	CHECK(pool_new(2, &pool, &e) == 0);
	for (int k = 0; k < 4; k++) {
		struct batch_spec s = spec(6, L, q, 4, DT_F32);
		double d = vs_reference(&attn_backend_flashmla, &s, k & 1 ? pool : NULL, parts_list[k]);
		EXPECTF(d <= TOL, "parts %d: %g", parts_list[k], d);
		int Lq[] = {300, 90}, qq[] = {3, 3};
		s = spec(2, Lq, qq, 4, DT_BF16);
		d = vs_reference(&attn_backend_flashmla, &s, pool, parts_list[k]);
		EXPECTF(d <= TOL, "q 3 parts %d: %g", parts_list[k], d);
	}
	/* split vs unsplit FlashMLA directly: 1e-6 relative */
	struct batch_spec s = spec(6, L, q, 4, DT_F32);
	struct world w;
	world_make(&w, &s);
	struct shard sh;
	shard_make(&sh, &w, 1, 0, 1, 0, NULL);
	size_t no = (size_t)w.T * 4 * 512, nl = (size_t)w.T * 4;
	float *o1 = malloc(no * 4), *o2 = malloc(no * 4), *l1 = malloc(nl * 4), *l2 = malloc(nl * 4);
	run_backend(&attn_backend_flashmla, &w, &sh, 1, 0, 1, NULL, 1, o1, l1);
	for (int k = 1; k < 4; k++) {
		run_backend(&attn_backend_flashmla, &w, &sh, 1, 0, 1, pool, parts_list[k], o2, l2);
		/* relative to the largest output magnitude (outputs near 0 have no relative scale) */
		double worst = 0, big = 0;
		for (size_t i = 0; i < no; i++)
			big = fmax(big, fabs(o1[i]));
		for (size_t i = 0; i < no; i++)
			worst = fmax(worst, fabs(o1[i] - o2[i]) / big);
		for (size_t i = 0; i < nl; i++)
			if (!isinf(l1[i]))
				worst = fmax(worst, fabs(l1[i] - l2[i]) / fmax(fabs(l1[i]), 1.0));
		EXPECTF(worst <= 1e-6, "parts %d: relative %g", parts_list[k], worst);
	}
	free(o1), free(o2), free(l1), free(l2);
	shard_free(&sh);
	world_free(&w);
	pool_free(pool);
}

/* One MQA tile at `lv` into o [15 or 48 rows, Lkv] and l. */
static void kernel_tile(struct shard *sh, const struct world *w, int H, enum ops_level lv, float *o, float *l,
			bool q_bf16, bool p_bf16)
{
	/* token 0 sees no key of the last blocks; keys [6, 203): the last block has 5 */
	int32_t vis[3] = {150, 202, 203};
	void *ws = aligned_alloc(64, mqa_scratch_bytes(3 * H, w->row));
	/* scores of a few units: peaked, yet the LSE small enough for 1e-5 */
	struct mqa_job j = {.kv = &sh->kv,
			    .layer = 1,
			    .bt = sh->bt,
			    .scale = 2.0f / sqrtf((float)w->row),
			    .q = w->qbuf,
			    .n_tok = 3,
			    .n_heads = H,
			    .vis = vis,
			    .k_begin = 6,
			    .k_end = 203,
			    .out = o,
			    .lse = l,
			    .q_bf16 = q_bf16,
			    .p_bf16 = p_bf16};
	mqa_run_at(&j, ws, lv);
	free(ws);
}

static void test_kernel_levels_agree(void)
{
	/* every kernel level up to the best against the portable one: odd and real dims, fp32
	 * and bf16, 15 rows (partial 4-row groups mixing tokens) and 48; and q rounded to bf16
	 * and declared so (bf16 dot-product scores on a bf16 cache at avx512_bf16) */
	int dims[2][3] = {{36, 5, 5}, {512, 64, 16}};
	for (int di = 0; di < 2; di++)
		for (int dt = 0; dt < 2; dt++)
			for (int H = 5; H <= 16; H += 11)
				for (int qb = 0; qb < 2; qb++) {
					struct batch_spec s = {.n_seqs = 1,
							       .L = {203},
							       .q = {3},
							       .H = H,
							       .Lkv = dims[di][0],
							       .R = dims[di][1],
							       .bs = dims[di][2],
							       .dt = dt ? DT_BF16 : DT_F32};
					struct world w;
					world_make(&w, &s);
					struct shard sh;
					shard_make(&sh, &w, 1, 0, 1, 0, NULL);
					int nr = 3 * H;
					if (qb)
						ops_round_bf16(w.qbuf, (int64_t)nr * w.row);
					size_t no = (size_t)nr * s.Lkv;
					float *o0 = malloc(no * 4), *o = malloc(no * 4), l0[48], l[48];
					kernel_tile(&sh, &w, H, OPS_PORTABLE, o0, l0, qb, false);
					for (int lv = 1; lv <= (int)ops_level_best(); lv++) {
						kernel_tile(&sh, &w, H, (enum ops_level)lv, o, l, qb, false);
						double d = max_diff(o0, o, no), dl = max_diff(l0, l, nr);
						EXPECTF(d <= 1e-5 && dl <= 1e-5,
							"%s H %d Lkv %d dt %d q_bf16 %d: %g %g",
							ops_level_name((enum ops_level)lv), H, s.Lkv, dt, qb, d, dl);
					}
					/* P·V in bf16 (p_bf16): each probability within 2^-9 relative, so each
				 * output within 2^-9 of the largest value magnitude; the LSE is fp32 */
					if (qb && ops_level_best() >= OPS_AVX512_BF16) {
						kernel_tile(&sh, &w, H, OPS_AVX512_BF16, o, l, true, true);
						double vmax = 1.0; /* the world's values lie in [-1, 1) */
						double d = max_diff(o0, o, no), dl = max_diff(l0, l, nr);
						EXPECTF(d <= vmax / 512 + 1e-5 && dl <= 1e-5,
							"p_bf16 H %d Lkv %d dt %d: %g (bound %g) %g", H, s.Lkv, dt, d,
							vmax / 512, dl);
						/* and it is the bf16 path, not the fp32 one: some output moved */
						EXPECTF(!dt || d > 0, "p_bf16 H %d Lkv %d: identical to fp32 P", H,
							s.Lkv);
					}
					free(o0), free(o);
					shard_free(&sh);
					world_free(&w);
				}
}

static void test_scratch_bound(void)
{
	/* a step (plan + two layers) fits in attn_decode_scratch_bytes for both fast backends */
	struct pool *pool;
	struct err e;
	CHECK(pool_new(2, &pool, &e) == 0);
	int Hs[] = {1, 16, 128}, qls[] = {1, 2, 8};
	for (int hi = 0; hi < 3; hi++)
		for (int qi = 0; qi < 3; qi++)
			for (int b = 0; b < 2; b++) {
				int L[] = {2000, 5, 700, 64}, q[] = {qls[qi], qls[qi], qls[qi], qls[qi]};
				struct batch_spec s = spec(4, L, q, Hs[hi], DT_BF16);
				s.Lkv = 64;
				s.R = 16;
				struct world w;
				world_make(&w, &s);
				struct shard sh;
				shard_make(&sh, &w, 1, 0, 1, 0, NULL);
				size_t no = (size_t)w.T * s.H * s.Lkv, nl = (size_t)w.T * s.H;
				float *o = malloc(no * 4), *l = malloc(nl * 4);
				struct arena ar;
				size_t cap = attn_decode_scratch_bytes(2, 4, w.T, s.H, s.Lkv, s.R);
				CHECK(arena_init(&ar, cap) == 0);
				struct attn_meta m = {.n_seqs = 4,
						      .n_tokens = w.T,
						      .query_start = w.qs,
						      .seq_lens = (const int32_t *)s.L,
						      .block_table = sh.bt,
						      .max_blocks = sh.max_blocks,
						      .n_decodes = 4,
						      .n_decode_tokens = w.T,
						      .dcp_size = 1,
						      .dcp_interleave = 1};
				CHECK(fast[b]->plan(&m, s.H, &(struct compute_ctx){.scratch = &ar}, &e) == 0);
				struct attn_decode_args a = {
					.meta = &m,
					.kv = &sh.kv,
					.layer = 1,
					.n_heads = s.H,
					.scale = 0.1f,
					.q = w.qbuf,
					.out = o,
					.lse = l,
					.cx = &(struct compute_ctx){.pool = pool, .scratch = &ar}};
				fast[b]->decode(&a);
				size_t after_one = ar.used;
				fast[b]->decode(&a);
				EXPECT(ar.used == after_one && ar.high_water <= cap); /* layers reuse */
				arena_fini(&ar);
				free(o), free(l);
				shard_free(&sh);
				world_free(&w);
			}
	pool_free(pool);
}

TESTS(T(test_reference_matches_dense), T(test_scratch_bound), T(test_kernel_levels_agree), T(test_pure_decode),
      T(test_uniform_multi_token), T(test_varlen_mixed), T(test_flashmla_rejects_non_uniform),
      T(test_permuted_blocks_bit_identical), T(test_slot_minus_one_skipped), T(test_dcp_decode_q1),
      T(test_dcp_all_empty), T(test_dcp_multi_token_global_mask), T(test_dcp_naive_local_mask_is_wrong),
      T(test_capabilities), T(test_sched_hand_example), T(test_sched_properties),
      T(test_split_combine_matches_unsplit))
