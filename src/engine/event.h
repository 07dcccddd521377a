/* What a request hands back to its caller: one event per delivery of a choice, with its
 * tokens' logprobs (engine_next_event of engine.h; the outbox of outbox.h fills them). */
#ifndef MLA_ENGINE_EVENT_H
#define MLA_ENGINE_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/finish.h"
#include "engine/params.h"

struct engine_logprob {
	int32_t token; /* the sampled token */
	float logprob; /* log-softmax of the raw logits (vLLM's default "raw_logprobs") */
	int rank;      /* 1 = most likely */
	int n_top;     /* = sampling_params.logprobs */
	int32_t top_ids[ENGINE_MAX_LOGPROBS];
	float top_logprobs[ENGINE_MAX_LOGPROBS]; /* descending */
};

/* One delivery for one choice. Several steps' tokens may be coalesced into one event when
 * the reader is slower than the engine. Pointers stay valid until the next
 * engine_next_event on this handle or engine_release. */
struct engine_event {
	int index; /* choice index in [0, n) */
	int n_tokens;
	const int32_t *token_ids;              /* [n_tokens] new tokens (after a stop string: all tokens
				    * generated, including the one that completed it) */
	const struct engine_logprob *logprobs; /* [n_tokens], NULL unless logprobs >= 0 */
	const char *text;                      /* NUL-terminated UTF-8 delta, complete characters only,
				   * truncated at a stop string; "" when no tokenizer */
	size_t text_len;
	enum engine_finish finish; /* != NONE on the choice's last event */
	int32_t stop_token;        /* stop_reason when a stop_token_id fired, else -1 */
	const char *stop_str;      /* stop_reason when a stop string fired, else NULL */
	const char *error;         /* engine error message for ABORT by failure, else NULL */
	/* cumulative counters of this choice */
	int n_prompt_tokens, n_cached_tokens, n_output_tokens;
};

enum {
	ENGINE_EV_OK = 0,      /* *ev filled */
	ENGINE_EV_TIMEOUT = 1, /* nothing within timeout_ms */
	ENGINE_EV_END = 2,     /* every choice finished and every event was read */
};

#endif
