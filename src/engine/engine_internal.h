/* What engine.c (the thread, requests, lifecycle) and step.c (one step: schedule, forward,
 * sample and verify drafts, outputs, proposals) share. Engine thread only, unless said. */
#ifndef MLA_ENGINE_ENGINE_INTERNAL_H
#define MLA_ENGINE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "attn/kv_cache.h"
#include "engine/draft.h"
#include "engine/engine.h"
#include "engine/runner.h"
#include "engine/sample.h"
#include "engine/req.h"
#include "engine/sched.h"
#include "engine/spec.h"

struct model_config;
struct guide_vocab;
struct guide_state;

/* Choice i of the step (o.reqs[i]) after the forward: what it sampled and how its step
 * ended. Indexed by step position rather than kept in struct eseq because the choice may be
 * finished and freed during the step (engine.alive says so). */
struct step_slot {
	int32_t sampled[SPEC_MAX_TOKENS + 1]; /* this step's tokens: the next, then one per kept draft */
	int n_sampled;
	int n_before;            /* output tokens before the step */
	enum finish_guide guide; /* the grammar's verdict while sampling */
};

struct engine {
	struct engine_options o;
	const struct model_config *cfg;
	int vocab, max_model_len, block_size, n_blocks, threshold;
	const struct attn_backend *backend;
	struct kv_cache kv;
	struct block_pool *pool;
	struct sched *sched;
	struct runner runner;
	struct sample_scratch ss;
	int spec_k; /* drafts per request and step (0: no speculation) */
	/* per choice of the step, [max_num_seqs] each: its slot, whether it still runs after
	 * the step's outputs, and its logits rows (the runner's) */
	struct step_slot *slot;
	bool *alive;
	const float **rows;
	struct draft draft;       /* speculative decoding's part of the step */
	struct sample_rng rng;    /* seeds for unseeded requests */
	pthread_mutex_t guide_mu; /* guide_vocab's creation (by the first guided submit) */
	struct guide_vocab *guide_vocab;
	uint8_t *allow; /* [vocab] a guided choice's mask (engine thread) */
	uint8_t *ban;   /* [vocab] a choice's banned tokens this row (engine thread) */
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

/* engine.c */
void engine_hist_observe(struct engine_hist *h, double v); /* eng->mu held */
/* A finished choice (why: finish_check's verdict, or ABORT from outside): takes it out of the
 * scheduler unless finish_check did there, delivers its last event, records stats, frees it. */
void engine_seq_finish(struct engine *eng, struct eseq *s, enum engine_finish fin, const int32_t *tok, int n_tok,
		       const struct engine_logprob *lp, const char *error);

/* step.c: one scheduling step and everything after the forward. */
int engine_step(struct engine *eng, struct err *e);

#endif
