/* Request parsing (request.h): the body's shape, the endpoint fields (messages, prompts),
 * unknown and unsupported fields, and the length checks. The sampling fields are in
 * request_sampling.c, the typed field readers in request_fields.c. */
#include "server/openai/request.h"
#include "server/openai/request_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const common_keys[] = {"model",
					  "frequency_penalty",
					  "presence_penalty",
					  "repetition_penalty",
					  "logit_bias",
					  "logprobs",
					  "max_tokens",
					  "n",
					  "seed",
					  "stop",
					  "stop_token_ids",
					  "stream",
					  "stream_options",
					  "temperature",
					  "top_p",
					  "top_k",
					  "min_p",
					  "user",
					  "ignore_eos",
					  "min_tokens",
					  "skip_special_tokens",
					  "spaces_between_special_tokens",
					  "include_stop_str_in_output",
					  "add_special_tokens",
					  "echo",
					  "use_beam_search",
					  "prompt_logprobs",
					  "allowed_token_ids",
					  "bad_words",
					  "response_format",
					  "priority",
					  "request_id",
					  "best_of",
					  "length_penalty",
					  "truncate_prompt_tokens",
					  "cache_salt",
					  "return_tokens_as_token_ids",
					  "return_token_ids",
					  "structured_outputs",
					  "vllm_xargs",
					  "kv_transfer_params",
					  "guided_json",
					  "guided_regex",
					  "guided_choice",
					  "guided_grammar",
					  "metadata",
					  "store",
					  "service_tier",
					  NULL};
static const char *const chat_keys[] = {"messages",
					"max_completion_tokens",
					"top_logprobs",
					"tools",
					"tool_choice",
					"parallel_tool_calls",
					"reasoning_effort",
					"add_generation_prompt",
					"continue_final_message",
					"documents",
					"chat_template",
					"chat_template_kwargs",
					"mm_processor_kwargs",
					"modalities",
					"audio",
					"prediction",
					"web_search_options",
					NULL};
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
	json_object_foreach((json_t *)body, key, v)
	{
		if (in_list(common_keys, key) || in_list(api == SRV_API_CHAT ? chat_keys : completion_keys, key))
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
static int reject_unsupported(const json_t *body, enum srv_api api, const struct srv_limits *lim, struct api_error *ae)
{
	const json_t *v;
	bool b = false;
	if (req_get_bool(body, "use_beam_search", &b, ae) < 0)
		return -1;
	if (b)
		return api_error_set(ae, 400, "use_beam_search", "beam search is not supported");
	if (api == SRV_API_COMPLETION) {
		if ((v = json_object_get(body, "suffix")) && !json_is_null(v))
			return api_error_set(ae, 400, "suffix", "suffix is not currently supported");
		return 0;
	}
	/* "required" and named choices are structured outputs (server/openai/structured.c) */
	if ((v = json_object_get(body, "tool_choice")) && json_is_string(v) && !strcmp(json_string_value(v), "auto")) {
		const json_t *tools = json_object_get(body, "tools");
		if (json_is_array(tools) && json_array_size(tools) > 0 && !lim->auto_tools)
			return api_error_set(ae, 400, "tool_choice",
					     "\"auto\" tool choice requires --enable-auto-tool-choice and "
					     "--tool-call-parser to be set");
	} else if (v && !json_is_null(v) && !json_is_object(v) &&
		   !(json_is_string(v) &&
		     (!strcmp(json_string_value(v), "none") || !strcmp(json_string_value(v), "required")))) {
		return api_error_set(ae, 400, "tool_choice",
				     "tool_choice must be \"none\", \"auto\", \"required\" or a named function");
	}
	return 0;
}

/* tools as vLLM's ChatCompletionToolsParam validates them, whatever the tool_choice:
 * {"type": "function" (the default), "function": {"name": str, "description": str|null,
 * "parameters": object|null, "strict": bool|null}}. */
static int tool_bad_type(struct api_error *ae, const char *at, const char *what, const json_t *v)
{
	int rc = req_bad_type(ae, at, what, v);
	snprintf(ae->param, sizeof ae->param, "tools");
	return rc;
}

static int check_tools(const json_t *body, struct api_error *ae)
{
	const json_t *tools = json_object_get(body, "tools");
	if (!tools || json_is_null(tools))
		return 0;
	if (!json_is_array(tools))
		return req_bad_type(ae, "tools", "a valid list", tools);
	size_t i;
	const json_t *t;
	char at[64];
	json_array_foreach(tools, i, t)
	{
		snprintf(at, sizeof at, "tools[%zu]", i);
		if (!json_is_object(t))
			return tool_bad_type(ae, at, "a valid dictionary", t);
		const json_t *type = json_object_get(t, "type");
		if (type && !(json_is_string(type) && !strcmp(json_string_value(type), "function")))
			return api_error_set(ae, 400, "tools", "'%s.type': input should be 'function'", at);
		const json_t *f = json_object_get(t, "function");
		snprintf(at, sizeof at, "tools[%zu].function", i);
		if (!f)
			return api_error_set(ae, 400, "tools", "'%s': field required", at);
		if (!json_is_object(f))
			return tool_bad_type(ae, at, "a valid dictionary", f);
		const json_t *name = json_object_get(f, "name");
		snprintf(at, sizeof at, "tools[%zu].function.name", i);
		if (!name)
			return api_error_set(ae, 400, "tools", "'%s': field required", at);
		if (!json_is_string(name))
			return tool_bad_type(ae, at, "a valid string", name);
		const json_t *d = json_object_get(f, "description"), *p = json_object_get(f, "parameters");
		const json_t *st = json_object_get(f, "strict");
		snprintf(at, sizeof at, "tools[%zu].function.description", i);
		if (d && !json_is_null(d) && !json_is_string(d))
			return tool_bad_type(ae, at, "a valid string", d);
		snprintf(at, sizeof at, "tools[%zu].function.parameters", i);
		if (p && !json_is_null(p) && !json_is_object(p))
			return tool_bad_type(ae, at, "a valid dictionary", p);
		snprintf(at, sizeof at, "tools[%zu].function.strict", i);
		if (st && !json_is_null(st) && !json_is_boolean(st))
			return tool_bad_type(ae, at, "a valid boolean", st);
	}
	return 0;
}

/* chat_template_kwargs[key] = v (a new reference, taken) unless the request's kwargs set key:
 * vLLM hands `tools`, `documents` and `reasoning_effort` to the template too */
static int kwargs_default(struct srv_request *r, const char *key, json_t *v, struct api_error *ae)
{
	if (r->chat_template_kwargs && json_object_get(r->chat_template_kwargs, key)) {
		json_decref(v);
		return 0;
	}
	json_t *merged = r->chat_template_kwargs ? json_copy(r->chat_template_kwargs) : json_object();
	if (!merged || !v || json_object_set_new(merged, key, v) < 0) {
		json_decref(merged);
		return api_error_set(ae, 500, NULL, "out of memory");
	}
	json_decref(r->chat_template_kwargs);
	r->chat_template_kwargs = merged;
	return 0;
}

static int parse_messages(const json_t *body, struct srv_request *r, struct api_error *ae)
{
	const json_t *m = json_object_get(body, "messages");
	if (!m)
		return api_error_set(ae, 400, "messages", "'messages': field required");
	if (!json_is_array(m))
		return req_bad_type(ae, "messages", "a valid list", m);
	if (json_array_size(m) == 0)
		return api_error_set(ae, 400, "messages", "'messages' must contain at least one message");
	static const char *const roles[] = {"system", "user", "assistant", "tool", "developer", "function", NULL};
	size_t idx;
	const json_t *msg;
	json_array_foreach(m, idx, msg)
	{
		if (!json_is_object(msg))
			return api_error_set(ae, 400, "messages",
					     "'messages[%zu]': input should be a valid dictionary", idx);
		const json_t *role = json_object_get(msg, "role");
		if (!json_is_string(role) || !in_list(roles, json_string_value(role)))
			return api_error_set(ae, 400, "messages",
					     "'messages[%zu].role': expected one of system, user, "
					     "assistant, tool, developer",
					     idx);
		const json_t *c = json_object_get(msg, "content");
		if (!c || json_is_null(c) || json_is_string(c))
			continue;
		if (!json_is_array(c))
			return api_error_set(ae, 400, "messages",
					     "'messages[%zu].content': input should be a string or a "
					     "list of content parts",
					     idx);
		size_t j;
		const json_t *part;
		json_array_foreach(c, j, part)
		{
			const json_t *type = json_object_get(part, "type");
			const char *ts = json_string_value(type);
			if (ts && (!strcmp(ts, "image_url") || !strcmp(ts, "input_image") || !strcmp(ts, "image")))
				return api_error_set(ae, 400, "messages",
						     "'messages[%zu].content[%zu]': this model does not accept "
						     "image input (%s): it serves a text model only",
						     idx, j, ts);
			if (!json_is_object(part) || !json_is_string(type) ||
			    strcmp(json_string_value(type), "text") || !json_is_string(json_object_get(part, "text")))
				return api_error_set(ae, 400, "messages",
						     "'messages[%zu].content[%zu]': only text content "
						     "parts ({\"type\": \"text\", \"text\": ...}) are "
						     "supported",
						     idx, j);
		}
	}
	/* a message without content (an assistant's with only tool_calls) or with null content
	 * reaches the template as vLLM's "" or [] (tok/chat_history.h) */
	r->messages = json_incref((json_t *)m);
	r->add_generation_prompt = true;
	if (req_get_bool(body, "add_generation_prompt", &r->add_generation_prompt, ae) < 0 ||
	    req_get_bool(body, "continue_final_message", &r->continue_final_message, ae) < 0)
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
	if (req_get_str(body, "chat_template", &r->chat_template, ae) < 0)
		return -1;
	if (r->chat_template)
		return api_error_set(ae, 400, "chat_template",
				     "a request chat_template is not accepted; the server uses the "
				     "model's template");
	const json_t *kw = json_object_get(body, "chat_template_kwargs");
	if (kw && !json_is_null(kw)) {
		if (!json_is_object(kw))
			return req_bad_type(ae, "chat_template_kwargs", "a valid dictionary", kw);
		r->chat_template_kwargs = json_incref((json_t *)kw);
	}
	static const char *const extra[] = {"tools", "documents"};
	for (int i = 0; i < 2; i++) {
		const json_t *v = json_object_get(body, extra[i]);
		if (!v || json_is_null(v))
			continue;
		if (!json_is_array(v))
			return req_bad_type(ae, extra[i], "a valid list", v);
		if (kwargs_default(r, extra[i], json_incref((json_t *)v), ae) < 0)
			return -1;
	}
	const char *effort;
	int got = req_get_str(body, "reasoning_effort", &effort, ae);
	return got <= 0 ? got : kwargs_default(r, "reasoning_effort", json_string(effort), ae);
}

static int parse_prompt_ids(const json_t *v, const char *what, int vocab, struct srv_prompt *p, struct api_error *ae)
{
	size_t n = json_array_size(v);
	if (n == 0)
		return api_error_set(ae, 400, "prompt", "%s: prompt cannot be empty", what);
	p->ids = malloc(n * sizeof *p->ids);
	if (!p->ids)
		return api_error_set(ae, 500, NULL, "out of memory");
	int got;
	if (req_parse_token_list(v, "prompt", vocab, 1 << 30, p->ids, &got, ae) < 0)
		return -1;
	p->n_ids = got;
	return 0;
}

static int parse_prompt(const json_t *body, const struct srv_limits *lim, struct srv_request *r, struct api_error *ae)
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
		return req_bad_type(ae, "prompt",
				    "a string, a list of strings, a list of token ids or a list of "
				    "lists of token ids",
				    v);
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
		return api_error_set(ae, 400, "prompt", "at most %d prompts per request, got %zu", lim->max_prompts,
				     n);
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
			return req_bad_type(ae, "prompt", "a string or a list of token ids", p);
		}
	}
	return 0;
}

int srv_request_parse(const json_t *body, enum srv_api api, const struct sampling_params *base,
		      const struct srv_limits *lim, struct srv_request *r, struct api_error *ae, char *unknown,
		      size_t n_unknown)
{
	memset(r, 0, sizeof *r);
	r->api = api;
	r->sp = *base;
	r->sp.max_tokens = -1; /* the request's own only: see srv_request.sp */
	r->sp.n_stop = 0;
	r->sp.n_stop_token_ids = 0;
	r->sp.n_logit_bias = 0;
	if (unknown && n_unknown)
		unknown[0] = 0;
	if (!json_is_object(body))
		return api_error_set(ae, 400, NULL, "the request body must be a JSON object");
	const char *model = NULL;
	if (req_get_str(body, "model", &model, ae) < 0)
		goto fail;
	r->model = model;
	if (reject_unsupported(body, api, lim, ae) < 0)
		goto fail;
	if (api == SRV_API_CHAT) {
		if (check_tools(body, ae) < 0 || parse_messages(body, r, ae) < 0)
			goto fail;
		r->add_special_tokens = false; /* the template renders BOS */
		/* vLLM: tools without a tool_choice mean "auto" (reject_unsupported let only
		 * "none", "auto" with the server's parser, or no tools through) */
		const json_t *tools = json_object_get(body, "tools"), *choice = json_object_get(body, "tool_choice");
		r->parse_tools = lim->auto_tools && json_is_array(tools) && json_array_size(tools) > 0 &&
				 (!choice || json_is_null(choice) ||
				  (json_is_string(choice) && !strcmp(json_string_value(choice), "auto")));
		if (json_is_array(tools))
			r->tools = json_incref((json_t *)tools);
	} else {
		if (parse_prompt(body, lim, r, ae) < 0)
			goto fail;
		r->add_special_tokens = true;
	}
	if (req_get_bool(body, "add_special_tokens", &r->add_special_tokens, ae) < 0 ||
	    req_get_bool(body, "echo", &r->echo, ae) < 0)
		goto fail;
	if (req_parse_sampling(body, api, base, lim, r, ae) < 0)
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
	free(r->bad_tok);
	free(r->bad_lens);
	srv_structured_fini(&r->structured);
	json_decref(r->messages);
	json_decref(r->chat_template_kwargs);
	json_decref(r->tools);
	for (int i = 0; i < r->n_prompts; i++)
		free(r->prompts[i].ids);
	free(r->prompts);
	memset(r, 0, sizeof *r);
}

int srv_request_check_length(const struct srv_request *r, int n_prompt, int max_model_len, struct api_error *ae)
{
	if (n_prompt >= max_model_len)
		return api_error_set(ae, 400, "messages",
				     "This model's maximum context length is %d tokens. However, "
				     "your request has %d input tokens. Please reduce the length of "
				     "the input messages.",
				     max_model_len, n_prompt);
	if (r->sp.max_tokens > 0 && (long)n_prompt + r->sp.max_tokens > max_model_len)
		return api_error_set(ae, 400, "max_tokens",
				     "'max_tokens' or 'max_completion_tokens' is too large: %d. This "
				     "model's maximum context length is %d tokens and your request "
				     "has %d input tokens (%d > %d - %d).",
				     r->sp.max_tokens, max_model_len, n_prompt, r->sp.max_tokens, max_model_len,
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

long srv_continue_final_cut(const json_t *messages, const char *rendered, size_t len, struct api_error *ae)
{
	const json_t *last = json_array_get(messages, json_array_size(messages) - 1);
	const json_t *c = json_object_get(last, "content");
	if (json_is_array(c)) /* transformers uses the text of the last part */
		c = json_object_get(json_array_get(c, json_array_size(c) - 1), "text");
	json_t *empty = NULL;
	if (!c || json_is_null(c)) /* rendered as vLLM's "" */
		c = empty = json_string("");
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
	json_decref(empty);
	if (!hit)
		return api_error_set(ae, 400, "messages",
				     "continue_final_message: the final message was not found in "
				     "the rendered chat template");
	return (long)(hit - rendered + m);
}
