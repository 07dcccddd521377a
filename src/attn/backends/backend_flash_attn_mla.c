/* FLASH_ATTN_MLA: decode attention for variable query lengths (docs/mla-dcp.md §3.2). Work
 * items are (request, query tile), listed once per step by the plan; each runs the shared MQA
 * kernel over the request's whole visible key range. Under DCP, q_len > 1 uses the
 * global-position mask; like FA3 it declares that only for interleave 1. */
#include <string.h>

#include "attn/backends/backends.h"
#include "attn/dcp.h"
#include "attn/kernels/mqa.h"
#include "attn/prefill.h"
#include "ops/pool.h"

struct famla_item {
	int32_t req, tok0, n_tok;
};

struct famla_plan {
	int n_decodes, n_heads, tile_tok, n_items;
	struct famla_item *items; /* [n_items] */
	struct mqa_workspace ws;
};

static int famla_plan(struct attn_meta *meta, int n_heads, const struct compute_ctx *cx, struct err *e)
{
	struct arena *scratch = cx->scratch;
	struct famla_plan *p = arena_alloc(scratch, sizeof *p);
	memset(p, 0, sizeof *p);
	meta->plan = p;
	p->n_decodes = meta->n_decodes;
	p->n_heads = n_heads;
	p->tile_tok = mqa_tile_tokens(n_heads);
	int n = 0;
	for (int i = 0; i < p->n_decodes; i++) {
		int q = meta->query_start[i + 1] - meta->query_start[i];
		if (q < 0)
			return err_set(e, "flash_attn_mla: decode %d has query length %d", i, q);
		n += (q + p->tile_tok - 1) / p->tile_tok;
	}
	p->items = arena_alloc(scratch, (size_t)(n > 0 ? n : 1) * sizeof *p->items);
	for (int i = 0; i < p->n_decodes; i++) {
		int q = meta->query_start[i + 1] - meta->query_start[i];
		for (int t = 0; t < q; t += p->tile_tok)
			p->items[p->n_items++] = (struct famla_item){i, t, q - t < p->tile_tok ? q - t : p->tile_tok};
	}
	return 0;
}

struct famla_ctx {
	const struct attn_decode_args *a;
	const struct famla_plan *p;
	size_t kern_bytes;
};

static void famla_item_run(void *vctx, int begin, int end, int tid)
{
	struct famla_ctx *c = vctx;
	const struct attn_decode_args *a = c->a;
	const struct attn_meta *m = a->meta;
	int H = a->n_heads, row = a->kv->row, dv = a->kv->kv_lora_rank;
	unsigned char *ws = mqa_workspace_at(&c->p->ws, tid);
	int32_t *vis = (int32_t *)(ws + c->kern_bytes);
	for (int k = begin; k < end; k++) {
		const struct famla_item *it = &c->p->items[k];
		int i = it->req, L = m->seq_lens[i];
		int q = m->query_start[i + 1] - m->query_start[i];
		int n = m->dcp_size > 1 && m->local_seq_lens ? m->local_seq_lens[i] : L;
		for (int t = 0; t < it->n_tok; t++) {
			int tq = it->tok0 + t;
			vis[t] = m->dcp_size > 1
					 ? dcp_visible_keys(L, q, tq, m->dcp_size, m->dcp_rank, m->dcp_interleave, n)
					 : (L - q + tq + 1 < n ? L - q + tq + 1 : n);
		}
		size_t tok = (size_t)m->query_start[i] + it->tok0;
		struct mqa_job j = {
			.kv = a->kv,
			.layer = a->layer,
			.bt = m->block_table + (size_t)i * m->max_blocks,
			.scale = a->scale,
			.q_bf16 = a->q_bf16,
			.p_bf16 = a->p_bf16,
			.q = a->q + tok * H * row,
			.n_tok = it->n_tok,
			.n_heads = H,
			.vis = vis,
			.k_begin = 0,
			.k_end = n,
			.out = a->out + tok * H * dv,
			.lse = a->lse + tok * H,
		};
		mqa_run(&j, ws);
	}
}

static void famla_decode(const struct attn_decode_args *a)
{
	const struct attn_meta *m = a->meta;
	if (m->n_decodes <= 0)
		return;
	struct famla_plan *p = attn_decode_plan_get(a, famla_plan);
	CHECK(p->n_heads == a->n_heads && p->n_decodes == m->n_decodes);
	struct famla_ctx c = {a, p, mqa_scratch_bytes(p->tile_tok * a->n_heads, a->kv->row)};
	mqa_workspace_reserve(&p->ws, a->cx->scratch, pool_size(a->cx->pool),
			      c.kern_bytes + p->tile_tok * sizeof(int32_t));
	pool_for(a->cx->pool, p->n_items, 1, famla_item_run, &c);
}

/* FA3's context-parallel mask understands token-level interleave only. */
static bool famla_dcp_multi_token(int dcp_interleave) { return dcp_interleave == 1; }

const struct attn_backend attn_backend_flash_attn_mla = {
	.name = "FLASH_ATTN_MLA",
	.reorder_batch_threshold = 512,
	.query_len_support = QLEN_VARLEN,
	.supports_dcp_multi_token = famla_dcp_multi_token,
	.returns_lse = true,
	.block_size_multiple = 1,
	.plan = famla_plan,
	.decode = famla_decode,
	.prefill = attn_prefill,
};
