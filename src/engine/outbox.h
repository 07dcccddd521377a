/* The reader's side of a request handle (struct engine_req, req.h): each choice's
 * undelivered output, a mutex + condition variable for the reader, and the handle's
 * reference count, shared by the caller, the engine (while any choice is alive) and a
 * queued cancellation. Internal to the engine; callers use engine_next_event /
 * engine_cancel / engine_release. */
#ifndef MLA_ENGINE_OUTBOX_H
#define MLA_ENGINE_OUTBOX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/event.h"

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

struct outbox {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs; /* caller + engine (while any choice is alive) + queued cancel */
	int n;
	struct outbox_choice *ch; /* [n] */
	int n_finished_read;
	int rr; /* round robin over choices */
	bool cancelled;
	/* prompt_logprobs: [n_prompt_lps], written by the engine thread until ready is set
	 * (under mu), read-only afterwards */
	struct engine_logprob *prompt_lps;
	int n_prompt_lps;
	bool prompt_lps_ready;
};

/* n choices, with two references (caller + engine); -1 if out of memory. */
int outbox_init(struct outbox *b, int n);
void outbox_ref(struct outbox *b);
/* Drops a reference; the last one frees b's buffers (not b) and returns true. */
bool outbox_unref(struct outbox *b);
/* Frees the buffers of an outbox that was never handed out (submit failed). */
void outbox_discard(struct outbox *b);

/* engine_next_event and engine_prompt_logprobs of the handle (engine.h). */
int outbox_next(struct outbox *b, struct engine_event *ev, int timeout_ms);
const struct engine_logprob *outbox_prompt_logprobs(struct outbox *b, int *n);
/* The engine finished writing b->prompt_lps. */
void outbox_prompt_logprobs_ready(struct outbox *b);

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
void outbox_post(struct outbox *b, int index, const struct outbox_post *p);

/* Marks b cancelled and takes one extra reference (for the cancel list); false, with
 * nothing done, when there is nothing to cancel (already cancelled or all finished). */
bool outbox_mark_cancelled(struct outbox *b);

#endif
