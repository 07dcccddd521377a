/* A request inside the engine: its handle (struct engine_req, opaque in engine.h), shared by
 * reference with the caller, and its n choices (struct eseq), the engine thread's. */
#ifndef MLA_ENGINE_REQ_H
#define MLA_ENGINE_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/event.h"
#include "engine/outbox.h"
#include "engine/output.h"
#include "engine/params.h"
#include "engine/sample.h"
#include "engine/sched.h"
#include "engine/spec.h"

struct engine;
struct guide_state;

/* The handle: the reader's side (the outbox, whose reference count is the handle's) and the
 * engine's. */
struct engine_req {
	struct outbox ob;
	struct engine *eng;
	/* engine thread only */
	struct eseq **seqs; /* [n]; NULL once freed */
	int n_alive;
	struct engine_req *cancel_next;
};

/* A handle for n choices with two references (caller + engine); NULL if out of memory. */
struct engine_req *req_new(int n, struct engine *eng);
void req_ref(struct engine_req *h);
void req_unref(struct engine_req *h); /* the last reference frees h */
/* Frees a handle that was never handed out (submit failed); not its choices. */
void req_discard(struct engine_req *h);

/* One choice as the engine thread sees it: the one struct the engine follows a choice
 * through. It embeds what it owns: its scheduler record (struct sched_req, with its tokens
 * and its KV blocks' struct kv_seq), which stays a struct of its own because the scheduler
 * must not see sampling, text or handles; and its output stage (struct seq_text). The
 * request's handle (struct engine_req, holding the n choices' outboxes) is the only other
 * struct of a request. */
struct eseq {
	struct sched_req sr;
	struct sampling_params p;
	int32_t stop_ids[ENGINE_MAX_STOP_IDS];     /* sched: stop_token_ids (+ extra eos) */
	int32_t mask_ids[ENGINE_MAX_STOP_IDS + 8]; /* sampler min_tokens mask: eos + stop ids */
	int n_mask;
	struct sample_rng rng;
	struct seq_text text;
	struct engine_req *h;
	int index;
	int n_out; /* output tokens delivered */
	double t_arrival, t_scheduled, t_first, t_last;
	struct engine_logprob lp[SPEC_MAX_TOKENS + 1]; /* this step's, one per sampled token */
	/* guided decoding: the output's state, holding the grammar (p.guide is NULL), else NULL;
	 * guide_on: the grammar applies (p.guide_after was sampled, or is -1) */
	struct guide_state *guide;
	bool guide_on;
	int32_t *owned_ids; /* the copies p.allowed_ids, p.bad_words, p.bad_lens point to */
	struct eseq *inbox_next;
	struct eseq *live_prev, *live_next;
};

#ifndef container_of
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#endif

/* The choice whose scheduler record r is: the scheduler keeps no pointer back. */
static inline struct eseq *eseq_of(struct sched_req *r) { return container_of(r, struct eseq, sr); }

/* Posts one delivery of choice s to its handle (fin != NONE: its last). */
void eseq_deliver(struct eseq *s, const int32_t *tok, int n_tok, const struct engine_logprob *lp, const char *text,
		  size_t text_len, enum engine_finish fin, const char *error);
/* Frees s and what it owns (its grammar state, lists, tokens and blocks' arrays, text). */
void eseq_free(struct eseq *s);

#endif
