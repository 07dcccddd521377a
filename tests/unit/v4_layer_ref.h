/* The model_v4 units composed into one layer's attention, token by token as a decode step
 * runs it (the test side of the forward: the GEMVs here stand for its GEMMs). Per token t:
 *   qr = q_norm(wq_a y); q = wq_b qr; kv = kv_norm(wkv y); the compressors' wkv / wgate rows;
 *   ratio 4: the indexer's wq_b qr and weights_proj y
 *   then model_v4/v4_block.h's v4_attn_seq (the forward's own composition: per-head RMS and
 *   RoPE, fp8 kv, the compressors fed, the indexer's top-k, window + entries + sink attention,
 *   inverse RoPE) for the one token
 *   z_g = wo_a_g o_g per group; out = wo_b z
 * Weights come from a case of v4-units/layer.json or block.json, under a key prefix. */
#ifndef MLA_TESTS_UNIT_V4_LAYER_REF_H
#define MLA_TESTS_UNIT_V4_LAYER_REF_H

#include <stdio.h>

#include "model_v4/v4_attn.h"
#include "model_v4/v4_block.h"
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

static inline void v4t_rmsnorm(float *x, int n, const float *w, float eps) { v4_rmsnorm_rows(x, 1, n, w, eps); }

struct v4t_attn {
	int ratio, D, ql, H, hd, G, olr, inh, ihd, win, K;
	float eps;
	struct v4_rope rope;
	float *wq_a, *q_norm, *wq_b, *wkv, *kv_norm, *sink, *wo_a, *wo_b;
	struct v4_comp comp, icomp;
	float *c_w[4], *i_w[6];  /* compressor wkv wgate ape norm; indexer wq_b weights_proj + its compressor */
	struct v4_attn_layer al; /* the layer as v4_block.h runs it */
	struct v4_seq_attn st;   /* the sequence's bounded state */
	float *stmem;
	struct v4_pages pg; /* its entries: one block of V4T_MAXT tokens */
	int32_t bt[1];
	float *pgmem;
	void *work; /* v4_attn_seq's scratch */
};

static inline float *v4t_w(const json_t *j, const char *prefix, const char *key)
{
	char k[128];
	snprintf(k, sizeof k, "%s%s", prefix, key);
	return v4v_f32(j, k);
}

/* rollback: the positions the state may be taken back (v4_seq_attn_rollback) */
static inline void v4t_attn_load_r(const json_t *j, const char *pre, struct v4t_attn *a, int rollback)
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
	}
	if (a->ratio == 4) {
		for (int i = 0; i < 6; i++)
			a->i_w[i] = v4t_w(j, pre, ik[i]);
		a->icomp = (struct v4_comp){4, a->ihd, a->eps, V4_COMP_INDEX, a->i_w[4], a->i_w[5], &a->rope};
	}
	a->al = (struct v4_attn_layer){.ratio = a->ratio,
				       .n_heads = a->H,
				       .head_dim = a->hd,
				       .window = a->win,
				       .index_heads = a->inh,
				       .index_dim = a->ihd,
				       .index_topk = a->K,
				       .eps = a->eps,
				       .sink = a->sink,
				       .rope = a->rope,
				       .comp = a->comp,
				       .icomp = a->icomp,
				       .rollback = rollback};
	a->stmem = malloc(v4_seq_attn_floats(&a->al) * sizeof(float));
	v4_seq_attn_init(&a->al, a->stmem, &a->st);
	size_t ew = a->ratio ? v4_comp_entry_floats(&a->comp) : 0,
	       iw = a->ratio == 4 ? v4_comp_entry_floats(&a->icomp) : 0;
	size_t ne = (size_t)v4_page_slots(a->ratio, V4T_MAXT) * ew;
	size_t ni = a->ratio == 4 ? (size_t)v4_page_slots(4, V4T_MAXT) * iw : 0;
	a->pgmem = calloc(ne + ni + 1, sizeof(float));
	a->bt[0] = 0;
	a->pg = (struct v4_pages){a->pgmem, ne + ni, a->bt, V4T_MAXT, 0, ne, ew, iw, NULL, NULL};
	a->work = aligned_alloc(64, (v4_attn_seq_work_bytes(&a->al, V4T_MAXT, 1) + 63) / 64 * 64);
}

static inline void v4t_attn_load(const json_t *j, const char *pre, struct v4t_attn *a)
{
	v4t_attn_load_r(j, pre, a, 0);
}

static inline void v4t_attn_free(struct v4t_attn *a)
{
	free(a->wq_a), free(a->q_norm), free(a->wq_b), free(a->wkv), free(a->kv_norm), free(a->sink);
	free(a->wo_a), free(a->wo_b), free(a->stmem), free(a->work), free(a->pgmem);
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
	float qr[64], q[256], kv[64], o[256], z[64], ckv[128], csc[128], iq[256], iw[16], ikv[128], isc[128];
	CHECK(t < V4T_MAXT);
	v4t_mv(a->wq_a, a->ql, D, y, qr);
	v4t_rmsnorm(qr, a->ql, a->q_norm, a->eps);
	v4t_mv(a->wq_b, H * hd, a->ql, qr, q);
	v4t_mv(a->wkv, hd, D, y, kv);
	v4t_rmsnorm(kv, hd, a->kv_norm, a->eps);
	if (a->ratio) {
		int w = v4_comp_width(&a->comp);
		v4t_mv(a->c_w[0], w, D, y, ckv);
		v4t_mv(a->c_w[1], w, D, y, csc);
	}
	if (a->ratio == 4) {
		v4t_mv(a->i_w[0], a->inh * a->ihd, a->ql, qr, iq);
		v4t_mv(a->i_w[1], a->inh, D, y, iw);
		v4t_mv(a->i_w[2], 2 * a->ihd, D, y, ikv);
		v4t_mv(a->i_w[3], 2 * a->ihd, D, y, isc);
	}
	struct err e = {{0}};
	EXPECTF(v4_attn_seq(&a->al, &a->st, &a->pg, t, 1, q, kv, ckv, csc, iq, iw, ikv, isc, o, sel, a->work, V4T_MAXT,
			    &e) == 0,
		"%s", e.msg);
	int gl = H * hd / a->G;
	for (int g = 0; g < a->G; g++)
		v4t_mv(a->wo_a + (size_t)g * (size_t)a->olr * (size_t)gl, a->olr, gl, o + g * gl, z + g * a->olr);
	v4t_mv(a->wo_b, D, a->G * a->olr, z, out);
}

#endif
