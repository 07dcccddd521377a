/* The model_v4 units composed into one layer's attention, token by token as a decode step
 * runs it (the test side of the forward: the GEMVs here stand for its GEMMs). Per token t:
 *   qr = q_norm(wq_a y); q = wq_b qr, per-head RMS, RoPE(t); kv = kv_norm(wkv y), RoPE(t), fp8
 *   the compressor(s) fed token t (an entry completed by t is visible to t)
 *   ratio 4: indexer q / weights, top-k of the visible indexer entries
 *   attention over window rows [t - win + 1, t] + the entries, sink; inverse RoPE(t)
 *   z_g = wo_a_g o_g per group; out = wo_b z
 * Weights come from a case of v4-units/layer.json or block.json, under a key prefix. */
#ifndef MLA_TESTS_UNIT_V4_LAYER_REF_H
#define MLA_TESTS_UNIT_V4_LAYER_REF_H

#include <stdio.h>

#include "model_v4/compressor.h"
#include "model_v4/v4_attn.h"
#include "model_v4/v4_indexer.h"
#include "unit/v4_vec.h"

#define V4T_MAXT 32

static inline void v4t_mv(const float *w, int rows, int cols, const float *x, float *y)
{
	for (int r = 0; r < rows; r++) {
		double acc = 0;
		for (int c = 0; c < cols; c++)
			acc += (double)w[(size_t)r * (size_t)cols + (size_t)c] * x[c];
		y[r] = (float)acc;
	}
}

static inline void v4t_rmsnorm(float *x, int n, const float *w, float eps)
{
	double ss = 0;
	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	double r = 1 / sqrt(ss / n + eps);
	for (int i = 0; i < n; i++)
		x[i] = (float)(x[i] * r * (w ? w[i] : 1));
}

struct v4t_attn {
	int ratio, D, ql, H, hd, G, olr, inh, ihd, win, K;
	float eps;
	struct v4_rope rope;
	float *wq_a, *q_norm, *wq_b, *wkv, *kv_norm, *sink, *wo_a, *wo_b;
	struct v4_comp comp, icomp;
	float *c_w[4], *i_w[6]; /* compressor wkv wgate ape norm; indexer wq_b weights_proj + its compressor */
	float *cst, *icst, *ents, *ients;
	int n_ent, n_ient;
	float kvs[V4T_MAXT][64];
};

static inline float *v4t_w(const json_t *j, const char *prefix, const char *key)
{
	char k[128];
	snprintf(k, sizeof k, "%s%s", prefix, key);
	return v4v_f32(j, k);
}

static inline void v4t_attn_load(const json_t *j, const char *pre, struct v4t_attn *a)
{
	memset(a, 0, sizeof *a);
	a->ratio = v4v_int(j, "ratio"), a->D = v4v_int(j, "dim"), a->ql = v4v_int(j, "q_lora_rank");
	a->H = v4v_int(j, "n_heads"), a->hd = v4v_int(j, "head_dim"), a->G = v4v_int(j, "o_groups");
	a->olr = v4v_int(j, "o_lora_rank"), a->inh = v4v_int(j, "index_n_heads");
	a->ihd = v4v_int(j, "index_head_dim"), a->win = v4v_int(j, "window"), a->K = v4v_int(j, "index_topk");
	a->eps = (float)v4v_num(j, "eps");
	CHECK(a->hd <= 64 && a->H * a->hd <= 256 && a->D <= 64 && a->ql <= 64 && a->G * a->olr <= 64 &&
	      a->inh * a->ihd <= 256);
	struct v4_config cfg;
	struct err e = {{0}};
	CHECK(v4_config_load(fixture_path("tiny-v4"), &cfg, &e) == 0);
	cfg.qk_rope_head_dim = v4v_int(j, "rope_dim");
	CHECK(v4_rope_init_layer(&a->rope, &cfg, a->ratio, &e) == 0);
	a->wq_a = v4t_w(j, pre, "wq_a.weight"), a->q_norm = v4t_w(j, pre, "q_norm.weight");
	a->wq_b = v4t_w(j, pre, "wq_b.weight"), a->wkv = v4t_w(j, pre, "wkv.weight");
	a->kv_norm = v4t_w(j, pre, "kv_norm.weight"), a->sink = v4t_w(j, pre, "attn_sink");
	a->wo_a = v4t_w(j, pre, "wo_a.weight"), a->wo_b = v4t_w(j, pre, "wo_b.weight");
	static const char *const ck[4] = {"compressor.wkv.weight", "compressor.wgate.weight", "compressor.ape",
					  "compressor.norm.weight"};
	static const char *const ik[6] = {"indexer.wq_b.weight",           "indexer.weights_proj.weight",
					  "indexer.compressor.wkv.weight", "indexer.compressor.wgate.weight",
					  "indexer.compressor.ape",        "indexer.compressor.norm.weight"};
	if (a->ratio) {
		for (int i = 0; i < 4; i++)
			a->c_w[i] = v4t_w(j, pre, ck[i]);
		a->comp = (struct v4_comp){a->ratio, a->hd, a->eps, V4_COMP_KV, a->c_w[2], a->c_w[3], &a->rope};
		a->cst = malloc(v4_comp_state_floats(&a->comp) * sizeof *a->cst);
		a->ents = malloc((size_t)V4T_MAXT * (size_t)a->hd * sizeof *a->ents);
		v4_comp_state_init(&a->comp, a->cst);
	}
	if (a->ratio == 4) {
		for (int i = 0; i < 6; i++)
			a->i_w[i] = v4t_w(j, pre, ik[i]);
		a->icomp = (struct v4_comp){4, a->ihd, a->eps, V4_COMP_INDEX, a->i_w[4], a->i_w[5], &a->rope};
		a->icst = malloc(v4_comp_state_floats(&a->icomp) * sizeof *a->icst);
		a->ients = malloc((size_t)V4T_MAXT * (size_t)a->ihd * sizeof *a->ients);
		v4_comp_state_init(&a->icomp, a->icst);
	}
}

static inline void v4t_attn_free(struct v4t_attn *a)
{
	free(a->wq_a), free(a->q_norm), free(a->wq_b), free(a->wkv), free(a->kv_norm), free(a->sink);
	free(a->wo_a), free(a->wo_b), free(a->cst), free(a->icst), free(a->ents), free(a->ients);
	for (int i = 0; i < 4; i++)
		free(a->c_w[i]);
	for (int i = 0; i < 6; i++)
		free(a->i_w[i]);
}

/* Token t (tokens 0 .. t-1 done before): y [D] -> out [D]; the indexer's selection (ratio 4)
 * to sel [K], -1 padded. */
static inline void v4t_attn_token(struct v4t_attn *a, int t, const float *y, float *out, int32_t *sel)
{
	int D = a->D, H = a->H, hd = a->hd;
	float qr[64], q[256], o[256], z[64], ckv[128], csc[128], iq[256], iw[16], lse[64];
	CHECK(t < V4T_MAXT);
	v4t_mv(a->wq_a, a->ql, D, y, qr);
	v4t_rmsnorm(qr, a->ql, a->q_norm, a->eps);
	v4t_mv(a->wq_b, H * hd, a->ql, qr, q);
	v4_attn_prep_q(&a->rope, H, hd, a->eps, t, q);
	v4t_mv(a->wkv, hd, D, y, a->kvs[t]);
	v4t_rmsnorm(a->kvs[t], hd, a->kv_norm, a->eps);
	v4_attn_prep_kv(&a->rope, hd, t, 1, a->kvs[t]);
	const float *keys[2 * V4T_MAXT];
	long lo, nc;
	v4_attn_visible(a->ratio, a->win, t, &lo, &nc);
	int nk = 0;
	for (long p = lo; p <= t; p++)
		keys[nk++] = a->kvs[p];
	if (a->ratio) {
		int w = v4_comp_width(&a->comp);
		v4t_mv(a->c_w[0], w, D, y, ckv);
		v4t_mv(a->c_w[1], w, D, y, csc);
		a->n_ent += v4_comp_feed(&a->comp, a->cst, t, 1, ckv, csc, a->ents + (size_t)a->n_ent * (size_t)hd);
		EXPECT_EQ_INT(a->n_ent, nc);
	}
	for (int i = 0; i < a->K; i++)
		sel[i] = -1;
	if (a->ratio == 4) {
		v4t_mv(a->i_w[0], a->inh * a->ihd, a->ql, qr, iq);
		v4_index_query(&a->rope, a->inh, a->ihd, t, 1, iq);
		v4t_mv(a->i_w[1], a->inh, D, y, iw);
		v4_index_weights(a->inh, a->ihd, iw);
		v4t_mv(a->i_w[2], 2 * a->ihd, D, y, ckv);
		v4t_mv(a->i_w[3], 2 * a->ihd, D, y, csc);
		a->n_ient += v4_comp_feed(&a->icomp, a->icst, t, 1, ckv, csc,
					  a->ients + (size_t)a->n_ient * (size_t)a->ihd);
		int ns = v4_index_select(a->inh, a->ihd, iq, iw, a->ients, (int)nc, a->K, sel);
		for (int i = 0; i < ns; i++)
			keys[nk++] = a->ents + (size_t)sel[i] * (size_t)hd;
	} else {
		for (long en = 0; en < nc; en++)
			keys[nk++] = a->ents + (size_t)en * (size_t)hd;
	}
	v4_attn_one(H, hd, 1.0f / sqrtf((float)hd), q, keys, nk, a->sink, o, lse);
	v4_attn_unrope(&a->rope, H, hd, o, t);
	int gl = H * hd / a->G;
	for (int g = 0; g < a->G; g++)
		v4t_mv(a->wo_a + (size_t)g * (size_t)a->olr * (size_t)gl, a->olr, gl, o + g * gl, z + g * a->olr);
	v4t_mv(a->wo_b, D, a->G * a->olr, z, out);
}

#endif
