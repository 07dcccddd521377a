/* allowed_token_ids and bad_words through the engine (tiny-v3, float32): only allowed tokens
 * are sampled, greedy and seeded; a one-token bad word never appears; a longer one bans its
 * last token only right after the rest of it; bad words never ban the last allowed token;
 * the lists are copied at submit (the caller's buffers may go away); bad ids are refused. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/engine.h"
#include "harness.h"
#include "model/model.h"
#include "ops/pool.h"

static struct pool *g_pool;
static struct model *g_model;
static struct engine *g_eng;
static const int32_t PROMPT[] = {0, 17, 301, 5, 44, 9};

static int run(const struct sampling_params *p, int32_t *out, int cap)
{
	struct err e;
	struct engine_req *h;
	if (engine_submit(g_eng, PROMPT, (int)(sizeof PROMPT / sizeof *PROMPT), p, &h, &e) != 0) {
		harness_fail(__FILE__, __LINE__, "submit: %s", e.msg);
		return 0;
	}
	int n = 0;
	struct engine_event ev;
	while (engine_next_event(h, &ev, 60000) == ENGINE_EV_OK)
		for (int t = 0; t < ev.n_tokens && n < cap; t++)
			out[n++] = ev.token_ids[t];
	engine_release(h);
	return n;
}

static void params(struct sampling_params *p, float temperature)
{
	sampling_params_init(p, NULL);
	p->temperature = temperature;
	p->has_seed = true;
	p->seed = 11;
	p->max_tokens = 12;
	p->ignore_eos = true;
}

static void test_setup(void)
{
	log_level = LOG_WARN;
	struct err e;
	struct model_options mo = {
		.act_dtype = DT_F32, .max_batch_tokens = 256, .max_seqs = 8, .max_model_len = 256, .pool = NULL};
	if (pool_new(2, &g_pool, &e) < 0)
		return;
	mo.pool = g_pool;
	if (model_load(fixture_path("tiny-v3"), &mo, &g_model, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "model_load: %s", e.msg);
		return;
	}
	struct engine_options o;
	engine_options_init(&o);
	o.model = g_model;
	o.kv_dtype = DT_F32;
	o.max_num_seqs = 4;
	o.max_num_batched_tokens = 128;
	o.max_model_len = 128;
	if (engine_new(&o, &g_eng, &e) < 0)
		harness_fail(__FILE__, __LINE__, "engine_new: %s", e.msg);
}

static void test_allowed_token_ids(void)
{
	if (!g_eng)
		return;
	for (int greedy = 0; greedy < 2; greedy++) {
		struct sampling_params p;
		params(&p, greedy ? 0.0f : 1.0f);
		int32_t *ids = malloc(3 * sizeof *ids);
		ids[0] = 500, ids[1] = 600, ids[2] = 700;
		p.allowed_ids = ids;
		p.n_allowed = 3;
		int32_t out[16];
		struct err e;
		struct engine_req *h;
		EXPECT(engine_submit(g_eng, PROMPT, 6, &p, &h, &e) == 0);
		memset(ids, 0, 3 * sizeof *ids); /* the engine took its own copy */
		free(ids);
		int n = 0;
		struct engine_event ev;
		while (engine_next_event(h, &ev, 60000) == ENGINE_EV_OK)
			for (int t = 0; t < ev.n_tokens; t++)
				out[n++] = ev.token_ids[t];
		engine_release(h);
		EXPECT_EQ_INT(n, 12);
		for (int i = 0; i < n; i++)
			EXPECTF(out[i] == 500 || out[i] == 600 || out[i] == 700, "token %d: %d", i, out[i]);
	}
	struct sampling_params p;
	params(&p, 0);
	int32_t bad = 1024;
	p.allowed_ids = &bad;
	p.n_allowed = 1;
	struct engine_req *h;
	struct err e;
	EXPECT(engine_submit(g_eng, PROMPT, 6, &p, &h, &e) == ENGINE_EINVAL);
	EXPECT(strstr(e.msg, "allowed_token_ids") != NULL);
}

static void test_bad_words(void)
{
	if (!g_eng)
		return;
	struct sampling_params p;
	params(&p, 0);
	int32_t base[16], out[16];
	EXPECT_EQ_INT(run(&p, base, 16), 12);
	/* one token: gone from the whole output, which agrees up to it */
	int32_t w1[1] = {base[2]}, l1[1] = {1};
	p.bad_words = w1, p.bad_lens = l1, p.n_bad = 1;
	EXPECT_EQ_INT(run(&p, out, 16), 12);
	EXPECT(out[0] == base[0] && out[1] == base[1]);
	for (int i = 0; i < 12; i++)
		EXPECT(out[i] != base[2]);
	/* two tokens: the second is banned right after the first only */
	int32_t w2[2] = {base[1], base[2]}, l2[1] = {2};
	p.bad_words = w2, p.bad_lens = l2;
	EXPECT_EQ_INT(run(&p, out, 16), 12);
	EXPECT(out[0] == base[0] && out[1] == base[1] && out[2] != base[2]);
	int32_t w3[2] = {base[1] == 7 ? 8 : 7, base[2]};
	p.bad_words = w3;
	EXPECT_EQ_INT(run(&p, out, 16), 12);
	EXPECT(!memcmp(out, base, sizeof *out * 12));
	/* the last allowed token is never banned */
	int32_t only = 600;
	p.allowed_ids = &only, p.n_allowed = 1;
	p.bad_words = &only, p.bad_lens = l1;
	EXPECT_EQ_INT(run(&p, out, 16), 12);
	for (int i = 0; i < 12; i++)
		EXPECT_EQ_INT(out[i], 600);
	int32_t oov = 5000;
	p.n_allowed = 0;
	p.bad_words = &oov;
	struct engine_req *h;
	struct err e;
	EXPECT(engine_submit(g_eng, PROMPT, 6, &p, &h, &e) == ENGINE_EINVAL);
	EXPECT(strstr(e.msg, "bad_words") != NULL);
}

static void test_teardown(void)
{
	engine_free(g_eng);
	model_free(g_model);
	pool_free(g_pool);
}

TESTS(T(test_setup), T(test_allowed_token_ids), T(test_bad_words), T(test_teardown))
