/* End-to-end engine invariance on the tiny fixtures (float32): greedy outputs of 16 prompts
 * of mixed lengths run together equal each prompt run alone, for every registered backend,
 * with prefix caching on and off, token budgets 1, 7, 64 and unlimited, and a KV pool small
 * enough to force preemption; the lone runs equal golden/greedy.json up to the first
 * near-tie. Plus stop strings, seeds, cancellation and the queue bound. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/attn.h"
#include "attn/kv_cache.h"
#include "base/log.h"
#include "engine/engine.h"
#include "engine/plan.h"
#include "harness.h"
#include "model/model.h"
#include "ops/pool.h"
#include "tok/tokenizer.h"

#define N_PROMPTS 16
#define N_NEW 8
#define MAX_PROMPT 320

static struct pool *g_pool;
static struct model *g_model;

struct prompt {
	int32_t ids[MAX_PROMPT];
	int n;
};
static struct prompt g_prompts[N_PROMPTS];

/* reference: each prompt alone */
static int32_t g_ref[N_PROMPTS][N_NEW];
static float g_ref_margin[N_PROMPTS][N_NEW]; /* top-1 minus top-2 logit of the lone run */

static int load_model(const char *name)
{
	struct err e;
	if (!g_pool && pool_new(2, &g_pool, &e) < 0)
		return -1;
	model_free(g_model);
	g_model = NULL;
	struct model_options mo = {
		.act_dtype = DT_F32, .max_batch_tokens = 1024, .max_seqs = 32, .max_model_len = 512, .pool = g_pool};
	if (model_load(fixture_path(name), &mo, &g_model, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "model_load: %s", e.msg);
		return -1;
	}
	return 0;
}

/* 16 prompts: the golden ones (1, 5, 17, 64, 300 tokens) and deterministic others; two
 * pairs share long prefixes so prefix caching has something to hit. */
static void make_prompts(void)
{
	json_error_t je;
	json_t *root = json_load_file(fixture_path("tiny-v3/golden/prompts.json"), 0, &je);
	EXPECT(root != NULL);
	json_t *arr = json_object_get(root, "prompts");
	int k = 0;
	for (size_t i = 0; i < json_array_size(arr) && k < 5; i++, k++) {
		json_t *toks = json_object_get(json_array_get(arr, i), "tokens");
		g_prompts[k].n = (int)json_array_size(toks);
		for (int j = 0; j < g_prompts[k].n; j++)
			g_prompts[k].ids[j] = (int32_t)json_integer_value(json_array_get(toks, j));
	}
	json_decref(root);
	unsigned s = 7;
	static const int lens[] = {2, 3, 9, 16, 33, 48, 12, 100, 40, 70, 25};
	for (int i = 0; k < N_PROMPTS; i++, k++) {
		g_prompts[k].n = lens[i];
		g_prompts[k].ids[0] = 0;
		for (int j = 1; j < lens[i]; j++) {
			s = s * 1103515245u + 12345u;
			g_prompts[k].ids[j] = 2 + (int32_t)((s >> 8) % 1000);
		}
	}
	/* prompt 13 starts with prompt 3's 17 tokens; prompt 14 with prompt 12's 100 */
	memcpy(g_prompts[13].ids, g_prompts[2].ids, 17 * sizeof(int32_t));
	memcpy(g_prompts[14].ids, g_prompts[12].ids, 60 * sizeof(int32_t));
}

struct run_cfg {
	const struct attn_backend *backend;
	bool prefix_caching;
	int budget;
	size_t kv_bytes; /* 0 = plenty */
	int block_size;
};

static int run_engine(const struct run_cfg *rc, const int *which, int n_which, int32_t out[][N_NEW],
		      float margins[][N_NEW], struct engine_stats *st_out)
{
	struct engine_options o;
	engine_options_init(&o);
	o.model = g_model;
	o.backend = rc->backend;
	o.block_size = rc->block_size ? rc->block_size : 16;
	o.kv_cache_memory = rc->kv_bytes;
	o.kv_dtype = DT_F32;
	o.enable_prefix_caching = rc->prefix_caching;
	o.max_num_seqs = 32;
	o.max_num_batched_tokens = rc->budget;
	o.max_model_len = 400;
	o.n_eos_ids = 1;
	o.eos_ids[0] = 1;
	struct engine *eng;
	struct err e;
	if (engine_new(&o, &eng, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "engine_new: %s", e.msg);
		return -1;
	}
	struct engine_req *h[N_PROMPTS];
	for (int i = 0; i < n_which; i++) {
		struct sampling_params p;
		sampling_params_init(&p, NULL);
		p.temperature = 0;
		p.max_tokens = N_NEW;
		p.ignore_eos = true;
		p.logprobs = 2;
		const struct prompt *pr = &g_prompts[which[i]];
		EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &h[i], &e) == 0);
	}
	int rc_ = 0;
	for (int i = 0; i < n_which; i++) {
		int got = 0;
		struct engine_event ev;
		enum engine_finish fin = ENGINE_FINISH_NONE;
		while (engine_next_event(h[i], &ev, 60000) == ENGINE_EV_OK) {
			for (int t = 0; t < ev.n_tokens && got < N_NEW; t++, got++) {
				out[i][got] = ev.token_ids[t];
				if (margins)
					margins[i][got] = ev.logprobs[t].top_logprobs[0] -
							  ev.logprobs[t].top_logprobs[1];
			}
			if (ev.finish)
				fin = ev.finish;
		}
		EXPECT_EQ_INT(got, N_NEW);
		EXPECT_EQ_INT(fin, ENGINE_FINISH_LENGTH);
		if (got != N_NEW)
			rc_ = -1;
		engine_release(h[i]);
	}
	/* every block is free again once everything finished (stats follow the last step) */
	struct engine_stats st;
	for (int tries = 0; tries < 200; tries++) {
		engine_stats_get(eng, &st);
		if (st.n_running == 0 && st.kv_usage == 0)
			break;
		usleep(5000);
	}
	EXPECT_EQ_INT(st.n_running, 0);
	EXPECT(st.kv_usage == 0);
	if (st_out)
		*st_out = st;
	engine_free(eng);
	return rc_;
}

static void test_alone_matches_golden(void)
{
	log_level = LOG_WARN; /* one INFO block per engine otherwise */
	if (load_model("tiny-v3") < 0)
		return;
	make_prompts();
	struct run_cfg rc = {.backend = attn_backend_at(0), .prefix_caching = false, .budget = 512};
	for (int i = 0; i < N_PROMPTS; i++) {
		int one[1] = {i};
		int32_t out[1][N_NEW];
		float m[1][N_NEW];
		if (run_engine(&rc, one, 1, out, m, NULL) < 0)
			return;
		memcpy(g_ref[i], out[0], sizeof out[0]);
		memcpy(g_ref_margin[i], m[0], sizeof m[0]);
	}
	/* the golden continuations of the first five (up to the first near-tie) */
	json_error_t je;
	json_t *root = json_load_file(fixture_path("tiny-v3/golden/greedy.json"), 0, &je);
	EXPECT(root != NULL);
	json_t *res = json_object_get(root, "results");
	for (int i = 0; i < 5; i++) {
		json_t *r = json_array_get(res, (size_t)i);
		json_t *toks = json_object_get(r, "tokens"), *mg = json_object_get(r, "margins");
		for (int t = 0; t < N_NEW; t++) {
			EXPECTF(g_ref[i][t] == (int32_t)json_integer_value(json_array_get(toks, (size_t)t)),
				"prompt %d step %d: %d vs golden %lld", i, t, g_ref[i][t],
				json_integer_value(json_array_get(toks, (size_t)t)));
			if (json_real_value(json_array_get(mg, (size_t)t)) < 1e-2)
				break;
		}
	}
	json_decref(root);
}

/* Equal to the lone run up to the first step whose lone margin is a near-tie. */
static void expect_same(const char *what, const int *which, int n, int32_t out[][N_NEW])
{
	for (int k = 0; k < n; k++) {
		int i = which[k];
		for (int t = 0; t < N_NEW; t++) {
			if (out[k][t] != g_ref[i][t]) {
				harness_fail(__FILE__, __LINE__, "%s: prompt %d (len %d) step %d: %d, alone %d", what,
					     i, g_prompts[i].n, t, out[k][t], g_ref[i][t]);
				return;
			}
			if (g_ref_margin[i][t] < 1e-3f)
				break;
		}
	}
}

static void test_batched_equals_alone(void)
{
	if (!g_model)
		return;
	int all[N_PROMPTS], most[N_PROMPTS], n_most = 0;
	for (int i = 0; i < N_PROMPTS; i++) {
		all[i] = i;
		if (g_prompts[i].n < 200)
			most[n_most++] = i; /* budget 1: one step per token, so skip the 300-token one */
	}
	static const int budgets[] = {1, 7, 64, 1024}; /* 1024: all 745 prompt tokens at once */
	for (int b = 0; b < attn_backend_count(); b++)
		for (int pc = 0; pc < 2 && attn_backend_kind(attn_backend_at(b)) == ATTN_KIND_MLA; pc++) /* dense models */
			for (size_t k = 0; k < sizeof budgets / sizeof *budgets; k++) {
				struct run_cfg rc = {
					.backend = attn_backend_at(b), .prefix_caching = pc, .budget = budgets[k]};
				int32_t out[N_PROMPTS][N_NEW];
				struct engine_stats st;
				const int *which = budgets[k] == 1 ? most : all;
				int n_which = budgets[k] == 1 ? n_most : N_PROMPTS;
				if (run_engine(&rc, which, n_which, out, NULL, &st) < 0)
					return;
				char what[128];
				snprintf(what, sizeof what, "%s prefix %s budget %d", rc.backend->name,
					 pc ? "on" : "off", budgets[k]);
				expect_same(what, which, n_which, out);
				if (pc)
					EXPECTF(st.prefix_hits > 0, "%s: no prefix hit", what);
			}
}

static void test_preemption_invariance(void)
{
	if (!g_model)
		return;
	int all[N_PROMPTS];
	for (int i = 0; i < N_PROMPTS; i++)
		all[i] = i;
	const struct model_config *c = model_config(g_model);
	size_t per_block = kv_cache_bytes_per_block(c->num_hidden_layers, 16, c->kv_lora_rank + c->qk_rope_head_dim,
						    DT_F32);
	for (int b = 0; b < attn_backend_count(); b++)
		for (int pc = 0; pc < 2 && attn_backend_kind(attn_backend_at(b)) == ATTN_KIND_MLA; pc++) { /* dense models */
			struct run_cfg rc = {.backend = attn_backend_at(b),
					     .prefix_caching = pc,
					     .budget = 64,
					     .kv_bytes = per_block * 26}; /* 416 tokens */
			int32_t out[N_PROMPTS][N_NEW];
			struct engine_stats st;
			if (run_engine(&rc, all, N_PROMPTS, out, NULL, &st) < 0)
				return;
			char what[128];
			snprintf(what, sizeof what, "%s prefix %s small pool", rc.backend->name, pc ? "on" : "off");
			expect_same(what, all, N_PROMPTS, out);
			EXPECTF(st.preemptions > 0, "%s: no preemption", what);
		}
}

/* hook: a forward in place of the model's (NULL: the model) */
static struct engine *small_engine(struct tok *t, const struct engine_forward_hook *hook)
{
	struct engine_options o;
	engine_options_init(&o);
	o.model = g_model;
	o.tok = t;
	if (hook)
		o.hook = *hook;
	o.kv_dtype = DT_F32;
	o.max_num_seqs = 8;
	o.max_num_batched_tokens = 64;
	o.max_model_len = 128;
	o.max_waiting = 4;
	o.n_eos_ids = 1;
	o.eos_ids[0] = 1;
	struct engine *eng = NULL;
	struct err e;
	if (engine_new(&o, &eng, &e) < 0)
		harness_fail(__FILE__, __LINE__, "engine_new: %s", e.msg);
	return eng;
}

static int collect(struct engine_req *h, int32_t *toks, int cap, char *text, size_t text_cap,
		   struct engine_event *last)
{
	int n = 0;
	size_t tl = 0;
	struct engine_event ev;
	text[0] = 0;
	while (engine_next_event(h, &ev, 60000) == ENGINE_EV_OK) {
		for (int t = 0; t < ev.n_tokens && n < cap; t++)
			toks[n++] = ev.token_ids[t];
		if (tl + ev.text_len < text_cap) {
			memcpy(text + tl, ev.text, ev.text_len);
			tl += ev.text_len;
			text[tl] = 0;
		}
		if (ev.finish) {
			*last = ev;
			if (ev.stop_str)
				last->stop_str = NULL; /* points into the handle */
		}
	}
	return n;
}

/* Seeded sampling gives the same tokens alone and next to other requests; n=2 choices with a
 * seed use seed and seed + 1. */
static void test_seed_and_n(void)
{
	if (!g_model)
		return;
	struct engine *eng = small_engine(NULL, NULL);
	if (!eng)
		return;
	struct err e;
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.max_tokens = 12;
	p.ignore_eos = true;
	p.has_seed = true;
	p.seed = 77;
	struct engine_req *a, *b, *c;
	const struct prompt *pr = &g_prompts[2];
	EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &a, &e) == 0);
	int32_t ta[16], tb[16];
	char text[8];
	struct engine_event last;
	EXPECT_EQ_INT(collect(a, ta, 16, text, sizeof text, &last), 12);
	engine_release(a);
	/* now next to an unseeded request */
	struct sampling_params q = p;
	q.has_seed = false;
	EXPECT(engine_submit(eng, g_prompts[1].ids, g_prompts[1].n, &q, &c, &e) == 0);
	EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &b, &e) == 0);
	EXPECT_EQ_INT(collect(b, tb, 16, text, sizeof text, &last), 12);
	EXPECT(!memcmp(ta, tb, sizeof(int32_t) * 12));
	engine_release(b);
	engine_release(c);
	/* n = 2: choice 0 equals the seed-77 run, choice 1 is seed 78 */
	p.n = 2;
	struct engine_req *h;
	EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &h, &e) == 0);
	int32_t ch[2][16];
	int cnt[2] = {0, 0}, fin = 0;
	struct engine_event ev;
	while (engine_next_event(h, &ev, 60000) == ENGINE_EV_OK) {
		for (int t = 0; t < ev.n_tokens; t++)
			ch[ev.index][cnt[ev.index]++] = ev.token_ids[t];
		fin += ev.finish != ENGINE_FINISH_NONE;
	}
	EXPECT_EQ_INT(fin, 2);
	EXPECT_EQ_INT(cnt[0], 12);
	EXPECT_EQ_INT(cnt[1], 12);
	EXPECT(!memcmp(ch[0], ta, sizeof(int32_t) * 12));
	EXPECT(memcmp(ch[1], ta, sizeof(int32_t) * 12) != 0);
	engine_release(h);
	engine_free(eng);
}

/* Stop strings truncate the text; stop token ids set stop_reason; cancel aborts. */
static void test_stop_and_cancel(void)
{
	if (!g_model)
		return;
	struct tok *t = NULL;
	struct err e;
	if (tok_load(fixture_path("tiny-v3"), &t, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "tok_load: %s", e.msg);
		return;
	}
	struct engine *eng = small_engine(t, NULL);
	if (!eng) {
		tok_free(t);
		return;
	}
	const struct prompt *pr = &g_prompts[3];
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.temperature = 0;
	p.max_tokens = 16;
	p.ignore_eos = true;
	struct engine_req *h;
	int32_t toks[32];
	char full[4096], text[4096];
	struct engine_event last;
	EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &h, &e) == 0);
	int n = collect(h, toks, 32, full, sizeof full, &last);
	engine_release(h);
	EXPECT_EQ_INT(n, 16);
	char *dec = NULL;
	size_t dl = 0;
	EXPECT(tok_decode(t, toks, 16, true, &dec, &dl, &e) == 0);
	EXPECT(dec && !strcmp(dec, full)); /* deltas concatenate to the full decode */
	/* a stop string taken from the middle of that text */
	EXPECT(dl >= 6); /* the fixture tokenizer decodes these ids to text */
	if (dl >= 6) {
		size_t at = dl / 2;
		while (at < dl && ((unsigned char)dec[at] & 0xC0) == 0x80)
			at++;
		size_t sl = 1;
		while (at + sl < dl && ((unsigned char)dec[at + sl] & 0xC0) == 0x80)
			sl++;
		char *first = memmem(dec, dl, dec + at, sl); /* earliest occurrence wins */
		size_t cut = (size_t)(first - dec);
		p.n_stop = 1;
		memcpy(p.stop[0], dec + at, sl);
		p.stop[0][sl] = 0;
		EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &h, &e) == 0);
		int n2 = collect(h, toks, 32, text, sizeof text, &last);
		engine_release(h);
		EXPECT_EQ_INT(last.finish, ENGINE_FINISH_STOP);
		EXPECT(n2 <= 16);
		EXPECT_EQ_INT(strlen(text), cut);
		EXPECT(!strncmp(text, dec, cut));
		p.include_stop_str_in_output = true;
		EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &h, &e) == 0);
		collect(h, toks, 32, text, sizeof text, &last);
		engine_release(h);
		EXPECT_EQ_INT(strlen(text), cut + sl);
		p.n_stop = 0;
		p.include_stop_str_in_output = false;
	}
	free(dec);
	/* stop_token_ids: the 3rd greedy token stops with stop_reason = that id */
	int32_t want = toks[2];
	p.n_stop_token_ids = 1;
	p.stop_token_ids[0] = want;
	EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &h, &e) == 0);
	int n3 = collect(h, toks, 32, text, sizeof text, &last);
	engine_release(h);
	EXPECT(n3 <= 3);
	EXPECT_EQ_INT(toks[n3 - 1], want);
	EXPECT_EQ_INT(last.finish, ENGINE_FINISH_STOP);
	EXPECT_EQ_INT(last.stop_token, want);
	/* the stop token's own text is not in the output (vLLM V1), unless included */
	char *d2 = NULL;
	EXPECT(tok_decode(t, toks, (size_t)(n3 - 1), true, &d2, NULL, &e) == 0);
	EXPECT(d2 && !strcmp(text, d2));
	free(d2);
	p.include_stop_str_in_output = true;
	EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &h, &e) == 0);
	n3 = collect(h, toks, 32, text, sizeof text, &last);
	engine_release(h);
	d2 = NULL;
	EXPECT(tok_decode(t, toks, (size_t)n3, true, &d2, NULL, &e) == 0);
	EXPECT(d2 && !strcmp(text, d2));
	free(d2);
	p.include_stop_str_in_output = false;
	/* min_tokens masks the stop id: the run goes on past it */
	p.min_tokens = n3;
	EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &h, &e) == 0);
	int n4 = collect(h, toks, 32, text, sizeof text, &last);
	engine_release(h);
	EXPECT(n4 > n3);
	for (int i = 0; i < n3 && i < n4; i++)
		EXPECT(toks[i] != want);
	p.min_tokens = 0;
	/* cancel: a long request ends with ABORT */
	p.n_stop_token_ids = 0;
	p.max_tokens = 100;
	EXPECT(engine_submit(eng, pr->ids, pr->n, &p, &h, &e) == 0);
	engine_cancel(h);
	collect(h, toks, 32, text, sizeof text, &last);
	EXPECT_EQ_INT(last.finish, ENGINE_FINISH_ABORT);
	engine_release(h);
	/* bad input */
	int32_t bad[2] = {0, 5000};
	EXPECT_EQ_INT(engine_submit(eng, bad, 2, &p, &h, &e), ENGINE_EINVAL);
	EXPECT(strstr(e.msg, "5000") != NULL);
	int32_t longp[128] = {0};
	EXPECT_EQ_INT(engine_submit(eng, longp, 128, &p, &h, &e), ENGINE_EINVAL);
	EXPECT(strstr(e.msg, "maximum context length is 128") != NULL);
	engine_free(eng);
	tok_free(t);
}

/* Releasing handles mid-flight and freeing the engine with requests queued is clean. */
static void test_queue_bound_and_shutdown(void)
{
	if (!g_model)
		return;
	struct engine *eng = small_engine(NULL, NULL);
	if (!eng)
		return;
	struct err e;
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.max_tokens = 100;
	p.ignore_eos = true;
	struct engine_req *h[8];
	int ok = 0, full = 0;
	for (int i = 0; i < 8; i++) {
		int rc = engine_submit(eng, g_prompts[1].ids, g_prompts[1].n, &p, &h[i], &e);
		if (rc == 0)
			ok++;
		else if (rc == ENGINE_EQUEUE_FULL)
			full++, h[i] = NULL;
		else
			h[i] = NULL;
	}
	EXPECT(ok >= 4); /* at most 4 wait; the engine may already have admitted some */
	EXPECT(ok + full == 8);
	engine_release(h[0]); /* released while running: cancelled */
	engine_free(eng);     /* the rest end with ABORT */
	for (int i = 1; i < 8; i++) {
		if (!h[i])
			continue;
		struct engine_event ev;
		enum engine_finish fin = ENGINE_FINISH_NONE;
		while (engine_next_event(h[i], &ev, 1000) == ENGINE_EV_OK)
			if (ev.finish)
				fin = ev.finish;
		EXPECT(fin == ENGINE_FINISH_ABORT || fin == ENGINE_FINISH_LENGTH);
		engine_release(h[i]);
	}
}

/* A forward that holds the engine inside its step until the test opens the gate (logits: 0). */
struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int steps;
	bool open;
	int vocab;
};

static int gate_forward(void *ctx, const struct step_plan *p, float *logits, struct err *e)
{
	struct gate *g = ctx;
	(void)e;
	pthread_mutex_lock(&g->mu);
	g->steps++;
	pthread_cond_broadcast(&g->cv);
	while (!g->open)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
	memset(logits, 0, sizeof *logits * (size_t)p->n_logits * (size_t)g->vocab);
	return 0;
}

/* /metrics' running + waiting count a request from its submission to its end: also during
 * the step that follows its leaving the inbox (the counts used to be refreshed only after
 * that step, so a long step showed its new requests nowhere and the server read as idle). */
static void test_stats_during_a_step(void)
{
	if (!g_model)
		return;
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false,
			 model_config(g_model)->vocab_size};
	struct engine *eng = small_engine(NULL, &(struct engine_forward_hook){gate_forward, &g});
	if (!eng)
		return;
	struct err e;
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.max_tokens = 2;
	p.ignore_eos = true;
	struct engine_req *h[3];
	pthread_mutex_lock(&g.mu); /* the engine cannot enter a step before all three are in */
	for (int i = 0; i < 3; i++)
		EXPECT(engine_submit(eng, g_prompts[0].ids, g_prompts[0].n, &p, &h[i], &e) == 0);
	while (g.steps == 0)
		pthread_cond_wait(&g.cv, &g.mu);
	pthread_mutex_unlock(&g.mu);
	struct engine_stats st;
	engine_stats_get(eng, &st);
	EXPECTF(st.n_running + st.n_waiting == 3, "inside the first step: %d running, %d waiting", st.n_running,
		st.n_waiting);
	pthread_mutex_lock(&g.mu);
	g.open = true;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	for (int i = 0; i < 3; i++) {
		struct engine_event ev;
		while (engine_next_event(h[i], &ev, 10000) == ENGINE_EV_OK)
			;
		engine_release(h[i]);
	}
	engine_free(eng);
}

/* --scheduling-policy priority through the engine: one request at a time, three submitted
 * while the first runs start in (priority, arrival) order; a priority without the policy is
 * refused at submit */
struct order_hook {
	struct gate g;
	int32_t seen[8];
	int n_seen;
};

static int order_forward(void *ctx, const struct step_plan *p, float *logits, struct err *e)
{
	struct order_hook *o = ctx;
	for (int k = 0; k < p->n_seqs; k++) /* a prompt's first chunk: its second token names it */
		if (p->positions[p->query_start[k]] == 0 && p->query_start[k + 1] - p->query_start[k] > 1 &&
		    o->n_seen < 8)
			o->seen[o->n_seen++] = p->tokens[p->query_start[k] + 1];
	return gate_forward(&o->g, p, logits, e);
}

static void test_priority_scheduling(void)
{
	if (!g_model)
		return;
	struct order_hook oh = {.g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false,
				      model_config(g_model)->vocab_size}};
	struct engine_options o;
	engine_options_init(&o);
	o.model = g_model;
	o.hook = (struct engine_forward_hook){order_forward, &oh};
	o.kv_dtype = DT_F32;
	o.max_num_seqs = 1;
	o.max_num_batched_tokens = 64;
	o.max_model_len = 128;
	o.priority_scheduling = true;
	struct engine *eng = NULL;
	struct err e;
	EXPECTF(engine_new(&o, &eng, &e) == 0, "%s", e.msg);
	if (!eng)
		return;
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.max_tokens = 2;
	p.ignore_eos = true;
	int prio[4] = {0, 3, -1, 1};
	struct engine_req *h[4];
	pthread_mutex_lock(&oh.g.mu);
	for (int i = 0; i < 4; i++) {
		int32_t prompt[3] = {0, 500 + i, 7};
		p.priority = prio[i];
		EXPECT(engine_submit(eng, prompt, 3, &p, &h[i], &e) == 0);
		if (i == 0) /* the first is running (held in its step) before the others arrive */
			while (oh.g.steps == 0)
				pthread_cond_wait(&oh.g.cv, &oh.g.mu);
	}
	oh.g.open = true;
	pthread_cond_broadcast(&oh.g.cv);
	pthread_mutex_unlock(&oh.g.mu);
	for (int i = 0; i < 4; i++) {
		struct engine_event ev;
		while (engine_next_event(h[i], &ev, 10000) == ENGINE_EV_OK)
			;
		engine_release(h[i]);
	}
	engine_free(eng);
	int32_t want[4] = {500, 502, 503, 501}; /* then -1, 1, 3 */
	EXPECT_EQ_INT(oh.n_seen, 4);
	for (int k = 0; k < 4 && k < oh.n_seen; k++)
		EXPECTF(oh.seen[k] == want[k], "start #%d: prompt %d, want %d", k, oh.seen[k], want[k]);
	/* fcfs (the default) refuses a priority */
	eng = small_engine(NULL, NULL);
	if (!eng)
		return;
	struct engine_req *x = NULL;
	int32_t prompt[3] = {0, 5, 7};
	p.priority = 2;
	EXPECT_EQ_INT(engine_submit(eng, prompt, 3, &p, &x, &e), ENGINE_EINVAL);
	EXPECTF(strstr(e.msg, "--scheduling-policy priority") != NULL, "%s", e.msg);
	engine_free(eng);
}

/* DeepSeek-V3.2 (tiny-v32: sparse attention, index_topk 16, its default backend): batched
 * runs with and without prefix caching, at token budgets 7 and 1024, and in a pool small
 * enough to preempt (the indexer cache counted in its blocks) equal each prompt alone */
static void test_v32_invariance(void)
{
	if (load_model("tiny-v32") < 0)
		return;
	struct run_cfg lone = {.backend = NULL, .prefix_caching = false, .budget = 512};
	for (int i = 0; i < N_PROMPTS; i++) {
		int one[1] = {i};
		int32_t out[1][N_NEW];
		float m[1][N_NEW];
		if (run_engine(&lone, one, 1, out, m, NULL) < 0)
			return;
		memcpy(g_ref[i], out[0], sizeof out[0]);
		memcpy(g_ref_margin[i], m[0], sizeof m[0]);
	}
	int all[N_PROMPTS];
	for (int i = 0; i < N_PROMPTS; i++)
		all[i] = i;
	size_t per_block = model_kv_bytes_per_block(g_model, 16, DT_F32);
	EXPECT(per_block >
	       kv_cache_bytes_per_block(model_kv_layers(g_model), 16,
					model_config(g_model)->kv_lora_rank + model_config(g_model)->qk_rope_head_dim,
					DT_F32));
	static const struct {
		int budget, pc;
		size_t blocks;
	} runs[] = {{7, 0, 0}, {7, 1, 0}, {1024, 0, 0}, {1024, 1, 0}, {64, 0, 26}, {64, 1, 26}};
	for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
		struct run_cfg rc = {.backend = NULL,
				     .prefix_caching = runs[k].pc,
				     .budget = runs[k].budget,
				     .kv_bytes = per_block * runs[k].blocks};
		int32_t out[N_PROMPTS][N_NEW];
		struct engine_stats st;
		if (run_engine(&rc, all, N_PROMPTS, out, NULL, &st) < 0)
			return;
		char what[128];
		snprintf(what, sizeof what, "tiny-v32 prefix %s budget %d%s", runs[k].pc ? "on" : "off",
			 runs[k].budget, runs[k].blocks ? " small pool" : "");
		expect_same(what, all, N_PROMPTS, out);
		if (runs[k].pc)
			EXPECTF(st.prefix_hits > 0, "%s: no prefix hit", what);
		if (runs[k].blocks)
			EXPECTF(st.preemptions > 0, "%s: no preemption", what);
	}
}

static void test_teardown(void)
{
	model_free(g_model);
	g_model = NULL;
	pool_free(g_pool);
	g_pool = NULL;
}

TESTS(T(test_alone_matches_golden), T(test_batched_equals_alone), T(test_preemption_invariance), T(test_seed_and_n),
      T(test_stop_and_cancel), T(test_queue_bound_and_shutdown), T(test_stats_during_a_step),
      T(test_priority_scheduling), T(test_v32_invariance), T(test_teardown))
