/* DeepSeek Sparse Attention's lightning indexer (V3.2), the model side (its weights are rows
 * of tensors_deepseek.c): per layer and step, the index queries, head weights and keys
 * (DeepSeek's inference/model.py `Indexer`):
 *   q[t, h] = fp8(hadamard(rope(wq_b · cq[t])[h]))	  [Hi, di] per token
 *   k[t]    = fp8(hadamard(rope(LayerNorm(wk · x[t]))))  [di] per token, cached
 *   w[t, h] = weights_proj · x[t] · Hi^-1/2 · di^-1/2
 * rope: the model's (YaRN) rotation on the first qk_rope_head_dim values, NeoX halves (not
 * the interleaved pairs of MLA); hadamard: Sylvester order, scaled by di^-1/2; fp8: e4m3
 * codes, one power-of-two scale per block of min(128, di) (act_quant with ue8m0 scales). The
 * query is used dequantized (code x scale, exact in fp32): the same score as DeepSeek's
 * fp8_index, which folds q's scale into w. attn/indexer.c selects the top-k from them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn/indexer.h"
#include "attn/kv_cache.h"
#include "base/mono.h"
#include "model/model_internal.h"
#include "ops/pool.h"
#include "ops/vec.h"

#define LN_EPS 1e-6f /* the indexer's LayerNorm */

/* act_quant's scale: amax (at least 1e-4) x fl32(1/448), rounded up to a power of two */
static float ue8m0_scale(float amax)
{
	float s = (amax > 1e-4f ? amax : 1e-4f) * (float)(1.0 / 448.0);
	uint32_t u;
	memcpy(&u, &s, 4);
	if (u & 0x7fffffu)
		u = (u & 0xff800000u) + 0x800000u;
	memcpy(&s, &u, 4);
	return s;
}

/* x [n] quantized in blocks of g: codes and scales [n / g]; x becomes the dequantized values */
static void quant_fp8(float *x, int n, int g, uint8_t *codes, float *scales)
{
	for (int b0 = 0; b0 < n; b0 += g) {
		float amax = 0;
		for (int i = b0; i < b0 + g; i++)
			amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
		float s = ue8m0_scale(amax);
		scales[b0 / g] = s;
		for (int i = b0; i < b0 + g; i++) {
			uint8_t q = f32_to_fp8_e4m3(x[i] / s); /* exact division: s is a power of two */
			if (codes)
				codes[i] = q;
			x[i] = fp8_e4m3_to_f32(q) * s;
		}
	}
}

struct ix_ctx {
	const struct model *m;
	const struct layer_weights *l;
	const int32_t *pos;
	float *q, *k, *w; /* [n, Hi, di], [n, di], [n, Hi] */
	uint8_t *codes;   /* [n, di] */
	float *scales;    /* [n, di / group] */
};

static void rotate(const struct model *m, float *x, int n, int stride, int pos)
{
	if (m->cfg.indexer_rope_interleave)
		ops_rope_apply(&m->rope, x, n, stride, pos);
	else
		ops_rope_apply_neox(&m->rope, x, n, stride, pos);
}

static void round_if(const struct model *m, float *x, int n)
{
	if (model_act_bf16(m))
		ops_round_bf16(x, n);
}

static void ix_range(void *arg, int begin, int end, int tid)
{
	const struct ix_ctx *c = arg;
	const struct model *m = c->m;
	int Hi = m->cfg.index_n_heads, di = m->cfg.index_head_dim, g = kv_cache_index_group(di);
	float wmul = 1.0f / sqrtf((float)Hi) / sqrtf((float)di);
	for (int t = begin; t < end; t++) {
		float *k = c->k + (size_t)t * di;
		double mu = 0, var = 0;
		for (int i = 0; i < di; i++)
			mu += k[i];
		mu /= di;
		for (int i = 0; i < di; i++)
			var += (k[i] - mu) * (k[i] - mu);
		float r = 1.0f / sqrtf((float)(var / di) + LN_EPS);
		for (int i = 0; i < di; i++)
			k[i] = ((float)(k[i] - mu)) * r * c->l->ix_k_norm_w[i] + c->l->ix_k_norm_b[i];
		round_if(m, k, di);
		rotate(m, k, 1, di, c->pos[t]);
		round_if(m, k, di);
		ops_hadamard(k, di);
		round_if(m, k, di);
		quant_fp8(k, di, g, c->codes + (size_t)t * di, c->scales + (size_t)t * (di / g));
		float *q = c->q + (size_t)t * Hi * di;
		rotate(m, q, Hi, di, c->pos[t]);
		round_if(m, q, Hi * di);
		for (int h = 0; h < Hi; h++) {
			float sc[1024 / 32];
			ops_hadamard(q + (size_t)h * di, di);
			round_if(m, q + (size_t)h * di, di);
			quant_fp8(q + (size_t)h * di, di, g, NULL, sc);
		}
		for (int h = 0; h < Hi; h++)
			c->w[(size_t)t * Hi + h] *= wmul;
	}
}

static int dcp_gather_bytes(void *ctx, const void *send, size_t nbytes, void *recv, struct err *e)
{
	return comm_dcp_allgather_bytes(ctx, send, nbytes, recv, e);
}

int model_indexer(struct model *m, int li, const struct batch *b, const struct attn_meta *meta, struct kv_cache *kv,
		  const float *xn, const float *cq, int32_t *sel_start, int32_t **sel, struct err *e)
{
	const struct model_config *c = &m->cfg;
	const struct layer_weights *l = &m->layers[li];
	int n = b->n_tokens, D = c->hidden_size, Lq = c->q_lora_rank, Hi = c->index_n_heads, di = c->index_head_dim;
	int g = kv_cache_index_group(di);
	struct arena *a = &m->arena;
	double t0 = mono_now_s();
	struct ix_ctx x = {.m = m, .l = l, .pos = b->positions};
	x.q = arena_alloc(a, sizeof(float) * (size_t)n * Hi * di);
	x.k = arena_alloc(a, sizeof(float) * (size_t)n * di);
	x.w = arena_alloc(a, sizeof(float) * (size_t)n * Hi);
	x.codes = arena_alloc(a, (size_t)n * di);
	x.scales = arena_alloc(a, sizeof(float) * (size_t)n * (di / g));
	/* bf16 engines: q and k are bf16 linears' outputs, the head weights stay fp32 */
	bool rb = model_act_bf16(m);
	struct gemm_job j[3] = {
		{.w = &l->ix_wq_b, .x = cq, .ldx = Lq, .y = x.q, .ldy = Hi * di, .n = n, .round_bf16 = rb},
		{.w = &l->ix_wk, .x = xn, .ldx = D, .y = x.k, .ldy = di, .n = n, .round_bf16 = rb},
		{.w = &l->ix_weights_proj, .x = xn, .ldx = D, .y = x.w, .ldy = Hi, .n = n}};
	model_gemm_run(m, 3, j);
	for (int i = 0; i < 3; i++)
		model_used(m, j[i].w);
	pool_for(m->opt.pool, n, 4, ix_range, &x);
	kv_cache_index_write(kv, li, meta->slots, x.codes, x.scales, n);
	struct attn_index_args ia = {.meta = meta,
				     .kv = kv,
				     .layer = li,
				     .n_heads = Hi,
				     .topk = c->index_topk,
				     .q = x.q,
				     .w = x.w,
				     .pool = m->opt.pool,
				     .scratch = a,
				     .dcp_allgather = dcp_gather_bytes,
				     .dcp_ctx = m->opt.comm};
	if (attn_index_select(&ia, sel_start, sel, e))
		return err_prefix(e, "layer %d", li);
	m->step_index_s += mono_now_s() - t0;
	return 0;
}

size_t model_indexer_scratch_bytes(const struct model *m)
{
	const struct model_config *c = &m->cfg;
	if (!config_is_sparse(c))
		return 0;
	size_t n = (size_t)m->opt.max_batch_tokens, Hi = (size_t)c->index_n_heads, di = (size_t)c->index_head_dim;
	int W = m->opt.comm && m->opt.comm->dcp_size > 1 ? m->opt.comm->dcp_size : 1;
	size_t own = 4 * (n * Hi * di + n * di + n * Hi + n * di) + n * di + 6 * 64;
	/* a token sees at most max_model_len keys (its shard's under DCP) */
	int max_keys = m->opt.max_model_len > 0 ? (m->opt.max_model_len + W - 1) / W + 1 : (int)n;
	return own + attn_index_scratch_bytes((int)n, (int)Hi, (int)di, c->index_topk, max_keys, m->n_threads, W);
}
