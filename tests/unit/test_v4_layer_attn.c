/* The model_v4 units composed into one layer's attention (unit/v4_layer_ref.h), token by
 * token, against scripts/v4_reference.py's Model.attn_prefill (v4-units/layer.json: ratio 4
 * with the indexer, ratio 8, ratio 0; D 16, 4 heads x 16, window 4, 18 tokens); and with junk
 * drafts fed and taken back before every token. */
#include <string.h>

#include "harness.h"
#include "unit/v4_layer_ref.h"

static void test_layers(void)
{
	json_t *j = v4v_load("layer.json");
	size_t i;
	json_t *c;
	json_array_foreach(v4v_get(j, "cases"), i, c)
	{
		struct v4t_attn a;
		v4t_attn_load(c, "", &a);
		int S = v4v_len(c, "y") / a.D, sel_bad = 0;
		float *y = v4v_f32(c, "y"), out[64];
		double *want = v4v_f64(c, "out"), worst = 0;
		long long *want_sel = a.ratio == 4 ? v4v_i64(c, "sel") : NULL;
		for (int t = 0; t < S; t++) {
			int32_t sel[V4T_MAXT];
			v4t_attn_token(&a, t, y + (size_t)t * (size_t)a.D, out, sel);
			worst = fmax(worst, v4v_maxdiff(out, want + (size_t)t * (size_t)a.D, a.D));
			for (int k = 0; want_sel && k < a.K; k++)
				sel_bad += sel[k] != want_sel[t * a.K + k];
		}
		printf("# layer attention ratio %d: %d tokens, max abs vs reference %.3g, %d selection slots "
		       "differ\n",
		       a.ratio, S, worst, sel_bad);
		EXPECTF(worst < 1e-5, "ratio %d: max abs %g", a.ratio, worst);
		EXPECT_EQ_INT(sel_bad, 0);
		free(y), free(want), free(want_sel);
		v4t_attn_free(&a);
	}
	json_decref(j);
}

/* The same with drafts taken back: before each token t, 1 + t % 3 junk tokens are fed at t ..
 * (random inputs: windows completed, entries written, the ring overwritten), then the state is
 * taken back to t (rollback 3) and the real token fed: every output as the reference's */
static void test_rollback(void)
{
	json_t *j = v4v_load("layer.json");
	size_t i;
	json_t *c;
	uint64_t rs = 11;
	json_array_foreach(v4v_get(j, "cases"), i, c)
	{
		struct v4t_attn a;
		v4t_attn_load_r(c, "", &a, 3);
		int S = v4v_len(c, "y") / a.D, sel_bad = 0;
		float *y = v4v_f32(c, "y"), out[64], junk[64];
		double *want = v4v_f64(c, "out"), worst = 0;
		long long *want_sel = a.ratio == 4 ? v4v_i64(c, "sel") : NULL;
		for (int t = 0; t < S; t++) {
			int32_t sel[V4T_MAXT];
			int nj = 1 + t % 3;
			for (int d = 0; t > 0 && d < nj && t + d < V4T_MAXT; d++) {
				for (int x = 0; x < a.D; x++)
					junk[x] = test_frand(&rs);
				v4t_attn_token(&a, t + d, junk, out, sel);
			}
			if (t > 0)
				v4_seq_attn_rollback(&a.al, &a.st, t);
			v4t_attn_token(&a, t, y + (size_t)t * (size_t)a.D, out, sel);
			worst = fmax(worst, v4v_maxdiff(out, want + (size_t)t * (size_t)a.D, a.D));
			for (int k = 0; want_sel && k < a.K; k++)
				sel_bad += sel[k] != want_sel[t * a.K + k];
		}
		printf("# layer attention ratio %d with junk drafts taken back: max abs vs reference %.3g, %d "
		       "selection slots differ\n",
		       a.ratio, worst, sel_bad);
		EXPECTF(worst < 1e-5, "ratio %d: max abs %g", a.ratio, worst);
		EXPECT_EQ_INT(sel_bad, 0);
		free(y), free(want), free(want_sel);
		v4t_attn_free(&a);
	}
	json_decref(j);
}

TESTS(T(test_layers), T(test_rollback))
