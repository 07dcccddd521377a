/* FLASHMLA: decode attention for uniform query lengths with a FlashMLA-style split-KV plan
 * (docs/mla-dcp.md §3.1). The plan (tile scheduler) is computed once per step; each work item
 * is (partition, query tile) and walks the partition's key range over the requests with the
 * shared MQA kernel; split requests are combined through (out, lse). Under DCP, query t sees
 * the local keys whose global position is <= L - q + t (§4.7), for any interleave size. */
#include <math.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "attn/dcp.h"
#include "attn/backends/flashmla_sched.h"
#include "attn/merge.h"
#include "attn/prefill.h"
#include "attn/kernels/mqa.h"
#include "ops/pool.h"

struct fmla_plan {
	int n_decodes, q_len, n_heads, n_parts, tile_tok, n_qtiles;
	struct flashmla_part *parts; /* [n_parts] */
	int32_t *num_splits;         /* [n_decodes + 1] */
	int32_t *acc_base;           /* [n_decodes] first partial slot of a split request, -1 unsplit */
	int32_t *split_reqs;         /* [n_split_reqs] */
	int n_split_reqs, n_acc;
	/* reused by every layer of the step */
	struct mqa_workspace ws;
	float *oacc, *lacc; /* [n_acc, q_len, n_heads, kv_lora_rank], [n_acc, q_len, n_heads] */
	size_t oacc_floats;
};

static const int32_t *local_lens(const struct attn_meta *m)
{
	return m->dcp_size > 1 && m->local_seq_lens ? m->local_seq_lens : m->seq_lens;
}

int flashmla_plan_with_parts(struct attn_meta *meta, int n_heads, int n_parts, struct arena *scratch, struct err *e)
{
	int nd = meta->n_decodes;
	struct fmla_plan *p = arena_alloc(scratch, sizeof *p);
	memset(p, 0, sizeof *p);
	meta->plan = p;
	p->n_decodes = nd;
	p->n_heads = n_heads;
	if (nd <= 0)
		return 0;
	p->q_len = meta->query_start[1] - meta->query_start[0];
	for (int i = 1; i < nd; i++)
		if (meta->query_start[i + 1] - meta->query_start[i] != p->q_len)
			return err_set(e, "flashmla: decode %d has query length %d, expected a uniform %d", i,
				       meta->query_start[i + 1] - meta->query_start[i], p->q_len);
	if (p->q_len <= 0)
		return err_set(e, "flashmla: decode query length %d", p->q_len);
	p->tile_tok = mqa_tile_tokens(n_heads);
	p->n_qtiles = (p->q_len + p->tile_tok - 1) / p->tile_tok;
	p->n_parts = n_parts > 0 ? n_parts : 1;
	p->parts = arena_alloc(scratch, (size_t)p->n_parts * sizeof *p->parts);
	p->num_splits = arena_alloc(scratch, (size_t)(nd + 1) * sizeof(int32_t));
	p->acc_base = arena_alloc(scratch, (size_t)nd * sizeof(int32_t));
	p->split_reqs = arena_alloc(scratch, (size_t)nd * sizeof(int32_t));
	int end = flashmla_sched_compute(local_lens(meta), nd, p->n_parts, p->parts, p->num_splits);
	CHECK(end == nd);
	for (int i = 0; i < nd; i++) {
		int ns = p->num_splits[i + 1] - p->num_splits[i];
		p->acc_base[i] = -1;
		if (ns > 1) {
			p->acc_base[i] = p->n_acc;
			p->n_acc += ns;
			p->split_reqs[p->n_split_reqs++] = i;
		}
	}
	return 0;
}

static int fmla_plan(struct attn_meta *meta, int n_heads, const struct compute_ctx *cx, struct err *e)
{
	/* like num_sm_parts: enough (partition x query tile) items to occupy every CPU once */
	int q = meta->n_decodes > 0 ? meta->query_start[1] - meta->query_start[0] : 1;
	int tt = mqa_tile_tokens(n_heads), n_qtiles = (q + tt - 1) / tt;
	int parts = mqa_cpu_count() / (n_qtiles > 0 ? n_qtiles : 1);
	return flashmla_plan_with_parts(meta, n_heads, parts > 0 ? parts : 1, cx->scratch, e);
}

struct fmla_ctx {
	const struct attn_decode_args *a;
	struct fmla_plan *p;
	size_t kern_bytes;
};

static void fmla_item(void *vctx, int begin, int end, int tid)
{
	struct fmla_ctx *c = vctx;
	const struct attn_decode_args *a = c->a;
	const struct attn_meta *m = a->meta;
	const struct fmla_plan *p = c->p;
	const int32_t *lens = local_lens(m);
	int H = a->n_heads, row = a->kv->row, dv = a->kv->kv_lora_rank, q = p->q_len;
	unsigned char *ws = mqa_workspace_at(&p->ws, tid);
	int32_t *vis = (int32_t *)(ws + c->kern_bytes);
	for (int item = begin; item < end; item++) {
		const struct flashmla_part *part = &p->parts[item / p->n_qtiles];
		int tok0 = item % p->n_qtiles * p->tile_tok;
		int nt = q - tok0 < p->tile_tok ? q - tok0 : p->tile_tok;
		if (part->begin_req >= p->n_decodes)
			continue;
		for (int req = part->begin_req; req <= part->end_req; req++) {
			int L = m->seq_lens[req], n = lens[req];
			for (int t = 0; t < nt; t++) {
				int tq = tok0 + t;
				vis[t] = m->dcp_size > 1 ? dcp_visible_keys(L, q, tq, m->dcp_size, m->dcp_rank,
									    m->dcp_interleave, n)
							 : (L - q + tq + 1 < n ? L - q + tq + 1 : n);
			}
			int split = req == part->begin_req ? part->begin_split : 0;
			size_t tok = (size_t)m->query_start[req] + tok0;
			struct mqa_job j = {
				.kv = a->kv,
				.layer = a->layer,
				.bt = m->block_table + (size_t)req * m->max_blocks,
				.scale = a->scale,
				.q_bf16 = a->q_bf16,
				.p_bf16 = a->p_bf16,
				.q = a->q + tok * H * row,
				.n_tok = nt,
				.n_heads = H,
				.vis = vis,
				.k_begin = req == part->begin_req ? part->begin_tok : 0,
				.k_end = req == part->end_req ? part->end_tok : n,
			};
			if (p->acc_base[req] < 0) {
				j.out = a->out + tok * H * dv;
				j.lse = a->lse + tok * H;
			} else {
				size_t r = ((size_t)(p->acc_base[req] + split) * q + tok0) * H;
				j.out = p->oacc + r * dv;
				j.lse = p->lacc + r;
			}
			mqa_run(&j, ws);
		}
	}
}

/* Folds the pieces of split requests, one (split request, token, head) row per item. */
static void fmla_combine(void *vctx, int begin, int end, int tid)
{
	struct fmla_ctx *c = vctx;
	const struct attn_decode_args *a = c->a;
	const struct fmla_plan *p = c->p;
	int H = a->n_heads, dv = a->kv->kv_lora_rank, rows = p->q_len * H;
	for (int item = begin; item < end; item++) {
		int req = p->split_reqs[item / rows], r = item % rows;
		int ns = p->num_splits[req + 1] - p->num_splits[req];
		size_t dst = (size_t)a->meta->query_start[req] * H + r;
		float *o = a->out + dst * dv, *lse = a->lse + dst;
		for (int k = 0; k < ns; k++) {
			size_t src = (size_t)(p->acc_base[req] + k) * rows + r;
			if (k == 0) {
				memcpy(o, p->oacc + src * dv, (size_t)dv * sizeof(float));
				*lse = p->lacc[src];
			} else {
				attn_merge_states(1, 1, dv, o, lse, p->oacc + src * dv, p->lacc + src, o, lse);
			}
		}
	}
}

static void fmla_decode(const struct attn_decode_args *a)
{
	const struct attn_meta *m = a->meta;
	if (m->n_decodes <= 0)
		return;
	struct fmla_plan *p = attn_decode_plan_get(a, fmla_plan);
	CHECK(p->n_heads == a->n_heads && p->n_decodes == m->n_decodes);
	int nthr = pool_size(a->cx->pool);
	struct fmla_ctx c = {a, p, mqa_scratch_bytes(p->tile_tok * a->n_heads, a->kv->row)};
	mqa_workspace_reserve(&p->ws, a->cx->scratch, nthr, c.kern_bytes + p->tile_tok * sizeof(int32_t));
	size_t rows = (size_t)p->n_acc * p->q_len * a->n_heads;
	if (rows * a->kv->kv_lora_rank > p->oacc_floats) {
		p->oacc = arena_alloc(a->cx->scratch, rows * a->kv->kv_lora_rank * sizeof(float));
		p->lacc = arena_alloc(a->cx->scratch, rows * sizeof(float));
		p->oacc_floats = rows * a->kv->kv_lora_rank;
	}
	pool_for(a->cx->pool, p->n_parts * p->n_qtiles, 1, fmla_item, &c);
	pool_for(a->cx->pool, p->n_split_reqs * p->q_len * a->n_heads, 16, fmla_combine, &c);
}

static bool fmla_dcp_multi_token(int dcp_interleave)
{
	(void)dcp_interleave; /* the global-position mask works for every interleave size */
	return true;
}

const struct attn_backend attn_backend_flashmla = {
	.name = "FLASHMLA",
	/* Tuned on the CPU (docs/PERFORMANCE.md, "FLASHMLA threshold"): the absorbed decode
	 * path beats the up-projected prefill path up to q_len ~128 and loses from ~192 on
	 * (clearly at 512, the value the reference engine first shipped). */
	.reorder_batch_threshold = 128,
	.query_len_support = QLEN_UNIFORM,
	.supports_dcp_multi_token = fmla_dcp_multi_token,
	.returns_lse = true,
	.block_size_multiple = 1,
	.plan = fmla_plan,
	.decode = fmla_decode,
	.prefill = attn_prefill,
};
