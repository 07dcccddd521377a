/* DeepSeek Sparse Attention's top-k selection over the paged indexer cache (see indexer.h). */
#include "attn/indexer.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/dcp.h"
#include "attn/kernels/indexer_kernels.h"
#include "attn/kv_cache.h"
#include "base/dtype.h"
#include "ops/cpu.h"
#include "ops/pool.h"

#define KB IX_KB
#define MAX_DIM IX_MAX_DIM
#define DCP_MAX 256 /* ranks of a DCP group the merge takes */

struct cand {
	float s;
	int32_t pos; /* global position; -1: padding, worse than any key */
};

static float clean(float s) { return isnan(s) ? -INFINITY : s; } /* NaN (never from act_quant): the worst */

float attn_index_score(const float *q, const float *w, int n_heads, int dim, int group, const uint8_t *codes,
		       const float *scales)
{
	struct ix_kernels k = ix_kernels_for(ops_level_best(), dim, group);
	/* heap, not static or thread-local storage: every thread would pay for it */
	unsigned char *kt = aligned_alloc(64, IX_KT_BYTES);
	uint16_t *qb = malloc(sizeof(uint16_t) * (size_t)n_heads * (size_t)dim);
	uint8_t *pad = calloc((size_t)dim + 4, 1); /* the gathers read past the row */
	float s[KB] = {0}, r = NAN;
	int32_t off = 0;
	if (kt && qb && pad) {
		memcpy(pad, codes, (size_t)dim);
		if (k.unscaled)
			ix_q_to_bf16(q, n_heads * dim, qb);
		k.decode(pad, &off, &scales, 1, dim, group, kt);
		k.dots(q, qb, w, n_heads, dim, kt, s);
		r = clean(k.unscaled ? s[0] * scales[0] : s[0]);
	}
	free(kt);
	free(qb);
	free(pad);
	return r;
}

#define GT 8       /* tokens of one sequence scored together (each key block decoded once) */
#define CHUNK 1024 /* keys of one work item when few tokens score (a multiple of KB) */

/* A group: consecutive selecting tokens [t0, t0 + n) of one sequence (which sees at most
 * nvis_max local keys); the few-token mode splits it into items of CHUNK keys. */
struct group {
	int t0, n, seq, nvis_max;
};

struct sel_ctx {
	const struct attn_index_args *a;
	struct ix_kernels k;
	const uint16_t *qb;     /* [n_tokens, n_heads, dim] q in bf16 (the bf16 kernels) */
	const int32_t *seq_of;  /* [n_tokens] */
	int32_t *sel, *count;   /* [n_tokens, topk], [n_tokens] */
	const int32_t *row_of;  /* [n_tokens] candidate row (DCP), -1 none */
	struct cand *send;      /* [n_rows, topk] (DCP) */
	const struct cand *all; /* [W, n_rows, topk] (DCP) */
	int n_rows;
	const struct group *groups;
	int n_groups;
	const int32_t *item0; /* few-token mode: [n_groups + 1] first item of each group */
	struct cand **scores; /* [n_tokens] a selecting token's candidates: its own row of
				 * tbuf (few-token mode) or its thread's (group mode) */
	struct cand *tbuf;    /* few-token: [n_sel_tokens, max_vis]; group: [n_threads, GT, max_vis] */
	size_t max_vis;
	struct cand *merge_buf; /* [n_threads, W * topk] */
	int32_t *idx_buf;       /* [n_threads, topk] a token's selected candidates */
	unsigned char *kt_buf;  /* [n_threads] decoded key blocks */
};

/* token t's sequence, query length, position and the local keys it sees */
static void token_view(const struct attn_meta *m, const int32_t *seq_of, int t, int *i, int *p, int *nvis)
{
	*i = seq_of[t];
	int q = m->query_start[*i + 1] - m->query_start[*i], L = m->seq_lens[*i], tl = t - m->query_start[*i];
	*p = L - q + tl;
	if (m->dcp_size > 1) {
		*nvis = dcp_visible_keys(L, q, tl, m->dcp_size, m->dcp_rank, m->dcp_interleave, m->local_seq_lens[*i]);
	} else {
		*nvis = *p + 1;
	}
}

static size_t kt_bytes(void) { return IX_KT_BYTES + 64; }

/* local keys [k0, k1) of group g scored for each of its tokens that sees them, into
 * c->scores[t][key] (global positions under DCP) */
static void score_block_range(struct sel_ctx *c, const struct group *g, int k0, int k1, int tid)
{
	const struct attn_index_args *a = c->a;
	const struct attn_meta *m = a->meta;
	const struct kv_cache *kv = a->kv;
	int H = a->n_heads, dim = kv->index_dim, group = kv_cache_index_group(dim);
	int W = m->dcp_size > 1 ? m->dcp_size : 1, r = W > 1 ? m->dcp_rank : 0, I = W > 1 ? m->dcp_interleave : 1;
	float *kt = (float *)(((uintptr_t)(c->kt_buf + (size_t)tid * kt_bytes()) + 63) & ~(uintptr_t)63);
	const int32_t *bt = m->block_table + (size_t)g->seq * m->max_blocks;
	const uint8_t *base = kv_cache_index_codes(kv, a->layer, 0);
	int nvis[GT];
	for (int u = 0; u < g->n; u++) {
		int i, p;
		token_view(m, c->seq_of, g->t0 + u, &i, &p, &nvis[u]);
	}
	for (int j0 = k0; j0 < k1; j0 += KB) {
		int nk = k1 - j0 < KB ? k1 - j0 : KB;
		int32_t off[KB];
		const float *sc[KB];
		for (int j = 0; j < nk; j++) {
			int64_t slot = kv_cache_slot(bt, kv->block_size, j0 + j);
			off[j] = (int32_t)(slot * dim);
			sc[j] = kv_cache_index_scales(kv, a->layer, slot);
		}
		c->k.decode(base, off, sc, nk, dim, group, kt);
		for (int u = 0; u < g->n; u++) {
			if (j0 >= nvis[u])
				continue;
			int t = g->t0 + u;
			float s[KB];
			c->k.dots(a->q + (size_t)t * H * dim, c->qb ? c->qb + (size_t)t * H * dim : NULL,
				  a->w + (size_t)t * H, H, dim, kt, s);
			struct cand *out = c->scores[t];
			int n = nvis[u] - j0 < nk ? nvis[u] - j0 : nk;
			if (c->k.unscaled) /* one power-of-two scale a key: exact */
				for (int j = 0; j < n; j++)
					s[j] *= sc[j][0];
			for (int j = 0; j < n; j++)
				out[j0 + j] = (struct cand){
					clean(s[j]), (int32_t)(W > 1 ? dcp_global_pos(j0 + j, W, r, I) : j0 + j)};
		}
	}
}

/* token t's top-k of its scored keys: its selection (one process) or its candidates (DCP) */
/* the score's bits in an order-preserving unsigned form (higher score, larger key) */
static inline uint32_t order_key(float s)
{
	uint32_t u;
	s += 0.0f; /* -0 is +0, as the comparison has it */
	memcpy(&u, &s, 4);
	return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* The k best (1 <= k <= n) of candidates c[0, n) that are in ascending position order, as
 * indices into c, ascending, into idx: a radix select of the k-th largest score key (three
 * passes of 11, 11 and 10 bits), then every key above it and the first of those equal to it
 * (the lower positions: the selection's total order). Linear, and the output needs no sort. */
static void select_sorted(const struct cand *c, int n, int k, int32_t *idx)
{
	static const int shift[3] = {21, 10, 0}, bits[3] = {11, 11, 10};
	uint32_t prefix = 0, pmask = 0;
	int need = k; /* of the keys matching prefix, how many are still to take from the top */
	for (int pass = 0; pass < 3; pass++) {
		int32_t hist[2048] = {0};
		uint32_t dmask = (1u << bits[pass]) - 1;
		for (int j = 0; j < n; j++) {
			uint32_t key = order_key(c[j].s);
			if ((key & pmask) == prefix)
				hist[(key >> shift[pass]) & dmask]++;
		}
		int d = (int)dmask;
		while (hist[d] < need) /* the digit holding the need-th largest */
			need -= hist[d--];
		prefix |= (uint32_t)d << shift[pass];
		pmask |= dmask << shift[pass];
	}
	/* prefix is the k-th largest key; `need` of those equal to it are taken */
	int o = 0;
	for (int j = 0; j < n && o < k; j++) {
		uint32_t key = order_key(c[j].s);
		if (key > prefix || (key == prefix && need-- > 0))
			idx[o++] = j;
	}
}

/* token t's top-k of its scored keys: its selection (one process) or its candidates (DCP) */
static void finish_token(struct sel_ctx *c, int t, int32_t *idx)
{
	const struct attn_meta *m = c->a->meta;
	int K = c->a->topk, i, p, nvis;
	token_view(m, c->seq_of, t, &i, &p, &nvis);
	const struct cand *buf = c->scores[t];
	int k = nvis < K ? nvis : K;
	if (k > 0)
		select_sorted(buf, nvis, k, idx);
	if (m->dcp_size <= 1) {
		int32_t *out = c->sel + (size_t)t * K;
		for (int j = 0; j < k; j++)
			out[j] = buf[idx[j]].pos;
		c->count[t] = k;
		return;
	}
	struct cand *row = c->send + (size_t)c->row_of[t] * K;
	for (int j = 0; j < K; j++)
		row[j] = j < k ? buf[idx[j]] : (struct cand){-INFINITY, -1};
}

/* group mode: a thread scores a whole group into its own buffers and finishes its tokens */
static void group_range(void *vctx, int begin, int end, int tid)
{
	struct sel_ctx *c = vctx;
	for (int gi = begin; gi < end; gi++) {
		const struct group *g = &c->groups[gi];
		for (int u = 0; u < g->n; u++)
			c->scores[g->t0 + u] = c->tbuf + ((size_t)tid * GT + (size_t)u) * c->max_vis;
		score_block_range(c, g, 0, g->nvis_max, tid);
		for (int u = 0; u < g->n; u++)
			finish_token(c, g->t0 + u, c->idx_buf + (size_t)tid * c->a->topk);
	}
}

/* few-token mode: items are (group, chunk of keys) */
static void chunk_range(void *vctx, int begin, int end, int tid)
{
	struct sel_ctx *c = vctx;
	for (int it = begin; it < end; it++) {
		int lo = 0, hi = c->n_groups - 1;
		while (lo < hi) { /* the group whose items hold it */
			int mid = (lo + hi + 1) / 2;
			if (c->item0[mid] <= it)
				lo = mid;
			else
				hi = mid - 1;
		}
		const struct group *g = &c->groups[lo];
		int k0 = (it - c->item0[lo]) * CHUNK, k1 = k0 + CHUNK < g->nvis_max ? k0 + CHUNK : g->nvis_max;
		score_block_range(c, g, k0, k1, tid);
	}
}

static void finish_range(void *vctx, int begin, int end, int tid)
{
	struct sel_ctx *c = vctx;
	for (int gi = begin; gi < end; gi++)
		for (int u = 0; u < c->groups[gi].n; u++)
			finish_token(c, c->groups[gi].t0 + u, c->idx_buf + (size_t)tid * c->a->topk);
}

/* DCP: the ranks' candidates of each selecting token (each rank's in ascending position,
 * padded with -1) merged by position into one ascending list, its global top-k taken as one
 * process takes it (select_sorted), and of those this rank keeps the keys it stores, as
 * local indices (ascending: a rank's local index grows with the global position) */
static void merge_range(void *vctx, int begin, int end, int tid)
{
	struct sel_ctx *c = vctx;
	const struct attn_meta *m = c->a->meta;
	int K = c->a->topk, W = m->dcp_size, r = m->dcp_rank, I = m->dcp_interleave;
	struct cand *buf = c->merge_buf + (size_t)tid * W * K;
	int32_t *idx = c->idx_buf + (size_t)tid * K;
	for (int t = begin; t < end; t++) {
		int row = c->row_of[t];
		if (row < 0)
			continue;
		int n = 0, head[DCP_MAX];
		for (int k = 0; k < W; k++)
			head[k] = 0;
		for (;;) { /* W-way merge by position */
			const struct cand *best = NULL;
			int from = -1;
			for (int k = 0; k < W; k++) {
				const struct cand *x = c->all + ((size_t)k * c->n_rows + (size_t)row) * K + head[k];
				if (head[k] < K && x->pos >= 0 && (!best || x->pos < best->pos))
					best = x, from = k;
			}
			if (!best)
				break;
			buf[n++] = *best;
			head[from]++;
		}
		int k = n < K ? n : K, own = 0;
		if (k > 0)
			select_sorted(buf, n, k, idx);
		int32_t *out = c->sel + (size_t)t * K;
		for (int j = 0; j < k; j++) {
			int64_t g = buf[idx[j]].pos;
			if ((g / I) % W == r)
				out[own++] = (int32_t)((g / ((int64_t)W * I)) * I + g % I);
		}
		c->count[t] = own;
	}
}

/* few-token mode when the groups are fewer than twice the threads (decode batches): their
 * keys are split across threads instead */
static bool few_tokens(int n_groups, int n_threads) { return n_groups < 2 * n_threads; }

int attn_index_select(const struct attn_index_args *a, int32_t *sel_start, int32_t **sel, struct err *e)
{
	const struct attn_meta *m = a->meta;
	int n = m->n_tokens, K = a->topk, W = m->dcp_size > 1 ? m->dcp_size : 1;
	if (W > DCP_MAX)
		return err_set(e, "indexer: a DCP group of %d ranks (at most %d)", W, DCP_MAX);
	if (!a->kv->index_codes || a->kv->index_dim > MAX_DIM || K < 1 ||
	    kv_cache_n_slots(a->kv) * a->kv->index_dim >= INT32_MAX)
		return err_set(e, "indexer: no indexer cache (or key width %d, top-k %d, %lld slots)",
			       a->kv->index_dim, K, (long long)kv_cache_n_slots(a->kv));
	struct arena *ar = a->scratch;
	int32_t *seq_of = arena_alloc(ar, sizeof(int32_t) * (size_t)n);
	int32_t *row_of = arena_alloc(ar, sizeof(int32_t) * (size_t)n);
	int32_t *count = arena_alloc(ar, sizeof(int32_t) * (size_t)n);
	int32_t *s = arena_alloc(ar, sizeof(int32_t) * (size_t)n * K);
	struct group *groups = arena_alloc(ar, sizeof(struct group) * (size_t)n);
	struct cand **scores = arena_alloc(ar, sizeof(struct cand *) * (size_t)n);
	int max_vis = 0, n_rows = 0, ng = 0, n_sel = 0;
	for (int i = 0; i < m->n_seqs; i++)
		for (int t = m->query_start[i]; t < m->query_start[i + 1]; t++)
			seq_of[t] = i;
	for (int t = 0; t < n; t++) {
		int i, p, nvis;
		token_view(m, seq_of, t, &i, &p, &nvis);
		row_of[t] = -1;
		if (p + 1 <= K) { /* it sees no more than k keys: all of them */
			for (int j = 0; j < nvis; j++)
				s[(size_t)t * K + j] = j;
			count[t] = nvis;
			continue;
		}
		row_of[t] = W > 1 ? n_rows++ : -1;
		max_vis = nvis > max_vis ? nvis : max_vis;
		n_sel++;
		struct group *g = ng ? &groups[ng - 1] : NULL;
		if (g && g->seq == i && g->t0 + g->n == t && g->n < GT) {
			g->n++;
		} else {
			g = &groups[ng++];
			*g = (struct group){.t0 = t, .n = 1, .seq = i};
		}
		g->nvis_max = nvis > g->nvis_max ? nvis : g->nvis_max;
	}
	int nt = pool_size(a->pool) > 0 ? pool_size(a->pool) : 1;
	int dim = a->kv->index_dim;
	struct sel_ctx c = {.a = a,
			    .k = ix_kernels_for(ops_level_best(), dim, kv_cache_index_group(dim)),
			    .seq_of = seq_of,
			    .sel = s,
			    .count = count,
			    .row_of = row_of,
			    .n_rows = n_rows,
			    .groups = groups,
			    .n_groups = ng,
			    .scores = scores,
			    .max_vis = (size_t)max_vis};
	c.kt_buf = arena_alloc(ar, kt_bytes() * (size_t)nt);
	if (c.k.unscaled && ng > 0) {
		uint16_t *qb = arena_alloc(ar, sizeof(uint16_t) * (size_t)n * a->n_heads * dim);
		ix_q_to_bf16(a->q, n * a->n_heads * dim, qb);
		c.qb = qb;
	}
	c.merge_buf = arena_alloc(ar, sizeof(struct cand) * (size_t)W * K * (size_t)nt);
	c.idx_buf = arena_alloc(ar, sizeof(int32_t) * (size_t)K * (size_t)nt);
	if (W > 1 && n_rows > 0)
		c.send = arena_alloc(ar, sizeof(struct cand) * (size_t)n_rows * K);
	if (ng > 0 && few_tokens(ng, nt)) {
		c.tbuf = arena_alloc(ar, sizeof(struct cand) * (size_t)n_sel * (size_t)max_vis);
		int32_t *item0 = arena_alloc(ar, sizeof(int32_t) * (size_t)(ng + 1));
		item0[0] = 0;
		for (int gi = 0, k = 0; gi < ng; gi++) {
			for (int u = 0; u < groups[gi].n; u++, k++)
				scores[groups[gi].t0 + u] = c.tbuf + (size_t)k * (size_t)max_vis;
			item0[gi + 1] = item0[gi] + (groups[gi].nvis_max + CHUNK - 1) / CHUNK;
		}
		c.item0 = item0;
		pool_for(a->pool, item0[ng], 1, chunk_range, &c);
		pool_for(a->pool, ng, 1, finish_range, &c);
	} else if (ng > 0) {
		c.tbuf = arena_alloc(ar, sizeof(struct cand) * (size_t)nt * GT * (size_t)max_vis);
		pool_for(a->pool, ng, 1, group_range, &c);
	}
	if (W > 1 && n_rows > 0) {
		/* every rank has the same tokens, so the same rows: one gather per layer */
		struct cand *all = arena_alloc(ar, sizeof(struct cand) * (size_t)W * n_rows * K);
		if (a->dcp_allgather(a->dcp_ctx, c.send, sizeof(struct cand) * (size_t)n_rows * K, all, e))
			return err_prefix(e, "indexer: top-k all-gather");
		c.all = all;
		pool_for(a->pool, n, 1, merge_range, &c);
	}
	/* compact the rows into sel[sel_start[t] ..) */
	sel_start[0] = 0;
	for (int t = 0; t < n; t++) {
		if (sel_start[t] != t * K)
			memmove(s + sel_start[t], s + (size_t)t * K, sizeof(int32_t) * (size_t)count[t]);
		sel_start[t + 1] = sel_start[t] + count[t];
	}
	*sel = s;
	return 0;
}

size_t attn_index_scratch_bytes(int n_tokens, int n_heads, int dim, int topk, int max_keys, int n_threads,
				int dcp_size)
{
	size_t n = (size_t)n_tokens, K = (size_t)topk, W = (size_t)(dcp_size > 1 ? dcp_size : 1);
	size_t nt = (size_t)(n_threads > 0 ? n_threads : 1), vis = (size_t)(max_keys > 0 ? max_keys : 1);
	/* score buffers: the group mode's per thread, or the few-token mode's (fewer than 2 x nt
	 * groups of at most GT tokens) per token */
	size_t few = 2 * nt * GT < n ? 2 * nt * GT : n, bufs = (nt * GT > few ? nt * GT : few) * vis;
	size_t bytes = 3 * (4 * n + 64) + 4 * n * K + 64 + (sizeof(struct group) + sizeof(void *)) * n + 128 +
		       sizeof(struct cand) * bufs + 64 + kt_bytes() * nt + 64 + sizeof(struct cand) * W * K * nt + 64 +
		       4 * (n + 1) + 64 + 2 * n * (size_t)n_heads * (size_t)dim + 64 + 4 * K * nt + 64;
	if (W > 1)
		bytes += sizeof(struct cand) * n * K * (1 + W) + 128;
	return bytes;
}
