/* Speculative decoding's part of a step, after its outputs: deepseek_mtp's MTP passes and
 * each decoding choice's drafts for the next step (ngram lookup, spec.h, or the MTP
 * module's). The step hands in its scheduler, runner and scratch (struct draft's borrowed
 * fields); engine thread only.
 *
 * Drafts live in the choice's own token array past n_tokens (sched_req.n_spec), so the
 * scheduler schedules them like any tokens (a cut keeps a prefix of them) and the runner reads
 * them from the same place. A backend that needs uniform decode queries (FLASHMLA) gets one
 * draft count for the whole step, since a mixed batch would send the shorter queries to the
 * prefill path (slower, other rounding): short proposals are padded with their last token, and
 * a step drafts nothing when padding would be most of its drafts.
 *
 * MTP (deepseek_mtp): the module's decoder layer is layers[L] and writes latent cache layer L
 * (model_kv_layers counts it). The plans (STEP_PLAN_MTP, STEP_PLAN_MTP_CHAIN) are built by the
 * runner from the scheduler's records and broadcast like any plan, so the model never sees a
 * request. A chained pass's latent row lands at a position the model has not computed yet
 * (sched_config.lookahead holds it): a guess that the next step's first pass rewrites before
 * any later position reads it, as a layer writes a step's latent rows before its attention.
 * Chained drafts honour logit_bias, bans and the grammar (advanced over the earlier drafts on
 * a scratch copy). */
#ifndef MLA_ENGINE_DRAFT_H
#define MLA_ENGINE_DRAFT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "engine/runner.h"
#include "engine/sched.h"
#include "engine/spec.h"

struct guide_state;
struct guide_vocab;

struct draft {
	/* borrowed from the step */
	struct sched *sched;
	struct runner *runner;
	struct spec_config spec;
	int vocab;
	const int32_t *eos_ids; /* the model's EOS ids, that end a guided output */
	int n_eos_ids;
	const float **rows;   /* [max_num_seqs] logits rows: the MTP passes' go there */
	uint8_t *ban, *allow; /* [vocab] scratch masks, free between samples */
	float *biased;        /* [vocab] scratch for a row with its logit bias */
	/* its own */
	struct runner_mtp *mtp;        /* [max_num_seqs] the MTP passes' asks */
	int *n_mtp;                    /* [max_num_seqs] o->reqs[i]'s MTP drafts this step */
	struct guide_state *mtp_guide; /* a guided choice's state after its drafts so far */
};

/* Allocates d's own arrays for max_num_seqs choices (set the borrowed fields first). */
int draft_init(struct draft *d, int max_num_seqs, struct err *e);
void draft_fini(struct draft *d);

/* deepseek_mtp: runs the MTP module over the step o just run (alive[i]: o->reqs[i] is still
 * running after the step's outputs) and puts each decoding choice's drafts at
 * tokens[n_tokens, ...). gv: guided decoding's vocabulary (NULL before the first guided
 * request). */
int draft_mtp(struct draft *d, const struct sched_output *o, const bool *alive, struct guide_vocab *gv, struct err *e);
/* Sets each decoding choice's n_spec for the next step: its MTP drafts, or an ngram
 * lookup's; padded to one count for a backend that runs only uniform decode queries. */
void draft_propose(struct draft *d, const struct sched_output *o, const bool *alive);

#endif
