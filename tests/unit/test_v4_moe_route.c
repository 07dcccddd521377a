/* model_v4/v4_moe_route against scripts/v4_reference.py's Model.moe routing and Model.expert
 * (v4-units/moe.json: 8 experts top 2, route_scale 1.5, a score layer with bias and a hash
 * layer, a softplus input > 20, a 3-way tie for 2 places; SwiGLU with limit 2 and without),
 * and the refused hash tables. */
#include <string.h>

#include "harness.h"
#include "model_v4/v4_moe_route.h"
#include "unit/v4_vec.h"

static void test_vs_reference(void)
{
	json_t *j = v4v_load("moe.json");
	int E = v4v_int(j, "n_experts"), k = v4v_int(j, "k"), T = v4v_len(j, "tokens"), vocab = v4v_int(j, "vocab");
	float *bias = v4v_f32(j, "bias"), *logits = v4v_f32(j, "logits");
	long long *tid = v4v_i64(j, "tid2eid"), *toks = v4v_i64(j, "tokens"), *sids = v4v_i64(j, "score_ids");
	long long *hids = v4v_i64(j, "hash_ids");
	double *sw = v4v_f64(j, "score_w"), *hw = v4v_f64(j, "hash_w");
	int64_t *tid64 = malloc((size_t)vocab * (size_t)k * sizeof *tid64);
	for (int i = 0; i < vocab * k; i++)
		tid64[i] = tid[i];
	struct v4_route score = {E, k, (float)v4v_num(j, "route_scale"), bias, NULL, 0};
	struct v4_route hash = {E, k, score.route_scale, NULL, tid64, vocab};
	struct err e = {{0}};
	double worst = 0;
	for (int t = 0; t < T; t++) {
		int32_t ids[8];
		float w[8];
		for (int pass = 0; pass < 2; pass++) {
			const struct v4_route *r = pass ? &hash : &score;
			long long *want_ids = pass ? hids : sids;
			double *want_w = pass ? hw : sw;
			EXPECTF(v4_route_one(r, logits + (size_t)t * (size_t)E, (int32_t)toks[t], ids, w, &e) == 0,
				"%s", e.msg);
			for (int a = 0; a < k; a++) {
				EXPECTF(ids[a] == want_ids[t * k + a], "%s token %d: expert %d is %d, expected %lld",
					pass ? "hash" : "score", t, a, ids[a], want_ids[t * k + a]);
				worst = fmax(worst, fabs(w[a] - want_w[t * k + a]));
			}
		}
	}
	printf("# moe routing weights vs reference: max abs %.3g\n", worst);
	EXPECTF(worst < 1e-6, "weights: max abs %g", worst);
	int n = v4v_len(j, "g");
	float *g = v4v_f32(j, "g"), *u = v4v_f32(j, "u"), *h = malloc((size_t)n * sizeof *h);
	double *hl = v4v_f64(j, "h_limit"), *hf = v4v_f64(j, "h_nolimit");
	float wt = (float)v4v_num(j, "weight");
	v4_swiglu_clamped(n, g, u, wt, (float)v4v_num(j, "limit"), h);
	double d1 = v4v_maxdiff(h, hl, n);
	v4_swiglu_clamped(n, g, u, wt, 0, h);
	double d2 = v4v_maxdiff(h, hf, n);
	printf("# swiglu vs reference: limit 2 %.3g, no limit %.3g\n", d1, d2);
	EXPECTF(d1 < 1e-6 && d2 < 1e-5, "swiglu: %g %g", d1, d2);
	free(bias), free(logits), free(tid), free(toks), free(sids), free(hids), free(sw), free(hw), free(tid64);
	free(g), free(u), free(h), free(hl), free(hf);
	json_decref(j);
}

static void test_refused(void)
{
	int64_t tid[] = {0, 1, 2, 2, 0, 9};
	float logits[4] = {0};
	int32_t ids[2];
	float w[2];
	struct v4_route r = {4, 2, 1.0f, NULL, tid, 3};
	struct err e = {{0}};
	EXPECT(v4_route_one(&r, logits, 0, ids, w, &e) == 0);
	EXPECT(ids[0] == 0 && ids[1] == 1 && w[0] == 0.5f);
	EXPECT(v4_route_one(&r, logits, 3, ids, w, &e) < 0 && strstr(e.msg, "outside tid2eid"));
	EXPECT(v4_route_one(&r, logits, 1, ids, w, &e) < 0 && strstr(e.msg, "twice"));
	EXPECT(v4_route_one(&r, logits, 2, ids, w, &e) < 0 && strstr(e.msg, "= 9"));
	/* all equal scores: the lowest ids */
	struct v4_route s = {4, 2, 2.0f, NULL, NULL, 0};
	EXPECT(v4_route_one(&s, logits, 0, ids, w, &e) == 0);
	EXPECT(ids[0] == 0 && ids[1] == 1 && w[0] == 1.0f);
	EXPECT_NEAR(v4_sqrtsoftplus(0), sqrt(log(2.0)), 1e-7);
	EXPECT_NEAR(v4_sqrtsoftplus(30), sqrt(30.0), 1e-6);
}

TESTS(T(test_vs_reference), T(test_refused))
