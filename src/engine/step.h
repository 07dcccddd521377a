/* One engine step: schedule, run the forward, sample each choice's token (and, with
 * speculative decoding, verify its drafts), append, run the output stage, and propose the
 * next drafts. What engine.c needs of the step; what the step needs of the engine comes in
 * struct step_config. Engine thread only. */
#ifndef MLA_ENGINE_STEP_H
#define MLA_ENGINE_STEP_H

#include <pthread.h>
#include <stdint.h>

#include "base/err.h"
#include "engine/finish.h"
#include "engine/spec.h"

struct engine_logprob;
struct engine_stats;
struct eseq;
struct guide_vocab;
struct runner;
struct sched;

struct step_config {
	struct sched *sched;   /* not owned */
	struct runner *runner; /* not owned */
	int vocab, max_num_seqs;
	struct spec_config spec; /* method SPEC_NONE: no speculation */
	const int32_t *eos_ids;  /* the model's EOS ids, that end a guided output */
	int n_eos_ids;
	/* the engine's counters, which the step updates under *mu */
	pthread_mutex_t *mu;
	struct engine_stats *st;
	/* The engine's end of a choice (why: finish_check's verdict, or ABORT): takes it out of
	 * the scheduler unless finish_check did there, delivers its last event (tok, lp: the
	 * token that ended it, if any) and frees it. */
	void (*finish)(void *ctx, struct eseq *s, enum engine_finish why, const int32_t *tok, int n_tok,
		       const struct engine_logprob *lp, const char *error);
	void *ctx;
};

struct step;

/* On failure *out, when set, still goes to step_free. */
int step_new(const struct step_config *c, struct step **out, struct err *e);
void step_free(struct step *st);

/* Runs one step. gv: guided decoding's vocabulary (NULL until the first guided request
 * made it). -1 on a forward error: the engine cannot go on. */
int step_run(struct step *st, struct guide_vocab *gv, struct err *e);

#endif
