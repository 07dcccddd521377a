/* The sampling fields of a request, both endpoints (request_internal.h): stops, logit bias,
 * token lists, logprobs, vLLM's extras, stream options, and the SamplingParams ranges. */
#include "server/openai/request_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer.h"

static int parse_stop(const json_t *body, struct sampling_params *sp, struct api_error *ae)
{
	const json_t *v = json_object_get(body, "stop");
	if (!v || json_is_null(v))
		return 0;
	const json_t *one[1] = {v};
	size_t n = 1;
	if (json_is_array(v))
		n = json_array_size(v);
	else if (!json_is_string(v))
		return req_bad_type(ae, "stop", "a valid string or a list of strings", v);
	if (n > ENGINE_MAX_STOP_STRS)
		return api_error_set(ae, 400, "stop", "at most %d stop strings are supported, got %zu",
				     ENGINE_MAX_STOP_STRS, n);
	for (size_t i = 0; i < n; i++) {
		const json_t *s = json_is_array(v) ? json_array_get(v, i) : one[0];
		if (!json_is_string(s))
			return req_bad_type(ae, "stop", "a valid string", s);
		size_t len = json_string_length(s);
		if (len == 0)
			return api_error_set(ae, 400, "stop", "stop strings must not be empty");
		if (len >= ENGINE_MAX_STOP_STR_LEN || memchr(json_string_value(s), 0, len))
			return api_error_set(ae, 400, "stop",
					     "stop strings must be shorter than %d bytes and contain "
					     "no NUL",
					     ENGINE_MAX_STOP_STR_LEN);
		memcpy(sp->stop[sp->n_stop], json_string_value(s), len + 1);
		sp->n_stop++;
	}
	return 0;
}

static int parse_logit_bias(const json_t *body, int vocab, struct sampling_params *sp, struct api_error *ae)
{
	const json_t *v = json_object_get(body, "logit_bias");
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return req_bad_type(ae, "logit_bias", "a valid dictionary", v);
	if (json_object_size(v) > ENGINE_MAX_LOGIT_BIAS)
		return api_error_set(ae, 400, "logit_bias", "at most %d logit_bias entries", ENGINE_MAX_LOGIT_BIAS);
	const char *key;
	const json_t *b;
	json_object_foreach((json_t *)v, key, b)
	{
		char *end;
		long long id = strtoll(key, &end, 10);
		if (!*key || *end || id < 0 || id >= vocab)
			return api_error_set(ae, 400, "logit_bias",
					     "logit_bias: token id '%s' out of vocab range [0, %d)", key, vocab);
		if (!json_is_number(b))
			return req_bad_type(ae, "logit_bias", "a valid number", b);
		double x = json_number_value(b);
		sp->logit_bias_ids[sp->n_logit_bias] = (int32_t)id;
		sp->logit_bias[sp->n_logit_bias] = (float)(x < -100 ? -100 : x > 100 ? 100 : x);
		sp->n_logit_bias++;
	}
	return 0;
}

/* vLLM's allowed_token_ids (an empty list is no restriction) and bad_words (tokenized by
 * the caller, which has the tokenizer) */
static int parse_token_lists(const json_t *body, const struct srv_limits *lim, struct srv_request *r,
			     struct api_error *ae)
{
	struct sampling_params *sp = &r->sp;
	const json_t *v = json_object_get(body, "allowed_token_ids");
	if (v && !json_is_null(v)) {
		size_t n = json_array_size(v);
		if (n && !(r->allowed = malloc(sizeof *r->allowed * n)))
			return api_error_set(ae, 500, NULL, "out of memory");
		int got = 0;
		if (req_parse_token_list(v, "allowed_token_ids", lim->vocab_size, lim->vocab_size, r->allowed, &got,
					 ae) < 0)
			return -1;
		n = (size_t)got;
		sp->allowed_ids = r->allowed;
		sp->n_allowed = (int)n;
	}
	v = json_object_get(body, "bad_words");
	if (v && !json_is_null(v)) {
		if (!json_is_array(v) || json_array_size(v) > 1024)
			return req_bad_type(ae, "bad_words", "a list of up to 1024 strings", v);
		for (size_t k = 0; k < json_array_size(v); k++)
			if (!json_is_string(json_array_get(v, k)) || !json_string_length(json_array_get(v, k)))
				return req_bad_type(ae, "bad_words", "a list of non-empty strings",
						    json_array_get(v, k));
		r->bad_words = json_array_size(v) ? v : NULL;
	}
	return 0;
}

/* vLLM's request extras that change what is computed or returned: truncate_prompt_tokens,
 * return_tokens_as_token_ids, cache_salt; a non-zero priority needs a priority scheduler */
static int parse_extras(const json_t *body, const struct srv_limits *lim, struct srv_request *r, struct api_error *ae)
{
	long long i;
	int rc = req_get_int(body, "truncate_prompt_tokens", &i, ae);
	if (rc < 0)
		return -1;
	if (rc) {
		if (i < -1 || i == 0 || i > 1 << 30)
			return api_error_set(ae, 400, "truncate_prompt_tokens",
					     "truncate_prompt_tokens must be -1 or at least 1, got %lld.", i);
		r->truncate_prompt_tokens = (int)i;
	}
	if (req_get_bool(body, "return_tokens_as_token_ids", &r->tokens_as_ids, ae) < 0 ||
	    req_get_bool(body, "return_token_ids", &r->return_token_ids, ae) < 0)
		return -1;
	if ((rc = req_get_int(body, "best_of", &i, ae)) < 0)
		return -1;
	if (rc && i != r->sp.n) /* vLLM V1 has no best_of either: only best_of = n means anything */
		return api_error_set(ae, 400, "best_of", "best_of is not supported (only best_of = n), got %lld.", i);
	const char *rid = NULL;
	if (req_get_str(body, "request_id", &rid, ae) < 0)
		return -1;
	if (rid && (!*rid || strlen(rid) > 48 ||
		    strspn(rid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") != strlen(rid)))
		return api_error_set(ae, 400, "request_id",
				     "request_id must be 1 to 48 characters of [A-Za-z0-9-_.:]");
	r->request_id = rid;
	if ((rc = req_get_int(body, "priority", &i, ae)) < 0)
		return -1;
	if (rc && i != 0 && !lim->priority)
		return api_error_set(
			ae, 400, "priority",
			"Got priority %lld but priority scheduling is not enabled (first come, first served; "
			"--scheduling-policy priority enables it).",
			i);
	if (rc && (i < INT32_MIN || i > INT32_MAX))
		return api_error_set(ae, 400, "priority", "priority must be a 32-bit integer, got %lld.", i);
	if (rc)
		r->sp.priority = (int)i;
	const json_t *v = json_object_get(body, "cache_salt");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v) || json_string_length(v) == 0)
			return req_bad_type(ae, "cache_salt", "a non-empty string", v);
		r->sp.cache_salt = json_string_value(v); /* borrowed from the body */
	}
	return 0;
}

/* logprobs: a bool + top_logprobs for chat, an int for completions */
static int parse_logprobs(const json_t *body, enum srv_api api, const struct srv_limits *lim, struct srv_request *r,
			  struct api_error *ae)
{
	struct sampling_params *sp = &r->sp;
	int max_lp = lim->max_logprobs > 0 && lim->max_logprobs < ENGINE_MAX_LOGPROBS ? lim->max_logprobs
										      : ENGINE_MAX_LOGPROBS;
	long long i;
	int rc;
	bool b;
	if (api == SRV_API_CHAT) {
		b = false;
		if (req_get_bool(body, "logprobs", &b, ae) < 0)
			return -1;
		r->want_logprobs = b;
		if ((rc = req_get_int(body, "top_logprobs", &i, ae)) < 0)
			return -1;
		if (rc) {
			if (!b)
				return api_error_set(ae, 400, "top_logprobs",
						     "when using `top_logprobs`, `logprobs` must be "
						     "set to true.");
			if (i < 0 || i > max_lp)
				return api_error_set(ae, 400, "top_logprobs",
						     "top_logprobs must be in [0, %d] (--max-logprobs), got %lld.",
						     max_lp, i);
			r->top_logprobs = (int)i;
		}
		sp->logprobs = b ? r->top_logprobs : -1;
	} else {
		if ((rc = req_get_int(body, "logprobs", &i, ae)) < 0)
			return -1;
		if (rc) {
			if (i < 0 || i > max_lp)
				return api_error_set(ae, 400, "logprobs",
						     "logprobs must be in [0, %d] (--max-logprobs), got %lld.", max_lp,
						     i);
			r->want_logprobs = true;
			sp->logprobs = (int)i;
		}
	}
	/* vLLM's prompt_logprobs: each prompt token's logprob and top-N (both APIs) */
	if ((rc = req_get_int(body, "prompt_logprobs", &i, ae)) < 0)
		return -1;
	if (rc) {
		if (i < 0 || i > max_lp)
			return api_error_set(ae, 400, "prompt_logprobs",
					     "prompt_logprobs must be in [0, %d] (--max-logprobs), got %lld.", max_lp,
					     i);
		r->prompt_logprobs = true;
		sp->prompt_logprobs = (int)i;
	}
	return 0;
}

/* stream, stream_options */
static int parse_stream(const json_t *body, struct srv_request *r, struct api_error *ae)
{
	if (req_get_bool(body, "stream", &r->stream, ae) < 0)
		return -1;
	const json_t *v = json_object_get(body, "stream_options");
	if (v && !json_is_null(v)) {
		if (!r->stream)
			return api_error_set(ae, 400, "stream_options",
					     "Stream options can only be defined when `stream=True`.");
		if (!json_is_object(v))
			return req_bad_type(ae, "stream_options", "a valid dictionary", v);
		r->include_usage = true; /* default when the object is present */
		if (req_get_bool(v, "include_usage", &r->include_usage, ae) < 0 ||
		    req_get_bool(v, "continuous_usage_stats", &r->continuous_usage, ae) < 0)
			return -1;
	}
	return 0;
}

/* Sampling fields shared by both endpoints. */
int req_parse_sampling(const json_t *body, enum srv_api api, const struct sampling_params *base,
		       const struct srv_limits *lim, struct srv_request *r, struct api_error *ae)
{
	struct sampling_params *sp = &r->sp;
	double d;
	long long i;
	int rc;

	if ((rc = req_get_num(body, "temperature", &d, ae)) < 0)
		return -1;
	if (rc) {
		if (!(d >= 0 && d <= 2))
			return req_range_err(ae, "temperature", "in [0, 2]", d);
		sp->temperature = (float)d;
	}
	if ((rc = req_get_num(body, "top_p", &d, ae)) < 0)
		return -1;
	if (rc) {
		if (!(d > 0 && d <= 1))
			return req_range_err(ae, "top_p", "in (0, 1]", d);
		sp->top_p = (float)d;
	}
	if ((rc = req_get_int(body, "top_k", &i, ae)) < 0)
		return -1;
	if (rc) {
		if (i < -1)
			return req_range_err(ae, "top_k", "-1 or 0 (disable), or at least 1", (double)i);
		sp->top_k = i == -1 ? 0 : (int)(i > 1 << 30 ? 1 << 30 : i);
	}
	if ((rc = req_get_num(body, "min_p", &d, ae)) < 0)
		return -1;
	if (rc) {
		if (!(d >= 0 && d <= 1))
			return req_range_err(ae, "min_p", "in [0, 1]", d);
		sp->min_p = (float)d;
	}
	static const char *const pens[2] = {"presence_penalty", "frequency_penalty"};
	for (int k = 0; k < 2; k++) {
		if ((rc = req_get_num(body, pens[k], &d, ae)) < 0)
			return -1;
		if (rc) {
			if (!(d >= -2 && d <= 2))
				return req_range_err(ae, pens[k], "in [-2, 2]", d);
			*(k ? &sp->frequency_penalty : &sp->presence_penalty) = (float)d;
		}
	}
	if ((rc = req_get_num(body, "repetition_penalty", &d, ae)) < 0)
		return -1;
	if (rc) {
		if (!(d > 0 && d <= 1e6))
			return req_range_err(ae, "repetition_penalty", "greater than zero", d);
		sp->repetition_penalty = (float)d;
	}

	/* max_tokens (deprecated alias for chat) / max_completion_tokens (wins) */
	const char *mt_key = "max_tokens";
	if ((rc = req_get_int(body, "max_tokens", &i, ae)) < 0)
		return -1;
	if (api == SRV_API_CHAT) {
		long long j;
		int rc2 = req_get_int(body, "max_completion_tokens", &j, ae);
		if (rc2 < 0)
			return -1;
		if (rc2)
			rc = 1, i = j, mt_key = "max_completion_tokens";
	} else if (!rc) {
		rc = 1, i = 16; /* CompletionRequest.max_tokens default */
	}
	if (rc) {
		if (i == 0 && api == SRV_API_COMPLETION && r->echo) {
			/* vLLM: echo with max_tokens 0 answers the prompt alone (scoring it); one
			 * token is generated to run the prompt and dropped */
			r->echo_only = true;
			i = 1;
		}
		if (i < 1)
			return api_error_set(ae, 400, mt_key, "%s must be at least 1, got %lld.", mt_key, i);
		sp->max_tokens = i > 1 << 30 ? 1 << 30 : (int)i;
	}
	int max_tokens = sp->max_tokens > 0 ? sp->max_tokens : base->max_tokens; /* what will run */
	if ((rc = req_get_int(body, "min_tokens", &i, ae)) < 0)
		return -1;
	if (rc) {
		if (i < 0)
			return req_range_err(ae, "min_tokens", "greater than or equal to 0", (double)i);
		if (max_tokens >= 0 && i > max_tokens)
			return api_error_set(ae, 400, "min_tokens",
					     "min_tokens must be less than or equal to max_tokens=%d, "
					     "got %lld.",
					     max_tokens, i);
		sp->min_tokens = i > 1 << 30 ? 1 << 30 : (int)i;
	}
	if ((rc = req_get_int(body, "n", &i, ae)) < 0)
		return -1;
	if (rc) {
		if (i < 1)
			return req_range_err(ae, "n", "at least 1", (double)i);
		if (i > lim->max_n)
			return api_error_set(ae, 400, "n", "n must be at most %d, got %lld.", lim->max_n, i);
		sp->n = (int)i;
	}
	if ((rc = req_get_int(body, "seed", &i, ae)) < 0)
		return -1;
	if (rc && i != -1) {
		sp->has_seed = true;
		sp->seed = (uint64_t)i;
	}
	if (req_get_bool(body, "ignore_eos", &sp->ignore_eos, ae) < 0 ||
	    req_get_bool(body, "skip_special_tokens", &sp->skip_special_tokens, ae) < 0 ||
	    req_get_bool(body, "spaces_between_special_tokens", &sp->spaces_between_special_tokens, ae) < 0 ||
	    req_get_bool(body, "include_stop_str_in_output", &sp->include_stop_str_in_output, ae) < 0)
		return -1;
	if (parse_stop(body, sp, ae) < 0 || parse_logit_bias(body, lim->vocab_size, sp, ae) < 0)
		return -1;
	const json_t *v = json_object_get(body, "stop_token_ids");
	if (v && !json_is_null(v) &&
	    req_parse_token_list(v, "stop_token_ids", lim->vocab_size, ENGINE_MAX_STOP_IDS - 8, sp->stop_token_ids,
				 &sp->n_stop_token_ids, ae) < 0)
		return -1;

	if (parse_logprobs(body, api, lim, r, ae) < 0 || parse_token_lists(body, lim, r, ae) < 0 ||
	    parse_extras(body, lim, r, ae) < 0 || parse_stream(body, r, ae) < 0)
		return -1;
	/* vLLM: greedy sampling allows a single choice only */
	if (sp->n > 1 && sp->temperature < 1e-5f)
		return api_error_set(ae, 400, "n", "n must be 1 when using greedy sampling, got %d.", sp->n);
	return 0;
}

/* vLLM's bad_words: each word's tokens, and those of " " + the word when that is a
 * different first token of the same length (a word mid-text) */
int srv_bad_words_tokenize(const struct tok *tok, const json_t *words, int32_t **tok_out, int32_t **lens_out,
			   int *n_out, struct api_error *ae)
{
	*tok_out = *lens_out = NULL;
	*n_out = 0;
	if (!tok)
		return api_error_set(ae, 400, "bad_words", "bad_words need a tokenizer");
	size_t nw = json_array_size(words), cap = 0, n_tok = 0;
	int n_seq = 0;
	int32_t *all = NULL, *lens = malloc(sizeof *lens * (nw * 2 + 1));
	if (!lens)
		return api_error_set(ae, 500, NULL, "out of memory");
	for (size_t k = 0; k < nw; k++) {
		const char *w = json_string_value(json_array_get(words, k));
		while (*w == ' ' || *w == '\t' || *w == '\n' || *w == '\r')
			w++;
		int32_t *first = NULL;
		size_t n_first = 0;
		for (int spaced = 0; spaced < 2; spaced++) {
			char *text = NULL;
			if (asprintf(&text, "%s%s", spaced ? " " : "", w) < 0) {
				free(first);
				free(all);
				free(lens);
				return api_error_set(ae, 500, NULL, "out of memory");
			}
			int32_t *ids = NULL;
			size_t n = 0;
			struct err e;
			int rc = tok_encode(tok, text, strlen(text), false, &ids, &n, &e);
			free(text);
			if (rc < 0) {
				free(ids);
				free(first);
				free(all);
				free(lens);
				if (rc == TOK_ENOMEM)
					return api_error_set(ae, 500, NULL, "out of memory");
				return api_error_set(ae, 400, "bad_words", "bad_words[%zu]: %s", k, e.msg);
			}
			bool keep = n > 0 && (!spaced || (n_first == n && first && first[0] != ids[0]));
			if (keep && n_tok + n > cap) {
				cap = (n_tok + n) * 2;
				int32_t *nt = realloc(all, sizeof *nt * cap);
				if (!nt) {
					free(ids);
					free(first);
					free(all);
					free(lens);
					return api_error_set(ae, 500, NULL, "out of memory");
				}
				all = nt;
			}
			if (keep) {
				memcpy(all + n_tok, ids, sizeof *ids * n);
				n_tok += n;
				lens[n_seq++] = (int32_t)n;
			}
			if (!spaced) {
				first = ids, n_first = n;
			} else {
				free(ids);
			}
		}
		free(first);
	}
	*tok_out = all;
	*lens_out = lens;
	*n_out = n_seq;
	return 0;
}
