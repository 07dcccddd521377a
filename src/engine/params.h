/* A request's sampling parameters (vLLM SamplingParams semantics, docs/reference.md C.2): the server's
 * defaults, the parameters, their limits and their validation. Plain values: what the
 * sampler, the output stage and the HTTP layer read alike (engine.h for the engine). */
#ifndef MLA_ENGINE_PARAMS_H
#define MLA_ENGINE_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct guide_grammar;

#define ENGINE_MAX_LOGPROBS 20      /* --max-logprobs */
#define ENGINE_MAX_STOP_IDS 64      /* stop_token_ids + generation_config eos ids */
#define ENGINE_MAX_STOP_STRS 16     /* stop strings per request */
#define ENGINE_MAX_STOP_STR_LEN 512 /* bytes per stop string */
#define ENGINE_MAX_LOGIT_BIAS 300

/* Server-side defaults: generation_config.json values (or the OpenAI defaults when absent).
 * A request's explicit value wins over these (docs/reference.md C.2 "sampling default precedence"). */
struct sampling_defaults {
	float temperature;                         /* 1.0 */
	float top_p;                               /* 1.0 */
	int top_k;                                 /* 0 = off */
	float min_p;                               /* 0 */
	float repetition_penalty;                  /* 1.0 */
	float presence_penalty, frequency_penalty; /* 0 */
	int max_tokens;                            /* -1 = none (up to max_model_len) */
};

struct sampling_params {
	float temperature;        /* < 1e-5: greedy (top_p/top_k/min_p then ignored) */
	float top_p;              /* (0, 1] */
	int top_k;                /* 0 or -1 = off, else >= 1 */
	float min_p;              /* [0, 1] */
	float presence_penalty;   /* [-2, 2], over output tokens */
	float frequency_penalty;  /* [-2, 2], over output tokens */
	float repetition_penalty; /* > 0, 1 = off, over prompt + output tokens */
	int max_tokens;           /* -1 = until max_model_len; else >= 1 (capped by the engine
				   * at max_model_len - prompt_len) */
	int min_tokens;           /* EOS and stop ids are masked until this many outputs */
	bool ignore_eos;
	int n_stop_token_ids;
	int32_t stop_token_ids[ENGINE_MAX_STOP_IDS]; /* finish "stop", stop_reason = the id */
	int n_stop;
	char stop[ENGINE_MAX_STOP_STRS][ENGINE_MAX_STOP_STR_LEN]; /* NUL-terminated, non-empty */
	bool include_stop_str_in_output;
	bool has_seed;
	uint64_t seed;                      /* per-request RNG: same seed -> same tokens, whatever the batch */
	int logprobs;                       /* -1 none; 0..ENGINE_MAX_LOGPROBS = sampled token + top-N */
	int prompt_logprobs;                /* -1 none; 0..ENGINE_MAX_LOGPROBS: every prompt token's
				   * logprob after the first, + top-N (engine_prompt_logprobs) */
	bool skip_special_tokens;           /* detokenization (default true) */
	bool spaces_between_special_tokens; /* default true */
	int n;                              /* number of choices, >= 1; choice i uses seed + i when seeded */
	int priority;                       /* lower runs first under --scheduling-policy priority (else 0) */
	int n_logit_bias;
	int32_t logit_bias_ids[ENGINE_MAX_LOGIT_BIAS];
	float logit_bias[ENGINE_MAX_LOGIT_BIAS]; /* added to the raw logit, clamped to [-100, 100] */
	/* Structured output (guide/grammar.h), NULL = free text. Borrowed: engine_submit takes
	 * its own references. Each step only tokens that keep the output a prefix of a match are
	 * sampled, and EOS only once it is a whole match (the grammar wins over min_tokens;
	 * with ignore_eos a match that nothing may extend ends the output, finish "stop"). */
	/* vLLM's allowed_token_ids (only these may be sampled; n_allowed 0: all) and bad_words
	 * (token sequences back to back, bad_lens[n_bad]: a sequence's last token is never
	 * sampled where the output ends with the rest of it). Borrowed: engine_submit copies. */
	const int32_t *allowed_ids;
	int n_allowed;
	const char *cache_salt; /* vLLM's cache_salt (NULL: none; borrowed, read at submit):
				   * only requests with the same salt share prefix-cache blocks */
	const int32_t *bad_words, *bad_lens;
	int n_bad;
	struct guide_grammar *guide;
	int32_t guide_after; /* >= 0: the grammar applies from the token after this one
				   * (a reasoning model's "</think>", as vLLM does); -1: from the
				   * first token (sampling_params_init) */
};

/* Fills every field from `d` (NULL = the OpenAI defaults), n = 1, logprobs = -1,
 * skip_special_tokens = true, no seed, no stops. */
void sampling_params_init(struct sampling_params *p, const struct sampling_defaults *d);
void sampling_defaults_init(struct sampling_defaults *d); /* the OpenAI defaults */
/* Range checks of docs/reference.md C.2; error names the field and the value. */
int sampling_params_validate(const struct sampling_params *p, int vocab_size, struct err *e);

#endif
