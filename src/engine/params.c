/* Sampling parameter defaults and validation (params.h). */
#include <math.h>
#include <string.h>

#include "engine/params.h"

void sampling_defaults_init(struct sampling_defaults *d)
{
	d->temperature = 1.0f;
	d->top_p = 1.0f;
	d->top_k = 0;
	d->min_p = 0.0f;
	d->repetition_penalty = 1.0f;
	d->presence_penalty = 0.0f;
	d->frequency_penalty = 0.0f;
	d->max_tokens = -1;
}

void sampling_params_init(struct sampling_params *p, const struct sampling_defaults *d)
{
	struct sampling_defaults def;
	if (!d) {
		sampling_defaults_init(&def);
		d = &def;
	}
	memset(p, 0, sizeof *p);
	p->temperature = d->temperature;
	p->top_p = d->top_p;
	p->top_k = d->top_k;
	p->min_p = d->min_p;
	p->repetition_penalty = d->repetition_penalty;
	p->presence_penalty = d->presence_penalty;
	p->frequency_penalty = d->frequency_penalty;
	p->max_tokens = d->max_tokens;
	p->logprobs = -1;
	p->prompt_logprobs = -1;
	p->skip_special_tokens = true;
	p->spaces_between_special_tokens = true;
	p->n = 1;
	p->guide_after = -1;
}

int sampling_params_validate(const struct sampling_params *p, int vocab_size, struct err *e)
{
	if (!(p->temperature >= 0) || !isfinite(p->temperature))
		return err_set(e, "temperature must be >= 0, got %g", (double)p->temperature);
	if (!(p->top_p > 0 && p->top_p <= 1))
		return err_set(e, "top_p must be in (0, 1], got %g", (double)p->top_p);
	if (p->top_k < -1)
		return err_set(e, "top_k must be -1 (disable), or at least 1, got %d", p->top_k);
	if (!(p->min_p >= 0 && p->min_p <= 1))
		return err_set(e, "min_p must be in [0, 1], got %g", (double)p->min_p);
	if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
		return err_set(e, "presence_penalty must be in [-2, 2], got %g", (double)p->presence_penalty);
	if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
		return err_set(e, "frequency_penalty must be in [-2, 2], got %g", (double)p->frequency_penalty);
	if (!(p->repetition_penalty > 0 && p->repetition_penalty <= 1e4f))
		return err_set(e, "repetition_penalty must be > 0, got %g", (double)p->repetition_penalty);
	if (p->max_tokens != -1 && p->max_tokens < 1)
		return err_set(e, "max_tokens must be at least 1, got %d", p->max_tokens);
	if (p->min_tokens < 0)
		return err_set(e, "min_tokens must be greater than or equal to 0, got %d", p->min_tokens);
	if (p->max_tokens != -1 && p->min_tokens > p->max_tokens)
		return err_set(e, "min_tokens must be less than or equal to max_tokens=%d, got %d", p->max_tokens,
			       p->min_tokens);
	if (p->n < 1 || p->n > 128)
		return err_set(e, "n must be in [1, 128], got %d", p->n);
	if (p->logprobs < -1 || p->logprobs > ENGINE_MAX_LOGPROBS)
		return err_set(e, "logprobs must be in [0, %d], got %d", ENGINE_MAX_LOGPROBS, p->logprobs);
	if (p->prompt_logprobs < -1 || p->prompt_logprobs > ENGINE_MAX_LOGPROBS)
		return err_set(e, "prompt_logprobs must be in [0, %d], got %d", ENGINE_MAX_LOGPROBS,
			       p->prompt_logprobs);
	if (p->n_stop_token_ids < 0 || p->n_stop_token_ids > ENGINE_MAX_STOP_IDS - 8)
		return err_set(e, "stop_token_ids: %d ids (at most %d)", p->n_stop_token_ids, ENGINE_MAX_STOP_IDS - 8);
	for (int i = 0; i < p->n_stop_token_ids; i++)
		if (p->stop_token_ids[i] < 0 || p->stop_token_ids[i] >= vocab_size)
			return err_set(e, "stop_token_ids[%d]: %d is not a token id (vocab %d)", i,
				       (int)p->stop_token_ids[i], vocab_size);
	if (p->n_stop < 0 || p->n_stop > ENGINE_MAX_STOP_STRS)
		return err_set(e, "stop: %d strings (at most %d)", p->n_stop, ENGINE_MAX_STOP_STRS);
	for (int i = 0; i < p->n_stop; i++) {
		size_t len = strnlen(p->stop[i], ENGINE_MAX_STOP_STR_LEN);
		if (len == 0)
			return err_set(e, "stop[%d]: empty stop string", i);
		if (len == ENGINE_MAX_STOP_STR_LEN)
			return err_set(e, "stop[%d]: longer than %d bytes", i, ENGINE_MAX_STOP_STR_LEN - 1);
	}
	if (p->n_logit_bias < 0 || p->n_logit_bias > ENGINE_MAX_LOGIT_BIAS)
		return err_set(e, "logit_bias: %d entries (at most %d)", p->n_logit_bias, ENGINE_MAX_LOGIT_BIAS);
	for (int i = 0; i < p->n_logit_bias; i++) {
		if (p->logit_bias_ids[i] < 0 || p->logit_bias_ids[i] >= vocab_size)
			return err_set(e, "logit_bias: token id %d out of vocabulary (vocab %d)",
				       (int)p->logit_bias_ids[i], vocab_size);
		if (!isfinite(p->logit_bias[i]))
			return err_set(e, "logit_bias[%d]: not a finite number", (int)p->logit_bias_ids[i]);
	}
	if (p->n_allowed < 0 || (p->n_allowed > 0 && !p->allowed_ids))
		return err_set(e, "allowed_token_ids: bad list");
	for (int i = 0; i < p->n_allowed; i++)
		if (p->allowed_ids[i] < 0 || p->allowed_ids[i] >= vocab_size)
			return err_set(e, "allowed_token_ids: token id %d out of vocabulary (vocab %d)",
				       (int)p->allowed_ids[i], vocab_size);
	if (p->n_bad < 0 || (p->n_bad > 0 && (!p->bad_words || !p->bad_lens)))
		return err_set(e, "bad_words: bad list");
	for (int i = 0, at = 0; i < p->n_bad; i++) {
		if (p->bad_lens[i] < 1)
			return err_set(e, "bad_words[%d]: empty", i);
		for (int j = 0; j < p->bad_lens[i]; j++, at++)
			if (p->bad_words[at] < 0 || p->bad_words[at] >= vocab_size)
				return err_set(e, "bad_words[%d]: token id %d out of vocabulary", i,
					       (int)p->bad_words[at]);
	}
	return 0;
}
