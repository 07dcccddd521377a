/* model_v4/v4_indexer against scripts/v4_reference.py's Model.idx_query and idx_select
 * (v4-units/indexer.json: 4 heads x 16, index_topk 4, 9 and 2 visible entries), and the
 * selection against a brute-force sort on random scores with ties. */
#include <string.h>

#include "harness.h"
#include "model_v4/v4_indexer.h"
#include "unit/v4_vec.h"

/* keys given as a pointer array */
static const float *ptr_key(void *ctx, long e, float *buf) { return ((const float *const *)ctx)[e]; }

static void test_vs_reference(void)
{
	json_t *j = v4v_load("indexer.json");
	struct v4_config cfg;
	struct v4_rope r;
	struct err e = {{0}};
	CHECK(v4_config_load(fixture_path("tiny-v4"), &cfg, &e) == 0);
	cfg.qk_rope_head_dim = v4v_int(j, "rope_dim");
	CHECK(v4_rope_init_layer(&r, &cfg, 4, &e) == 0);
	int H = v4v_int(j, "n_heads"), di = v4v_int(j, "head_dim"), K = v4v_int(j, "topk");
	float *keys = v4v_f32(j, "keys");
	size_t i;
	json_t *c;
	json_array_foreach(v4v_get(j, "cases"), i, c)
	{
		float *q = v4v_f32(c, "q_in"), *w = v4v_f32(c, "w_in");
		double *wq = v4v_f64(c, "q");
		long long *wsel = v4v_i64(c, "sel");
		v4_index_query(&r, H, di, v4v_int(c, "pos"), 1, q);
		int bad = v4v_mismatches(q, wq, H * di);
		printf("# indexer q (rope, Hadamard, fp4) vs reference at %d: %d of %d codes differ, max abs %.3g\n",
		       v4v_int(c, "pos"), bad, H * di, v4v_maxdiff(q, wq, H * di));
		EXPECTF(bad == 0, "%d values differ", bad);
		v4_index_weights(H, di, w);
		int32_t sel[16];
		const float *kp[64];
		int vis = v4v_int(c, "visible");
		CHECK(vis <= 64);
		for (int k = 0; k < vis; k++)
			kp[k] = keys + (size_t)k * (size_t)di;
		int n = v4_index_select(H, di, q, w, ptr_key, kp, vis, K, sel);
		EXPECT_EQ_INT(n, v4v_len(c, "sel"));
		for (int a = 0; a < n; a++)
			EXPECTF(sel[a] == wsel[a], "case %zu: sel[%d] = %d, expected %lld", i, a, sel[a], wsel[a]);
		free(q), free(w), free(wq), free(wsel);
	}
	free(keys);
	json_decref(j);
}

/* sort key for the brute force: score desc, entry asc */
static const double *g_sc;
static int by_rank(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	if (g_sc[x] != g_sc[y])
		return g_sc[x] < g_sc[y] ? 1 : -1;
	return x - y;
}

static void test_selection(void)
{
	/* one head of dim 1 with q = 1, w = 1: score = relu(key), so scores are set directly;
	 * negative keys all score 0 (ties) */
	uint64_t s = 9;
	enum { N = 300 };
	float keys[N], q = 1, w = 1;
	const float *kp[N];
	for (int e = 0; e < N; e++)
		kp[e] = &keys[e];
	double sc[N];
	int order[N];
	for (int trial = 0; trial < 20; trial++) {
		for (int e = 0; e < N; e++) {
			keys[e] = (float)((int)(test_frand(&s) * 20)) / 4; /* few distinct values: many ties */
			sc[e] = keys[e] > 0 ? keys[e] : 0;
			order[e] = e;
		}
		int visible = 1 + (int)(test_rand(&s) % N), k = 1 + (int)(test_rand(&s) % 64);
		g_sc = sc;
		qsort(order, (size_t)visible, sizeof *order, by_rank);
		int32_t sel[64], want[64];
		int n = v4_index_select(1, 1, &q, &w, ptr_key, kp, visible, k, sel);
		int m = k < visible ? k : visible;
		EXPECT_EQ_INT(n, m);
		for (int a = 0; a < m; a++)
			want[a] = order[a];
		for (int a = 1; a < m; a++) /* ascending */
			for (int b = a; b > 0 && want[b - 1] > want[b]; b--) {
				int32_t t = want[b];
				want[b] = want[b - 1];
				want[b - 1] = t;
			}
		EXPECTF(!memcmp(sel, want, (size_t)m * sizeof *sel), "trial %d (visible %d, k %d) differs", trial,
			visible, k);
	}
}

TESTS(T(test_vs_reference), T(test_selection))
