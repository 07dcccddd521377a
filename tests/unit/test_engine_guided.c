/* Guided decoding through the engine on tiny-v3 (float32, its real tokenizer): a seeded
 * guided choice samples the same tokens alone, next to other requests (guided and free), and
 * with a KV pool small enough to force preemption; its text is a whole match of the grammar
 * when it stops; a choice grammar ends on EOS even under min_tokens; n > 1 choices each keep
 * their own matcher state; guide_after delays the grammar until that token; a context-free
 * grammar's outputs are whole derivations. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "engine/engine.h"
#include "guide/grammar.h"
#include "guide/matcher.h"
#include "harness.h"
#include "model/model.h"
#include "ops/pool.h"
#include "tok/tokenizer.h"

#define MAX_OUT 160

static struct pool *g_pool;
static struct model *g_model;
static struct tok *g_tok;
static struct guide_grammar *g_schema, *g_choice;

static const char SCHEMA[] =
	"{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 6},"
	" \"n\": {\"type\": \"integer\"}, \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"b\"]},"
	" \"maxItems\": 2}, \"ok\": {\"type\": \"boolean\"}}, \"required\": [\"name\", \"n\", \"ok\"]}";
static const char *const CHOICES[] = {"red", "green", "blue"};

static void setup(void)
{
	struct err e;
	struct model_options mo = {.act_dtype = DT_F32, .max_batch_tokens = 512, .max_seqs = 16, .max_model_len = 256};
	if (pool_new(2, &g_pool, &e) < 0 ||
	    (mo.pool = g_pool, model_load(fixture_path("tiny-v3"), &mo, &g_model, &e)) < 0 ||
	    tok_load(fixture_path("tiny-v3"), &g_tok, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "setup: %s", e.msg);
		return;
	}
	json_t *s = json_loads(SCHEMA, 0, NULL);
	size_t lens[3] = {3, 5, 4};
	EXPECT(s && guide_from_schema(s, "schema", &g_schema, &e) == 0);
	EXPECT(guide_from_choices(CHOICES, lens, 3, &g_choice, &e) == 0);
	json_decref(s);
}

static struct engine *new_engine(size_t kv_bytes, int max_model_len)
{
	struct engine_options o;
	engine_options_init(&o);
	o.model = g_model;
	o.tok = g_tok;
	o.kv_dtype = DT_F32;
	o.block_size = 16;
	o.kv_cache_memory = kv_bytes;
	o.max_num_seqs = 16;
	o.max_num_batched_tokens = 64;
	o.max_model_len = max_model_len;
	o.n_eos_ids = 1;
	o.eos_ids[0] = 1;
	struct engine *eng = NULL;
	struct err e;
	if (engine_new(&o, &eng, &e) < 0)
		harness_fail(__FILE__, __LINE__, "engine_new: %s", e.msg);
	return eng;
}

struct out {
	int32_t tok[MAX_OUT];
	int n;
	char text[4096];
	size_t len;
	enum engine_finish fin;
};

/* every event of choice `index` of h (all choices read) */
static void collect(struct engine_req *h, struct out *o, int n_choices)
{
	memset(o, 0, sizeof *o * (size_t)n_choices);
	struct engine_event ev;
	while (engine_next_event(h, &ev, 60000) == ENGINE_EV_OK) {
		struct out *c = &o[ev.index];
		for (int t = 0; t < ev.n_tokens && c->n < MAX_OUT; t++)
			c->tok[c->n++] = ev.token_ids[t];
		if (c->len + ev.text_len < sizeof c->text) {
			memcpy(c->text + c->len, ev.text, ev.text_len);
			c->len += ev.text_len;
		}
		if (ev.finish)
			c->fin = ev.finish;
	}
}

static void guided_params(struct sampling_params *p, struct guide_grammar *g, uint64_t seed)
{
	sampling_params_init(p, NULL);
	p->max_tokens = 120;
	p->temperature = 1.0f;
	p->has_seed = true;
	p->seed = seed;
	p->guide = g;
}

static const int32_t PROMPT[] = {0, 100, 200, 300, 400, 500, 600, 700};
static const int32_t OTHER[] = {0, 11, 22, 33, 44, 55, 66, 77, 88, 99, 111, 222};

/* text of a stopped guided output: a whole match */
static void expect_whole(const struct guide_grammar *g, const struct out *o, const char *what)
{
	if (o->fin != ENGINE_FINISH_STOP)
		return;
	struct jm_state s;
	jm_init(&s, g);
	EXPECTF(jm_feed_bytes(&s, g, (const uint8_t *)o->text, o->len) && jm_complete(&s, g),
		"%s: stopped output is not a whole match: '%.*s'", what, (int)o->len, o->text);
}

static void run_alone(struct engine *eng, struct guide_grammar *g, uint64_t seed, struct out *o)
{
	struct sampling_params p;
	guided_params(&p, g, seed);
	struct engine_req *h;
	struct err e;
	EXPECT(engine_submit(eng, PROMPT, 8, &p, &h, &e) == 0);
	collect(h, o, 1);
	engine_release(h);
}

static void test_guided_batch_invariance(void)
{
	if (!g_model)
		return;
	struct engine *eng = new_engine(0, 256);
	if (!eng)
		return;
	int stopped = 0;
	for (uint64_t seed = 1; seed <= 6; seed++) {
		struct out alone, mixed[4];
		run_alone(eng, g_schema, seed, &alone);
		expect_whole(g_schema, &alone, "alone");
		stopped += alone.fin == ENGINE_FINISH_STOP;
		/* the same request between a free one, a choice one and another schema one */
		struct sampling_params p, free_p, choice_p, other_p;
		guided_params(&p, g_schema, seed);
		sampling_params_init(&free_p, NULL);
		free_p.max_tokens = 40;
		free_p.ignore_eos = true;
		guided_params(&choice_p, g_choice, seed + 100);
		guided_params(&other_p, g_schema, seed + 200);
		struct engine_req *h[4];
		struct err e;
		EXPECT(engine_submit(eng, OTHER, 12, &free_p, &h[0], &e) == 0);
		EXPECT(engine_submit(eng, OTHER, 9, &choice_p, &h[1], &e) == 0);
		EXPECT(engine_submit(eng, PROMPT, 8, &p, &h[2], &e) == 0);
		EXPECT(engine_submit(eng, OTHER, 5, &other_p, &h[3], &e) == 0);
		for (int i = 0; i < 4; i++) {
			collect(h[i], &mixed[i], 1);
			engine_release(h[i]);
		}
		EXPECTF(alone.n == mixed[2].n && !memcmp(alone.tok, mixed[2].tok, sizeof(int32_t) * (size_t)alone.n),
			"seed %d: batched guided output differs from the lone one", (int)seed);
		expect_whole(g_schema, &mixed[3], "other schema");
		EXPECT_EQ_INT(mixed[1].fin, ENGINE_FINISH_STOP);
		bool is_choice = false;
		for (int c = 0; c < 3; c++)
			is_choice |= mixed[1].len == strlen(CHOICES[c]) &&
				     !memcmp(mixed[1].text, CHOICES[c], mixed[1].len);
		EXPECTF(is_choice, "choice output '%.*s'", (int)mixed[1].len, mixed[1].text);
		EXPECT_EQ_INT(mixed[0].n, 40);
	}
	EXPECTF(stopped >= 3, "only %d of 6 schema outputs finished within 120 tokens", stopped);
	engine_free(eng);
}

/* a pool of 10 blocks (160 tokens) for 4 requests of up to 128 tokens each: preemptions */
static void test_guided_preemption(void)
{
	if (!g_model)
		return;
	struct engine *ref = new_engine(0, 256);
	if (!ref)
		return;
	struct out alone[4];
	for (int i = 0; i < 4; i++)
		run_alone(ref, g_schema, 40 + (uint64_t)i, &alone[i]);
	engine_free(ref);
	const struct model_config *c = model_config(g_model);
	struct engine *eng = new_engine(
		kv_cache_bytes_per_block(c->num_hidden_layers, 16, c->kv_lora_rank + c->qk_rope_head_dim, DT_F32) * 10,
		128);
	if (!eng)
		return;
	struct engine_req *h[4];
	struct err e;
	for (int i = 0; i < 4; i++) {
		struct sampling_params p;
		guided_params(&p, g_schema, 40 + (uint64_t)i);
		EXPECT(engine_submit(eng, PROMPT, 8, &p, &h[i], &e) == 0);
	}
	for (int i = 0; i < 4; i++) {
		struct out o;
		collect(h[i], &o, 1);
		engine_release(h[i]);
		EXPECTF(o.n == alone[i].n && !memcmp(o.tok, alone[i].tok, sizeof(int32_t) * (size_t)o.n),
			"request %d: output differs under preemption (%d vs %d tokens)", i, o.n, alone[i].n);
	}
	struct engine_stats st;
	engine_stats_get(eng, &st);
	EXPECTF(st.preemptions > 0, "no preemption happened");
	engine_free(eng);
}

/* A choice ends on EOS as soon as it is whole, min_tokens notwithstanding; n = 3 choices each
 * match on their own. */
static void test_guided_choice_n_and_min_tokens(void)
{
	if (!g_model)
		return;
	struct engine *eng = new_engine(0, 256);
	if (!eng)
		return;
	struct sampling_params p;
	guided_params(&p, g_choice, 5);
	p.n = 3;
	p.min_tokens = 50;
	struct engine_req *h;
	struct err e;
	EXPECT(engine_submit(eng, PROMPT, 8, &p, &h, &e) == 0);
	struct out o[3];
	collect(h, o, 3);
	engine_release(h);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ_INT(o[i].fin, ENGINE_FINISH_STOP);
		EXPECTF(o[i].n >= 1 && o[i].tok[o[i].n - 1] == 1, "choice %d did not end on EOS", i);
		bool ok = false;
		for (int c = 0; c < 3; c++)
			ok |= o[i].len == strlen(CHOICES[c]) && !memcmp(o[i].text, CHOICES[c], o[i].len);
		EXPECTF(ok, "choice %d: '%.*s'", i, (int)o[i].len, o[i].text);
	}
	engine_free(eng);
}

/* guide_after (a reasoning model's "</think>"): free tokens up to and including it, then the
 * grammar; never reached: free throughout */
static void test_guide_after(void)
{
	if (!g_model)
		return;
	struct engine *eng = new_engine(0, 256);
	if (!eng)
		return;
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.temperature = 0;
	p.max_tokens = 12;
	p.ignore_eos = true;
	struct engine_req *h;
	struct err e;
	struct out free_run, o;
	EXPECT(engine_submit(eng, OTHER, 12, &p, &h, &e) == 0);
	collect(h, &free_run, 1);
	engine_release(h);
	EXPECT_EQ_INT(free_run.n, 12);
	int k = 3; /* the first occurrence of free_run.tok[k] must be at k */
	while (k < 10) {
		int j = 0;
		while (j < k && free_run.tok[j] != free_run.tok[k])
			j++;
		if (j == k)
			break;
		k++;
	}
	p.guide = g_choice;
	p.guide_after = free_run.tok[k];
	p.max_tokens = 60;
	EXPECT(engine_submit(eng, OTHER, 12, &p, &h, &e) == 0);
	collect(h, &o, 1);
	engine_release(h);
	EXPECTF(o.n > k + 1 && !memcmp(o.tok, free_run.tok, sizeof(int32_t) * (size_t)(k + 1)),
		"the tokens up to guide_after differ from the free run");
	/* after it: one of the choices, then EOS */
	struct jm_state st;
	jm_init(&st, g_choice);
	size_t skip = 0;
	char pre[4096];
	size_t pl = 0;
	for (int i = 0; i <= k; i++) { /* the free part's text: decode it to find where the choice starts */
		char *txt;
		size_t len;
		if (tok_decode(g_tok, &o.tok[i], 1, true, &txt, &len, &e) == 0) {
			if (pl + len < sizeof pre)
				memcpy(pre + pl, txt, len), pl += len;
			free(txt);
		}
	}
	skip = pl <= o.len ? pl : o.len;
	EXPECT_EQ_INT(o.fin, ENGINE_FINISH_STOP);
	EXPECTF(jm_feed_bytes(&st, g_choice, (const uint8_t *)o.text + skip, o.len - skip) &&
			jm_complete(&st, g_choice),
		"text after guide_after is not a choice: '%.*s'", (int)(o.len - skip), o.text + skip);
	/* never sampled: the same as free */
	p.guide_after = 1023;
	p.max_tokens = 12;
	EXPECT(engine_submit(eng, OTHER, 12, &p, &h, &e) == 0);
	collect(h, &o, 1);
	engine_release(h);
	EXPECTF(o.n == 12 && !memcmp(o.tok, free_run.tok, sizeof(int32_t) * 12),
		"an unreached guide_after changed the output");
	engine_free(eng);
}

/* guided_grammar: a bounded grammar's outputs are whole derivations that end on EOS, each
 * seed alone the same as next to the others */
static void test_guided_grammar(void)
{
	if (!g_model)
		return;
	static const char GRAMMAR[] = "root ::= \"(\" item (\", \" item){0,3} \")\"\n"
				      "item ::= [a-z]{1,6} | num\n"
				      "num ::= \"-\"? [1-9] [0-9]{0,2}";
	struct guide_grammar *g;
	struct err e;
	if (guide_from_ebnf(GRAMMAR, sizeof GRAMMAR - 1, &g, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "%s", e.msg);
		return;
	}
	struct engine *eng = new_engine(0, 256);
	if (!eng) {
		guide_unref(g);
		return;
	}
	struct out alone[4], together[4];
	for (int i = 0; i < 4; i++) {
		run_alone(eng, g, 40 + (uint64_t)i, &alone[i]);
		EXPECT_EQ_INT(alone[i].fin, ENGINE_FINISH_STOP);
		EXPECTF(alone[i].n >= 1 && alone[i].tok[alone[i].n - 1] == 1, "seed %d did not end on EOS", i);
		EXPECTF(alone[i].len >= 3 && alone[i].text[0] == '(' && alone[i].text[alone[i].len - 1] == ')',
			"seed %d: '%.*s'", i, (int)alone[i].len, alone[i].text);
		expect_whole(g, &alone[i], "grammar");
	}
	struct engine_req *h[4];
	for (int i = 0; i < 4; i++) {
		struct sampling_params p;
		guided_params(&p, g, 40 + (uint64_t)i);
		EXPECT(engine_submit(eng, PROMPT, 8, &p, &h[i], &e) == 0);
	}
	for (int i = 0; i < 4; i++) {
		collect(h[i], &together[i], 1);
		engine_release(h[i]);
		EXPECTF(together[i].n == alone[i].n &&
				!memcmp(together[i].tok, alone[i].tok, sizeof(int32_t) * (size_t)alone[i].n),
			"seed %d: batched output differs from alone", i);
	}
	engine_free(eng);
	guide_unref(g);
}

/* A grammar that nests past the matcher's stack: the output is cut where no token continues
 * it, as an abort that says why, never a "stop" on a partial match */
static void test_guided_grammar_too_deep(void)
{
	if (!g_model)
		return;
	char src[4096] = "root ::= r0\n";
	size_t n = strlen(src);
	for (int k = 0; k < 40; k++)
		n += (size_t)snprintf(src + n, sizeof src - n, "r%d ::= \"a\" r%d \"z\"\n", k, k + 1);
	snprintf(src + n, sizeof src - n, "r40 ::= \"a\"\n");
	struct guide_grammar *g;
	struct err e;
	if (guide_from_ebnf(src, strlen(src), &g, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "%s", e.msg);
		return;
	}
	struct engine *eng = new_engine(0, 256);
	struct out o;
	if (eng) {
		run_alone(eng, g, 9, &o);
		EXPECT_EQ_INT(o.fin, ENGINE_FINISH_ABORT);
		bool all_a = o.len > 0;
		for (size_t i = 0; i < o.len; i++)
			all_a &= o.text[i] == 'a';
		EXPECTF(all_a && o.len < 40, "'%.*s'", (int)o.len, o.text);
		engine_free(eng);
	}
	guide_unref(g);
}

static void test_teardown(void)
{
	guide_unref(g_schema);
	guide_unref(g_choice);
	model_free(g_model);
	tok_free(g_tok);
	pool_free(g_pool);
}

static void test_setup(void) { setup(); }

TESTS(T(test_setup), T(test_guided_batch_invariance), T(test_guided_preemption),
      T(test_guided_choice_n_and_min_tokens), T(test_guide_after), T(test_guided_grammar),
      T(test_guided_grammar_too_deep), T(test_teardown))
