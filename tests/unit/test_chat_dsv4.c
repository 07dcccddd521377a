/* DeepSeek-V4's native prompt encoder (src/tok/chat_dsv4.c) through the chat-template API: byte
 * for byte on the four examples published with encoding_dsv4.py (tests/fixtures/dsv4/), and
 * edge cases whose expected prompts are written out from the encoder's rules (and checked
 * against encoding_dsv4.py itself): tool results merged into user turns and put in call order,
 * user messages merged, drop_thinking and what tools change in it, reasoning_effort, tasks,
 * wo_eos, arguments that are not JSON, where the request's tools go, errors. Plus the dispatch
 * (a deepseek_v4 config.json with no template gets the encoder) and --reasoning-parser
 * deepseek_v4 splitting exactly the requests the encoder opens thinking for. */
#include "chat_native_util.h"

#define BOS "<｜begin▁of▁sentence｜>"
#define EOS "<｜end▁of▁sentence｜>"
#define U "<｜User｜>"
#define A "<｜Assistant｜>"
#define D "｜DSML｜"
#define TR(x) "<tool_result>" x "</tool_result>"

static char dir[] = "/tmp/test_chat_dsv4_XXXXXX";
static struct chat_template *tpl;

/* the native template, from a V4 config.json */
static struct chat_template *native(void)
{
	struct err e;
	if (!tpl)
		tpl = open_for(
			dir, "{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"model_type\": \"deepseek_v4\"}", &e);
	return tpl;
}

static void test_published_examples(void)
{
	check_vector("dsv4/test_input_1.json", "dsv4/test_output_1.txt", true, false);
	check_vector("dsv4/test_input_2.json", "dsv4/test_output_2.txt", true, false);
	check_vector("dsv4/test_input_3.json", "dsv4/test_output_3.txt", true, false);
	check_vector("dsv4/test_input_4.json", "dsv4/test_output_4.txt", false, false);
}

#define EFFORT_MAX_HEAD "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"

static void test_thinking_and_effort(void)
{
	const char *m = "[{\"role\": \"user\", \"content\": \"hi\"}]";
	expect_prompt("chat mode", m, NULL, BOS U "hi" A "</think>");
	expect_prompt("thinking", m, "{\"thinking\": true}", BOS U "hi" A "<think>");
	expect_prompt("enable_thinking", m, "{\"enable_thinking\": 1}", BOS U "hi" A "<think>");
	expect_prompt("thinking \"\"", m, "{\"thinking\": \"\"}", BOS U "hi" A "</think>");
	expect_prompt("no messages", "[]", "{\"thinking\": true, \"reasoning_effort\": \"max\"}", BOS);
	/* max effort: the preamble in front of the first turn, in thinking mode only */
	struct err e = {{0}};
	char *max = render("[{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"hi\"}]",
			   "{\"thinking\": true, \"reasoning_effort\": \"max\"}", &e);
	const char *end = max ? strstr(max, "is left unchecked.\n\n") : NULL;
	EXPECTF(max && !strncmp(max, BOS EFFORT_MAX_HEAD, strlen(BOS EFFORT_MAX_HEAD)) && end &&
			!strcmp(end, "is left unchecked.\n\nS" U "hi" A "<think>"),
		"max effort: %s", max ? max : e.msg);
	free(max);
	expect_prompt("max effort, chat mode", m, "{\"reasoning_effort\": \"max\"}", BOS U "hi" A "</think>");
	expect_prompt("high effort", m, "{\"thinking\": true, \"reasoning_effort\": \"high\"}",
		      BOS U "hi" A "<think>");
	expect_prompt("low effort", m, "{\"thinking\": true, \"reasoning_effort\": \"low\"}", BOS U "hi" A "<think>");
	/* "none" turns thinking off (vLLM) */
	expect_prompt("no effort", m, "{\"thinking\": true, \"reasoning_effort\": \"none\"}", BOS U "hi" A "</think>");
}

static void test_multi_turn_and_drop(void)
{
	const char *m = "[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\", "
			"\"reasoning\": \"r1\"}, {\"role\": \"user\", \"content\": \"c\"}, {\"role\": \"assistant\", "
			"\"content\": \"d\", \"reasoning_content\": \"r2\"}]";
	expect_prompt("thinking: earlier reasoning dropped", m, "{\"thinking\": true}",
		      BOS U "a" A "</think>b" EOS U "c" A "<think>r2</think>d" EOS);
	expect_prompt("chat", m, NULL, BOS U "a" A "</think>b" EOS U "c" A "</think>d" EOS);
	/* drop_thinking off: every user turn opens the thinking, every assistant writes its own */
	expect_prompt("drop_thinking false", m, "{\"thinking\": true, \"drop_thinking\": false}",
		      BOS U "a" A "<think>r1</think>b" EOS U "c" A "<think>r2</think>d" EOS);
	/* an assistant after the last user message: its reasoning, or an empty one ("reasoning" first) */
	expect_prompt("last assistant",
		      "[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", "
		      "\"content\": \"b\", \"reasoning\": \"r\", \"reasoning_content\": \"x\"}]",
		      "{\"thinking\": true}", BOS U "a" A "<think>r</think>b" EOS);
	expect_prompt("last assistant without reasoning",
		      "[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}]",
		      "{\"thinking\": true}", BOS U "a" A "<think></think>b" EOS);
	/* user messages in a row are one turn */
	expect_prompt("two user messages",
		      "[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": null}, "
		      "{\"role\": \"user\", \"content\": \"c\"}]",
		      NULL, BOS U "a\n\n\n\nc" A "</think>");
	/* thinking, no tools: a developer message before the last user message is left out */
	const char *dev = "[{\"role\": \"developer\", \"content\": \"d\"}, {\"role\": \"assistant\", \"content\": "
			  "\"x\", \"reasoning_content\": \"r\"}, {\"role\": \"user\", \"content\": \"u\"}]";
	expect_prompt("developer dropped", dev, "{\"thinking\": true}", BOS "x" EOS U "u" A "<think>");
	expect_prompt("developer kept in chat mode", dev, NULL, BOS U "d" A "</think>x" EOS U "u" A "</think>");
	/* an unknown role before the last user message is left out in thinking mode, else an error */
	const char *bot = "[{\"role\": \"bot\", \"content\": \"x\"}, {\"role\": \"user\", \"content\": \"u\"}]";
	expect_prompt("unknown role dropped", bot, "{\"thinking\": true}", BOS U "u" A "<think>");
	expect_error("unknown role", bot, NULL, "deepseek_v4 prompt: messages[0]: unknown role 'bot'");
	/* latest_reminder: written as it is, the assistant's prompt still follows the user turn */
	expect_prompt(
		"latest_reminder",
		"[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"latest_reminder\", \"content\": \"R\"}]",
		NULL, BOS U "q" A "</think><｜latest_reminder｜>R");
	expect_prompt("content parts", "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"}]}]",
		      NULL, BOS U "x" A "</think>");
}

/* two calls (the DSML of every argument type: test_chat_dsv32.c, the writer is shared) */
#define CALLS2                                                                                                       \
	"{\"role\": \"assistant\", \"content\": null, \"tool_calls\": ["                                             \
	"{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": "                   \
	"\"{\\\"n\\\": 1.50, \\\"s\\\": \\\"été\\\"}\"}}, {\"id\": \"c2\", \"type\": \"function\", \"function\": " \
	"{\"name\": \"g\", \"arguments\": \"{}\"}}]}"
#define INVOKES                                                                                                \
	"\n\n<" D "tool_calls>\n<" D "invoke name=\"f\">\n<" D "parameter name=\"n\" string=\"false\">1.5</" D \
	"parameter>\n<" D "parameter name=\"s\" string=\"true\">été</" D "parameter>\n</" D "invoke>\n<" D     \
	"invoke name=\"g\">\n\n</" D "invoke>\n</" D "tool_calls>" EOS

static void test_tool_calls_and_results(void)
{
	/* the results come in the other order: put back in the calls' order, a text after them stays
	 * last; the merged user turn gets the assistant's prompt */
	const char *m = "[{\"role\": \"user\", \"content\": \"q\"}, " CALLS2 ","
			" {\"role\": \"tool\", \"tool_call_id\": \"c2\", \"content\": \"R2\"},"
			" {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"R1\"},"
			" {\"role\": \"user\", \"content\": \"more\"}]";
	expect_prompt("chat: results in call order", m, NULL,
		      BOS U "q" A "</think>" INVOKES U TR("R1") "\n\n" TR("R2") "\n\nmore" A "</think>");
	expect_prompt("thinking", m, "{\"thinking\": true}",
		      BOS U "q" A "</think>" INVOKES U TR("R1") "\n\n" TR("R2") "\n\nmore" A "<think>");
	/* no ids: the order stays; a null content is "" */
	expect_prompt("no ids",
		      "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": "
		      "\"{}\"}}, {\"function\": {\"name\": \"g\", \"arguments\": \"{}\"}}]}, {\"role\": \"tool\", "
		      "\"tool_call_id\": \"x\", \"content\": \"B\"}, {\"role\": \"tool\", \"content\": null}]",
		      NULL,
		      BOS "\n\n<" D "tool_calls>\n<" D "invoke name=\"f\">\n\n</" D "invoke>\n<" D
			  "invoke name=\"g\">\n\n</" D "invoke>\n</" D "tool_calls>" EOS U TR("B") "\n\n" TR("") A
		      "</think>");
	/* the function's own id; an id not among the calls sorts first (as 0) */
	expect_prompt(
		"function ids",
		"[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"id\": \"a\", \"name\": \"f\", "
		"\"arguments\": \"{}\"}}, {\"id\": \"\", \"function\": {\"id\": \"b\", \"name\": \"g\", "
		"\"arguments\": "
		"\"{}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"b\", \"content\": \"B\"}, {\"role\": \"tool\", "
		"\"tool_call_id\": \"zz\", \"content\": \"Z\"}, {\"role\": \"tool\", \"tool_call_id\": \"a\", "
		"\"content\": \"A\"}]",
		NULL,
		BOS "\n\n<" D "tool_calls>\n<" D "invoke name=\"f\">\n\n</" D "invoke>\n<" D
		    "invoke name=\"g\">\n\n</" D "invoke>\n</" D
		    "tool_calls>" EOS U TR("Z") "\n\n" TR("A") "\n\n" TR("B") A "</think>");
	/* arguments that are not JSON: one string parameter "arguments"; already an object; content */
	expect_prompt(
		"arguments not JSON, content",
		"[{\"role\": \"assistant\", \"content\": \"ok\", \"tool_calls\": [{\"function\": {\"name\": \"h\", "
		"\"arguments\": \"{x\"}}, {\"function\": {\"name\": \"k\", \"arguments\": {\"a\": 1}}}]}]",
		NULL,
		BOS "ok\n\n<" D "tool_calls>\n<" D "invoke name=\"h\">\n<" D
		    "parameter name=\"arguments\" string=\"true\">{x</" D "parameter>\n</" D "invoke>\n<" D
		    "invoke name=\"k\">\n<" D "parameter name=\"a\" string=\"false\">1</" D "parameter>\n</" D
		    "invoke>\n</" D "tool_calls>" EOS);
	/* a tool result with no user turn before it opens one; an empty tool_calls list writes none */
	expect_prompt("result after an assistant without calls",
		      "[{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": []}, {\"role\": \"tool\", "
		      "\"content\": \"r\"}]",
		      "{\"thinking\": true}", BOS "a" EOS U TR("r") A "<think>");
}

static void test_tasks_and_wo_eos(void)
{
	/* a task on the last user turn: its token; "action" after the assistant's prompt */
	expect_prompt("query task", "[{\"role\": \"user\", \"content\": \"q\", \"task\": \"query\"}]", NULL,
		      BOS U "q<｜query｜>");
	expect_prompt("action task, thinking", "[{\"role\": \"user\", \"content\": \"q\", \"task\": \"action\"}]",
		      "{\"thinking\": true}", BOS U "q" A "<think><｜action｜>");
	/* the task's answer has no thinking; a title after an assistant's EOS */
	expect_prompt(
		"title task",
		"[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\", \"task\": "
		"\"title\"}, {\"role\": \"assistant\", \"content\": \"T\"}]",
		"{\"thinking\": true}", BOS U "q" A "<think></think>a" EOS "<｜title｜>T" EOS);
	/* a user message with a task is not merged into the turn before; one after it is */
	expect_prompt(
		"task stops a merge",
		"[{\"role\": \"user\", \"content\": \"a\", \"task\": \"domain\"}, {\"role\": \"user\", \"content\": "
		"\"b\"}]",
		NULL, BOS U "a" U "b" A "</think>");
	expect_prompt("task of the later message lost in a merge",
		      "[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": \"b\", \"task\": "
		      "\"domain\"}]",
		      NULL, BOS U "a\n\nb" A "</think>");
	expect_prompt("task null", "[{\"role\": \"user\", \"content\": \"q\", \"task\": null}]", NULL,
		      BOS U "q" A "</think>");
	/* wo_eos: an assistant message left open (a prefill) */
	expect_prompt("wo_eos",
		      "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"par\", "
		      "\"wo_eos\": true}]",
		      "{\"thinking\": true}", BOS U "q" A "<think></think>par");
	expect_error("bad task", "[{\"role\": \"user\", \"content\": \"q\", \"task\": \"x\"}]", NULL,
		     "messages[0]: invalid task");
}

#define TOOLS_JSON \
	"[{\"type\": \"function\", \"function\": {\"name\": \"t\", \"parameters\": {\"type\": \"object\"}}}]"
#define SCHEMA "{\"name\": \"t\", \"parameters\": {\"type\": \"object\"}}"
#define TOOLS_END                               \
	"### Available Tool Schemas\n\n" SCHEMA \
	"\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"

/* prompt starts with head, has the tools block, and ends with tail */
static void expect_tools(const char *what, const char *messages, const char *kwargs, const char *head,
			 const char *tail)
{
	struct err e = {{0}};
	char *p = render(messages, kwargs, &e);
	const char *block = "## Tools\n\nYou have access to a set of tools to help answer the user's question.";
	EXPECTF(p && !strncmp(p, head, strlen(head)) && !strncmp(p + strlen(head), block, strlen(block)) &&
			strlen(p) >= strlen(tail) && !strcmp(p + strlen(p) - strlen(tail), tail),
		"%s: %s", what, p ? p : e.msg);
	free(p);
}

static void test_tools(void)
{
	const char *kw = "{\"tools\": " TOOLS_JSON ", \"thinking\": true}";
	expect_tools("on the system message",
		     "[{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"q\"}]", kw,
		     BOS "S\n\n", TOOLS_END U "q" A "<think>");
	expect_tools("on an empty system message", "[{\"role\": \"user\", \"content\": \"q\"}]", kw, BOS "\n\n",
		     TOOLS_END U "q" A "<think>");
	expect_tools("on the developer message", "[{\"role\": \"developer\", \"content\": \"d\"}]", kw, BOS U "d\n\n",
		     TOOLS_END A "<think>");
	/* tools keep the earlier turns' reasoning, open every user turn's thinking, keep developers */
	expect_tools("tools keep thinking",
		     "[{\"role\": \"developer\", \"content\": \"d\"}, {\"role\": \"assistant\", \"content\": \"x\", "
		     "\"reasoning_content\": \"r\"}, {\"role\": \"user\", \"content\": \"u\"}]",
		     kw, BOS U "d\n\n", TOOLS_END A "<think>r</think>x" EOS U "u" A "<think>");
	expect_prompt("empty tools list", "[{\"role\": \"user\", \"content\": \"q\"}]", "{\"tools\": []}",
		      BOS U "q" A "</think>");
	expect_prompt("response_format",
		      "[{\"role\": \"system\", \"content\": \"S\", \"response_format\": {\"a\": [1]}}]", NULL,
		      BOS "S\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
			  "{\"a\": [1]}");
}

static void test_errors(void)
{
	expect_error("no role", "[{\"content\": \"x\"}]", NULL, "deepseek_v4 prompt: messages[0] has no role");
	expect_error("developer without content", "[{\"role\": \"developer\", \"content\": \"\"}]", NULL,
		     "messages[0]: a developer message needs content");
	expect_error("arguments not an object",
		     "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": "
		     "\"[1]\"}}]}]",
		     NULL, "messages[0].tool_calls[0].function.arguments must be a JSON object");
	expect_error("call without a name",
		     "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"arguments\": \"{}\"}}]}]", NULL,
		     "messages[0].tool_calls[0] has no function.name");
	expect_error("tool_calls not a list", "[{\"role\": \"assistant\", \"tool_calls\": {\"a\": 1}}]", NULL,
		     "messages[0].tool_calls must be a list");
	expect_error("tools not a list", "[{\"role\": \"user\", \"content\": \"q\"}]", "{\"tools\": 3}",
		     "tools must be a list");
	/* the request's own indices, with a system message put in front for the tools */
	expect_error("index with tools", "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"bot\"}]",
		     "{\"tools\": " TOOLS_JSON "}", "messages[1]: unknown role 'bot'");
}

static void test_dispatch(void)
{
	struct err e = {{0}};
	EXPECT(native() && !strcmp(chat_template_native(native()), "deepseek_v4"));
	char a[] = "/tmp/test_chat_dsv4_a_XXXXXX", b[] = "/tmp/test_chat_dsv4_b_XXXXXX";
	struct chat_template *t = open_for(a, "{\"architectures\": [\"DeepseekV4ForCausalLM\"]}", &e);
	EXPECT(t && !strcmp(chat_template_native(t), "deepseek_v4"));
	chat_template_free(t);
	t = open_for(b, "{\"model_type\": \"deepseek_v3\"}", &e);
	EXPECT(!t);
	/* a template text wins */
	t = NULL;
	EXPECT(chat_template_open("{{ 'x' }}", "/nonexistent", &t, &e) == 0 && t && !chat_template_native(t));
	chat_template_free(t);
}

/* --reasoning-parser deepseek_v4 splits exactly the requests whose prompt the encoder ends inside
 * the thinking */
static void test_reasoning_switch_agrees(void)
{
	static const char *const kw[] = {NULL,
					 "{}",
					 "{\"thinking\": true}",
					 "{\"thinking\": false}",
					 "{\"enable_thinking\": true}",
					 "{\"thinking\": 0, \"enable_thinking\": \"y\"}",
					 "{\"thinking\": true, \"reasoning_effort\": \"none\"}",
					 "{\"thinking\": true, \"reasoning_effort\": \"max\"}",
					 "{\"thinking\": true, \"reasoning_effort\": 3}",
					 "{\"reasoning_effort\": \"high\"}"};
	expect_split_agrees(REASONING_DEEPSEEK_V4, kw, sizeof kw / sizeof kw[0]);
}

static void test_cleanup(void) { chat_template_free(tpl); }

TESTS(T(test_published_examples), T(test_thinking_and_effort), T(test_multi_turn_and_drop),
      T(test_tool_calls_and_results), T(test_tasks_and_wo_eos), T(test_tools), T(test_errors), T(test_dispatch),
      T(test_reasoning_switch_agrees), T(test_cleanup))
