/* Request handles (struct engine_req of engine.h): each choice's undelivered output, a
 * mutex + condition variable for the reader, and a reference count shared by the caller,
 * the engine (while any choice is alive) and a queued cancellation. Internal to the engine;
 * callers use engine_next_event / engine_cancel / engine_release. */
#ifndef MLA_ENGINE_OUTBOX_H
#define MLA_ENGINE_OUTBOX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

struct eseq;

/* Undelivered output of one choice, or the buffers of the event last handed out. */
struct outbox_chunk {
	int32_t *toks;
	struct engine_logprob *lps;
	int n, cap;
	char *text;
	size_t len, text_cap;
};

struct outbox_choice {
	struct outbox_chunk pending, current;
	bool has_pending;
	enum engine_finish finish;
	int32_t stop_token;
	char *stop_str; /* copy of the stop string that fired */
	char *error;
	int n_prompt, n_cached, n_output;
};

struct engine_req {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs; /* caller + engine (while any choice is alive) + queued cancel */
	int n;
	struct outbox_choice *ch; /* [n] */
	int n_finished_read;
	int rr; /* round robin over choices */
	bool cancelled;
	struct engine *eng;
	/* prompt_logprobs: [n_prompt_lps], written by the engine thread until ready is set
	 * (under mu), read-only afterwards */
	struct engine_logprob *prompt_lps;
	int n_prompt_lps;
	bool prompt_lps_ready;
	/* engine-thread only */
	struct eseq **seqs; /* [n]; NULL once freed */
	int n_alive;
	struct engine_req *cancel_next;
};

/* A handle for n choices with two references (caller + engine); NULL if out of memory. */
struct engine_req *outbox_new(int n, struct engine *eng);
/* Frees a handle that was never handed out (submit failed). */
void outbox_discard(struct engine_req *h);
void outbox_ref(struct engine_req *h);
void outbox_unref(struct engine_req *h);

/* The engine finished writing h->prompt_lps. */
void outbox_prompt_logprobs_ready(struct engine_req *h);

/* One step's output of choice `index`; a finish != NONE is the choice's last post. */
struct outbox_post {
	const int32_t *tok;
	int n_tok;
	const struct engine_logprob *lp; /* [n_tok] or NULL */
	const char *text;
	size_t text_len;
	enum engine_finish finish;
	int32_t stop_token;
	const char *stop_str, *error;
	int n_prompt, n_cached, n_output;
};
void outbox_post(struct engine_req *h, int index, const struct outbox_post *p);

/* Marks h cancelled and returns its engine with one extra reference on h (for the cancel
 * list), or NULL when there is nothing to cancel (already cancelled or all finished). */
struct engine *outbox_mark_cancelled(struct engine_req *h);

#endif
