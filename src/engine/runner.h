/* The model runner: turns the scheduler's decisions into one flat batch (reordered decodes
 * -> extends -> prefills, positions, slot mapping, block tables, logits rows), runs the
 * forward (locally or through the distributed hook) and hands back one logits row per
 * request that completed its known tokens. Step buffers come from a per-step arena. */
#ifndef MLA_ENGINE_RUNNER_H
#define MLA_ENGINE_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/attn.h"
#include "base/arena.h"
#include "engine/plan.h"
#include "engine/sched.h"

struct runner_config {
	int max_num_seqs, max_num_batched_tokens, max_model_len;
	int block_size, vocab;
	int threshold;        /* resolved reorder_batch_threshold; 0 = no reordering */
	bool require_uniform; /* decodes share one q_len (attn_threshold_setup) */
	int max_spec;         /* speculative drafts per request (0 = none) */
};

/* Where one request of the last step (o->reqs[i]) sits in the runner's plans and logits. */
struct runner_row {
	int32_t logit; /* its first logits row (then one per draft), or -1 */
	/* prompt logprobs: its rows for positions [prow_pos, + n_prow) from row prow (each
	 * gives the next prompt token's logprob) */
	int32_t prow, n_prow, prow_pos;
	int32_t row;     /* its first token row in the last plan */
	int32_t mtp_row; /* its logits row in the last MTP pass, or -1 */
};

struct runner {
	struct runner_config c;
	struct model *model; /* NULL: plan building only (tests) */
	const struct attn_backend *backend;
	struct kv_cache *kv;
	struct engine_forward_hook hook;
	struct arena arena; /* per-step plan arrays */
	float *logits;      /* [logits_cap, vocab] */
	int logits_cap;     /* rows; grows to what a step with drafts needs */
	/* last step: seq k of the plan is o->reqs[perm[k]] (a permutation of plan positions,
	 * as the reorder rule fills it: not per request) */
	int32_t *perm;          /* [max_num_seqs] */
	struct runner_row *req; /* [max_num_seqs] o->reqs[i]'s rows in the last plans */
};

int runner_init(struct runner *rn, const struct runner_config *c, struct model *model,
		const struct attn_backend *backend, struct kv_cache *kv, const struct engine_forward_hook *hook,
		struct err *e);
void runner_fini(struct runner *rn);

/* Builds the plan of `o` into the arena (reset first). */
void runner_build_plan(struct runner *rn, const struct sched_output *o, struct step_plan *p);

/* Builds the plan, runs the forward, and points rows[i] at the fp32 logits [vocab] of
 * o->reqs[i], or NULL when that request is still mid-prefill. A request with drafts has
 * sched_req_n_rows() consecutive rows from there: its last known token's, then each
 * draft's. */
int runner_execute(struct runner *rn, const struct sched_output *o, const float **rows, struct err *e);

/* After runner_execute: o->reqs[i]'s logits rows for prompt positions (sched_req.prompt_rows):
 * *n rows [vocab] from the returned pointer, for positions *pos0, *pos0 + 1, ...; NULL when
 * none this step. */
const float *runner_prompt_rows(const struct runner *rn, int i, int *pos0, int *n);

/* What the MTP passes ask of o->reqs[i]: m[i] (runner_execute_mtp reads n and want, each
 * chained pass tok). */
struct runner_mtp {
	int n;       /* positions of the first pass from its step_start */
	bool want;   /* the first pass's draft logits */
	int32_t tok; /* a chained pass's input token, -1: none */
};

/* After runner_execute, the MTP module's step (model_mtp_forward): o->reqs[i] runs its MTP
 * rows for the m[i].n positions from its step_start (each with the known token after it
 * and the hidden state of the same position in the step just run), reordered for the
 * backend like any plan; rows[i] gets the logits [vocab] of its last position when m[i].want
 * (the draft after its last known token), else NULL. Overwrites the step's logits. */
int runner_execute_mtp(struct runner *rn, const struct sched_output *o, const struct runner_mtp *m, const float **rows,
		       struct err *e);

/* After runner_execute_mtp (or another chained pass), one chained pass of the MTP module
 * (vLLM's MTP with num_speculative_tokens > 1): o->reqs[i] with m[i].tok >= 0 runs one token,
 * m[i].tok, at position r->n_tokens - 2 + depth (depth 1 follows the first pass's draft),
 * fed the module's own output row of its last pass; rows[i] gets the logits [vocab] of the
 * token after it, else NULL. The position's KV slot must be allocated (the scheduler's
 * lookahead); its MTP latent row is overwritten by the next step's first pass before any
 * later position reads it. Overwrites the step's logits. */
int runner_execute_mtp_chain(struct runner *rn, const struct sched_output *o, const struct runner_mtp *m, int depth,
			     const float **rows, struct err *e);

#endif
