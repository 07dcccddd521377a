/* The scheduler: vLLM V1's algorithm (docs/reference.md B.2/B.3/B.6). Each step gives every scheduled
 * request some number of new tokens so num_computed catches up with num_tokens: running
 * requests first (in admission order), then waiting ones FCFS, under a token budget and a
 * running-request cap, with chunked prefill, recompute preemption of the most recently
 * admitted request when blocks run out, and no admission in a step that preempted.
 * Pure logic: requests are token ids and block ids, never tensors. */
#ifndef MLA_ENGINE_SCHED_H
#define MLA_ENGINE_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "engine/blocks.h"
#include "engine/finish.h"

enum sched_status { SREQ_WAITING, SREQ_RUNNING, SREQ_PREEMPTED, SREQ_FINISHED };

struct sched_req {
	uint64_t id;
	/* tokens: prompt then outputs; room for max_len (allocated by sched_req_init) */
	int32_t *tokens;
	int n_prompt, n_tokens, max_len;
	int n_computed; /* tokens whose KV is cached or scheduled (drafts included) */
	int n_spec;     /* speculative drafts at tokens[n_tokens, n_tokens + n_spec), set
				 * by the engine's proposer (n_tokens + n_spec < max_len); after
				 * sched_step, those scheduled this step */
	int n_cached;   /* prefix-cache hit at first admission; -1 before */
	int n_preemptions;
	int priority;     /* --scheduling-policy priority: lower runs first (vLLM's) */
	uint64_t arrival; /* set by sched_add: the tie-break, kept through preemption */
	enum sched_status status;
	/* stop conditions (B.6), applied by finish_check */
	int max_tokens; /* output tokens; already capped to max_model_len - prompt */
	int min_tokens;
	bool ignore_eos;
	int32_t eos; /* -1 = none */
	int n_stop_ids;
	const int32_t *stop_ids;   /* not owned */
	enum engine_finish finish; /* why it finished (set by sched_finish) */
	int32_t stop_token;        /* stop_reason for a stop token id, else -1 */
	struct kv_seq kv;
	bool no_prefix_hit; /* computes its whole prompt (prompt logprobs need every row) */
	bool prompt_rows;   /* the runner returns a logits row per prompt position */
	int max_chunk;      /* > 0: at most this many tokens per step (bounds those rows) */
	/* this step */
	int n_sched;    /* tokens scheduled */
	int step_start; /* n_computed before this step (first position) */
	/* waiting deque */
	struct sched_req *prev, *next;
};

/* max_len: prompt + output capacity in tokens (<= max_model_len). */
int sched_req_init(struct sched_req *r, uint64_t id, const int32_t *prompt, int n_prompt, int max_len, int block_size,
		   struct err *e);
void sched_req_fini(struct sched_req *r);
static inline int sched_req_n_output(const struct sched_req *r) { return r->n_tokens - r->n_prompt; }

struct sched_config {
	int max_num_seqs;
	int max_num_batched_tokens;
	int max_model_len;
	int chunk_budget; /* > 0: the tokens per step of all requests with a max_chunk together
			   * (their logits rows: prompt logprobs) */
	/* vLLM's --scheduling-policy priority: the waiting queue is ordered by (priority,
	 * arrival) instead of arrival, and when blocks run out the running request with the
	 * largest (priority, arrival) is preempted instead of the most recently admitted */
	bool priority;
	int lookahead;      /* KV slots past the scheduled tokens of a request whose step completes
				 * its known tokens (deepseek_mtp with k drafts: k - 1, the positions
				 * of its chained passes; vLLM's num_lookahead_tokens) */
	bool drop_last_hit; /* a prefix hit gives up its last block, to be computed again
				 * (deepseek_mtp, as vLLM's EAGLE/MTP: the MTP row of a block's last
				 * position depends on the next block's first token, and the step
				 * needs the hidden states the hit would skip) */
	/* whether a hit may end after block `block` (NULL: any): a model that keeps the state at
	 * a block's end for some blocks only (DeepSeek-V4's window rows) */
	bool (*hit_ends_ok)(void *ctx, int32_t block);
	void *hit_ctx;
};

struct sched_counters {
	uint64_t prefix_queries, prefix_hits; /* tokens */
	uint64_t preemptions;
	uint64_t steps;
};

struct sched;

/* pool: not owned. */
int sched_new(const struct sched_config *c, struct block_pool *pool, struct sched **out, struct err *e);
void sched_free(struct sched *s);

/* The step's decisions. reqs[i] gets reqs[i]->n_sched tokens starting at position
 * reqs[i]->step_start; reqs are in scheduling order (running first). */
struct sched_output {
	int n;
	struct sched_req **reqs; /* owned by the scheduler, valid until the next sched_step */
	int total_tokens;
	int n_preempted;
};

/* Appends r to the waiting queue (status WAITING): at the back, or under the priority
 * policy behind every request of the same or a lower priority value. */
void sched_add(struct sched *s, struct sched_req *r);
/* Removes r wherever it is, frees its blocks, marks it FINISHED with `why`. Do not call
 * between sched_step and sched_update for a request in that step's output. */
void sched_finish(struct sched *s, struct sched_req *r, enum engine_finish why);
/* The finish_check input of r's output token n_out (1-based; already appended). */
struct finish_in sched_req_finish_in(const struct sched *s, const struct sched_req *r, int n_out);
/* Runs one scheduling decision and advances num_computed of every scheduled request. */
void sched_step(struct sched *s, struct sched_output *o);
/* After the forward: sampled[i] is the token for o->reqs[i], or -1 when that request is still
 * mid-prefill (no logits row). Appends tokens, applies the token stop conditions (finish_check
 * without text), and finishes (frees the blocks of) stopped requests. Returns the number of
 * requests that finished. The tests' whole-step form of sched_req_append, as is
 * sched_update_n (the engine appends request by request). */
int sched_update(struct sched *s, const struct sched_output *o, const int32_t *sampled);
/* One request's part of sched_update_n: appends its n tokens up to the first that ends it;
 * true if it finished. Nothing for a request that is not running or for n <= 0. */
bool sched_req_append(struct sched *s, struct sched_req *r, const int32_t *tok, int n);
/* The same for steps with drafts: o->reqs[i] gets the n_sampled[i] tokens at
 * sampled[i * stride], in order, up to the first that stops it; drafts that were not kept
 * are uncomputed again (num_computed falls back to n_tokens - 1) and n_spec becomes 0. */
int sched_update_n(struct sched *s, const struct sched_output *o, const int32_t *sampled, int stride,
		   const int32_t *n_sampled);

/* True iff r's step completed its known tokens (so a token must be sampled for it). */
static inline bool sched_req_wants_token(const struct sched_req *r) { return r->n_computed >= r->n_tokens; }
/* Logits rows r needs this step: its last known token and each scheduled draft. */
static inline int sched_req_n_rows(const struct sched_req *r)
{
	return r->n_computed >= r->n_tokens ? r->n_computed - r->n_tokens + 1 : 0;
}

int sched_n_running(const struct sched *s);
int sched_n_waiting(const struct sched *s);
struct sched_req *sched_waiting_head(const struct sched *s);
void sched_counters_get(const struct sched *s, struct sched_counters *c);

#endif
