/* FLASHMLA_SPARSE under DCP: the keys of one sequence sharded over W ranks (interleave I), each
 * rank attending the selected keys it stores (local indices), partial outputs corrected by the
 * ranks' LSEs and summed as the model's reduce-scatter does, against the same backend run once
 * on the whole cache. Selections where one rank holds none, one or all of a token's keys, a
 * single key, odd head counts, top-k far below the context, and a long selection split
 * across threads (few tokens). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "attn/dcp.h"
#include "attn/kv_cache.h"
#include "harness.h"
#include "ops/pool.h"

#define LKV 64
#define ROPE 16
#define ROW (LKV + ROPE)
#define BS 16
#define LEN 1200 /* the sequence's context */
#define NTOK 8   /* the step's tokens: the last NTOK positions */
#define MAXSEL 700

static uint64_t seed = 777;

/* one step's global view: the keys and every token's selection (ascending positions) */
struct world {
	float rows[LEN][ROW];
	int32_t sel_start[NTOK + 1], sel[NTOK * MAXSEL];
	float q[NTOK * 8 * ROW];
	int H;
};

/* rank r of W (W = 1: the whole cache): its cache, metadata and output */
struct shard {
	struct kv_cache kv;
	int32_t bt[LEN / BS + 1], L, local_len, qs[2];
	int32_t sel_start[NTOK + 1], sel[NTOK * MAXSEL];
	float out[NTOK * 8 * LKV], lse[NTOK * 8];
};

static int owner(int64_t g, int W, int I) { return (int)((g / I) % W); }
static int64_t local_index(int64_t g, int W, int I) { return g / ((int64_t)W * I) * I + g % I; }

static void shard_run(const struct world *w, struct shard *s, int W, int r, int I, struct pool *pool)
{
	struct err e;
	int nb = LEN / BS + 1;
	CHECK(kv_cache_init(&s->kv, 1, nb + 1, BS, LKV, ROPE, DT_F32, &e) == 0);
	for (int b = 0; b < nb; b++) /* scattered pages: 5 is prime to nb */
		s->bt[b] = 1 + (b * 5 + r) % nb;
	s->L = LEN;
	s->local_len = W > 1 ? dcp_local_seq_len(LEN, W, r, I) : LEN;
	for (int j = 0; j < s->local_len; j++) {
		int64_t g = W > 1 ? dcp_global_pos(j, W, r, I) : j;
		int64_t slot = kv_cache_slot(s->bt, BS, j);
		kv_cache_write(&s->kv, 0, &slot, w->rows[g], w->rows[g] + LKV, 1);
	}
	s->sel_start[0] = 0;
	for (int t = 0; t < NTOK; t++) { /* this rank's keys of the selection, as local indices */
		int n = s->sel_start[t];
		for (int j = w->sel_start[t]; j < w->sel_start[t + 1]; j++)
			if (W == 1 || owner(w->sel[j], W, I) == r)
				s->sel[n++] = (int32_t)(W > 1 ? local_index(w->sel[j], W, I) : w->sel[j]);
		s->sel_start[t + 1] = n;
	}
	s->qs[0] = 0, s->qs[1] = NTOK;
	struct attn_meta meta = {.n_seqs = 1,
				 .n_tokens = NTOK,
				 .query_start = s->qs,
				 .seq_lens = &s->L,
				 .block_table = s->bt,
				 .max_blocks = nb,
				 .dcp_size = W,
				 .dcp_rank = r,
				 .dcp_interleave = I,
				 .local_seq_lens = &s->local_len};
	struct arena ar;
	CHECK(arena_init(&ar, attn_sparse_scratch_bytes(pool_size(pool), NTOK, w->H, MAXSEL, LKV, ROPE) + 4096) == 0);
	struct attn_sparse_args a = {.meta = &meta,
				     .kv = &s->kv,
				     .layer = 0,
				     .n_heads = w->H,
				     .scale = 0.125f,
				     .tok0 = 0,
				     .n_tok = NTOK,
				     .sel_start = s->sel_start,
				     .sel = s->sel,
				     .q = w->q,
				     .out = s->out,
				     .lse = s->lse,
				     .cx = &(struct compute_ctx){.pool = pool, .scratch = &ar}};
	attn_backend_flashmla_sparse.sparse(&a);
	arena_fini(&ar);
	kv_cache_fini(&s->kv);
}

/* token t selects `want` positions among [0, p], those in `only` (-1: any) of rank
 * owner(., W, I) first, as a random subset */
static void pick(struct world *w, int t, int want, int W, int I, int only, int extra_other)
{
	int p = LEN - NTOK + t, n = w->sel_start[t], k = 0, others = 0;
	for (int g = 0; g <= p && k < want; g++) {
		bool mine = only < 0 || owner(g, W, I) == only;
		bool take = mine ? test_rand(&seed) % 4 == 0 || p - g < 4 * (want - k) : others < extra_other;
		if (take) {
			w->sel[n + k++] = g;
			others += !mine;
		}
	}
	w->sel_start[t + 1] = n + k;
}

static void check(struct world *w, int W, int I, struct pool *pool, const char *what)
{
	static struct shard whole, part[4];
	shard_run(w, &whole, 1, 0, 1, pool);
	for (int r = 0; r < W; r++)
		shard_run(w, &part[r], W, r, I, pool);
	int H = w->H;
	static float lses[4 * NTOK * 8], sum[NTOK * 8 * LKV];
	for (int r = 0; r < W; r++)
		memcpy(lses + (size_t)r * NTOK * H, part[r].lse, sizeof(float) * NTOK * H);
	memset(sum, 0, sizeof sum);
	for (int r = 0; r < W; r++) { /* as the model: correct each rank's partials, then sum */
		dcp_lse_correct(lses, W, NTOK, H, r, part[r].out, LKV, NULL);
		for (int i = 0; i < NTOK * H * LKV; i++)
			sum[i] += part[r].out[i];
	}
	double worst = 0;
	for (int i = 0; i < NTOK * H * LKV; i++)
		worst = fmax(worst, fabs(sum[i] - whole.out[i]));
	EXPECTF(worst < 1e-5, "%s: merged shards differ from one process by %g", what, worst);
}

static void make_world(struct world *w, int H)
{
	w->H = H;
	for (int p = 0; p < LEN; p++)
		for (int d = 0; d < ROW; d++)
			w->rows[p][d] = test_frand(&seed);
	for (int i = 0; i < NTOK * H * ROW; i++)
		w->q[i] = test_frand(&seed) * 0.5f;
}

static struct world w; /* large: static */

static void test_rank_holds_none_one_all(void)
{
	static const int shapes[][3] = {{2, 1, 3}, {2, 4, 5}, {3, 1, 3}, {4, 2, 1}, {2, 1, 6}};
	for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
		int W = shapes[c][0], I = shapes[c][1], H = shapes[c][2];
		make_world(&w, H);
		w.sel_start[0] = 0;
		pick(&w, 0, 8, W, I, 0, 0);  /* all on rank 0: the others hold none */
		pick(&w, 1, 8, W, I, 0, 1);  /* all but one on rank 0 */
		pick(&w, 2, 8, W, I, -1, 0); /* spread */
		pick(&w, 3, 1, W, I, 1, 0);  /* a single key, on rank 1 */
		pick(&w, 4, 8, W, I, 1, 0);  /* all on rank 1 */
		pick(&w, 5, 0, W, I, -1, 0); /* nothing selected anywhere */
		pick(&w, 6, 8, W, I, W - 1, 0);
		pick(&w, 7, 16, W, I, -1, 0);
		char what[64];
		snprintf(what, sizeof what, "W=%d I=%d, %d heads", W, I, H);
		struct pool *pool;
		struct err e;
		CHECK(pool_new(2, &pool, &e) == 0);
		check(&w, W, I, pool, what);
		pool_free(pool);
	}
}

static void test_split_keys_on_shards(void)
{
	/* few tokens with long selections: each rank splits its keys across threads */
	make_world(&w, 3);
	w.sel_start[0] = 0;
	for (int t = 0; t < NTOK; t++)
		pick(&w, t, t == 2 ? 600 : t == 5 ? 0 : 300 + 40 * t, 2, 1, t == 4 ? 0 : -1, 0);
	struct pool *pool;
	struct err e;
	CHECK(pool_new(2, &pool, &e) == 0);
	check(&w, 2, 1, pool, "long selections, W=2 I=1");
	check(&w, 3, 4, pool, "long selections, W=3 I=4");
	pool_free(pool);
	CHECK(pool_new(16, &pool, &e) == 0); /* more threads than items: split-KV */
	check(&w, 2, 1, pool, "long selections, 16 threads, W=2 I=1");
	pool_free(pool);
}

TESTS(T(test_rank_holds_none_one_all), T(test_split_keys_on_shards))
