/* model_v4/v4_attn against scripts/v4_reference.py's Model.sparse_attn and attn_out's inverse
 * RoPE (v4-units/attn.json: 4 heads x 32 against 11 keys with sinks), the LSE, and the DCP
 * rule: partials without the sink, merged by attn/merge.h, plus the sink once, equal the
 * whole; a rank without keys merges as nothing. */
#include <string.h>

#include "attn/merge.h"
#include "harness.h"
#include "model_v4/v4_attn.h"
#include "unit/v4_vec.h"

struct acase {
	int H, hd, n;
	long pos;
	float *q, *kv, *sink;
	const float **rows;
	struct v4_rope rope;
};

static void load(json_t *j, struct acase *a)
{
	struct v4_config cfg;
	struct err e = {{0}};
	CHECK(v4_config_load(fixture_path("tiny-v4"), &cfg, &e) == 0);
	cfg.qk_rope_head_dim = v4v_int(j, "rope_dim");
	CHECK(v4_rope_init_layer(&a->rope, &cfg, v4v_int(j, "ratio"), &e) == 0);
	a->H = v4v_int(j, "n_heads"), a->hd = v4v_int(j, "head_dim"), a->pos = v4v_int(j, "pos");
	a->q = v4v_f32(j, "q"), a->kv = v4v_f32(j, "kv"), a->sink = v4v_f32(j, "sink");
	a->n = v4v_len(j, "kv") / a->hd;
	a->rows = malloc((size_t)a->n * sizeof *a->rows);
	for (int i = 0; i < a->n; i++) /* keys in reverse: the order must not matter */
		a->rows[i] = a->kv + (size_t)(a->n - 1 - i) * (size_t)a->hd;
}

static void test_vs_reference(void)
{
	json_t *j = v4v_load("attn.json");
	struct acase a;
	load(j, &a);
	double *wo = v4v_f64(j, "o"), *wl = v4v_f64(j, "lse"), *wu = v4v_f64(j, "o_unroped");
	float *o = malloc((size_t)a.H * (size_t)a.hd * sizeof *o), lse[64];
	v4_attn_one(a.H, a.hd, 1.0f / sqrtf((float)a.hd), a.q, a.rows, a.n, a.sink, o, lse);
	double d_o = v4v_maxdiff(o, wo, a.H * a.hd), d_l = v4v_maxdiff(lse, wl, a.H);
	v4_attn_unrope(&a.rope, a.H, a.hd, o, a.pos);
	double d_u = v4v_maxdiff(o, wu, a.H * a.hd);
	printf("# attn vs reference, max abs: o %.3g lse %.3g unroped %.3g\n", d_o, d_l, d_u);
	EXPECTF(d_o < 1e-6 && d_l < 1e-6 && d_u < 1e-6, "o %g lse %g unroped %g", d_o, d_l, d_u);
	free(wo), free(wl), free(wu), free(o), free(a.q), free(a.kv), free(a.sink), free(a.rows);
	json_decref(j);
}

static void test_dcp_merge(void)
{
	json_t *j = v4v_load("attn.json");
	struct acase a;
	load(j, &a);
	int H = a.H, hd = a.hd, n1 = 4;
	float scale = 1.0f / sqrtf((float)hd);
	size_t no = (size_t)H * (size_t)hd;
	float *whole = malloc(no * sizeof *whole), *p1 = malloc(no * sizeof *p1), *p2 = malloc(no * sizeof *p2);
	float *p0 = malloc(no * sizeof *p0), lw[64], l1[64], l2[64], l0[64];
	v4_attn_one(H, hd, scale, a.q, a.rows, a.n, a.sink, whole, lw);
	/* rank 1: keys [0, n1), rank 2: the rest, rank 0: none; no sink anywhere */
	v4_attn_one(H, hd, scale, a.q, a.rows, n1, NULL, p1, l1);
	v4_attn_one(H, hd, scale, a.q, a.rows + n1, a.n - n1, NULL, p2, l2);
	v4_attn_one(H, hd, scale, a.q, NULL, 0, NULL, p0, l0);
	for (int h = 0; h < H; h++)
		EXPECT(isinf(l0[h]) && l0[h] < 0 && p0[h * hd] == 0);
	attn_merge_states(1, H, hd, p1, l1, p2, l2, p1, l1);
	attn_merge_states(1, H, hd, p0, l0, p1, l1, p1, l1);
	v4_attn_add_sink(H, hd, a.sink, p1, l1);
	double d = 0, dl = 0;
	for (size_t i = 0; i < no; i++)
		d = fmax(d, fabs(p1[i] - whole[i]));
	for (int h = 0; h < H; h++)
		dl = fmax(dl, fabs(l1[h] - lw[h]));
	printf("# attn DCP (3 ranks, sink added once after the merge) vs whole: o %.3g lse %.3g\n", d, dl);
	EXPECTF(d < 1e-6 && dl < 1e-6, "o %g lse %g", d, dl);
	/* the sink on one rank and a plain merge: the same */
	v4_attn_one(H, hd, scale, a.q, a.rows, n1, a.sink, p1, l1);
	v4_attn_one(H, hd, scale, a.q, a.rows + n1, a.n - n1, NULL, p2, l2);
	attn_merge_states(1, H, hd, p1, l1, p2, l2, p1, l1);
	d = 0;
	for (size_t i = 0; i < no; i++)
		d = fmax(d, fabs(p1[i] - whole[i]));
	EXPECTF(d < 1e-6, "sink on one rank: o %g", d);
	/* only the sink: o = 0 */
	v4_attn_add_sink(H, hd, a.sink, p0, l0);
	for (int h = 0; h < H; h++)
		EXPECT(p0[h * hd] == 0 && l0[h] == a.sink[h]);
	free(whole), free(p1), free(p2), free(p0), free(a.q), free(a.kv), free(a.sink), free(a.rows);
	json_decref(j);
}

static void test_visible(void)
{
	long lo, nc;
	v4_attn_visible(4, 16, 0, &lo, &nc);
	EXPECT(lo == 0 && nc == 0);
	v4_attn_visible(4, 16, 3, &lo, &nc);
	EXPECT(lo == 0 && nc == 1); /* entry 0 is complete once token 3 is in */
	v4_attn_visible(128, 16, 300, &lo, &nc);
	EXPECT(lo == 285 && nc == 2);
	v4_attn_visible(0, 16, 300, &lo, &nc);
	EXPECT(lo == 285 && nc == 0);
}

TESTS(T(test_vs_reference), T(test_dcp_merge), T(test_visible))
