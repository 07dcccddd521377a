#include "server/request.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Compact rendering of a value for messages (bounded). */
static const char *show(const json_t *v, char *buf, size_t n)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s) {
		snprintf(buf, n, "?");
		return buf;
	}
	if (strlen(s) >= n && n > 4)
		snprintf(buf, n, "%.*s...", (int)(n - 4), s);
	else
		snprintf(buf, n, "%s", s);
	free(s);
	return buf;
}

static int bad_type(struct api_error *ae, const char *key, const char *what, const json_t *v)
{
	char b[96];
	return api_error_set(ae, 400, key, "'%s': input should be %s, got %s", key, what,
			     show(v, b, sizeof b));
}

/* 0: absent or null, 1: read, -1: error. */
static int get_bool(const json_t *o, const char *key, bool *out, struct api_error *ae)
{
	const json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return bad_type(ae, key, "a valid boolean", v);
	*out = json_is_true(v);
	return 1;
}

/* Integers; reals with an integral value are accepted as pydantic does. */
static int get_int(const json_t *o, const char *key, long long *out, struct api_error *ae)
{
	const json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 1;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (d == floor(d) && fabs(d) < 9.0e18) {
			*out = (long long)d;
			return 1;
		}
		return bad_type(ae, key, "a valid integer, got a number with a fractional part", v);
	}
	return bad_type(ae, key, "a valid integer", v);
}

static int get_num(const json_t *o, const char *key, double *out, struct api_error *ae)
{
	const json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return bad_type(ae, key, "a valid number", v);
	*out = json_number_value(v);
	return 1;
}

static int get_str(const json_t *o, const char *key, const char **out, struct api_error *ae)
{
	const json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return bad_type(ae, key, "a valid string", v);
	*out = json_string_value(v);
	return 1;
}

static int range_err(struct api_error *ae, const char *key, const char *rule, double v)
{
	return api_error_set(ae, 400, key, "%s must be %s, got %g.", key, rule, v);
}

static const char *const common_keys[] = {
	"model", "frequency_penalty", "presence_penalty", "repetition_penalty", "logit_bias",
	"logprobs", "max_tokens", "n", "seed", "stop", "stop_token_ids", "stream",
	"stream_options", "temperature", "top_p", "top_k", "min_p", "user", "ignore_eos",
	"min_tokens", "skip_special_tokens", "spaces_between_special_tokens",
	"include_stop_str_in_output", "add_special_tokens", "echo", "use_beam_search",
	"prompt_logprobs", "allowed_token_ids", "bad_words", "response_format", "priority",
	"request_id", "best_of", "length_penalty", "truncate_prompt_tokens", "cache_salt",
	"return_tokens_as_token_ids", "return_token_ids", "structured_outputs", "vllm_xargs",
	"kv_transfer_params", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
	"metadata", "store", "service_tier", NULL};
static const char *const chat_keys[] = {
	"messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice",
	"parallel_tool_calls", "reasoning_effort", "add_generation_prompt",
	"continue_final_message", "documents", "chat_template", "chat_template_kwargs",
	"mm_processor_kwargs", "modalities", "audio", "prediction", "web_search_options", NULL};
static const char *const completion_keys[] = {"prompt", "suffix", NULL};

static bool in_list(const char *const *l, const char *k)
{
	for (; *l; l++)
		if (!strcmp(*l, k))
			return true;
	return false;
}

static void note_unknown(const json_t *body, enum srv_api api, char *unknown, size_t n)
{
	if (!unknown || !n)
		return;
	unknown[0] = 0;
	size_t used = 0;
	const char *key;
	const json_t *v;
	json_object_foreach((json_t *)body, key, v) {
		if (in_list(common_keys, key) ||
		    in_list(api == SRV_API_CHAT ? chat_keys : completion_keys, key))
			continue;
		int w = snprintf(unknown + used, n - used, "%s%s", used ? ", " : "", key);
		if (w < 0 || (size_t)w >= n - used) {
			unknown[used] = 0;
			break;
		}
		used += (size_t)w;
	}
}

/* Fields vLLM honours that this engine does not implement: rejected when set to a value
 * that would change the output. */
static int reject_unsupported(const json_t *body, enum srv_api api, const struct srv_limits *lim,
			      struct api_error *ae)
{
	const json_t *v;
	bool b = false;
	if (get_bool(body, "use_beam_search", &b, ae) < 0)
		return -1;
	if (b)
		return api_error_set(ae, 400, "use_beam_search", "beam search is not supported");
	if (api == SRV_API_COMPLETION) {
		if ((v = json_object_get(body, "suffix")) && !json_is_null(v))
			return api_error_set(ae, 400, "suffix", "suffix is not currently supported");
		return 0;
	}
	/* "required" and named choices are structured outputs (server/structured.c) */
	if ((v = json_object_get(body, "tool_choice")) && json_is_string(v) && !strcmp(json_string_value(v), "auto")) {
		const json_t *tools = json_object_get(body, "tools");
		if (json_is_array(tools) && json_array_size(tools) > 0 && !lim->auto_tools)
			return api_error_set(ae, 400, "tool_choice",
					     "\"auto\" tool choice requires --enable-auto-tool-choice and "
					     "--tool-call-parser to be set");
	} else if (v && !json_is_null(v) && !json_is_object(v) &&
		   !(json_is_string(v) && (!strcmp(json_string_value(v), "none") || !strcmp(json_string_value(v), "required")))) {
		return api_error_set(ae, 400, "tool_choice",
				     "tool_choice must be \"none\", \"auto\", \"required\" or a named function");
	}
	return 0;
}

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
		return bad_type(ae, "stop", "a valid string or a list of strings", v);
	if (n > ENGINE_MAX_STOP_STRS)
		return api_error_set(ae, 400, "stop", "at most %d stop strings are supported, got %zu",
				     ENGINE_MAX_STOP_STRS, n);
	for (size_t i = 0; i < n; i++) {
		const json_t *s = json_is_array(v) ? json_array_get(v, i) : one[0];
		if (!json_is_string(s))
			return bad_type(ae, "stop", "a valid string", s);
		size_t len = json_string_length(s);
		if (len == 0)
			return api_error_set(ae, 400, "stop", "stop strings must not be empty");
		if (len >= ENGINE_MAX_STOP_STR_LEN || memchr(json_string_value(s), 0, len))
			return api_error_set(ae, 400, "stop",
					     "stop strings must be shorter than %d bytes and contain "
					     "no NUL", ENGINE_MAX_STOP_STR_LEN);
		memcpy(sp->stop[sp->n_stop], json_string_value(s), len + 1);
		sp->n_stop++;
	}
	return 0;
}

static int parse_token_list(const json_t *v, const char *key, int vocab, int max, int32_t *out,
			    int *n_out, struct api_error *ae)
{
	if (!json_is_array(v))
		return bad_type(ae, key, "a valid list of token ids", v);
	size_t n = json_array_size(v);
	if ((long)n > max)
		return api_error_set(ae, 400, key, "%s: at most %d token ids, got %zu", key, max, n);
	for (size_t i = 0; i < n; i++) {
		const json_t *t = json_array_get(v, i);
		if (!json_is_integer(t))
			return bad_type(ae, key, "a valid integer token id", t);
		long long id = json_integer_value(t);
		if (id < 0 || id >= vocab)
			return api_error_set(ae, 400, key, "%s: token id %lld is out of range [0, %d)",
					     key, id, vocab);
		out[i] = (int32_t)id;
	}
	*n_out = (int)n;
	return 0;
}

static int parse_logit_bias(const json_t *body, int vocab, struct sampling_params *sp,
			    struct api_error *ae)
{
	const json_t *v = json_object_get(body, "logit_bias");
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return bad_type(ae, "logit_bias", "a valid dictionary", v);
	if (json_object_size(v) > ENGINE_MAX_LOGIT_BIAS)
		return api_error_set(ae, 400, "logit_bias", "at most %d logit_bias entries",
				     ENGINE_MAX_LOGIT_BIAS);
	const char *key;
	const json_t *b;
	json_object_foreach((json_t *)v, key, b) {
		char *end;
		long long id = strtoll(key, &end, 10);
		if (!*key || *end || id < 0 || id >= vocab)
			return api_error_set(ae, 400, "logit_bias",
					     "logit_bias: token id '%s' out of vocab range [0, %d)",
					     key, vocab);
		if (!json_is_number(b))
			return bad_type(ae, "logit_bias", "a valid number", b);
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
		if (!json_is_array(v))
			return bad_type(ae, "allowed_token_ids", "a valid list", v);
		size_t n = json_array_size(v);
		if (n > (size_t)lim->vocab_size)
			return api_error_set(ae, 400, "allowed_token_ids", "at most %d token ids", lim->vocab_size);
		if (n && !(r->allowed = malloc(sizeof *r->allowed * n)))
			return api_error_set(ae, 500, NULL, "out of memory");
		for (size_t k = 0; k < n; k++) {
			const json_t *t = json_array_get(v, k);
			if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= lim->vocab_size)
				return api_error_set(ae, 400, "allowed_token_ids",
						     "allowed_token_ids[%zu] is not a token id in [0, %d)", k, lim->vocab_size);
			r->allowed[k] = (int32_t)json_integer_value(t);
		}
		sp->allowed_ids = r->allowed;
		sp->n_allowed = (int)n;
	}
	v = json_object_get(body, "bad_words");
	if (v && !json_is_null(v)) {
		if (!json_is_array(v) || json_array_size(v) > 1024)
			return bad_type(ae, "bad_words", "a list of up to 1024 strings", v);
		for (size_t k = 0; k < json_array_size(v); k++)
			if (!json_is_string(json_array_get(v, k)) || !json_string_length(json_array_get(v, k)))
				return bad_type(ae, "bad_words", "a list of non-empty strings", json_array_get(v, k));
		r->bad_words = json_array_size(v) ? v : NULL;
	}
	return 0;
}

/* vLLM's request extras that change what is computed or returned: truncate_prompt_tokens,
 * return_tokens_as_token_ids, cache_salt; a non-zero priority needs a priority scheduler */
static int parse_extras(const json_t *body, struct srv_request *r, struct api_error *ae)
{
	long long i;
	int rc = get_int(body, "truncate_prompt_tokens", &i, ae);
	if (rc < 0)
		return -1;
	if (rc) {
		if (i < -1 || i == 0 || i > 1 << 30)
			return api_error_set(ae, 400, "truncate_prompt_tokens",
					     "truncate_prompt_tokens must be -1 or at least 1, got %lld.", i);
		r->truncate_prompt_tokens = (int)i;
	}
	if (get_bool(body, "return_tokens_as_token_ids", &r->tokens_as_ids, ae) < 0 ||
	    get_bool(body, "return_token_ids", &r->return_token_ids, ae) < 0)
		return -1;
	if ((rc = get_int(body, "best_of", &i, ae)) < 0)
		return -1;
	if (rc && i != r->sp.n) /* vLLM V1 has no best_of either: only best_of = n means anything */
		return api_error_set(ae, 400, "best_of", "best_of is not supported (only best_of = n), got %lld.", i);
	const char *rid = NULL;
	if (get_str(body, "request_id", &rid, ae) < 0)
		return -1;
	if (rid && (!*rid || strlen(rid) > 48 || strspn(rid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") != strlen(rid)))
		return api_error_set(ae, 400, "request_id", "request_id must be 1 to 48 characters of [A-Za-z0-9-_.:]");
	r->request_id = rid;
	if ((rc = get_int(body, "priority", &i, ae)) < 0)
		return -1;
	if (rc && i != 0)
		return api_error_set(ae, 400, "priority",
				     "Got priority %lld but priority scheduling is not enabled (first come, first served).", i);
	const json_t *v = json_object_get(body, "cache_salt");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v) || json_string_length(v) == 0)
			return bad_type(ae, "cache_salt", "a non-empty string", v);
		/* two FNV-1a streams: a 128-bit tag for the first block's parent hash */
		uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
		const unsigned char *c = (const unsigned char *)json_string_value(v);
		for (size_t k = 0; k < json_string_length(v); k++) {
			a = (a ^ c[k]) * 0x100000001b3ull;
			b = (b ^ c[k] ^ 0x5a) * 0x100000001b3ull;
		}
		r->sp.cache_salt[0] = a | 1; /* never the unsalted {0, 0} */
		r->sp.cache_salt[1] = b;
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
		if (get_bool(body, "logprobs", &b, ae) < 0)
			return -1;
		r->want_logprobs = b;
		if ((rc = get_int(body, "top_logprobs", &i, ae)) < 0)
			return -1;
		if (rc) {
			if (!b)
				return api_error_set(ae, 400, "top_logprobs",
						     "when using `top_logprobs`, `logprobs` must be "
						     "set to true.");
			if (i < 0 || i > max_lp)
				return api_error_set(ae, 400, "top_logprobs",
						     "top_logprobs must be in [0, %d] (--max-logprobs), got %lld.", max_lp, i);
			r->top_logprobs = (int)i;
		}
		sp->logprobs = b ? r->top_logprobs : -1;
	} else {
		if ((rc = get_int(body, "logprobs", &i, ae)) < 0)
			return -1;
		if (rc) {
			if (i < 0 || i > max_lp)
				return api_error_set(ae, 400, "logprobs",
						     "logprobs must be in [0, %d] (--max-logprobs), got %lld.", max_lp, i);
			r->want_logprobs = true;
			sp->logprobs = (int)i;
		}
	}
	/* vLLM's prompt_logprobs: each prompt token's logprob and top-N (both APIs) */
	if ((rc = get_int(body, "prompt_logprobs", &i, ae)) < 0)
		return -1;
	if (rc) {
		if (i < 0 || i > max_lp)
			return api_error_set(ae, 400, "prompt_logprobs",
					     "prompt_logprobs must be in [0, %d] (--max-logprobs), got %lld.", max_lp, i);
		r->prompt_logprobs = true;
		sp->prompt_logprobs = (int)i;
	}
	return 0;
}

/* stream, stream_options */
static int parse_stream(const json_t *body, struct srv_request *r, struct api_error *ae)
{
	if (get_bool(body, "stream", &r->stream, ae) < 0)
		return -1;
	const json_t *v = json_object_get(body, "stream_options");
	if (v && !json_is_null(v)) {
		if (!r->stream)
			return api_error_set(ae, 400, "stream_options",
					     "Stream options can only be defined when `stream=True`.");
		if (!json_is_object(v))
			return bad_type(ae, "stream_options", "a valid dictionary", v);
		r->include_usage = true; /* default when the object is present */
		if (get_bool(v, "include_usage", &r->include_usage, ae) < 0 ||
		    get_bool(v, "continuous_usage_stats", &r->continuous_usage, ae) < 0)
			return -1;
	}
	return 0;
}

/* Sampling fields shared by both endpoints. */
static int parse_sampling(const json_t *body, enum srv_api api, const struct srv_limits *lim,
			  struct srv_request *r, struct api_error *ae)
{
	struct sampling_params *sp = &r->sp;
	double d;
	long long i;
	int rc;

	if ((rc = get_num(body, "temperature", &d, ae)) < 0)
		return -1;
	if (rc) {
		if (!(d >= 0 && d <= 2))
			return range_err(ae, "temperature", "in [0, 2]", d);
		sp->temperature = (float)d;
	}
	if ((rc = get_num(body, "top_p", &d, ae)) < 0)
		return -1;
	if (rc) {
		if (!(d > 0 && d <= 1))
			return range_err(ae, "top_p", "in (0, 1]", d);
		sp->top_p = (float)d;
	}
	if ((rc = get_int(body, "top_k", &i, ae)) < 0)
		return -1;
	if (rc) {
		if (i < -1)
			return range_err(ae, "top_k", "-1 or 0 (disable), or at least 1", (double)i);
		sp->top_k = i == -1 ? 0 : (int)(i > 1 << 30 ? 1 << 30 : i);
	}
	if ((rc = get_num(body, "min_p", &d, ae)) < 0)
		return -1;
	if (rc) {
		if (!(d >= 0 && d <= 1))
			return range_err(ae, "min_p", "in [0, 1]", d);
		sp->min_p = (float)d;
	}
	static const char *const pens[2] = {"presence_penalty", "frequency_penalty"};
	for (int k = 0; k < 2; k++) {
		if ((rc = get_num(body, pens[k], &d, ae)) < 0)
			return -1;
		if (rc) {
			if (!(d >= -2 && d <= 2))
				return range_err(ae, pens[k], "in [-2, 2]", d);
			*(k ? &sp->frequency_penalty : &sp->presence_penalty) = (float)d;
		}
	}
	if ((rc = get_num(body, "repetition_penalty", &d, ae)) < 0)
		return -1;
	if (rc) {
		if (!(d > 0 && d <= 1e6))
			return range_err(ae, "repetition_penalty", "greater than zero", d);
		sp->repetition_penalty = (float)d;
	}

	/* max_tokens (deprecated alias for chat) / max_completion_tokens (wins) */
	const char *mt_key = "max_tokens";
	if ((rc = get_int(body, "max_tokens", &i, ae)) < 0)
		return -1;
	if (api == SRV_API_CHAT) {
		long long j;
		int rc2 = get_int(body, "max_completion_tokens", &j, ae);
		if (rc2 < 0)
			return -1;
		if (rc2)
			rc = 1, i = j, mt_key = "max_completion_tokens";
	} else if (!rc) {
		rc = 1, i = 16; /* CompletionRequest.max_tokens default */
	}
	if (rc) {
		if (i < 1)
			return api_error_set(ae, 400, mt_key, "%s must be at least 1, got %lld.", mt_key,
					     i);
		sp->max_tokens = i > 1 << 30 ? 1 << 30 : (int)i;
		r->max_tokens_given = true;
	}
	if ((rc = get_int(body, "min_tokens", &i, ae)) < 0)
		return -1;
	if (rc) {
		if (i < 0)
			return range_err(ae, "min_tokens", "greater than or equal to 0", (double)i);
		if (sp->max_tokens >= 0 && i > sp->max_tokens)
			return api_error_set(ae, 400, "min_tokens",
					     "min_tokens must be less than or equal to max_tokens=%d, "
					     "got %lld.", sp->max_tokens, i);
		sp->min_tokens = i > 1 << 30 ? 1 << 30 : (int)i;
	}
	if ((rc = get_int(body, "n", &i, ae)) < 0)
		return -1;
	if (rc) {
		if (i < 1)
			return range_err(ae, "n", "at least 1", (double)i);
		if (i > lim->max_n)
			return api_error_set(ae, 400, "n", "n must be at most %d, got %lld.", lim->max_n,
					     i);
		sp->n = (int)i;
	}
	if ((rc = get_int(body, "seed", &i, ae)) < 0)
		return -1;
	if (rc && i != -1) {
		sp->has_seed = true;
		sp->seed = (uint64_t)i;
	}
	if (get_bool(body, "ignore_eos", &sp->ignore_eos, ae) < 0 ||
	    get_bool(body, "skip_special_tokens", &sp->skip_special_tokens, ae) < 0 ||
	    get_bool(body, "spaces_between_special_tokens", &sp->spaces_between_special_tokens,
		     ae) < 0 ||
	    get_bool(body, "include_stop_str_in_output", &sp->include_stop_str_in_output, ae) < 0)
		return -1;
	if (parse_stop(body, sp, ae) < 0 || parse_logit_bias(body, lim->vocab_size, sp, ae) < 0)
		return -1;
	const json_t *v = json_object_get(body, "stop_token_ids");
	if (v && !json_is_null(v) &&
	    parse_token_list(v, "stop_token_ids", lim->vocab_size, ENGINE_MAX_STOP_IDS - 8,
			     sp->stop_token_ids, &sp->n_stop_token_ids, ae) < 0)
		return -1;

	if (parse_logprobs(body, api, lim, r, ae) < 0 || parse_token_lists(body, lim, r, ae) < 0 ||
	    parse_extras(body, r, ae) < 0 || parse_stream(body, r, ae) < 0)
		return -1;
	/* vLLM: greedy sampling allows a single choice only */
	if (sp->n > 1 && sp->temperature < 1e-5f)
		return api_error_set(ae, 400, "n", "n must be 1 when using greedy sampling, got %d.",
				     sp->n);
	return 0;
}

static int parse_messages(const json_t *body, struct srv_request *r, struct api_error *ae)
{
	const json_t *m = json_object_get(body, "messages");
	if (!m)
		return api_error_set(ae, 400, "messages", "'messages': field required");
	if (!json_is_array(m))
		return bad_type(ae, "messages", "a valid list", m);
	if (json_array_size(m) == 0)
		return api_error_set(ae, 400, "messages", "'messages' must contain at least one message");
	static const char *const roles[] = {"system", "user", "assistant", "tool", "developer",
					    "function", NULL};
	size_t idx;
	const json_t *msg;
	json_array_foreach(m, idx, msg) {
		if (!json_is_object(msg))
			return api_error_set(ae, 400, "messages",
					     "'messages[%zu]': input should be a valid dictionary", idx);
		const json_t *role = json_object_get(msg, "role");
		if (!json_is_string(role) || !in_list(roles, json_string_value(role)))
			return api_error_set(ae, 400, "messages",
					     "'messages[%zu].role': expected one of system, user, "
					     "assistant, tool, developer", idx);
		const json_t *c = json_object_get(msg, "content");
		if (!c || json_is_null(c) || json_is_string(c))
			continue;
		if (!json_is_array(c))
			return api_error_set(ae, 400, "messages",
					     "'messages[%zu].content': input should be a string or a "
					     "list of content parts", idx);
		size_t j;
		const json_t *part;
		json_array_foreach(c, j, part) {
			const json_t *type = json_object_get(part, "type");
			if (!json_is_object(part) || !json_is_string(type) ||
			    strcmp(json_string_value(type), "text") ||
			    !json_is_string(json_object_get(part, "text")))
				return api_error_set(ae, 400, "messages",
						     "'messages[%zu].content[%zu]': only text content "
						     "parts ({\"type\": \"text\", \"text\": ...}) are "
						     "supported", idx, j);
		}
	}
	r->messages = json_incref((json_t *)m);
	r->add_generation_prompt = true;
	if (get_bool(body, "add_generation_prompt", &r->add_generation_prompt, ae) < 0 ||
	    get_bool(body, "continue_final_message", &r->continue_final_message, ae) < 0)
		return -1;
	if (r->add_generation_prompt && r->continue_final_message)
		return api_error_set(ae, 400, "continue_final_message",
				     "Cannot set both `continue_final_message` and "
				     "`add_generation_prompt` to True.");
	if (r->continue_final_message) {
		const json_t *last = json_array_get(m, json_array_size(m) - 1);
		if (strcmp(json_string_value(json_object_get(last, "role")), "assistant"))
			return api_error_set(ae, 400, "continue_final_message",
					     "continue_final_message requires the last message to be "
					     "from the assistant");
	}
	if (get_str(body, "chat_template", &r->chat_template, ae) < 0)
		return -1;
	if (r->chat_template)
		return api_error_set(ae, 400, "chat_template",
				     "a request chat_template is not accepted; the server uses the "
				     "model's template");
	const json_t *kw = json_object_get(body, "chat_template_kwargs");
	if (kw && !json_is_null(kw)) {
		if (!json_is_object(kw))
			return bad_type(ae, "chat_template_kwargs", "a valid dictionary", kw);
		r->chat_template_kwargs = json_incref((json_t *)kw);
	}
	/* vLLM hands `tools` and `documents` to the template (a kwargs key of the same name wins) */
	static const char *const extra[] = {"tools", "documents"};
	for (int i = 0; i < 2; i++) {
		const json_t *v = json_object_get(body, extra[i]);
		if (!v || json_is_null(v))
			continue;
		if (!json_is_array(v))
			return bad_type(ae, extra[i], "a valid list", v);
		if (r->chat_template_kwargs && json_object_get(r->chat_template_kwargs, extra[i]))
			continue;
		json_t *merged = r->chat_template_kwargs ? json_copy(r->chat_template_kwargs)
							 : json_object();
		if (!merged || json_object_set(merged, extra[i], (json_t *)v) < 0) {
			json_decref(merged);
			return api_error_set(ae, 500, NULL, "out of memory");
		}
		json_decref(r->chat_template_kwargs);
		r->chat_template_kwargs = merged;
	}
	return 0;
}

static int parse_prompt_ids(const json_t *v, const char *what, int vocab, struct srv_prompt *p,
			    struct api_error *ae)
{
	size_t n = json_array_size(v);
	if (n == 0)
		return api_error_set(ae, 400, "prompt", "%s: prompt cannot be empty", what);
	p->ids = malloc(n * sizeof *p->ids);
	if (!p->ids)
		return api_error_set(ae, 500, NULL, "out of memory");
	int got;
	if (parse_token_list(v, "prompt", vocab, 1 << 30, p->ids, &got, ae) < 0)
		return -1;
	p->n_ids = got;
	return 0;
}

static int parse_prompt(const json_t *body, const struct srv_limits *lim, struct srv_request *r,
			struct api_error *ae)
{
	const json_t *v = json_object_get(body, "prompt");
	if (!v || json_is_null(v))
		return api_error_set(ae, 400, "prompt", "'prompt': field required");
	if (json_is_string(v)) {
		r->prompts = calloc(1, sizeof *r->prompts);
		if (!r->prompts)
			return api_error_set(ae, 500, NULL, "out of memory");
		r->n_prompts = 1;
		r->prompts[0].text = json_string_value(v);
		r->prompts[0].text_len = json_string_length(v);
		return 0;
	}
	if (!json_is_array(v))
		return bad_type(ae, "prompt",
				"a string, a list of strings, a list of token ids or a list of "
				"lists of token ids", v);
	size_t n = json_array_size(v);
	if (n == 0)
		return api_error_set(ae, 400, "prompt", "prompt cannot be empty");
	const json_t *first = json_array_get(v, 0);
	if (json_is_integer(first)) { /* one prompt of token ids */
		r->prompts = calloc(1, sizeof *r->prompts);
		if (!r->prompts)
			return api_error_set(ae, 500, NULL, "out of memory");
		r->n_prompts = 1;
		return parse_prompt_ids(v, "prompt", lim->vocab_size, &r->prompts[0], ae);
	}
	if (n > (size_t)lim->max_prompts)
		return api_error_set(ae, 400, "prompt", "at most %d prompts per request, got %zu",
				     lim->max_prompts, n);
	r->prompts = calloc(n, sizeof *r->prompts);
	if (!r->prompts)
		return api_error_set(ae, 500, NULL, "out of memory");
	r->n_prompts = (int)n;
	for (size_t i = 0; i < n; i++) {
		const json_t *p = json_array_get(v, i);
		char what[32];
		snprintf(what, sizeof what, "prompt[%zu]", i);
		if (json_is_string(p)) {
			r->prompts[i].text = json_string_value(p);
			r->prompts[i].text_len = json_string_length(p);
		} else if (json_is_array(p)) {
			if (parse_prompt_ids(p, what, lim->vocab_size, &r->prompts[i], ae) < 0)
				return -1;
		} else {
			return bad_type(ae, "prompt", "a string or a list of token ids", p);
		}
	}
	return 0;
}

int srv_request_parse(const json_t *body, enum srv_api api, const struct sampling_params *base,
		      const struct srv_limits *lim, struct srv_request *r, struct api_error *ae,
		      char *unknown, size_t n_unknown)
{
	memset(r, 0, sizeof *r);
	r->api = api;
	r->sp = *base;
	r->sp.n_stop = 0;
	r->sp.n_stop_token_ids = 0;
	r->sp.n_logit_bias = 0;
	if (unknown && n_unknown)
		unknown[0] = 0;
	if (!json_is_object(body))
		return api_error_set(ae, 400, NULL,
				     "the request body must be a JSON object");
	const char *model = NULL;
	if (get_str(body, "model", &model, ae) < 0)
		goto fail;
	r->model = model;
	if (reject_unsupported(body, api, lim, ae) < 0)
		goto fail;
	if (api == SRV_API_CHAT) {
		if (parse_messages(body, r, ae) < 0)
			goto fail;
		r->add_special_tokens = false; /* the template renders BOS */
		/* vLLM: tools without a tool_choice mean "auto" (reject_unsupported let only
		 * "none", "auto" with the server's parser, or no tools through) */
		const json_t *tools = json_object_get(body, "tools"), *choice = json_object_get(body, "tool_choice");
		r->parse_tools = lim->auto_tools && json_is_array(tools) && json_array_size(tools) > 0 &&
				 (!choice || json_is_null(choice) ||
				  (json_is_string(choice) && !strcmp(json_string_value(choice), "auto")));
	} else {
		if (parse_prompt(body, lim, r, ae) < 0)
			goto fail;
		r->add_special_tokens = true;
	}
	if (get_bool(body, "add_special_tokens", &r->add_special_tokens, ae) < 0 ||
	    get_bool(body, "echo", &r->echo, ae) < 0)
		goto fail;
	if (parse_sampling(body, api, lim, r, ae) < 0)
		goto fail;
	if (srv_structured_parse(body, api == SRV_API_CHAT, &r->structured, ae) < 0)
		goto fail;
	r->sp.guide = r->structured.guide;
	if (api == SRV_API_COMPLETION && r->echo && r->want_logprobs) {
		/* echo with logprobs (how evaluation harnesses score a text): the prompt's tokens
		 * lead the logprobs, the first with null, as vLLM answers */
		r->echo_logprobs = true;
		if (r->sp.prompt_logprobs < r->sp.logprobs)
			r->sp.prompt_logprobs = r->sp.logprobs;
	}
	if (r->structured.forced)
		r->parse_tools = false; /* the calls are the whole output, not the model's own format */
	note_unknown(body, api, unknown, n_unknown);
	return 0;
fail:
	srv_request_fini(r);
	r->api = api;
	return -1;
}

void srv_request_fini(struct srv_request *r)
{
	free(r->allowed);
	srv_structured_fini(&r->structured);
	json_decref(r->messages);
	json_decref(r->chat_template_kwargs);
	for (int i = 0; i < r->n_prompts; i++)
		free(r->prompts[i].ids);
	free(r->prompts);
	memset(r, 0, sizeof *r);
}

int srv_request_check_length(const struct srv_request *r, int n_prompt, int max_model_len,
			     struct api_error *ae)
{
	if (n_prompt >= max_model_len)
		return api_error_set(ae, 400, "messages",
				     "This model's maximum context length is %d tokens. However, "
				     "your request has %d input tokens. Please reduce the length of "
				     "the input messages.", max_model_len, n_prompt);
	if (r->max_tokens_given && (long)n_prompt + r->sp.max_tokens > max_model_len)
		return api_error_set(ae, 400, "max_tokens",
				     "'max_tokens' or 'max_completion_tokens' is too large: %d. This "
				     "model's maximum context length is %d tokens and your request "
				     "has %d input tokens (%d > %d - %d).", r->sp.max_tokens,
				     max_model_len, n_prompt, r->sp.max_tokens, max_model_len,
				     n_prompt);
	return 0;
}

/* memrchr for a needle */
static const char *last_occurrence(const char *hay, size_t n, const char *needle, size_t m)
{
	if (m > n)
		return NULL;
	for (size_t i = n - m + 1; i-- > 0;)
		if (!memcmp(hay + i, needle, m))
			return hay + i;
	return NULL;
}

long srv_continue_final_cut(const json_t *messages, const char *rendered, size_t len,
			    struct api_error *ae)
{
	const json_t *last = json_array_get(messages, json_array_size(messages) - 1);
	const json_t *c = json_object_get(last, "content");
	if (json_is_array(c)) /* transformers uses the text of the last part */
		c = json_object_get(json_array_get(c, json_array_size(c) - 1), "text");
	if (!json_is_string(c))
		return api_error_set(ae, 400, "messages",
				     "continue_final_message: the final message has no text content");
	const char *s = json_string_value(c);
	size_t m = json_string_length(c);
	const char *hit = last_occurrence(rendered, len, s, m);
	if (!hit) { /* some templates strip the content */
		while (m && strchr(" \t\n\r", *s))
			s++, m--;
		while (m && strchr(" \t\n\r", s[m - 1]))
			m--;
		hit = last_occurrence(rendered, len, s, m);
	}
	if (!hit)
		return api_error_set(ae, 400, "messages",
				     "continue_final_message: the final message was not found in "
				     "the rendered chat template");
	return (long)(hit - rendered + m);
}
