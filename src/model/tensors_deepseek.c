/* DeepSeek V2/V3/V3.1/V3.2's tensors (DeepseekV2/V3ForCausalLM, DeepSeek's inference/model.py;
 * the MTP module of V3's tech report §2.2): the table that loading, its checks, TP slicing and
 * prepacking walk (tensors.h). A layer's rows land in struct layer_weights (model_internal.h),
 * the MTP module's own in struct mtp_weights, the embedding, the final norm and the lm_head in
 * struct model; the MTP module's embedding and head, which may be the model's, are
 * family_deepseek.c's. */
#include "model/tensors_deepseek.h"

#include <string.h>

/* ---- the shapes: the config's sizes (io/config.h) and their products ---- */
enum {
	D = 1,  /* hidden_size */
	D2,     /* 2 D: eh_proj's input [enorm(embed) | hnorm(hidden)] */
	H,      /* num_attention_heads: what TP splits attention by */
	HL,     /* this rank's heads */
	QK,     /* dn + dr: a head's query */
	KVB,    /* dn + dv: a head's rows of kv_b (W_UK, then W_UV) */
	DN,     /* dn: a head's query without RoPE */
	DV,     /* dv: a head's output */
	H_QK,   /* H (dn + dr): the queries */
	H_KVB,  /* H (dn + dv): kv_b */
	H_DV,   /* H dv: the heads' outputs */
	LQ,     /* q_lora_rank */
	LKV,    /* kv_lora_rank */
	LKV_DR, /* kv_lora_rank + qk_rope_head_dim: the latent row */
	I,      /* intermediate_size: the dense MLP */
	E,      /* n_routed_experts */
	IM,     /* moe_intermediate_size: one routed expert */
	IS,     /* n_shared_experts x moe_intermediate_size: the shared experts */
	HI_DI,  /* the indexer's queries, Hi x di (V3.2) */
	DI,     /* its head dim */
	HI,     /* its heads */
	V,      /* vocab_size: what TP splits the lm_head by */
};

static int dim(const struct model *m, int sym)
{
	const struct model_config *c = &m->cfg;
	int dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim, nh = c->num_attention_heads;
	switch (sym) {
	case D: return c->hidden_size;
	case D2: return 2 * c->hidden_size;
	case H: return nh;
	case HL: return m->n_heads_local;
	case QK: return dn + dr;
	case KVB: return dn + dv;
	case DN: return dn;
	case DV: return dv;
	case H_QK: return nh * (dn + dr);
	case H_KVB: return nh * (dn + dv);
	case H_DV: return nh * dv;
	case LQ: return c->q_lora_rank;
	case LKV: return c->kv_lora_rank;
	case LKV_DR: return c->kv_lora_rank + dr;
	case I: return c->intermediate_size;
	case E: return c->n_routed_experts;
	case IM: return c->moe_intermediate_size;
	case IS: return c->n_shared_experts * c->moe_intermediate_size;
	case HI_DI: return c->index_n_heads * c->index_head_dim;
	case DI: return c->index_head_dim;
	case HI: return c->index_n_heads;
	case V: return c->vocab_size;
	}
	return 0;
}

/* ---- which layers ---- */
static bool q_lora(const struct model *m, int i) { return m->cfg.q_lora_rank > 0; }
static bool no_q_lora(const struct model *m, int i) { return m->cfg.q_lora_rank == 0; }
static bool sparse(const struct model *m, int i) { return config_is_sparse(&m->cfg); }
static bool dense(const struct model *m, int i) { return !m->layers[i].moe; }
static bool moe(const struct model *m, int i) { return m->layers[i].moe; }
static bool moe_bias(const struct model *m, int i) { return m->layers[i].moe && m->cfg.topk_method == TOPK_NOAUX_TC; }
static bool shared(const struct model *m, int i) { return m->layers[i].has_shared; }
/* the lm_head: its own tensor, the embedding's bytes (tied), or a copy of them in the head's
 * format (tied, --quantize-lm-head or --quantize-embedding: the two may differ) */
static bool untied(const struct model *m, int i) { return !m->cfg.tie_word_embeddings; }
static bool tied_copy(const struct model *m, int i)
{
	return m->cfg.tie_word_embeddings && (m->opt.quantize_lm_head || m->opt.quantize_embedding);
}
static bool tied_view(const struct model *m, int i) { return m->cfg.tie_word_embeddings && !tied_copy(m, i); }

/* the embedding's `after`: tied embeddings share the bytes with the lm_head (this rank's rows) */
static int tie_head(struct model *m, int layer, const struct wmat *embed, struct err *e)
{
	if (tied_view(m, layer))
		m->lm_head = m->tp_size > 1 ? wmat_view(embed, m->vocab0, m->vocab_cols[m->tp_rank], 0, embed->cols)
					    : *embed;
	return 0;
}

/* W_UKᵀ of every local head (kv_b_proj's `after`), built once at load in the weight's own
 * dtype from the whole matrix w: uk_t[h] is [Lkv, dn]
 * (contiguous per head, so the absorbed query q_abs = W_UK[h]ᵀ q_nope streams it), element
 * (l, p) = kv_b[h*(dn+dv) + p, l]. For fp8 the scale grid is transposed once and each head's
 * matrix addresses it through (row0, col0) = (0, h*(dn+dv)). */
static int build_uk_t(struct model *m, int layer, const struct wmat *w, struct err *e)
{
	struct layer_weights *l = &m->layers[layer];
	int h0 = m->head0, Hl = m->n_heads_local, dn = m->cfg.qk_nope_head_dim, dv = m->cfg.v_head_dim;
	int Lk = w->cols;
	size_t esz = dtype_size(w->dtype);
	char *d = model_own(m, (size_t)Hl * (size_t)Lk * (size_t)dn * esz);
	l->uk_t = model_own(m, sizeof(struct wmat) * (size_t)Hl);
	if (!d || !l->uk_t)
		return err_set(e, "kv_b_proj: out of memory for W_UK transposed");
	for (int h = 0; h < Hl; h++)
		for (int p = 0; p < dn; p++)
			for (int c = 0; c < Lk; c++)
				memcpy(d + (((size_t)h * Lk + (size_t)c) * (size_t)dn + (size_t)p) * esz,
				       (const char *)w->data +
					       ((size_t)((h0 + h) * (dn + dv) + p) * (size_t)w->ld + (size_t)c) * esz,
				       esz);
	m->weight_bytes += (size_t)Hl * (size_t)Lk * (size_t)dn * esz;
	float *st = NULL;
	int sr = 0;
	if (w->scale) { /* block scales (fp8) */
		sr = (w->rows + w->blk_r - 1) / w->blk_r;
		int sc = w->scale_ld;
		st = model_own(m, sizeof(float) * (size_t)sr * (size_t)sc);
		if (!st)
			return err_set(e, "kv_b_proj: out of memory for W_UK transposed");
		for (int i = 0; i < sr; i++)
			for (int j = 0; j < sc; j++)
				st[(size_t)j * (size_t)sr + (size_t)i] = w->scale[(size_t)i * (size_t)sc + (size_t)j];
	}
	for (int h = 0; h < Hl; h++)
		l->uk_t[h] = (struct wmat){.dtype = w->dtype,
					   .data = d + (size_t)h * Lk * (size_t)dn * esz,
					   .rows = Lk,
					   .cols = dn,
					   .ld = dn,
					   .scale = st,
					   .scale_ld = sr,
					   .row0 = 0,
					   .col0 = (h0 + h) * (dn + dv),
					   .blk_r = w->blk_c,
					   .blk_c = w->blk_r};
	return 0;
}

#define G(field) TB_MODEL, offsetof(struct model, field)
#define L(field) TB_LAYER, offsetof(struct layer_weights, field)
#define M(field) TB_MTP, offsetof(struct mtp_weights, field)
#define P "model.layers.%d."

/* In the order they load: the model's own, then each layer's. Shapes [rows, cols]; TP:
 * column-parallel rows or row-parallel columns by heads, intermediate columns or vocabulary
 * rows; the rest is whole on every rank. */
static const struct tensor_spec rows[] = {
	{"model.embed_tokens.weight", TK_MAT, G(embed), V, D, .q = WQ_EMBED, .after = tie_head, .flags = TF_NO_PACK},
	{"model.norm.weight", TK_VEC, G(final_norm), D, 0, .fill = 1},
	{"lm_head.weight", TK_MAT, G(lm_head), V, D, .on = untied, .q = WQ_HEAD, .split = SPLIT_ROWS, .tp_over = V},
	{"model.embed_tokens.weight", TK_MAT, G(lm_head), V, D, .on = tied_copy, .q = WQ_HEAD, .split = SPLIT_ROWS,
	 .tp_over = V},
	{NULL, TK_DERIVED, G(lm_head), V, D, .on = tied_view}, /* the embedding's rows (tie_head) */
	{P "input_layernorm.weight", TK_VEC, L(attn_norm), D, 0, .fill = 1},
	{P "post_attention_layernorm.weight", TK_VEC, L(ffn_norm), D, 0, .fill = 1},
	/* MLA: the latent kv row and its norm, the output, kv_b (W_UK / W_UV) */
	{P "self_attn.kv_a_layernorm.weight", TK_VEC, L(kv_a_norm), LKV, 0, .fill = 1},
	{P "self_attn.kv_a_proj_with_mqa.weight", TK_MAT, L(kv_a), LKV_DR, D, .q = WQ_LINEAR},
	{P "self_attn.o_proj.weight", TK_MAT, L(o_proj), D, H_DV, .q = WQ_LINEAR, .split = SPLIT_COLS, .tp_over = H,
	 .tp_per = DV},
	{P "self_attn.kv_b_proj.weight", TK_MAT, L(kv_b), H_KVB, LKV, .q = WQ_ABSORBED, .split = SPLIT_ROWS,
	 .tp_over = H, .tp_per = KVB, .tp_whole = true, .after = build_uk_t, .flags = TF_VIEWED},
	{NULL, TK_DERIVED, L(uk_t), LKV, DN, .count = HL}, /* W_UK[h]ᵀ [Lkv, dn] of this rank's heads */
	/* the query: through its low-rank latent (q_lora_rank > 0), or one projection */
	{P "self_attn.q_a_proj.weight", TK_MAT, L(q_a), LQ, D, .on = q_lora, .q = WQ_LINEAR},
	{P "self_attn.q_a_layernorm.weight", TK_VEC, L(q_a_norm), LQ, 0, .on = q_lora, .fill = 1},
	{P "self_attn.q_b_proj.weight", TK_MAT, L(q_b), H_QK, LQ, .on = q_lora, .q = WQ_LINEAR, .split = SPLIT_ROWS,
	 .tp_over = H, .tp_per = QK},
	{P "self_attn.q_proj.weight", TK_MAT, L(q_proj), H_QK, D, .on = no_q_lora, .q = WQ_LINEAR, .split = SPLIT_ROWS,
	 .tp_over = H, .tp_per = QK},
	/* DeepSeek Sparse Attention's lightning indexer (V3.2), whole on every rank */
	{P "self_attn.indexer.wq_b.weight", TK_MAT, L(ix_wq_b), HI_DI, LQ, .on = sparse, .q = WQ_LINEAR},
	{P "self_attn.indexer.wk.weight", TK_MAT, L(ix_wk), DI, D, .on = sparse, .q = WQ_LINEAR},
	{P "self_attn.indexer.k_norm.weight", TK_VEC, L(ix_k_norm_w), DI, 0, .on = sparse, .fill = 1},
	{P "self_attn.indexer.k_norm.bias", TK_VEC, L(ix_k_norm_b), DI, 0, .on = sparse, .fill = 0},
	{P "self_attn.indexer.weights_proj.weight", TK_MAT, L(ix_weights_proj), HI, D, .on = sparse},
	/* the dense MLP: gate and up column-parallel, down row-parallel */
	{P "mlp.gate_proj.weight", TK_MAT, L(gate), I, D, .on = dense, .q = WQ_LINEAR, .split = SPLIT_ROWS,
	 .tp_over = I},
	{P "mlp.up_proj.weight", TK_MAT, L(up), I, D, .on = dense, .q = WQ_LINEAR, .split = SPLIT_ROWS, .tp_over = I},
	{P "mlp.down_proj.weight", TK_MAT, L(down), D, I, .on = dense, .q = WQ_LINEAR, .split = SPLIT_COLS,
	 .tp_over = I},
	/* MoE: the router (and its bias under noaux_tc), the routed experts, the shared ones */
	{P "mlp.gate.weight", TK_MAT, L(router), E, D, .on = moe},
	{P "mlp.gate.e_score_correction_bias", TK_VEC, L(bias), E, 0, .on = moe_bias, .fill = 0},
	{P "mlp.experts.%d.gate_proj.weight", TK_MAT, L(e_gate), IM, D, .count = E, .on = moe, .q = WQ_EXPERT,
	 .split = SPLIT_ROWS, .tp_over = IM},
	{P "mlp.experts.%d.up_proj.weight", TK_MAT, L(e_up), IM, D, .count = E, .on = moe, .q = WQ_EXPERT,
	 .split = SPLIT_ROWS, .tp_over = IM},
	{P "mlp.experts.%d.down_proj.weight", TK_MAT, L(e_down), D, IM, .count = E, .on = moe, .q = WQ_EXPERT,
	 .split = SPLIT_COLS, .tp_over = IM},
	{P "mlp.shared_experts.gate_proj.weight", TK_MAT, L(gate), IS, D, .on = shared, .q = WQ_LINEAR,
	 .split = SPLIT_ROWS, .tp_over = IS},
	{P "mlp.shared_experts.up_proj.weight", TK_MAT, L(up), IS, D, .on = shared, .q = WQ_LINEAR,
	 .split = SPLIT_ROWS, .tp_over = IS},
	{P "mlp.shared_experts.down_proj.weight", TK_MAT, L(down), D, IS, .on = shared, .q = WQ_LINEAR,
	 .split = SPLIT_COLS, .tp_over = IS},
	/* the MTP module's own (model.layers.{num_hidden_layers}); its embedding and head, which
	 * may be the model's, are family_deepseek.c's */
	{P "enorm.weight", TK_VEC, M(enorm), D, 0, .fill = 1},
	{P "hnorm.weight", TK_VEC, M(hnorm), D, 0, .fill = 1},
	{P "shared_head.norm.weight", TK_VEC, M(head_norm), D, 0, .fill = 1},
	{P "eh_proj.weight", TK_MAT, M(eh_proj), D, D2, .q = WQ_LINEAR},
};

const struct tensor_table tensors_deepseek = {"deepseek", rows, (int)(sizeof rows / sizeof rows[0]), dim};
