/* Token sampling with vLLM V1 Sampler semantics (docs/reference.md C.2): raw logprobs captured first,
 * then logit_bias and the min_tokens mask, penalties (repetition over prompt + output,
 * frequency / presence over output), greedy argmax when temperature < 1e-5, else
 * temperature, min_p, top_k, top_p, and a draw from the request's own RNG (so a seeded
 * request samples the same tokens whatever else is in the batch). The draw is inverse-CDF
 * with one uniform per token (same distribution as vLLM's exponential race, cheaper),
 * walking the candidates in id order, or in descending order when top-k / top-p sorted them.
 * Logprobs are vLLM's default "raw_logprobs": log-softmax of the model's logits before any
 * processing. */
#ifndef MLA_ENGINE_SAMPLE_H
#define MLA_ENGINE_SAMPLE_H

#include <stdint.h>

#include "base/err.h"
#include "engine/event.h"
#include "engine/params.h"

/* xoshiro256** state, seeded through splitmix64. */
struct sample_rng {
	uint64_t s[4];
};
void sample_rng_seed(struct sample_rng *r, uint64_t seed);
uint64_t sample_rng_next(struct sample_rng *r);
double sample_rng_uniform(struct sample_rng *r); /* [0, 1) with 53 bits */

/* Work buffers for one vocabulary, reused for every row (no allocation per token). */
struct sample_scratch {
	int vocab;
	float *x;      /* [vocab] processed logits */
	int32_t *idx;  /* [vocab] candidate ids */
	int32_t *cnt;  /* [vocab] output-token counts; all zero between calls */
	uint8_t *seen; /* [vocab] repetition marks; all zero between calls */
	float *masked; /* [vocab] raw logits under a guided-decoding mask */
};
int sample_scratch_init(struct sample_scratch *s, int vocab, struct err *e);
void sample_scratch_fini(struct sample_scratch *s);

struct sample_input {
	const float *logits; /* [vocab] raw model logits, fp32 */
	const struct sampling_params *p;
	const int32_t *prompt; /* [n_prompt] */
	int n_prompt;
	const int32_t *output; /* [n_output] generated so far */
	int n_output;
	const int32_t *stop_ids; /* [n_stop_ids] masked while n_output < min_tokens (EOS +
				     * stop_token_ids) */
	int n_stop_ids;
	struct sample_rng *rng; /* the request's generator; advanced unless greedy */
	const uint8_t *ban;     /* [vocab] or NULL: tokens never sampled (allowed_token_ids,
				     * bad_words), applied with the logit bias; raw logprobs stay */
	const uint8_t *allow;   /* [vocab] guided decoding: only tokens with allow[id] != 0
				     * (never all zero); they replace the min_tokens mask, and
				     * logprobs are those of the masked logits (as vLLM's bitmask) */
};

/* The raw logprob (log-softmax of logits[vocab]) of tok, its rank (1 = most likely) and the
 * n_top most likely tokens' (n_top capped at ENGINE_MAX_LOGPROBS). */
void sample_logprob_of(const float *logits, int vocab, int32_t tok, int n_top, struct engine_logprob *lp);

/* Returns the sampled token; fills *lp when p->logprobs >= 0 (lp may be NULL otherwise). */
int32_t sample_token(const struct sample_input *in, struct sample_scratch *s, struct engine_logprob *lp);
/* x[vocab] += the request's logit_bias (each clamped to [-100, 100]), as sample_token does
 * first; also the MTP drafts' view of their logits */
void sample_logit_bias(const struct sampling_params *p, float *x, int V);
/* The tokens a choice may not sample after its n_out outputs out[] (allowed_token_ids,
 * bad_words) into ban[V] (sample_input.ban); NULL when p bans none. Bad words never ban
 * the last allowed token. */
const uint8_t *sample_banned(const struct sampling_params *p, const int32_t *out, int n_out, int V, uint8_t *ban);

#endif
