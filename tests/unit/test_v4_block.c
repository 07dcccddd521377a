/* A whole DeepSeek-V4 block from the model_v4 units, token by token, against
 * scripts/v4_reference.py's Model.block (v4-units/block.json: a ratio-4 layer with hc 2
 * streams, 4 FP4 routed experts top 2 + an F32 shared expert, 12 tokens):
 *   y = attn_norm(hc_pre(x)); x = hc_post(attention(y), x)           (unit/v4_layer_ref.h)
 *   y = ffn_norm(hc_pre(x)); route(gate y); x = hc_post(sum_e expert_e(y) + shared(y), x)
 * with every expert's w1 / w3 / w2 run by fp4_gemv_ref on the packed codes. And
 * v4_page_entries against v4_page_entry entry by entry (ratios 4, 16, 128; blocks of 5 .. 128
 * tokens, ratio and block size multiples of each other or not; a scattered block table). */
#include <string.h>

#include "harness.h"
#include "model_v4/fp4.h"
#include "model_v4/hc.h"
#include "model_v4/v4_moe_route.h"
#include "unit/v4_layer_ref.h"

#define MAXE 8

struct fp4w {
	uint8_t *codes, *scales;
	int n, k;
};

static struct fp4w load_fp4(const json_t *j, int e, const char *w, int n, int k)
{
	char key[96];
	struct fp4w f = {malloc((size_t)n * (size_t)k / 2), malloc((size_t)n * (size_t)((k + 31) / 32)), n, k};
	snprintf(key, sizeof key, "ffn.experts.%d.%s.weight", e, w);
	long long *c = v4v_i64(j, key);
	for (int i = 0; i < n * k / 2; i++)
		f.codes[i] = (uint8_t)c[i];
	free(c);
	snprintf(key, sizeof key, "ffn.experts.%d.%s.scale", e, w);
	c = v4v_i64(j, key);
	for (int i = 0; i < n * ((k + 31) / 32); i++)
		f.scales[i] = (uint8_t)c[i];
	free(c);
	return f;
}

static struct v4_hc load_hc(const json_t *j, const char *name, int hc, int D)
{
	char k[64];
	struct v4_hc h = {.hc = hc,
			  .dim = D,
			  .iters = v4v_int(j, "iters"),
			  .norm_eps = (float)v4v_num(j, "eps"),
			  .hc_eps = (float)v4v_num(j, "hc_eps")};
	snprintf(k, sizeof k, "%s_fn", name);
	h.fn = v4v_f32(j, k);
	snprintf(k, sizeof k, "%s_scale", name);
	h.scale = v4v_f32(j, k);
	snprintf(k, sizeof k, "%s_base", name);
	h.base = v4v_f32(j, k);
	return h;
}

static void free_hc(struct v4_hc *h) { free((void *)h->fn), free((void *)h->scale), free((void *)h->base); }

static void test_block(void)
{
	json_t *j = v4v_load("block.json");
	struct v4t_attn a;
	v4t_attn_load(j, "attn.", &a);
	int D = a.D, hc = v4v_int(j, "hc"), E = v4v_int(j, "n_experts"), k = v4v_int(j, "topk");
	int inter = v4v_int(j, "inter"), S = v4v_len(j, "x") / (hc * D);
	float lim = (float)v4v_num(j, "swiglu_limit");
	CHECK(E <= MAXE && inter <= 64 && hc * D <= 64);
	struct v4_hc ha = load_hc(j, "hc_attn", hc, D), hf = load_hc(j, "hc_ffn", hc, D);
	float *attn_norm = v4v_f32(j, "attn_norm.weight"), *ffn_norm = v4v_f32(j, "ffn_norm.weight");
	float *gate = v4v_f32(j, "ffn.gate.weight"), *bias = v4v_f32(j, "ffn.gate.bias");
	float *s1 = v4v_f32(j, "ffn.shared_experts.w1.weight"), *s3 = v4v_f32(j, "ffn.shared_experts.w3.weight");
	float *s2 = v4v_f32(j, "ffn.shared_experts.w2.weight"), *x = v4v_f32(j, "x");
	double *want = v4v_f64(j, "out");
	long long *want_sel = v4v_i64(j, "sel"), *want_exp = v4v_i64(j, "experts");
	struct fp4w w1[MAXE], w2[MAXE], w3[MAXE];
	for (int e = 0; e < E; e++) {
		w1[e] = load_fp4(j, e, "w1", inter, D);
		w3[e] = load_fp4(j, e, "w3", inter, D);
		w2[e] = load_fp4(j, e, "w2", D, inter);
	}
	struct v4_route route = {E, k, (float)v4v_num(j, "route_scale"), bias, NULL, 0};
	struct err err = {{0}};
	double worst = 0;
	int bad_sel = 0, bad_exp = 0;
	for (int t = 0; t < S; t++) {
		float *xt = x + (size_t)t * (size_t)(hc * D), y[64], post[16], comb[256], out[64], logits[MAXE];
		int32_t sel[V4T_MAXT], ids[MAXE];
		float w[MAXE], g[64], u[64], h[64], eo[64];
		v4_hc_pre(&ha, 1, xt, y, post, comb);
		v4t_rmsnorm(y, D, attn_norm, a.eps);
		v4t_attn_token(&a, t, y, out, sel);
		for (int i = 0; i < a.K; i++)
			bad_sel += sel[i] != want_sel[t * a.K + i];
		v4_hc_post(hc, D, 1, out, xt, post, comb, xt);
		v4_hc_pre(&hf, 1, xt, y, post, comb);
		v4t_rmsnorm(y, D, ffn_norm, a.eps);
		v4t_mv(gate, E, D, y, logits);
		EXPECTF(v4_route_one(&route, logits, 0, ids, w, &err) == 0, "%s", err.msg);
		for (int i = 0; i < k; i++)
			bad_exp += ids[i] != want_exp[t * k + i];
		double acc[64] = {0};
		for (int i = 0; i <= k; i++) { /* the routed experts, then the shared one (weight 1) */
			if (i < k) {
				fp4_gemv_ref(w1[ids[i]].codes, w1[ids[i]].scales, inter, D, y, g);
				fp4_gemv_ref(w3[ids[i]].codes, w3[ids[i]].scales, inter, D, y, u);
			} else {
				v4t_mv(s1, inter, D, y, g);
				v4t_mv(s3, inter, D, y, u);
			}
			v4_swiglu_clamped(inter, g, u, i < k ? w[i] : 1.0f, lim, h);
			if (i < k)
				fp4_gemv_ref(w2[ids[i]].codes, w2[ids[i]].scales, D, inter, h, eo);
			else
				v4t_mv(s2, D, inter, h, eo);
			for (int d = 0; d < D; d++)
				acc[d] += eo[d];
		}
		for (int d = 0; d < D; d++)
			out[d] = (float)acc[d];
		v4_hc_post(hc, D, 1, out, xt, post, comb, xt);
		worst = fmax(worst, v4v_maxdiff(xt, want + (size_t)t * (size_t)(hc * D), hc * D));
	}
	printf("# block (hc 2, ratio 4, FP4 MoE): %d tokens, max abs vs reference %.3g, %d selection slots and %d "
	       "expert slots differ\n",
	       S, worst, bad_sel, bad_exp);
	EXPECTF(worst < 1e-5, "max abs %g", worst);
	EXPECT_EQ_INT(bad_sel, 0);
	EXPECT_EQ_INT(bad_exp, 0);
	for (int e = 0; e < E; e++) {
		free(w1[e].codes), free(w1[e].scales), free(w2[e].codes), free(w2[e].scales);
		free(w3[e].codes), free(w3[e].scales);
	}
	free_hc(&ha), free_hc(&hf), free(attn_norm), free(ffn_norm), free(gate), free(bias), free(s1), free(s2);
	free(s3), free(x), free(want), free(want_sel), free(want_exp);
	v4t_attn_free(&a);
	json_decref(j);
}

static void test_page_entries(void)
{
	enum { NB = 40, BF = 1000, N = 300 };
	int32_t bt[NB];
	for (int b = 0; b < NB; b++)
		bt[b] = (b * 7) % NB;
	float *pool = malloc(sizeof(float) * NB * BF);
	const float **out = malloc(sizeof *out * N);
	CHECK(pool && out);
	const int ratios[] = {4, 16, 128}, sizes[] = {5, 16, 64, 128};
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 4; k++) {
			int r = ratios[i], bs = sizes[k];
			long n = (long)NB * bs / r - 1; /* entries whose last token lies in the table */
			n = n < N ? n : N;
			struct v4_pages pg = {pool, BF, bt, bs, 3, 0, 5, 0, NULL, NULL};
			v4_page_entries(&pg, r, n, 5, 3, out);
			int bad = 0;
			for (long c = 0; c < n; c++)
				bad += out[c] != v4_page_entry(&pg, r, c, 5, 3);
			EXPECTF(bad == 0, "ratio %d, blocks of %d: %d of %ld entries elsewhere", r, bs, bad, n);
		}
	free(pool), free(out);
}

TESTS(T(test_block), T(test_page_entries))
