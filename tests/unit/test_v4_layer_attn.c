/* The model_v4 units composed into one layer's attention, token by token as a decode step
 * runs it, against scripts/v4_reference.py's Model.attn_prefill (v4-units/layer.json: ratio 4
 * with the indexer, ratio 8, ratio 0; D 16, 4 heads x 16, window 4, 18 tokens). Per token t:
 *   qr = q_norm(wq_a y); q = wq_b qr, per-head RMS, RoPE(t); kv = kv_norm(wkv y), RoPE(t), fp8
 *   the compressor(s) fed token t (an entry completed by t is visible to t)
 *   ratio 4: indexer q / weights, top-k of the visible indexer entries
 *   attention over window rows [t - win + 1, t] + the entries, sink; inverse RoPE(t)
 *   z_g = wo_a_g o_g per group; out = wo_b z
 * This is the order the forward must keep; the GEMVs here stand for its GEMMs. */
#include <string.h>

#include "harness.h"
#include "model_v4/compressor.h"
#include "model_v4/v4_attn.h"
#include "model_v4/v4_indexer.h"
#include "unit/v4_vec.h"

static void mv(const float *w, int rows, int cols, const float *x, float *y)
{
	for (int r = 0; r < rows; r++) {
		double acc = 0;
		for (int c = 0; c < cols; c++)
			acc += (double)w[(size_t)r * (size_t)cols + (size_t)c] * x[c];
		y[r] = (float)acc;
	}
}

static void rmsnorm(float *x, int n, const float *w, float eps)
{
	double ss = 0;
	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	double r = 1 / sqrt(ss / n + eps);
	for (int i = 0; i < n; i++)
		x[i] = (float)(x[i] * r * (w ? w[i] : 1));
}

#define MAXT 32

static void run_case(const json_t *j, double *worst)
{
	int ratio = v4v_int(j, "ratio"), D = v4v_int(j, "dim"), ql = v4v_int(j, "q_lora_rank");
	int H = v4v_int(j, "n_heads"), hd = v4v_int(j, "head_dim"), rd = v4v_int(j, "rope_dim");
	int G = v4v_int(j, "o_groups"), olr = v4v_int(j, "o_lora_rank"), inh = v4v_int(j, "index_n_heads");
	int ihd = v4v_int(j, "index_head_dim"), win = v4v_int(j, "window"), K = v4v_int(j, "index_topk");
	float eps = (float)v4v_num(j, "eps");
	int S = v4v_len(j, "y") / D;
	CHECK(S <= MAXT);
	struct v4_config cfg;
	struct err e = {{0}};
	CHECK(v4_config_load(fixture_path("tiny-v4"), &cfg, &e) == 0);
	cfg.qk_rope_head_dim = rd;
	struct v4_rope rope;
	CHECK(v4_rope_init_layer(&rope, &cfg, ratio, &e) == 0);
	float *y = v4v_f32(j, "y"), *wq_a = v4v_f32(j, "wq_a.weight"), *q_norm = v4v_f32(j, "q_norm.weight");
	float *wq_b = v4v_f32(j, "wq_b.weight"), *wkv = v4v_f32(j, "wkv.weight");
	float *kv_norm = v4v_f32(j, "kv_norm.weight"), *sink = v4v_f32(j, "attn_sink");
	float *wo_a = v4v_f32(j, "wo_a.weight"), *wo_b = v4v_f32(j, "wo_b.weight");
	double *want = v4v_f64(j, "out");
	long long *want_sel = ratio == 4 ? v4v_i64(j, "sel") : NULL;
	/* the compressors and their entries (every entry of the sequence kept: MAXT tokens) */
	struct v4_comp comp = {0}, icomp = {0};
	float *c_wkv = NULL, *c_wgate = NULL, *c_ape = NULL, *c_norm = NULL, *ents = NULL, *cst = NULL;
	float *i_wq_b = NULL, *i_wp = NULL, *ic_wkv = NULL, *ic_wgate = NULL, *ic_ape = NULL, *ic_norm = NULL;
	float *ients = NULL, *icst = NULL;
	int n_ent = 0, n_ient = 0;
	if (ratio) {
		c_wkv = v4v_f32(j, "compressor.wkv.weight"), c_wgate = v4v_f32(j, "compressor.wgate.weight");
		c_ape = v4v_f32(j, "compressor.ape"), c_norm = v4v_f32(j, "compressor.norm.weight");
		comp = (struct v4_comp){ratio, hd, eps, V4_COMP_KV, c_ape, c_norm, &rope};
		cst = malloc(v4_comp_state_floats(&comp) * sizeof *cst);
		ents = malloc((size_t)MAXT * (size_t)hd * sizeof *ents);
		v4_comp_state_init(&comp, cst);
	}
	if (ratio == 4) {
		i_wq_b = v4v_f32(j, "indexer.wq_b.weight"), i_wp = v4v_f32(j, "indexer.weights_proj.weight");
		ic_wkv = v4v_f32(j, "indexer.compressor.wkv.weight");
		ic_wgate = v4v_f32(j, "indexer.compressor.wgate.weight");
		ic_ape = v4v_f32(j, "indexer.compressor.ape"), ic_norm = v4v_f32(j, "indexer.compressor.norm.weight");
		icomp = (struct v4_comp){4, ihd, eps, V4_COMP_INDEX, ic_ape, ic_norm, &rope};
		icst = malloc(v4_comp_state_floats(&icomp) * sizeof *icst);
		ients = malloc((size_t)MAXT * (size_t)ihd * sizeof *ients);
		v4_comp_state_init(&icomp, icst);
	}
	float kvs[MAXT][64], qr[64], q[256], o[256], z[64], out[64], ckv[128], csc[128], iq[256], iw[16], lse[16];
	CHECK(hd <= 64 && H * hd <= 256 && D <= 64 && ql <= 64 && G * olr <= 64 && inh * ihd <= 256);
	int sel_bad = 0;
	for (int t = 0; t < S; t++) {
		const float *yt = y + (size_t)t * (size_t)D;
		mv(wq_a, ql, D, yt, qr);
		rmsnorm(qr, ql, q_norm, eps);
		mv(wq_b, H * hd, ql, qr, q);
		v4_attn_prep_q(&rope, H, hd, eps, t, q);
		mv(wkv, hd, D, yt, kvs[t]);
		rmsnorm(kvs[t], hd, kv_norm, eps);
		v4_attn_prep_kv(&rope, hd, t, 1, kvs[t]);
		const float *keys[MAXT + MAXT];
		long lo, nc;
		v4_attn_visible(ratio, win, t, &lo, &nc);
		int nk = 0;
		for (long p = lo; p <= t; p++)
			keys[nk++] = kvs[p];
		if (ratio) {
			int w = v4_comp_width(&comp);
			mv(c_wkv, w, D, yt, ckv);
			mv(c_wgate, w, D, yt, csc);
			n_ent += v4_comp_feed(&comp, cst, t, 1, ckv, csc, ents + (size_t)n_ent * (size_t)hd);
			EXPECT_EQ_INT(n_ent, nc);
		}
		if (ratio == 4) {
			mv(i_wq_b, inh * ihd, ql, qr, iq);
			v4_index_query(&rope, inh, ihd, t, 1, iq);
			mv(i_wp, inh, D, yt, iw);
			v4_index_weights(inh, ihd, iw);
			mv(ic_wkv, 2 * ihd, D, yt, ckv);
			mv(ic_wgate, 2 * ihd, D, yt, csc);
			n_ient += v4_comp_feed(&icomp, icst, t, 1, ckv, csc, ients + (size_t)n_ient * (size_t)ihd);
			int32_t sel[MAXT];
			int ns = v4_index_select(inh, ihd, iq, iw, ients, (int)nc, K, sel);
			for (int a = 0; a < K; a++)
				sel_bad += (a < ns ? sel[a] : -1) != want_sel[t * K + a];
			for (int a = 0; a < ns; a++)
				keys[nk++] = ents + (size_t)sel[a] * (size_t)hd;
		} else {
			for (long en = 0; en < nc; en++)
				keys[nk++] = ents + (size_t)en * (size_t)hd;
		}
		v4_attn_one(H, hd, 1.0f / sqrtf((float)hd), q, keys, nk, sink, o, lse);
		v4_attn_unrope(&rope, H, hd, o, t);
		int gl = H * hd / G;
		for (int g = 0; g < G; g++)
			mv(wo_a + (size_t)g * (size_t)olr * (size_t)gl, olr, gl, o + g * gl, z + g * olr);
		mv(wo_b, D, G * olr, z, out);
		*worst = fmax(*worst, v4v_maxdiff(out, want + (size_t)t * (size_t)D, D));
	}
	printf("# layer attention ratio %d: %d tokens, max abs vs reference %.3g, %d selection slots differ\n", ratio,
	       S, *worst, sel_bad);
	EXPECTF(*worst < 1e-5, "ratio %d: max abs %g", ratio, *worst);
	EXPECT_EQ_INT(sel_bad, 0);
	free(y), free(wq_a), free(q_norm), free(wq_b), free(wkv), free(kv_norm), free(sink), free(wo_a), free(wo_b);
	free(want), free(want_sel), free(c_wkv), free(c_wgate), free(c_ape), free(c_norm), free(ents), free(cst);
	free(i_wq_b), free(i_wp), free(ic_wkv), free(ic_wgate), free(ic_ape), free(ic_norm), free(ients), free(icst);
}

static void test_layers(void)
{
	json_t *j = v4v_load("layer.json");
	size_t i;
	json_t *c;
	json_array_foreach(v4v_get(j, "cases"), i, c)
	{
		double worst = 0;
		run_case(c, &worst);
	}
	json_decref(j);
}

TESTS(T(test_layers))
