/* DeepSeek Sparse Attention's top-k selection over the paged indexer cache (see indexer.h). */
#include "attn/indexer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/dcp.h"
#include "attn/kv_cache.h"
#include "base/dtype.h"
#include "ops/pool.h"

#define KB 16		/* keys scored together */
#define MAX_DIM 1024	/* config.c caps index_head_dim */

struct cand {
	float s;
	int32_t pos; /* global position; -1: padding, worse than any key */
};

/* the strict total order of the selection: higher score, then lower position */
static inline bool better(struct cand a, struct cand b)
{
	if (a.pos < 0 || b.pos < 0)
		return a.pos >= 0 && b.pos < 0;
	return a.s > b.s || (a.s == b.s && a.pos < b.pos);
}

/* reorders c[0, n) so that c[0, k) are its k best (any order), 1 <= k <= n */
static void select_best(struct cand *c, int n, int k)
{
	int lo = 0, hi = n - 1;
	while (lo < hi) {
		struct cand a = c[lo], b = c[lo + (hi - lo) / 2], d = c[hi], pv;
		/* the median of three as the pivot */
		if (better(a, b))
			pv = better(b, d) ? b : (better(a, d) ? d : a);
		else
			pv = better(a, d) ? a : (better(b, d) ? d : b);
		int i = lo, j = hi;
		while (i <= j) {
			while (better(c[i], pv))
				i++;
			while (better(pv, c[j]))
				j--;
			if (i <= j) {
				struct cand t = c[i];
				c[i++] = c[j];
				c[j--] = t;
			}
		}
		if (k - 1 <= j)
			hi = j;
		else if (k - 1 >= i)
			lo = i;
		else
			break;
	}
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* out[j] = score of key j for j < n: per key the same sums as attn_index_score (d, then h, in
 * order), KB keys at a time so that the inner loop runs across keys */
static void score_keys(const float *q, const float *w, int H, int dim, int group, const uint8_t *const *codes,
		       const float *const *scales, int n, float *out)
{
	float kt[MAX_DIM][KB]; /* the keys decoded, transposed */
	for (int j = 0; j < n; j++)
		for (int d = 0; d < dim; d++)
			kt[d][j] = fp8_e4m3_to_f32(codes[j][d]) * scales[j][d / group];
	for (int j = n; j < KB; j++)
		for (int d = 0; d < dim; d++)
			kt[d][j] = 0;
	float s[KB] = {0};
	for (int h = 0; h < H; h++) {
		float dot[KB] = {0};
		const float *qh = q + (size_t)h * dim;
		for (int d = 0; d < dim; d++)
			for (int j = 0; j < KB; j++)
				dot[j] += qh[d] * kt[d][j];
		for (int j = 0; j < KB; j++)
			if (dot[j] > 0)
				s[j] += w[h] * dot[j];
	}
	for (int j = 0; j < n; j++)
		out[j] = isnan(s[j]) ? -INFINITY : s[j];
}

float attn_index_score(const float *q, const float *w, int n_heads, int dim, int group, const uint8_t *codes,
		       const float *scales)
{
	float s;
	score_keys(q, w, n_heads, dim, group, &codes, &scales, 1, &s);
	return s;
}

struct sel_ctx {
	const struct attn_index_args *a;
	const int32_t *seq_of; /* [n_tokens] */
	int32_t *sel, *count;  /* [n_tokens, topk], [n_tokens] */
	const int32_t *row_of; /* [n_tokens] candidate row (DCP), -1 none */
	struct cand *send;     /* [n_rows, topk] (DCP) */
	const struct cand *all; /* [W, n_rows, topk] (DCP) */
	int n_rows;
	struct cand *buf;      /* [n_threads, buf_len] */
	size_t buf_len;
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

static void score_range(void *vctx, int begin, int end, int tid)
{
	struct sel_ctx *c = vctx;
	const struct attn_index_args *a = c->a;
	const struct attn_meta *m = a->meta;
	const struct kv_cache *kv = a->kv;
	int H = a->n_heads, dim = kv->index_dim, group = kv_cache_index_group(dim), K = a->topk;
	int W = m->dcp_size > 1 ? m->dcp_size : 1, r = W > 1 ? m->dcp_rank : 0, I = W > 1 ? m->dcp_interleave : 1;
	struct cand *buf = c->buf + (size_t)tid * c->buf_len;
	for (int t = begin; t < end; t++) {
		int i, p, nvis;
		token_view(m, c->seq_of, t, &i, &p, &nvis);
		int32_t *out = c->sel + (size_t)t * K;
		if (p + 1 <= K) { /* it sees no more than k keys: all of them */
			for (int j = 0; j < nvis; j++)
				out[j] = j;
			c->count[t] = nvis;
			continue;
		}
		const int32_t *bt = m->block_table + (size_t)i * m->max_blocks;
		const float *q = a->q + (size_t)t * H * dim, *w = a->w + (size_t)t * H;
		for (int j0 = 0; j0 < nvis; j0 += KB) {
			int nk = nvis - j0 < KB ? nvis - j0 : KB;
			const uint8_t *codes[KB];
			const float *scales[KB];
			float s[KB];
			for (int j = 0; j < nk; j++) {
				int64_t slot = kv_cache_slot(bt, kv->block_size, j0 + j);
				codes[j] = kv_cache_index_codes(kv, a->layer, slot);
				scales[j] = kv_cache_index_scales(kv, a->layer, slot);
			}
			score_keys(q, w, H, dim, group, codes, scales, nk, s);
			for (int j = 0; j < nk; j++)
				buf[j0 + j] = (struct cand){s[j], (int32_t)(W > 1 ? dcp_global_pos(j0 + j, W, r, I) : j0 + j)};
		}
		int k = nvis < K ? nvis : K;
		if (k > 0)
			select_best(buf, nvis, k);
		if (W == 1) {
			for (int j = 0; j < k; j++)
				out[j] = buf[j].pos;
			qsort(out, (size_t)k, sizeof *out, cmp_i32);
			c->count[t] = k;
			continue;
		}
		struct cand *row = c->send + (size_t)c->row_of[t] * K;
		for (int j = 0; j < K; j++)
			row[j] = j < k ? buf[j] : (struct cand){-INFINITY, -1};
	}
}

/* DCP: the ranks' candidates of each selecting token merged into the global top-k, of which
 * this rank keeps its own keys as local indices */
static void merge_range(void *vctx, int begin, int end, int tid)
{
	struct sel_ctx *c = vctx;
	const struct attn_meta *m = c->a->meta;
	int K = c->a->topk, W = m->dcp_size, r = m->dcp_rank, I = m->dcp_interleave;
	struct cand *buf = c->buf + (size_t)tid * c->buf_len;
	for (int t = begin; t < end; t++) {
		int row = c->row_of[t];
		if (row < 0)
			continue;
		int n = 0;
		for (int k = 0; k < W; k++) {
			const struct cand *src = c->all + ((size_t)k * c->n_rows + (size_t)row) * K;
			for (int j = 0; j < K; j++)
				if (src[j].pos >= 0)
					buf[n++] = src[j];
		}
		int k = n < K ? n : K;
		if (k > 0)
			select_best(buf, n, k);
		int32_t *out = c->sel + (size_t)t * K;
		int own = 0;
		for (int j = 0; j < k; j++) {
			int64_t g = buf[j].pos;
			if ((g / I) % W == r)
				out[own++] = (int32_t)((g / ((int64_t)W * I)) * I + g % I);
		}
		qsort(out, (size_t)own, sizeof *out, cmp_i32);
		c->count[t] = own;
	}
}

int attn_index_select(const struct attn_index_args *a, int32_t *sel_start, int32_t **sel, struct err *e)
{
	const struct attn_meta *m = a->meta;
	int n = m->n_tokens, K = a->topk, W = m->dcp_size > 1 ? m->dcp_size : 1;
	if (!a->kv->index_codes || a->kv->index_dim > MAX_DIM || K < 1)
		return err_set(e, "indexer: no indexer cache (or key width %d, top-k %d)", a->kv->index_dim, K);
	int32_t *seq_of = arena_alloc(a->scratch, sizeof(int32_t) * (size_t)n);
	int32_t *row_of = arena_alloc(a->scratch, sizeof(int32_t) * (size_t)n);
	int32_t *count = arena_alloc(a->scratch, sizeof(int32_t) * (size_t)n);
	int32_t *s = arena_alloc(a->scratch, sizeof(int32_t) * (size_t)n * K);
	int max_vis = 0, n_rows = 0;
	for (int i = 0; i < m->n_seqs; i++)
		for (int t = m->query_start[i]; t < m->query_start[i + 1]; t++)
			seq_of[t] = i;
	for (int t = 0; t < n; t++) {
		int i, p, nvis;
		token_view(m, seq_of, t, &i, &p, &nvis);
		max_vis = nvis > max_vis ? nvis : max_vis;
		row_of[t] = W > 1 && p + 1 > K ? n_rows++ : -1;
	}
	int nt = pool_size(a->pool);
	size_t buf_len = (size_t)(max_vis > W * K ? max_vis : W * K);
	struct sel_ctx c = {.a = a, .seq_of = seq_of, .sel = s, .count = count, .row_of = row_of, .n_rows = n_rows,
			    .buf_len = buf_len};
	c.buf = arena_alloc(a->scratch, sizeof(struct cand) * buf_len * (size_t)(nt > 0 ? nt : 1));
	if (W > 1 && n_rows > 0)
		c.send = arena_alloc(a->scratch, sizeof(struct cand) * (size_t)n_rows * K);
	pool_for(a->pool, n, 1, score_range, &c);
	if (W > 1 && n_rows > 0) {
		/* every rank has the same tokens, so the same rows: one gather per layer */
		struct cand *all = arena_alloc(a->scratch, sizeof(struct cand) * (size_t)W * n_rows * K);
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

size_t attn_index_scratch_bytes(int n_tokens, int topk, int max_keys, int n_threads, int dcp_size)
{
	size_t n = (size_t)n_tokens, K = (size_t)topk, W = (size_t)(dcp_size > 1 ? dcp_size : 1);
	size_t buf = (size_t)max_keys > W * K ? (size_t)max_keys : W * K;
	size_t bytes = 3 * (4 * n + 64) + 4 * n * K + 64 + sizeof(struct cand) * buf * (size_t)(n_threads > 0 ? n_threads : 1) + 64;
	if (W > 1)
		bytes += sizeof(struct cand) * n * K * (1 + W) + 128;
	return bytes;
}
