/* DeepSeek-V4-Flash-Base through model.h: tiny-v4-base (tiny-v4 with expert_dtype fp8, its
 * routed experts fp8 e4m3 with e8m0 128x128 block scales; scripts/make_v4_base_fixture.py)
 * gives its golden logits (scripts/v4_reference.py, act-quant off) on every row of every prompt
 * within 1e-3, in one prefill, in chunks of 5 and token by token. */
#include "model/family.h"
#include "ops/pool.h"
#include "unit/fwd_util.h"

#define TOL 1e-3

static void test_golden(void)
{
	struct err e = {{0}};
	struct pool *pl = NULL;
	CHECK(pool_new(2, &pl, &e) == 0);
	struct model_options o = {
		.act_dtype = DT_F32, .max_batch_tokens = 80, .max_seqs = 2, .max_model_len = 80, .pool = pl};
	struct model *m = NULL;
	EXPECTF(model_load(fixture_path("tiny-v4-base"), &o, &m, &e) == 0, "%s", e.msg);
	if (!m) {
		pool_free(pl);
		return;
	}
	int V = model_config(m)->vocab_size, np = 0;
	json_t *j = json_load_file(fixture_path("tiny-v4-base/golden/prompts.json"), 0, NULL);
	CHECK(j);
	size_t i;
	json_t *pr;
	static const int chunks[] = {0, 5, 1};
	json_array_foreach(json_object_get(j, "prompts"), i, pr)
	{
		const char *name = json_string_value(json_object_get(pr, "name"));
		json_t *t = json_object_get(pr, "tokens");
		int n = (int)json_array_size(t);
		int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
		CHECK(tok);
		for (int k = 0; k < n; k++)
			tok[k] = (int32_t)json_integer_value(json_array_get(t, (size_t)k));
		char rel[128];
		snprintf(rel, sizeof rel, "tiny-v4-base/golden/%s",
			 json_string_value(json_object_get(pr, "logits_file")));
		size_t nv = (size_t)n * (size_t)V;
		float *gold = fwd_read_f32(fixture_path(rel), nv), *out = malloc(sizeof(float) * nv);
		CHECK(gold && out);
		for (int c = 0; c < 3; c++) {
			int rc = fwd_run_chunks(m, "REFERENCE_MLA", tok, n, chunks[c], 0, out, &e);
			EXPECTF(rc == 0, "%s chunk %d: %s", name, chunks[c], e.msg);
			double d = rc ? INFINITY : 0;
			for (size_t k = 0; !rc && k < nv; k++)
				d = fmax(d, fabs((double)out[k] - gold[k]));
			printf("# %s, %s: max |diff| %.3g over %d rows\n", name,
			       chunks[c] ? (chunks[c] == 1 ? "token by token" : "chunks of 5") : "one prefill", d, n);
			EXPECTF(d < TOL, "%s chunk %d: max |diff| %g", name, chunks[c], d);
		}
		np++;
		free(tok), free(gold), free(out);
	}
	EXPECTF(np >= 4, "%d prompts in golden/prompts.json", np);
	json_decref(j);
	model_free(m);
	pool_free(pl);
}

TESTS(T(test_golden))
