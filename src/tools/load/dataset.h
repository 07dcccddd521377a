/* Benchmark prompts: random token sequences of exact lengths (vLLM's "random" dataset) or
 * prompts read from a JSONL file, and the OpenAI request bodies built from them. */
#ifndef MLA_TOOLS_LOAD_DATASET_H
#define MLA_TOOLS_LOAD_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct tok;

/* splitmix64: small, seedable, the same sequence on every platform. */
struct bench_rng {
	uint64_t s;
};
uint64_t bench_rng_u64(struct bench_rng *r);
double bench_rng_unit(struct bench_rng *r); /* uniform in [0, 1) */
/* Exponential waiting time with mean 1/rate (Poisson arrivals). */
double bench_rng_exp(struct bench_rng *r, double rate);

struct bench_prompt {
	char *text; /* prompt text (may contain NUL); NULL when the prompt is token ids */
	size_t text_len;
	int32_t *ids; /* [n_ids] token-id prompt (completions with random prompts) */
	size_t n_ids;
	int input_len;  /* tokens; -1 when unknown (JSONL without a tokenizer) */
	int output_len; /* max_tokens to request */
};

struct bench_random_opts {
	int input_len, output_len;
	double range_ratio; /* lengths uniform in [floor(L(1-r)), ceil(L(1+r))], 0 <= r < 1 */
	uint64_t seed;
	bool as_ids; /* token-id prompts (exact lengths) instead of text */
};

/* n random prompts. Token ids are drawn uniformly from the tokenizer's ordinary tokens
 * (not special, not holes). Text prompts: decode, re-encode (no special tokens), then
 * truncate the re-encoded ids or append random ids to the target length and repeat, up
 * to 10 times; the prompt keeps the re-encoded length of its final text (input_len), and
 * *n_mismatch counts prompts whose length still differs from its target. */
int bench_prompts_random(const struct tok *t, const struct bench_random_opts *o, size_t n, struct bench_prompt **out,
			 size_t *n_mismatch, struct err *e);

/* n prompts from a JSONL file: one object per non-blank line with a string "prompt" and an
 * optional positive integer "output_len" (default: default_output_len). Lines are used in
 * order and reused from the start when the file has fewer than n. With a tokenizer,
 * input_len is the prompt's token count (no special tokens); else -1. */
int bench_prompts_jsonl(const char *path, const struct tok *t, int default_output_len, size_t n,
			struct bench_prompt **out, struct err *e);

void bench_prompts_free(struct bench_prompt *p, size_t n);

struct bench_body_opts {
	const char *model;
	bool chat;       /* messages (chat/completions) vs prompt (completions) */
	bool ignore_eos; /* sends "ignore_eos": true (vLLM extension) */
	double temperature;
};

/* The streamed request body for one prompt (compact JSON, malloc'd), or NULL on
 * out-of-memory. */
char *bench_request_body(const struct bench_body_opts *o, const struct bench_prompt *p);

#endif
