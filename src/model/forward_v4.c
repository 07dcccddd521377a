/* DeepSeek-V4's step (forward_v4.h): float32 activations, the linears as GEMMs over the
 * step's tokens (the ops GEMM on fp8 / bf16 / f32 weights), the attention of each sequence
 * through model_v4/v4_block.h, hyper-connections, hash / scored MoE routing, the head. Per
 * layer, over x [n, hc, D] (the hc residual streams of the step's n tokens):
 *   y = attn_norm(hc_pre(x)); x = hc_post(wo_b(wo_a(attention(y))), x)
 *   y = ffn_norm(hc_pre(x)); x = hc_post(sum_e w_e expert_e(y) + shared(y), x)
 * then logits = head(norm(hc_head(x))) of the requested rows.
 * Under tensor parallelism (tensors_v4.c's table) a rank runs its heads through attention and
 * its whole wo_a groups, and its slice of each expert's intermediate columns: wo_b's and the
 * MoE's outputs are partial sums, all-reduced once each; everything else (the q latent, the one
 * kv, the compressors, the indexer, hyper-connections, the router) is computed whole on every
 * rank from the same inputs, so every rank routes and selects alike. The head is
 * vocab-parallel, its logit columns gathered to rank 0, as forward.c's.
 * Under DCP (docs/mla-dcp.md §7) the group's q is all-gathered, every rank attends the group's
 * heads over the keys it owns (v4_block.h), and dcp_merge combines the partials by their LSEs,
 * adds the sink once and un-ropes: one all-gather of q, one of the LSEs and one reduce-scatter a
 * layer, and one all-gather of the indexer's candidates per 32 tokens of a CSA layer. */
#include "model/forward_v4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/dcp.h"
#include "base/arena.h"
#include "dist/comm.h"
#include "model/v4_seqstate.h"
#include "model_v4/v4_attn.h"

/* The step's buffers, rows of n tokens (nl logits rows) */
struct bufs {
	float *x;               /* [n, hc, D] */
	float *y, *out;         /* [n, D] */
	float *post, *comb;     /* [n, hc], [n, hc, hc] */
	float *qr;              /* [n, q_lora] */
	float *q, *o;           /* [n, H*hd] */
	float *kv;              /* [n, hd] */
	float *ckv, *csc;       /* [n, 2 hd] the compressor's (width 2 hd at most) */
	float *iq;              /* [n, Hi*di] */
	float *iw;              /* [n, Hi] */
	float *ikv, *isc;       /* [n, 2 di] */
	float *z;               /* [n, G*o_lora] */
	float *glog, *wts;      /* [n, E], [n, k] */
	int32_t *ids, *rows;    /* [n, k] the routed experts; [n] one expert's token rows */
	float *xe, *eo;         /* [n, D] one expert's rows in, out */
	float *g, *u;           /* [n, I] */
	float *hl;              /* [nl, D] */
	float *hp;              /* [nl, vocab / T] this rank's logit columns (TP) */
	float *hx;              /* [n, hc, D] the MTP module's hnorm'd hidden streams */
	float *qg, *og;         /* DCP: [n, W*H*hd] the group's queries, partial outputs */
	float *lse, *lses;      /* DCP: [n, W*H] partial LSEs, [W, n, W*H] the group's */
	float *lseg;            /* DCP: [n, W*H] merged LSEs */
	void *work;             /* v4_attn_seq's scratch (the largest state layer's) */
	struct v4_slot **slots; /* [n_slots] the step's sequences' state slots */
	struct v4_save *saves;  /* [n_snaps] the step's boundary snapshots */
	int n_saves;
};

static size_t take(struct arena *a, void **p, size_t bytes)
{
	size_t r = (bytes + 63) / 64 * 64;
	if (a)
		*p = arena_alloc(a, bytes);
	return r;
}

/* the layout (a NULL arena: its size only) */
/* v4_attn_seq's work for the largest of the state layers */
static size_t attn_work_bytes(const struct v4_model *v, int n)
{
	size_t w = 0;
	for (int l = 0; l < v->n_state_layers; l++) {
		size_t x = v4_attn_seq_work_bytes(v4_state_layer(v, l), v->max_len, n);
		w = x > w ? x : w;
	}
	return w;
}

static size_t layout(const struct v4_model *v, int n, int nl, struct arena *a, struct bufs *b)
{
	const struct v4_config *c = &v->c;
	size_t f = sizeof(float), N = (size_t)n, s = 0;
	int D = c->hidden_size, hc = c->hc_mult, H = c->num_attention_heads, hd = c->head_dim;
	int k = c->num_experts_per_tok, I = c->moe_intermediate_size, Hi = c->index_n_heads;
	int di = c->index_head_dim;
	s += take(a, (void **)&b->x, f * N * (size_t)(hc * D));
	s += take(a, (void **)&b->y, f * N * (size_t)D);
	s += take(a, (void **)&b->out, f * N * (size_t)D);
	s += take(a, (void **)&b->post, f * N * (size_t)hc);
	s += take(a, (void **)&b->comb, f * N * (size_t)(hc * hc));
	s += take(a, (void **)&b->qr, f * N * (size_t)c->q_lora_rank);
	s += take(a, (void **)&b->q, f * N * (size_t)(H * hd));
	s += take(a, (void **)&b->o, f * N * (size_t)(H * hd));
	s += take(a, (void **)&b->kv, f * N * (size_t)hd);
	s += take(a, (void **)&b->ckv, f * N * (size_t)(2 * hd));
	s += take(a, (void **)&b->csc, f * N * (size_t)(2 * hd));
	s += take(a, (void **)&b->iq, f * N * (size_t)(Hi * di));
	s += take(a, (void **)&b->iw, f * N * (size_t)Hi);
	s += take(a, (void **)&b->ikv, f * N * (size_t)(2 * di));
	s += take(a, (void **)&b->isc, f * N * (size_t)(2 * di));
	s += take(a, (void **)&b->z, f * N * (size_t)(c->o_groups * c->o_lora_rank));
	s += take(a, (void **)&b->glog, f * N * (size_t)c->n_routed_experts);
	s += take(a, (void **)&b->wts, f * N * (size_t)k);
	s += take(a, (void **)&b->ids, sizeof(int32_t) * N * (size_t)k);
	s += take(a, (void **)&b->rows, sizeof(int32_t) * N);
	s += take(a, (void **)&b->xe, f * N * (size_t)D);
	s += take(a, (void **)&b->eo, f * N * (size_t)D);
	s += take(a, (void **)&b->g, f * N * (size_t)I);
	s += take(a, (void **)&b->u, f * N * (size_t)I);
	s += take(a, (void **)&b->hl, f * (size_t)nl * (size_t)D);
	s += take(a, (void **)&b->hp, f * (size_t)nl * (size_t)c->vocab_size);
	s += take(a, (void **)&b->hx, f * N * (size_t)(hc * D));
	size_t Wd = (size_t)(v->dcp_size > 1 ? v->dcp_size : 0), Hg = Wd ? (size_t)v->dcp_heads : 0;
	s += take(a, (void **)&b->qg, f * N * Hg * (size_t)hd);
	s += take(a, (void **)&b->og, f * N * Hg * (size_t)hd);
	s += take(a, (void **)&b->lse, f * N * Hg);
	s += take(a, (void **)&b->lses, f * Wd * N * Hg);
	s += take(a, (void **)&b->lseg, f * N * Hg);
	s += take(a, &b->work, attn_work_bytes(v, n));
	s += take(a, (void **)&b->slots, sizeof(struct v4_slot *) * (size_t)(v->n_slots > 0 ? v->n_slots : 1));
	s += take(a, (void **)&b->saves, sizeof(struct v4_save) * (size_t)(v->n_snaps > 0 ? v->n_snaps : 1));
	return s;
}

size_t v4_step_scratch_bytes(const struct model *m)
{
	const struct v4_model *v = m->fam_state;
	struct bufs b;
	int n = m->opt.max_batch_tokens;
	return layout(v, n, n, NULL, &b) + 4096;
}

void v4_pool_layout(struct v4_model *v, int bs)
{
	size_t o = 0;
	int W = v->dcp_size > 1 ? v->dcp_size : 1, I = v->dcp_interleave > 0 ? v->dcp_interleave : 1;
	v->pool.ent_b = v->pool.ix_b = 0;
	for (int l = 0; l < v->n_state_layers; l++) {
		const struct v4_attn_layer *a = v4_state_layer(v, l);
		size_t ne = a->ratio ? (size_t)v4_page_slots_dcp(a->ratio, bs, W, I) * v4_comp_entry_floats(&a->comp)
				     : 0;
		size_t ni = a->ratio == 4 ? (size_t)v4_page_slots_dcp(4, bs, W, I) * v4_comp_entry_floats(&a->icomp)
					  : 0;
		v->pool.ent[l] = o;
		v->pool.ix[l] = o + ne;
		o += ne + ni;
		v->pool.ent_b += ne;
		v->pool.ix_b += ni;
	}
	v->pool.bs = bs * W;
	v->pool.pbs = bs;
	v->pool.block_floats = o;
}

/* jobs of the step: y [n, ldy] = x [n, ldx] · wᵀ */
static struct gemm_job job(const struct wmat *w, const float *x, int ldx, float *y, int ldy, int n)
{
	return (struct gemm_job){.w = w, .x = x, .y = y, .n = n, .ldx = ldx, .ldy = ldy};
}

static void run(struct model *m, int nj, struct gemm_job *j)
{
	if (nj <= 0 || j[0].n <= 0)
		return;
	model_gemm_run(m, nj, j);
	for (int i = 0; i < nj; i++) /* the step's weight bytes (bench latency's roofline) */
		model_used(m, j[i].w);
}

/* TP: a row-parallel output's partial sums [n, D], summed over the group in place */
static int tp_sum(struct model *m, float *buf, int n, const char *what, struct err *e)
{
	if (m->tp_size <= 1)
		return 0;
	if (comm_tp_allreduce_sum(m->opt.comm, buf, (size_t)n * (size_t)m->cfg.hidden_size, e))
		return err_prefix(e, "DeepSeek-V4: %s all-reduce", what);
	return 0;
}

static int dcp_gather(void *ctx, const void *send, size_t nbytes, void *recv, struct err *e)
{
	return comm_dcp_allgather_bytes(ctx, send, nbytes, recv, e);
}

/* DCP: the group's partial results og [n, W*H, hd] with their LSEs [n, W*H] (no sink, before
 * the inverse RoPE) -> this rank's heads o [n, H*hd]: each rank's share rescaled by the merged
 * LSE and summed over the group into the heads' owners (docs/mla-dcp.md §4.5, exact for the
 * disjoint key sets), then the sink once, as one more term of the merged denominator, and the
 * inverse RoPE (linear: after the sum as before it) */
static int dcp_merge(struct model *m, struct v4_model *v, struct v4_layer *L, const struct batch *b, struct bufs *u,
		     struct err *e)
{
	int n = b->n_tokens, H = m->n_heads_local, W = v->dcp_size, Hg = W * H, hd = v->c.head_dim, r = v->dcp_rank;
	if (comm_dcp_allgather(m->opt.comm, u->lse, (size_t)n * (size_t)Hg, u->lses, e))
		return err_prefix(e, "DeepSeek-V4: DCP LSE gather");
	dcp_lse_correct(u->lses, W, n, Hg, r, u->og, hd, u->lseg);
	if (comm_dcp_reduce_scatter_inner(m->opt.comm, u->og, (size_t)n, (size_t)(H * hd), u->o, e))
		return err_prefix(e, "DeepSeek-V4: DCP reduce-scatter");
	for (int t = 0; t < n; t++) {
		float *ot = u->o + (size_t)t * (size_t)(H * hd);
		v4_attn_add_sink(H, hd, L->attn.sink, ot, u->lseg + (size_t)t * (size_t)Hg + (size_t)(r * H));
		v4_attn_unrope(&L->attn.rope, H, hd, ot, b->positions[t]);
	}
	return 0;
}

/* One layer's attention sub-block: y [n, D] (normed) -> b->out [n, D] */
static int attention(struct model *m, struct v4_model *v, struct v4_layer *L, int li, const struct batch *b,
		     struct kv_cache *kv, struct v4_slot **slots, struct bufs *u, struct err *e)
{
	const struct v4_config *c = &v->c;
	/* H, G: this rank's heads and output groups; gl: one group's o columns */
	int n = b->n_tokens, D = c->hidden_size, H = m->n_heads_local, hd = c->head_dim, r = L->attn.ratio;
	int ql = c->q_lora_rank, cw = r == 4 ? 2 * hd : hd, Hi = c->index_n_heads, di = c->index_head_dim;
	/* (more ranks than groups: one group's share, its heads' columns of it) */
	int G = c->o_groups >= m->tp_size ? c->o_groups / m->tp_size : 1, olr = c->o_lora_rank, gl = H * hd / G;
	struct gemm_job j[8];
	int nj = 0;
	j[nj++] = job(&L->wq_a, u->y, D, u->qr, ql, n);
	j[nj++] = job(&L->wkv, u->y, D, u->kv, hd, n);
	if (r) {
		j[nj++] = job(&L->c_wkv, u->y, D, u->ckv, cw, n);
		j[nj++] = job(&L->c_wgate, u->y, D, u->csc, cw, n);
	}
	if (r == 4) {
		j[nj++] = job(&L->ix_wproj, u->y, D, u->iw, Hi, n);
		j[nj++] = job(&L->ic_wkv, u->y, D, u->ikv, 2 * di, n);
		j[nj++] = job(&L->ic_wgate, u->y, D, u->isc, 2 * di, n);
	}
	run(m, nj, j);
	v4_rmsnorm_rows(u->qr, n, ql, L->q_norm, c->rms_norm_eps);
	v4_rmsnorm_rows(u->kv, n, hd, L->kv_norm, c->rms_norm_eps);
	nj = 0;
	j[nj++] = job(&L->wq_b, u->qr, ql, u->q, H * hd, n);
	if (r == 4)
		j[nj++] = job(&L->ix_wq_b, u->qr, ql, u->iq, Hi * di, n);
	run(m, nj, j);
	/* under DCP the group's heads attend this rank's keys (v4_block.h), merged below */
	int W = v->dcp_size > 1 ? v->dcp_size : 1, Hq = W * H;
	float *qa = u->q, *oa = u->o;
	if (W > 1) {
		if (comm_dcp_allgather_inner(m->opt.comm, u->q, (size_t)n, (size_t)(H * hd), u->qg, e))
			return err_prefix(e, "DeepSeek-V4: DCP query gather");
		qa = u->qg, oa = u->og;
	}
	const struct attn_meta *am = &b->attn;
	for (int k = 0; k < am->n_seqs; k++) {
		int t0 = am->query_start[k], nt = am->query_start[k + 1] - t0;
		long p0 = b->positions[t0];
		struct v4_dcp dcp = {W, v->dcp_rank, v->dcp_interleave, dcp_gather, m->opt.comm, NULL};
		struct v4_pages pg = {.base = kv->data,
				      .block_floats = (size_t)kv->block_size * (size_t)kv->row,
				      .bt = am->block_table + (size_t)k * (size_t)am->max_blocks,
				      .bs = kv->block_size,
				      .ent_off = v->pool.ent[li],
				      .ix_off = v->pool.ix[li],
				      .ent_w = L->attn.ratio ? v4_comp_entry_floats(&L->attn.comp) : 0,
				      .ix_w = L->attn.ratio == 4 ? v4_comp_entry_floats(&L->attn.icomp) : 0,
				      .pool = m->opt.pool,
				      .dcp = W > 1 ? &dcp : NULL};
		struct v4_seq_attn *st = &slots[k]->layer[li];
		/* in pieces that end at the boundaries whose state is saved (the split changes
		 * nothing: v4_block.h), the state copied there */
		for (int done = 0; done < nt;) {
			int piece = nt - done, snap = -1;
			for (int j = 0; j < u->n_saves; j++) {
				int len = (int)(u->saves[j].pos - (p0 + done));
				if (u->saves[j].seq == k && len > 0 && len <= piece)
					piece = len, snap = u->saves[j].snap;
			}
			size_t T = (size_t)(t0 + done);
			dcp.lse = W > 1 ? u->lse + T * (size_t)Hq : NULL;
			if (v4_attn_seq(&L->attn, st, &pg, p0 + done, piece, qa + T * (size_t)(Hq * hd),
					u->kv + T * (size_t)hd, u->ckv + T * (size_t)cw, u->csc + T * (size_t)cw,
					u->iq + T * (size_t)(Hi * di), u->iw + T * (size_t)Hi,
					u->ikv + T * (size_t)(2 * di), u->isc + T * (size_t)(2 * di),
					oa + T * (size_t)(Hq * hd), NULL, u->work, v->max_len, e))
				return -1;
			if (snap >= 0 && (p0 + done + piece) % v->pool.bs == 0)
				v4_save_layer(v, snap, li, st);
			done += piece;
		}
	}
	if (W > 1 && dcp_merge(m, v, L, b, u, e))
		return -1;
	/* wo_a per group: z_g [n, o_lora] = wo_a[g*o_lora.., g*gl..] o_g */
	struct wmat wg[16];
	if (G > 16)
		return err_set(e, "DeepSeek-V4: o_groups %d > 16", G);
	for (int g = 0; g < G; g++) {
		wg[g] = wmat_view(&L->wo_a, g * olr, olr, 0, gl);
		struct gemm_job jg = job(&wg[g], u->o + (size_t)g * (size_t)gl, H * hd, u->z + (size_t)g * (size_t)olr,
					 G * olr, n);
		run(m, 1, &jg);
	}
	j[0] = job(&L->wo_b, u->z, G * olr, u->out, D, n);
	run(m, 1, j);
	return tp_sum(m, u->out, n, "wo_b", e);
}

/* One layer's MoE: y [n, D] (normed) -> b->out [n, D]: the shared expert, then each routed
 * expert over the rows that chose it (its routing weight applied before w2) */
static int moe(struct model *m, struct v4_model *v, struct v4_layer *L, const struct batch *b, struct bufs *u,
	       struct err *e)
{
	const struct v4_config *c = &v->c;
	/* I: this rank's intermediate columns of each expert */
	int n = b->n_tokens, D = c->hidden_size, I = L->s1.rows, k = c->num_experts_per_tok;
	float lim = c->swiglu_limit;
	struct gemm_job j[3] = {job(&L->gate, u->y, D, u->glog, c->n_routed_experts, n),
				job(&L->s1, u->y, D, u->g, I, n), job(&L->s3, u->y, D, u->u, I, n)};
	run(m, 3, j);
	for (int t = 0; t < n; t++) {
		size_t o = (size_t)t * (size_t)I;
		v4_swiglu_clamped(I, u->g + o, u->u + o, 1.0f, lim, u->g + o);
		if (v4_route_one(&L->route, u->glog + (size_t)t * (size_t)c->n_routed_experts, b->tokens[t],
				 u->ids + (size_t)t * (size_t)k, u->wts + (size_t)t * (size_t)k, e))
			return -1;
	}
	j[0] = job(&L->s2, u->g, I, u->out, D, n);
	run(m, 1, j);
	for (int ex = 0; ex < c->n_routed_experts; ex++) {
		int cnt = 0;
		for (int t = 0; t < n; t++)
			for (int i = 0; i < k; i++)
				if (u->ids[t * k + i] == ex) {
					u->rows[cnt] = t * k + i; /* the token and its slot */
					memcpy(u->xe + (size_t)cnt * (size_t)D, u->y + (size_t)t * (size_t)D,
					       sizeof(float) * (size_t)D);
					cnt++;
				}
		if (!cnt)
			continue;
		struct gemm_job je[2] = {job(&L->w1[ex], u->xe, D, u->g, I, cnt),
					 job(&L->w3[ex], u->xe, D, u->u, I, cnt)};
		run(m, 2, je);
		for (int r = 0; r < cnt; r++) {
			size_t o = (size_t)r * (size_t)I;
			v4_swiglu_clamped(I, u->g + o, u->u + o, u->wts[u->rows[r]], lim, u->g + o);
		}
		je[0] = job(&L->w2[ex], u->g, I, u->eo, D, cnt);
		run(m, 1, je);
		for (int r = 0; r < cnt; r++) {
			float *dst = u->out + (size_t)(u->rows[r] / k) * (size_t)D,
			      *src = u->eo + (size_t)r * (size_t)D;
			for (int d = 0; d < D; d++)
				dst[d] += src[d];
		}
	}
	return tp_sum(m, u->out, n, "MoE", e);
}

/* One block (li: its state in the slots) over x [n, hc, D] in place */
static int block(struct model *m, struct v4_model *v, struct v4_layer *L, int li, const struct batch *b,
		 struct kv_cache *kv, struct v4_slot **slots, struct bufs *u, struct err *e)
{
	const struct v4_config *c = &v->c;
	int n = b->n_tokens, D = c->hidden_size, hc = c->hc_mult;
	v4_hc_pre(&L->hca, n, u->x, u->y, u->post, u->comb);
	v4_rmsnorm_rows(u->y, n, D, L->attn_norm, c->rms_norm_eps);
	if (attention(m, v, L, li, b, kv, slots, u, e))
		return -1;
	v4_hc_post(hc, D, n, u->out, u->x, u->post, u->comb, u->x);
	v4_hc_pre(&L->hcf, n, u->x, u->y, u->post, u->comb);
	v4_rmsnorm_rows(u->y, n, D, L->ffn_norm, c->rms_norm_eps);
	if (moe(m, v, L, b, u, e))
		return -1;
	v4_hc_post(hc, D, n, u->out, u->x, u->post, u->comb, u->x);
	return 0;
}

/* logits [nl, vocab] of the requested rows of x: head(norm(hc_head(x))); under TP this
 * rank's vocabulary rows of the head, the columns gathered to rank 0 (logits: rank 0's) */
static int head(struct model *m, struct v4_model *v, const struct v4_hc *hch, const float *norm, const struct batch *b,
		struct bufs *u, float *logits, struct err *e)
{
	const struct v4_config *c = &v->c;
	int nl = b->n_logits, D = c->hidden_size, hc = c->hc_mult;
	for (int r = 0; r < nl; r++)
		v4_hc_head(hch, 1, u->x + (size_t)b->logits_rows[r] * (size_t)(hc * D), u->hl + (size_t)r * (size_t)D);
	v4_rmsnorm_rows(u->hl, nl, D, norm, c->rms_norm_eps);
	if (m->tp_size <= 1) {
		struct gemm_job jh = job(&v->w.head, u->hl, D, logits, c->vocab_size, nl);
		run(m, 1, &jh);
		return 0;
	}
	int nv = m->vocab_cols[m->tp_rank];
	struct gemm_job jh = job(&v->w.head, u->hl, D, u->hp, nv, nl);
	run(m, 1, &jh);
	if (comm_tp_gather_cols(m->opt.comm, u->hp, (size_t)nl, m->vocab_cols, m->tp_rank == 0 ? logits : NULL, false,
				e))
		return err_prefix(e, "DeepSeek-V4: head gather");
	return 0;
}

/* the step's checks, slots and scratch */
static int begin(struct model *m, struct v4_model *v, const struct batch *b, const struct kv_cache *kv, bool mtp,
		 struct v4_slot ***slots, struct bufs *u, struct err *e)
{
	int n = b->n_tokens, nl = b->n_logits;
	if (kv && kv->block_size != v->pool.pbs)
		v4_pool_layout(v, kv->block_size);
	if (!kv || !kv->data || (size_t)kv->block_size * (size_t)kv->row < v->pool.block_floats)
		return err_set(e, "DeepSeek-V4: the KV cache was not made by this model (model_kv_cache_init)");
	int W = b->attn.dcp_size > 1 ? b->attn.dcp_size : 1;
	if (W != v->dcp_size ||
	    (W > 1 && (b->attn.dcp_rank != v->dcp_rank || b->attn.dcp_interleave != v->dcp_interleave)))
		return err_set(
			e, "DeepSeek-V4: a step for DCP rank %d of %d (interleave %d), the model loaded for %d of %d (%d)",
			b->attn.dcp_rank, W, b->attn.dcp_interleave, v->dcp_rank, v->dcp_size, v->dcp_interleave);
	if (n > m->opt.max_batch_tokens || nl > m->opt.max_batch_tokens || b->attn.n_seqs > v->n_slots)
		return err_set(e, "DeepSeek-V4: a step of %d tokens, %d sequences (at most %d, %d)", n, b->attn.n_seqs,
			       m->opt.max_batch_tokens, v->n_slots);
	for (int t = 0; t < n; t++)
		if (b->tokens[t] < 0 || b->tokens[t] >= v->c.vocab_size)
			return err_set(e, "DeepSeek-V4: token %d outside the vocabulary (%d)", b->tokens[t],
				       v->c.vocab_size);
	arena_reset(&m->arena);
	layout(v, n, nl, &m->arena, u);
	*slots = u->slots; /* n_seqs <= n_slots (checked above) */
	if (v4_claim_slots(v, b, mtp, *slots, e))
		return -1;
	u->n_saves = mtp && b->hidden_from_mtp ? 0 : v4_plan_saves(v, b, mtp, u->saves);
	m->step_weight_bytes = 0;
	return 0;
}

int v4_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *be,
	       float *logits, struct err *e)
{
	struct v4_model *v = m->fam_state;
	const struct v4_config *c = &v->c;
	int n = b->n_tokens, D = c->hidden_size, hc = c->hc_mult;
	struct v4_slot **slots;
	struct bufs u;
	if (begin(m, v, b, kv, false, &slots, &u, e))
		return -1;
	/* the embedding [n, D], repeated over the hc streams */
	struct compute_ctx cx = model_step_cx(m);
	cx.ops->embed(&cx, &v->w.embed, b->tokens, n, D, u.y);
	for (int t = 0; t < n; t++)
		for (int s = 0; s < hc; s++)
			memcpy(u.x + ((size_t)t * (size_t)hc + (size_t)s) * (size_t)D, u.y + (size_t)t * (size_t)D,
			       sizeof(float) * (size_t)D);
	for (int li = 0; li < c->num_hidden_layers; li++)
		if (block(m, v, &v->w.layers[li], li, b, kv, slots, &u, e))
			return -1;
	if (v->hid) { /* the MTP module's input: the final streams, before hc_head */
		memcpy(v->hid, u.x, sizeof(float) * (size_t)n * (size_t)(hc * D));
		v->n_hid = n;
	}
	int rc = head(m, v, &v->w.hch, v->w.norm, b, &u, logits, e);
	v4_advance(v, b, false, slots);
	v4_commit_saves(v, u.saves, u.n_saves, false);
	return rc;
}

int v4_mtp_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *be,
		   float *logits, struct err *e)
{
	struct v4_model *v = m->fam_state;
	const struct v4_config *c = &v->c;
	int n = b->n_tokens, D = c->hidden_size, hc = c->hc_mult;
	if (!v->hid)
		return err_set(e, "DeepSeek-V4: the MTP module was not loaded");
	const float *src = b->hidden_from_mtp ? v->mtp_hid : v->hid;
	int n_src = b->hidden_from_mtp ? v->n_mtp_hid : v->n_hid;
	for (int t = 0; t < n; t++)
		if (b->hidden_rows[t] < 0 || b->hidden_rows[t] >= n_src)
			return err_set(e, "DeepSeek-V4 MTP: hidden row %d of %d", b->hidden_rows[t], n_src);
	struct v4_slot **slots;
	struct bufs u;
	if (begin(m, v, b, kv, true, &slots, &u, e))
		return -1;
	struct v4_mtp *t0 = &v->w.mtp[0];
	/* x[t, s] = e_proj(enorm(embed(token))) + h_proj(hnorm(h[t, s])) */
	struct compute_ctx cx = model_step_cx(m);
	cx.ops->embed(&cx, &v->w.embed, b->tokens, n, D, u.y);
	for (int t = 0; t < n; t++) {
		memcpy(u.hx + (size_t)t * (size_t)(hc * D), src + (size_t)b->hidden_rows[t] * (size_t)(hc * D),
		       sizeof(float) * (size_t)(hc * D));
	}
	v4_rmsnorm_rows(u.y, n, D, t0->enorm, c->rms_norm_eps);
	v4_rmsnorm_rows(u.hx, n * hc, D, t0->hnorm, c->rms_norm_eps);
	struct gemm_job j[2] = {job(&t0->e_proj, u.y, D, u.out, D, n), job(&t0->h_proj, u.hx, D, u.x, D, n * hc)};
	run(m, 2, j);
	for (int t = 0; t < n; t++)
		for (int s = 0; s < hc; s++) {
			float *xs = u.x + ((size_t)t * (size_t)hc + (size_t)s) * (size_t)D;
			for (int d = 0; d < D; d++)
				xs[d] += u.out[(size_t)t * (size_t)D + (size_t)d];
		}
	if (block(m, v, &t0->blk, c->num_hidden_layers, b, kv, slots, &u, e))
		return -1;
	/* a chained draft's input: the output streams of the logits rows */
	v->n_mtp_hid = b->n_logits <= m->opt.max_seqs ? b->n_logits : 0;
	for (int r = 0; r < v->n_mtp_hid; r++)
		memcpy(v->mtp_hid + (size_t)r * (size_t)(hc * D), u.x + (size_t)b->logits_rows[r] * (size_t)(hc * D),
		       sizeof(float) * (size_t)(hc * D));
	int rc = head(m, v, &t0->hch, t0->norm, b, &u, logits, e);
	v4_advance(v, b, true, slots);
	v4_commit_saves(v, u.saves, u.n_saves, true);
	return rc;
}
