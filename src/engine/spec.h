/* Speculative decoding's proposer (vLLM's `--speculative-config`, method "ngram", i.e.
 * prompt lookup): after each step every decoding request gets up to k draft tokens, copied
 * from what followed the earliest earlier occurrence of the longest suffix n-gram of its
 * tokens (n in [lookup_min, lookup_max]). The next step runs the last token and the drafts
 * together and keeps each draft while it equals the token sampled at its position, so the
 * output is the one without speculation, token for token, whatever the sampling parameters
 * (a sampled token equal to a deterministic draft is exactly rejection sampling's accept). */
#ifndef MLA_ENGINE_SPEC_H
#define MLA_ENGINE_SPEC_H

#include <stdint.h>

#include "base/err.h"

#define SPEC_MAX_TOKENS 15 /* num_speculative_tokens */

enum spec_method {
	SPEC_NONE = 0,
	SPEC_NGRAM,
	SPEC_MTP, /* "deepseek_mtp" (or "mtp"): the checkpoint's MTP module drafts (the first
		   * from the model's hidden state, each next by a chained pass of the module) */
};

struct spec_config {
	enum spec_method method;
	int k;                      /* num_speculative_tokens, 1..SPEC_MAX_TOKENS */
	int lookup_min, lookup_max; /* prompt_lookup_min / _max, 1 <= min <= max */
	int disable_by_batch_size;  /* no drafts while more requests run (0: always draft);
					 * a large batch is compute-bound and verifying costs */
};

/* Parses vLLM's JSON ({"method": "ngram", "num_speculative_tokens": 3,
 * "prompt_lookup_max": 4, "prompt_lookup_min": 2, "disable_by_batch_size": 8}); a missing
 * bound takes the other's value, both missing are 5 (vLLM's defaults). {"method":
 * "deepseek_mtp"} drafts with the checkpoint's MTP module: num_speculative_tokens (default 1)
 * per step, the one MTP layer DeepSeek ships chained past the first, as vLLM does. Methods
 * that need a separate
 * draft model (EAGLE, draft_model, ...) are refused by name. */
int spec_config_parse(const char *json, struct spec_config *c, struct err *e);

/* Drafts for a request whose tokens are tokens[0, n): writes up to k tokens to out and
 * returns their count (0 when no n-gram of length >= lookup_min recurs). */
int spec_ngram_propose(const int32_t *tokens, int n, int lookup_min, int lookup_max, int k, int32_t *out);

#endif
