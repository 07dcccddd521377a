/* Speculative decoding (engine/spec.h): the n-gram proposer and its flag, the scheduler's
 * draft bookkeeping, and the engine's promise on the fp32 fixtures: with drafts, every
 * choice gets the same tokens, logprobs, finish reasons and text as without, for every
 * backend, with prefix caching, preemption, small token budgets, stop ids, stop strings,
 * min/max tokens, penalties, seeds, n > 1 and guided decoding. Logit biases on a few tokens
 * make the outputs repeat, so that drafts are both kept and rejected. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/attn.h"
#include "base/log.h"
#include "engine/blocks.h"
#include "engine/engine.h"
#include "engine/sched.h"
#include "engine/spec.h"
#include "guide/grammar.h"
#include "harness.h"
#include "model/model.h"
#include "ops/pool.h"
#include "tok/tokenizer.h"

/* ---- the proposer ---- */

static void expect_propose(const int32_t *t, int n, int lo, int hi, int k, const int32_t *want, int n_want, int line)
{
	int32_t out[16];
	int got = spec_ngram_propose(t, n, lo, hi, k, out);
	if (got != n_want || memcmp(out, want, sizeof *want * (size_t)n_want))
		harness_fail(__FILE__, line, "propose: %d tokens (want %d)", got, n_want);
}
#define PROPOSE(t, lo, hi, k, ...)                                                                                   \
	do {                                                                                                         \
		static const int32_t w_[] = {__VA_ARGS__};                                                           \
		expect_propose(t, (int)(sizeof t / sizeof *t), lo, hi, k, w_ + 1, (int)(sizeof w_ / sizeof *w_) - 1, \
			       __LINE__);                                                                            \
	} while (0)

static void test_ngram_propose(void)
{
	/* vLLM's example: [4,2,3] has no earlier match, [2,3] does; 3 tokens follow it */
	static const int32_t a[] = {1, 2, 3, 4, 2, 3};
	PROPOSE(a, 2, 3, 4, -1, 4, 2, 3);
	PROPOSE(a, 2, 3, 2, -1, 4, 2);
	PROPOSE(a, 3, 3, 4, -1);    /* nothing of length 3 recurs */
	PROPOSE(a, 1, 1, 1, -1, 4); /* the earliest "3" */
	/* the longest match wins over an earlier shorter one */
	static const int32_t b[] = {7, 9, 5, 8, 9, 6, 8, 9, 1, 8, 9};
	PROPOSE(b, 1, 3, 3, -1, 6, 8, 9); /* [8,9] first at 3..4 */
	static const int32_t c[] = {5, 1, 2, 3, 6, 7, 1, 2, 3, 9, 2, 3};
	PROPOSE(c, 1, 3, 2, -1, 6, 7); /* [2,3] earliest at 2..3 */
	static const int32_t d[] = {4, 4, 4, 4};
	PROPOSE(d, 1, 2, 3, -1, 4, 4); /* overlapping: [4,4] at 0..1, two follow */
	static const int32_t one[] = {3};
	PROPOSE(one, 1, 1, 3, -1);
	PROPOSE(a, 2, 3, 0, -1);
}

static void test_spec_config(void)
{
	struct spec_config c;
	struct err e;
	EXPECT(spec_config_parse("{\"method\": \"ngram\", \"num_speculative_tokens\": 3, "
				 "\"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2}",
				 &c, &e) == 0);
	EXPECT(c.method == SPEC_NGRAM && c.k == 3 && c.lookup_min == 2 && c.lookup_max == 4);
	EXPECT(spec_config_parse("{\"method\": \"ngram\", \"num_speculative_tokens\": 2}", &c, &e) == 0);
	EXPECT(c.lookup_min == 5 && c.lookup_max == 5);
	EXPECT(spec_config_parse("{\"method\": \"ngram\", \"num_speculative_tokens\": 2, \"prompt_lookup_max\": 3}",
				 &c, &e) == 0);
	EXPECT(c.lookup_min == 3 && c.lookup_max == 3);
	EXPECT(spec_config_parse("{\"method\": \"deepseek_mtp\", \"num_speculative_tokens\": 1}", &c, &e) == 0);
	EXPECT(c.method == SPEC_MTP && c.k == 1);
	EXPECT(spec_config_parse("{\"method\": \"mtp\", \"disable_by_batch_size\": 8}", &c, &e) == 0);
	EXPECT(c.method == SPEC_MTP && c.k == 1 && c.disable_by_batch_size == 8);
	/* more drafts than DeepSeek's one MTP layer: chained passes, as vLLM */
	EXPECT(spec_config_parse("{\"method\": \"deepseek_mtp\", \"num_speculative_tokens\": 3}", &c, &e) == 0);
	EXPECT(c.method == SPEC_MTP && c.k == 3);
	EXPECT(spec_config_parse("{\"method\": \"deepseek_mtp\", \"num_speculative_tokens\": 16}", &c, &e) < 0);
	EXPECT(spec_config_parse("{\"method\": \"deepseek_mtp\", \"num_speculative_tokens\": 0}", &c, &e) < 0);
	EXPECT(spec_config_parse("{\"method\": \"deepseek_mtp\", \"prompt_lookup_max\": 2}", &c, &e) < 0);
	EXPECT(spec_config_parse("{\"method\": \"eagle\", \"num_speculative_tokens\": 1}", &c, &e) < 0);
	EXPECT(strstr(e.msg, "eagle") != NULL);
	EXPECT(spec_config_parse("{\"method\": \"ngram\"}", &c, &e) < 0);
	EXPECT(strstr(e.msg, "num_speculative_tokens") != NULL);
	EXPECT(spec_config_parse("{\"method\": \"ngram\", \"num_speculative_tokens\": 99}", &c, &e) < 0);
	EXPECT(spec_config_parse("{\"method\": \"ngram\", \"num_speculative_tokens\": 2, \"prompt_lookup_min\": 4, "
				 "\"prompt_lookup_max\": 2}",
				 &c, &e) < 0);
	EXPECT(spec_config_parse("{\"method\": \"ngram\", \"num_speculative_tokens\": 2, \"model\": \"x\"}", &c, &e) <
	       0);
	EXPECT(strstr(e.msg, "\"model\"") != NULL);
	EXPECT(spec_config_parse(
		       "{\"method\": \"ngram\", \"num_speculative_tokens\": 2, \"disable_by_batch_size\": 4}", &c,
		       &e) == 0);
	EXPECT(c.disable_by_batch_size == 4);
	EXPECT(spec_config_parse(
		       "{\"method\": \"ngram\", \"num_speculative_tokens\": 2, \"disable_by_batch_size\": 0}", &c,
		       &e) < 0);
	EXPECT(spec_config_parse("ngram", &c, &e) < 0);
	EXPECT(c.method == SPEC_NONE);
}

/* ---- the scheduler: drafts scheduled, cut by the budget, rolled back when rejected ---- */

static void test_sched_drafts(void)
{
	struct err e;
	struct block_pool *pool;
	EXPECT(blocks_new(33, 4, true, 1, &pool, &e) == 0);
	struct sched_config sc = {.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_model_len = 64};
	struct sched *s;
	EXPECT(sched_new(&sc, pool, &s, &e) == 0);
	int32_t prompt[6] = {0, 1, 2, 3, 4, 5};
	struct sched_req r;
	EXPECT(sched_req_init(&r, 1, prompt, 6, 40, 4, &e) == 0);
	sched_add(s, &r);
	struct sched_output o;
	sched_step(s, &o);
	EXPECT(o.n == 1 && r.n_sched == 6 && sched_req_n_rows(&r) == 1);
	int32_t t1 = 9;
	sched_update(s, &o, &t1);
	EXPECT(r.n_tokens == 7 && r.n_computed == 6);
	/* three drafts: the step runs 4 tokens and wants 4 rows */
	r.tokens[7] = 10, r.tokens[8] = 11, r.tokens[9] = 12;
	r.n_spec = 3;
	sched_step(s, &o);
	EXPECT(o.n == 1 && r.n_sched == 4 && r.step_start == 6 && r.n_spec == 3);
	EXPECT_EQ_INT(sched_req_n_rows(&r), 4);
	EXPECT(r.kv.n_blocks == 3); /* 10 positions of 4-token blocks */
	/* the first draft kept, the second rejected: two tokens appended */
	int32_t got[4] = {10, 20, -1, -1}, n_got = 2;
	sched_update_n(s, &o, got, 4, &n_got);
	EXPECT(r.n_tokens == 9 && r.tokens[7] == 10 && r.tokens[8] == 20);
	EXPECT_EQ_INT(r.n_computed, 8); /* the stale row of position 8 gets recomputed */
	EXPECT(r.n_spec == 0);
	/* a budget of 2 keeps one draft of three */
	sched_finish(s, &r, ENGINE_FINISH_ABORT);
	EXPECT_EQ_INT(blocks_num_used(pool), 0);
	sched_free(s);
	sc.max_num_batched_tokens = 2;
	EXPECT(sched_new(&sc, pool, &s, &e) == 0);
	sched_req_fini(&r);
	EXPECT(sched_req_init(&r, 2, prompt, 2, 40, 4, &e) == 0);
	sched_add(s, &r);
	sched_step(s, &o);
	t1 = 7;
	sched_update(s, &o, &t1);
	EXPECT(r.n_tokens == 3 && r.n_computed == 2);
	r.tokens[3] = 1, r.tokens[4] = 2, r.tokens[5] = 3;
	r.n_spec = 3;
	sched_step(s, &o);
	EXPECT(r.n_sched == 2 && r.n_spec == 1 && sched_req_n_rows(&r) == 2);
	/* both rows agree with the draft, and the last token is EOS-like: a stop id finishes it
	 * at the first token that hits it */
	int32_t stop_id = 1;
	r.stop_ids = &stop_id;
	r.n_stop_ids = 1;
	int32_t g2[2] = {1, 5};
	n_got = 2;
	EXPECT_EQ_INT(sched_update_n(s, &o, g2, 2, &n_got), 1);
	EXPECT(r.status == SREQ_FINISHED && r.n_tokens == 4 && r.stop_token == 1);
	EXPECT_EQ_INT(blocks_num_used(pool), 0);
	sched_req_fini(&r);
	sched_free(s);
	blocks_free_pool(pool);
}

/* ---- the engine ---- */

static struct pool *g_pool;
static struct model *g_model, *g_mtp; /* tiny-v3; tiny-v3-mtp with its MTP layer */
static struct tok *g_tok;

#define N_REQ 9
#define MAX_OUT 64

struct choice_out {
	int n;
	int32_t tok[MAX_OUT];
	struct engine_logprob lp[MAX_OUT];
	enum engine_finish fin;
	int32_t stop_token;
	char text[2048];
	size_t text_len;
	int n_output;
};

struct spec_run {
	const struct attn_backend *backend;
	bool prefix_caching;
	int budget;
	size_t kv_bytes;
	int k;       /* 0: no speculation */
	int disable; /* disable_by_batch_size */
	bool mtp;    /* deepseek_mtp on tiny-v3-mtp, else ngram on tiny-v3 */
};

static int32_t g_prompt[N_REQ][64];
static int g_prompt_len[N_REQ];

static void make_workload(void)
{
	unsigned s = 11;
	for (int i = 0; i < N_REQ; i++) {
		int n = 5 + (i * 13) % 40;
		g_prompt[i][0] = 0;
		for (int j = 1; j < n; j++) {
			s = s * 1103515245u + 12345u;
			/* repeats inside the prompt give the proposer something from the start */
			g_prompt[i][j] = j >= 8 && (s >> 9) % 3 ? g_prompt[i][j - 7] : 2 + (int32_t)((s >> 8) % 900);
		}
		g_prompt_len[i] = n;
	}
	memcpy(g_prompt[7], g_prompt[6], 20 * sizeof(int32_t)); /* a shared prefix */
}

static void bias(struct sampling_params *p, int first, int n, float v)
{
	for (int i = 0; i < n; i++) {
		p->logit_bias_ids[p->n_logit_bias] = first + 7 * i;
		p->logit_bias[p->n_logit_bias++] = v;
	}
}

static void request_params(int i, struct sampling_params *p)
{
	sampling_params_init(p, NULL);
	p->temperature = 0;
	p->max_tokens = 48;
	p->ignore_eos = true;
	p->logprobs = 2;
	switch (i) {
	case 0: /* greedy among three favoured tokens */ bias(p, 100, 3, 30); break;
	case 1: /* sampled among them */
		bias(p, 100, 3, 30);
		p->temperature = 1.0f, p->has_seed = true, p->seed = 3;
		break;
	case 2: /* a stop id among them, masked for the first 6 outputs */
		bias(p, 200, 2, 30);
		p->n_stop_token_ids = 1, p->stop_token_ids[0] = 207, p->min_tokens = 6;
		break;
	case 3: /* a length that drafts overshoot, top-k */
		bias(p, 300, 4, 30);
		p->temperature = 0.7f, p->has_seed = true, p->seed = 9, p->top_k = 3, p->max_tokens = 37;
		break;
	case 4: /* no bias: the model's own greedy text */ p->max_tokens = 30; break;
	case 5: /* penalties over the outputs so far (the kept drafts among them) */
		bias(p, 400, 3, 30);
		p->repetition_penalty = 1.3f, p->presence_penalty = 0.5f, p->frequency_penalty = 0.4f;
		break;
	case 6: /* two seeded choices */
		bias(p, 500, 2, 30);
		p->temperature = 1.0f, p->has_seed = true, p->seed = 21, p->n = 2;
		break;
	case 7: /* min_p with a mild bias */
		bias(p, 600, 3, 4);
		p->temperature = 0.9f, p->has_seed = true, p->seed = 5, p->min_p = 0.05f;
		break;
	default:                   /* EOS among the favoured tokens */
		bias(p, 1, 2, 30); /* 1 is the EOS id */
		p->ignore_eos = false, p->min_tokens = 3;
		break;
	}
}

/* Runs the workload; out[i * 2 + choice]. */
static int run(const struct spec_run *c, struct choice_out *out, struct engine_stats *st_out)
{
	struct engine_options o;
	engine_options_init(&o);
	o.model = c->mtp ? g_mtp : g_model;
	o.tok = g_tok;
	o.backend = c->backend;
	o.block_size = 16;
	o.kv_cache_memory = c->kv_bytes;
	o.kv_dtype = DT_F32;
	o.enable_prefix_caching = c->prefix_caching;
	o.max_num_seqs = 16;
	o.max_num_batched_tokens = c->budget;
	o.max_model_len = 160;
	o.n_eos_ids = 1;
	o.eos_ids[0] = 1;
	if (c->mtp) {
		o.spec.method = SPEC_MTP;
		o.spec.k = c->k;
		o.spec.disable_by_batch_size = c->disable;
	} else if (c->k > 0) {
		o.spec.method = SPEC_NGRAM;
		o.spec.k = c->k;
		o.spec.lookup_min = 1;
		o.spec.lookup_max = 3;
		o.spec.disable_by_batch_size = c->disable;
	}
	struct engine *eng;
	struct err e;
	if (engine_new(&o, &eng, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "engine_new: %s", e.msg);
		return -1;
	}
	struct engine_req *h[N_REQ];
	memset(out, 0, sizeof *out * N_REQ * 2);
	for (int i = 0; i < N_REQ; i++) {
		struct sampling_params p;
		request_params(i, &p);
		EXPECT(engine_submit(eng, g_prompt[i], g_prompt_len[i], &p, &h[i], &e) == 0);
	}
	for (int i = 0; i < N_REQ; i++) {
		struct engine_event ev;
		while (engine_next_event(h[i], &ev, 60000) == ENGINE_EV_OK) {
			struct choice_out *co = &out[i * 2 + ev.index];
			for (int t = 0; t < ev.n_tokens && co->n < MAX_OUT; t++, co->n++) {
				co->tok[co->n] = ev.token_ids[t];
				co->lp[co->n] = ev.logprobs[t];
			}
			if (co->text_len + ev.text_len < sizeof co->text) {
				memcpy(co->text + co->text_len, ev.text, ev.text_len);
				co->text_len += ev.text_len;
			}
			co->n_output = ev.n_output_tokens;
			if (ev.finish) {
				co->fin = ev.finish;
				co->stop_token = ev.stop_token;
			}
		}
		engine_release(h[i]);
	}
	/* every block is free again once everything finished (stats follow the last step) */
	for (int tries = 0; tries < 200; tries++) {
		engine_stats_get(eng, st_out);
		if (st_out->n_running == 0 && st_out->kv_usage == 0)
			break;
		usleep(5000);
	}
	EXPECT_EQ_INT(st_out->n_running, 0);
	EXPECT(st_out->kv_usage == 0);
	engine_free(eng);
	return 0;
}

/* Logprobs equal within fp32 noise: the step's batch (which the engine thread forms while
 * requests arrive) moves the last bits of attention's split-KV merge, drafts or not. */
static bool same_lp(const struct engine_logprob *a, const struct engine_logprob *b)
{
	if (a->token != b->token || a->n_top != b->n_top || fabsf(a->logprob - b->logprob) > 1e-4f)
		return false;
	for (int i = 0; i < a->n_top; i++) {
		if (fabsf(a->top_logprobs[i] - b->top_logprobs[i]) > 1e-4f)
			return false;
		bool tie = (i > 0 && a->top_logprobs[i - 1] - a->top_logprobs[i] < 1e-4f) ||
			   (i + 1 < a->n_top && a->top_logprobs[i] - a->top_logprobs[i + 1] < 1e-4f);
		if (a->top_ids[i] != b->top_ids[i] && !tie)
			return false;
	}
	return true;
}

static void expect_same_outputs(const char *what, const struct choice_out *a, const struct choice_out *b)
{
	for (int i = 0; i < N_REQ * 2; i++) {
		const struct choice_out *x = &a[i], *y = &b[i];
		int first = -1;
		bool tie = false;
		for (int t = 0; t < x->n && t < y->n && first < 0; t++) {
			if (x->tok[t] != y->tok[t]) {
				/* a near-tie (equal biases: the raw logprobs of the two picks) may
				 * go either way; the outputs part there */
				tie = fabsf(x->lp[t].logprob - y->lp[t].logprob) < 1e-3f;
				first = t;
			} else if (!same_lp(&x->lp[t], &y->lp[t])) {
				first = t;
			}
		}
		if (tie)
			continue;
		EXPECTF(first < 0 && x->n == y->n,
			"%s: request %d choice %d: %d vs %d tokens, first difference at %d (%d/%d, logprob %.9g/%.9g)",
			what, i / 2, i % 2, x->n, y->n, first, first >= 0 ? x->tok[first] : 0,
			first >= 0 ? y->tok[first] : 0, first >= 0 ? x->lp[first].logprob : 0.0,
			first >= 0 ? y->lp[first].logprob : 0.0);
		EXPECTF(x->fin == y->fin && x->stop_token == y->stop_token && x->n_output == y->n_output,
			"%s: request %d choice %d: finish %d/%d stop %d/%d outputs %d/%d", what, i / 2, i % 2, x->fin,
			y->fin, x->stop_token, y->stop_token, x->n_output, y->n_output);
		EXPECTF(x->text_len == y->text_len && !memcmp(x->text, y->text, x->text_len),
			"%s: request %d choice %d: texts differ", what, i / 2, i % 2);
	}
}

static int setup(void)
{
	struct err e;
	log_level = LOG_WARN;
	if (pool_new(2, &g_pool, &e) < 0)
		return -1;
	struct model_options mo = {
		.act_dtype = DT_F32, .max_batch_tokens = 1024, .max_seqs = 32, .max_model_len = 512, .pool = g_pool};
	struct model_options mtp = mo;
	mtp.load_mtp = true;
	if (model_load(fixture_path("tiny-v3"), &mo, &g_model, &e) < 0 ||
	    model_load(fixture_path("tiny-v3-mtp"), &mtp, &g_mtp, &e) < 0 ||
	    tok_load(fixture_path("tiny-v3"), &g_tok, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "load: %s", e.msg);
		return -1;
	}
	make_workload();
	return 0;
}

static void test_engine_same_outputs(void)
{
	if (!g_model && setup() < 0)
		return;
	const struct model_config *mc = model_config(g_model);
	size_t per_block = kv_cache_bytes_per_block(mc->num_hidden_layers, 16, mc->kv_lora_rank + mc->qk_rope_head_dim,
						    DT_F32);
	static struct choice_out base[N_REQ * 2], got[N_REQ * 2];
	for (int b = 0; b < attn_backend_count(); b++) {
		const struct attn_backend *be = attn_backend_at(b);
		if (attn_backend_kind(be) != ATTN_KIND_MLA) /* a dense model */
			continue;
		struct spec_run ref = {.backend = be, .prefix_caching = true, .budget = 512};
		struct engine_stats st;
		if (run(&ref, base, &st) < 0)
			return;
		EXPECT(st.spec_draft_tokens == 0);
		/* the workload does what it is for */
		EXPECT(base[2 * 2].fin == ENGINE_FINISH_STOP && base[2 * 2].stop_token == 207);
		EXPECT(base[3 * 2].fin == ENGINE_FINISH_LENGTH && base[3 * 2].n == 37);
		EXPECT(base[8 * 2].fin == ENGINE_FINISH_STOP && base[8 * 2].n >= 3);
		EXPECT(base[6 * 2 + 1].n == 48);
		const struct spec_run runs[] = {
			{be, true, 512, 0, 3, 0, false},
			{be, false, 512, 0, 1, 0, false},
			{be, true, 7, 0, 4, 0, false},
			{be, true, 64, per_block * 12, 3, 0, false}, /* 192 tokens: preemption */
			{be, true, 512, 0, 3, 7, false},             /* drafts only once 7 or fewer choices run */
			/* the MTP module's drafts (steered by each request's logit_bias, so that the
			 * random-weight module's drafts are kept now and then) */
			{be, true, 512, 0, 1, 0, true},
			{be, false, 512, 0, 1, 0, true},
			{be, true, 7, 0, 1, 0, true},
			{be, true, 64, per_block * 4 / 3 * 12, 1, 0, true}, /* 4 cache layers: 192 tokens */
			{be, true, 512, 0, 1, 7, true},
			/* chained passes of the MTP layer: 3 drafts, at the lookahead slots */
			{be, true, 512, 0, 3, 0, true},
			{be, false, 512, 0, 2, 0, true},
			{be, true, 7, 0, 3, 0, true},
			{be, true, 64, per_block * 4 / 3 * 12, 3, 0, true},
		};
		uint64_t all_drafts = 0;
		for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
			if (run(&runs[k], got, &st) < 0)
				return;
			char what[160];
			snprintf(what, sizeof what, "%s, %d %s drafts, prefix caching %s, budget %d%s%s", be->name,
				 runs[k].k, runs[k].mtp ? "mtp" : "ngram", runs[k].prefix_caching ? "on" : "off",
				 runs[k].budget, runs[k].kv_bytes ? ", small pool" : "",
				 runs[k].disable ? ", disable_by_batch_size 7" : "");
			expect_same_outputs(what, base, got);
			EXPECTF(st.spec_accepted_tokens > 0 && st.spec_accepted_tokens < st.spec_draft_tokens,
				"%s: %llu of %llu drafts kept", what, (unsigned long long)st.spec_accepted_tokens,
				(unsigned long long)st.spec_draft_tokens);
			EXPECTF(st.steps > 0, "%s", what);
			if (runs[k].kv_bytes)
				EXPECTF(st.preemptions > 0, "%s: no preemption", what);
			if (k == 0 || (runs[k].mtp && !runs[k - 1].mtp))
				all_drafts = st.spec_draft_tokens;
			if (runs[k].disable)
				EXPECTF(st.spec_draft_tokens < all_drafts, "%s: %llu drafts, %llu without the limit",
					what, (unsigned long long)st.spec_draft_tokens,
					(unsigned long long)all_drafts);
			uint64_t per_pos = 0;
			for (int j = 0; j < SPEC_MAX_TOKENS; j++)
				per_pos += st.spec_accepted_per_pos[j];
			EXPECT(per_pos == st.spec_accepted_tokens);
			if (runs[k].mtp && runs[k].k > 1) /* a chained draft is kept now and then */
				EXPECTF(st.spec_accepted_per_pos[1] > 0, "%s: %llu second drafts kept", what,
					(unsigned long long)st.spec_accepted_per_pos[1]);
		}
	}
}

/* Stop strings and guided decoding see the kept drafts as ordinary tokens (n-gram and MTP
 * drafts); the MTP drafts of guided requests follow the grammar, so some are kept even from
 * a random-weight module. */
static void test_engine_stop_strings_and_guides(void)
{
	if (!g_model && setup() < 0)
		return;
	struct err e;
	struct guide_grammar *g = NULL;
	static const char re[] = "(ab|ba|aa|b)+c{1,3}";
	EXPECT(guide_from_regex(re, sizeof re - 1, &g, &e) == 0);
	for (int run = 0; run < 3; run++) {
		int k = run == 1 ? 3 : run == 2 ? 3 : 0; /* none, ngram, mtp (chained) */
		struct engine_options o;
		engine_options_init(&o);
		o.model = run == 2 ? g_mtp : g_model;
		o.tok = g_tok;
		o.kv_dtype = DT_F32;
		o.max_num_seqs = 8;
		o.max_num_batched_tokens = 256;
		o.max_model_len = 160;
		o.n_eos_ids = 1;
		o.eos_ids[0] = 1;
		if (run == 1)
			o.spec.method = SPEC_NGRAM, o.spec.k = k, o.spec.lookup_min = 1, o.spec.lookup_max = 2;
		if (run == 2)
			o.spec.method = SPEC_MTP, o.spec.k = 3;
		struct engine *eng;
		if (engine_new(&o, &eng, &e) < 0) {
			harness_fail(__FILE__, __LINE__, "engine_new: %s", e.msg);
			break;
		}
		static char texts[3][4][512];
		static int ntoks[3][4];
		struct engine_stats st[2];
		for (int i = 0; i < 4; i++) {
			if (i == 2)
				engine_stats_get(eng, &st[0]);
			struct sampling_params p;
			request_params(i, &p);
			p.logprobs = -1;
			if (i == 0) { /* a stop string of the unbiased greedy text's pieces */
				p.n_logit_bias = 0;
				p.n_stop = 2;
				strcpy(p.stop[0], "ense");
				strcpy(p.stop[1], "e L");
			}
			if (i >= 2) { /* guided, greedy and sampled */
				p.guide = g;
				p.n_logit_bias = 0;
				p.max_tokens = 40;
			}
			struct engine_req *h;
			EXPECT(engine_submit(eng, g_prompt[i], g_prompt_len[i], &p, &h, &e) == 0);
			struct engine_event ev;
			size_t tl = 0;
			int n = 0;
			while (engine_next_event(h, &ev, 60000) == ENGINE_EV_OK) {
				if (tl + ev.text_len < sizeof texts[0][0]) {
					memcpy(texts[run][i] + tl, ev.text, ev.text_len);
					tl += ev.text_len;
				}
				n += ev.n_tokens;
			}
			texts[run][i][tl] = 0;
			ntoks[run][i] = n;
			engine_release(h);
		}
		for (int tries = 0; tries < 200; tries++) { /* the stats follow the last step */
			engine_stats_get(eng, &st[1]);
			if (st[1].n_running == 0)
				break;
			usleep(5000);
		}
		engine_free(eng);
		for (int i = 0; run && i < 4; i++)
			EXPECTF(!strcmp(texts[0][i], texts[run][i]) && ntoks[0][i] == ntoks[run][i],
				"%s: request %d: \"%s\" (%d tokens) with drafts, \"%s\" (%d) without",
				run == 2 ? "mtp" : "ngram", i, texts[run][i], ntoks[run][i], texts[0][i], ntoks[0][i]);
		if (run == 2) /* the guided requests' own drafts */
			EXPECTF(st[1].spec_accepted_tokens > st[0].spec_accepted_tokens,
				"guided MTP drafts: %llu kept of %llu",
				(unsigned long long)(st[1].spec_accepted_tokens - st[0].spec_accepted_tokens),
				(unsigned long long)(st[1].spec_draft_tokens - st[0].spec_draft_tokens));
	}
	guide_unref(g);
}

/* DeepSeek-V3.2 (tiny-v32-mtp: sparse attention, fp8, an MTP layer with its own indexer):
 * the outputs with n-gram drafts and with the MTP module's (one, and three chained) equal
 * those without, with prefix caching on and off and in a pool small enough to preempt */
static void test_engine_v32_same_outputs(void)
{
	if (!g_model && setup() < 0)
		return;
	struct err e;
	struct model *v32 = NULL;
	struct model_options mo = {.act_dtype = DT_F32,
				   .max_batch_tokens = 1024,
				   .max_seqs = 32,
				   .max_model_len = 512,
				   .pool = g_pool,
				   .load_mtp = true};
	if (model_load(fixture_path("tiny-v32-mtp"), &mo, &v32, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "load: %s", e.msg);
		return;
	}
	struct model *keep_model = g_model, *keep_mtp = g_mtp;
	g_model = g_mtp = v32;
	size_t per_block = model_kv_bytes_per_block(v32, 16, DT_F32);
	static struct choice_out base[N_REQ * 2], got[N_REQ * 2];
	struct spec_run ref = {.backend = NULL, .prefix_caching = true, .budget = 512};
	struct engine_stats st;
	if (run(&ref, base, &st) == 0) {
		const struct spec_run runs[] = {
			{NULL, true, 512, 0, 3, 0, false},
			{NULL, true, 512, 0, 1, 0, true},
			{NULL, false, 7, 0, 1, 0, true},
			{NULL, true, 512, 0, 3, 0, true},
			{NULL, true, 64, per_block * 12, 3, 0, true}, /* 3 cache layers: 64 tokens each */
		};
		for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
			if (run(&runs[k], got, &st) < 0)
				break;
			char what[160];
			snprintf(what, sizeof what, "tiny-v32-mtp, %d %s drafts, prefix caching %s, budget %d%s",
				 runs[k].k, runs[k].mtp ? "mtp" : "ngram", runs[k].prefix_caching ? "on" : "off",
				 runs[k].budget, runs[k].kv_bytes ? ", small pool" : "");
			expect_same_outputs(what, base, got);
			EXPECTF(st.spec_draft_tokens > 0, "%s: no drafts", what);
			if (runs[k].kv_bytes)
				EXPECTF(st.preemptions > 0, "%s: no preemption", what);
		}
	}
	g_model = keep_model;
	g_mtp = keep_mtp;
	model_free(v32);
}

static void test_teardown(void)
{
	model_free(g_model);
	model_free(g_mtp);
	tok_free(g_tok);
	pool_free(g_pool);
	g_model = NULL;
	g_tok = NULL;
	g_pool = NULL;
}

TESTS(T(test_ngram_propose), T(test_spec_config), T(test_sched_drafts), T(test_engine_same_outputs),
      T(test_engine_stop_strings_and_guides), T(test_engine_v32_same_outputs), T(test_teardown))
