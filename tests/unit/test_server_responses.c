/* The Responses API's translation to a chat request and its answer's shapes
 * (src/server/openai/responses.c): messages from instructions and input items, the fields a Response
 * repeats, the 400s, and the order of the streamed events with the text they carry. The
 * whole path through HTTP is tests/e2e/server_responses.test.mjs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/openai/resp_store.h"
#include "server/openai/responses.h"

static json_t *translate(const char *body, struct resp_state **rs, struct api_error *ae)
{
	json_t *b = json_loads(body, 0, NULL), *chat = NULL;
	*rs = NULL;
	if (!b || resp_translate(b, NULL, true, &chat, rs, ae) < 0)
		chat = NULL;
	json_decref(b);
	return chat;
}

static void test_messages(void)
{
	struct resp_state *rs;
	struct api_error ae;
	json_t *c = translate(
		"{\"model\": \"m\", \"instructions\": \"sys\", \"max_output_tokens\": 7, \"temperature\": 0.5,"
		" \"prompt\": null, \"conversation\": null, \"include\": [\"reasoning.encrypted_content\"],"
		" \"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"a\"},"
		" {\"type\": \"input_text\", \"text\": \"b\"}]}, {\"type\": \"message\", \"role\": \"developer\","
		" \"content\": \"d\"}], \"text\": {\"format\": {\"type\": \"json_object\"}}, \"store\": false}",
		&rs, &ae);
	EXPECT(c != NULL);
	if (!c)
		return;
	char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	EXPECTF(!strcmp(s, "{\"max_tokens\":7,\"messages\":[{\"content\":\"sys\",\"role\":\"system\"},{\"content\":"
			   "\"ab\","
			   "\"role\":\"user\"},{\"content\":\"d\",\"role\":\"system\"}],\"model\":\"m\",\"response_"
			   "format\":"
			   "{\"type\":\"json_object\"},\"temperature\":0.5}"),
		"chat body: %s", s);
	free(s);
	struct oj_usage u = {5, 3, 2, true};
	json_t *r = resp_object(rs, "resp_1", 100, "m", "think", 5, "answer", 6, NULL, NULL, ENGINE_FINISH_LENGTH, &u);
	EXPECT(r && !strcmp(json_string_value(json_object_get(r, "status")), "incomplete"));
	EXPECT(json_integer_value(json_object_get(r, "max_output_tokens")) == 7);
	EXPECT(!strcmp(json_string_value(json_object_get(r, "instructions")), "sys"));
	EXPECT(json_is_null(json_object_get(r, "top_p")) && json_is_object(json_object_get(r, "metadata")));
	json_t *out = json_object_get(r, "output");
	EXPECT(json_array_size(out) == 2);
	EXPECT(!strcmp(json_string_value(json_object_get(json_array_get(out, 0), "type")), "reasoning"));
	EXPECT(json_is_null(json_object_get(json_array_get(out, 0), "encrypted_content")));
	json_t *msg = json_array_get(out, 1);
	EXPECT(!strcmp(json_string_value(json_object_get(msg, "status")), "incomplete"));
	EXPECT(!strcmp(json_string_value(json_object_get(json_array_get(json_object_get(msg, "content"), 0), "text")),
		       "answer"));
	json_t *usage = json_object_get(r, "usage");
	EXPECT(json_integer_value(json_object_get(usage, "total_tokens")) == 8);
	EXPECT(json_integer_value(json_object_get(json_object_get(usage, "input_tokens_details"), "cached_tokens")) ==
	       2);
	json_decref(r);
	json_decref(c);
	resp_state_free(rs);
}

static void event_types(const struct strbuf *b, char *types, size_t n, bool *in_order);

/* function tools: the chat tools; calls in the input, calls in the answer */
static void test_tools(void)
{
	struct resp_state *rs;
	struct api_error ae;
	json_t *c = translate(
		"{\"input\": [{\"role\": \"user\", \"content\": \"q\"}, {\"type\": \"reasoning\", \"id\": \"rs_1\","
		" \"summary\": []}, {\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", "
		"\"arguments\": "
		"\"{}\"},"
		" {\"type\": \"function_call\", \"call_id\": \"c2\", \"name\": \"g\", \"arguments\": \"{\\\"a\\\": "
		"1}\"},"
		" {\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\": \"r1\"}],"
		" \"tools\": [{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"type\": \"object\"}}],"
		" \"tool_choice\": {\"type\": \"function\", \"name\": \"f\"}}",
		&rs, &ae);
	EXPECTF(c != NULL, "%s", ae.message);
	if (!c)
		return;
	char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	EXPECTF(!strcmp(s,
			"{\"messages\":[{\"content\":\"q\",\"role\":\"user\"},{\"content\":\"\",\"role\":"
			"\"assistant\","
			"\"tool_calls\":[{\"function\":{\"arguments\":\"{}\",\"name\":\"f\"},\"id\":\"c1\",\"type\":"
			"\"function\"},"
			"{\"function\":{\"arguments\":\"{\\\"a\\\": "
			"1}\",\"name\":\"g\"},\"id\":\"c2\",\"type\":\"function\"}]},"
			"{\"content\":\"r1\",\"role\":\"tool\",\"tool_call_id\":\"c1\"}],\"tool_choice\":{"
			"\"function\":"
			"{\"name\":\"f\"},\"type\":\"function\"},\"tools\":[{\"function\":{\"name\":\"f\","
			"\"parameters\":"
			"{\"type\":\"object\"}},\"type\":\"function\"}]}"),
		"chat body: %s", s);
	free(s);
	/* a call-only answer: one function_call item, no message */
	json_t *calls = json_loads("[{\"id\": \"call_9\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
				   "\"arguments\": \"{\\\"x\\\": 2}\"}}]",
				   0, NULL);
	struct oj_usage u = {5, 3, 0, false};
	json_t *r = resp_object(rs, "resp_5", 1, "m", NULL, 0, NULL, 0, calls, NULL, ENGINE_FINISH_STOP, &u);
	json_t *out = json_object_get(r, "output"), *it = json_array_get(out, 0);
	EXPECT(json_array_size(out) == 1 && !strcmp(json_string_value(json_object_get(it, "type")), "function_call"));
	EXPECT(!strcmp(json_string_value(json_object_get(it, "call_id")), "call_9"));
	EXPECT(!strcmp(json_string_value(json_object_get(it, "arguments")), "{\"x\": 2}"));
	EXPECT(json_array_size(json_object_get(r, "tools")) == 1);
	json_decref(r);
	/* streamed: a named call as chat deltas (the id and name first, then more arguments) */
	struct strbuf b = {0};
	json_t *d1 = json_loads(
		"[{\"index\": 0, \"id\": \"call_7\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
		"\"arguments\": \"{\\\"x\\\"\"}}]",
		0, NULL);
	json_t *d2 = json_loads("[{\"index\": 0, \"function\": {\"arguments\": \": 3}\"}}]", 0, NULL);
	EXPECT(resp_stream_start(rs, &b, "resp_6", 1, "m") == 0);
	EXPECT(resp_stream_delta(rs, &b, NULL, 0, NULL, 0, d1, NULL) == 0);
	EXPECT(resp_stream_delta(rs, &b, NULL, 0, NULL, 0, d2, NULL) == 0);
	EXPECT(resp_stream_end(rs, &b, ENGINE_FINISH_STOP, &u, NULL) == 0);
	char types[1024];
	bool ordered;
	event_types(&b, types, sizeof types, &ordered);
	EXPECTF(!strcmp(types, "response.created response.in_progress response.output_item.added "
			       "response.function_call_arguments.delta response.function_call_arguments.delta "
			       "response.function_call_arguments.done response.output_item.done response.completed"),
		"%s", types);
	EXPECT(ordered);
	const char *done = strstr(b.p, "event: response.completed");
	EXPECT(done && strstr(done, "\"arguments\":\"{\\\"x\\\": 3}\"") && !strstr(done, "\"type\":\"message\""));
	strbuf_fini(&b);
	json_decref(d1);
	json_decref(d2);
	json_decref(calls);
	json_decref(c);
	resp_state_free(rs);
}

static void test_errors(void)
{
	static const struct {
		const char *body, *param;
	} cases[] = {
		{"{\"model\": \"m\"}", "input"},
		{"{\"input\": []}", "input"},
		{"{\"input\": 3}", "input"},
		{"{\"input\": [{\"role\": \"tool\", \"content\": \"x\"}]}", "input"},
		{"{\"input\": [{\"type\": \"reasoning\", \"summary\": []}]}", "input"},
		{"{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_file\"}]}]}", "input"},
		{"{\"input\": \"x\", \"tools\": [{\"type\": \"web_search\"}]}", "tools"},
		{"{\"input\": \"x\", \"tool_choice\": {\"type\": \"file_search\"}}", "tool_choice"},
		{"{\"input\": [{\"type\": \"function_call_output\", \"output\": \"1\"}]}", "input"},
		{"{\"input\": [{\"type\": \"function_call\", \"call_id\": \"c\", \"name\": \"f\"}]}", "input"},
		{"{\"input\": \"x\", \"previous_response_id\": \"resp_1\"}", "previous_response_id"},
		{"{\"input\": \"x\", \"background\": true}", "background"},
		{"{\"input\": \"x\", \"include\": [\"file_search_call.results\"]}", "include"},
		{"{\"input\": \"x\", \"top_logprobs\": \"3\"}", "top_logprobs"},
		{"{\"input\": \"x\", \"truncation\": \"auto\"}", "truncation"},
		{"{\"input\": \"x\", \"max_output_tokens\": 0}", "max_output_tokens"},
		{"{\"input\": \"x\", \"instructions\": 5}", "instructions"},
		{"{\"input\": \"x\", \"n\": 2}", "n"},
		{"{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"yaml\"}}}", "text.format"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct resp_state *rs;
		struct api_error ae = {0};
		json_t *c = translate(cases[i].body, &rs, &ae);
		EXPECTF(!c && !rs && ae.status == 400 && !strcmp(ae.param, cases[i].param),
			"%s: status %d param %s (%s)", cases[i].body, ae.status, ae.param, ae.message);
		json_decref(c);
	}
}

/* the "event: TYPE" lines of a stream, joined by spaces, and whether every data line's
 * sequence_number follows the last */
static void event_types(const struct strbuf *b, char *types, size_t n, bool *in_order)
{
	types[0] = 0;
	*in_order = true;
	long want = 0;
	for (const char *p = b->p; p && (p = strstr(p, "event: ")); p++) {
		const char *e = strchr(p, '\n');
		snprintf(types + strlen(types), n - strlen(types), "%s%.*s", types[0] ? " " : "", (int)(e - p - 7),
			 p + 7);
		const char *sq = strstr(e, "\"sequence_number\":");
		*in_order &= sq && atol(sq + 18) == want++;
	}
}

static void test_stream(void)
{
	struct resp_state *rs;
	struct api_error ae;
	json_t *c = translate("{\"input\": \"x\"}", &rs, &ae);
	EXPECT(c != NULL);
	struct strbuf b = {0};
	struct oj_usage u = {3, 4, 0, false};
	EXPECT(resp_stream_start(rs, &b, "resp_2", 1, "m") == 0);
	EXPECT(resp_stream_delta(rs, &b, "th", 2, NULL, 0, NULL, NULL) == 0);
	EXPECT(resp_stream_delta(rs, &b, "ink", 3, "an", 2, NULL, NULL) == 0);
	EXPECT(resp_stream_delta(rs, &b, NULL, 0, "swer", 4, NULL, NULL) == 0);
	EXPECT(resp_stream_end(rs, &b, ENGINE_FINISH_STOP, &u, NULL) == 0);
	char types[2048];
	bool ordered;
	event_types(&b, types, sizeof types, &ordered);
	EXPECTF(!strcmp(types,
			"response.created response.in_progress response.output_item.added "
			"response.content_part.added response.reasoning_text.delta response.reasoning_text.delta "
			"response.reasoning_text.done response.content_part.done response.output_item.done "
			"response.output_item.added response.content_part.added response.output_text.delta "
			"response.output_text.delta response.output_text.done response.content_part.done "
			"response.output_item.done response.completed"),
		"%s", types);
	EXPECT(ordered);
	EXPECT(strstr(b.p, "\"text\":\"think\"") && strstr(b.p, "\"text\":\"answer\""));
	EXPECT(strstr(b.p, "data: [DONE]") == NULL);
	strbuf_fini(&b);
	resp_state_free(rs);
	json_decref(c);
	/* nothing generated: still one (empty) message; an engine error: response.failed */
	c = translate("{\"input\": \"x\"}", &rs, &ae);
	EXPECT(resp_stream_start(rs, &b, "resp_3", 1, "m") == 0 &&
	       resp_stream_end(rs, &b, ENGINE_FINISH_LENGTH, &u, NULL) == 0);
	event_types(&b, types, sizeof types, &ordered);
	EXPECTF(strstr(types, "response.output_item.added") && strstr(types, "response.incomplete"), "%s", types);
	strbuf_fini(&b);
	resp_state_free(rs);
	json_decref(c);
	c = translate("{\"input\": \"x\"}", &rs, &ae);
	EXPECT(resp_stream_start(rs, &b, "resp_4", 1, "m") == 0 &&
	       resp_stream_end(rs, &b, ENGINE_FINISH_ABORT, &u, "boom") == 0);
	EXPECT(strstr(b.p, "event: response.failed") && strstr(b.p, "\"message\":\"boom\""));
	strbuf_fini(&b);
	resp_state_free(rs);
	json_decref(c);
}

/* include logprobs: a token's entries ride on the next text delta, and all on the done events */
static void test_stream_logprobs(void)
{
	struct resp_state *rs;
	struct api_error ae;
	json_t *c = translate(
		"{\"input\": \"x\", \"include\": [\"message.output_text.logprobs\"], \"top_logprobs\": 2}", &rs, &ae);
	EXPECT(c && json_is_true(json_object_get(c, "logprobs")) &&
	       json_integer_value(json_object_get(c, "top_logprobs")) == 2);
	if (!c)
		return;
	json_t *l1 = json_loads(
		"{\"content\": [{\"token\": \"a\", \"logprob\": -1, \"bytes\": [97], \"top_logprobs\": []}]}", 0,
		NULL);
	json_t *l2 = json_loads(
		"{\"content\": [{\"token\": \"b\", \"logprob\": -2, \"bytes\": [98], \"top_logprobs\": []}]}", 0,
		NULL);
	struct strbuf b = {0};
	struct oj_usage u = {1, 2, 0, false};
	EXPECT(resp_stream_start(rs, &b, "resp_7", 1, "m") == 0);
	EXPECT(resp_stream_delta(rs, &b, NULL, 0, NULL, 0, NULL, l1) == 0); /* held back: no text yet */
	EXPECT(resp_stream_delta(rs, &b, NULL, 0, "ab", 2, NULL, l2) == 0);
	EXPECT(resp_stream_end(rs, &b, ENGINE_FINISH_STOP, &u, NULL) == 0);
	const char *delta = strstr(b.p, "event: response.output_text.delta\n");
	const char *done = strstr(b.p, "event: response.output_text.done\n");
	EXPECT(delta && strstr(delta, "\"token\":\"a\"") && strstr(delta, "\"token\":\"b\""));
	EXPECT(delta && strstr(delta, "\"token\":\"a\"") < strstr(delta, "\"token\":\"b\""));
	EXPECT(done && strstr(done, "\"token\":\"a\"") && strstr(done, "\"token\":\"b\""));
	strbuf_fini(&b);
	json_decref(l1);
	json_decref(l2);
	json_decref(c);
	resp_state_free(rs);
}

/* Storage: a stored answer's conversation (input items, then output items) continues under
 * previous_response_id without the old instructions; "store": false keeps nothing */
static void test_stored_conversation(void)
{
	struct api_error ae;
	json_t *b = json_loads("{\"instructions\": \"sys\", \"input\": \"first\"}", 0, NULL), *chat = NULL;
	struct resp_state *rs = NULL;
	EXPECT_EQ_INT(resp_translate(b, NULL, true, &chat, &rs, &ae), 0);
	json_decref(b);
	json_decref(chat);
	if (!rs)
		return;
	struct oj_usage u = {3, 2, 0, true};
	json_t *r = resp_object(rs, "resp_a", 1, "m", NULL, 0, "one", 3, NULL, NULL, ENGINE_FINISH_STOP, &u);
	EXPECT(json_is_true(json_object_get(r, "store")) && json_is_null(json_object_get(r, "previous_response_id")));
	json_t *resp, *items;
	EXPECT_EQ_INT(resp_stored(rs, &resp, &items), 0);
	EXPECT(resp == r);
	EXPECT_EQ_INT(json_array_size(items), 2); /* the user message, the assistant message */
	json_decref(r);
	resp_state_free(rs);
	/* the next turn: the stored items, then the new input; the instructions are its own */
	b = json_loads("{\"instructions\": \"new\", \"input\": [{\"role\": \"user\", \"content\": \"second\"}],"
		       " \"previous_response_id\": \"resp_a\"}",
		       0, NULL);
	EXPECT_EQ_INT(resp_translate(b, items, true, &chat, &rs, &ae), 0);
	json_decref(b);
	char *s = json_dumps(json_object_get(chat, "messages"), JSON_COMPACT | JSON_SORT_KEYS);
	EXPECTF(s && !strcmp(s, "[{\"content\":\"new\",\"role\":\"system\"},{\"content\":\"first\",\"role\":\"user\"},"
				"{\"content\":\"one\",\"role\":\"assistant\"},{\"content\":\"second\",\"role\":"
				"\"user\"}]"),
		"%s", s);
	free(s);
	json_decref(chat);
	r = resp_object(rs, "resp_b", 2, "m", NULL, 0, "two", 3, NULL, NULL, ENGINE_FINISH_STOP, &u);
	EXPECT(!strcmp(json_string_value(json_object_get(r, "previous_response_id")), "resp_a"));
	json_t *resp2, *items2;
	EXPECT_EQ_INT(resp_stored(rs, &resp2, &items2), 0);
	EXPECT_EQ_INT(json_array_size(items2), 4);
	json_decref(resp2);
	json_decref(items2);
	json_decref(r);
	resp_state_free(rs);
	json_decref(resp);
	json_decref(items);
	/* store: false */
	b = json_loads("{\"input\": \"x\", \"store\": false}", 0, NULL);
	EXPECT_EQ_INT(resp_translate(b, NULL, true, &chat, &rs, &ae), 0);
	json_decref(b);
	json_decref(chat);
	r = resp_object(rs, "resp_c", 3, "m", NULL, 0, "z", 1, NULL, NULL, ENGINE_FINISH_STOP, &u);
	EXPECT(json_is_false(json_object_get(r, "store")));
	EXPECT_EQ_INT(resp_stored(rs, &resp, &items), -1);
	json_decref(r);
	resp_state_free(rs);
}

/* The store: get, replace, delete, and the oldest entry dropped past the bound */
static void test_store(void)
{
	struct resp_store *st = resp_store_new(3);
	char id[16];
	for (int i = 0; i < 5; i++) {
		snprintf(id, sizeof id, "r%d", i);
		EXPECT_EQ_INT(resp_store_put(st, id, json_integer(i), json_array()), 0);
	}
	json_t *v = NULL, *it = NULL;
	EXPECT_EQ_INT(resp_store_get(st, "r0", &v, NULL), -1);
	EXPECT_EQ_INT(resp_store_get(st, "r1", &v, NULL), -1);
	EXPECT_EQ_INT(resp_store_get(st, "r3", &v, &it), 0);
	EXPECT(json_integer_value(v) == 3 && json_is_array(it));
	json_decref(v);
	json_decref(it);
	EXPECT_EQ_INT(resp_store_put(st, "r3", json_integer(30), json_array()), 0); /* replaced in place */
	EXPECT_EQ_INT(resp_store_put(st, "r5", json_integer(5), json_array()), 0);  /* drops r2 */
	EXPECT_EQ_INT(resp_store_get(st, "r2", NULL, NULL), -1);
	EXPECT_EQ_INT(resp_store_get(st, "r3", &v, NULL), 0);
	EXPECT(json_integer_value(v) == 30);
	json_decref(v);
	EXPECT_EQ_INT(resp_store_delete(st, "r4"), 0);
	EXPECT_EQ_INT(resp_store_delete(st, "r4"), -1);
	EXPECT_EQ_INT(resp_store_put(st, "r6", json_integer(6), json_array()), 0); /* the freed slot */
	EXPECT_EQ_INT(resp_store_get(st, "r3", NULL, NULL), 0);
	EXPECT_EQ_INT(resp_store_get(st, "r5", NULL, NULL), 0);
	resp_store_free(st);
	struct resp_store *none = resp_store_new(0);
	EXPECT_EQ_INT(resp_store_put(none, "x", json_integer(1), json_array()), -1);
	EXPECT_EQ_INT(resp_store_get(none, "x", NULL, NULL), -1);
	resp_store_free(none);
}

int main(int argc, char **argv)
{
	static const struct test_case cases[] = {
		T(test_messages), T(test_tools),           T(test_errors),
		T(test_stream),   T(test_stream_logprobs), T(test_stored_conversation),
		T(test_store)};
	return harness_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
