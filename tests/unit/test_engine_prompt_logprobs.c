/* prompt_logprobs through the engine against the golden logits of tiny-v3 (an independent
 * oracle, float32): every prompt token's logprob, rank and top-N equal the log-softmax of
 * the golden row before it, for prompts run in one chunk and in several (the 256-token cap
 * per step), with the prompt already in the prefix cache (a prompt_logprobs request computes
 * every row anyway), next to other requests, with n = 2 (computed once), and the array is
 * complete when the first token arrives. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "base/log.h"
#include "engine/engine.h"
#include "harness.h"
#include "model/model.h"
#include "ops/pool.h"

static struct pool *g_pool;
static struct model *g_model;

struct golden {
	int n, vocab;
	int32_t ids[300];
	float *logits; /* [n, vocab] */
};

static int load_golden(const char *name, struct golden *g)
{
	json_error_t je;
	json_t *root = json_load_file(fixture_path("tiny-v3/golden/prompts.json"), 0, &je);
	if (!root)
		return -1;
	g->vocab = (int)json_integer_value(json_object_get(root, "vocab_size"));
	json_t *arr = json_object_get(root, "prompts");
	int rc = -1;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		json_t *p = json_array_get(arr, i);
		if (strcmp(json_string_value(json_object_get(p, "name")), name))
			continue;
		json_t *toks = json_object_get(p, "tokens");
		g->n = (int)json_array_size(toks);
		for (int j = 0; j < g->n && j < 300; j++)
			g->ids[j] = (int32_t)json_integer_value(json_array_get(toks, (size_t)j));
		char rel[128];
		snprintf(rel, sizeof rel, "tiny-v3/golden/%s", json_string_value(json_object_get(p, "logits_file")));
		FILE *f = fopen(fixture_path(rel), "rb");
		size_t cnt = (size_t)g->n * (size_t)g->vocab;
		g->logits = malloc(sizeof *g->logits * cnt);
		if (f && g->logits && fread(g->logits, sizeof(float), cnt, f) == cnt)
			rc = 0;
		if (f)
			fclose(f);
	}
	json_decref(root);
	return rc;
}

static struct engine *new_engine(int budget)
{
	struct engine_options o;
	engine_options_init(&o);
	o.model = g_model;
	o.kv_dtype = DT_F32;
	o.block_size = 16;
	o.max_num_seqs = 8;
	o.max_num_batched_tokens = budget;
	o.max_model_len = 400;
	o.n_eos_ids = 1;
	o.eos_ids[0] = 1;
	struct engine *eng = NULL;
	struct err e;
	if (engine_new(&o, &eng, &e) < 0)
		harness_fail(__FILE__, __LINE__, "engine_new: %s", e.msg);
	return eng;
}

/* lp[1..n) against the log-softmax of the golden rows before each position. */
static void verify(const struct engine_logprob *lp, const struct golden *g, int top, const char *what)
{
	double worst = 0;
	for (int i = 1; lp && i < g->n; i++) {
		const float *row = g->logits + (size_t)(i - 1) * (size_t)g->vocab;
		double mx = row[0], z = 0;
		for (int v = 1; v < g->vocab; v++)
			mx = row[v] > mx ? row[v] : mx;
		for (int v = 0; v < g->vocab; v++)
			z += exp(row[v] - mx);
		double lse = mx + log(z);
		const struct engine_logprob *x = &lp[i];
		EXPECTF(x->token == g->ids[i], "%s: position %d token %d, prompt %d", what, i, x->token, g->ids[i]);
		double d = fabs(x->logprob - (row[g->ids[i]] - lse));
		worst = d > worst ? d : worst;
		int rank = 1;
		for (int v = 0; v < g->vocab; v++)
			rank += row[v] > row[g->ids[i]];
		EXPECTF(abs(x->rank - rank) <= 1, "%s: position %d rank %d, golden %d", what, i, x->rank, rank);
		EXPECT_EQ_INT(x->n_top, top);
		for (int k = 0; k < x->n_top; k++) {
			double want = row[x->top_ids[k]] - lse;
			EXPECTF(fabs(x->top_logprobs[k] - want) < 1e-3, "%s: position %d top %d", what, i, k);
			if (k > 0)
				EXPECT(x->top_logprobs[k] <= x->top_logprobs[k - 1]);
		}
	}
	EXPECTF(worst < 1e-3, "%s: logprobs off the golden by up to %g", what, worst);
}

/* Runs g's prompt with prompt_logprobs = top (n choices, next to a plain request) and checks
 * every position against the golden log-softmax. */
static void check(struct engine *eng, const struct golden *g, int top, int n, const char *what)
{
	struct err e;
	struct sampling_params p, q;
	sampling_params_init(&p, NULL);
	p.temperature = 0;
	p.max_tokens = 2;
	p.ignore_eos = true;
	p.prompt_logprobs = top;
	p.n = n;
	q = p;
	q.prompt_logprobs = -1;
	q.n = 1;
	struct engine_req *h, *other;
	EXPECT(engine_submit(eng, g->ids, 7, &q, &other, &e) == 0);
	EXPECT(engine_submit(eng, g->ids, g->n, &p, &h, &e) == 0);
	int n_lp = -1;
	const struct engine_logprob *lp = NULL;
	struct engine_event ev;
	int events = 0;
	while (engine_next_event(h, &ev, 60000) == ENGINE_EV_OK) {
		if (events++ == 0)
			lp = engine_prompt_logprobs(h, &n_lp); /* complete by the first token */
	}
	EXPECTF(lp != NULL && n_lp == g->n, "%s: prompt logprobs %p, %d of %d", what, (void *)lp, n_lp, g->n);
	int oj_n;
	EXPECT(engine_prompt_logprobs(other, &oj_n) == NULL);
	while (engine_next_event(other, &ev, 60000) == ENGINE_EV_OK)
		;
	engine_release(other);
	verify(lp, g, top, what);
	engine_release(h);
}

static void test_prompt_logprobs_golden(void)
{
	log_level = LOG_WARN;
	struct err e;
	if (pool_new(2, &g_pool, &e) < 0)
		return;
	struct model_options mo = {
		.act_dtype = DT_F32, .max_batch_tokens = 1024, .max_seqs = 16, .max_model_len = 512, .pool = g_pool};
	if (model_load(fixture_path("tiny-v3"), &mo, &g_model, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "model_load: %s", e.msg);
		return;
	}
	static const char *const names[] = {"len5", "len64", "len300"};
	for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
		struct golden g = {0};
		if (load_golden(names[k], &g) < 0) {
			harness_fail(__FILE__, __LINE__, "golden %s", names[k]);
			free(g.logits);
			continue;
		}
		for (int b = 0; b < attn_backend_count(); b++) {
			if (attn_backend_kind(attn_backend_at(b)) != ATTN_KIND_MLA) /* a dense model */
				continue;
			struct engine *eng = new_engine(512);
			if (!eng)
				break;
			char what[96];
			snprintf(what, sizeof what, "%s, %s", names[k], attn_backend_at(b)->name);
			check(eng, &g, 3, 1, what);
			/* again: the prompt's blocks are cached now, and it is computed anyway */
			snprintf(what, sizeof what, "%s, %s, cached prompt, n = 2", names[k],
				 attn_backend_at(b)->name);
			check(eng, &g, 0, 2, what);
			engine_free(eng);
		}
		/* a budget of 40 tokens: the prompt runs in chunks */
		struct engine *eng = new_engine(40);
		if (eng) {
			check(eng, &g, 5, 1, "budget 40");
			engine_free(eng);
		}
		free(g.logits);
	}
}

/* Three long prompt_logprobs requests at once share the per-step chunk budget; each gets
 * its own prompt's logprobs. */
static void test_concurrent(void)
{
	if (!g_model)
		return;
	struct golden g = {0};
	if (load_golden("len300", &g) < 0) {
		harness_fail(__FILE__, __LINE__, "golden len300");
		free(g.logits);
		return;
	}
	struct engine *eng = new_engine(512);
	struct err e;
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.max_tokens = 3;
	p.prompt_logprobs = 2;
	struct engine_req *h[3];
	for (int k = 0; eng && k < 3; k++)
		EXPECT(engine_submit(eng, g.ids, g.n, &p, &h[k], &e) == 0);
	for (int k = 0; eng && k < 3; k++) {
		struct engine_event ev;
		while (engine_next_event(h[k], &ev, 60000) == ENGINE_EV_OK)
			;
		int n;
		const struct engine_logprob *lp = engine_prompt_logprobs(h[k], &n);
		EXPECT(lp && n == g.n);
		if (lp)
			verify(lp, &g, 2, "concurrent");
		engine_release(h[k]);
	}
	engine_free(eng);
	free(g.logits);
}

static void test_one_token_prompt(void)
{
	if (!g_model)
		return;
	struct engine *eng = new_engine(64);
	if (!eng)
		return;
	struct err e;
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.max_tokens = 1;
	p.prompt_logprobs = 1;
	int32_t one = 0;
	struct engine_req *h;
	EXPECT(engine_submit(eng, &one, 1, &p, &h, &e) == 0);
	struct engine_event ev;
	while (engine_next_event(h, &ev, 60000) == ENGINE_EV_OK)
		;
	int n;
	EXPECT(engine_prompt_logprobs(h, &n) != NULL && n == 1);
	engine_release(h);
	p.prompt_logprobs = 21;
	EXPECT(engine_submit(eng, &one, 1, &p, &h, &e) == ENGINE_EINVAL);
	EXPECT(strstr(e.msg, "prompt_logprobs") != NULL);
	engine_free(eng);
}

static void test_teardown(void)
{
	model_free(g_model);
	pool_free(g_pool);
	g_model = NULL;
	g_pool = NULL;
}

TESTS(T(test_prompt_logprobs_golden), T(test_concurrent), T(test_one_token_prompt), T(test_teardown))
