/* DeepSeek Sparse Attention's top-k selection (attn/indexer.c) against a brute-force sort by
 * (score desc, position asc), with exact ties, short sequences (all keys), several sequences
 * and query lengths in one step, and under DCP (W ranks as threads with a real all-gather):
 * the union of the ranks' selections is the single process's, each rank keeps only its own. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attn/dcp.h"
#include "attn/indexer.h"
#include "attn/kernels/indexer_kernels.h"
#include "attn/kv_cache.h"
#include "base/dtype.h"
#include "harness.h"
#include "ops/cpu.h"
#include "ops/pool.h"

#define DIM 32
#define HEADS 4
#define BS 4
#define MAXLEN 2600

static uint64_t rng = 0x9e3779b97f4a7c15ull; /* the harness's generator */
static uint32_t rnd(void) { return test_rand(&rng); }
static float frand(void) { return test_frand(&rng); }

/* keys of one sequence: codes [MAXLEN][DIM], one scale each (group = DIM); every 5th key
 * repeats an earlier one so that scores tie exactly */
struct keys {
	uint8_t codes[MAXLEN][DIM];
	float scale[MAXLEN];
};

static void make_keys(struct keys *k)
{
	for (int p = 0; p < MAXLEN; p++) {
		if (p >= 5 && p % 5 == 0) {
			memcpy(k->codes[p], k->codes[p / 2], DIM);
			k->scale[p] = k->scale[p / 2];
			continue;
		}
		for (int d = 0; d < DIM; d++) {
			uint8_t c = (uint8_t)(rnd() & 0xff);
			if ((c & 0x7f) == 0x7f) /* not NaN */
				c ^= 1;
			k->codes[p][d] = c;
		}
		k->scale[p] = ldexpf(1.0f, -(int)(rnd() % 6));
	}
}

/* one step: seqs with their lengths L and query lengths q; q/w per token */
struct step {
	int n_seqs, n_tok;
	int32_t qs[5], L[5];
	float q[64][HEADS * DIM], w[64][HEADS];
	struct keys keys[4];
};

static const float *g_sc;
static int by_score(const void *x, const void *y)
{
	int a = *(const int *)x, b = *(const int *)y;
	if (g_sc[a] != g_sc[b])
		return g_sc[a] > g_sc[b] ? -1 : 1;
	return (a > b) - (a < b);
}

/* brute force: token t (sequence i, position p) selects the topk best of positions [0, p] */
static int brute(const struct step *s, int t, int topk, int32_t *out)
{
	int i = 0;
	while (t >= s->qs[i + 1])
		i++;
	int p = s->L[i] - (s->qs[i + 1] - s->qs[i]) + (t - s->qs[i]);
	int n = p + 1, k = n < topk ? n : topk;
	static float sc[MAXLEN];
	static int ord[MAXLEN];
	for (int j = 0; j < n; j++) {
		sc[j] = attn_index_score(s->q[t], s->w[t], HEADS, DIM, DIM, s->keys[i].codes[j], &s->keys[i].scale[j]);
		ord[j] = j;
	}
	g_sc = sc;
	qsort(ord, (size_t)n, sizeof *ord, by_score); /* score desc, position asc */
	for (int j = 0; j < k; j++)
		out[j] = ord[j];
	for (int a = 1; a < k; a++)
		for (int b = a; b > 0 && out[b] < out[b - 1]; b--) {
			int32_t x = out[b];
			out[b] = out[b - 1];
			out[b - 1] = x;
		}
	return k;
}

/* rank r of W (W = 1: one process) with its own cache and metadata */
struct rank {
	const struct step *s;
	int W, r, I, topk;
	struct kv_cache kv;
	int32_t bt[4][MAXLEN / BS + 1], local[4];
	int64_t slots[64];
	struct attn_meta meta;
	struct arena arena;
	struct pool *pool;
	int32_t sel_start[65], *sel;
	int rc;
	struct err e;
};

static pthread_barrier_t bar;
static unsigned char *g_buf; /* [W][max bytes] */
static size_t g_max;

static int gather(void *ctx, const void *send, size_t nbytes, void *recv, struct err *e)
{
	struct rank *k = ctx;
	memcpy(g_buf + (size_t)k->r * g_max, send, nbytes);
	pthread_barrier_wait(&bar);
	for (int j = 0; j < k->W; j++)
		memcpy((unsigned char *)recv + (size_t)j * nbytes, g_buf + (size_t)j * g_max, nbytes);
	pthread_barrier_wait(&bar);
	return 0;
}

static void rank_setup(struct rank *k, const struct step *s, int W, int r, int I, int topk)
{
	struct err e;
	memset(k, 0, sizeof *k);
	k->s = s;
	k->W = W;
	k->r = r;
	k->I = I;
	k->topk = topk;
	int per = MAXLEN / BS + 1;
	CHECK(kv_cache_init_indexed(&k->kv, 1, 4 * per + 1, BS, 8, 2, DT_F32, DIM, &e) == 0);
	for (int i = 0; i < s->n_seqs; i++) {
		for (int b = 0; b < per; b++)                               /* scattered pages */
			k->bt[i][b] = 1 + (b * 11 + i * 3) % per + i * per; /* 11: prime to per = 651 */
		k->local[i] = W > 1 ? dcp_local_seq_len(s->L[i], W, r, I) : s->L[i];
		for (int j = 0; j < k->local[i]; j++) {
			int64_t g = W > 1 ? dcp_global_pos(j, W, r, I) : j;
			int64_t slot = kv_cache_slot(k->bt[i], BS, j);
			kv_cache_index_write(&k->kv, 0, &slot, s->keys[i].codes[g], &s->keys[i].scale[g], 1);
		}
	}
	k->meta = (struct attn_meta){.n_seqs = s->n_seqs,
				     .n_tokens = s->n_tok,
				     .query_start = s->qs,
				     .seq_lens = s->L,
				     .block_table = &k->bt[0][0],
				     .max_blocks = per,
				     .slots = k->slots,
				     .dcp_size = W,
				     .dcp_rank = r,
				     .dcp_interleave = I,
				     .local_seq_lens = k->local};
	CHECK(arena_init(&k->arena, attn_index_scratch_bytes(s->n_tok, HEADS, DIM, topk, MAXLEN, 2, W) + 4096) == 0);
	CHECK(pool_new(2, &k->pool, &e) == 0);
}

static void rank_fini(struct rank *k)
{
	kv_cache_fini(&k->kv);
	arena_fini(&k->arena);
	pool_free(k->pool);
}

static void *rank_run(void *arg)
{
	struct rank *k = arg;
	float q[64 * HEADS * DIM], w[64 * HEADS];
	for (int t = 0; t < k->s->n_tok; t++) {
		memcpy(q + (size_t)t * HEADS * DIM, k->s->q[t], sizeof k->s->q[t]);
		memcpy(w + (size_t)t * HEADS, k->s->w[t], sizeof k->s->w[t]);
	}
	struct attn_index_args a = {.meta = &k->meta,
				    .kv = &k->kv,
				    .layer = 0,
				    .n_heads = HEADS,
				    .topk = k->topk,
				    .q = q,
				    .w = w,
				    .pool = k->pool,
				    .scratch = &k->arena,
				    .dcp_allgather = gather,
				    .dcp_ctx = k};
	k->rc = attn_index_select(&a, k->sel_start, &k->sel, &k->e);
	return NULL;
}

static void make_step(struct step *s, int n_seqs, const int *L, const int *q)
{
	memset(s, 0, sizeof *s);
	s->n_seqs = n_seqs;
	for (int i = 0; i < n_seqs; i++) {
		s->L[i] = L[i];
		s->qs[i + 1] = s->qs[i] + q[i];
		make_keys(&s->keys[i]);
	}
	s->n_tok = s->qs[n_seqs];
	for (int t = 0; t < s->n_tok; t++) {
		for (int h = 0; h < HEADS * DIM; h++)
			s->q[t][h] = frand();
		for (int h = 0; h < HEADS; h++)
			s->w[t][h] = frand(); /* some negative: relu(dot) weighted both ways */
	}
}

/* the step at W ranks (interleave I) against the brute force, token by token */
static void check_step(const struct step *s, int W, int I, int topk, const char *what)
{
	struct rank *k = calloc((size_t)W, sizeof *k);
	pthread_t th[8];
	g_max = attn_index_scratch_bytes(s->n_tok, HEADS, DIM, topk, MAXLEN, 2, W);
	g_buf = malloc(g_max * (size_t)W);
	pthread_barrier_init(&bar, NULL, (unsigned)W);
	for (int r = 0; r < W; r++)
		rank_setup(&k[r], s, W, r, I, topk);
	for (int r = 0; r < W; r++)
		pthread_create(&th[r], NULL, rank_run, &k[r]);
	for (int r = 0; r < W; r++)
		pthread_join(th[r], NULL);
	int bad = 0;
	for (int t = 0; t < s->n_tok && !bad; t++) {
		static int32_t want[MAXLEN], got[MAXLEN];
		int nw = brute(s, t, topk, want), ng = 0;
		for (int r = 0; r < W; r++) {
			EXPECTF(k[r].rc == 0, "%s: %s", what, k[r].e.msg);
			for (int j = k[r].sel_start[t]; j < k[r].sel_start[t + 1]; j++) {
				/* ascending local indices, each a key of this rank */
				if (j > k[r].sel_start[t] && k[r].sel[j] <= k[r].sel[j - 1])
					bad = 1;
				got[ng++] = (int32_t)(W > 1 ? dcp_global_pos(k[r].sel[j], W, r, I) : k[r].sel[j]);
			}
		}
		for (int a = 1; a < ng; a++)
			for (int b = a; b > 0 && got[b] < got[b - 1]; b--) {
				int32_t x = got[b];
				got[b] = got[b - 1];
				got[b - 1] = x;
			}
		bad |= ng != nw || memcmp(got, want, sizeof(int32_t) * (size_t)nw);
		EXPECTF(!bad, "%s: token %d selects %d keys, brute force %d (first %d vs %d)", what, t, ng, nw,
			ng ? got[0] : -1, nw ? want[0] : -1);
	}
	for (int r = 0; r < W; r++)
		rank_fini(&k[r]);
	pthread_barrier_destroy(&bar);
	free(g_buf);
	free(k);
}

static struct step s; /* large: static */

static void test_select_matches_brute_force(void)
{
	static const int L[] = {90, 7, 40, 17}, q[] = {1, 7, 12, 3};
	make_step(&s, 4, L, q);
	check_step(&s, 1, 1, 16, "W=1 k=16");
	check_step(&s, 1, 1, 1, "W=1 k=1");
	check_step(&s, 1, 1, 64, "W=1 k=64");
}

static void test_dcp_merge_is_exact(void)
{
	/* rank shards with fewer keys than k (L 7 over 4 ranks), long ones, a decode */
	static const int L[] = {90, 7, 40, 17}, q[] = {1, 7, 12, 3};
	make_step(&s, 4, L, q);
	check_step(&s, 2, 1, 16, "W=2 I=1");
	check_step(&s, 4, 1, 16, "W=4 I=1");
	check_step(&s, 2, 4, 8, "W=2 I=4");
	check_step(&s, 4, 2, 16, "W=4 I=2");
	check_step(&s, 4, 4, 3, "W=4 I=4 k=3");
}

/* decode batches: fewer token groups than twice the threads, so their keys are split across
 * the threads in chunks of 1024 (the long contexts cross chunk boundaries) */
static void test_few_tokens_split_keys(void)
{
	static const int L1[] = {2600}, q1[] = {1}, L2[] = {2600, 1500}, q2[] = {2, 1};
	make_step(&s, 1, L1, q1);
	check_step(&s, 1, 1, 16, "decode W=1");
	check_step(&s, 2, 1, 16, "decode W=2");
	check_step(&s, 4, 2, 40, "decode W=4 I=2");
	make_step(&s, 2, L2, q2);
	check_step(&s, 1, 1, 16, "two seqs W=1");
	check_step(&s, 2, 4, 16, "two seqs W=2 I=4");
}

/* Every level's kernels (decode a block of keys, then score one token) against a double
 * computation: the scores agree to fp32 rounding, blocks full and partial, one scale group
 * per key and several (the bf16-pair kernels take only the first) */
static void test_kernels_match_double(void)
{
	static const int shapes[][3] = {{32, 32, 4}, {128, 128, 64}, {64, 32, 8}, {16, 16, 3}};
	static uint8_t base[IX_KB * 128 + 64];
	static float q[64 * 128];
	_Alignas(64) static unsigned char kt[IX_KT_BYTES];
	static uint16_t qb[64 * 128];
	for (int l = OPS_PORTABLE; l <= (int)ops_level_best(); l++)
		for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++) {
			int dim = shapes[sh][0], group = shapes[sh][1], H = shapes[sh][2], G = dim / group;
			struct ix_kernels k = ix_kernels_for((enum ops_level)l, dim, group);
			float w[64], scale[IX_KB][8];
			const float *sc[IX_KB];
			int32_t off[IX_KB];
			for (int j = 0; j < IX_KB; j++) {
				off[j] = ((j * 7) % IX_KB) * dim; /* rows out of order */
				for (int g = 0; g < G; g++)
					scale[j][g] = ldexpf(1.0f, -(int)(rnd() % 8));
				sc[j] = scale[j];
			}
			for (int i = 0; i < IX_KB * dim; i++) {
				uint8_t c = (uint8_t)rnd();
				base[i] = (c & 0x7f) == 0x7f ? (uint8_t)(c ^ 1) : c;
			}
			for (int i = 0; i < H * dim; i++) {
				uint8_t c = (uint8_t)rnd();
				q[i] = fp8_e4m3_to_f32((c & 0x7f) == 0x7f ? (uint8_t)(c ^ 1) : c) * 0.125f;
			}
			for (int h = 0; h < H; h++)
				w[h] = frand();
			ix_q_to_bf16(q, H * dim, qb);
			for (int n = IX_KB; n >= 13; n -= 19) {
				float s[IX_KB];
				k.decode(base, off, sc, n, dim, group, kt);
				k.dots(q, qb, w, H, dim, kt, s);
				int bad = -1;
				double worst = 0;
				for (int j = 0; j < n; j++) {
					double ref = 0, mag = 0;
					for (int h = 0; h < H; h++) {
						double dot = 0, am = 0;
						for (int d = 0; d < dim; d++) {
							double x = (double)q[h * dim + d] *
								   fp8_e4m3_to_f32(base[off[j] + d]) *
								   scale[j][d / group];
							dot += x;
							am += fabs(x);
						}
						ref += dot > 0 ? w[h] * dot : 0;
						mag += fabs(w[h]) * am;
					}
					double got = k.unscaled ? (double)s[j] * scale[j][0] : s[j];
					double err = fabs(got - ref) / (mag + 1e-30);
					if (err > worst)
						worst = err, bad = err > 1e-5 ? j : bad;
				}
				EXPECTF(bad < 0, "%s dim %d group %d heads %d, %d keys: key %d off by %g (relative)",
					ops_level_name((enum ops_level)l), dim, group, H, n, bad, worst);
			}
		}
}

TESTS(T(test_kernels_match_double), T(test_select_matches_brute_force), T(test_dcp_merge_is_exact),
      T(test_few_tokens_split_keys))
