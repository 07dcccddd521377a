/* DeepSeek-V4's attention under DCP (model_v4/v4_block.h): W ranks, each a thread with its own
 * paged pool and sequence state, run v4_attn_seq over the same chunks of one sequence (the
 * indexer's candidates all-gathered through a barrier, as the DCP group's collective); their
 * partials are corrected by the group's LSEs (dcp_lse_correct) and summed, as forward_v4.c's
 * reduce-scatter does, then the sink is added once and the heads un-roped. The result must be
 * one process's v4_attn_seq, and the CSA selection exactly its selection, for a CSA layer
 * (ratio 4, index_topk 8 of up to 50 entries) and an HCA one (ratio 16), 8 heads, at W = 2 and 4 and
 * interleave 1 and 4. Also: a rank that owns no key of a query returns o = 0 and LSE -inf, and
 * the two mistakes the merge must not make (the sink counted on every rank; an empty shard
 * given LSE 0) move the result far outside the tolerance, so this test would catch them. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attn/dcp.h"
#include "harness.h"
#include "model_v4/v4_attn.h"
#include "model_v4/v4_block.h"
#include "model_v4/v4_config.h"
#include "model_v4/v4_indexer.h"
#include "ops/pool.h"

#define LEN 200 /* the sequence's positions */
#define BS 16   /* physical block */
#define H 8     /* the group's heads: 4 or 2 a rank, 8 attended */
#define HD 96   /* tiny-v4's head_dim (32 RoPE dims) */
#define IH 4    /* indexer heads */
#define ID 64   /* indexer dim */
#define TOPK 8
#define WIN 16
#define MAXW 4

static uint64_t seed = 4242;

/* one sequence's inputs, as the forward's projections give them */
struct inputs {
	float q[LEN * H * HD], kv[LEN * HD], ckv[LEN * 2 * HD], csc[LEN * 2 * HD];
	float iq[LEN * IH * ID], iw[LEN * IH], ikv[LEN * 2 * ID], isc[LEN * 2 * ID];
	float sink[H];
};

struct layer {
	struct v4_rope rope;
	float ape[16 * 2 * HD], norm[HD], iape[4 * 2 * ID], inorm[ID];
	struct v4_attn_layer al;
};

static void frand(float *x, size_t n, float s)
{
	for (size_t i = 0; i < n; i++)
		x[i] = test_frand(&seed) * s;
}

static void make_layer(struct layer *L, int ratio, int W)
{
	struct v4_config cfg;
	struct err e = {{0}};
	CHECK(v4_config_load(fixture_path("tiny-v4"), &cfg, &e) == 0);
	CHECK(v4_rope_init_layer(&L->rope, &cfg, ratio, &e) == 0);
	frand(L->ape, sizeof L->ape / sizeof(float), 0.5f);
	frand(L->iape, sizeof L->iape / sizeof(float), 0.5f);
	for (int i = 0; i < HD; i++)
		L->norm[i] = 1 + test_frand(&seed) * 0.2f;
	for (int i = 0; i < ID; i++)
		L->inorm[i] = 1 + test_frand(&seed) * 0.2f;
	L->al = (struct v4_attn_layer){.ratio = ratio,
				       .n_heads = H / W,
				       .head_dim = HD,
				       .window = WIN,
				       .index_heads = IH,
				       .index_dim = ID,
				       .index_topk = TOPK,
				       .dcp_size = W,
				       .eps = 1e-6f,
				       .rope = L->rope};
	L->al.comp = (struct v4_comp){ratio, HD, 1e-6f, V4_COMP_KV, L->ape, L->norm, &L->rope};
	if (ratio == 4)
		L->al.icomp = (struct v4_comp){4, ID, 1e-6f, V4_COMP_INDEX, L->iape, L->inorm, &L->rope};
}

/* a rank of the group: its pool, state and partial outputs */
struct group;
struct rank {
	struct group *g;
	int r;
	float *pool, *state;
	void *work;
	int32_t bt[LEN / BS + 1];
	float o[LEN * H * HD], lse[LEN * H];
	int32_t sel[LEN * TOPK];
	int rc;
};

struct group {
	int W, I, chunk, ratio;
	const struct inputs *in;
	struct layer L;
	pthread_barrier_t bar;
	unsigned char buf[MAXW * 32 * TOPK * sizeof(struct v4_cand)];
	struct rank rk[MAXW];
};

static int gather(void *ctx, const void *send, size_t nbytes, void *recv, struct err *e)
{
	struct rank *k = ctx;
	struct group *g = k->g;
	CHECK(nbytes * (size_t)g->W <= sizeof g->buf);
	memcpy(g->buf + (size_t)k->r * nbytes, send, nbytes);
	pthread_barrier_wait(&g->bar);
	memcpy(recv, g->buf, nbytes * (size_t)g->W);
	pthread_barrier_wait(&g->bar);
	return 0;
}

/* rank k (W = 1: one process) over the sequence in chunks: o, lse, sel */
static void *rank_run(void *arg)
{
	struct rank *k = arg;
	struct group *g = k->g;
	const struct inputs *in = g->in;
	const struct v4_attn_layer *al = &g->L.al;
	int W = g->W, cw = g->ratio == 4 ? 2 * HD : HD;
	size_t ew = v4_comp_entry_floats(&al->comp), iw = g->ratio == 4 ? v4_comp_entry_floats(&al->icomp) : 0;
	size_t ne = (size_t)v4_page_slots_dcp(g->ratio, BS, W, g->I) * ew;
	size_t ni = (size_t)(g->ratio == 4 ? v4_page_slots_dcp(4, BS, W, g->I) : 0) * iw;
	int nb = LEN / (BS * W) + 1;
	k->pool = calloc((size_t)(nb + 1) * (ne + ni) + 1, sizeof(float));
	k->state = malloc(v4_seq_attn_floats(al) * sizeof(float));
	int most = g->chunk > 37 ? g->chunk : 37;
	k->work = aligned_alloc(64, (v4_attn_seq_work_bytes(al, LEN, most) + 63) / 64 * 64);
	CHECK(k->pool && k->state && k->work);
	for (int b = 0; b < nb; b++) /* scattered blocks, the same ids on every rank */
		k->bt[b] = 1 + (b * 5) % nb;
	struct v4_seq_attn st;
	v4_seq_attn_init(al, k->state, &st);
	struct v4_dcp d = {W, k->r, g->I, gather, k, NULL};
	/* two workers a rank, as the forward's pool: the heads split in ranges, each with its own
	 * region of the attention's scratch (sized for the heads attended, W x the rank's) */
	struct pool *workers;
	struct err pe = {{0}};
	CHECK(pool_new(2, &workers, &pe) == 0);
	struct v4_pages pg = {k->pool, ne + ni, k->bt, BS, 0, ne, ew, iw, workers, W > 1 ? &d : NULL};
	/* the step's buffers are rewritten in place (q, kv, the indexer's q and weights) */
	float *q = malloc(sizeof in->q), *kv = malloc(sizeof in->kv), *iq = malloc(sizeof in->iq),
	      *iwt = malloc(sizeof in->iw);
	CHECK(q && kv && iq && iwt);
	memcpy(q, in->q, sizeof in->q), memcpy(kv, in->kv, sizeof in->kv);
	memcpy(iq, in->iq, sizeof in->iq), memcpy(iwt, in->iw, sizeof in->iw);
	struct v4_attn_layer one = *al;
	if (W == 1)
		one.sink = in->sink;
	struct err e = {{0}};
	k->rc = 0;
	for (int t = 0; t < LEN && !k->rc;) {
		int n = t == 0 ? 37 : g->chunk; /* a first chunk over two windows, then the chunk */
		n = t + n > LEN ? LEN - t : n;
		d.lse = k->lse + (size_t)t * H;
		k->rc = v4_attn_seq(&one, &st, &pg, t, n, q + (size_t)t * H * HD, kv + (size_t)t * HD,
				    in->ckv + (size_t)t * (size_t)cw, in->csc + (size_t)t * (size_t)cw,
				    iq + (size_t)t * IH * ID, iwt + (size_t)t * IH, in->ikv + (size_t)t * 2 * ID,
				    in->isc + (size_t)t * 2 * ID, k->o + (size_t)t * H * HD,
				    g->ratio == 4 ? k->sel + (size_t)t * TOPK : NULL, k->work, LEN, &e);
		t += n;
	}
	if (k->rc)
		fprintf(stderr, "rank %d: %s\n", k->r, e.msg);
	free(q), free(kv), free(iq), free(iwt), free(k->pool), free(k->state), free(k->work);
	pool_free(workers);
	return NULL;
}

static void group_run(struct group *g, int W, int I, int ratio, int chunk, const struct inputs *in)
{
	g->W = W, g->I = I, g->ratio = ratio, g->chunk = chunk, g->in = in;
	seed = 99; /* the same layer weights for every group */
	make_layer(&g->L, ratio, W);
	pthread_barrier_init(&g->bar, NULL, (unsigned)W);
	pthread_t th[MAXW];
	for (int r = 0; r < W; r++) {
		g->rk[r].g = g, g->rk[r].r = r;
		CHECK(pthread_create(&th[r], NULL, rank_run, &g->rk[r]) == 0);
	}
	for (int r = 0; r < W; r++)
		pthread_join(th[r], NULL);
	pthread_barrier_destroy(&g->bar);
}

enum mistake { NONE, SINK_EVERY_RANK, EMPTY_LSE_ZERO };

/* the group's partials merged as forward_v4.c's dcp_merge does: out [LEN, H, HD] */
static void merge(struct group *g, enum mistake m, float *out)
{
	int W = g->W;
	static float lses[MAXW * LEN * H], part[MAXW][LEN * H * HD], lseg[LEN * H];
	memset(out, 0, sizeof(float) * LEN * H * HD);
	for (int r = 0; r < W; r++) {
		float *lr = lses + (size_t)r * LEN * H;
		memcpy(lr, g->rk[r].lse, sizeof g->rk[r].lse);
		memcpy(part[r], g->rk[r].o, sizeof part[r]);
		for (int i = 0; m == EMPTY_LSE_ZERO && i < LEN * H; i++)
			if (isinf(lr[i]))
				lr[i] = 0;
		for (int t = 0; m == SINK_EVERY_RANK && t < LEN; t++) /* each rank's partial with the sink */
			v4_attn_add_sink(H, HD, g->in->sink, part[r] + (size_t)t * H * HD, lr + (size_t)t * H);
	}
	for (int r = 0; r < W; r++) {
		dcp_lse_correct(lses, W, LEN, H, r, part[r], HD, lseg);
		for (int i = 0; i < LEN * H * HD; i++)
			out[i] += part[r][i];
	}
	for (int t = 0; t < LEN; t++) {
		if (m != SINK_EVERY_RANK)
			v4_attn_add_sink(H, HD, g->in->sink, out + (size_t)t * H * HD, lseg + (size_t)t * H);
		v4_attn_unrope(&g->L.rope, H, HD, out + (size_t)t * H * HD, t);
	}
}

static double max_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs((double)a[i] - b[i]));
	return m;
}

static struct inputs in;
static struct group one, many;
static float got[LEN * H * HD], bad[LEN * H * HD];

static void make_inputs(void)
{
	seed = 7;
	frand(in.q, sizeof in.q / sizeof(float), 1.0f);
	frand(in.kv, sizeof in.kv / sizeof(float), 1.0f);
	frand(in.ckv, sizeof in.ckv / sizeof(float), 1.0f);
	frand(in.csc, sizeof in.csc / sizeof(float), 1.0f);
	frand(in.iq, sizeof in.iq / sizeof(float), 1.0f);
	frand(in.iw, sizeof in.iw / sizeof(float), 1.0f);
	frand(in.ikv, sizeof in.ikv / sizeof(float), 1.0f);
	frand(in.isc, sizeof in.isc / sizeof(float), 1.0f);
	for (int h = 0; h < H; h++) /* sinks that weigh: each about the keys' logits */
		in.sink[h] = 1.0f + (float)h * 0.5f;
}

static void check(int ratio, int W, int I, int chunk)
{
	char what[96];
	snprintf(what, sizeof what, "ratio %d, W=%d I=%d, chunks of %d", ratio, W, I, chunk);
	group_run(&one, 1, 1, ratio, chunk, &in);
	group_run(&many, W, I, ratio, chunk, &in);
	for (int r = 0; r < W; r++)
		EXPECTF(many.rk[r].rc == 0, "%s: rank %d failed", what, r);
	EXPECT(one.rk[0].rc == 0);
	merge(&many, NONE, got);
	double d = max_diff(got, one.rk[0].o, (size_t)LEN * H * HD);
	EXPECTF(d < 1e-5, "%s: max |diff| %.3g against one process", what, d);
	if (ratio == 4)
		for (int r = 0; r < W; r++)
			EXPECTF(memcmp(many.rk[r].sel, one.rk[0].sel, sizeof one.rk[0].sel) == 0,
				"%s: rank %d's selection is not one process's", what, r);
	/* position 0 sees one key, which one rank owns: the others are empty shards */
	int empty = 0;
	for (int r = 0; r < W; r++)
		if (r != 0) {
			bool zero = true;
			for (int i = 0; i < H * HD; i++)
				zero = zero && many.rk[r].o[i] == 0;
			EXPECTF(zero && isinf(many.rk[r].lse[0]) && many.rk[r].lse[0] < 0,
				"%s: rank %d at position 0: o = 0 and LSE -inf (%g)", what, r, many.rk[r].lse[0]);
			empty++;
		}
	EXPECT(empty == W - 1);
	merge(&many, SINK_EVERY_RANK, bad);
	double ds = max_diff(bad, one.rk[0].o, (size_t)LEN * H * HD);
	EXPECTF(ds > 1e-2, "%s: the sink counted on every rank moves the result by %.3g only", what, ds);
	merge(&many, EMPTY_LSE_ZERO, bad);
	double dz = max_diff(bad, one.rk[0].o, (size_t)LEN * H * HD);
	EXPECTF(dz > 1e-2, "%s: an empty shard's LSE 0 moves the result by %.3g only", what, dz);
	printf("# %s: max |diff| %.2e; sink on every rank %.2e, empty LSE 0 %.2e\n", what, d, ds, dz);
}

static void test_csa(void)
{
	make_inputs();
	check(4, 2, 1, 7);
	check(4, 2, 4, 1);
	check(4, 4, 4, 5);
}

static void test_hca(void)
{
	make_inputs();
	check(16, 2, 1, 9);
	check(16, 4, 4, 3);
}

static void test_page_slots(void)
{
	/* one process's layout, and enough slots for every rank's entries of a virtual block */
	for (int r = 2; r <= 128; r *= 2)
		EXPECT_EQ_INT(v4_page_slots_dcp(r, BS, 1, 1), v4_page_slots(r, BS));
	EXPECT_EQ_INT(v4_page_slots_dcp(4, 16, 2, 1), 4);   /* 8 entries a virtual block, 4 a rank */
	EXPECT_EQ_INT(v4_page_slots_dcp(4, 16, 4, 4), 4);   /* 16 entries, runs of 4 a rank */
	EXPECT_EQ_INT(v4_page_slots_dcp(128, 16, 4, 4), 1); /* an entry every 2 virtual blocks */
}

TESTS(T(test_page_slots), T(test_csa), T(test_hca))
