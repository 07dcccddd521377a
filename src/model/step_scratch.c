/* The step arena's layout from the shapes (step_scratch.h). Each term below names one ALLOC of
 * forward.c in its order; a change there changes it here, and test_step_scratch runs the
 * forwards against it. The attention calls' own scratch comes from their bounds. */
#include "model/step_scratch.h"

#include "attn/backends/backends.h"
#include "attn/prefill.h"
#include "model/model_internal.h"

/* bytes of an ALLOC of `count` elements of `size`, at its 64-byte aligned offset */
static size_t R(size_t count, size_t size) { return (count * size + 63) & ~(size_t)63; }

static size_t max_z(size_t a, size_t b) { return a > b ? a : b; }

#define F sizeof(float)

void step_shapes_of(const struct model *m, struct step_shapes *s)
{
	const struct model_config *c = &m->cfg;
	bool moe = c->n_routed_experts > 0;
	*s = (struct step_shapes){.n = m->opt.max_batch_tokens,
				  .max_seqs = m->opt.max_seqs,
				  .n_threads = m->n_threads,
				  .D = c->hidden_size,
				  .H = m->n_heads_local,
				  .W = m->opt.comm && m->opt.comm->dcp_size > 1 ? m->opt.comm->dcp_size : 1,
				  .dn = c->qk_nope_head_dim,
				  .dr = c->qk_rope_head_dim,
				  .dv = c->v_head_dim,
				  .Lq = c->q_lora_rank,
				  .Lkv = c->kv_lora_rank,
				  .I = c->intermediate_size,
				  .E = moe ? c->n_routed_experts : 0,
				  .k = moe ? c->num_experts_per_tok : 0,
				  .Im = c->moe_intermediate_size,
				  .Is = c->n_shared_experts * c->moe_intermediate_size,
				  .ws_rows = m->ws_rows,
				  .tp = m->tp_size,
				  .vocab_cols = m->vocab_cols ? m->vocab_cols[m->tp_rank] : c->vocab_size,
				  .mtp = m->opt.load_mtp,
				  .sparse = config_is_sparse(c),
				  .topk = c->index_topk,
				  .indexer = config_is_sparse(c) ? model_indexer_scratch_bytes(m) : 0};
}

/* absorbed() over nt tokens, up to its backend call: qd, olat, lse, the W_UV views and the
 * jobs; under DCP the gathered q, the partial outputs and LSEs, and after the call all LSEs */
static size_t absorbed_bytes(const struct step_shapes *s, size_t nt)
{
	size_t H = (size_t)s->H, Hg = H * (size_t)s->W, row = (size_t)(s->Lkv + s->dr), Lkv = (size_t)s->Lkv;
	size_t b = R(nt * H * row, F) + R(nt * H * Lkv, F) + R(nt * H, F) + R(H, sizeof(struct wmat)) +
		   R(H, sizeof(struct gemm_job));
	if (s->W > 1)
		b += R(nt * Hg * row, F) + R(nt * Hg * Lkv, F) + R(nt * Hg, F) + R((size_t)s->W * nt * Hg, F);
	return b;
}

/* attention(): q, kvr, cq, o; then the sparse path (sel_start, the indexer, a chunk of the
 * absorbed path and its backend call) or the dense one (the prefill, the absorbed decode path
 * and its backend call); TP's o_proj partial sums */
static size_t attn_bytes(const struct step_shapes *s, size_t dec)
{
	size_t n = (size_t)s->n, H = (size_t)s->H, row = (size_t)(s->Lkv + s->dr);
	size_t b = R(n * H * (size_t)(s->dn + s->dr), F) + R(n * row, F) + (s->Lq > 0 ? R(n * (size_t)s->Lq, F) : 0) +
		   R(n * H * (size_t)s->dv, F);
	if (s->sparse) {
		size_t nt = n < SPARSE_CHUNK ? n : SPARSE_CHUNK;
		b += R(n + 1, sizeof(int32_t)) + s->indexer + absorbed_bytes(s, nt) +
		     attn_sparse_scratch_bytes(s->n_threads, (int)nt, s->H * s->W, s->topk, s->Lkv, s->dr);
	} else {
		b += attn_prefill_scratch_bytes(s->n, s->H, s->dn, s->dr, s->dv, s->Lkv, s->ws_rows, s->n_threads) +
		     attn_prefill_dcp_scratch_bytes(s->ws_rows, s->W, s->Lkv, s->dr) + absorbed_bytes(s, n) + dec;
	}
	if (s->tp > 1)
		b += R(n * (size_t)s->D, F);
	return b;
}

/* ffn(): the dense SwiGLU (g, u; TP's partial sum) or the MoE (router logits, choices, the
 * grouping by expert, the gathered rows, the experts' and shared expert's activations, the
 * jobs, their outputs, the routed sum and TP's shared partial) */
static size_t ffn_bytes(const struct step_shapes *s)
{
	size_t n = (size_t)s->n, D = (size_t)s->D, E = (size_t)s->E, nk = n * (size_t)s->k;
	size_t tp = s->tp > 1 ? 1 : 0;
	size_t dense = 2 * R(n * (size_t)s->I, F) + tp * R(n * D, F);
	if (!s->E)
		return dense;
	size_t moe = R(n * E, F) + R(nk, sizeof(int)) + R(nk, F) + 2 * R(E + 1, sizeof(int)) + R(E, sizeof(int)) +
		     R(nk, F) + R(nk * D, F) + R(nk, sizeof(int)) + 2 * R(nk * (size_t)s->Im, F) +
		     R(2 * E + 2, sizeof(struct gemm_job)) + 2 * R(n * (size_t)s->Is, F) + R(nk * D, F) +
		     R((1 + tp) * n * D, F);
	return max_z(dense, moe); /* the first dense layers, then the MoE ones */
}

void step_scratch_layout(const struct step_shapes *s, struct step_scratch *out)
{
	size_t n = (size_t)s->n, D = (size_t)s->D;
	/* the decode path's plan, workspace and partials (every backend's bound) */
	size_t dec = attn_decode_scratch_bytes(s->n_threads, s->max_seqs, s->n, s->H * s->W, s->Lkv, s->dr);
	out->plan = dec;
	out->resident = 2 * R(n * D, F) + (s->mtp ? R(n * 2 * D, F) : 0);
	out->attn = attn_bytes(s, dec);
	out->ffn = ffn_bytes(s);
	out->head = s->tp > 1 ? R(n * (size_t)s->vocab_cols, F) : 0;
	out->total = out->plan + out->resident + max_z(max_z(out->attn, out->ffn), out->head);
}

size_t deepseek_step_scratch_bytes(const struct model *m)
{
	struct step_shapes s;
	struct step_scratch l;
	step_shapes_of(m, &s);
	step_scratch_layout(&s, &l);
	return l.total;
}
