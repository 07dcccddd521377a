/* Request parsing and validation of the OpenAI endpoints (src/server/openai/request.c) and the
 * error bodies clients see (src/server/openai/errors.c). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/openai/errors.h"
#include "server/openai/request.h"

static struct sampling_params base;
static struct srv_limits lim = {.vocab_size = 1024, .max_n = 128, .max_prompts = 16};

static void init_base(void)
{
	struct sampling_defaults d;
	sampling_defaults_init(&d);
	d.temperature = 0.6f; /* as tiny-v3's generation_config.json */
	d.top_p = 0.95f;
	sampling_params_init(&base, &d);
}

/* Parses `text` for `api`; returns the status (0 ok, else the HTTP error status). */
static int parse(const char *text, enum srv_api api, struct srv_request *r, struct api_error *ae)
{
	init_base();
	json_error_t je;
	json_t *body = json_loads(text, JSON_DECODE_ANY, &je);
	if (!body) {
		harness_fail(__FILE__, __LINE__, "bad test json: %s", text);
		return -1;
	}
	memset(ae, 0, sizeof *ae);
	int rc = srv_request_parse(body, api, &base, &lim, r, ae, NULL, 0);
	/* the request borrows strings from body: keep it until the next parse */
	static json_t *last;
	json_decref(last);
	last = body;
	return rc < 0 ? ae->status : 0;
}

/* Expects a 400 naming `param` (NULL: any). */
static void expect_400(const char *text, enum srv_api api, const char *param)
{
	struct srv_request r;
	struct api_error ae;
	int st = parse(text, api, &r, &ae);
	EXPECTF(st == 400, "%s: status %d, expected 400", text, st);
	if (param)
		EXPECTF(!strcmp(ae.param, param), "%s: param '%s', expected '%s' (%s)", text, ae.param, param,
			ae.message);
	EXPECTF(ae.message[0], "%s: empty message", text);
	srv_request_fini(&r);
}

static void test_chat_defaults(void)
{
	struct srv_request r;
	struct api_error ae;
	json_t *body = json_loads("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", 0, NULL);
	init_base();
	EXPECT_EQ_INT(srv_request_parse(body, SRV_API_CHAT, &base, &lim, &r, &ae, NULL, 0), 0);
	EXPECT(!strcmp(r.model, "m"));
	EXPECT_NEAR(r.sp.temperature, 0.6, 1e-6); /* generation_config default */
	EXPECT_NEAR(r.sp.top_p, 0.95, 1e-6);
	EXPECT_EQ_INT(r.sp.max_tokens, -1); /* not given */
	EXPECT_EQ_INT(r.sp.n, 1);
	EXPECT_EQ_INT(r.sp.logprobs, -1);
	EXPECT(!r.stream && !r.include_usage && !r.add_special_tokens && r.add_generation_prompt);
	EXPECT(r.sp.skip_special_tokens);
	EXPECT_EQ_INT(json_array_size(r.messages), 1);
	srv_request_fini(&r);
	json_decref(body);
}

static void test_chat_fields(void)
{
	struct srv_request r;
	struct api_error ae;
	json_t *body = json_loads(
		"{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":"
		"[{\"type\":\"text\",\"text\":\"a\"}]}],\"temperature\":0,\"top_p\":0.5,\"top_k\":-1,"
		"\"min_p\":0.1,\"max_tokens\":9,\"max_completion_tokens\":7,\"stop\":\"x\","
		"\"stop_token_ids\":[5,6],\"seed\":42,\"stream\":true,\"stream_options\":{},"
		"\"logprobs\":true,\"top_logprobs\":3,\"presence_penalty\":0.5,"
		"\"frequency_penalty\":-0.5,\"repetition_penalty\":1.1,\"ignore_eos\":true,"
		"\"min_tokens\":2,\"skip_special_tokens\":false,\"logit_bias\":{\"7\":500},"
		"\"user\":\"u\",\"temperature_typo\":1,\"max_tokens_x\":null}",
		0, NULL);
	init_base();
	char unknown[64];
	EXPECT_EQ_INT(srv_request_parse(body, SRV_API_CHAT, &base, &lim, &r, &ae, unknown, sizeof unknown), 0);
	EXPECT(r.model == NULL);
	EXPECT_NEAR(r.sp.temperature, 0, 0);
	EXPECT_NEAR(r.sp.top_p, 0.5, 1e-6);
	EXPECT_EQ_INT(r.sp.top_k, 0);
	EXPECT_EQ_INT(r.sp.max_tokens, 7); /* max_completion_tokens wins */
	EXPECT_EQ_INT(r.sp.n_stop, 1);
	EXPECT(!strcmp(r.sp.stop[0], "x"));
	EXPECT_EQ_INT(r.sp.n_stop_token_ids, 2);
	EXPECT_EQ_INT(r.sp.stop_token_ids[1], 6);
	EXPECT(r.sp.has_seed && r.sp.seed == 42);
	EXPECT(r.stream && r.include_usage); /* include_usage defaults to true in the object */
	EXPECT_EQ_INT(r.sp.logprobs, 3);
	EXPECT(r.sp.ignore_eos && !r.sp.skip_special_tokens);
	EXPECT_EQ_INT(r.sp.min_tokens, 2);
	EXPECT_EQ_INT(r.sp.n_logit_bias, 1);
	EXPECT_NEAR(r.sp.logit_bias[0], 100, 0); /* clamped */
	EXPECTF(!strcmp(unknown, "temperature_typo, max_tokens_x"), "unknown = '%s'", unknown);
	srv_request_fini(&r);
	json_decref(body);
}

static void test_chat_errors(void)
{
	const enum srv_api C = SRV_API_CHAT;
#define M "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
	expect_400("[1,2]", C, NULL);
	expect_400("{}", C, "messages");
	expect_400("{\"messages\":[]}", C, "messages");
	expect_400("{\"messages\":\"hi\"}", C, "messages");
	expect_400("{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", C, "messages");
	expect_400("{\"messages\":[{\"content\":\"x\"}]}", C, "messages");
	expect_400("{\"messages\":[{\"role\":\"user\",\"content\":5}]}", C, "messages");
	expect_400("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", C, "messages");
	expect_400("{" M ",\"model\":5}", C, "model");
	expect_400("{" M ",\"temperature\":\"hot\"}", C, "temperature");
	expect_400("{" M ",\"temperature\":2.5}", C, "temperature");
	expect_400("{" M ",\"temperature\":-0.1}", C, "temperature");
	expect_400("{" M ",\"top_p\":0}", C, "top_p");
	expect_400("{" M ",\"top_p\":1.01}", C, "top_p");
	expect_400("{" M ",\"top_k\":-2}", C, "top_k");
	expect_400("{" M ",\"top_k\":1.5}", C, "top_k");
	expect_400("{" M ",\"min_p\":1.5}", C, "min_p");
	expect_400("{" M ",\"presence_penalty\":-2.5}", C, "presence_penalty");
	expect_400("{" M ",\"frequency_penalty\":3}", C, "frequency_penalty");
	expect_400("{" M ",\"repetition_penalty\":0}", C, "repetition_penalty");
	expect_400("{" M ",\"max_tokens\":0}", C, "max_tokens");
	expect_400("{" M ",\"max_completion_tokens\":-5}", C, "max_completion_tokens");
	expect_400("{" M ",\"max_tokens\":\"5\"}", C, "max_tokens");
	expect_400("{" M ",\"max_tokens\":4,\"min_tokens\":5}", C, "min_tokens");
	expect_400("{" M ",\"min_tokens\":-1}", C, "min_tokens");
	expect_400("{" M ",\"n\":0}", C, "n");
	expect_400("{" M ",\"n\":129}", C, "n");
	expect_400("{" M ",\"n\":2,\"temperature\":0}", C, "n"); /* greedy allows one choice */
	expect_400("{" M ",\"stream\":\"yes\"}", C, "stream");
	expect_400("{" M ",\"stream_options\":{\"include_usage\":true}}", C, "stream_options");
	expect_400("{" M ",\"stream\":true,\"stream_options\":{\"include_usage\":1}}", C, "include_usage");
	expect_400("{" M ",\"stop\":\"\"}", C, "stop");
	expect_400("{" M ",\"stop\":[\"a\",3]}", C, "stop");
	expect_400("{" M ",\"stop\":7}", C, "stop");
	expect_400("{" M ",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\","
		   "\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
		   C, "stop");
	expect_400("{" M ",\"stop_token_ids\":[1024]}", C, "stop_token_ids");
	expect_400("{" M ",\"stop_token_ids\":[-1]}", C, "stop_token_ids");
	expect_400("{" M ",\"stop_token_ids\":5}", C, "stop_token_ids");
	expect_400("{" M ",\"logit_bias\":{\"abc\":1}}", C, "logit_bias");
	expect_400("{" M ",\"logit_bias\":{\"5\":\"x\"}}", C, "logit_bias");
	expect_400("{" M ",\"top_logprobs\":2}", C, "top_logprobs");
	expect_400("{" M ",\"logprobs\":true,\"top_logprobs\":21}", C, "top_logprobs");
	lim.max_logprobs = 5; /* --max-logprobs 5 */
	expect_400("{" M ",\"logprobs\":true,\"top_logprobs\":6}", C, "top_logprobs");
	expect_400("{\"prompt\":\"x\",\"logprobs\":6}", SRV_API_COMPLETION, "logprobs");
	{
		struct srv_request r5;
		struct api_error ae5;
		EXPECT_EQ_INT(parse("{" M ",\"logprobs\":true,\"top_logprobs\":5}", C, &r5, &ae5), 0);
		srv_request_fini(&r5);
	}
	lim.max_logprobs = 0;
	expect_400("{" M ",\"logprobs\":1}", C, "logprobs");
	expect_400("{" M ",\"seed\":\"1\"}", C, "seed");
	expect_400("{" M ",\"ignore_eos\":0}", C, "ignore_eos");
	expect_400("{" M ",\"use_beam_search\":true}", C, "use_beam_search");
	expect_400("{" M ",\"response_format\":{\"type\":\"yaml\"}}", C, "response_format");
	expect_400("{" M ",\"guided_grammar\":\"a+\"}", C, "guided_grammar");
	expect_400("{" M ",\"guided_json\":{\"type\":\"string\",\"not\":{}}}", C, "guided_json");
	expect_400("{" M ",\"tools\":[{\"type\":\"function\"}],\"tool_choice\":\"auto\"}", C, "tool_choice");
	expect_400("{" M ",\"chat_template\":\"{{x}}\"}", C, "chat_template");
	expect_400("{" M ",\"chat_template_kwargs\":[]}", C, "chat_template_kwargs");
	expect_400("{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}],"
		   "\"continue_final_message\":true}",
		   C, "continue_final_message");
	expect_400("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		   "\"continue_final_message\":true,\"add_generation_prompt\":false}",
		   C, "continue_final_message");
#undef M
}

static void test_tools_reach_the_template(void)
{
	struct srv_request r;
	struct api_error ae;
	EXPECT_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
			    "\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":\"none\","
			    "\"chat_template_kwargs\":{\"thinking\":true}}",
			    SRV_API_CHAT, &r, &ae),
		      0);
	EXPECT(json_is_true(json_object_get(r.chat_template_kwargs, "thinking")));
	EXPECT_EQ_INT(json_array_size(json_object_get(r.chat_template_kwargs, "tools")), 1);
	srv_request_fini(&r);
	expect_400("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}", SRV_API_CHAT, "tools");
}

/* Malformed tools are a 400 whatever the tool_choice, as vLLM's pydantic model has them;
 * well-formed ones pass with or without type, description, parameters. */
static void test_tools_validated(void)
{
#define U "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"
	static const char *const bad[] = {"[{}]",
					  "[1]",
					  "[{\"type\":\"function\"}]",
					  "[{\"type\":\"code\",\"function\":{\"name\":\"f\"}}]",
					  "[{\"function\":{}}]",
					  "[{\"function\":{\"name\":3}}]",
					  "[{\"function\":[]}]",
					  "[{\"function\":{\"name\":\"f\",\"parameters\":[]}}]",
					  "[{\"function\":{\"name\":\"f\",\"description\":1}}]",
					  "[{\"function\":{\"name\":\"f\",\"strict\":\"yes\"}}]",
					  "\"f\""};
	static const char *const choices[] = {"", ",\"tool_choice\":\"none\""};
	char b[512];
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		for (int c = 0; c < 2; c++) {
			snprintf(b, sizeof b, "{" U ",\"tools\":%s%s}", bad[i], choices[c]);
			expect_400(b, SRV_API_CHAT, "tools");
		}
	struct srv_request r;
	struct api_error ae;
	EXPECT_EQ_INT(parse("{" U ",\"tools\":[{\"function\":{\"name\":\"f\",\"description\":null,"
			    "\"parameters\":null,\"strict\":true}},{\"type\":\"function\",\"function\":"
			    "{\"name\":\"g\",\"parameters\":{}}}]}",
			    SRV_API_CHAT, &r, &ae),
		      0);
	srv_request_fini(&r);
#undef U
}

/* A message without content (an assistant's with only tool_calls) or with null content is
 * accepted as given: the render makes it vLLM's "" or [] (test_chat_history). */
static void test_missing_content_is_empty(void)
{
	struct srv_request r;
	struct api_error ae;
	EXPECT_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
			    "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\","
			    "\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"content\":null,\"tool_call_id\":\"c\"}]}",
			    SRV_API_CHAT, &r, &ae),
		      0);
	EXPECT_EQ_INT(json_array_size(r.messages), 3);
	EXPECT(json_object_get(json_array_get(r.messages, 1), "content") == NULL);
	EXPECT(json_is_null(json_object_get(json_array_get(r.messages, 2), "content")));
	EXPECT(json_object_get(json_array_get(r.messages, 1), "tool_calls") != NULL);
	srv_request_fini(&r);
}

/* Which requests get their tool calls parsed: tools with tool_choice "auto" or unset, when
 * the server runs --enable-auto-tool-choice --tool-call-parser; "required" and named choices
 * are guided (a grammar; a name not in tools is a 400). */
static void test_tool_choice(void)
{
#define MT                                                                                                      \
	"\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":{" \
	"\"name\":\"f\"}}]"
	static const struct {
		bool server;
		const char *extra;
		int status;
		bool parse_tools;
	} cases[] = {
		{true, ",\"tool_choice\":\"auto\"", 0, true},
		{true, "", 0, true},
		{true, ",\"tool_choice\":null", 0, true},
		{true, ",\"tool_choice\":\"none\"", 0, false},
		{true, ",\"tool_choice\":\"required\"", 0, false},
		{true, ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}", 0, false},
		{false, ",\"tool_choice\":\"required\"", 0, false},
		{false, ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}", 400, false},
		{false, ",\"tool_choice\":\"some\"", 400, false},
		{false, "", 0, false},
		{false, ",\"tool_choice\":\"auto\"", 400, false},
		{false, ",\"tool_choice\":\"none\"", 0, false},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char text[512];
		snprintf(text, sizeof text, "{" MT "%s}", cases[i].extra);
		lim.auto_tools = cases[i].server;
		struct srv_request r;
		struct api_error ae;
		int st = parse(text, SRV_API_CHAT, &r, &ae);
		EXPECTF(st == cases[i].status && (st || r.parse_tools == cases[i].parse_tools),
			"case %zu: status %d, parse_tools %d (%s)", i, st, st ? -1 : r.parse_tools, ae.message);
		if (st)
			EXPECTF(!strcmp(ae.param, "tool_choice"), "case %zu: param %s", i, ae.param);
		/* "required" and named choices are guided: a grammar, and no parsing of the model's format */
		bool forced = strstr(cases[i].extra, "required") || strstr(cases[i].extra, "function\":{");
		if (!st)
			EXPECTF((r.sp.guide != NULL) == forced, "case %zu: guide %p", i, (void *)r.sp.guide);
		srv_request_fini(&r);
	}
	/* no tools: nothing to parse, whatever the server */
	struct srv_request r;
	struct api_error ae;
	EXPECT_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", SRV_API_CHAT, &r, &ae), 0);
	EXPECT(!r.parse_tools);
	srv_request_fini(&r);
	lim.auto_tools = false;
#undef MT
}

static void test_nulls_are_unset(void)
{
	struct srv_request r;
	struct api_error ae;
	EXPECT_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":null}],\"temperature\":null,"
			    "\"stop\":null,\"n\":null,\"seed\":-1,\"max_tokens\":null,"
			    "\"stream_options\":null,\"logprobs\":null,\"top_k\":7.0}",
			    SRV_API_CHAT, &r, &ae),
		      0);
	EXPECT_NEAR(r.sp.temperature, 0.6, 1e-6);
	EXPECT(!r.sp.has_seed && r.sp.n_stop == 0 && r.sp.n == 1 && r.sp.max_tokens == -1);
	EXPECT_EQ_INT(r.sp.top_k, 7); /* integral reals are integers, as pydantic allows */
	srv_request_fini(&r);
}

static void test_completion_prompts(void)
{
	struct srv_request r;
	struct api_error ae;
	const enum srv_api P = SRV_API_COMPLETION;
	EXPECT_EQ_INT(parse("{\"prompt\":\"hello\"}", P, &r, &ae), 0);
	EXPECT_EQ_INT(r.n_prompts, 1);
	EXPECT(r.prompts[0].text && r.prompts[0].text_len == 5 && !r.prompts[0].ids);
	EXPECT_EQ_INT(r.sp.max_tokens, 16); /* CompletionRequest default */
	EXPECT(r.add_special_tokens);
	srv_request_fini(&r);

	EXPECT_EQ_INT(parse("{\"prompt\":[1,2,3],\"logprobs\":2,\"echo\":true}", P, &r, &ae), 0);
	EXPECT_EQ_INT(r.n_prompts, 1);
	EXPECT_EQ_INT(r.prompts[0].n_ids, 3);
	EXPECT_EQ_INT(r.prompts[0].ids[2], 3);
	EXPECT_EQ_INT(r.sp.logprobs, 2);
	EXPECT(r.want_logprobs && r.echo);
	srv_request_fini(&r);

	EXPECT_EQ_INT(parse("{\"prompt\":[\"a\",[4,5],\"b\"],\"n\":2}", P, &r, &ae), 0);
	EXPECT_EQ_INT(r.n_prompts, 3);
	EXPECT(r.prompts[0].text && r.prompts[1].n_ids == 2 && r.prompts[2].text);
	EXPECT_EQ_INT(r.sp.n, 2);
	srv_request_fini(&r);

	expect_400("{}", P, "prompt");
	expect_400("{\"prompt\":5}", P, "prompt");
	expect_400("{\"prompt\":[]}", P, "prompt");
	expect_400("{\"prompt\":[[]]}", P, "prompt");
	expect_400("{\"prompt\":[1,\"a\"]}", P, "prompt");
	expect_400("{\"prompt\":[5000]}", P, "prompt");
	expect_400("{\"prompt\":[{\"x\":1}]}", P, "prompt");
	expect_400("{\"prompt\":\"a\",\"logprobs\":21}", P, "logprobs");
	expect_400("{\"prompt\":\"a\",\"logprobs\":true}", P, "logprobs");
	expect_400("{\"prompt\":\"a\",\"suffix\":\"z\"}", P, "suffix");
	expect_400("{\"prompt\":\"a\",\"max_tokens\":4,\"min_tokens\":8}", P, "min_tokens");
	expect_400("{\"prompt\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\","
		   "\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
		   P, "prompt");
}

static void test_length_checks(void)
{
	struct srv_request r;
	struct api_error ae;
	EXPECT_EQ_INT(parse("{\"prompt\":\"x\",\"max_tokens\":100}", SRV_API_COMPLETION, &r, &ae), 0);
	EXPECT_EQ_INT(srv_request_check_length(&r, 412, 512, &ae), 0);
	EXPECT_EQ_INT(srv_request_check_length(&r, 413, 512, &ae), -1);
	EXPECT_EQ_INT(ae.status, 400);
	EXPECTF(!strcmp(ae.message, "'max_tokens' or 'max_completion_tokens' is too large: 100. "
				    "This model's maximum context length is 512 tokens and your "
				    "request has 413 input tokens (100 > 512 - 413)."),
		"%s", ae.message);
	EXPECT_EQ_INT(srv_request_check_length(&r, 512, 512, &ae), -1);
	EXPECTF(!strcmp(ae.message, "This model's maximum context length is 512 tokens. However, "
				    "your request has 512 input tokens. Please reduce the length of "
				    "the input messages."),
		"%s", ae.message);
	srv_request_fini(&r);
	/* no explicit max_tokens (chat): only the prompt itself must fit */
	EXPECT_EQ_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", SRV_API_CHAT, &r, &ae), 0);
	EXPECT_EQ_INT(srv_request_check_length(&r, 511, 512, &ae), 0);
	srv_request_fini(&r);
}

static void test_continue_final_cut(void)
{
	struct api_error ae;
	json_t *m = json_loads("[{\"role\":\"user\",\"content\":\"Hi\"},"
			       "{\"role\":\"assistant\",\"content\":\"Hello th\"}]",
			       0, NULL);
	const char *rendered = "<B><U>Hi<A>Hello th<E>";
	long cut = srv_continue_final_cut(m, rendered, strlen(rendered), &ae);
	EXPECT_EQ_INT(cut, (long)strlen("<B><U>Hi<A>Hello th"));
	const char *stripped = "<B><U>Hi<A>nothing<E>";
	EXPECT_EQ_INT(srv_continue_final_cut(m, stripped, strlen(stripped), &ae), -1);
	EXPECT_EQ_INT(ae.status, 400);
	json_decref(m);
}

static void test_error_body(void)
{
	struct api_error ae;
	api_error_set(&ae, 400, "temperature", "temperature must be in [0, 2], got %g.", 3.0);
	size_t len;
	char *body = api_error_body(&ae, &len);
	EXPECTF(!strcmp(body, "{\"error\":{\"message\":\"temperature must be in [0, 2], got 3.\","
			      "\"type\":\"BadRequestError\",\"param\":\"temperature\",\"code\":400}}"),
		"%s", body);
	EXPECT_EQ_INT(len, strlen(body));
	free(body);
	/* a message quoting invalid client bytes still serializes; param null */
	api_error_set(&ae, 404, NULL, "The model `%s` does not exist.", "bad\xff");
	body = api_error_body(&ae, &len);
	EXPECTF(!strcmp(body, "{\"error\":{\"message\":\"The model `bad\xef\xbf\xbd` does not exist.\","
			      "\"type\":\"NotFoundError\",\"param\":null,\"code\":404}}"),
		"%s", body);
	free(body);
	EXPECT(!strcmp(api_error_type(401), "AuthenticationError"));
	EXPECT(!strcmp(api_error_type(413), "RequestEntityTooLargeError"));
	EXPECT(!strcmp(api_error_type(503), "ServiceUnavailableError"));
	EXPECT(!strcmp(api_error_type(500), "InternalServerError"));
}

/* echo + logprobs asks for the prompt's logprobs too; prompt_logprobs is range-checked */
static void test_prompt_logprobs(void)
{
	init_base();
	struct srv_request r;
	struct api_error ae;
	EXPECT_EQ_INT(parse("{\"prompt\": [0, 5, 9], \"echo\": true, \"logprobs\": 3}", SRV_API_COMPLETION, &r, &ae),
		      0);
	EXPECT(r.echo_logprobs && !r.prompt_logprobs && r.sp.prompt_logprobs == 3 && r.sp.logprobs == 3);
	srv_request_fini(&r);
	EXPECT_EQ_INT(parse("{\"prompt\": \"x\", \"echo\": true}", SRV_API_COMPLETION, &r, &ae), 0);
	EXPECT(!r.echo_logprobs && r.sp.prompt_logprobs == -1);
	srv_request_fini(&r);
	EXPECT_EQ_INT(parse("{\"prompt\": \"x\", \"prompt_logprobs\": 0, \"echo\": true, \"logprobs\": 2}",
			    SRV_API_COMPLETION, &r, &ae),
		      0);
	EXPECT(r.prompt_logprobs && r.echo_logprobs && r.sp.prompt_logprobs == 2);
	srv_request_fini(&r);
	EXPECT_EQ_INT(parse("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"prompt_logprobs\": 4}",
			    SRV_API_CHAT, &r, &ae),
		      0);
	EXPECT(r.prompt_logprobs && r.sp.prompt_logprobs == 4);
	srv_request_fini(&r);
	EXPECT_EQ_INT(parse("{\"prompt\": \"x\", \"echo\": true, \"max_tokens\": 0, \"logprobs\": 1}",
			    SRV_API_COMPLETION, &r, &ae),
		      0);
	EXPECT(r.echo_only && r.echo_logprobs && r.sp.max_tokens == 1);
	srv_request_fini(&r);
	expect_400("{\"prompt\": \"x\", \"max_tokens\": 0}", SRV_API_COMPLETION, "max_tokens");
	expect_400("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"echo\": true, \"max_tokens\": 0}",
		   SRV_API_CHAT, "max_tokens");
	expect_400("{\"prompt\": \"x\", \"prompt_logprobs\": 21}", SRV_API_COMPLETION, "prompt_logprobs");
	expect_400("{\"prompt\": \"x\", \"prompt_logprobs\": \"all\"}", SRV_API_COMPLETION, "prompt_logprobs");
}

/* truncate_prompt_tokens, return_tokens_as_token_ids, cache_salt, priority */
static void test_extras(void)
{
	init_base();
	struct srv_request r;
	struct api_error ae;
	EXPECT_EQ_INT(parse("{\"prompt\": \"x\", \"truncate_prompt_tokens\": 5, \"return_tokens_as_token_ids\": true, "
			    "\"cache_salt\": \"tenant-a\", \"priority\": 0}",
			    SRV_API_COMPLETION, &r, &ae),
		      0);
	EXPECT(r.truncate_prompt_tokens == 5 && r.tokens_as_ids);
	EXPECT(r.sp.cache_salt && !strcmp(r.sp.cache_salt, "tenant-a")); /* the engine hashes it */
	srv_request_fini(&r);
	EXPECT_EQ_INT(parse("{\"prompt\": \"x\"}", SRV_API_COMPLETION, &r, &ae), 0);
	EXPECT(r.sp.cache_salt == NULL && r.truncate_prompt_tokens == 0);
	srv_request_fini(&r);
	expect_400("{\"prompt\": \"x\", \"truncate_prompt_tokens\": 0}", SRV_API_COMPLETION, "truncate_prompt_tokens");
	expect_400("{\"prompt\": \"x\", \"cache_salt\": \"\"}", SRV_API_COMPLETION, "cache_salt");
	expect_400("{\"prompt\": \"x\", \"priority\": 3}", SRV_API_COMPLETION, "priority");
	/* --scheduling-policy priority: any 32-bit priority, negative ones too */
	lim.priority = true;
	EXPECT_EQ_INT(parse("{\"prompt\": \"x\", \"priority\": -7}", SRV_API_COMPLETION, &r, &ae), 0);
	EXPECT_EQ_INT(r.sp.priority, -7);
	srv_request_fini(&r);
	EXPECT_EQ_INT(parse("{\"prompt\": \"x\"}", SRV_API_COMPLETION, &r, &ae), 0);
	EXPECT_EQ_INT(r.sp.priority, 0);
	srv_request_fini(&r);
	expect_400("{\"prompt\": \"x\", \"priority\": 4294967296}", SRV_API_COMPLETION, "priority");
	expect_400("{\"prompt\": \"x\", \"priority\": 1.5}", SRV_API_COMPLETION, "priority");
	lim.priority = false;
}

/* image parts: a 400 that says the model takes no images, whatever else the part holds */
static void test_image_input_refused(void)
{
	static const char *const bodies[] = {
		"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"what is this?\"},"
		"{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}}]}]}",
		"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"x\"}]}]}",
		"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}"};
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		struct srv_request r;
		struct api_error ae;
		EXPECT_EQ_INT(parse(bodies[i], SRV_API_CHAT, &r, &ae), 400);
		EXPECTF(strstr(ae.message, "this model does not accept image input") && !strcmp(ae.param, "messages"),
			"%s", ae.message);
		srv_request_fini(&r);
	}
}

TESTS(T(test_image_input_refused), T(test_extras), T(test_prompt_logprobs), T(test_chat_defaults), T(test_chat_fields),
      T(test_chat_errors), T(test_tools_reach_the_template), T(test_tools_validated), T(test_missing_content_is_empty),
      T(test_tool_choice), T(test_nulls_are_unset), T(test_completion_prompts), T(test_length_checks),
      T(test_continue_final_cut), T(test_error_body))
