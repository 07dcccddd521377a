/* model_v4/v4_rope against scripts/v4_reference.py's Model.inv_freq / cos_sin / rope on
 * tiny-v4's config (v4-units/rope.json): the tables and cos / sin bit for bit, the rotation
 * (forward and inverse) to float rounding. */
#include "harness.h"
#include "model_v4/v4_rope.h"
#include "unit/v4_vec.h"

static void test_vs_reference(void)
{
	json_t *j = v4v_load("rope.json");
	struct v4_config c;
	struct err e = {{0}};
	CHECK(v4_config_load(fixture_path("tiny-v4"), &c, &e) == 0);
	int dim = v4v_int(j, "dim"), len = v4v_len(j, "x"), np = v4v_len(j, "positions");
	long long *pos = v4v_i64(j, "positions");
	size_t i;
	json_t *k;
	double worst = 0;
	json_array_foreach(v4v_get(j, "kinds"), i, k)
	{
		struct v4_rope r;
		EXPECTF(v4_rope_init_layer(&r, &c, v4v_int(k, "ratio"), &e) == 0, "%s", e.msg);
		EXPECT_EQ_INT(r.dim, dim);
		double *inv = v4v_f64(k, "inv_freq"), *wc = v4v_f64(k, "cos"), *ws = v4v_f64(k, "sin");
		double *wf = v4v_f64(k, "fwd"), *wi = v4v_f64(k, "inv");
		EXPECTF(v4v_mismatches(r.inv_freq, inv, dim / 2) == 0, "ratio %d: inv_freq differs by %g",
			v4v_int(k, "ratio"), v4v_maxdiff(r.inv_freq, inv, dim / 2));
		for (int p = 0; p < np; p++) {
			float co[V4_ROPE_MAX_PAIRS], si[V4_ROPE_MAX_PAIRS];
			v4_rope_cos_sin(&r, (long)pos[p], co, si);
			int bad = v4v_mismatches(co, wc + p * dim / 2, dim / 2) +
				  v4v_mismatches(si, ws + p * dim / 2, dim / 2);
			EXPECTF(bad == 0, "ratio %d pos %lld: %d of cos / sin differ", v4v_int(k, "ratio"), pos[p],
				bad);
			double d;
			for (int inverse = 0; inverse < 2; inverse++) {
				float *x = v4v_f32(j, "x");
				v4_rope_apply(&r, x, len, (long)pos[p], inverse);
				d = v4v_maxdiff(x, (inverse ? wi : wf) + (size_t)p * (size_t)len, len);
				worst = d > worst ? d : worst;
				free(x);
			}
		}
		free(inv), free(wc), free(ws), free(wf), free(wi);
	}
	printf("# rope rotation vs reference: max abs %.3g\n", worst);
	EXPECTF(worst < 1e-6, "rotation: max abs %g", worst);
	free(pos);
	json_decref(j);
}

static void test_refused(void)
{
	struct v4_rope r;
	struct err e = {{0}};
	EXPECT(v4_rope_init(&r, 31, 10000, 0, 1, 1, 1, &e) < 0);
	EXPECT(v4_rope_init(&r, 1024, 10000, 0, 1, 1, 1, &e) < 0);
	EXPECT(v4_rope_init(&r, 64, 10000, 4096, 0.5, 32, 1, &e) < 0);
}

TESTS(T(test_vs_reference), T(test_refused))
