/* FLASHMLA_SPARSE against a double-precision softmax over each token's selected keys, on a
 * paged latent cache with scattered blocks: many tokens (head groups), one or two tokens with
 * long selections (split-KV: the keys split across threads, partials merged by LSE), a token
 * whose selection is empty on this rank (output 0, LSE -inf), heads beyond one tile (160),
 * fp32 and bf16 caches, and a call over a sub-range of the step's tokens (tok0). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "attn/kv_cache.h"
#include "harness.h"
#include "ops/pool.h"

#define LKV 64
#define ROPE 16
#define ROW (LKV + ROPE)
#define BS 16

static uint64_t seed = 12345;

struct setup {
	int n_seqs, n_tok, H;
	int32_t qs[9], L[9];
	int n_sel[64]; /* per token */
	enum dtype dt;
};

static void run_case(const struct setup *s, int tok0, int n_tok, const char *what)
{
	struct err e;
	struct pool *pool;
	CHECK(pool_new(2, &pool, &e) == 0);
	int maxb = 0;
	for (int i = 0; i < s->n_seqs; i++)
		maxb = (s->L[i] + BS - 1) / BS > maxb ? (s->L[i] + BS - 1) / BS : maxb;
	int nb = s->n_seqs * maxb;
	struct kv_cache kv;
	CHECK(kv_cache_init(&kv, 1, nb + 1, BS, LKV, ROPE, s->dt, &e) == 0);
	int32_t *bt = malloc(sizeof(int32_t) * (size_t)nb);
	for (int b = 0; b < nb; b++) /* scattered pages: 7 is prime to every nb below */
		bt[b] = 1 + (int)(((int64_t)b * 7) % nb);
	float row[ROW];
	for (int i = 0; i < s->n_seqs; i++)
		for (int p = 0; p < s->L[i]; p++) {
			for (int d = 0; d < ROW; d++)
				row[d] = test_frand(&seed);
			int64_t slot = kv_cache_slot(bt + (size_t)i * maxb, BS, p);
			kv_cache_write(&kv, 0, &slot, row, row + LKV, 1);
		}
	/* selections: ascending distinct positions among each token's causal keys */
	int32_t sel_start[65], *sel = malloc(sizeof(int32_t) * 64 * 2048);
	int32_t seq_of[64];
	sel_start[0] = 0;
	for (int i = 0; i < s->n_seqs; i++)
		for (int t = s->qs[i]; t < s->qs[i + 1]; t++) {
			seq_of[t] = i;
			int p = s->L[i] - (s->qs[i + 1] - s->qs[i]) + (t - s->qs[i]), k = 0;
			int want = s->n_sel[t] < p + 1 ? s->n_sel[t] : p + 1;
			for (int j = 0; j <= p && k < want; j++) /* a random subset of the right size */
				if ((int64_t)(test_rand(&seed) % (uint32_t)(p + 1 - j)) < want - k)
					sel[sel_start[t] + k++] = j;
			sel_start[t + 1] = sel_start[t] + k;
		}
	int H = s->H;
	float *q = malloc(sizeof(float) * (size_t)n_tok * H * ROW);
	float *out = malloc(sizeof(float) * (size_t)n_tok * H * LKV), *lse = malloc(sizeof(float) * (size_t)n_tok * H);
	for (size_t i = 0; i < (size_t)n_tok * H * ROW; i++)
		q[i] = test_frand(&seed) * 0.5f;
	struct attn_meta meta = {.n_seqs = s->n_seqs,
				 .n_tokens = s->n_tok,
				 .query_start = s->qs,
				 .seq_lens = s->L,
				 .block_table = bt,
				 .max_blocks = maxb,
				 .dcp_size = 1,
				 .local_seq_lens = s->L};
	struct arena ar;
	CHECK(arena_init(&ar, attn_sparse_scratch_bytes(2, n_tok, H, 2048, LKV, ROPE) + 4096) == 0);
	float scale = 0.125f;
	struct attn_sparse_args a = {.meta = &meta,
				     .kv = &kv,
				     .layer = 0,
				     .n_heads = H,
				     .scale = scale,
				     .tok0 = tok0,
				     .n_tok = n_tok,
				     .sel_start = sel_start,
				     .sel = sel,
				     .q = q,
				     .out = out,
				     .lse = lse,
				     .cx = &(struct compute_ctx){.pool = pool, .scratch = &ar}};
	attn_backend_flashmla_sparse.sparse(&a);
	double worst = 0;
	int bad = 0;
	float buf[ROW];
	for (int tl = 0; tl < n_tok && !bad; tl++) {
		int t = tok0 + tl, k = sel_start[t + 1] - sel_start[t];
		const int32_t *btr = bt + (size_t)seq_of[t] * maxb;
		for (int h = 0; h < H && !bad; h++) {
			const float *qh = q + ((size_t)tl * H + h) * ROW;
			float *o = out + ((size_t)tl * H + h) * LKV;
			if (k == 0) {
				bad = !(isinf(lse[tl * H + h]) && lse[tl * H + h] < 0);
				for (int d = 0; d < LKV; d++)
					bad |= o[d] != 0;
				continue;
			}
			double m = -INFINITY, sc[2048], acc[LKV] = {0}, z = 0;
			for (int j = 0; j < k; j++) {
				const float *kr = kv_cache_row_f32(&kv, 0,
								   kv_cache_slot(btr, BS, sel[sel_start[t] + j]), buf);
				double d = 0;
				for (int x = 0; x < ROW; x++)
					d += (double)qh[x] * kr[x];
				sc[j] = d * scale;
				m = sc[j] > m ? sc[j] : m;
			}
			for (int j = 0; j < k; j++) {
				const float *kr = kv_cache_row_f32(&kv, 0,
								   kv_cache_slot(btr, BS, sel[sel_start[t] + j]), buf);
				double p = exp(sc[j] - m);
				z += p;
				for (int x = 0; x < LKV; x++)
					acc[x] += p * kr[x];
			}
			double tol = s->dt == DT_F32 ? 1e-4 : 2e-2;
			for (int x = 0; x < LKV; x++) {
				double err = fabs(o[x] - acc[x] / z);
				worst = err > worst ? err : worst;
				bad |= err > tol;
			}
			bad |= fabs(lse[tl * H + h] - (m + log(z))) > tol * 10;
		}
	}
	EXPECTF(!bad, "%s: output or LSE off (worst |diff| %g)", what, worst);
	arena_fini(&ar);
	free(q), free(out), free(lse), free(sel), free(bt);
	kv_cache_fini(&kv);
	pool_free(pool);
}

static void test_many_tokens(void)
{
	struct setup s = {.n_seqs = 3, .n_tok = 12, .H = 8, .dt = DT_F32, .qs = {0, 5, 9, 12}, .L = {40, 300, 20}};
	for (int t = 0; t < 12; t++)
		s.n_sel[t] = 3 + t * 11;
	run_case(&s, 0, 12, "12 tokens, fp32");
	s.dt = DT_BF16;
	run_case(&s, 0, 12, "12 tokens, bf16");
	run_case(&s, 5, 4, "tokens 5-8 of the step");
}

static void test_split_keys(void)
{
	/* one token, then two, with selections long enough to split across threads */
	struct setup s = {.n_seqs = 1, .n_tok = 1, .H = 8, .dt = DT_F32, .qs = {0, 1}, .L = {2000}};
	s.n_sel[0] = 1500;
	run_case(&s, 0, 1, "one token, 1500 keys, fp32");
	s.dt = DT_BF16;
	run_case(&s, 0, 1, "one token, 1500 keys, bf16");
	struct setup s2 = {.n_seqs = 2, .n_tok = 2, .H = 160, .dt = DT_F32, .qs = {0, 1, 2}, .L = {1200, 700}};
	s2.n_sel[0] = 1100, s2.n_sel[1] = 600;
	run_case(&s2, 0, 2, "two tokens, 160 heads (two head groups), split keys");
}

static void test_empty_selection(void)
{
	/* a DCP rank that stores none of a token's selected keys */
	struct setup s = {.n_seqs = 2, .n_tok = 2, .H = 4, .dt = DT_F32, .qs = {0, 1, 2}, .L = {30, 600}};
	s.n_sel[0] = 0, s.n_sel[1] = 500;
	run_case(&s, 0, 2, "an empty selection beside a split one");
}

TESTS(T(test_many_tokens), T(test_split_keys), T(test_empty_selection))
