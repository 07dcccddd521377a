/* DeepSeek-V3.2's native prompt encoder (src/tok/chat_dsv32.c) through the chat-template API:
 * byte for byte on the examples published with encoding_dsv32.py (tests/fixtures/dsv32/: each
 * .txt is the encoder's output plus one final newline), and edge cases whose expected prompts
 * are written out from the encoder's rules: thinking on and off, earlier turns' reasoning
 * dropped, empty and null content, several tool calls and their results, argument values of
 * every JSON type, tools with and without a system message, errors. Plus the dispatch: a
 * deepseek_v32 config.json with no template gets the encoder, a template text still wins; and
 * --reasoning-parser deepseek_v3 splits exactly the requests the encoder opens thinking for. */
#include "chat_native_util.h"

#define BOS "<｜begin▁of▁sentence｜>"
#define EOS "<｜end▁of▁sentence｜>"
#define U "<｜User｜>"
#define A "<｜Assistant｜>"
#define D "｜DSML｜"

static char dir[] = "/tmp/test_chat_dsv32_XXXXXX";
static struct chat_template *tpl;

/* the native template, from a V3.2 config.json */
static struct chat_template *native(void)
{
	struct err e;
	if (!tpl)
		tpl = open_for(dir,
			       "{\"architectures\": [\"DeepseekV32ForCausalLM\"], \"model_type\": \"deepseek_v32\"}",
			       &e);
	return tpl;
}

static void test_published_examples(void)
{
	check_vector("dsv32/test_input.json", "dsv32/test_output.txt", true, true);
	check_vector("dsv32/search_w_date_head.json", "dsv32/search_w_date_head.txt", true, true);
	check_vector("dsv32/search_wo_date_head.json", "dsv32/search_wo_date_head.txt", true, true);
}

static void test_thinking_switch(void)
{
	const char *m = "[{\"role\": \"user\", \"content\": \"hi\"}]";
	expect_prompt("chat mode", m, NULL, BOS U "hi" A "</think>");
	expect_prompt("thinking false", m, "{\"thinking\": false}", BOS U "hi" A "</think>");
	expect_prompt("thinking", m, "{\"thinking\": true}", BOS U "hi" A "<think>");
	expect_prompt("enable_thinking", m, "{\"enable_thinking\": true}", BOS U "hi" A "<think>");
	expect_prompt("thinking 1 (Python's bool)", m, "{\"thinking\": 1}", BOS U "hi" A "<think>");
	expect_prompt("thinking \"\"", m, "{\"thinking\": \"\"}", BOS U "hi" A "</think>");
	expect_prompt("no messages", "[]", "{\"thinking\": true}", BOS);
}

static void test_multi_turn(void)
{
	const char *m = "[{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"a\"},"
			" {\"role\": \"assistant\", \"content\": \"b\", \"reasoning_content\": \"r1\"},"
			" {\"role\": \"user\", \"content\": \"c\"}]";
	/* the reasoning of turns before the last user message is never written */
	expect_prompt("thinking, earlier reasoning dropped", m, "{\"thinking\": true}",
		      BOS "S" U "a" A "</think>b" EOS U "c" A "<think>");
	expect_prompt("chat", m, NULL, BOS "S" U "a" A "</think>b" EOS U "c" A "</think>");
	/* an assistant message after the last user message (a prefill) keeps its reasoning */
	const char *last = "[{\"role\": \"user\", \"content\": \"a\"},"
			   " {\"role\": \"assistant\", \"content\": \"b\", \"reasoning\": \"r\"}]";
	expect_prompt("thinking, last assistant", last, "{\"thinking\": true}", BOS U "a" A "<think>r</think>b" EOS);
	expect_prompt("chat, last assistant", last, NULL, BOS U "a" A "</think>b" EOS);
	/* content given as text parts is joined, as for the Jinja templates */
	expect_prompt("text parts",
		      "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"},"
		      " {\"type\": \"text\", \"text\": \"y\"}]}]",
		      NULL, BOS U "x\ny" A "</think>");
}

static void test_empty_content(void)
{
	expect_prompt("empty user", "[{\"role\": \"user\", \"content\": \"\"}]", NULL, BOS U A "</think>");
	expect_prompt("null user", "[{\"role\": \"user\", \"content\": null}]", NULL, BOS U A "</think>");
	expect_prompt("system without content", "[{\"role\": \"system\"}, {\"role\": \"user\", \"content\": \"q\"}]",
		      NULL, BOS U "q" A "</think>");
	expect_prompt("assistant null content",
		      "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": null},"
		      " {\"role\": \"user\", \"content\": \"r\"}]",
		      NULL, BOS U "q" A "</think>" EOS U "r" A "</think>");
}

#define CALLS2                                                                                            \
	"{\"role\": \"assistant\", \"content\": null, \"tool_calls\": ["                                  \
	"{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": "        \
	"\"{\\\"n\\\": 3, \\\"x\\\": 1.50, \\\"e\\\": 1e2, \\\"b\\\": true, \\\"z\\\": null, \\\"l\\\": " \
	"[1,\\\"é\\\"],"                                                                                 \
	" \\\"o\\\": {\\\"k\\\":{}}, \\\"s\\\": \\\"été \\\\\\\"q\\\\\\\"\\\\n\\\"}\"}},"               \
	"{\"id\": \"c2\", \"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": \"{}\"}}]}"
#define INVOKES                                                                      \
	"\n\n<" D "function_calls>\n<" D "invoke name=\"f\">\n"                      \
	"<" D "parameter name=\"n\" string=\"false\">3</" D "parameter>\n"           \
	"<" D "parameter name=\"x\" string=\"false\">1.5</" D "parameter>\n"         \
	"<" D "parameter name=\"e\" string=\"false\">100.0</" D "parameter>\n"       \
	"<" D "parameter name=\"b\" string=\"false\">true</" D "parameter>\n"        \
	"<" D "parameter name=\"z\" string=\"false\">null</" D "parameter>\n"        \
	"<" D "parameter name=\"l\" string=\"false\">[1, \"é\"]</" D "parameter>\n"  \
	"<" D "parameter name=\"o\" string=\"false\">{\"k\": {}}</" D "parameter>\n" \
	"<" D "parameter name=\"s\" string=\"true\">été \"q\"\n</" D "parameter>\n"  \
	"</" D "invoke>\n<" D "invoke name=\"g\">\n\n</" D "invoke>\n</" D "function_calls>" EOS

static void test_tool_calls_and_results(void)
{
	const char *m = "[{\"role\": \"user\", \"content\": \"q\"}, " CALLS2 ","
			" {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"R1\"},"
			" {\"role\": \"tool\", \"tool_call_id\": \"c2\", \"content\": \"\"}]";
	expect_prompt("chat: two calls, two results", m, NULL,
		      BOS U "q" A "</think>" INVOKES "\n\n<function_results>\n<result>R1</result>\n<result></result>"
			    "\n</function_results>\n\n</think>");
	/* thinking: the calls after the last user message open with an empty reasoning, the results
	 * reopen the thinking */
	expect_prompt("thinking: two calls, two results", m, "{\"thinking\": true}",
		      BOS U "q" A "<think></think>" INVOKES
			    "\n\n<function_results>\n<result>R1</result>\n<result></result>"
			    "\n</function_results>\n\n<think>");
	/* one result of two: the results block stays open */
	const char *part = "[{\"role\": \"user\", \"content\": \"q\"}, " CALLS2 ","
			   " {\"role\": \"tool\", \"content\": \"R1\"}]";
	expect_prompt("one result of two", part, NULL,
		      BOS U "q" A "</think>" INVOKES "\n\n<function_results>\n<result>R1</result>");
	/* arguments already an object; the call's text between content and the calls */
	expect_prompt("object arguments, content",
		      "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"ok\", "
		      "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"h\", \"arguments\": "
		      "{\"a\": \"1\"}}}]},"
		      " {\"role\": \"user\", \"content\": \"r\"}]",
		      "{\"thinking\": true}",
		      BOS U "q" A "</think>ok\n\n<" D "function_calls>\n<" D "invoke name=\"h\">\n<" D
			    "parameter name=\"a\" string=\"true\">1</" D "parameter>\n</" D "invoke>\n</" D
			    "function_calls>" EOS U "r" A "<think>");
}

#define TOOLS_JSON \
	"[{\"type\": \"function\", \"function\": {\"name\": \"t\", \"parameters\": {\"type\": \"object\"}}}]"
#define SCHEMA "{\"name\": \"t\", \"parameters\": {\"type\": \"object\"}}"

static void test_tools_placement(void)
{
	struct err e = {{0}};
	char *with_sys = render(
		"[{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"q\"}]",
		"{\"tools\": " TOOLS_JSON "}", &e);
	char *no_sys = render("[{\"role\": \"user\", \"content\": \"q\"}]", "{\"tools\": " TOOLS_JSON "}", &e);
	char *own = render("[{\"role\": \"system\", \"content\": \"S\", \"tools\": " TOOLS_JSON
			   "}, {\"role\": \"user\", \"content\": \"q\"}]",
			   NULL, &e);
	const char *head = "## Tools\n\nYou have access to a set of tools";
	const char *tail = "<functions>\n" SCHEMA "\n</functions>\n" U "q" A "</think>";
	EXPECTF(with_sys && !strncmp(with_sys, BOS "S\n\n", strlen(BOS "S\n\n")) &&
			!strncmp(with_sys + strlen(BOS "S\n\n"), head, strlen(head)) &&
			!strcmp(with_sys + strlen(with_sys) - strlen(tail), tail),
		"tools on the system message: %s", with_sys ? with_sys : e.msg);
	EXPECTF(no_sys && !strncmp(no_sys, BOS "\n\n", strlen(BOS "\n\n")) &&
			!strncmp(no_sys + strlen(BOS "\n\n"), head, strlen(head)) &&
			!strcmp(no_sys + strlen(no_sys) - strlen(tail), tail),
		"tools on an empty system message: %s", no_sys ? no_sys : e.msg);
	EXPECTF(own && with_sys && !strcmp(own, with_sys), "a system message's own tools: %s", own ? own : e.msg);
	expect_prompt("empty tools list", "[{\"role\": \"user\", \"content\": \"q\"}]", "{\"tools\": []}",
		      BOS U "q" A "</think>");
	free(with_sys);
	free(no_sys);
	free(own);
	/* a developer message: tools and response format inside the user turn */
	expect_prompt(
		"developer with response_format",
		"[{\"role\": \"developer\", \"content\": \"d\", \"response_format\": {\"type\": \"json_object\"}}]",
		NULL,
		BOS U "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
		      "{\"type\": \"json_object\"}\n\n# The user's message is: d" A "</think>");
	expect_prompt("system with response_format",
		      "[{\"role\": \"system\", \"content\": \"S\", \"response_format\": {\"a\": [1]}}]", NULL,
		      BOS "S\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
			  "{\"a\": [1]}");
}

static void test_errors(void)
{
	expect_error("unknown role", "[{\"role\": \"bot\", \"content\": \"x\"}]", NULL,
		     "messages[0]: unknown role 'bot'");
	expect_error("no role", "[{\"content\": \"x\"}]", NULL, "messages[0] has no role");
	expect_error("developer without content", "[{\"role\": \"developer\", \"content\": \"\"}]", NULL,
		     "developer message needs content");
	expect_error("tool first", "[{\"role\": \"tool\", \"content\": \"x\"}]", NULL,
		     "messages[0]: a tool message must follow an assistant message with tool_calls");
	expect_error("tool after a user",
		     "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"tool\", \"content\": \"x\"}]", NULL,
		     "messages[1]: a tool message must follow");
	expect_error(
		"more results than calls",
		"[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"tool_calls\": [{\"function\":"
		" {\"name\": \"f\", \"arguments\": \"{}\"}}]}, {\"role\": \"tool\", \"content\": \"1\"},"
		" {\"role\": \"tool\", \"content\": \"2\"}]",
		NULL, "messages[3]: 2 tool results for 1 tool_calls");
	expect_error("bad arguments",
		     "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": "
		     "\"{x\"}}]}]",
		     NULL, "messages[0].tool_calls[0].function.arguments:");
	expect_error("arguments not an object",
		     "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": "
		     "\"[1]\"}}]}]",
		     NULL, "must be a JSON object");
	expect_error("call without a name",
		     "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"arguments\": \"{}\"}}]}]", NULL,
		     "messages[0].tool_calls[0] has no function.name");
	expect_error("thinking assistant without reasoning",
		     "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\"}]",
		     "{\"thinking\": true}", "messages[1]: in thinking mode");
	expect_error("tools not a list", "[{\"role\": \"user\", \"content\": \"q\"}]", "{\"tools\": 3}",
		     "tools must be a list");
	expect_error("tool without function", "[{\"role\": \"user\", \"content\": \"q\"}]",
		     "{\"tools\": [{\"type\": \"x\"}]}", "prompt: tools[0] has no \"function\"");
	/* errors name the request's own indices, with a system message put in front for the tools */
	expect_error("index with tools", "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"bot\"}]",
		     "{\"tools\": " TOOLS_JSON "}", "messages[1]: unknown role 'bot'");
	expect_error("a message's own tools", "[{\"role\": \"system\", \"tools\": [{}]}]", NULL,
		     "messages[0].tools[0] has no \"function\"");
}

static void test_dispatch(void)
{
	struct err e = {{0}};
	struct chat_template *t = NULL;
	EXPECT(native() && !strcmp(chat_template_native(native()), "deepseek_v32"));
	/* a template text wins over the native encoder */
	EXPECT(chat_template_open("{{ 'jinja' }}", "/nonexistent", &t, &e) == 0 && t && !chat_template_native(t));
	char *out = NULL;
	json_t *m = json_array();
	EXPECT(t && chat_template_render(t, m, true, NULL, NULL, NULL, &out, &e) == 0 && out && !strcmp(out, "jinja"));
	free(out);
	json_decref(m);
	chat_template_free(t);
	/* a model that is not V3.2 (or no config.json): no template */
	t = (struct chat_template *)1;
	EXPECT(chat_template_open(NULL, "/nonexistent", &t, &e) == 0 && !t);
	char tmp[] = "/tmp/test_chat_dsv32_v3_XXXXXX";
	EXPECT(!open_for(tmp, "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"model_type\": \"deepseek_v3\"}",
			 &e));
}

/* --reasoning-parser deepseek_v3 splits exactly the requests whose prompt the encoder ends
 * inside the thinking */
static void test_reasoning_switch_agrees(void)
{
	static const char *const kw[] = {NULL,
					 "{}",
					 "{\"thinking\": true}",
					 "{\"thinking\": false}",
					 "{\"enable_thinking\": true}",
					 "{\"enable_thinking\": 0}",
					 "{\"thinking\": 0, \"enable_thinking\": \"y\"}",
					 "{\"thinking\": []}",
					 "{\"thinking\": {\"a\": 1}}"};
	expect_split_agrees(REASONING_DEEPSEEK_V3, kw, sizeof kw / sizeof kw[0]);
}

static void test_cleanup(void) { chat_template_free(tpl); }

TESTS(T(test_published_examples), T(test_thinking_switch), T(test_multi_turn), T(test_empty_content),
      T(test_tool_calls_and_results), T(test_tools_placement), T(test_errors), T(test_dispatch),
      T(test_reasoning_switch_agrees), T(test_cleanup))
