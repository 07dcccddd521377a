/* DeepSeek-V4's MTP module under tensor parallelism, in process: started by
 * tests/e2e/dist_model.sh as `mpirun -np 2 build/tests/test_model_v4_tp` (alone, as make check
 * runs it, it skips: one rank has nothing to split). Both ranks load tiny-v4 at -tp 2 with the
 * MTP module and run the same steps; rank 0's MTP logits (gathered by vocabulary) match
 * golden mtp_logits_file within 1e-3 after one prefill and in chunks of 5, as test_model_v4
 * checks one process (with its allowance on len300: rows within 0.02 where a kv fp8 rounding
 * flips, the oracle's own window and one more that the all-reduce's summation order flips).
 * The main logits under TP: dist_model.sh's `logits -tp 2`. */
#include "dist/comm.h"
#include "ops/pool.h"
#include "unit/fwd_util.h"

#define TOL 1e-3
#define TP 2

static double max_diff(const float *a, const float *b, size_t n)
{
	double w = 0;
	for (size_t i = 0; i < n; i++)
		w = fmax(w, fabs((double)a[i] - b[i]));
	return w;
}

/* one prompt's MTP rows in chunks of q (0: one prefill); rank 0 checks them */
static void check_prompt(struct model *m, const struct comm *c, json_t *pr, int q)
{
	struct err e = {{0}};
	json_t *jt = json_object_get(pr, "tokens");
	int n = (int)json_array_size(jt), V = model_config(m)->vocab_size;
	const char *name = json_string_value(json_object_get(pr, "name"));
	if (n < 2)
		return;
	int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
	float *out = malloc(sizeof(float) * (size_t)n * (size_t)V);
	CHECK(tok && out);
	for (int i = 0; i < n; i++)
		tok[i] = (int32_t)json_integer_value(json_array_get(jt, (size_t)i));
	struct fwd_seq sq;
	CHECK(fwd_seq_init_layers(&sq, model_config(m), model_kv_layers(m), n, DT_F32, &e) == 0);
	int step = q ? q : n, rc = 0, done = 0;
	for (int s = 0; s < n && rc >= 0; s += step) {
		rc = fwd_mtp_chunk(m, &sq, attn_backend_by_name("REFERENCE_MLA"), tok, n, s,
				   s + step <= n ? step : n - s, out + (size_t)s * (size_t)V, &e);
		done += rc > 0 ? rc : 0;
	}
	EXPECTF(rc >= 0 && done == n - 1, "%s chunk %d: %s", name, q, e.msg);
	if (c->tp_rank == 0 && rc >= 0) {
		char rel[128];
		snprintf(rel, sizeof rel, "tiny-v4/golden/%s",
			 json_string_value(json_object_get(pr, "mtp_logits_file")));
		float *gold = fwd_read_f32(fixture_path(rel), (size_t)(n - 1) * (size_t)V);
		CHECK(gold);
		/* rows >= 1e-3 grouped into spans of 32 rows from their first (two sliding windows: the
		 * main layers' kv, then the MTP block's own) */
		double d = 0, span = 0;
		int windows = 0, w0 = -1000;
		for (int r = 0; r < n - 1; r++) {
			double dr = max_diff(out + (size_t)r * (size_t)V, gold + (size_t)r * (size_t)V, (size_t)V);
			d = fmax(d, dr);
			if (dr >= TOL && r - w0 >= 32) {
				if (windows++)
					printf("# rows from %d: max |diff| %.3g\n", w0, span);
				w0 = r;
				span = 0;
			}
			span = dr >= TOL ? fmax(span, dr) : span;
		}
		if (windows)
			printf("# rows from %d: max |diff| %.3g\n", w0, span);
		printf("# -tp %d MTP %s, %s: max |diff| %.3g over %d rows (%d spans >= 1e-3)\n", TP, name,
		       q ? "chunks of 5" : "one prefill", d, n - 1, windows);
		/* test_model_v4's allowance (the oracle's own window on len300, from row 114), and one
		 * more span where the all-reduce's summation order flips a main layer's kv fp8
		 * rounding (rows 177-192 of the hidden states the MTP module reads) */
		bool fragile = n >= 300 && windows <= 2 && d < 0.02;
		EXPECTF(d < TOL || fragile, "-tp %d MTP %s chunk %d: max |diff| %g", TP, name, q, d);
		free(gold);
	}
	fwd_seq_fini(&sq);
	free(tok), free(out);
}

static void test_tp_mtp(void)
{
	if (!comm_under_launcher()) {
		printf("# skipped: run under mpirun -np %d (tests/e2e/dist_model.sh)\n", TP);
		return;
	}
	struct err e = {{0}};
	struct comm c;
	struct pool *pl = NULL;
	if (comm_init(&c, TP, 1, &e)) {
		EXPECTF(0, "comm_init: %s", e.msg);
		return;
	}
	CHECK(pool_new(1, &pl, &e) == 0);
	struct model_options o = {.act_dtype = DT_F32,
				  .max_batch_tokens = 320,
				  .max_seqs = 2,
				  .max_model_len = 320,
				  .pool = pl,
				  .comm = &c,
				  .load_mtp = true};
	struct model *m = NULL;
	EXPECTF(model_load(fixture_path("tiny-v4"), &o, &m, &e) == 0, "rank %d: %s", c.tp_rank, e.msg);
	if (m) {
		json_t *j = json_load_file(fixture_path("tiny-v4/golden/prompts.json"), 0, NULL);
		CHECK(j);
		size_t i;
		json_t *pr;
		for (int q = 0; q <= 5; q += 5)
			json_array_foreach(json_object_get(j, "prompts"), i, pr) check_prompt(m, &c, pr, q);
		json_decref(j);
		model_free(m);
	}
	pool_free(pl);
	comm_fini(&c);
}

TESTS(T(test_tp_mtp))
