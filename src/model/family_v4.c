/* The DeepSeek-V4 family (family.h): V4-Flash / V4-Pro checkpoints (config.json model_type
 * deepseek_v4). Its config is model_v4/v4_config.h's, its tensors tensors_v4.c's, its step
 * forward_v4.c's over the model_v4 units. This first version runs float32 activations, its
 * compressed entries in the engine's paged pool and its window rows per sequence
 * (forward_v4.h), on one rank, tensor-parallel (check_tp) or with decode context parallelism
 * (model_v4/v4_block.h: the entries sharded by entry index); what it cannot run yet is refused
 * here with one line: bf16 activations, --quantization other than int8 / int4 (which
 * requantize the fp8 linear layers and the MXFP4 experts at load; --quantize-lm-head makes its
 * bf16 lm_head fp8). --load-format dummy makes random
 * weights in the config's formats (tensors_v4.c). The MTP modules' weights are always loaded
 * (mtp.K.*); with load_mtp the first
 * one runs model_mtp_forward (forward_v4.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "base/bigmem.h"
#include "base/log.h"
#include "model/family.h"
#include "model/forward_v4.h"
#include "model/v4_seqstate.h"
#include "model/tensors.h"
#include "ops/wf_fp4.h"
#include "ops/wformat.h"

static bool v4_matches(const char *dir) { return v4_config_is_v4(dir); }

/* what this version refuses, before any weight is read */
static int refuse(const struct model *m, const char *dir, struct err *e)
{
	const struct wformat *q = m->opt.quant, *r = m->opt.quant_rest;
	if ((q && q->dtype != DT_I8 && q->dtype != DT_I4) || (m->opt.quant_rest_set && r && r->dtype != DT_I8))
		return err_set(
			e,
			"%s: DeepSeek-V4: --quantization%s %s is not supported (its linear layers are fp8 and its "
			"experts MXFP4 already; int8 and int4 are)",
			dir, q && q->dtype != DT_I8 && q->dtype != DT_I4 ? "" : "-rest",
			q && q->dtype != DT_I8 && q->dtype != DT_I4 ? q->name : r->name);
	if (m->opt.quantize_embedding)
		return err_set(e, "%s: DeepSeek-V4: --quantize-embedding is not supported (its embedding stays bf16)",
			       dir);
	return 0;
}

/* Tensor parallelism as vLLM's deepseek_v4.py cuts it (tensors_v4.c's table): each rank its
 * heads with whole wo_a groups, and its slice of every expert's intermediate columns; the
 * MXFP4 experts' w2 is cut along K, at a scale group's edge only. A T that is a multiple of
 * o_groups (more ranks than groups: tiny-v4's 2 at -tp 4) shares each group among T / o_groups
 * ranks, each with its heads' columns of the group's wo_a and the group's wo_b columns: nothing
 * nonlinear sits between wo_a and wo_b, so the ranks' partial products add up in the all-reduce
 * after wo_b as whole groups' do. */
static int check_tp(const struct model *m, const struct v4_config *c, const char *dir, struct err *e)
{
	int T = m->tp_size, I = c->moe_intermediate_size;
	if (T <= 1)
		return 0;
	if (c->o_groups % T && T % c->o_groups)
		return err_set(e,
			       "%s: DeepSeek-V4: tensor-parallel-size %d must divide o_groups %d or be a multiple of "
			       "it (each rank holds whole output groups, or an equal part of one)",
			       dir, T, c->o_groups);
	if (T > c->o_groups && m->opt.quant) /* quantize_row cuts rows or columns, not both */
		return err_set(e,
			       "%s: DeepSeek-V4: --quantization with tensor-parallel-size %d above o_groups %d is not "
			       "supported (wo_a would be cut in both dimensions)",
			       dir, T, c->o_groups);
	if (I % T || (I / T) % FP4_GROUP)
		return err_set(e,
			       "%s: DeepSeek-V4: tensor-parallel-size %d must cut moe_intermediate_size %d into "
			       "multiples of %d (the MXFP4 experts' scale groups)",
			       dir, T, I, FP4_GROUP);
	return 0;
}

/* m->cfg: the fields the engine, load.c and the tools read */
static void fill_cfg(struct model_config *o, const struct v4_config *c)
{
	memset(o, 0, sizeof *o);
	snprintf(o->model_type, sizeof o->model_type, "deepseek_v4");
	o->vocab_size = c->vocab_size;
	o->hidden_size = c->hidden_size;
	o->moe_intermediate_size = c->moe_intermediate_size;
	o->num_hidden_layers = c->num_hidden_layers;
	o->num_nextn_predict_layers = c->num_nextn_predict_layers;
	o->num_attention_heads = c->num_attention_heads;
	o->q_lora_rank = c->q_lora_rank;
	o->kv_lora_rank = c->head_dim - c->qk_rope_head_dim; /* the kv's non-RoPE dims */
	o->qk_rope_head_dim = c->qk_rope_head_dim;
	o->v_head_dim = c->head_dim;
	o->n_routed_experts = c->n_routed_experts;
	o->num_experts_per_tok = c->num_experts_per_tok;
	o->n_shared_experts = c->n_shared_experts;
	o->norm_topk_prob = c->norm_topk_prob;
	o->routed_scaling_factor = c->routed_scaling_factor;
	o->rms_norm_eps = c->rms_norm_eps;
	o->rope_theta = c->rope_theta;
	o->max_position_embeddings = c->max_position_embeddings;
	o->tie_word_embeddings = c->tie_word_embeddings;
	o->bos_token_id = c->bos_token_id;
	o->eos_token_id = c->eos_token_id;
	o->fp8 = c->fp8;
	o->fp8_block_rows = c->fp8_block_rows;
	o->fp8_block_cols = c->fp8_block_cols;
	o->fp8_scale_ue8m0 = c->fp8_scale_ue8m0;
	snprintf(o->torch_dtype, sizeof o->torch_dtype, "%s", c->torch_dtype);
}

static int v4_configure(struct model *m, const char *dir, struct err *e)
{
	struct v4_model *v = model_own(m, sizeof *v);
	if (!v)
		return err_set(e, "model: out of memory");
	memset(v, 0, sizeof *v);
	m->fam_state = v;
	if (v4_config_load(dir, &v->c, e) || refuse(m, dir, e))
		return -1;
	const struct v4_config *c = &v->c;
	if (check_tp(m, c, dir, e))
		return -1;
	if (c->hc_mult > V4_HC_MAX)
		return err_set(e, "%s/config.json: hc_mult %d unsupported (<= %d)", dir, c->hc_mult, V4_HC_MAX);
	if (c->num_attention_heads % c->o_groups)
		return err_set(e, "%s/config.json: o_groups %d does not divide num_attention_heads %d", dir,
			       c->o_groups, c->num_attention_heads);
	if (m->opt.load_mtp && c->num_nextn_predict_layers < 1)
		return err_set(e, "%s/config.json: the MTP module is wanted, and num_nextn_predict_layers is 0", dir);
	fill_cfg(&m->cfg, c);
	m->n_heads_local = c->num_attention_heads / m->tp_size; /* o_groups | heads, T | o_groups */
	m->head0 = m->tp_rank * m->n_heads_local;
	/* DCP: the group's ranks are consecutive TP ranks (comm.h), so its heads are contiguous */
	const struct comm *cm = m->opt.comm;
	v->dcp_size = cm && cm->dcp_size > 1 ? cm->dcp_size : 1;
	v->dcp_rank = v->dcp_size > 1 ? cm->dcp_rank : 0;
	v->dcp_interleave = v->dcp_size > 1 && m->opt.dcp_interleave > 0 ? m->opt.dcp_interleave : 1;
	v->dcp_heads = v->dcp_size * m->n_heads_local;
	return 0;
}

static int v4_dcp_size(const struct model *m) { return ((const struct v4_model *)m->fam_state)->dcp_size; }

/* a block's weightless parts and views, once its tensors are in (this rank's heads) */
static int derive(const struct model *m, const struct v4_config *c, struct v4_layer *L, struct err *e)
{
	int r = v4_layer_ratio(c, L->idx);
	struct v4_attn_layer *a = &L->attn;
	*a = (struct v4_attn_layer){.ratio = r,
				    .n_heads = m->n_heads_local,
				    .head_dim = c->head_dim,
				    .window = c->sliding_window,
				    .rollback = m->opt.max_rollback,
				    .index_heads = c->index_n_heads,
				    .index_dim = c->index_head_dim,
				    .index_topk = c->index_topk,
				    .dcp_size = v4_dcp_size(m),
				    .eps = c->rms_norm_eps,
				    .sink = L->sink};
	if (v4_rope_init_layer(&a->rope, c, r, e))
		return -1;
	if (r)
		a->comp = (struct v4_comp){r, c->head_dim, c->rms_norm_eps, V4_COMP_KV, L->c_ape, L->c_norm, &a->rope};
	if (r == 4)
		a->icomp = (struct v4_comp){4,         c->index_head_dim, c->rms_norm_eps, V4_COMP_INDEX,
					    L->ic_ape, L->ic_norm,        &a->rope};
	struct v4_hc h = {.hc = c->hc_mult,
			  .dim = c->hidden_size,
			  .iters = c->hc_sinkhorn_iters,
			  .norm_eps = c->rms_norm_eps,
			  .hc_eps = c->hc_eps};
	L->hca = h, L->hca.fn = L->hca_fn, L->hca.scale = L->hca_scale, L->hca.base = L->hca_base;
	L->hcf = h, L->hcf.fn = L->hcf_fn, L->hcf.scale = L->hcf_scale, L->hcf.base = L->hcf_base;
	L->route = (struct v4_route){
		c->n_routed_experts, c->num_experts_per_tok, c->routed_scaling_factor, L->gate_bias,
		L->tid2eid,          c->vocab_size};
	return 0;
}

static struct v4_hc head_hc(const struct v4_config *c, const float *fn, const float *scale, const float *base)
{
	return (struct v4_hc){.hc = c->hc_mult,
			      .dim = c->hidden_size,
			      .iters = c->hc_sinkhorn_iters,
			      .norm_eps = c->rms_norm_eps,
			      .hc_eps = c->hc_eps,
			      .fn = fn,
			      .scale = scale,
			      .base = base};
}

/* The boundary snapshots (v4_seqstate.c): 2 per sequence slot and at least 16, but at most a
 * sixteenth of the memory available (and at least 4) */
static int alloc_snaps(struct model *m, struct v4_model *v, struct err *e)
{
	int L = v->n_state_layers;
	size_t per = 0;
	for (int l = 0; l < L; l++)
		per += v4_seq_attn_floats(v4_state_layer(v, l));
	double fit = (double)bigmem_available() / 16 / ((double)per * sizeof(float) + 1);
	int n = 2 * v->n_slots > 16 ? 2 * v->n_slots : 16;
	if (n > fit)
		n = (int)fit;
	if (n < 4)
		n = 4;
	v->n_snaps = n;
	v->snaps = model_own(m, sizeof *v->snaps * (size_t)n);
	if (!v->snaps)
		return err_set(e, "DeepSeek-V4: out of memory for the prefix snapshots");
	for (int i = 0; i < n; i++) {
		struct v4_snap *sn = &v->snaps[i];
		*sn = (struct v4_snap){.block = -1};
		sn->layer = model_own(m, sizeof *sn->layer * (size_t)L);
		float *mem = model_own(m, sizeof(float) * per);
		if (!sn->layer || !mem)
			return err_set(e, "DeepSeek-V4: out of memory for %d prefix snapshots of %.1f MB", n,
				       per * 4 / 1e6);
		for (int l = 0; l < L; l++) {
			v4_seq_attn_init(v4_state_layer(v, l), mem, &sn->layer[l]);
			mem += v4_seq_attn_floats(v4_state_layer(v, l));
		}
	}
	return 0;
}

/* max_seqs slots of the bounded per-sequence state (window rows, compressor states) */
static int alloc_slots(struct model *m, struct v4_model *v, struct err *e)
{
	const struct v4_config *c = &v->c;
	v->max_len = m->opt.max_model_len;
	v->rollback = m->opt.max_rollback;
	v->n_slots = m->opt.max_seqs;
	v->n_state_layers = c->num_hidden_layers + v->w.n_mtp;
	v->slots = model_own(m, sizeof *v->slots * (size_t)v->n_slots);
	v->pool.ent = model_own(m, sizeof(size_t) * (size_t)v->n_state_layers);
	v->pool.ix = model_own(m, sizeof(size_t) * (size_t)v->n_state_layers);
	if (!v->slots || !v->pool.ent || !v->pool.ix)
		return err_set(e, "DeepSeek-V4: out of memory for the sequence state");
	size_t per = 0;
	for (int l = 0; l < v->n_state_layers; l++)
		per += v4_seq_attn_floats(v4_state_layer(v, l));
	/* refused before it is touched: an overcommitted allocation would be killed, not fail */
	double need = (double)per * sizeof(float) * v->n_slots, avail = (double)bigmem_available();
	if (need > avail)
		return err_set(e,
			       "DeepSeek-V4: %d sequences' window rows and compressor states need %.1f GB, %.1f GB "
			       "available (lower --max-num-seqs)",
			       v->n_slots, need / 1e9, avail / 1e9);
	for (int i = 0; i < v->n_slots; i++) {
		struct v4_slot *s = &v->slots[i];
		s->first_block = -1;
		s->pos = 0;
		s->last_step = 0;
		s->layer = model_own(m, sizeof *s->layer * (size_t)v->n_state_layers);
		s->ck_block = model_own(m, sizeof(int32_t) * (size_t)(m->opt.max_rollback + 1));
		if (!s->ck_block)
			return err_set(e, "DeepSeek-V4: out of memory for the sequence state");
		for (int j = 0; j <= m->opt.max_rollback; j++)
			s->ck_block[j] = -1;
		float *mem = model_own(m, sizeof(float) * per);
		if (!s->layer || !mem)
			return err_set(e, "DeepSeek-V4: out of memory for %d sequences' state (%.1f MB each)",
				       v->n_slots, per * 4 / 1e6);
		for (int l = 0; l < v->n_state_layers; l++) {
			v4_seq_attn_init(v4_state_layer(v, l), mem, &s->layer[l]);
			mem += v4_seq_attn_floats(v4_state_layer(v, l));
		}
	}
	v->slot_bytes = per * sizeof(float);
	return alloc_snaps(m, v, e);
}

/* "fp8 1.2 GB, MXFP4 3.4 GB, ..." of per-format byte counts */
static void format_list(const size_t *b, char *out, size_t cap)
{
	static const struct {
		enum dtype dt;
		const char *what;
	} f[] = {{DT_F8_E4M3, "fp8 e4m3 + block scales"},
		 {DT_F4_E2M1, "MXFP4 + e8m0 scales"},
		 {DT_I8, "int8 + scales"},
		 {DT_I4, "int4 + scales"},
		 {DT_BF16, "bf16"},
		 {DT_F16, "f16"},
		 {DT_F32, "f32"},
		 {DT_I64, "i64"}};
	size_t o = 0;
	out[0] = 0;
	for (size_t i = 0; i < sizeof f / sizeof f[0] && o < cap; i++)
		if (b[f[i].dt])
			o += (size_t)snprintf(out + o, cap - o, "%s%s %.2f GB", o ? ", " : "", f[i].what,
					      b[f[i].dt] / 1e9);
}

/* dummy weights are written as they are made: refused before, when they cannot fit (an
 * overcommitted allocation would be killed on first touch, not fail) */
static int check_dummy_memory(struct model *m, const struct v4_config *c, int n_mtp, const char *dir, struct err *e)
{
	size_t by[DT_COUNT];
	double need = (double)v4_tensors_dummy_bytes(m, c, n_mtp, by), avail = (double)bigmem_available();
	if (need <= avail)
		return 0;
	char list[256];
	format_list(by, list, sizeof list);
	return err_set(e,
		       "%s: DeepSeek-V4 dummy weights need %.1f GB (%s), %.1f GB available: use a config with "
		       "fewer layers or experts (bench/configs/v4-flash-2L)",
		       dir, need / 1e9, list, avail / 1e9);
}

static int v4_load(struct model *m, const char *dir, struct err *e)
{
	struct v4_model *v = m->fam_state;
	const struct v4_config *c = &v->c;
	if (m->opt.act_dtype != DT_F32)
		return err_set(e, "%s: DeepSeek-V4 runs float32 activations for now (--dtype float32)", dir);
	m->n_layers = c->num_hidden_layers;
	v->w.n_mtp = c->num_nextn_predict_layers;
	v->w.layers = model_own(m, sizeof *v->w.layers * (size_t)c->num_hidden_layers);
	v->w.mtp = model_own(m, sizeof *v->w.mtp * (size_t)(v->w.n_mtp ? v->w.n_mtp : 1));
	if (!v->w.layers || !v->w.mtp)
		return err_set(e, "model: out of memory");
	memset(v->w.layers, 0, sizeof *v->w.layers * (size_t)c->num_hidden_layers);
	memset(v->w.mtp, 0, sizeof *v->w.mtp * (size_t)(v->w.n_mtp ? v->w.n_mtp : 1));
	if (m->opt.load_dummy && check_dummy_memory(m, c, v->w.n_mtp, dir, e))
		return -1;
	if (v4_tensors_load(m, c, &v->w, v->w.n_mtp, e))
		return -1;
	v->w.hch = head_hc(c, v->w.hc_head_fn, v->w.hc_head_scale, v->w.hc_head_base);
	for (int l = 0; l < c->num_hidden_layers; l++)
		if (derive(m, c, &v->w.layers[l], e))
			return -1;
	for (int k = 0; k < v->w.n_mtp; k++) {
		struct v4_mtp *t = &v->w.mtp[k];
		if (derive(m, c, &t->blk, e))
			return -1;
		t->hch = head_hc(c, t->hc_fn, t->hc_scale, t->hc_base);
	}
	if (m->opt.load_mtp) { /* the MTP module's inputs: model.h's model_mtp_forward */
		size_t row = sizeof(float) * (size_t)(c->hc_mult * c->hidden_size);
		v->hid = model_own(m, row * (size_t)m->opt.max_batch_tokens);
		v->mtp_hid = model_own(m, row * (size_t)m->opt.max_seqs);
		if (!v->hid || !v->mtp_hid)
			return err_set(e, "DeepSeek-V4: out of memory for the MTP hidden states");
		m->n_layers = c->num_hidden_layers + 1;
	}
	return alloc_slots(m, v, e);
}

/* nothing packed yet: the float32 GEMMs read the weights as loaded */
static int v4_each_weight(struct model *m, model_weight_fn fn, void *ctx, struct err *e) { return 0; }

static void v4_log_loaded(const struct model *m)
{
	const struct v4_model *v = m->fam_state;
	char r[256] = "";
	for (int l = 0, o = 0; l < v->c.num_hidden_layers && o < (int)sizeof r - 8; l++)
		o += snprintf(r + o, sizeof r - (size_t)o, "%s%d", l ? " " : "", v4_layer_ratio(&v->c, l));
	LOG_I("model", "DeepSeek-V4: %d layers, compress ratios [%s]", v->c.num_hidden_layers, r);
	char list[256];
	format_list(v->w.format_bytes, list, sizeof list);
	LOG_I("model", "DeepSeek-V4 weights by format%s: %s", m->opt.load_dummy ? " (dummy)" : "", list);
	if (m->tp_size > 1)
		LOG_I("model",
		      "DeepSeek-V4: TP rank %d of %d: heads [%d, %d), %d of %d output groups, %d of %d expert "
		      "columns",
		      m->tp_rank, m->tp_size, m->head0, m->head0 + m->n_heads_local,
		      v->c.o_groups >= m->tp_size ? v->c.o_groups / m->tp_size : 1, v->c.o_groups,
		      v->c.moe_intermediate_size / m->tp_size, v->c.moe_intermediate_size);
	LOG_I("model", "DeepSeek-V4: %d MTP module(s) loaded; window rows and compressor states for %d sequences",
	      v->w.n_mtp, v->n_slots);
}

/* The engine's KV pool holds what grows with the context (forward_v4.h): each block's compressed
 * entries and indexer keys of every state layer, stored packed (model_v4/v4_pack.h: fp8 / fp4
 * codes with e8m0 scales, the entries' RoPE dims float32; exact, as they are the reference's
 * round trips), as struct kv_cache rows of one layer: a block is bs rows of
 * ceil(used floats / bs) floats. kv_dtype does not apply. */
static int row_floats(const struct model *m, int block_size)
{
	struct v4_model *v = m->fam_state;
	v4_pool_layout(v, block_size);
	size_t r = (v->pool.block_floats + (size_t)block_size - 1) / (size_t)block_size;
	return r > 0 ? (int)r : 1;
}

static size_t v4_kv_bytes_per_block(const struct model *m, int block_size, enum dtype kv_dtype)
{
	return kv_cache_bytes_per_block(1, block_size, row_floats(m, block_size), DT_F32);
}

static int v4_kv_cache_init(const struct model *m, struct kv_cache *kv, int n_blocks, int block_size,
			    enum dtype kv_dtype, struct err *e)
{
	const struct v4_model *v = m->fam_state;
	if (kv_cache_init(kv, 1, n_blocks, block_size, row_floats(m, block_size), 0, DT_F32, e))
		return err_prefix(e, "DeepSeek-V4");
	/* under DCP a block of the table is block_size x W tokens, of which this rank stores its
	 * share of the entries: the bytes a token of context costs this rank */
	double f = sizeof(float), vbs = v->pool.bs;
	LOG_I("kv",
	      "DeepSeek-V4 KV pool: %d blocks of %d tokens%s, %lld tokens of capacity; bytes per token%s: "
	      "compressed entries %.1f (fp8 + e8m0, RoPE dims f32), indexer keys %.1f (fp4 + e8m0), all layers; "
	      "per sequence, not paged: "
	      "window rows and compressor states %.1f KB x %d sequences, and x %d prefix-cache snapshots",
	      n_blocks - 1, v->pool.bs, v->dcp_size > 1 ? " (DCP: this rank's entries of them)" : "",
	      (long long)(n_blocks - 1) * v->pool.bs, v->dcp_size > 1 ? " on this rank" : "", v->pool.ent_b * f / vbs,
	      v->pool.ix_b * f / vbs, v->slot_bytes / 1024.0, v->n_slots, v->n_snaps);
	return 0;
}

/* a prefix-cache hit may end after `block` only where the state at its end is kept */
static bool v4_prefix_resumable(const struct model *m, int32_t block) { return v4_resumable(m->fam_state, block); }

/* DEEPSEEK_V4 (backend_deepseek_v4.c) declares what v4_block.h's attention does; the engine
 * applies its threshold and block-size rules, and a backend of another kind is refused */
static const struct attn_backend *v4_default_backend(const struct model *m)
{
	return attn_backend_default_kind(ATTN_KIND_V4);
}
static int v4_check_backend(const struct model *m, const struct attn_backend *b, struct err *e)
{
	return attn_backend_check_kind(b, ATTN_KIND_V4, e);
}

static int no_dim(const struct model *m, int sym) { return 0; }
/* tensors.c's walkers do not read V4's formats: its rows are tensors_v4.c's own table */
static const struct tensor_table v4_tensor_table = {"deepseek_v4", NULL, 0, no_dim};

const struct model_family model_family_v4 = {
	.name = "deepseek_v4",
	.matches = v4_matches,
	.configure = v4_configure,
	.load = v4_load,
	.each_weight = v4_each_weight,
	.log_loaded = v4_log_loaded,
	.scratch_bytes = v4_step_scratch_bytes,
	.forward = v4_forward,
	.mtp_forward = v4_mtp_forward,
	.kv_bytes_per_block = v4_kv_bytes_per_block,
	.kv_cache_init = v4_kv_cache_init,
	.prefix_resumable = v4_prefix_resumable,
	.default_backend = v4_default_backend,
	.check_backend = v4_check_backend,
	.tensors = &v4_tensor_table,
	.auto_float32 = true,
};
