/* What engine.c (the thread, requests, lifecycle) and step.c (one step: schedule, forward,
 * sample and verify drafts, outputs, proposals) share. Engine thread only, unless said. */
#ifndef MLA_ENGINE_ENGINE_INTERNAL_H
#define MLA_ENGINE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "attn/kv_cache.h"
#include "engine/engine.h"
#include "engine/output.h"
#include "engine/runner.h"
#include "engine/sample.h"
#include "engine/sched.h"
#include "engine/spec.h"

struct model_config;
struct guide_vocab;
struct guide_state;

/* One choice as the engine thread sees it. */
struct eseq {
	struct sched_req sr;
	struct sampling_params p;
	int32_t stop_ids[ENGINE_MAX_STOP_IDS];	   /* sched: stop_token_ids (+ extra eos) */
	int32_t mask_ids[ENGINE_MAX_STOP_IDS + 8]; /* sampler min_tokens mask: eos + stop ids */
	int n_mask;
	struct sample_rng rng;
	struct seq_text text;
	struct engine_req *h;
	int index;
	int n_out;		  /* output tokens delivered */
	double t_arrival, t_scheduled, t_first, t_last;
	struct engine_logprob lp[SPEC_MAX_TOKENS + 1]; /* this step's, one per sampled token */
	struct guide_state *guide; /* guided decoding: the output's state, holding the grammar
				    * (p.guide is NULL), else NULL */
	bool guide_on;		  /* the grammar applies (p.guide_after was sampled, or is -1) */
	int32_t *owned_ids;	  /* the copies p.allowed_ids, p.bad_words, p.bad_lens point to */
	struct eseq *inbox_next;
	struct eseq *live_prev, *live_next;
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
	const float **rows;
	int spec_k;		  /* drafts per request and step (0: no speculation) */
	int32_t *sampled;	  /* [max_num_seqs][spec_k + 1] this step's tokens */
	int32_t *n_sampled;	  /* [max_num_seqs] */
	int32_t *marker;	  /* [max_num_seqs] the grammar's verdict (enum finish_guide) */
	bool *alive;		  /* [max_num_seqs] still running after the step's outputs */
	int32_t *n_before;	  /* [max_num_seqs] output tokens before the step */
	/* deepseek_mtp: per choice of the step, its MTP positions, whether it drafts, its drafts
	 * (the first pass's, then one per chained pass) */
	int *mtp_n;		  /* [max_num_seqs] */
	bool *mtp_want;		  /* [max_num_seqs] */
	int *mtp_n_drafts;	  /* [max_num_seqs] */
	int32_t *mtp_tok;	  /* [max_num_seqs] a chained pass's input token, -1: none */
	struct guide_state *mtp_guide; /* scratch: a guided choice's state after its drafts so far */
	struct sample_rng rng; /* seeds for unseeded requests */
	pthread_mutex_t guide_mu; /* guide_vocab's creation (by the first guided submit) */
	struct guide_vocab *guide_vocab;
	uint8_t *allow;		  /* [vocab] a guided choice's mask (engine thread) */
	uint8_t *ban;		  /* [vocab] a choice's banned tokens this row (engine thread) */
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
/* Posts one delivery of a choice. */
void engine_deliver(struct eseq *s, const int32_t *tok, int n_tok, const struct engine_logprob *lp,
		    const char *text, size_t text_len, enum engine_finish fin, const char *error);
/* A finished choice (why: finish_check's verdict, or ABORT from outside): takes it out of the
 * scheduler unless finish_check did there, delivers its last event, records stats, frees it. */
void engine_seq_finish(struct engine *eng, struct eseq *s, enum engine_finish fin,
		       const int32_t *tok, int n_tok, const struct engine_logprob *lp,
		       const char *error);

/* step.c: one scheduling step and everything after the forward. */
int engine_step(struct engine *eng, struct err *e);

#endif
