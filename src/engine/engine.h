/* The inference engine: a thread that owns the scheduler, the KV block pool and the model
 * runner, fed by engine_submit and drained through per-request handles. The HTTP server and
 * the offline `generate` command both use this API (docs/DESIGN.md §2).
 *
 * Threading: every function here is safe to call from any thread. Only the engine thread
 * touches scheduler state; submit/cancel post to its inbox, events are delivered through a
 * per-request outbox (mutex + condition variable, no spinning).
 *
 * Typical use:
 *     struct sampling_params sp;
 *     sampling_params_init(&sp, &defaults);      // generation_config defaults
 *     sp.max_tokens = 64;
 *     struct engine_req *h;
 *     if (engine_submit(eng, ids, n_ids, &sp, &h, &e) < 0) ... // ENGINE_EQUEUE_FULL -> 503
 *     struct engine_event ev;
 *     while (engine_next_event(h, &ev, -1) == ENGINE_EV_OK) { ...ev.text, ev.finish... }
 *     engine_release(h);
 */
#ifndef MLA_ENGINE_ENGINE_H
#define MLA_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/err.h"
#include "engine/event.h"  /* struct engine_event, struct engine_logprob */
#include "engine/finish.h" /* enum engine_finish, engine_finish_name */
#include "engine/params.h" /* struct sampling_params, sampling_params_init */
#include "engine/plan.h"   /* struct engine_forward_hook */
#include "engine/spec.h"   /* struct spec_config */
#include "engine/stats.h"  /* struct engine_stats */

struct model;
struct attn_backend;
struct tok;
struct kv_cache;

#define ENGINE_PROMPT_LOGPROBS_CHUNK \
	256 /* prompt tokens per step of the prompt_logprobs
					  * requests together: bounds their fp32 logits rows
					  * [256, vocab] */

/* ---- sampling parameters: engine/params.h ---- */

/* ---- engine options ---- */

struct engine_options {
	struct model *model;                /* loaded; not owned */
	const struct attn_backend *backend; /* NULL: MLASERVE_ATTENTION_BACKEND or the best */
	struct tok *tok;                    /* not owned; NULL: no text, no stop strings */
	int block_size;                     /* tokens per KV block; 0 = default */
	int reorder_batch_threshold;        /* overrides the backend's declared value; 0 = keep */
	size_t kv_cache_memory;             /* bytes for the KV pool; 0 = auto */
	enum dtype kv_dtype;                /* DT_F32 or DT_BF16 (engine_args resolves "auto") */
	bool enable_prefix_caching;         /* default true */
	int max_num_seqs;                   /* running requests per step */
	int max_num_batched_tokens;         /* token budget per step */
	int max_model_len;                  /* 0 = max_position_embeddings */
	int max_waiting;                    /* bound on the waiting queue; submit -> ENGINE_EQUEUE_FULL */
	uint64_t seed;                      /* engine RNG for unseeded requests */
	int n_eos_ids;                      /* generation_config eos ids (+ config eos) */
	int32_t eos_ids[8];
	struct engine_forward_hook hook; /* forward == NULL: local model_forward */
	/* Decode context parallelism as seen by the scheduler/runner (1 = off): resolves the
	 * reorder threshold (docs/mla-dcp.md §1.1) and makes the scheduler's block virtual,
	 * block_size x dcp_size tokens, while the local KV cache keeps block_size (§4.1). */
	int dcp_size, dcp_interleave;
	/* Speculative decoding (method SPEC_NONE: off): drafts verified in the next step; the
	 * outputs are those without it, token for token. */
	struct spec_config spec;
	/* --scheduling-policy priority: requests wait and are preempted by (priority, arrival)
	 * (sampling_params.priority); false: first come, first served */
	bool priority_scheduling;
};

/* Fills defaults: block_size 0 (auto), prefix caching on, max_num_seqs 256,
 * max_num_batched_tokens 8192, max_waiting 4096, kv_dtype DT_F32. */
void engine_options_init(struct engine_options *o);

struct engine;

/* Sizes and allocates the KV pool, resolves the backend and its reorder threshold (logged),
 * and starts the engine thread. */
int engine_new(const struct engine_options *o, struct engine **out, struct err *e);
/* Stops the thread (aborting every request still in flight: their handles end with
 * finish ABORT) and frees everything except handles still held by callers, which may still
 * be read and released afterwards. No other call on `eng` (submit, cancel) may run
 * concurrently with or after engine_free. Does not free the model or tokenizer. */
void engine_free(struct engine *eng);
bool engine_alive(const struct engine *eng); /* false after a fatal forward error */
int engine_max_model_len(const struct engine *eng);
bool engine_priority_scheduling(const struct engine *eng); /* --scheduling-policy priority */
int engine_block_size(const struct engine *eng);           /* the scheduler's (virtual under DCP) */
int engine_num_blocks(const struct engine *eng);           /* usable blocks (null block excluded) */
/* For a distributed forward hook on rank 0: the engine's paged KV cache (n_blocks + 1 blocks
 * including the null block) and its attention backend. hook.ctx may point to a struct the
 * caller completes after engine_new returns: the hook is never called before the first
 * engine_submit. */
struct kv_cache *engine_kv_cache(struct engine *eng);
const struct attn_backend *engine_backend(const struct engine *eng);

/* ---- requests ---- */

enum {
	ENGINE_EINVAL = -1,      /* bad prompt or parameters (message in err) -> 400 */
	ENGINE_EQUEUE_FULL = -2, /* waiting queue at max_waiting -> 503 */
	ENGINE_EDEAD = -3,       /* engine stopped or failed -> 503 */
};

struct engine_req; /* a handle: reference counted, shared by the engine and the caller */

/* Copies prompt and params. prompt_len must be in [1, max_model_len - 1]; max_tokens is
 * capped at max_model_len - prompt_len. On success *out holds one caller reference. */
int engine_submit(struct engine *eng, const int32_t *prompt, int prompt_len, const struct sampling_params *p,
		  struct engine_req **out, struct err *e);
/* Client went away: the request finishes with ABORT, its blocks are freed at the next step.
 * Idempotent; harmless after the request finished. */
void engine_cancel(struct engine_req *r);
/* Drops the caller's reference (cancels the request if it is still running). */
void engine_release(struct engine_req *r);

/* Waits for the next event (struct engine_event: engine/event.h): timeout_ms < 0 waits forever, 0 polls. */
int engine_next_event(struct engine_req *r, struct engine_event *ev, int timeout_ms);

/* A request submitted with prompt_logprobs >= 0: lp[i] is prompt token i's logprob given
 * the tokens before it (i >= 1; lp[0] is unused: the first token has none), *n the prompt
 * length. NULL until the whole prompt was run (always so once any choice's token event or
 * end was read, unless the request was cancelled or failed first) or when not asked. Such
 * a request computes its whole prompt (no prefix-cache hit); the prompt_logprobs requests of
 * a step run at most ENGINE_PROMPT_LOGPROBS_CHUNK prompt tokens together. Valid until engine_release. */
const struct engine_logprob *engine_prompt_logprobs(struct engine_req *r, int *n);

/* ---- metrics (docs/reference.md C.8; struct engine_stats: engine/stats.h) ---- */

void engine_stats_get(struct engine *eng, struct engine_stats *s);

#endif
