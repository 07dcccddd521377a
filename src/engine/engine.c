/* The engine thread, request handles and their outboxes (engine.h). */
#include "engine/engine.h"

#include "base/bigmem.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/attn.h"
#include "attn/threshold.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mono.h"
#include "engine/blocks.h"
#include "engine/outbox.h"
#include "engine/req.h"
#include "engine/runner.h"
#include "engine/sample.h"
#include "engine/sched.h"
#include "engine/step.h"
#include "guide/guide.h"
#include "io/config.h"
#include "model/model.h"

#define MOD "engine"

struct engine {
	struct engine_options o;
	const struct model_config *cfg;
	int vocab, max_model_len, block_size, n_blocks, threshold;
	const struct attn_backend *backend;
	struct kv_cache kv;
	struct block_pool *pool;
	struct sched *sched;
	struct runner runner;
	struct step *step;
	int spec_k;               /* drafts per request and step (0: no speculation) */
	struct sample_rng rng;    /* seeds for unseeded requests */
	pthread_mutex_t guide_mu; /* guide_vocab's creation (by the first guided submit) */
	struct guide_vocab *guide_vocab;
	uint64_t next_id;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t mu; /* inbox, cancels, stop, stats */
	pthread_cond_t cv;
	struct eseq *inbox_head, *inbox_tail;
	int n_inbox;
	struct engine_req *cancels;
	bool stop, dead;
	char dead_msg[ERR_MSG_MAX];
	struct eseq *live; /* every admitted choice, engine thread only */
	struct engine_stats st;
	int n_sched_waiting;
};

void engine_options_init(struct engine_options *o)
{
	memset(o, 0, sizeof *o);
	o->enable_prefix_caching = true;
	o->kv_dtype = DT_F32;
	o->max_num_seqs = 256;
	o->max_num_batched_tokens = 8192;
	o->max_waiting = 4096;
	o->dcp_size = 1;
	o->dcp_interleave = 1;
}

void engine_cancel(struct engine_req *h)
{
	struct engine *eng = h->eng;
	if (!outbox_mark_cancelled(&h->ob))
		return;
	pthread_mutex_lock(&eng->mu);
	h->cancel_next = eng->cancels;
	eng->cancels = h;
	pthread_cond_signal(&eng->cv);
	pthread_mutex_unlock(&eng->mu);
}

void engine_release(struct engine_req *h)
{
	if (!h)
		return;
	engine_cancel(h);
	req_unref(h);
}

int engine_next_event(struct engine_req *h, struct engine_event *ev, int timeout_ms)
{
	return outbox_next(&h->ob, ev, timeout_ms);
}

const struct engine_logprob *engine_prompt_logprobs(struct engine_req *h, int *n)
{
	return outbox_prompt_logprobs(&h->ob, n);
}

/* ---- engine thread ---- */

/* the cache's dtype as the start-up log names it */
static const char *kv_dtype_label(enum dtype d)
{
	return d == DT_F8_E4M3 ? "fp8 e4m3 with scales" : d == DT_BF16 ? "bfloat16" : "float32";
}

static void live_remove(struct engine *eng, struct eseq *s)
{
	if (s->live_prev)
		s->live_prev->live_next = s->live_next;
	else
		eng->live = s->live_next;
	if (s->live_next)
		s->live_next->live_prev = s->live_prev;
}

/* A finished choice (why: finish_check's verdict, or ABORT from outside): out of the
 * scheduler unless finish_check did there, delivers its last event, records stats, frees it
 * (engine thread; the step's step_config.finish). */
static void seq_finish(void *ctx, struct eseq *s, enum engine_finish fin, const int32_t *tok, int n_tok,
		       const struct engine_logprob *lp, const char *error)
{
	struct engine *eng = ctx;
	struct err e;
	if (s->sr.status != SREQ_FINISHED) /* else the scheduler's finish_check ended it */
		sched_finish(eng->sched, &s->sr, fin);
	const char *d = "";
	size_t n = 0;
	if (fin != ENGINE_FINISH_ABORT) {
		if (seq_text_finish(&s->text, &e) == 0)
			n = seq_text_take(&s->text, true, &d);
	}
	eseq_deliver(s, tok, n_tok, lp, d, n, fin, error);
	double t = mono_now_s();
	pthread_mutex_lock(&eng->mu);
	eng->st.finished[fin]++;
	stats_observe(&eng->st.e2e, t - s->t_arrival);
	pthread_mutex_unlock(&eng->mu);
	struct engine_req *h = s->h;
	h->seqs[s->index] = NULL;
	live_remove(eng, s);
	eseq_free(s);
	if (--h->n_alive == 0)
		req_unref(h); /* the engine's reference */
}

static void abort_handle(struct engine *eng, struct engine_req *h, const char *error)
{
	req_ref(h); /* h must outlive its last choice's seq_finish below */
	for (int i = 0; i < h->ob.n; i++) {
		struct eseq *s = h->seqs[i];
		if (!s)
			continue;
		seq_finish(eng, s, ENGINE_FINISH_ABORT, NULL, 0, NULL, error);
	}
	req_unref(h);
}

static void abort_all(struct engine *eng, const char *error)
{
	while (eng->live) {
		struct engine_req *h = eng->live->h;
		abort_handle(eng, h, error);
	}
}

/* Inbox and cancellations (engine thread, eng->mu held on entry and exit). */
static void drain_inbox_locked(struct engine *eng)
{
	struct eseq *in = eng->inbox_head;
	struct engine_req *cancels = eng->cancels;
	eng->inbox_head = eng->inbox_tail = NULL;
	eng->n_inbox = 0;
	eng->cancels = NULL;
	pthread_mutex_unlock(&eng->mu);
	for (struct eseq *s = in, *next; s; s = next) {
		next = s->inbox_next;
		s->live_prev = NULL;
		s->live_next = eng->live;
		if (eng->live)
			eng->live->live_prev = s;
		eng->live = s;
		sched_add(eng->sched, &s->sr);
	}
	for (struct engine_req *h = cancels, *next; h; h = next) {
		next = h->cancel_next;
		abort_handle(eng, h, NULL);
		req_unref(h); /* the cancel list's reference */
	}
	pthread_mutex_lock(&eng->mu);
	/* the requests just drained count as waiting from now, not from the end of the next step
	 * (a long step would otherwise show them nowhere: /metrics read as idle meanwhile) */
	eng->st.n_running = sched_n_running(eng->sched);
	eng->n_sched_waiting = sched_n_waiting(eng->sched);
	eng->st.kv_usage = blocks_usage(eng->pool);
}

static void *engine_main(void *arg)
{
	struct engine *eng = arg;
	pthread_mutex_lock(&eng->mu);
	for (;;) {
		while (!eng->stop && !eng->inbox_head && !eng->cancels &&
		       sched_n_running(eng->sched) + sched_n_waiting(eng->sched) == 0)
			pthread_cond_wait(&eng->cv, &eng->mu);
		if (eng->stop)
			break;
		drain_inbox_locked(eng);
		pthread_mutex_unlock(&eng->mu);
		struct err e;
		int rc = step_run(eng->step, eng->guide_vocab, &e);
		pthread_mutex_lock(&eng->mu);
		struct sched_counters c;
		sched_counters_get(eng->sched, &c);
		eng->st.prefix_queries = c.prefix_queries;
		eng->st.prefix_hits = c.prefix_hits;
		eng->st.preemptions = c.preemptions;
		eng->st.steps = c.steps;
		eng->st.n_running = sched_n_running(eng->sched);
		eng->n_sched_waiting = sched_n_waiting(eng->sched);
		eng->st.kv_usage = blocks_usage(eng->pool);
		if (rc < 0) {
			LOG_E(MOD, "step failed: %s", e.msg);
			eng->dead = true;
			snprintf(eng->dead_msg, sizeof eng->dead_msg, "%s", e.msg);
			pthread_mutex_unlock(&eng->mu);
			abort_all(eng, e.msg);
			pthread_mutex_lock(&eng->mu);
			eng->stop = true; /* nothing more can run */
			break;
		}
	}
	/* shutting down: take what is left in the inbox and abort everything */
	drain_inbox_locked(eng);
	pthread_mutex_unlock(&eng->mu);
	abort_all(eng, eng->dead ? eng->dead_msg : "engine shut down");
	return NULL;
}

/* ---- lifecycle ---- */

/* --attention-backend, else MLASERVE_ATTENTION_BACKEND, else the model's kind's first */
static const struct attn_backend *pick_backend(const struct engine_options *o, struct err *e)
{
	const struct attn_backend *b = o->backend;
	const char *env = env_get(ENV_ATTENTION_BACKEND);
	if (!b && env && *env && !(b = attn_backend_by_name(env))) {
		err_set(e, "MLASERVE_ATTENTION_BACKEND: unknown attention backend '%s'", env);
		return NULL;
	}
	if (!b)
		b = model_default_backend(o->model);
	return model_check_backend(o->model, b, e) ? NULL : b;
}

static bool hit_ends_ok(void *model, int32_t block) { return model_prefix_resumable(model, block); }

int engine_new(const struct engine_options *o, struct engine **out, struct err *e)
{
	if (!o->model)
		return err_set(e, "engine: no model");
	struct engine *eng = calloc(1, sizeof *eng);
	if (!eng)
		return err_set(e, "engine: out of memory");
	eng->o = *o;
	eng->cfg = model_config(o->model);
	eng->vocab = eng->cfg->vocab_size;
	stats_init(&eng->st);
	pthread_mutex_init(&eng->mu, NULL);
	pthread_mutex_init(&eng->guide_mu, NULL);
	pthread_cond_init(&eng->cv, NULL);
	eng->backend = pick_backend(o, e);
	if (!eng->backend)
		goto fail;
	eng->max_model_len = o->max_model_len > 0 ? o->max_model_len : eng->cfg->max_position_embeddings;
	if (eng->max_model_len < 2) {
		err_set(e, "max_model_len %d is too small", eng->max_model_len);
		goto fail;
	}
	int mult = attn_backend_block_multiple(eng->backend);
	int bs = o->block_size > 0 ? o->block_size : attn_backend_default_block_size(eng->backend);
	if (bs % mult) {
		err_set(e, "block size %d: attention backend %s needs a multiple of %d", bs, eng->backend->name, mult);
		goto fail;
	}
	/* Under DCP the scheduler's block is virtual: bs x W tokens, of which each rank stores
	 * bs in its physical block of the same id (docs/mla-dcp.md §4.1). */
	int W = o->dcp_size > 1 ? o->dcp_size : 1;
	int vbs = bs * W;
	int I = o->dcp_interleave > 0 ? o->dcp_interleave : 1;
	if (W > 1 && bs % I) {
		err_set(e, "--dcp-kv-cache-interleave-size %d must divide the block size %d", I, bs);
		goto fail;
	}
	eng->block_size = vbs;
	if (o->max_num_seqs < 1 || o->max_num_batched_tokens < 1) {
		err_set(e, "max_num_seqs %d / max_num_batched_tokens %d must be >= 1", o->max_num_seqs,
			o->max_num_batched_tokens);
		goto fail;
	}
	if (o->kv_dtype != DT_F32 && o->kv_dtype != DT_BF16 && o->kv_dtype != DT_F8_E4M3) {
		err_set(e, "kv cache dtype %s is not supported (float32, bfloat16 or fp8)", dtype_name(o->kv_dtype));
		goto fail;
	}
	/* KV pool: the byte budget, but never more blocks than max_num_seqs full sequences use */
	size_t per_block = model_kv_bytes_per_block(o->model, bs, o->kv_dtype);
	size_t budget = o->kv_cache_memory;
	if (budget == 0) {
		budget = bigmem_available() / 4;
		if (budget > ((size_t)16 << 30))
			budget = (size_t)16 << 30;
	}
	size_t useful = (size_t)o->max_num_seqs * (size_t)((eng->max_model_len + vbs - 1) / vbs) + 1;
	size_t nb = budget / per_block;
	if (o->kv_cache_memory == 0 && nb > useful)
		nb = useful;
	if (nb > (size_t)1 << 30)
		nb = (size_t)1 << 30;
	if (nb * (size_t)vbs < (size_t)eng->max_model_len) {
		err_set(e,
			"kv cache of %zu bytes holds %zu tokens, less than max_model_len %d; raise --kv-cache-memory "
			"or lower --max-model-len",
			budget, nb * (size_t)vbs, eng->max_model_len);
		goto fail;
	}
	eng->n_blocks = (int)nb + 1; /* + the null block */
	if (model_kv_cache_init(o->model, &eng->kv, eng->n_blocks, bs, o->kv_dtype, e) < 0)
		goto fail;
	sample_rng_seed(&eng->rng, o->seed);
	uint64_t hash_key = sample_rng_next(&eng->rng) ^ (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)eng;
	if (blocks_new(eng->n_blocks, vbs, o->enable_prefix_caching, hash_key, &eng->pool, e) < 0)
		goto fail;
	struct sched_config sc = {.max_num_seqs = o->max_num_seqs,
				  .max_num_batched_tokens = o->max_num_batched_tokens,
				  .max_model_len = eng->max_model_len,
				  /* prompt logprobs: their fp32 logits rows, all requests together */
				  .chunk_budget = ENGINE_PROMPT_LOGPROBS_CHUNK,
				  .drop_last_hit = o->spec.method == SPEC_MTP,
				  .priority = o->priority_scheduling,
				  /* chained MTP passes write their latent rows past the step's tokens */
				  .lookahead = o->spec.method == SPEC_MTP ? o->spec.k - 1 : 0,
				  .hit_ends_ok = hit_ends_ok,
				  .hit_ctx = o->model};
	if (sched_new(&sc, eng->pool, &eng->sched, e) < 0)
		goto fail;
	eng->spec_k = o->spec.method != SPEC_NONE ? o->spec.k : 0;
	if (o->spec.method == SPEC_MTP && !model_has_mtp(o->model)) {
		err_set(e, "speculative method deepseek_mtp: the model was loaded without its MTP layer");
		goto fail;
	}
	if (eng->spec_k < 0 || eng->spec_k > SPEC_MAX_TOKENS) {
		err_set(e, "num_speculative_tokens %d outside [1, %d]", eng->spec_k, SPEC_MAX_TOKENS);
		goto fail;
	}
	struct attn_runner_rule rule;
	if (attn_threshold_setup(eng->backend, o->reorder_batch_threshold, o->dcp_size, o->dcp_interleave, eng->spec_k,
				 &rule, e) < 0)
		goto fail;
	eng->threshold = rule.threshold;
	struct runner_config rc = {.max_num_seqs = o->max_num_seqs,
				   .max_num_batched_tokens = o->max_num_batched_tokens,
				   .max_model_len = eng->max_model_len,
				   .block_size = vbs,
				   .vocab = eng->vocab,
				   .threshold = eng->threshold,
				   .require_uniform = rule.require_uniform,
				   .max_spec = eng->spec_k};
	if (runner_init(&eng->runner, &rc, o->model, eng->backend, &eng->kv, &o->hook, e) < 0)
		goto fail;
	struct step_config stc = {.sched = eng->sched,
				  .runner = &eng->runner,
				  .vocab = eng->vocab,
				  .max_num_seqs = o->max_num_seqs,
				  .spec = o->spec,
				  .eos_ids = eng->o.eos_ids,
				  .n_eos_ids = o->n_eos_ids,
				  .mu = &eng->mu,
				  .st = &eng->st,
				  .finish = seq_finish,
				  .ctx = eng};
	if (step_new(&stc, &eng->step, e) < 0)
		goto fail;
	eng->st.n_blocks = eng->n_blocks - 1;
	eng->st.block_size = vbs;
	eng->st.spec_k = eng->spec_k;
	LOG_I(MOD, "attention backend %s, reorder threshold %d (%s)", eng->backend->name, eng->threshold, rule.why);
	if (W > 1)
		LOG_I(MOD,
		      "kv cache: %d blocks x %d tokens = %lld tokens over %d DCP ranks (%d tokens per "
		      "rank and block; %.1f MiB per rank, %s, %zu bytes a token), prefix caching %s",
		      eng->n_blocks - 1, vbs, (long long)(eng->n_blocks - 1) * vbs, W, bs,
		      (double)per_block * eng->n_blocks / (1 << 20), kv_dtype_label(o->kv_dtype), per_block / bs,
		      o->enable_prefix_caching ? "on" : "off");
	else
		LOG_I(MOD,
		      "kv cache: %d blocks x %d tokens = %lld tokens (%.1f MiB, %s, %zu bytes a token), prefix "
		      "caching %s",
		      eng->n_blocks - 1, bs, (long long)(eng->n_blocks - 1) * bs,
		      (double)per_block * eng->n_blocks / (1 << 20), kv_dtype_label(o->kv_dtype), per_block / bs,
		      o->enable_prefix_caching ? "on" : "off");
	if (eng->kv.index_dim > 0)
		LOG_I(MOD,
		      "kv cache: with the sparse-attention indexer's keys (%d fp8 values + %d fp32 scales a token "
		      "and layer: %.1f MiB of it)",
		      eng->kv.index_dim, eng->kv.index_groups,
		      (double)kv_cache_index_bytes_per_block(eng->kv.n_layers, bs, eng->kv.index_dim) * eng->n_blocks /
			      (1 << 20));
	LOG_I(MOD, "max_model_len %d, max_num_seqs %d, max_num_batched_tokens %d", eng->max_model_len, o->max_num_seqs,
	      o->max_num_batched_tokens);
	if (o->spec.method == SPEC_MTP)
		LOG_I(MOD,
		      "speculative decoding: deepseek_mtp, the checkpoint's MTP layer drafts %d token%s per "
		      "step (its latent rows: one more cache layer%s)",
		      o->spec.k, o->spec.k > 1 ? "s" : "",
		      o->spec.k > 1 ? "; each draft after the first is a chained pass of the same layer" : "");
	else if (eng->spec_k > 0)
		LOG_I(MOD,
		      "speculative decoding: ngram, %d draft tokens per step, n-grams of %d to %d "
		      "tokens%s",
		      eng->spec_k, o->spec.lookup_min, o->spec.lookup_max,
		      rc.require_uniform ? " (proposals padded to one length: the backend runs uniform "
					   "decode queries)"
					 : "");
	if (eng->spec_k > 0 && o->spec.disable_by_batch_size > 0)
		LOG_I(MOD, "speculative decoding: no drafts while more than %d requests run",
		      o->spec.disable_by_batch_size);
	if (pthread_create(&eng->thread, NULL, engine_main, eng) != 0) {
		err_set(e, "engine: cannot start the engine thread");
		goto fail;
	}
	eng->thread_started = true;
	*out = eng;
	return 0;
fail:
	engine_free(eng);
	return -1;
}

void engine_free(struct engine *eng)
{
	if (!eng)
		return;
	if (eng->thread_started) {
		pthread_mutex_lock(&eng->mu);
		eng->stop = true;
		pthread_cond_signal(&eng->cv);
		pthread_mutex_unlock(&eng->mu);
		pthread_join(eng->thread, NULL);
	}
	/* cancels that raced with the shutdown: only their list reference is left to drop */
	while (eng->cancels) {
		struct engine_req *h = eng->cancels;
		eng->cancels = h->cancel_next;
		req_unref(h);
	}
	step_free(eng->step);
	if (eng->runner.logits)
		runner_fini(&eng->runner);
	sched_free(eng->sched);
	blocks_free_pool(eng->pool);
	if (eng->kv.data)
		kv_cache_fini(&eng->kv);
	guide_tokens_free(eng->guide_vocab);
	pthread_mutex_destroy(&eng->guide_mu);
	pthread_mutex_destroy(&eng->mu);
	pthread_cond_destroy(&eng->cv);
	free(eng);
}

bool engine_alive(const struct engine *eng)
{
	struct engine *m = (struct engine *)eng;
	pthread_mutex_lock(&m->mu);
	bool ok = !m->dead && !m->stop;
	pthread_mutex_unlock(&m->mu);
	return ok;
}

int engine_max_model_len(const struct engine *eng) { return eng->max_model_len; }
bool engine_priority_scheduling(const struct engine *eng) { return eng->o.priority_scheduling; }
int engine_block_size(const struct engine *eng) { return eng->block_size; }
int engine_num_blocks(const struct engine *eng) { return eng->n_blocks - 1; }
struct kv_cache *engine_kv_cache(struct engine *eng) { return &eng->kv; }
const struct attn_backend *engine_backend(const struct engine *eng) { return eng->backend; }

void engine_stats_get(struct engine *eng, struct engine_stats *s)
{
	pthread_mutex_lock(&eng->mu);
	*s = eng->st;
	s->n_waiting = eng->n_inbox + eng->n_sched_waiting;
	pthread_mutex_unlock(&eng->mu);
}

/* ---- submit ---- */

static int seq_new(struct engine *eng, struct engine_req *h, int index, const int32_t *prompt, int n_prompt,
		   const struct sampling_params *p, uint64_t unseeded, double t, struct eseq **out, struct err *e)
{
	struct eseq *s = calloc(1, sizeof *s);
	if (!s)
		return err_set(e, "request: out of memory");
	s->p = *p;
	s->p.guide = NULL; /* the guide state holds it (below) */
	/* the request's lists, owned by the choice */
	int n_bad_tok = 0;
	for (int i = 0; i < p->n_bad; i++)
		n_bad_tok += p->bad_lens[i];
	size_t n_ids = (size_t)p->n_allowed + (size_t)n_bad_tok + (size_t)p->n_bad;
	if (n_ids && !(s->owned_ids = malloc(sizeof *s->owned_ids * n_ids))) {
		free(s);
		return err_set(e, "request: out of memory");
	}
	if (n_ids) {
		int32_t *o = s->owned_ids;
		if (p->n_allowed)
			memcpy(o, p->allowed_ids, sizeof *o * (size_t)p->n_allowed);
		s->p.allowed_ids = o;
		o += p->n_allowed;
		if (n_bad_tok)
			memcpy(o, p->bad_words, sizeof *o * (size_t)n_bad_tok);
		s->p.bad_words = o;
		o += n_bad_tok;
		if (p->n_bad)
			memcpy(o, p->bad_lens, sizeof *o * (size_t)p->n_bad);
		s->p.bad_lens = o;
	}
	int max_tokens = eng->max_model_len - n_prompt;
	if (p->max_tokens > 0 && p->max_tokens < max_tokens)
		max_tokens = p->max_tokens;
	s->p.max_tokens = max_tokens;
	if (sched_req_init(&s->sr, 0, prompt, n_prompt, n_prompt + max_tokens, eng->block_size, e) < 0) {
		free(s->owned_ids);
		free(s);
		return -1;
	}
	if (p->cache_salt)
		s->sr.kv.salt = blocks_salt(eng->pool, p->cache_salt, strlen(p->cache_salt));
	s->p.cache_salt = NULL; /* the caller's; hashed above */
	s->sr.max_tokens = max_tokens;
	s->sr.priority = p->priority;
	s->sr.min_tokens = p->min_tokens;
	s->sr.ignore_eos = p->ignore_eos;
	/* generation_config eos ids: the first is EOS (stop_reason null), the others act as
	 * stop token ids unless ignore_eos (vLLM update_from_generation_config) */
	const struct engine_options *o = &eng->o;
	s->sr.eos = o->n_eos_ids > 0 ? o->eos_ids[0] : -1;
	int n_stop = 0;
	for (int i = 0; i < p->n_stop_token_ids && n_stop < ENGINE_MAX_STOP_IDS; i++)
		s->stop_ids[n_stop++] = p->stop_token_ids[i];
	if (!p->ignore_eos)
		for (int i = 1; i < o->n_eos_ids && n_stop < ENGINE_MAX_STOP_IDS; i++)
			s->stop_ids[n_stop++] = o->eos_ids[i];
	s->sr.stop_ids = s->stop_ids;
	s->sr.n_stop_ids = n_stop;
	for (int i = 0; i < o->n_eos_ids; i++)
		s->mask_ids[s->n_mask++] = o->eos_ids[i];
	for (int i = 0; i < n_stop; i++)
		s->mask_ids[s->n_mask++] = s->stop_ids[i];
	sample_rng_seed(&s->rng, p->has_seed ? p->seed + (uint64_t)index : unseeded);
	if (seq_text_init(&s->text, o->tok, &s->p, prompt, n_prompt, e) < 0) {
		sched_req_fini(&s->sr);
		free(s->owned_ids);
		free(s);
		return -1;
	}
	if (p->guide) {
		if (guide_state_new(p->guide, &s->guide, e) < 0) { /* its own grammar reference */
			eseq_free(s);
			return -1;
		}
		s->guide_on = p->guide_after < 0;
	}
	if (p->prompt_logprobs >= 0 && n_prompt > 1) {
		/* choice 0 computes them; every choice runs its whole prompt at choice 0's pace
		 * (no cache hit, the same chunks), so none gets a token before they are ready */
		s->sr.no_prefix_hit = true;
		s->sr.max_chunk = ENGINE_PROMPT_LOGPROBS_CHUNK;
		s->sr.prompt_rows = index == 0;
	}
	if (p->prompt_logprobs >= 0 && index == 0) {
		if (!(h->ob.prompt_lps = calloc((size_t)n_prompt, sizeof *h->ob.prompt_lps))) {
			eseq_free(s);
			return err_set(e, "request: out of memory for %d prompt logprobs", n_prompt);
		}
		h->ob.n_prompt_lps = n_prompt;
		h->ob.prompt_lps_ready = n_prompt == 1; /* nothing to compute */
	}
	s->h = h;
	s->index = index;
	s->t_arrival = t;
	*out = s;
	return 0;
}

/* The vocabulary trie of guided decoding, built by the first guided request (~60 ms for a
 * 100K-token vocabulary). */
static int guide_vocab_ready(struct engine *eng, struct err *e)
{
	if (!eng->o.tok)
		return err_set(e, "guided decoding needs a tokenizer");
	pthread_mutex_lock(&eng->guide_mu);
	int rc = 0;
	if (!eng->guide_vocab) {
		struct guide_vocab *v = NULL;
		rc = guide_tokens_new(eng->o.tok, eng->vocab, &v, e);
		if (rc == 0)
			eng->guide_vocab = v;
	}
	pthread_mutex_unlock(&eng->guide_mu);
	return rc;
}

int engine_submit(struct engine *eng, const int32_t *prompt, int prompt_len, const struct sampling_params *p,
		  struct engine_req **out, struct err *e)
{
	*out = NULL;
	if (prompt_len < 1) {
		err_set(e, "prompt is empty");
		return ENGINE_EINVAL;
	}
	if (prompt_len >= eng->max_model_len) {
		err_set(e,
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. "
			"Please reduce the length of the input messages.",
			eng->max_model_len, prompt_len);
		return ENGINE_EINVAL;
	}
	for (int i = 0; i < prompt_len; i++)
		if (prompt[i] < 0 || prompt[i] >= eng->vocab) {
			err_set(e, "prompt token %d at position %d is out of vocabulary (vocab %d)", (int)prompt[i], i,
				eng->vocab);
			return ENGINE_EINVAL;
		}
	if (sampling_params_validate(p, eng->vocab, e) < 0)
		return ENGINE_EINVAL;
	if (p->priority != 0 && !eng->o.priority_scheduling) {
		err_set(e, "priority %d needs --scheduling-policy priority (first come, first served here)",
			p->priority);
		return ENGINE_EINVAL;
	}
	if (p->n_stop > 0 && !eng->o.tok) {
		err_set(e, "stop strings need a tokenizer");
		return ENGINE_EINVAL;
	}
	if (p->guide && guide_vocab_ready(eng, e) < 0)
		return ENGINE_EINVAL;
	pthread_mutex_lock(&eng->mu);
	bool dead = eng->dead || eng->stop;
	bool full = eng->n_inbox + eng->n_sched_waiting + p->n > eng->o.max_waiting;
	uint64_t unseeded = sample_rng_next(&eng->rng);
	pthread_mutex_unlock(&eng->mu);
	if (dead) {
		err_set(e, "engine is not running");
		return ENGINE_EDEAD;
	}
	if (full) {
		err_set(e, "server is overloaded: %d requests waiting", eng->o.max_waiting);
		return ENGINE_EQUEUE_FULL;
	}
	struct engine_req *h = req_new(p->n, eng);
	if (!h) {
		err_set(e, "request: out of memory");
		return ENGINE_EINVAL;
	}
	struct eseq *first = NULL, *last = NULL;
	double t = mono_now_s();
	int rc = 0;
	for (int i = 0; i < p->n && rc == 0; i++) {
		struct eseq *s = NULL;
		if (seq_new(eng, h, i, prompt, prompt_len, p, unseeded + (uint64_t)i, t, &s, e) < 0) {
			rc = ENGINE_EINVAL;
			break;
		}
		h->seqs[i] = s;
		if (last)
			last->inbox_next = s;
		else
			first = s;
		last = s;
	}
	if (rc) {
		for (int i = 0; i < p->n; i++)
			if (h->seqs[i])
				eseq_free(h->seqs[i]);
		req_discard(h);
		return rc;
	}
	h->n_alive = p->n;
	pthread_mutex_lock(&eng->mu);
	uint64_t id = eng->next_id;
	eng->next_id += (uint64_t)p->n;
	for (struct eseq *s = first; s; s = s->inbox_next)
		s->sr.id = id++;
	if (eng->inbox_tail)
		eng->inbox_tail->inbox_next = first;
	else
		eng->inbox_head = first;
	eng->inbox_tail = last;
	eng->n_inbox += p->n;
	pthread_cond_signal(&eng->cv);
	pthread_mutex_unlock(&eng->mu);
	*out = h;
	return 0;
}
