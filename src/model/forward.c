/* One forward step (docs/reference.md A.3-A.8): embed → layers (RMSNorm → MLA → residual → RMSNorm →
 * dense SwiGLU or MoE → residual) → final norm → lm_head for the requested rows. Every
 * temporary comes from the model's per-step arena; nothing here mallocs.
 *
 * Names (attention's own are in attn/attn.h's glossary):
 *   n, nt     tokens of the step / of one call        D    hidden_size
 *   H         this rank's attention heads             Hg   heads attended (W x H under DCP)
 *   dn, dr    qk_nope / qk_rope head dims             dv   v_head_dim
 *   Lq, Lkv   q_lora_rank, kv_lora_rank               row  Lkv + dr, one latent cache row
 *   qw        H x (dn + dr), a token's q              W    DCP ranks (1: off)
 *   E, k      routed experts, experts a token takes   Im   moe_intermediate_size
 *   li        layer index                             t0   first token of a call */
#include <math.h>
#include <string.h>

#include "attn/dcp.h"
#include "attn/kv_cache.h"
#include "attn/prefill.h"
#include "model/forward.h"
#include "model/step_scratch.h"
#include "ops/backend.h"
#include "ops/route.h"

/* Every ALLOC is a term of the step's layout (step_scratch.c), which sizes the arena */
#define ALLOC(m, type, count) ((type *)arena_alloc(&(m)->arena, sizeof(type) * (size_t)(count)))

static struct compute_ctx step_cx(struct model *m) { return model_step_cx(m); }

/* The operations of the step through the table, with the model's rounding and eps: under
 * bf16 activations every activation is rounded once final (model_act_bf16). */
static void act_round(struct model *m, float *x, size_t n)
{
	struct compute_ctx cx = step_cx(m);
	if (model_act_bf16(m) && n > 0)
		cx.ops->round_bf16(&cx, x, n);
}

/* The model's GEMMs. Under bf16 activations every x is rounded (act_round) before it is
 * multiplied, which is the contract that lets the kernels run bf16 dot products (x_bf16):
 * their products are exact, so float32 mode stays the exact reference.
 * An output that is rounded as it stands is rounded by the GEMM itself (job.round_bf16 =
 * model_act_bf16), in the threads that computed it rather than in a serial pass afterwards. */
static void gemm_run(struct model *m, int n_jobs, struct gemm_job *j)
{
	struct compute_ctx cx = step_cx(m);
	for (int i = 0; i < n_jobs; i++)
		j[i].x_bf16 = model_act_bf16(m);
	cx.ops->gemm(&cx, n_jobs, j);
}

static void gemm1(struct model *m, const struct wmat *w, const float *x, int ldx, int n, float *y, int ldy)
{
	struct gemm_job j = {.w = w, .x = x, .ldx = ldx, .n = n, .y = y, .ldy = ldy};
	gemm_run(m, 1, &j);
}

static void rmsnorm(struct model *m, float *y, int ldy, const float *x, int ldx, const float *w, int n, int d)
{
	struct compute_ctx cx = step_cx(m);
	cx.ops->rmsnorm(&cx, y, ldy, x, ldx, w, n, d, m->cfg.rms_norm_eps, model_act_bf16(m));
}

/* out = silu(g) * u over n values, rounded like the activations */
static void swiglu(struct model *m, float *out, const float *g, const float *u, size_t n)
{
	struct compute_ctx cx = step_cx(m);
	cx.ops->swiglu(&cx, out, g, u, n, model_act_bf16(m));
}

/* h += y, rounded like the activations when `round` */
static void add(struct model *m, float *h, const float *y, size_t n, bool round)
{
	struct compute_ctx cx = step_cx(m);
	cx.ops->add(&cx, h, y, n, round && model_act_bf16(m));
}

/* dst[i] = src[rows ? rows[i] : i], n rows of d */
static void copy_rows(struct model *m, float *dst, int ldd, const float *src, int lds, const int32_t *rows, int n,
		      int d)
{
	struct compute_ctx cx = step_cx(m);
	cx.ops->copy_rows(&cx, dst, ldd, src, lds, rows, n, d);
}

static int validate(const struct model *m, const struct batch *b, const struct kv_cache *kv,
		    const struct attn_backend *backend, struct err *e)
{
	const struct model_config *c = &m->cfg;
	const struct attn_meta *a = &b->attn;
	if (b->n_tokens < 1 || b->n_tokens > m->opt.max_batch_tokens)
		return err_set(e, "forward: n_tokens %d outside [1, %d]", b->n_tokens, m->opt.max_batch_tokens);
	if (a->n_tokens != b->n_tokens)
		return err_set(e, "forward: attention metadata has %d tokens, batch %d", a->n_tokens, b->n_tokens);
	if (a->n_seqs < 1 || a->n_seqs > m->opt.max_seqs)
		return err_set(e, "forward: n_seqs %d outside [1, %d]", a->n_seqs, m->opt.max_seqs);
	if (a->query_start[0] != 0 || a->query_start[a->n_seqs] != b->n_tokens)
		return err_set(e, "forward: query_start does not span the %d tokens", b->n_tokens);
	for (int i = 0; i < a->n_seqs; i++) {
		int ql = a->query_start[i + 1] - a->query_start[i];
		if (ql < 0 || a->seq_lens[i] < ql)
			return err_set(e, "forward: sequence %d has query length %d and seq_len %d", i, ql,
				       a->seq_lens[i]);
	}
	if (a->n_decodes < 0 || a->n_decodes > a->n_seqs || a->n_decode_tokens != a->query_start[a->n_decodes])
		return err_set(e, "forward: n_decodes %d / n_decode_tokens %d inconsistent with query_start",
			       a->n_decodes, a->n_decode_tokens);
	if (config_is_sparse(c)) {
		if (attn_backend_check(backend, true, e))
			return err_prefix(e, "forward");
		if (kv->index_dim != c->index_head_dim)
			return err_set(e, "forward: the kv cache has no indexer cache of width %d (sparse attention)",
				       c->index_head_dim);
	} else if (a->n_decodes > 0 && (!backend || !backend->decode)) {
		return err_set(e, "forward: %d decode sequences but no attention backend for them", a->n_decodes);
	} else if (a->n_decodes < a->n_seqs && backend && !backend->prefill) {
		return err_set(e, "forward: attention backend %s has no prefill", backend->name);
	}
	for (int t = 0; t < b->n_tokens; t++) {
		if (b->tokens[t] < 0 || b->tokens[t] >= c->vocab_size)
			return err_set(e, "forward: token %d at row %d outside the vocabulary (%d)", b->tokens[t], t,
				       c->vocab_size);
		if (b->positions[t] < 0)
			return err_set(e, "forward: negative position %d at row %d", b->positions[t], t);
		if (a->slots[t] >= kv_cache_n_slots(kv))
			return err_set(e, "forward: slot %lld at row %d outside the kv cache", (long long)a->slots[t],
				       t);
	}
	if (b->n_logits < 0 || b->n_logits > b->n_tokens)
		return err_set(e, "forward: n_logits %d outside [0, %d]", b->n_logits, b->n_tokens);
	for (int i = 0; i < b->n_logits; i++)
		if (b->logits_rows[i] < 0 || b->logits_rows[i] >= b->n_tokens)
			return err_set(e, "forward: logits row %d outside [0, %d)", b->logits_rows[i], b->n_tokens);
	if (kv->n_layers != m->n_layers || kv->kv_lora_rank != c->kv_lora_rank || kv->rope_dim != c->qk_rope_head_dim)
		return err_set(e,
			       "forward: kv cache shape (%d layers, %d + %d) does not match the model (%d, %d + %d)",
			       kv->n_layers, kv->kv_lora_rank, kv->rope_dim, m->n_layers, c->kv_lora_rank,
			       c->qk_rope_head_dim);
	return 0;
}

/* h [n, D] = the embedding's rows of the tokens */
static void embed_rows(struct model *m, const struct wmat *embed, const int32_t *tokens, int n, float *h)
{
	struct compute_ctx cx = step_cx(m);
	cx.ops->embed(&cx, embed, tokens, n, m->cfg.hidden_size, h);
}

/* Tensor parallelism: sums a row-parallel output over the TP group (in place). */
static int tp_sum(struct model *m, float *buf, size_t n, struct err *e)
{
	if (m->tp_size <= 1)
		return 0;
	return comm_tp_allreduce_sum(m->opt.comm, buf, n, e) ? err_prefix(e, "forward") : 0;
}

/* prefill under DCP: the cached context all-gather over the DCP group */
static int dcp_gather(void *ctx, const float *send, size_t n, float *recv, struct err *e)
{
	return comm_dcp_allgather(ctx, send, n, recv, e);
}


/* The absorbed path (docs/mla-dcp.md §2.6) of the step's tokens [t0, t0 + nt) (q: the step's
 * [n, H, dn+dr], o: [n, H, dv]): q_abs[t,h] = W_UK[h]ᵀ q_nope[t,h]; [q_abs | q_pe] attends
 * the latent cache (under DCP the group's heads attend this rank's shard, partial outputs
 * merged by their LSE); o[t,h] = W_UV[h] · o_lat[t,h]. sel_start / sel: sparse attention's
 * selection (the backend's sparse call); NULL: the dense decode path (tokens [0, td)). */
static int absorbed(struct model *m, int li, const struct attn_meta *meta, struct kv_cache *kv,
		    const struct attn_backend *backend, const float *q, int t0, int nt, const int32_t *sel_start,
		    const int32_t *sel, float *o, struct err *e)
{
	const struct model_config *c = &m->cfg;
	const struct layer_weights *l = &m->layers[li];
	int H = m->n_heads_local, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
	int Lkv = c->kv_lora_rank, qw = H * (dn + dr), row = Lkv + dr;
	int W = meta->dcp_size > 1 ? meta->dcp_size : 1, Hg = W * H; /* heads attended */
	bool bf = model_act_bf16(m);
	float *qd = ALLOC(m, float, (size_t)nt *H *row);   /* [nt, H, Lkv+dr] */
	float *olat = ALLOC(m, float, (size_t)nt *H *Lkv); /* [nt, H, Lkv] */
	float *lse = ALLOC(m, float, (size_t)nt *H);       /* [nt, H] */
	struct wmat *wv = ALLOC(m, struct wmat, H);
	struct gemm_job *j = ALLOC(m, struct gemm_job, H);
	const float *qt = q + (size_t)t0 * qw;
	/* q_pe of every (token, head), with its RoPE (mla_rope) */
	copy_rows(m, qd + Lkv, row, qt + dn, dn + dr, NULL, nt * H, dr);
	for (int hh = 0; hh < H; hh++) {
		j[hh] = (struct gemm_job){.w = &l->uk_t[hh],
					  .x = qt + (size_t)hh * (dn + dr),
					  .ldx = qw,
					  .y = qd + (size_t)hh * row,
					  .ldy = H * row,
					  .n = nt,
					  .round_bf16 = bf};
		if (t0 == 0)
			model_used(m, &l->uk_t[hh]);
	}
	gemm_run(m, H, j);
	/* qd [nt, H, :Lkv] = q_abs */
	const float *qa = qd;
	float *oa = olat, *la = lse;
	struct comm *cm = m->opt.comm;
	struct compute_ctx cx = step_cx(m);
	if (W > 1) {                                              /* DCP (docs/mla-dcp.md §4.4-4.5) */
		float *qg = ALLOC(m, float, (size_t)nt *Hg *row); /* [nt, W*H, Lkv+dr] */
		oa = ALLOC(m, float, (size_t)nt *Hg *Lkv);        /* [nt, W*H, Lkv] */
		la = ALLOC(m, float, (size_t)nt *Hg);             /* [nt, W*H] */
		if (comm_dcp_allgather_inner(cm, qd, (size_t)nt, (size_t)H * row, qg, e))
			return err_prefix(e, "layer %d: dcp q all-gather", li);
		qa = qg;
	}
	if (sel) {
		struct attn_sparse_args sa = {.meta = meta,
					      .kv = kv,
					      .layer = li,
					      .n_heads = Hg,
					      .scale = m->scale,
					      .tok0 = t0,
					      .n_tok = nt,
					      .sel_start = sel_start,
					      .sel = sel,
					      .q = qa,
					      .out = oa,
					      .lse = la,
					      .cx = &cx,
					      .q_bf16 = bf,
					      .p_bf16 = bf};
		backend->sparse(&sa);
	} else {
		struct attn_decode_args da = {.meta = meta,
					      .kv = kv,
					      .layer = li,
					      .n_heads = Hg,
					      .scale = m->scale,
					      .q = qa,
					      .out = oa,
					      .lse = la,
					      .cx = &cx,
					      .q_bf16 = bf,
					      .p_bf16 = bf};
		backend->decode(&da);
	}
	if (W > 1) {
		float *lses = ALLOC(m, float, (size_t)W *nt *Hg); /* [W, nt, W*H] */
		if (comm_dcp_allgather(cm, la, (size_t)nt * Hg, lses, e))
			return err_prefix(e, "layer %d: dcp lse all-gather", li);
		dcp_lse_correct(lses, W, nt, Hg, meta->dcp_rank, oa, Lkv, NULL);
		if (comm_dcp_reduce_scatter_inner(cm, oa, (size_t)nt, (size_t)H * Lkv, olat, e))
			return err_prefix(e, "layer %d: dcp reduce-scatter", li);
	}
	act_round(m, olat, (size_t)nt * H * Lkv);
	for (int hh = 0; hh < H; hh++) {
		wv[hh] = wmat_view(&l->kv_b, hh * (dn + dv) + dn, dv, 0, Lkv);
		j[hh] = (struct gemm_job){.w = &wv[hh],
					  .x = olat + (size_t)hh * Lkv,
					  .ldx = H * Lkv,
					  .y = o + ((size_t)t0 * H + hh) * dv,
					  .ldy = H * dv,
					  .n = nt,
					  .round_bf16 = bf};
		if (t0 == 0)
			model_used(m, &wv[hh]);
	}
	gemm_run(m, H, j);
	return 0;
}

static int attention(struct model *m, int li, const struct batch *b, const struct attn_meta *meta, struct kv_cache *kv,
		     const struct attn_backend *backend, const float *xn, float *h, struct err *e)
{
	const struct model_config *c = &m->cfg;
	const struct layer_weights *l = &m->layers[li];
	/* H: this rank's heads (all of them without tensor parallelism) */
	int n = b->n_tokens, D = c->hidden_size, H = m->n_heads_local, dn = c->qk_nope_head_dim;
	int dr = c->qk_rope_head_dim, dv = c->v_head_dim, Lq = c->q_lora_rank, Lkv = c->kv_lora_rank;
	int qw = H * (dn + dr), row = Lkv + dr;
	bool sparse = config_is_sparse(c);
	float *q = ALLOC(m, float, (size_t)n *qw);    /* [n, H, dn+dr] */
	float *kvr = ALLOC(m, float, (size_t)n *row); /* [n, Lkv+dr] */
	float *cq = NULL;                             /* [n, Lq] */
	if (Lq > 0) {
		cq = ALLOC(m, float, (size_t)n *Lq);
		struct gemm_job j[2] = {
			{.w = &l->q_a, .x = xn, .ldx = D, .y = cq, .ldy = Lq, .n = n, .round_bf16 = model_act_bf16(m)},
			{.w = &l->kv_a,
			 .x = xn,
			 .ldx = D,
			 .y = kvr,
			 .ldy = row,
			 .n = n,
			 .round_bf16 = model_act_bf16(m)}};
		gemm_run(m, 2, j);
		rmsnorm(m, cq, Lq, cq, Lq, l->q_a_norm, n, Lq);
		gemm1(m, &l->q_b, cq, Lq, n, q, qw);
		model_used(m, &l->q_a);
		model_used(m, &l->q_b);
	} else {
		model_used(m, &l->q_proj);
		/* q is rounded after RoPE only */
		struct gemm_job j[2] = {{.w = &l->q_proj, .x = xn, .ldx = D, .y = q, .ldy = qw, .n = n},
					{.w = &l->kv_a,
					 .x = xn,
					 .ldx = D,
					 .y = kvr,
					 .ldy = row,
					 .n = n,
					 .round_bf16 = model_act_bf16(m)}};
		gemm_run(m, 2, j);
	}
	model_used(m, &l->kv_a);
	model_used(m, &l->o_proj);
	struct compute_ctx cx = step_cx(m);
	struct ops_mla_rope qk = {.rope = &m->rope,
				  .q = q,
				  .kv = kvr,
				  .norm_w = l->kv_a_norm,
				  .eps = c->rms_norm_eps,
				  .pos = b->positions,
				  .n = n,
				  .H = H,
				  .dn = dn,
				  .dr = dr,
				  .Lkv = Lkv,
				  .round_bf16 = model_act_bf16(m)};
	cx.ops->mla_rope(&cx, &qk);
	/* the step's own rows are in the cache before any attention reads it. An fp8 row's codes
	 * and scales are the attention layer's format (attn/kernels/kv_fp8.h); the step's fresh rows
	 * then take the values the cache holds, so that a prefill attends its own tokens as a later
	 * step (a decode, the next chunk, a prefix-cache hit) reads them back */
	if (kv->dtype == DT_F8_E4M3) {
		kv_cache_write_strided(kv, li, meta->slots, kvr, row, kvr + Lkv, row, n);
		kv_cache_round_rows(kv, kvr, row, n);
	} else
		cx.ops->kv_write(&cx, kv_cache_layer_rows(kv, li), kv->dtype, row, Lkv, meta->slots, n, kvr, row,
				 kvr + Lkv, row);

	float *o = ALLOC(m, float, (size_t)n *H *dv); /* [n, H, dv] */
	if (sparse) { /* every token: the indexer's top-k, then the absorbed path over them */
		int32_t *sel_start = ALLOC(m, int32_t, n + 1), *sel = NULL;
		if (model_indexer(m, li, b, meta, kv, xn, cq, sel_start, &sel, e))
			return -1;
		for (int t0 = 0; t0 < n; t0 += SPARSE_CHUNK) {
			size_t mark = m->arena.used;
			if (absorbed(m, li, meta, kv, backend, q, t0, n - t0 < SPARSE_CHUNK ? n - t0 : SPARSE_CHUNK,
				     sel_start, sel, o, e))
				return -1;
			m->arena.used = mark;
		}
	} else {
		if (meta->n_decodes < meta->n_seqs) {
			struct attn_prefill_args pa = {.meta = meta,
						       .kv = kv,
						       .layer = li,
						       .n_heads = H,
						       .nope_dim = dn,
						       .rope_dim = dr,
						       .v_dim = dv,
						       .kv_lora_rank = Lkv,
						       .scale = m->scale,
						       .kv_b = &l->kv_b,
						       .q = q,
						       .kv_c = kvr,
						       .k_pe = kvr + Lkv,
						       .ld_kv = row,
						       .out = o,
						       .ws_rows = m->ws_rows,
						       .cx = &cx,
						       .dcp_allgather = dcp_gather,
						       .dcp_ctx = m->opt.comm,
						       .bf16 = m->opt.act_dtype == DT_BF16};
			/* a step without a backend (prefill only, as tests run it): the shared one */
			if (backend ? backend->prefill(&pa, e) : attn_prefill(&pa, e))
				return err_prefix(e, "layer %d", li);
			model_used(m, &l->kv_b);
		}
		int td = meta->n_decode_tokens;
		if (td > 0 && absorbed(m, li, meta, kv, backend, q, 0, td, NULL, NULL, o, e))
			return -1;
		/* the prefill rows (the decode rows: rounded by W_UV) */
		act_round(m, o + (size_t)td * H * dv, (size_t)(n - td) * H * dv);
	}
	if (m->tp_size > 1) { /* row-parallel o_proj: partial sums, all-reduced, then the residual */
		float *y = ALLOC(m, float, (size_t)n *D); /* [n, D] */
		struct gemm_job jo = {.w = &l->o_proj, .x = o, .ldx = H * dv, .y = y, .ldy = D, .n = n};
		gemm_run(m, 1, &jo);
		if (tp_sum(m, y, (size_t)n * D, e))
			return err_prefix(e, "layer %d: o_proj all-reduce", li);
		add(m, h, y, (size_t)n * D, true); /* the residual */
		return 0;
	}
	struct gemm_job jo = {.w = &l->o_proj,
			      .x = o,
			      .ldx = H * dv,
			      .y = h,
			      .ldy = D,
			      .n = n,
			      .accumulate = 1,
			      .round_bf16 = model_act_bf16(m)};
	gemm_run(m, 1, &jo);
	return 0;
}

/* Dense SwiGLU or MoE; under tensor parallelism every intermediate dimension is this rank's
 * slice (the views' row counts) and the outputs are all-reduced once per layer. */
static int ffn(struct model *m, int li, int n, const float *xn, float *h, struct err *e)
{
	const struct model_config *c = &m->cfg;
	const struct layer_weights *l = &m->layers[li];
	struct compute_ctx cx = step_cx(m);
	int D = c->hidden_size;
	bool tp = m->tp_size > 1;
	if (!l->moe) {
		int I = l->gate.rows;
		float *g = ALLOC(m, float, (size_t)n *I), *u = ALLOC(m, float, (size_t)n *I); /* [n, I] */
		struct gemm_job j[2] = {
			{.w = &l->gate, .x = xn, .ldx = D, .y = g, .ldy = I, .n = n, .round_bf16 = model_act_bf16(m)},
			{.w = &l->up, .x = xn, .ldx = D, .y = u, .ldy = I, .n = n, .round_bf16 = model_act_bf16(m)}};
		gemm_run(m, 2, j);
		model_used(m, &l->gate);
		model_used(m, &l->up);
		model_used(m, &l->down);
		swiglu(m, g, g, u, (size_t)n * I);
		if (tp) {
			float *y = ALLOC(m, float, (size_t)n *D); /* [n, D] partial */
			struct gemm_job jd = {.w = &l->down, .x = g, .ldx = I, .y = y, .ldy = D, .n = n};
			gemm_run(m, 1, &jd);
			if (tp_sum(m, y, (size_t)n * D, e))
				return err_prefix(e, "layer %d: mlp all-reduce", li);
			add(m, h, y, (size_t)n * D, true); /* the residual */
			return 0;
		}
		struct gemm_job jd = {.w = &l->down,
				      .x = g,
				      .ldx = I,
				      .y = h,
				      .ldy = D,
				      .n = n,
				      .accumulate = 1,
				      .round_bf16 = model_act_bf16(m)};
		gemm_run(m, 1, &jd);
		return 0;
	}
	/* the router is replicated: every rank picks the same experts and runs its slice of each */
	int E = c->n_routed_experts, k = c->num_experts_per_tok, Im = l->e_gate[0].rows;
	int Is = l->has_shared ? l->gate.rows : 0;
	float *rl = ALLOC(m, float, (size_t)n *E); /* [n, E] router logits */
	/* the router is a bf16 linear in bf16 engines: its logits are rounded */
	struct gemm_job jr = {
		.w = &l->router, .x = xn, .ldx = D, .y = rl, .ldy = E, .n = n, .round_bf16 = model_act_bf16(m)};
	gemm_run(m, 1, &jr);
	model_used(m, &l->router);
	int *ids = ALLOC(m, int, (size_t)n *k);     /* [n, k] */
	float *wts = ALLOC(m, float, (size_t)n *k); /* [n, k] */
	struct route_params rp = {.n_experts = E,
				  .top_k = k,
				  .n_group = c->n_group,
				  .topk_group = c->topk_group,
				  .sigmoid = c->scoring_func == SCORING_SIGMOID,
				  .norm_topk_prob = c->norm_topk_prob,
				  .routed_scaling_factor = c->routed_scaling_factor,
				  .bias = l->bias};
	int *count = ALLOC(m, int, E + 1), *off = ALLOC(m, int, E + 1);
	cx.ops->moe_route(&cx, &rp, rl, n, ids, wts);
	/* the host groups the rows by expert: the GEMM jobs are built from these counts */
	memset(count, 0, sizeof(int) * (size_t)(E + 1));
	for (int t = 0; t < n * k; t++)
		count[ids[t]]++;
	off[0] = 0;
	for (int x = 0; x < E; x++)
		off[x + 1] = off[x] + count[x];
	/* group by expert: the rows of expert x are [off[x], off[x+1]) */
	int nk = n * k;
	int *fill = ALLOC(m, int, E);
	float *tw = ALLOC(m, float, nk);
	memcpy(fill, off, sizeof(int) * (size_t)E);
	float *xg = ALLOC(m, float, (size_t)nk *D); /* [n*k, D] */
	int *slot_of = ALLOC(m, int, nk);           /* [n, k] → row of xg / dd */
	for (int t = 0; t < n; t++)
		for (int s = 0; s < k; s++) {
			int x = ids[(size_t)t * k + s], j = fill[x]++;
			tw[j] = wts[(size_t)t * k + s];
			slot_of[t * k + s] = j;
		}
	cx.ops->moe_gather(&cx, xg, xn, slot_of, n, k, D);
	float *gg = ALLOC(m, float, (size_t)nk *Im), *uu = ALLOC(m, float, (size_t)nk *Im); /* [n*k, Im] */
	float *sg = NULL, *su = NULL;
	struct gemm_job *j = ALLOC(m, struct gemm_job, 2 * E + 2);
	int nj = 0;
	for (int x = 0; x < E; x++) {
		if (!count[x])
			continue;
		model_used(m, &l->e_gate[x]);
		model_used(m, &l->e_up[x]);
		model_used(m, &l->e_down[x]);
		j[nj++] = (struct gemm_job){.w = &l->e_gate[x],
					    .x = xg + (size_t)off[x] * D,
					    .ldx = D,
					    .y = gg + (size_t)off[x] * Im,
					    .ldy = Im,
					    .n = count[x],
					    .round_bf16 = model_act_bf16(m)};
		j[nj++] = (struct gemm_job){.w = &l->e_up[x],
					    .x = xg + (size_t)off[x] * D,
					    .ldx = D,
					    .y = uu + (size_t)off[x] * Im,
					    .ldy = Im,
					    .n = count[x],
					    .round_bf16 = model_act_bf16(m)};
	}
	if (l->has_shared) {
		sg = ALLOC(m, float, (size_t)n *Is);
		su = ALLOC(m, float, (size_t)n *Is);
		model_used(m, &l->gate);
		model_used(m, &l->up);
		model_used(m, &l->down);
		j[nj++] = (struct gemm_job){
			.w = &l->gate, .x = xn, .ldx = D, .y = sg, .ldy = Is, .n = n, .round_bf16 = model_act_bf16(m)};
		j[nj++] = (struct gemm_job){
			.w = &l->up, .x = xn, .ldx = D, .y = su, .ldy = Is, .n = n, .round_bf16 = model_act_bf16(m)};
	}
	gemm_run(m, nj, j);
	swiglu(m, gg, gg, uu, (size_t)nk * Im);
	if (l->has_shared)
		swiglu(m, sg, sg, su, (size_t)n * Is);
	float *dd = ALLOC(m, float, (size_t)nk *D); /* [n*k, D] expert outputs */
	/* [n, D] routed sum; under TP followed by [n, D] shared partial, all-reduced together */
	float *routed = ALLOC(m, float, (size_t)(tp ? 2 : 1) * n * D);
	float *shared = tp ? routed + (size_t)n * D : h;
	if (tp)
		cx.ops->zero(&cx, shared, (size_t)n * D);
	nj = 0;
	for (int x = 0; x < E; x++)
		if (count[x])
			j[nj++] = (struct gemm_job){.w = &l->e_down[x],
						    .x = gg + (size_t)off[x] * Im,
						    .ldx = Im,
						    .y = dd + (size_t)off[x] * D,
						    .ldy = D,
						    .n = count[x]};
	if (l->has_shared)
		j[nj++] = (struct gemm_job){
			.w = &l->down, .x = sg, .ldx = Is, .y = shared, .ldy = D, .n = n, .accumulate = !tp};
	gemm_run(m, nj, j);
	cx.ops->moe_combine(&cx, routed, tp ? NULL : h, dd, tw, slot_of, n, k, D, model_act_bf16(m));
	if (!tp)
		return 0;
	if (tp_sum(m, routed, (size_t)2 * n * D, e))
		return err_prefix(e, "layer %d: moe all-reduce", li);
	/* as one process: h + shared, then + the rounded routed sum, rounded */
	act_round(m, routed, (size_t)n * D);
	add(m, h, shared, (size_t)n * D, false);
	add(m, h, routed, (size_t)n * D, true);
	return 0;
}

/* the step's start, shared by both forwards: checks, the arena, the backend's plan */
static int step_begin(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *backend,
		      struct attn_meta *meta, struct err *e)
{
	if (validate(m, b, kv, backend, e))
		return -1;
	arena_reset(&m->arena);
	*meta = b->attn;
	/* the decode path attends the DCP group's heads (W x this rank's) */
	int Hg = m->n_heads_local * (meta->dcp_size > 1 ? meta->dcp_size : 1);
	if (meta->dcp_size > 1 &&
	    (!m->opt.comm || meta->dcp_size != m->opt.comm->dcp_size || meta->dcp_rank != m->opt.comm->dcp_rank))
		return err_set(e, "forward: dcp %d rank %d does not match the communicator", meta->dcp_size,
			       meta->dcp_rank);
	struct compute_ctx cx = step_cx(m);
	if (backend && backend->plan && backend->plan(meta, Hg, &cx, e))
		return err_prefix(e, "attention plan");
	return 0;
}

/* one decoder layer on the residual stream h [n, D] (xn: its normed input) */
static int layer_forward(struct model *m, int li, const struct batch *b, const struct attn_meta *meta,
			 struct kv_cache *kv, const struct attn_backend *backend, float *xn, float *h, size_t mark,
			 struct err *e)
{
	const struct layer_weights *l = &m->layers[li];
	int n = b->n_tokens, D = m->cfg.hidden_size;
	m->arena.used = mark;
	rmsnorm(m, xn, D, h, D, l->attn_norm, n, D);
	if (attention(m, li, b, meta, kv, backend, xn, h, e))
		return -1;
	m->arena.used = mark;
	rmsnorm(m, xn, D, h, D, l->ffn_norm, n, D);
	return ffn(m, li, n, xn, h, e);
}

/* logits [n, vocab] = head · x (x: [n, D] normed rows); vocab-parallel under TP: this rank's
 * logit columns, gathered to rank 0 */
static int head_logits(struct model *m, const struct wmat *head, const float *x, int n, float *logits, struct err *e)
{
	const struct model_config *c = &m->cfg;
	int D = c->hidden_size;
	model_used(m, head);
	if (m->tp_size <= 1) {
		gemm1(m, head, x, D, n, logits, c->vocab_size);
		return 0;
	}
	int nv = m->vocab_cols[m->tp_rank];
	float *part = ALLOC(m, float, (size_t)n *nv); /* [n, V/T] */
	gemm1(m, head, x, D, n, part, nv);
	if (comm_tp_gather_cols(m->opt.comm, part, (size_t)n, m->vocab_cols, m->opt.comm->tp_rank == 0 ? logits : NULL,
				false, e))
		return err_prefix(e, "forward: lm_head gather");
	return 0;
}

int deepseek_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *backend,
		     float *logits, struct err *e)
{
	const struct model_config *c = &m->cfg;
	struct attn_meta meta;
	m->n_hidden = 0;
	if (step_begin(m, b, kv, backend, &meta, e))
		return -1;
	m->step_weight_bytes = 0;
	m->step_index_s = 0;
	int n = b->n_tokens, D = c->hidden_size;
	float *h = ALLOC(m, float, (size_t)n *D);  /* [n, D] residual stream */
	float *xn = ALLOC(m, float, (size_t)n *D); /* [n, D] normed input of a block */
	embed_rows(m, &m->embed, b->tokens, n, h);
	m->step_weight_bytes += (size_t)n * (wmat_bytes(&m->embed) / (size_t)m->embed.rows); /* n rows, any format */
	size_t mark = m->arena.used;
	for (int li = 0; li < c->num_hidden_layers; li++)
		if (layer_forward(m, li, b, &meta, kv, backend, xn, h, mark, e))
			return -1;
	m->arena.used = mark;
	if (m->hidden) { /* every row's final-normed state, for the MTP step that follows */
		rmsnorm(m, m->hidden, D, h, D, m->final_norm, n, D);
		m->n_hidden = n;
		copy_rows(m, xn, D, m->hidden, D, b->logits_rows, b->n_logits, D);
	} else { /* the logits rows alone */
		copy_rows(m, xn, D, h, D, b->logits_rows, b->n_logits, D);
		rmsnorm(m, xn, D, xn, D, m->final_norm, b->n_logits, D);
	}
	return b->n_logits > 0 ? head_logits(m, &m->lm_head, xn, b->n_logits, logits, e) : 0;
}

int deepseek_mtp_forward(struct model *m, const struct batch *b, struct kv_cache *kv,
			 const struct attn_backend *backend, float *logits, struct err *e)
{
	const struct model_config *c = &m->cfg;
	if (!model_has_mtp(m))
		return err_set(e, "mtp forward: the model was loaded without its MTP layer");
	if (!b->hidden_rows)
		return err_set(e, "mtp forward: no hidden rows");
	const float *src = b->hidden_from_mtp ? m->mtp_hidden : m->hidden; /* [n_src, D] */
	int n_src = b->hidden_from_mtp ? m->n_mtp_hidden : m->n_hidden;
	for (int t = 0; t < b->n_tokens; t++)
		if (b->hidden_rows[t] < 0 || b->hidden_rows[t] >= n_src)
			return err_set(e, "mtp forward: hidden row %d at row %d outside the last %s forward's %d",
				       b->hidden_rows[t], t, b->hidden_from_mtp ? "mtp" : "model", n_src);
	struct attn_meta meta;
	if (step_begin(m, b, kv, backend, &meta, e))
		return -1;
	int n = b->n_tokens, D = c->hidden_size;
	const struct mtp_weights *t = &m->mtp;
	float *h = ALLOC(m, float, (size_t)n *D);       /* [n, D] residual stream */
	float *xn = ALLOC(m, float, (size_t)n *D);      /* [n, D] */
	float *eh = ALLOC(m, float, (size_t)n * 2 * D); /* [n, 2D] eh_proj's input */
	embed_rows(m, &t->embed, b->tokens, n, h);
	struct compute_ctx cx = step_cx(m);
	for (int r = 0; r < n; r++)
		if (b->positions[r] == 0) /* as vLLM: position 0 has no previous token to follow */
			cx.ops->zero(&cx, h + (size_t)r * D, (size_t)D);
	copy_rows(m, xn, D, src, D, b->hidden_rows, n, D);
	rmsnorm(m, eh, 2 * D, h, D, t->enorm, n, D);
	rmsnorm(m, eh + D, 2 * D, xn, D, t->hnorm, n, D);
	struct gemm_job j = {
		.w = &t->eh_proj, .x = eh, .ldx = 2 * D, .y = h, .ldy = D, .n = n, .round_bf16 = model_act_bf16(m)};
	gemm_run(m, 1, &j);
	model_used(m, &t->eh_proj);
	size_t mark = m->arena.used;
	if (layer_forward(m, c->num_hidden_layers, b, &meta, kv, backend, xn, h, mark, e))
		return -1;
	m->arena.used = mark;
	/* the rows a chained pass may follow (one per sequence: the engine's drafts) */
	m->n_mtp_hidden = b->n_logits <= m->opt.max_seqs ? b->n_logits : 0;
	copy_rows(m, m->mtp_hidden, D, h, D, b->logits_rows, m->n_mtp_hidden, D);
	copy_rows(m, xn, D, h, D, b->logits_rows, b->n_logits, D);
	rmsnorm(m, xn, D, xn, D, t->head_norm, b->n_logits, D);
	return b->n_logits > 0 ? head_logits(m, &t->head, xn, b->n_logits, logits, e) : 0;
}
