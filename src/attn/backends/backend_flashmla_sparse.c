/* FLASHMLA_SPARSE: DeepSeek Sparse Attention over the paged latent cache (V3.2; vLLM's
 * FLASHMLA_SPARSE). Every token attends the keys the indexer selected for it, so a work item
 * is one token and up to 128 of its heads, run by the shared MQA kernel on the token's key
 * rows (mqa_job.slots). With fewer items than threads (a decode batch) a token's keys are
 * split across threads instead (split-KV: partial outputs merged by their LSE, every head in
 * one tile, each key read once). The selection holds local keys, so DCP needs nothing more
 * than the LSE merge that follows. Its table has a `sparse` entry instead of `decode`: the
 * model runs every token of a sparse model through it (model/forward.c, SPARSE_CHUNK tokens at
 * a time, with the decode path's q all-gather), and attn_backend_check refuses a backend of
 * the wrong kind for the model before the weights load. */
#include <math.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "attn/kv_cache.h"
#include "attn/merge.h"
#include "attn/kernels/mqa.h"
#include "ops/pool.h"

#define MAX_GROUP_HEADS 128 /* rows of one kernel tile at most */
#define MIN_SPLIT_KEYS 256  /* keys of one split at least */

struct sparse_ctx {
	const struct attn_sparse_args *a;
	const int32_t *seq_of; /* [n_tok] sequence of each token of the call */
	int group, n_groups;   /* heads per item, head groups per token */
	int n_splits;          /* key splits per (token, head group); > 1: partials in oacc/lacc */
	float *oacc, *lacc;    /* [n_tok, n_splits, n_heads, kv_lora_rank], [n_tok, n_splits, n_heads] */
	int max_keys;          /* the largest selection of the call */
	struct mqa_workspace ws;
	size_t kern_bytes;
};

static void sparse_item(void *vctx, int begin, int end, int tid)
{
	struct sparse_ctx *c = vctx;
	const struct attn_sparse_args *a = c->a;
	const struct attn_meta *m = a->meta;
	const struct kv_cache *kv = a->kv;
	int H = a->n_heads, row = kv->row, Lkv = kv->kv_lora_rank, S = c->n_splits;
	unsigned char *ws = mqa_workspace_at(&c->ws, tid);
	int64_t *slots = (int64_t *)(ws + c->kern_bytes);
	for (int item = begin; item < end; item++) {
		int sp = item % S, rest = item / S;
		int tl = rest / c->n_groups, h0 = rest % c->n_groups * c->group, t = a->tok0 + tl;
		int hn = H - h0 < c->group ? H - h0 : c->group;
		int k = a->sel_start[t + 1] - a->sel_start[t];
		int k0 = (int)((int64_t)k * sp / S), k1 = (int)((int64_t)k * (sp + 1) / S), nk = k1 - k0;
		float *out, *lse;
		if (S > 1) {
			size_t r = ((size_t)tl * S + sp) * H + h0;
			out = c->oacc + r * Lkv;
			lse = c->lacc + r;
		} else {
			out = a->out + ((size_t)tl * H + h0) * Lkv;
			lse = a->lse + (size_t)tl * H + h0;
		}
		if (nk <= 0) { /* nothing selected here: an empty shard (or split) */
			memset(out, 0, sizeof(float) * (size_t)hn * Lkv);
			for (int h = 0; h < hn; h++)
				lse[h] = -INFINITY;
			continue;
		}
		const int32_t *bt = m->block_table + (size_t)c->seq_of[tl] * m->max_blocks;
		const int32_t *sel = a->sel + a->sel_start[t] + k0;
		for (int j = 0; j < nk; j++)
			slots[j] = kv_cache_slot(bt, kv->block_size, sel[j]);
		struct mqa_job j = {.kv = kv,
				    .layer = a->layer,
				    .bt = bt,
				    .slots = slots,
				    .scale = a->scale,
				    .q = a->q + ((size_t)tl * H + h0) * row,
				    .n_tok = 1,
				    .n_heads = hn,
				    .vis = &nk,
				    .k_begin = 0,
				    .k_end = nk,
				    .out = out,
				    .lse = lse,
				    .q_bf16 = a->q_bf16,
				    .p_bf16 = a->p_bf16};
		mqa_run(&j, ws);
	}
}

/* split-KV: each (token, head) row's partials folded into the output */
static void sparse_combine(void *vctx, int begin, int end, int tid)
{
	struct sparse_ctx *c = vctx;
	const struct attn_sparse_args *a = c->a;
	int H = a->n_heads, Lkv = a->kv->kv_lora_rank, S = c->n_splits;
	for (int r = begin; r < end; r++) {
		int tl = r / H, h = r % H;
		float *o = a->out + (size_t)r * Lkv, *lse = a->lse + r;
		for (int sp = 0; sp < S; sp++) {
			size_t src = ((size_t)tl * S + sp) * H + h;
			if (sp == 0) {
				memcpy(o, c->oacc + src * Lkv, sizeof(float) * (size_t)Lkv);
				*lse = c->lacc[src];
			} else {
				attn_merge_states(1, 1, Lkv, o, lse, c->oacc + src * Lkv, c->lacc + src, o, lse);
			}
		}
	}
}

static void sparse_attend(const struct attn_sparse_args *a)
{
	const struct attn_meta *m = a->meta;
	if (a->n_tok <= 0)
		return;
	struct sparse_ctx c = {.a = a};
	int32_t *seq_of = arena_alloc(a->cx->scratch, sizeof(int32_t) * (size_t)a->n_tok);
	for (int i = 0, t = 0; i < m->n_seqs && t < a->n_tok; i++)
		for (; t < a->n_tok && a->tok0 + t < m->query_start[i + 1]; t++)
			seq_of[t] = i;
	c.seq_of = seq_of;
	for (int t = a->tok0; t < a->tok0 + a->n_tok; t++) {
		int k = a->sel_start[t + 1] - a->sel_start[t];
		c.max_keys = k > c.max_keys ? k : c.max_keys;
	}
	int nt = pool_size(a->cx->pool) > 0 ? pool_size(a->cx->pool) : 1;
	c.group = a->n_heads < MAX_GROUP_HEADS ? a->n_heads : MAX_GROUP_HEADS;
	c.n_groups = (a->n_heads + c.group - 1) / c.group;
	c.n_splits = 1;
	if ((long)a->n_tok * c.n_groups < nt) { /* few tokens: split their keys */
		int want = (2 * nt + a->n_tok * c.n_groups - 1) / (a->n_tok * c.n_groups);
		int most = (c.max_keys + MIN_SPLIT_KEYS - 1) / MIN_SPLIT_KEYS;
		c.n_splits = want < most ? want : most;
		if (c.n_splits > 2 * nt)
			c.n_splits = 2 * nt;
		if (c.n_splits < 1)
			c.n_splits = 1;
	}
	if (c.n_splits > 1) {
		size_t rows = (size_t)a->n_tok * c.n_splits * a->n_heads;
		c.oacc = arena_alloc(a->cx->scratch, sizeof(float) * rows * a->kv->kv_lora_rank);
		c.lacc = arena_alloc(a->cx->scratch, sizeof(float) * rows);
	}
	c.kern_bytes = mqa_scratch_bytes(c.group, a->kv->row);
	c.kern_bytes = (c.kern_bytes + 63) / 64 * 64;
	mqa_workspace_reserve(&c.ws, a->cx->scratch, nt, c.kern_bytes + sizeof(int64_t) * (size_t)(c.max_keys + 1));
	pool_for(a->cx->pool, a->n_tok * c.n_groups * c.n_splits, 1, sparse_item, &c);
	if (c.n_splits > 1)
		pool_for(a->cx->pool, a->n_tok * a->n_heads, 16, sparse_combine, &c);
}

size_t attn_sparse_scratch_bytes(int n_threads, int n_tok, int n_heads, int topk, int kv_lora_rank, int rope_dim)
{
	int g = n_heads < MAX_GROUP_HEADS ? n_heads : MAX_GROUP_HEADS;
	size_t nt = (size_t)(n_threads > 0 ? n_threads : 1);
	size_t kern = (mqa_scratch_bytes(g, kv_lora_rank + rope_dim) + 63) / 64 * 64;
	size_t per_thread = (kern + sizeof(int64_t) * (size_t)(topk + 1) + 63) / 64 * 64;
	/* split-KV partials: fewer (token, head group) items than threads, at most 2 x threads
	 * splits each (n_tok x splits <= 3 x threads) */
	size_t part = 3 * nt * (size_t)n_heads * ((size_t)kv_lora_rank + 1) * sizeof(float) + 2 * 64;
	return nt * per_thread + sizeof(int32_t) * (size_t)n_tok + part + 4 * 64;
}

static bool any_interleave(int dcp_interleave)
{
	(void)dcp_interleave;
	return true;
}

const struct attn_backend attn_backend_flashmla_sparse = {
	.name = "FLASHMLA_SPARSE",
	.reorder_batch_threshold = 512,
	.query_len_support = QLEN_VARLEN,
	.supports_dcp_multi_token = any_interleave,
	.returns_lse = true,
	.block_size_multiple = 1,
	.sparse = sparse_attend,
};
