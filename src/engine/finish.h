/* Why a sequence ends: the one decision and its one enum (nano-vllm's postprocess, with
 * vLLM's stop strings and our grammar ends). The stop conditions of docs/reference.md B.6 in one order:
 * the length limits first (so max_model_len is never passed), then, past min_tokens, EOS
 * and the stop token ids, then a stop string completed in the token's text, then the
 * grammar's end. The scheduler calls finish_check when it appends a token (so that it
 * appends nothing past an end): pure, token ids and counts only, no tensors, no requests.
 * The engine's output stage calls finish_check_text for the same token, which gives the
 * same verdict plus what only the text can tell, and is not pure: it appends the token's
 * text to the choice's output (once per token). */
#ifndef MLA_ENGINE_FINISH_H
#define MLA_ENGINE_FINISH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct seq_text;

enum engine_finish {
	ENGINE_FINISH_NONE = 0,
	ENGINE_FINISH_STOP,   /* EOS, stop token id, stop string or the grammar's end */
	ENGINE_FINISH_LENGTH, /* max_tokens or max_model_len */
	ENGINE_FINISH_ABORT,  /* cancelled, engine shut down, or engine error */
};

const char *engine_finish_name(enum engine_finish f); /* "stop" "length" "abort" or NULL */

/* What sampling found about a guided choice this step (its grammar's verdict). */
enum finish_guide {
	FINISH_GUIDE_GO_ON = 0,
	FINISH_GUIDE_ENDED,  /* a whole match that nothing may extend (or no EOS to end it on) */
	FINISH_GUIDE_BROKEN, /* the sampled token left the grammar (the mask allowed it) */
	FINISH_GUIDE_STUCK,  /* no token continues a partial match (the matcher's bounds) */
};

struct finish_in {
	int32_t tok;         /* the output token just appended; -1: the step's end (the
				* grammar's verdict only) */
	int n_out, n_tokens; /* outputs, and prompt + outputs, that token included */
	int max_len;         /* tokens the sequence may hold (its capacity) */
	int max_model_len;
	int max_tokens, min_tokens;
	bool ignore_eos;
	int32_t eos; /* -1: none */
	const int32_t *stop_ids;
	int n_stop_ids;
	enum finish_guide guide; /* with tok -1 */
};

struct finish_verdict {
	enum engine_finish why;
	int32_t stop_token; /* the stop token id that ended it, else -1 */
	const char *error;  /* ABORT: the message (e's, or a static string) */
};

/* The token rules for in->tok, or with tok -1 the grammar's verdict. Pure. */
struct finish_verdict finish_check(const struct finish_in *in);
/* The output stage's verdict on in->tok (>= 0): finish_check's, and a stop string that the
 * token's text completes past min_tokens. Appends that text to *text first, unless EOS or a
 * stop id ended the output and include_stop_str is false (as vLLM's detokenizer). ABORT with
 * e's message when the text cannot be added. */
struct finish_verdict finish_check_text(const struct finish_in *in, struct seq_text *text, bool include_stop_str,
					struct err *e);

#endif
