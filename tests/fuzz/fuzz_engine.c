/* Fuzz target "engine": random workloads through the whole engine on tiny-v3 and
 * tiny-v3-mtp (scheduler, block pool and prefix cache, preemption, the runner on every
 * attention backend, sampling, stops, n > 1, guided decoding, n-gram and MTP speculation,
 * priorities, cancellation). The input's bytes choose the engine options and up to 6
 * requests with their parameters, then every request is read to its end (some cancelled
 * midway).
 * Properties: submit accepts or refuses with a message; every choice ends exactly once, within
 * max_tokens, its tokens in the vocabulary, its logprobs ranked; a guided output that stops is
 * a whole match; no event takes 20 s; once all is released, nothing runs or waits and every
 * KV block is free. */
#include <string.h>
#include <unistd.h>

#include "attn/attn.h"
#include "base/log.h"
#include "engine/engine.h"
#include "fuzz/fuzz.h"
#include "guide/grammar.h"
#include "guide/matcher.h"
#include "model/model.h"
#include "ops/pool.h"
#include "tok/tokenizer.h"

const char fuzz_name[] = "engine";

#define VOCAB 1024
#define MAX_REQS 6

static struct pool *pool;
static struct model *model, *mtp_model; /* tiny-v3; tiny-v3-mtp with its MTP layer */
static struct tok *tok;
static struct guide_grammar *guides[3];

static void setup(void)
{
	struct err e;
	struct model_options mo = {.act_dtype = DT_F32, .max_batch_tokens = 256, .max_seqs = 16, .max_model_len = 128};
	FUZZ_SETUP(pool_new(1, &pool, &e) == 0, e.msg);
	mo.pool = pool;
	log_level = LOG_WARN; /* an engine per input: no start-up lines */
	FUZZ_SETUP(model_load("tests/fixtures/tiny-v3", &mo, &model, &e) == 0, e.msg);
	struct model_options mtp = mo;
	mtp.load_mtp = true;
	FUZZ_SETUP(model_load("tests/fixtures/tiny-v3-mtp", &mtp, &mtp_model, &e) == 0, e.msg);
	FUZZ_SETUP(tok_load("tests/fixtures/tiny-v3", &tok, &e) == 0, e.msg);
	const char *ch[] = {"red", "green", "blue"};
	size_t lens[] = {3, 5, 4};
	static const char re[] = "[a-z]{1,4}( [0-9]+)?";
	static const char cfg[] = "root ::= \"(\" [a-z]+ (\",\" [a-z]+){0,2} \")\"";
	FUZZ_SETUP(guide_from_choices(ch, lens, 3, &guides[0], &e) == 0, e.msg);
	FUZZ_SETUP(guide_from_regex(re, sizeof re - 1, &guides[1], &e) == 0, e.msg);
	FUZZ_SETUP(guide_from_ebnf(cfg, sizeof cfg - 1, &guides[2], &e) == 0, e.msg);
}

struct rd {
	const uint8_t *p;
	size_t n;
};

static unsigned u8(struct rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

struct req {
	struct engine_req *h;
	struct sampling_params p;
	int cancel_after; /* events read before engine_cancel; -1 never */
	int32_t prompt[48];
	int n_prompt;
};

static void read_all(struct req *q)
{
	int n = q->p.n, events = 0;
	int out[4] = {0};
	bool ended[4] = {false};
	struct jm_state *st = q->p.guide ? malloc(sizeof *st * (size_t)n) : NULL;
	bool guide_ok[4] = {true, true, true, true};
	for (int c = 0; st && c < n; c++)
		jm_init(&st[c], q->p.guide);
	struct engine_event ev;
	int rc;
	while ((rc = engine_next_event(q->h, &ev, 20000)) == ENGINE_EV_OK) {
		FUZZ_CHECK(ev.index >= 0 && ev.index < n && !ended[ev.index]);
		int c = ev.index;
		for (int t = 0; t < ev.n_tokens; t++) {
			FUZZ_CHECK(ev.token_ids[t] >= 0 && ev.token_ids[t] < VOCAB);
			if (ev.logprobs) {
				const struct engine_logprob *lp = &ev.logprobs[t];
				FUZZ_CHECK(lp->token == ev.token_ids[t] && lp->rank >= 1 &&
					   lp->n_top == q->p.logprobs);
				for (int k = 1; k < lp->n_top; k++)
					FUZZ_CHECK(lp->top_logprobs[k] <= lp->top_logprobs[k - 1]);
			}
		}
		out[c] += ev.n_tokens;
		FUZZ_CHECK(ev.n_output_tokens == out[c]);
		if (st && guide_ok[c])
			guide_ok[c] = jm_feed_bytes(&st[c], q->p.guide, (const uint8_t *)ev.text, ev.text_len);
		if (ev.finish) {
			ended[c] = true;
			FUZZ_CHECK(out[c] <= q->p.max_tokens);
			/* a guided choice that stopped (not by a stop string or id, which cut it) is whole */
			if (st && ev.finish == ENGINE_FINISH_STOP && !ev.stop_str && ev.stop_token < 0 &&
			    q->cancel_after < 0)
				FUZZ_CHECK(guide_ok[c] && jm_complete(&st[c], q->p.guide));
		}
		if (++events == q->cancel_after)
			engine_cancel(q->h);
	}
	FUZZ_CHECK(rc == ENGINE_EV_END); /* not a 20 s wait */
	for (int c = 0; c < n; c++)
		FUZZ_CHECK(ended[c]);
	free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!model)
		setup();
	if (size < 8 || size > 1024)
		return 0;
	struct rd r = {data, size};
	struct engine_options o;
	engine_options_init(&o);
	o.model = model;
	o.tok = tok;
	o.kv_dtype = DT_F32;
	o.backend = attn_backend_at((int)(u8(&r) % (unsigned)attn_backend_count()));
	if (attn_backend_kind(o.backend) != ATTN_KIND_MLA) /* a dense model: its default */
		o.backend = NULL;
	unsigned kv = u8(&r) % 8;
	o.kv_cache_memory = kv ? (size_t)(kv + 2) * 48 * 1024 : 0; /* ~1 KB a token: 144-432 tokens, so
								      * a few requests preempt */
	o.enable_prefix_caching = u8(&r) & 1;
	o.max_num_seqs = 1 + (int)(u8(&r) % 8);
	static const int budgets[] = {1, 7, 16, 64, 256};
	o.max_num_batched_tokens = budgets[u8(&r) % 5];
	o.max_model_len = 128;
	o.max_waiting = 16;
	o.seed = u8(&r);
	o.n_eos_ids = 1;
	o.eos_ids[0] = 1;
	unsigned flags = u8(&r);
	o.priority_scheduling = flags & 1;
	if ((flags >> 6) == 3) { /* the checkpoint's MTP layer drafts (tiny-v3-mtp: same tokenizer) */
		o.model = mtp_model;
		o.spec.method = SPEC_MTP;
		o.spec.k = 1 + (int)(flags >> 2 & 3) % 3; /* 2, 3: chained passes */
		o.spec.disable_by_batch_size = flags & 2 ? 2 : 0;
	} else if (flags & 2) {
		o.spec.method = SPEC_NGRAM;
		o.spec.k = 1 + (int)(flags >> 2 & 3) % 3;
		o.spec.lookup_min = 1;
		o.spec.lookup_max = 1 + (int)(flags >> 4 & 3);
	}
	struct engine *eng = NULL;
	struct err e;
	e.msg[0] = 0;
	if (engine_new(&o, &eng, &e) < 0) {
		FUZZ_CHECK(!eng && e.msg[0]);
		return 0;
	}
	static struct req q[MAX_REQS];
	int n_req = 1 + (int)(u8(&r) % MAX_REQS);
	for (int i = 0; i < n_req; i++) {
		struct req *x = &q[i];
		memset(x, 0, sizeof *x);
		x->n_prompt = 1 + (int)(u8(&r) % 40);
		for (int k = 0; k < x->n_prompt; k++)
			x->prompt[k] = (int32_t)((u8(&r) * 4 + (unsigned)k) % VOCAB);
		struct sampling_params *p = &x->p;
		sampling_params_init(p, NULL);
		unsigned a = u8(&r), b = u8(&r), c = u8(&r);
		p->temperature = a & 1 ? 0.0f : 0.5f + (float)(a >> 1 & 3) * 0.4f;
		p->has_seed = a & 8;
		p->seed = b;
		p->max_tokens = 1 + (int)(b % 24);
		p->n = 1 + (int)(c % 3);
		p->min_tokens = (int)(c >> 2 & 3);
		p->ignore_eos = c & 16;
		p->logprobs = c & 32 ? (int)(a >> 4 & 3) : -1;
		if (a & 64)
			p->top_k = 1 + (int)(b % 50);
		if (a & 128)
			p->top_p = 0.5f;
		unsigned d = u8(&r);
		if (d & 1) {
			p->n_stop_token_ids = 1;
			p->stop_token_ids[0] = (int32_t)(u8(&r) * 4 % VOCAB);
		}
		if (d & 2) {
			p->n_stop = 1;
			p->stop[0][0] = (char)('a' + u8(&r) % 26);
			p->stop[0][1] = 0;
			p->include_stop_str_in_output = d & 4;
		}
		if (d & 8)
			p->guide = guides[u8(&r) % 3];
		if (d & 16) {
			p->presence_penalty = 0.5f;
			p->repetition_penalty = 1.2f;
		}
		if (d & 32) {
			p->n_logit_bias = 1;
			p->logit_bias_ids[0] = (int32_t)(u8(&r) * 4 % VOCAB);
			p->logit_bias[0] = 50;
		}
		if (o.priority_scheduling)
			p->priority = (int)(u8(&r) % 5) - 2;
		if (d & 64)
			p->prompt_logprobs = (int)(u8(&r) % 3);
		x->cancel_after = d & 128 ? 1 + (int)(u8(&r) % 6) : -1;
		if (engine_submit(eng, x->prompt, x->n_prompt, p, &x->h, &e) < 0) {
			FUZZ_CHECK(!x->h && e.msg[0]);
			x->h = NULL;
		}
	}
	for (int i = 0; i < n_req; i++)
		if (q[i].h) {
			read_all(&q[i]);
			engine_release(q[i].h);
		}
	struct engine_stats st;
	for (int tries = 0; tries < 400; tries++) {
		engine_stats_get(eng, &st);
		if (st.n_running == 0 && st.n_waiting == 0 && st.kv_usage == 0)
			break;
		usleep(5000);
	}
	FUZZ_CHECK(st.n_running == 0 && st.n_waiting == 0 && st.kv_usage == 0);
	engine_free(eng);
	return 0;
}
