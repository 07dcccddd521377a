/* The Responses API over the chat pipeline (responses.h): a translation, not a third
 * pipeline. The request becomes a chat body that goes through the chat parser, template and
 * engine like any other; only the answer's shape differs: generate.c / generate_stream.c hand
 * the choice's reasoning and content to resp_object, or stream them to resp_stream_delta, a
 * small state machine that opens and closes the output items around the deltas and numbers
 * every event. Tool calls come from the chat path's own parsers. */
#include "server/openai/responses.h"

#include <stdlib.h>
#include <string.h>

#include "server/parsers/jstr.h"

enum phase { PH_NONE, PH_REASONING, PH_MESSAGE, PH_CALL };

struct resp_state {
	json_t *echo; /* request fields the Response object repeats */
	char id[64];
	long long created;
	char model[256];
	char rs_id[64], msg_id[64]; /* output item ids */
	long seq;                   /* streaming: the next sequence_number */
	enum phase phase;
	int n_items;                   /* output items opened so far */
	struct strbuf reasoning, text; /* streamed so far */
	json_t *done_items;            /* the items closed so far, in order (the final output) */
	bool enc;                      /* include "reasoning.encrypted_content": reasoning items say null */
	bool want_lp;                  /* include "message.output_text.logprobs" */
	json_t *lp, *lp_pending;       /* streaming: every token's logprobs; those not yet sent with text */
	/* the function call being streamed */
	char fc_id[64], call_id[128], call_name[256];
	struct strbuf call_args;
	/* storage (server/openai/resp_store.h) */
	bool store;                /* "store" (default true) and the server stores */
	char prev_id[RESP_ID_MAX]; /* previous_response_id, or "" */
	json_t *items;             /* the conversation's input items: the previous response's, then this input */
	json_t *final;             /* the finished Response object */
};

void resp_state_free(struct resp_state *rs)
{
	if (!rs)
		return;
	json_decref(rs->echo);
	json_decref(rs->done_items);
	json_decref(rs->lp);
	json_decref(rs->lp_pending);
	json_decref(rs->items);
	json_decref(rs->final);
	strbuf_fini(&rs->reasoning);
	strbuf_fini(&rs->text);
	strbuf_fini(&rs->call_args);
	free(rs);
}

/* ---- the request ---- */

/* an input message's text: a string, or input_text / output_text parts joined */
static int message_text(const json_t *content, size_t item, struct strbuf *out, struct api_error *ae)
{
	if (json_is_string(content))
		return strbuf_put(out, json_string_value(content), json_string_length(content)) < 0
			       ? api_error_set(ae, 500, NULL, "out of memory")
			       : 0;
	if (!json_is_array(content))
		return api_error_set(ae, 400, "input", "input[%zu].content must be a string or a list of parts", item);
	size_t i;
	const json_t *part;
	json_array_foreach(content, i, part)
	{
		const char *type = json_string_value(json_object_get(part, "type"));
		const json_t *text = json_object_get(part, "text");
		if (type && (!strcmp(type, "input_image") || !strcmp(type, "image_url")))
			return api_error_set(
				ae, 400, "input",
				"input[%zu].content[%zu]: this model does not accept image input (%s): it "
				"serves a text model only",
				item, i, type);
		if (!type || (strcmp(type, "input_text") && strcmp(type, "output_text")))
			return api_error_set(
				ae, 400, "input",
				"input[%zu].content[%zu]: part type %s is not supported (input_text, output_text)",
				item, i, type ? type : "(missing)");
		if (!json_is_string(text))
			return api_error_set(ae, 400, "input", "input[%zu].content[%zu].text must be a string", item,
					     i);
		if (strbuf_put(out, json_string_value(text), json_string_length(text)) < 0)
			return api_error_set(ae, 500, NULL, "out of memory");
	}
	return 0;
}

static int push_message(json_t *messages, const char *role, const char *text, size_t len)
{
	json_t *m = json_pack("{s:s, s:s%}", "role", role, "content", text ? text : "", text ? len : 0);
	return m ? json_array_append_new(messages, m) : -1;
}

/* function_call → an assistant message's tool_calls (consecutive calls join one message);
 * function_call_output → a tool message */
static int tool_item(const json_t *item, size_t i, bool call, json_t *messages, struct api_error *ae)
{
	const char *call_id = json_string_value(json_object_get(item, "call_id"));
	if (!call_id)
		return api_error_set(ae, 400, "input", "input[%zu].call_id must be a string", i);
	if (!call) {
		const json_t *out = json_object_get(item, "output");
		if (!json_is_string(out))
			return api_error_set(ae, 400, "input", "input[%zu].output must be a string", i);
		json_t *m = json_pack("{s:s, s:s, s:O}", "role", "tool", "tool_call_id", call_id, "content", out);
		return !m || json_array_append_new(messages, m) < 0 ? api_error_set(ae, 500, NULL, "out of memory")
								    : 0;
	}
	const json_t *name = json_object_get(item, "name"), *args = json_object_get(item, "arguments");
	if (!json_is_string(name) || !json_is_string(args))
		return api_error_set(ae, 400, "input", "input[%zu]: a function_call needs string name and arguments",
				     i);
	json_t *tc = json_pack("{s:s, s:s, s:{s:O, s:O}}", "id", call_id, "type", "function", "function", "name", name,
			       "arguments", args);
	json_t *last = json_array_get(messages, json_array_size(messages) - 1);
	json_t *calls = json_object_get(last, "tool_calls");
	if (tc && calls && !strcmp(json_string_value(json_object_get(last, "role")), "assistant"))
		return json_array_append_new(calls, tc) < 0 ? api_error_set(ae, 500, NULL, "out of memory") : 0;
	json_t *m = tc ? json_pack("{s:s, s:s, s:[o]}", "role", "assistant", "content", "", "tool_calls", tc) : NULL;
	return !m || json_array_append_new(messages, m) < 0 ? api_error_set(ae, 500, NULL, "out of memory") : 0;
}

/* tools: function tools only, in the chat shape; tool_choice likewise */
static int tools(const json_t *body, json_t *chat, struct api_error *ae)
{
	const json_t *t = json_object_get(body, "tools"), *tc = json_object_get(body, "tool_choice");
	if (t && !json_is_null(t)) {
		if (!json_is_array(t))
			return api_error_set(ae, 400, "tools", "'tools' must be a list");
		json_t *out = json_array();
		size_t i;
		const json_t *tool;
		json_array_foreach(t, i, tool)
		{
			const char *type = json_string_value(json_object_get(tool, "type"));
			if (!type || strcmp(type, "function")) {
				json_decref(out);
				return api_error_set(ae, 400, "tools",
						     "tools[%zu]: type %s is not supported (function tools only)", i,
						     type ? type : "(missing)");
			}
			json_t *fn = json_object();
			const char *keys[] = {"name", "description", "parameters", "strict"};
			for (size_t k = 0; fn && k < sizeof keys / sizeof *keys; k++) {
				json_t *v = json_object_get(tool, keys[k]);
				if (v && !json_is_null(v))
					json_object_set(fn, keys[k], v);
			}
			if (!out || !fn ||
			    json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn)) <
				    0) {
				json_decref(out);
				return api_error_set(ae, 500, NULL, "out of memory");
			}
		}
		if (json_object_set_new(chat, "tools", out) < 0)
			return api_error_set(ae, 500, NULL, "out of memory");
	}
	if (!tc || json_is_null(tc))
		return 0;
	if (json_is_string(tc))
		return json_object_set(chat, "tool_choice", (json_t *)tc) < 0
			       ? api_error_set(ae, 500, NULL, "out of memory")
			       : 0;
	const char *type = json_string_value(json_object_get(tc, "type"));
	const json_t *name = json_object_get(tc, "name");
	if (!type || strcmp(type, "function") || !json_is_string(name))
		return api_error_set(
			ae, 400, "tool_choice",
			"tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
	return json_object_set_new(chat, "tool_choice",
				   json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name)) < 0
		       ? api_error_set(ae, 500, NULL, "out of memory")
		       : 0;
}

static int input_messages(const json_t *input, json_t *messages, struct api_error *ae)
{
	if (json_is_string(input))
		return push_message(messages, "user", json_string_value(input), json_string_length(input)) < 0
			       ? api_error_set(ae, 500, NULL, "out of memory")
			       : 0;
	if (!json_is_array(input) || json_array_size(input) == 0)
		return api_error_set(ae, 400, "input", "'input' must be a string or a non-empty list of messages");
	size_t i;
	const json_t *item;
	json_array_foreach(input, i, item)
	{
		const char *type = json_string_value(json_object_get(item, "type"));
		const char *role = json_string_value(json_object_get(item, "role"));
		if (type && !strcmp(type, "reasoning"))
			continue; /* a replayed reasoning item: DeepSeek's templates drop past thinking anyway */
		if (type && (!strcmp(type, "function_call") || !strcmp(type, "function_call_output"))) {
			if (tool_item(item, i, !strcmp(type, "function_call"), messages, ae) < 0)
				return -1;
			continue;
		}
		if (type && strcmp(type, "message"))
			return api_error_set(
				ae, 400, "input",
				"input[%zu]: item type %s is not supported here (messages, function_call, "
				"function_call_output, reasoning)",
				i, type);
		if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
			      strcmp(role, "developer")))
			return api_error_set(ae, 400, "input",
					     "input[%zu].role must be user, assistant, system or developer", i);
		struct strbuf t = {0};
		int rc = message_text(json_object_get(item, "content"), i, &t, ae);
		if (rc == 0 && push_message(messages, strcmp(role, "developer") ? role : "system", t.p, t.n) < 0)
			rc = api_error_set(ae, 500, NULL, "out of memory");
		strbuf_fini(&t);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* an input item as stored and listed by /input_items: typed, with an id, a message's text as
 * parts (what input_messages reads back on the next turn) */
static json_t *stored_item(const json_t *item)
{
	json_t *c = json_deep_copy(item);
	if (!c)
		return NULL;
	const char *role = json_string_value(json_object_get(c, "role"));
	if (!json_object_get(c, "type") && role)
		json_object_set_new(c, "type", json_string("message"));
	const char *type = json_string_value(json_object_get(c, "type"));
	const json_t *text = json_object_get(c, "content");
	if (type && !strcmp(type, "message") && json_is_string(text))
		json_object_set_new(c, "content",
				    json_pack("[{s:s, s:O}]", "type",
					      role && !strcmp(role, "assistant") ? "output_text" : "input_text",
					      "text", text));
	if (!json_is_string(json_object_get(c, "id"))) {
		char id[64];
		jstr_random_id(id, sizeof id,
			       !type                                   ? "item_"
			       : !strcmp(type, "message")              ? "msg_"
			       : !strcmp(type, "function_call")        ? "fc_"
			       : !strcmp(type, "function_call_output") ? "fco_"
			       : !strcmp(type, "reasoning")            ? "rs_"
								       : "item_");
		json_object_set_new(c, "id", json_string(id));
	}
	return c;
}

/* prev (or NULL: already stored items) then input (a string is one user message) as one new
 * list of input items */
static int conversation_items(const json_t *prev, const json_t *input, json_t **out)
{
	json_t *a = prev ? json_copy((json_t *)prev) : json_array();
	json_t *one = json_is_string(input) ? json_pack("[{s:s, s:O}]", "role", "user", "content", input)
					    : json_incref((json_t *)input);
	size_t i;
	const json_t *item;
	json_array_foreach(one, i, item)
	{
		if (!a || json_array_append_new(a, stored_item(item)) < 0) { /* it takes NULL as a failure */
			json_decref(a);
			a = NULL;
			break;
		}
	}
	json_decref(one);
	*out = a;
	return a ? 0 : -1;
}

/* text.format → response_format */
static int text_format(const json_t *text, json_t *chat, struct api_error *ae)
{
	const json_t *f = json_object_get(text, "format");
	if (!f || json_is_null(f))
		return 0;
	const char *type = json_string_value(json_object_get(f, "type"));
	if (type && !strcmp(type, "text"))
		return 0;
	if (type && !strcmp(type, "json_object"))
		return json_object_set_new(chat, "response_format", json_pack("{s:s}", "type", "json_object")) < 0
			       ? api_error_set(ae, 500, NULL, "out of memory")
			       : 0;
	if (!type || strcmp(type, "json_schema"))
		return api_error_set(ae, 400, "text.format",
				     "text.format.type must be text, json_object or json_schema");
	json_t *js = json_object();
	const char *keys[] = {"name", "schema", "strict", "description"};
	for (size_t k = 0; js && k < sizeof keys / sizeof *keys; k++) {
		json_t *v = json_object_get(f, keys[k]);
		if (v && json_object_set(js, keys[k], v) < 0)
			json_decref(js), js = NULL;
	}
	return json_object_set_new(chat, "response_format",
				   json_pack("{s:s, s:o}", "type", "json_schema", "json_schema", js)) < 0
		       ? api_error_set(ae, 500, NULL, "out of memory")
		       : 0;
}

int resp_translate(const json_t *body, const json_t *prev_items, bool can_store, json_t **chat,
		   struct resp_state **out, struct api_error *ae)
{
	*chat = NULL;
	*out = NULL;
	/* fields that have no meaning here, or that we cannot honour (a 400, not a silent no) */
	static const char *const known[] = {"model",
					    "input",
					    "instructions",
					    "max_output_tokens",
					    "temperature",
					    "top_p",
					    "stream",
					    "text",
					    "store",
					    "metadata",
					    "user",
					    "reasoning",
					    "tools",
					    "tool_choice",
					    "parallel_tool_calls",
					    "previous_response_id",
					    "background",
					    "include",
					    "truncation",
					    "seed",
					    "service_tier",
					    "safety_identifier",
					    "prompt_cache_key",
					    "stream_options",
					    "top_logprobs"};
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)body, key, v)
	{
		bool ok = json_is_null(v); /* null: not given (as SDKs send unset fields) */
		for (size_t k = 0; k < sizeof known / sizeof *known; k++)
			ok |= !strcmp(key, known[k]);
		if (!ok)
			return api_error_set(ae, 400, key,
					     "'%s' is not a field of the Responses API that this server takes", key);
	}
	const json_t *prev = json_object_get(body, "previous_response_id"), *store = json_object_get(body, "store");
	if (prev && !json_is_null(prev) && (!json_is_string(prev) || json_string_length(prev) >= RESP_ID_MAX))
		return api_error_set(ae, 400, "previous_response_id", "'previous_response_id' must be a response id");
	if (prev && !json_is_null(prev) && !prev_items) /* the caller looked it up */
		return api_error_set(
			ae, 400, "previous_response_id",
			"responses are not stored here (--responses-store-size 0), so previous_response_id "
			"cannot be used: send the conversation in 'input'");
	if (store && !json_is_null(store) && !json_is_boolean(store))
		return api_error_set(ae, 400, "store", "'store' must be a boolean");
	if (json_is_true(json_object_get(body, "background")))
		return api_error_set(ae, 400, "background", "background responses are not supported");
	size_t ii;
	const json_t *inc;
	bool enc = false, want_lp = false;
	json_array_foreach(json_object_get(body, "include"), ii, inc)
	{
		/* stateless clients ask for it to send reasoning back: ours is in the clear, and past
		 * reasoning is dropped from the prompt anyway, so there is none (null) */
		if (json_is_string(inc) && !strcmp(json_string_value(inc), "reasoning.encrypted_content"))
			enc = true;
		else if (json_is_string(inc) && !strcmp(json_string_value(inc), "message.output_text.logprobs"))
			want_lp = true;
		else
			return api_error_set(ae, 400, "include",
					     "include[%zu]: only \"reasoning.encrypted_content\" and "
					     "\"message.output_text.logprobs\" "
					     "are taken",
					     ii);
	}
	const char *trunc = json_string_value(json_object_get(body, "truncation"));
	if (trunc && strcmp(trunc, "disabled"))
		return api_error_set(ae, 400, "truncation", "only truncation \"disabled\" is supported");
	const json_t *top = json_object_get(body, "top_logprobs");
	if (top && !json_is_null(top) && !json_is_integer(top))
		return api_error_set(ae, 400, "top_logprobs", "'top_logprobs' must be an integer");
	const json_t *mot = json_object_get(body, "max_output_tokens");
	if (mot && !json_is_null(mot) && (!json_is_integer(mot) || json_integer_value(mot) < 1))
		return api_error_set(ae, 400, "max_output_tokens", "'max_output_tokens' must be an integer >= 1");
	const json_t *instr = json_object_get(body, "instructions");
	if (instr && !json_is_null(instr) && !json_is_string(instr))
		return api_error_set(ae, 400, "instructions", "'instructions' must be a string");
	json_t *c = json_object(), *messages = json_array();
	struct resp_state *rs = calloc(1, sizeof *rs);
	if (!c || !messages || !rs || json_object_set_new(c, "messages", messages) < 0) {
		json_decref(c);
		free(rs);
		return api_error_set(ae, 500, NULL, "out of memory");
	}
	int rc = 0;
	if (json_is_string(instr) &&
	    push_message(messages, "system", json_string_value(instr), json_string_length(instr)) < 0)
		rc = api_error_set(ae, 500, NULL, "out of memory");
	if (rc == 0 && !json_object_get(body, "input"))
		rc = api_error_set(ae, 400, "input", "'input' is required");
	if (rc == 0 && prev_items) /* the stored conversation (instructions are not carried over) */
		rc = input_messages(prev_items, messages, ae);
	if (rc == 0)
		rc = input_messages(json_object_get(body, "input"), messages, ae);
	if (rc == 0 && conversation_items(prev_items, json_object_get(body, "input"), &rs->items) < 0)
		rc = api_error_set(ae, 500, NULL, "out of memory");
	if (rc == 0 && json_array_size(messages) == 0)
		rc = api_error_set(ae, 400, "input", "'input' has no message");
	/* the same meaning under a chat name (checked by the chat parser) */
	static const char *const same[][2] = {{"model", "model"}, {"temperature", "temperature"},
					      {"top_p", "top_p"}, {"stream", "stream"},
					      {"seed", "seed"},   {"max_output_tokens", "max_tokens"}};
	for (size_t k = 0; rc == 0 && k < sizeof same / sizeof *same; k++)
		if ((v = json_object_get(body, same[k][0])) && json_object_set(c, same[k][1], v) < 0)
			rc = api_error_set(ae, 500, NULL, "out of memory");
	if (rc == 0 && (v = json_object_get(body, "text")) && text_format(v, c, ae) < 0)
		rc = -1;
	if (rc == 0 && tools(body, c, ae) < 0)
		rc = -1;
	/* logprobs: the chat fields (which check top_logprobs' range) */
	if (rc == 0 && (want_lp || (top && !json_is_null(top))) &&
	    (json_object_set_new(c, "logprobs", json_boolean(want_lp)) < 0 ||
	     (top && !json_is_null(top) && json_object_set(c, "top_logprobs", (json_t *)top) < 0)))
		rc = api_error_set(ae, 500, NULL, "out of memory");
	/* parallel_tool_calls false: vLLM's chat field of the same name */
	if (rc == 0 && (v = json_object_get(body, "parallel_tool_calls")) &&
	    json_object_set(c, "parallel_tool_calls", v) < 0)
		rc = api_error_set(ae, 500, NULL, "out of memory");
	/* what the Response object repeats (null or {} when not given) */
	rs->echo = json_object();
	static const char *const echoed[] = {"instructions", "max_output_tokens", "temperature", "top_p", "metadata",
					     "tools",        "tool_choice"};
	for (size_t k = 0; rs->echo && k < sizeof echoed / sizeof *echoed; k++) {
		v = json_object_get(body, echoed[k]);
		json_t *dflt = k == 4   ? json_object()
			       : k == 5 ? json_array()
			       : k == 6 ? json_string("auto")
					: json_null();
		if (v && !json_is_null(v)) {
			json_decref(dflt);
			dflt = json_incref(v);
		}
		if (json_object_set_new(rs->echo, echoed[k], dflt) < 0)
			json_decref(rs->echo), rs->echo = NULL;
	}
	if (rc == 0 && !rs->echo)
		rc = api_error_set(ae, 500, NULL, "out of memory");
	if (rc < 0) {
		json_decref(c);
		resp_state_free(rs);
		return -1;
	}
	rs->enc = enc;
	rs->want_lp = want_lp;
	rs->store = can_store && !json_is_false(store);
	if (prev && json_is_string(prev))
		snprintf(rs->prev_id, sizeof rs->prev_id, "%s", json_string_value(prev));
	*chat = c;
	*out = rs;
	return 0;
}

/* ---- the answer ---- */

/* model text (NULL when empty) as a JSON string */
static json_t *str(const char *s, size_t n) { return jstr_new(s ? s : "", s ? n : 0); }

static json_t *usage_json(const struct oj_usage *u)
{
	return json_pack("{s:I, s:{s:I}, s:I, s:{s:i}, s:I}", "input_tokens", (json_int_t)u->prompt_tokens,
			 "input_tokens_details", "cached_tokens", (json_int_t)u->cached_tokens, "output_tokens",
			 (json_int_t)u->completion_tokens, "output_tokens_details", "reasoning_tokens", 0,
			 "total_tokens", (json_int_t)(u->prompt_tokens + u->completion_tokens));
}

static json_t *reasoning_item(const struct resp_state *rs, const char *text, size_t len, bool done)
{
	json_t *content = json_array();
	if (done && content)
		json_array_append_new(content,
				      json_pack("{s:s, s:o}", "type", "reasoning_text", "text", str(text, len)));
	json_t *it = json_pack("{s:s, s:s, s:[], s:o, s:s}", "type", "reasoning", "id", rs->rs_id, "summary",
			       "content", content, "status", done ? "completed" : "in_progress");
	if (it && rs->enc && json_object_set_new(it, "encrypted_content", json_null()) < 0)
		json_decref(it), it = NULL;
	return it;
}

/* lp: the tokens' logprobs (chat's "content" entries: token, logprob, bytes, top_logprobs,
 * which is the Responses shape too), or NULL */
static json_t *text_part(const char *text, size_t len, const json_t *lp)
{
	return json_pack("{s:s, s:o, s:[], s:o}", "type", "output_text", "text", str(text, len), "annotations",
			 "logprobs", lp ? json_deep_copy(lp) : json_array());
}

static json_t *message_item(const struct resp_state *rs, const char *text, size_t len, const json_t *lp, bool done,
			    bool cut)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:o}", "type", "message", "id", rs->msg_id, "role", "assistant",
			 "status",
			 !done ? "in_progress"
			 : cut ? "incomplete"
			       : "completed",
			 "content", done ? json_pack("[o]", text_part(text, len, lp)) : json_array());
}

/* a chat tool call {"id", "function": {"name", "arguments"}} as a function_call item */
static json_t *call_item(const char *fc_id, const char *call_id, const char *name, const char *args, size_t len,
			 bool done)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s}", "type", "function_call", "id", fc_id, "call_id", call_id,
			 "name", name, "arguments", str(args, len), "status", done ? "completed" : "in_progress");
}

/* the Response object; output NULL: the items of a finished answer */
static json_t *response(const struct resp_state *rs, const char *status, json_t *output, const struct oj_usage *u,
			enum engine_finish finish, const char *error)
{
	json_t *o = json_pack(
		"{s:s, s:s, s:I, s:s, s:s, s:o, s:o, s:o, s:b, s:n, s:{s:n, s:n}, s:b, s:{s:{s:s}},"
		" s:s, s:o}",
		"id", rs->id, "object", "response", "created_at", (json_int_t)rs->created, "model", rs->model,
		"status", status, "output", output, "error",
		error ? json_pack("{s:s, s:s}", "code", "server_error", "message", error) : json_null(),
		"incomplete_details",
		finish == ENGINE_FINISH_LENGTH ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null(),
		"parallel_tool_calls", 1, "previous_response_id", "reasoning", "effort", "summary", "store", rs->store,
		"text", "format", "type", "text", "truncation", "disabled", "usage", u ? usage_json(u) : json_null());
	if (o && json_object_update_missing(o, rs->echo) < 0) {
		json_decref(o);
		return NULL;
	}
	if (o && rs->prev_id[0] && json_object_set_new(o, "previous_response_id", json_string(rs->prev_id)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static const char *final_status(enum engine_finish f, const char *error)
{
	return error ? "failed" : f == ENGINE_FINISH_LENGTH ? "incomplete" : "completed";
}

static void set_ids(struct resp_state *rs, const char *id, long long created, const char *model)
{
	snprintf(rs->id, sizeof rs->id, "%s", id);
	rs->created = created;
	snprintf(rs->model, sizeof rs->model, "%s", model);
	jstr_random_id(rs->rs_id, sizeof rs->rs_id, "rs_");
	jstr_random_id(rs->msg_id, sizeof rs->msg_id, "msg_");
}

json_t *resp_object(struct resp_state *rs, const char *id, long long created, const char *model, const char *reasoning,
		    size_t rlen, const char *text, size_t len, const json_t *calls, const json_t *logprobs,
		    enum engine_finish finish, const struct oj_usage *u)
{
	set_ids(rs, id, created, model);
	json_t *output = json_array();
	if (output && rlen)
		json_array_append_new(output, reasoning_item(rs, reasoning, rlen, true));
	if (output && (len || !json_array_size(calls))) /* a call-only answer has no message */
		json_array_append_new(output, message_item(rs, text, len,
							   rs->want_lp ? json_object_get(logprobs, "content") : NULL,
							   true, finish == ENGINE_FINISH_LENGTH));
	size_t i;
	const json_t *c;
	json_array_foreach(calls, i, c)
	{
		const json_t *fn = json_object_get(c, "function");
		const json_t *args = json_object_get(fn, "arguments");
		char fc[64];
		jstr_random_id(fc, sizeof fc, "fc_");
		if (output)
			json_array_append_new(output,
					      call_item(fc, json_string_value(json_object_get(c, "id")),
							json_string_value(json_object_get(fn, "name")),
							json_string_value(args), json_string_length(args), true));
	}
	json_t *o = output ? response(rs, final_status(finish, NULL), output, u, finish, NULL) : NULL;
	json_decref(rs->final);
	rs->final = json_incref(o);
	return o;
}

int resp_stored(const struct resp_state *rs, json_t **response, json_t **items)
{
	*response = *items = NULL;
	const char *status = json_string_value(json_object_get(rs->final, "status"));
	if (!rs->store || !rs->items || !status || !strcmp(status, "failed"))
		return -1;
	json_t *a = json_copy(rs->items);
	if (!a || json_array_extend(a, json_object_get(rs->final, "output")) < 0) {
		json_decref(a);
		return -1;
	}
	*response = json_incref(rs->final);
	*items = a;
	return 0;
}

/* one "event: TYPE\ndata: {...}\n\n" frame; obj gets its type and sequence_number (stolen) */
static int frame(struct resp_state *rs, struct strbuf *out, const char *type, json_t *obj)
{
	int rc = -1;
	if (obj && json_object_set_new(obj, "type", json_string(type)) == 0 &&
	    json_object_set_new(obj, "sequence_number", json_integer(rs->seq++)) == 0) {
		char *s = json_dumps(obj, JSON_COMPACT);
		rc = s ? strbuf_printf(out, "event: %s\ndata: %s\n\n", type, s) : -1;
		free(s);
	}
	json_decref(obj);
	return rc;
}

int resp_stream_start(struct resp_state *rs, struct strbuf *out, const char *id, long long created, const char *model)
{
	set_ids(rs, id, created, model);
	if (!rs->done_items && !(rs->done_items = json_array()))
		return -1;
	return frame(rs, out, "response.created",
		     json_pack("{s:o}", "response",
			       response(rs, "in_progress", json_array(), NULL, ENGINE_FINISH_NONE, NULL))) < 0 ||
			       frame(rs, out, "response.in_progress",
				     json_pack("{s:o}", "response",
					       response(rs, "in_progress", json_array(), NULL, ENGINE_FINISH_NONE,
							NULL))) < 0
		       ? -1
		       : 0;
}

/* the events that open / close the current item (its index: n_items - 1) */
static int open_item(struct resp_state *rs, struct strbuf *out, enum phase ph)
{
	int idx = rs->n_items++;
	rs->phase = ph;
	bool r = ph == PH_REASONING;
	json_t *item = r ? reasoning_item(rs, NULL, 0, false) : message_item(rs, NULL, 0, NULL, false, false);
	json_t *part = r ? json_pack("{s:s, s:s}", "type", "reasoning_text", "text", "") : text_part("", 0, NULL);
	return frame(rs, out, "response.output_item.added",
		     json_pack("{s:i, s:o}", "output_index", idx, "item", item)) < 0 ||
			       frame(rs, out, "response.content_part.added",
				     json_pack("{s:s, s:i, s:i, s:o}", "item_id", r ? rs->rs_id : rs->msg_id,
					       "output_index", idx, "content_index", 0, "part", part)) < 0
		       ? -1
		       : 0;
}

static int close_call(struct resp_state *rs, struct strbuf *out)
{
	int idx = rs->n_items - 1;
	rs->phase = PH_NONE;
	json_t *item = call_item(rs->fc_id, rs->call_id, rs->call_name, rs->call_args.p, rs->call_args.n, true);
	if (!item || json_array_append(rs->done_items, item) < 0) {
		json_decref(item);
		return -1;
	}
	return frame(rs, out, "response.function_call_arguments.done",
		     json_pack("{s:s, s:i, s:o}", "item_id", rs->fc_id, "output_index", idx, "arguments",
			       str(rs->call_args.p, rs->call_args.n))) < 0 ||
			       frame(rs, out, "response.output_item.done",
				     json_pack("{s:i, s:o}", "output_index", idx, "item", item)) < 0
		       ? -1
		       : 0;
}

static int close_item(struct resp_state *rs, struct strbuf *out, bool cut)
{
	if (rs->phase == PH_CALL)
		return close_call(rs, out);
	int idx = rs->n_items - 1;
	bool r = rs->phase == PH_REASONING;
	const struct strbuf *t = r ? &rs->reasoning : &rs->text;
	const char *iid = r ? rs->rs_id : rs->msg_id;
	rs->phase = PH_NONE;
	const json_t *lp = r ? NULL : rs->lp;
	json_t *part = r ? json_pack("{s:s, s:o}", "type", "reasoning_text", "text", str(t->p, t->n))
			 : text_part(t->p, t->n, lp);
	json_t *done = r ? json_pack("{s:s, s:i, s:i, s:o}", "item_id", iid, "output_index", idx, "content_index", 0,
				     "text", str(t->p, t->n))
			 : json_pack("{s:s, s:i, s:i, s:o, s:o}", "item_id", iid, "output_index", idx, "content_index",
				     0, "text", str(t->p, t->n), "logprobs", lp ? json_deep_copy(lp) : json_array());
	json_t *item = r ? reasoning_item(rs, t->p, t->n, true) : message_item(rs, t->p, t->n, lp, true, cut);
	if (!item || json_array_append(rs->done_items, item) < 0) {
		json_decref(item);
		json_decref(part);
		json_decref(done);
		return -1;
	}
	return frame(rs, out, r ? "response.reasoning_text.done" : "response.output_text.done", done) < 0 ||
			       frame(rs, out, "response.content_part.done",
				     json_pack("{s:s, s:i, s:i, s:o}", "item_id", iid, "output_index", idx,
					       "content_index", 0, "part", part)) < 0 ||
			       frame(rs, out, "response.output_item.done",
				     json_pack("{s:i, s:o}", "output_index", idx, "item", item)) < 0
		       ? -1
		       : 0;
}

/* chat tool-call deltas: an entry with an "id" starts a call (its name and first arguments),
 * one without adds arguments to the current call */
static int stream_calls(struct resp_state *rs, struct strbuf *out, const json_t *calls)
{
	size_t i;
	const json_t *c;
	json_array_foreach(calls, i, c)
	{
		const json_t *fn = json_object_get(c, "function");
		const char *id = json_string_value(json_object_get(c, "id"));
		const json_t *args = json_object_get(fn, "arguments");
		if (id) {
			if (rs->phase != PH_NONE && close_item(rs, out, false) < 0)
				return -1;
			const char *name = json_string_value(json_object_get(fn, "name"));
			snprintf(rs->call_id, sizeof rs->call_id, "%s", id);
			snprintf(rs->call_name, sizeof rs->call_name, "%s", name ? name : "");
			jstr_random_id(rs->fc_id, sizeof rs->fc_id, "fc_");
			rs->call_args.n = 0;
			int idx = rs->n_items++;
			rs->phase = PH_CALL;
			if (frame(rs, out, "response.output_item.added",
				  json_pack("{s:i, s:o}", "output_index", idx, "item",
					    call_item(rs->fc_id, rs->call_id, rs->call_name, NULL, 0, false))) < 0)
				return -1;
		}
		if (rs->phase != PH_CALL || !json_string_length(args))
			continue;
		if (strbuf_put(&rs->call_args, json_string_value(args), json_string_length(args)) < 0 ||
		    frame(rs, out, "response.function_call_arguments.delta",
			  json_pack("{s:s, s:i, s:O}", "item_id", rs->fc_id, "output_index", rs->n_items - 1, "delta",
				    args)) < 0)
			return -1;
	}
	return 0;
}

int resp_stream_delta(struct resp_state *rs, struct strbuf *out, const char *reasoning, size_t rlen, const char *text,
		      size_t len, const json_t *calls, const json_t *logprobs)
{
	/* the tokens' logprobs ride on the next text delta (all of them on the done events) */
	const json_t *entries = json_object_get(logprobs, "content");
	if (rs->want_lp && json_array_size(entries) &&
	    ((!rs->lp && !(rs->lp = json_array())) || (!rs->lp_pending && !(rs->lp_pending = json_array())) ||
	     json_array_extend(rs->lp, (json_t *)entries) < 0 ||
	     json_array_extend(rs->lp_pending, (json_t *)entries) < 0))
		return -1;
	if (rlen) {
		if (rs->phase != PH_REASONING && open_item(rs, out, PH_REASONING) < 0)
			return -1;
		if (strbuf_put(&rs->reasoning, reasoning, rlen) < 0 ||
		    frame(rs, out, "response.reasoning_text.delta",
			  json_pack("{s:s, s:i, s:i, s:o}", "item_id", rs->rs_id, "output_index", rs->n_items - 1,
				    "content_index", 0, "delta", str(reasoning, rlen))) < 0)
			return -1;
	}
	if (len) {
		if ((rs->phase == PH_REASONING || rs->phase == PH_CALL) && close_item(rs, out, false) < 0)
			return -1;
		if (rs->phase != PH_MESSAGE && open_item(rs, out, PH_MESSAGE) < 0)
			return -1;
		json_t *lp = rs->lp_pending ? rs->lp_pending : json_array();
		rs->lp_pending = NULL;
		if (strbuf_put(&rs->text, text, len) < 0 ||
		    frame(rs, out, "response.output_text.delta",
			  json_pack("{s:s, s:i, s:i, s:o, s:o}", "item_id", rs->msg_id, "output_index",
				    rs->n_items - 1, "content_index", 0, "delta", str(text, len), "logprobs", lp)) < 0)
			return -1;
	}
	return stream_calls(rs, out, calls);
}

int resp_stream_end(struct resp_state *rs, struct strbuf *out, enum engine_finish finish, const struct oj_usage *u,
		    const char *error)
{
	bool cut = finish == ENGINE_FINISH_LENGTH;
	if ((rs->phase == PH_REASONING || rs->phase == PH_CALL) && close_item(rs, out, cut) < 0)
		return -1;
	/* an answer with neither a message nor calls (nothing, or reasoning only) is an empty message */
	bool answered = false;
	for (size_t i = 0; i < json_array_size(rs->done_items); i++)
		answered |= strcmp(json_string_value(json_object_get(json_array_get(rs->done_items, i), "type")),
				   "reasoning") != 0;
	if (rs->phase == PH_NONE && !error && !answered && open_item(rs, out, PH_MESSAGE) < 0)
		return -1;
	if (rs->phase == PH_MESSAGE && close_item(rs, out, cut) < 0)
		return -1;
	json_t *output = json_deep_copy(rs->done_items);
	const char *status = final_status(finish, error);
	char type[32];
	snprintf(type, sizeof type, "response.%s", status);
	json_t *o = response(rs, status, output, u, finish, error);
	json_decref(rs->final);
	rs->final = json_incref(o);
	return frame(rs, out, type, json_pack("{s:o}", "response", o));
}
