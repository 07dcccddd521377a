/* Response shapes (src/server/openai/openai_json.c), SSE framing (sse.c) and UTF-8 hygiene
 * (utf8.c): what OpenAI clients parse. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/openai/openai_json.h"
#include "server/http/sse.h"
#include "server/parsers/jstr.h"
#include "base/utf8.h"

static char *dump(const json_t *j) { return json_dumps(j, JSON_COMPACT); }

/* EXPECT that the compact JSON of j equals want; frees j. */
#define EXPECT_JSON(j, want)                                                                     \
	do {                                                                                     \
		json_t *_j = (j);                                                                \
		char *_s = _j ? dump(_j) : NULL;                                                 \
		EXPECTF(_s && !strcmp(_s, want), "got %s\n  want %s", _s ? _s : "(null)", want); \
		free(_s);                                                                        \
		json_decref(_j);                                                                 \
	} while (0)

static void test_utf8_sanitize(void)
{
	static const struct {
		const char *in;
		size_t n;
		const char *out; /* Python: bytes.decode("utf-8", "replace") */
	} cases[] = {
		{"abc", 3, "abc"},
		{"\xe2\x82\xac", 3, "\xe2\x82\xac"}, /* euro sign */
		{"a\xe2\x82", 3, "a\xef\xbf\xbd"},   /* cut at the end: one U+FFFD */
		{"\xff", 1, "\xef\xbf\xbd"},
		{"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate */
		{"\xf0\x9f\x98"
		 "A",
		 4,
		 "\xef\xbf\xbd"
		 "A"},                                       /* maximal subpart */
		{"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"}, /* overlong */
		{"\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
		{"x\0y", 3, "x\0y"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t n;
		char *s = utf8_sanitize(cases[i].in, cases[i].n, &n);
		size_t want = strlen(cases[i].out);
		if (i == 8)
			want = 3;
		EXPECTF(n == want && !memcmp(s, cases[i].out, n), "case %zu: got %zu bytes", i, n);
		EXPECT(utf8_valid(s, n, NULL));
		EXPECT_EQ_INT(utf8_valid(cases[i].in, cases[i].n, NULL), !strcmp(cases[i].in, cases[i].out) || i == 8);
		free(s);
	}
}

static void test_sse_framing(void)
{
	struct strbuf b = {0};
	json_t *o = json_pack("{s:s, s:i}", "a", "x\ny", "b", 1);
	EXPECT_EQ_INT(sse_event(&b, o), 0);
	EXPECT_EQ_INT(sse_done(&b), 0);
	json_decref(o);
	const char *want = "data: {\"a\":\"x\\ny\",\"b\":1}\n\ndata: [DONE]\n\n";
	EXPECTF(b.n == strlen(want) && !strcmp(b.p, want), "%s", b.p);
	char buf[8];
	size_t n = strbuf_take(&b, buf, sizeof buf);
	EXPECT_EQ_INT(n, 8);
	EXPECT(!memcmp(buf, "data: {\"", 8));
	EXPECT_EQ_INT(strbuf_unread(&b), strlen(want) - 8);
	char rest[128];
	n = strbuf_take(&b, rest, sizeof rest);
	EXPECT_EQ_INT(n, strlen(want) - 8);
	EXPECT_EQ_INT(strbuf_unread(&b), 0);
	EXPECT_EQ_INT(b.n, 0); /* compacted */
	strbuf_fini(&b);
}

static void test_chat_chunks(void)
{
	EXPECT_JSON(oj_chunk(SRV_API_CHAT, "chatcmpl-1", 7, "m", 0, "assistant", NULL, NULL, ENGINE_FINISH_NONE, -1,
			     NULL, NULL),
		    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":7,"
		    "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
		    "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}");
	EXPECT_JSON(oj_chunk(SRV_API_CHAT, "chatcmpl-1", 7, "m", 1, NULL,
			     &(struct oj_delta){"h\xe2\x82", 3, NULL, 0, NULL}, NULL, ENGINE_FINISH_NONE, -1, NULL,
			     NULL),
		    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":7,"
		    "\"model\":\"m\",\"choices\":[{\"index\":1,\"delta\":{\"content\":\"h\xef\xbf\xbd\"},"
		    "\"logprobs\":null,\"finish_reason\":null}]}");
	EXPECT_JSON(oj_chunk(SRV_API_CHAT, "c", 7, "m", 0, NULL, &(struct oj_delta){"", 0, NULL, 0, NULL}, NULL,
			     ENGINE_FINISH_STOP, -1, "END", NULL),
		    "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\","
		    "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,"
		    "\"finish_reason\":\"stop\",\"stop_reason\":\"END\"}]}");
	/* a reasoning parser's deltas: reasoning only, both at the end of the reasoning */
	EXPECT_JSON(oj_chunk(SRV_API_CHAT, "c", 7, "m", 0, NULL, &(struct oj_delta){"", 0, "hm", 2, NULL}, NULL,
			     ENGINE_FINISH_NONE, -1, NULL, NULL),
		    "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\","
		    "\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hm\",\"reasoning\":\"hm\"},"
		    "\"logprobs\":null,"
		    "\"finish_reason\":null}]}");
	EXPECT_JSON(oj_chunk(SRV_API_CHAT, "c", 7, "m", 0, NULL, &(struct oj_delta){"Yes", 3, "so", 2, NULL}, NULL,
			     ENGINE_FINISH_NONE, -1, NULL, NULL),
		    "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\","
		    "\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"so\",\"reasoning\":\"so\","
		    "\"content\":\"Yes\"},"
		    "\"logprobs\":null,\"finish_reason\":null}]}");
	/* the last chunk of a choice that called tools: indexed calls, finish "tool_calls" */
	json_t *calls = json_loads("[{\"id\":\"t1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
				   "\"arguments\":\"{}\"}}]",
				   0, NULL);
	EXPECT_JSON(oj_chunk(SRV_API_CHAT, "c", 7, "m", 0, NULL, &(struct oj_delta){"Hi", 2, NULL, 0, calls}, NULL,
			     ENGINE_FINISH_STOP, 1, NULL, NULL),
		    "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\","
		    "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\",\"tool_calls\":[{\"index\":0,"
		    "\"id\":\"t1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
		    "\"logprobs\":null,\"finish_reason\":\"tool_calls\",\"stop_reason\":1}]}");
	EXPECT_JSON(oj_chunk(SRV_API_CHAT, "c", 7, "m", 0, NULL, &(struct oj_delta){"", 0, NULL, 0, calls}, NULL,
			     ENGINE_FINISH_LENGTH, -1, NULL, NULL),
		    "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\","
		    "\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
		    "\"id\":\"t1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
		    "\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}]}");
	json_decref(calls);
	struct oj_usage u = {.prompt_tokens = 5, .completion_tokens = 3};
	EXPECT_JSON(oj_usage_chunk(SRV_API_CHAT, "c", 7, "m", &u),
		    "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\","
		    "\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":8,"
		    "\"completion_tokens\":3}}");
	EXPECT_JSON(oj_chunk(SRV_API_COMPLETION, "cmpl-1", 7, "m", 2, NULL, &(struct oj_delta){"ab", 2, NULL, 0, NULL},
			     NULL, ENGINE_FINISH_LENGTH, -1, NULL, NULL),
		    "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":7,\"model\":\"m\","
		    "\"choices\":[{\"index\":2,\"text\":\"ab\",\"logprobs\":null,"
		    "\"finish_reason\":\"length\",\"stop_reason\":null}]}");
}

static void test_full_responses(void)
{
	struct oj_choice c[2];
	const struct oj_choice *cp[] = {&c[0], &c[1]};
	memset(c, 0, sizeof c);
	c[0].index = 0;
	strbuf_put(&c[0].text, "ok\xf0\x9f", 4); /* broken at the end -> U+FFFD */
	c[0].finish = ENGINE_FINISH_STOP;
	c[0].stop_token = 7;
	c[0].n_tokens = 2;
	c[1].index = 1;
	c[1].finish = ENGINE_FINISH_LENGTH;
	c[1].stop_token = -1;
	struct oj_usage u = {.prompt_tokens = 4, .completion_tokens = 2};
	EXPECT_JSON(oj_chat_response("chatcmpl-x", 9, "m", cp, 2, &u),
		    "{\"id\":\"chatcmpl-x\",\"object\":\"chat.completion\",\"created\":9,\"model\":\"m\","
		    "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
		    "\"ok\xef\xbf\xbd\",\"reasoning_content\":null,\"tool_calls\":[]},\"logprobs\":null,"
		    "\"finish_reason\":\"stop\",\"stop_reason\":7},{\"index\":1,\"message\":{\"role\":"
		    "\"assistant\",\"content\":\"\",\"reasoning_content\":null,\"tool_calls\":[]},"
		    "\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}],"
		    "\"service_tier\":null,\"system_fingerprint\":null,\"usage\":{\"prompt_tokens\":4,"
		    "\"total_tokens\":6,\"completion_tokens\":2,\"prompt_tokens_details\":null},"
		    "\"prompt_logprobs\":null,\"prompt_token_ids\":null,\"kv_transfer_params\":null}");
	EXPECT_JSON(oj_completion_response("cmpl-x", 9, "m", cp, 1, &u),
		    "{\"id\":\"cmpl-x\",\"object\":\"text_completion\",\"created\":9,\"model\":\"m\","
		    "\"choices\":[{\"index\":0,\"text\":\"ok\xef\xbf\xbd\",\"logprobs\":null,"
		    "\"finish_reason\":\"stop\",\"stop_reason\":7,\"prompt_logprobs\":null}],"
		    "\"service_tier\":null,\"system_fingerprint\":null,\"usage\":{\"prompt_tokens\":4,"
		    "\"total_tokens\":6,\"completion_tokens\":2,\"prompt_tokens_details\":null},"
		    "\"kv_transfer_params\":null}");
	/* under a reasoning parser: reasoning_content a string, content null when empty */
	strbuf_fini(&c[0].text);
	c[0].text = (struct strbuf){0};
	strbuf_put(&c[0].reasoning, "hm", 2);
	c[0].split = c[1].split = true;
	strbuf_put(&c[1].text, "Yes", 3);
	EXPECT_JSON(
		oj_chat_response("chatcmpl-x", 9, "m", cp, 2, &u),
		"{\"id\":\"chatcmpl-x\",\"object\":\"chat.completion\",\"created\":9,\"model\":\"m\","
		"\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,"
		"\"reasoning_content\":\"hm\",\"tool_calls\":[],\"reasoning\":\"hm\"},\"logprobs\":null,"
		"\"finish_reason\":\"stop\",\"stop_reason\":7},{\"index\":1,\"message\":{\"role\":"
		"\"assistant\",\"content\":\"Yes\",\"reasoning_content\":\"\",\"tool_calls\":[],\"reasoning\":\"\"},"
		"\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}],"
		"\"service_tier\":null,\"system_fingerprint\":null,\"usage\":{\"prompt_tokens\":4,"
		"\"total_tokens\":6,\"completion_tokens\":2,\"prompt_tokens_details\":null},"
		"\"prompt_logprobs\":null,\"prompt_token_ids\":null,\"kv_transfer_params\":null}");
	/* tool calls: the message carries them, a stopped choice finishes "tool_calls" */
	c[1].tool_calls = json_loads("[{\"id\":\"t\",\"type\":\"function\",\"function\":{\"name\":\"g\","
				     "\"arguments\":\"[]\"}}]",
				     0, NULL);
	c[1].finish = ENGINE_FINISH_STOP;
	json_t *resp = oj_chat_response("chatcmpl-x", 9, "m", cp, 2, &u);
	json_t *c1 = json_array_get(json_object_get(resp, "choices"), 1);
	EXPECT(!strcmp(json_string_value(json_object_get(c1, "finish_reason")), "tool_calls"));
	json_t *tc = json_object_get(json_object_get(c1, "message"), "tool_calls");
	EXPECT(json_array_size(tc) == 1 &&
	       !strcmp(json_string_value(json_object_get(json_object_get(json_array_get(tc, 0), "function"), "name")),
		       "g"));
	json_t *c0 = json_array_get(json_object_get(resp, "choices"), 0);
	EXPECT(json_is_string(json_object_get(json_object_get(c0, "message"), "reasoning_content")));
	json_decref(resp);
	/* calls without a reasoning parser: reasoning null, content null when nothing preceded them */
	c[0].split = c[1].split = false;
	strbuf_fini(&c[1].text);
	c[1].text = (struct strbuf){0};
	resp = oj_chat_response("chatcmpl-x", 9, "m", cp, 2, &u);
	json_t *m1 = json_object_get(json_array_get(json_object_get(resp, "choices"), 1), "message");
	EXPECT(json_is_null(json_object_get(m1, "reasoning_content")) && !json_object_get(m1, "reasoning"));
	EXPECT(json_is_null(json_object_get(m1, "content")));
	json_t *m0 = json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "message");
	EXPECT(json_is_string(json_object_get(m0, "content"))); /* no parser split choice 0: "" stays "" */
	json_decref(resp);
	oj_choice_fini(&c[0]);
	oj_choice_fini(&c[1]);
}

static void test_logprobs(void)
{
	struct engine_logprob lp[2] = {
		{.token = 5, .logprob = -0.5f, .rank = 1, .n_top = 2, .top_ids = {5, 9}, .top_logprobs = {-0.5f, -1.f}},
		{.token = 12, .logprob = -1.0f / 0.0f, .rank = 3, .n_top = 0},
	};
	size_t off = 0;
	EXPECT_JSON(oj_logprobs(SRV_API_CHAT, NULL, lp, 2, &off),
		    "{\"content\":[{\"token\":\"token_id:5\",\"logprob\":-0.5,\"bytes\":[116,111,107,"
		    "101,110,95,105,100,58,53],\"top_logprobs\":[{\"token\":\"token_id:5\","
		    "\"logprob\":-0.5,\"bytes\":[116,111,107,101,110,95,105,100,58,53]},{\"token\":"
		    "\"token_id:9\",\"logprob\":-1.0,\"bytes\":[116,111,107,101,110,95,105,100,58,57]}"
		    "]},{\"token\":\"token_id:12\",\"logprob\":-9999.0,\"bytes\":[116,111,107,101,110,"
		    "95,105,100,58,49,50],\"top_logprobs\":[]}]}");
	off = 3;
	json_t *acc = NULL;
	json_t *p1 = oj_logprobs(SRV_API_COMPLETION, NULL, lp, 1, &off);
	json_t *p2 = oj_logprobs(SRV_API_COMPLETION, NULL, lp + 1, 1, &off);
	EXPECT_EQ_INT(oj_logprobs_merge(&acc, p1), 0);
	EXPECT_EQ_INT(oj_logprobs_merge(&acc, p2), 0);
	json_decref(p1);
	json_decref(p2);
	EXPECT_JSON(acc, "{\"text_offset\":[3,13],\"token_logprobs\":[-0.5,-9999.0],\"tokens\":"
			 "[\"token_id:5\",\"token_id:12\"],\"top_logprobs\":[{\"token_id:5\":-0.5,"
			 "\"token_id:9\":-1.0},{\"token_id:12\":-9999.0}]}");
	EXPECT_EQ_INT(off, 24);
}

static void test_models_and_ids(void)
{
	const char *names[] = {"tiny", "alias"};
	json_t *m = oj_models(names, 2, "/models/tiny", 100, 512);
	EXPECT(json_is_array(json_object_get(m, "data")));
	EXPECT_EQ_INT(json_array_size(json_object_get(m, "data")), 2);
	json_t *d0 = json_array_get(json_object_get(m, "data"), 0);
	EXPECT(!strcmp(json_string_value(json_object_get(m, "object")), "list"));
	EXPECT(!strcmp(json_string_value(json_object_get(d0, "id")), "tiny"));
	EXPECT(!strcmp(json_string_value(json_object_get(d0, "object")), "model"));
	EXPECT(!strcmp(json_string_value(json_object_get(d0, "root")), "/models/tiny"));
	EXPECT(json_is_null(json_object_get(d0, "parent")));
	EXPECT_EQ_INT(json_integer_value(json_object_get(d0, "max_model_len")), 512);
	EXPECT_EQ_INT(json_integer_value(json_object_get(d0, "created")), 100);
	json_decref(m);
	char a[64], b[64];
	jstr_random_id(a, sizeof a, "chatcmpl-");
	jstr_random_id(b, sizeof b, "chatcmpl-");
	EXPECT_EQ_INT(strlen(a), 9 + 32);
	EXPECT(!strncmp(a, "chatcmpl-", 9) && strcmp(a, b));
}

static void test_usage_details(void)
{
	struct oj_usage u = {.prompt_tokens = 40, .completion_tokens = 2, .cached_tokens = 32, .details = true};
	json_t *o = oj_usage_json(&u, false);
	char *t = json_dumps(o, JSON_COMPACT);
	EXPECT(t && !strcmp(t, "{\"prompt_tokens\":40,\"total_tokens\":42,\"completion_tokens\":2,"
			       "\"prompt_tokens_details\":{\"cached_tokens\":32}}"));
	free(t);
	json_decref(o);
}

TESTS(T(test_usage_details), T(test_utf8_sanitize), T(test_sse_framing), T(test_chat_chunks), T(test_full_responses),
      T(test_logprobs), T(test_models_and_ids))
