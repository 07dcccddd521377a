/* model_v4/compressor against scripts/v4_reference.py's Model.comp_prefill
 * (v4-units/compressor.json: ratio 4 main d 24 with overlapping windows, ratio 4 indexer d 16
 * with Hadamard + fp4, ratio 16 main d 24; sequences that end inside a window), and the state
 * machine: token-by-token, chunked and whole feeds give the same entries bit for bit; stored
 * entries give back their values bit for bit. */
#include <string.h>

#include "harness.h"
#include "model_v4/compressor.h"
#include "model_v4/v4_quant.h"
#include "unit/v4_vec.h"

struct ccase {
	struct v4_comp c;
	struct v4_rope rope;
	int n, w;
	float *ape, *norm, *kv, *score;
	double *want;
	int n_want;
};

static void load_case(const json_t *j, struct ccase *k)
{
	struct v4_config cfg;
	struct err e = {{0}};
	CHECK(v4_config_load(fixture_path("tiny-v4"), &cfg, &e) == 0);
	cfg.qk_rope_head_dim = v4v_int(j, "rope_dim");
	CHECK(v4_rope_init_layer(&k->rope, &cfg, 4, &e) == 0);
	k->ape = v4v_f32(j, "ape"), k->norm = v4v_f32(j, "norm");
	k->kv = v4v_f32(j, "kv"), k->score = v4v_f32(j, "score");
	k->want = v4v_f64(j, "entries");
	const char *kind = json_string_value(v4v_get(j, "kind"));
	k->c = (struct v4_comp){v4v_int(j, "ratio"),
				v4v_int(j, "d"),
				(float)v4v_num(j, "eps"),
				!strcmp(kind, "index") ? V4_COMP_INDEX : V4_COMP_KV,
				k->ape,
				k->norm,
				&k->rope};
	k->n = v4v_int(j, "n");
	k->w = v4_comp_width(&k->c);
	k->n_want = v4v_len(j, "entries") / k->c.d;
}

static void free_case(struct ccase *k) { free(k->ape), free(k->norm), free(k->kv), free(k->score), free(k->want); }

/* Feeds the case in chunks of `chunk` tokens (0: all at once); returns the entries. */
static float *feed(struct ccase *k, int chunk, int *count)
{
	float *st = malloc(v4_comp_state_floats(&k->c) * sizeof *st);
	float *out = malloc((size_t)(k->n + 1) * (size_t)k->c.d * sizeof *out);
	v4_comp_state_init(&k->c, st);
	int got = 0;
	for (int t = 0; t < k->n;) {
		int m = chunk ? chunk : k->n;
		m = m < k->n - t ? m : k->n - t;
		int c = v4_comp_feed(&k->c, st, t, m, k->kv + (size_t)t * (size_t)k->w,
				     k->score + (size_t)t * (size_t)k->w, out + (size_t)got * (size_t)k->c.d);
		EXPECT_EQ_INT(c, v4_comp_count(k->c.ratio, t, m));
		got += c;
		t += m;
	}
	free(st);
	*count = got;
	return out;
}

static void test_vs_reference(void)
{
	json_t *j = v4v_load("compressor.json");
	size_t i;
	json_t *cj;
	json_array_foreach(v4v_get(j, "cases"), i, cj)
	{
		struct ccase k;
		load_case(cj, &k);
		int count;
		float *whole = feed(&k, 0, &count);
		EXPECT_EQ_INT(count, k.n_want);
		double d = v4v_maxdiff(whole, k.want, count * k.c.d);
		printf("# compressor ratio %d d %d %s: %d entries, max abs vs reference %.3g\n", k.c.ratio, k.c.d,
		       k.c.kind == V4_COMP_INDEX ? "indexer" : "kv", count, d);
		EXPECTF(d < 2e-6, "case %zu: max abs %g", i, d);
		/* every split of the sequence: the same bits */
		for (int chunk = 1; chunk <= 7; chunk++) {
			int c2;
			float *part = feed(&k, chunk, &c2);
			EXPECT_EQ_INT(c2, count);
			EXPECTF(!memcmp(part, whole, (size_t)count * (size_t)k.c.d * sizeof *part),
				"case %zu: chunks of %d differ from one feed", i, chunk);
			free(part);
		}
		free(whole);
		free_case(&k);
	}
	json_decref(j);
}

static void test_state_size(void)
{
	struct v4_rope r = {.dim = 64};
	struct v4_comp csa = {4, 512, 1e-6f, V4_COMP_KV, NULL, NULL, &r},
		       hca = {128, 512, 1e-6f, V4_COMP_KV, NULL, NULL, &r};
	EXPECT_EQ_INT(v4_comp_state_floats(&csa), 3 * 1024 + 3 * 512);
	EXPECT_EQ_INT(v4_comp_state_floats(&hca), 3 * 512); /* independent of the ratio */
	EXPECT_EQ_INT(v4_comp_count(4, 0, 3), 0);
	EXPECT_EQ_INT(v4_comp_count(4, 3, 1), 1);
	EXPECT_EQ_INT(v4_comp_count(4, 2, 7), 2);
}

/* Stored entries (v4_comp_store / load, model_v4/v4_pack.h) give back every bit of the round
 * trips they hold: main entries (d 512 and 96, RoPE 64 and 32) and indexer keys (d 128 and 64)
 * of magnitudes from 1e-9 to 1e4, zeros and negative zeros among them; and take the floats
 * of their formats */
static void test_stored_entries(void)
{
	struct v4_rope r64 = {.dim = 64}, r32 = {.dim = 32};
	struct v4_comp kinds[4] = {{4, 512, 1e-6f, V4_COMP_KV, NULL, NULL, &r64},
				   {16, 96, 1e-6f, V4_COMP_KV, NULL, NULL, &r32},
				   {4, 128, 1e-6f, V4_COMP_INDEX, NULL, NULL, &r64},
				   {4, 64, 1e-6f, V4_COMP_INDEX, NULL, NULL, &r32}};
	EXPECT_EQ_INT(v4_comp_entry_floats(&kinds[0]), 64 + (448 + 7 + 3) / 4);
	EXPECT_EQ_INT(v4_comp_entry_floats(&kinds[2]), (64 + 4) / 4);
	uint64_t rs = 5;
	int bad = 0, n = 0;
	for (int trial = 0; trial < 400; trial++) {
		const struct v4_comp *c = &kinds[trial % 4];
		float x[512], back[512], st[512];
		double mag = pow(10.0, -9 + (trial % 14));
		for (int i = 0; i < c->d; i++) {
			x[i] = (float)(test_frand(&rs) * mag);
			if (i % 37 == 5)
				x[i] = trial % 2 ? -0.0f : 0.0f;
		}
		if (c->kind == V4_COMP_KV)
			v4_fp8_sim(x, c->d - c->rope->dim, 64);
		else
			v4_fp4_sim(x, c->d, 32);
		v4_comp_store(c, x, st);
		v4_comp_load(c, st, back);
		for (int i = 0; i < c->d; i++, n++)
			bad += memcmp(&x[i], &back[i], sizeof(float)) != 0;
	}
	printf("# stored entries: %d of %d values not given back bit for bit\n", bad, n);
	EXPECT_EQ_INT(bad, 0);
}

TESTS(T(test_vs_reference), T(test_state_size), T(test_stored_entries))
