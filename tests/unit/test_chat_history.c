/* The chat history as vLLM hands it to templates (tok/chat_history.h): content format
 * detection on templates (vLLM's rule: a loop over a message's content), the messages'
 * conversion in each format (content, empty tool_calls, tool-call arguments decoded), and
 * GLM-4.6's published template (tests/fixtures/templates/glm-4.6.jinja, which iterates
 * arguments.items()) rendering a history tool call as jinja2 3.1.6 renders vLLM's messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/file.h"
#include "tok/chat_template.h"

static struct chat_template *compile_file(const char *rel)
{
	char *src = NULL;
	struct err e = {{0}};
	struct chat_template *t = NULL;
	if (file_read_all(fixture_path(rel), &src, NULL, &e) < 0 || chat_template_compile(src, &t, &e) < 0)
		harness_fail(__FILE__, __LINE__, "%s: %s", rel, e.msg);
	free(src);
	return t;
}

static enum chat_content_format detect(const char *src)
{
	struct chat_template *t = NULL;
	struct err e = {{0}};
	if (chat_template_compile(src, &t, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "%s: %s", src, e.msg);
		return CHAT_CONTENT_AUTO;
	}
	enum chat_content_format f = chat_template_content_format(t);
	chat_template_free(t);
	return f;
}

static void test_detect(void)
{
	static const struct {
		const char *src;
		enum chat_content_format want;
	} cases[] = {
		{"{% for m in messages %}{{ m.content }}{% endfor %}", CHAT_CONTENT_STRING},
		{"{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}",
		 CHAT_CONTENT_OPENAI},
		{"{% for m in messages %}{% for p in m.content %}{% endfor %}{% endfor %}", CHAT_CONTENT_OPENAI},
		/* through a variable set from messages (a slice, a filter), and filters on the content */
		{"{% set h = messages[1:] %}{% set g = h|list %}{% for m in g %}{% for p in m.content|list %}{% "
		 "endfor %}"
		 "{% endfor %}",
		 CHAT_CONTENT_OPENAI},
		{"{% for m in messages if m.role %}{% if m.content is string %}{% else %}{% for p in m.content %}{% "
		 "endfor "
		 "%}{% endif %}{% endfor %}",
		 CHAT_CONTENT_OPENAI},
		/* inside a macro still counts: the rule reads the whole tree */
		{"{% macro r() %}{% for m in messages %}{% for p in m.content %}{% endfor %}{% endfor %}{% endmacro "
		 "%}",
		 CHAT_CONTENT_OPENAI},
		/* not a loop over messages' items: a macro parameter, an index, another key */
		{"{% macro r(c) %}{% for p in c %}{% endfor %}{% endmacro %}{% for m in messages %}{{ r(m.content) }}"
		 "{% endfor %}",
		 CHAT_CONTENT_STRING},
		{"{% for p in messages[0].content %}{% endfor %}", CHAT_CONTENT_STRING},
		{"{% for m in messages %}{% for t in m.tool_calls %}{% endfor %}{% endfor %}", CHAT_CONTENT_STRING},
		{"{% for m in msgs %}{% for p in m.content %}{% endfor %}{% endfor %}", CHAT_CONTENT_STRING},
		/* vLLM asserts single-name targets and falls back to "string" */
		{"{% for a, m in messages %}{% for p in m.content %}{% endfor %}{% endfor %}", CHAT_CONTENT_STRING},
		{"{% set ns = namespace() %}{% set ns.m = messages %}{% for m in messages %}{% for p in m.content %}"
		 "{% endfor %}{% endfor %}",
		 CHAT_CONTENT_STRING},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		enum chat_content_format f = detect(cases[i].src);
		EXPECTF(f == cases[i].want, "case %zu: %s, want %s", i, chat_content_format_name(f),
			chat_content_format_name(cases[i].want));
	}
	/* the published templates: GLM-4.6 loops over a tool message's content; Kimi K2 only
	 * inside a macro on msg.get('content'), which the rule does not see; DeepSeek never */
	static const struct {
		const char *rel;
		enum chat_content_format want;
	} files[] = {
		{"templates/glm-4.6.jinja", CHAT_CONTENT_OPENAI},
		{"tiny-kimi-k2/chat_template.jinja", CHAT_CONTENT_STRING},
		{"templates/deepseek-v3.jinja", CHAT_CONTENT_STRING},
		{"templates/deepseek-r1.jinja", CHAT_CONTENT_STRING},
		{"templates/deepseek-v2-lite-chat.jinja", CHAT_CONTENT_STRING},
	};
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		struct chat_template *t = compile_file(files[i].rel);
		EXPECTF(t && chat_template_content_format(t) == files[i].want, "%s", files[i].rel);
		chat_template_free(t);
	}
}

static void test_format_names(void)
{
	enum chat_content_format f;
	struct err e = {{0}};
	EXPECT(chat_content_format_parse("openai", &f, &e) == 0 && f == CHAT_CONTENT_OPENAI);
	EXPECT(chat_content_format_parse("auto", &f, &e) == 0 && f == CHAT_CONTENT_AUTO);
	EXPECT(chat_content_format_parse("String", &f, &e) < 0 && strstr(e.msg, "auto, string or openai"));
}

/* messages (JSON text) converted in fmt, dumped compactly with sorted keys */
static char *convert(const char *messages, enum chat_content_format fmt, struct err *e)
{
	json_t *m = json_loads(messages, 0, NULL), *out = NULL;
	char *s = NULL;
	if (chat_history_vllm(m, fmt, false, &out, NULL, e) == 0)
		s = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	char *before = json_dumps(m, JSON_COMPACT);
	json_t *again = json_loads(messages, 0, NULL);
	char *orig = json_dumps(again, JSON_COMPACT);
	EXPECTF(!strcmp(before, orig), "the input was modified: %s", before);
	free(before);
	free(orig);
	json_decref(again);
	json_decref(m);
	json_decref(out);
	return s;
}

static void expect_convert(const char *messages, enum chat_content_format fmt, const char *want)
{
	struct err e = {{0}};
	char *got = convert(messages, fmt, &e);
	EXPECTF(got && !strcmp(got, want), "%s in %s:\n got  %s\n want %s", messages, chat_content_format_name(fmt),
		got ? got : e.msg, want);
	free(got);
}

static void test_content(void)
{
	const char *m = "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},\"b\","
			"{\"type\":\"text\",\"text\":null}]},{\"role\":\"assistant\",\"content\":null},"
			"{\"role\":\"user\"},{\"role\":\"system\",\"content\":\"s\"},"
			"{\"role\":\"tool\",\"content\":[{\"type\":\"text\",\"text\":\"x\"},{\"type\":\"text\","
			"\"text\":\"y\"}]},"
			"{\"role\":\"tool\",\"content\":null}]";
	expect_convert(m, CHAT_CONTENT_STRING,
		       "[{\"content\":\"a\\nb\",\"role\":\"user\"},{\"content\":\"\",\"role\":\"assistant\"},"
		       "{\"content\":\"\",\"role\":\"user\"},{\"content\":\"s\",\"role\":\"system\"},"
		       "{\"content\":\"x\\ny\",\"role\":\"tool\"},{\"content\":\"\",\"role\":\"tool\"}]");
	expect_convert(m, CHAT_CONTENT_OPENAI,
		       "[{\"content\":[{\"text\":\"a\",\"type\":\"text\"},{\"text\":\"b\",\"type\":\"text\"}],"
		       "\"role\":\"user\"},{\"content\":[],\"role\":\"assistant\"},{\"content\":[],\"role\":\"user\"},"
		       "{\"content\":[{\"text\":\"s\",\"type\":\"text\"}],\"role\":\"system\"},"
		       "{\"content\":\"x\\ny\",\"role\":\"tool\"},{\"content\":\"\",\"role\":\"tool\"}]");
	struct err e = {{0}};
	char *got = convert("[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]",
			    CHAT_CONTENT_STRING, &e);
	EXPECTF(!got && strstr(e.msg, "messages[0].content[0]: only text"), "%s", got ? got : e.msg);
	free(got);
	got = convert("[{\"role\":\"user\",\"content\":5}]", CHAT_CONTENT_STRING, &e);
	EXPECTF(!got && strstr(e.msg, "messages[0].content"), "%s", got ? got : e.msg);
	free(got);
	got = convert("[1]", CHAT_CONTENT_STRING, &e);
	EXPECTF(!got && strstr(e.msg, "messages[0] must be an object"), "%s", got ? got : e.msg);
	free(got);
}

static void test_tool_arguments(void)
{
#define CALL(args) "{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":" args "}}"
#define WANT(args) "{\"function\":{\"arguments\":" args ",\"name\":\"f\"},\"id\":\"c\",\"type\":\"function\"}"
	static const struct {
		const char *given, *want;
	} cases[] = {
		{"\"{\\\"b\\\": 1, \\\"a\\\": {\\\"x\\\": [true, null]}}\"", "{\"a\":{\"x\":[true,null]},\"b\":1}"},
		{"\"  {\\\"a\\\" : \\\"\\\\u00e9\\\"} \"", "{\"a\":\"é\"}"},
		{"\"[1, 2]\"", "[1,2]"},             /* kept whatever JSON it holds */
		{"\"\\\"s\\\"\"", "\"s\""},          /* a JSON string */
		{"\"{\\\"a\\\": \\\"trunc\"", "{}"}, /* not JSON: vLLM's {} */
		{"\"\"", "{}"},
		{"null", "{}"},
		{"7", "{}"},
		{"{\"k\":1}", "{\"k\":1}"}, /* already decoded */
		{"[\"v\"]", "[\"v\"]"},
	};
	char in[512], want[512];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(in, sizeof in, "[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[" CALL("%s") "]}]",
			 cases[i].given);
		snprintf(want, sizeof want,
			 "[{\"content\":\"\",\"role\":\"assistant\",\"tool_calls\":[" WANT("%s") "]}]", cases[i].want);
		expect_convert(in, CHAT_CONTENT_STRING, want);
	}
	/* an empty tool_calls list is dropped (the plain assistant path); other roles' are kept */
	expect_convert(
		"[{\"role\":\"assistant\",\"content\":\"x\",\"tool_calls\":[]},{\"role\":\"user\",\"content\":"
		"\"u\",\"tool_calls\":[" CALL("\"{}\"") "]}]",
		CHAT_CONTENT_STRING,
		"[{\"content\":\"x\",\"role\":\"assistant\"},{\"content\":\"u\",\"role\":\"user\",\"tool_calls\":["
		"{\"function\":{\"arguments\":\"{}\",\"name\":\"f\"},\"id\":\"c\",\"type\":\"function\"}]}]");
#undef CALL
#undef WANT
}

/* GLM-4.6's template on a history tool call: arguments key by key, as jinja2 renders vLLM's
 * messages (tests/e2e/chat_template_oracle.py --vllm auto); as transformers passes them (a
 * JSON string), the template cannot iterate them */
static void test_glm_history(void)
{
	struct chat_template *t = compile_file("templates/glm-4.6.jinja");
	json_t *m = json_loads("[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":null,"
			       "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":"
			       "\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": [3, "
			       "\\\"x\\\"]}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"rain\"}]",
			       0, NULL);
	char *out = NULL;
	struct err e = {{0}};
	EXPECTF(chat_template_render_vllm(t, m, CHAT_CONTENT_AUTO, true, NULL, NULL, NULL, &out, &e) == 0, "%s",
		e.msg);
	const char *want = "[gMASK]<sop><|user|>\nHi<|assistant|>\n<think></think>\n<tool_call>get_weather\n<arg_key>"
			   "city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>[3, "
			   "\"x\"]</arg_value>\n</tool_call><|observation|>\n<tool_response>\nrain\n</tool_response><|"
			   "assistant|>";
	EXPECTF(out && !strcmp(out, want), "got [%s]", out ? out : "");
	free(out);
	out = NULL;
	EXPECT(chat_template_render(t, m, true, NULL, NULL, NULL, &out, &e) < 0 && strstr(e.msg, "items"));
	free(out);
	json_decref(m);
	chat_template_free(t);
}

TESTS(T(test_detect), T(test_format_names), T(test_content), T(test_tool_arguments), T(test_glm_history))
