/* DeepSeek tool-call parsers (src/server/parsers/tool_calls.c): deepseek_v3, deepseek_v31,
 * deepseek_v32 and deepseek_v4 (DSML) on whole outputs, and the streaming split cut into three
 * pieces at every pair of positions, which must give the same content and calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/parsers/tool_calls.h"

#define CB "<｜tool▁calls▁begin｜>"
#define C1 "<｜tool▁call▁begin｜>"
#define CE "<｜tool▁call▁end｜>"
#define CS "<｜tool▁calls▁end｜>"
#define SEP "<｜tool▁sep｜>"

#define DS "｜DSML｜"
#define FC "<" DS "function_calls>\n"
#define FCE "</" DS "function_calls>"
#define TC "<" DS "tool_calls>\n"
#define TCE "</" DS "tool_calls>"
#define INV(name) "<" DS "invoke name=\"" name "\">\n"
#define INVE "</" DS "invoke>\n"
#define PAR(name, str, v) "<" DS "parameter name=\"" name "\" string=\"" str "\">" v "</" DS "parameter>\n"

struct tcase {
	int parser;
	const char *out, *content; /* the content the split leaves */
	int n_calls;
	const char *name0, *args0, *name1, *args1;
};

static const struct tcase cases[] = {
	{TOOL_PARSER_DEEPSEEK_V3,
	 "Let me check." CB C1 "function" SEP "get_weather\n```json\n{\"city\": \"Paris\"}\n```" CE CS,
	 "Let me check.", 1, "get_weather", "{\"city\": \"Paris\"}", NULL, NULL},
	{TOOL_PARSER_DEEPSEEK_V3,
	 CB C1 "function" SEP "a\n```json\n{}\n```" CE "\n" C1 "function" SEP
	       "b\n```json\n{\n  \"x\": [1, 2]\n}\n```" CE CS,
	 "", 2, "a", "{}", "b", "{\n  \"x\": [1, 2]\n}"},
	{TOOL_PARSER_DEEPSEEK_V3, "no tools here", "no tools here", 0, NULL, NULL, NULL, NULL},
	{TOOL_PARSER_DEEPSEEK_V3, "x" CB C1 "function" SEP "broken json fence" CE CS, /* nothing parses: all content */
	 "x" CB C1 "function" SEP "broken json fence" CE CS, 0, NULL, NULL, NULL, NULL},
	{TOOL_PARSER_DEEPSEEK_V3, "cut" CB C1 "function" SEP "a\n```json\n{\"q\"", /* cut by max_tokens */
	 "cut" CB C1 "function" SEP "a\n```json\n{\"q\"", 0, NULL, NULL, NULL, NULL},
	{TOOL_PARSER_DEEPSEEK_V3,
	 CB C1 "function" SEP "bad\n```json\n{}\n```" CE C1 "function" SEP "ok\n```json\n[]\n```" CE, "", 2, "bad",
	 "{}", "ok", "[]"},
	{TOOL_PARSER_DEEPSEEK_V3, "<｜tool▁calls▁beg", "<｜tool▁calls▁beg", 0, NULL, NULL, NULL, NULL},
	{TOOL_PARSER_DEEPSEEK_V31, "ok" CB C1 "search" SEP "{\"q\": \"mla\"}" CE CS, "ok", 1, "search",
	 "{\"q\": \"mla\"}", NULL, NULL},
	{TOOL_PARSER_DEEPSEEK_V31, CB C1 SEP "{}" CE CS, CB C1 SEP "{}" CE CS, 0, NULL, NULL, NULL,
	 NULL}, /* no name */
	/* deepseek_v32 (DSML): the encoder's own shape */
	{TOOL_PARSER_DEEPSEEK_V32,
	 "Let me check.\n\n" FC INV("get_weather") PAR("location", "true", "杭州") PAR("date", "true", "2024-01-16")
		 INVE FCE,
	 "Let me check.", 1, "get_weather", "{\"location\": \"杭州\", \"date\": \"2024-01-16\"}", NULL, NULL},
	/* values of every type; an invoke without parameters; thinking already split off */
	{TOOL_PARSER_DEEPSEEK_V32,
	 "\n\n" FC INV("f") PAR("n", "false", "3") PAR("x", "false", "1.50") PAR("l", "false", "[1,2]")
		 PAR("o", "false", "{\"a\":null}") PAR("b", "false", "true") PAR("s", "true", "x \"q\"\n")
			 PAR("t", "true", "12") PAR("w", "false", "not json") INVE INV("g") "\n" INVE FCE,
	 "", 2, "f",
	 "{\"n\": 3, \"x\": 1.5, \"l\": [1, 2], \"o\": {\"a\": null}, \"b\": true, \"s\": \"x \\\"q\\\"\\n\", \"t\": "
	 "\"12\", "
	 "\"w\": \"not json\"}",
	 "g", "{}"},
	{TOOL_PARSER_DEEPSEEK_V32, "no tools here", "no tools here", 0, NULL, NULL, NULL, NULL},
	/* cut by max_tokens inside the first invoke: nothing parses, all content */
	{TOOL_PARSER_DEEPSEEK_V32, "x\n\n" FC INV("a") "<" DS "parameter name=\"q\" string=\"true\">ab",
	 "x\n\n" FC INV("a") "<" DS "parameter name=\"q\" string=\"true\">ab", 0, NULL, NULL, NULL, NULL},
	/* the closing function_calls tag is not needed; a repeated parameter keeps its place, last value */
	{TOOL_PARSER_DEEPSEEK_V32,
	 "x" FC INV("a") PAR("p", "true", "1") PAR("q", "true", "2") PAR("p", "false", "3") INVE, "x", 1, "a",
	 "{\"p\": 3, \"q\": \"2\"}", NULL, NULL},
	/* only one "\n\n" separates content and calls */
	{TOOL_PARSER_DEEPSEEK_V32, "x\n\n\n" FC INV("a") INVE FCE, "x\n", 1, "a", "{}", NULL, NULL},
	/* a malformed invoke (no quotes) and a malformed parameter (string="yes") are skipped;
	 * whitespace inside tags as vLLM's patterns allow */
	{TOOL_PARSER_DEEPSEEK_V32,
	 FC "<" DS "invoke name=bad>\n" INVE "<" DS "invoke\n name=\"ok\" >\n<" DS
	    "parameter name=\"k\" string=\"yes\">1</" DS "parameter>\n<" DS
	    "parameter  name=\"v\"\tstring=\"false\" >[]</" DS "parameter>\n" INVE FCE,
	 "", 1, "ok", "{\"v\": []}", NULL, NULL},
	/* no whole invoke: all content */
	{TOOL_PARSER_DEEPSEEK_V32, "a\n\n" FC FCE, "a\n\n" FC FCE, 0, NULL, NULL, NULL, NULL},
	{TOOL_PARSER_DEEPSEEK_V32, "a\n\n<" DS "func", "a\n\n<" DS "func", 0, NULL, NULL, NULL, NULL},
	{TOOL_PARSER_DEEPSEEK_V32, "a\n\nb <" DS "x", "a\n\nb <" DS "x", 0, NULL, NULL, NULL, NULL},
	/* deepseek_v4: the same DSML inside <｜DSML｜tool_calls> */
	{TOOL_PARSER_DEEPSEEK_V4,
	 "Let me check.\n\n" TC INV("get_weather") PAR("location", "true", "杭州") PAR("unit", "true", "celsius")
		 INVE TCE,
	 "Let me check.", 1, "get_weather", "{\"location\": \"杭州\", \"unit\": \"celsius\"}", NULL, NULL},
	{TOOL_PARSER_DEEPSEEK_V4,
	 TC INV("f") PAR("n", "false", "1.50") PAR("s", "true", "x \"q\"\n") INVE INV("g") INVE TCE, "", 2, "f",
	 "{\"n\": 1.5, \"s\": \"x \\\"q\\\"\\n\"}", "g", "{}"},
	{TOOL_PARSER_DEEPSEEK_V4, "x\n\n" TC INV("a") "<" DS "parameter name=\"q\" string=\"true\">ab",
	 "x\n\n" TC INV("a") "<" DS "parameter name=\"q\" string=\"true\">ab", 0, NULL, NULL, NULL, NULL},
	{TOOL_PARSER_DEEPSEEK_V4, "a\n\n<" DS "tool", "a\n\n<" DS "tool", 0, NULL, NULL, NULL, NULL},
	/* V3.2's block is not V4's, nor V4's V3.2's */
	{TOOL_PARSER_DEEPSEEK_V4, "a\n\n" FC INV("a") INVE FCE, "a\n\n" FC INV("a") INVE FCE, 0, NULL, NULL, NULL,
	 NULL},
	{TOOL_PARSER_DEEPSEEK_V32, "a\n\n" TC INV("a") INVE TCE, "a\n\n" TC INV("a") INVE TCE, 0, NULL, NULL, NULL,
	 NULL},
	/* the V3 markers mean nothing to it */
	{TOOL_PARSER_DEEPSEEK_V32, "ok" CB C1 "search" SEP "{}" CE CS, "ok" CB C1 "search" SEP "{}" CE CS, 0, NULL,
	 NULL, NULL, NULL},
};

static int check_calls(const struct tcase *t, const json_t *calls, char *why, size_t cap)
{
	int n = calls ? (int)json_array_size(calls) : 0;
	if (n != t->n_calls)
		return snprintf(why, cap, "%d calls, want %d", n, t->n_calls), 1;
	for (int i = 0; i < n; i++) {
		const json_t *c = json_array_get(calls, (size_t)i), *f = json_object_get(c, "function");
		const char *name = json_string_value(json_object_get(f, "name"));
		const char *args = json_string_value(json_object_get(f, "arguments"));
		const char *id = json_string_value(json_object_get(c, "id"));
		const char *type = json_string_value(json_object_get(c, "type"));
		if (!name || !args || !id || strncmp(id, "chatcmpl-tool-", 14) || !type || strcmp(type, "function") ||
		    strcmp(name, i ? t->name1 : t->name0) || strcmp(args, i ? t->args1 : t->args0))
			return snprintf(why, cap, "call %d: %s(%s)", i, name ? name : "?", args ? args : "?"), 1;
	}
	return 0;
}

static void test_parse_whole(void)
{
	char why[256];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct tcase *t = &cases[i];
		json_t *calls = NULL;
		size_t clen;
		EXPECT(tool_calls_parse(t->parser, t->out, strlen(t->out), &calls, &clen) == 0);
		size_t want = t->n_calls ? strlen(t->content) : strlen(t->out);
		EXPECTF(clen == want && !check_calls(t, calls, why, sizeof why), "case %zu: content %zu of %zu; %s", i,
			clen, want, why);
		json_decref(calls);
	}
}

static void test_split_every_cut(void)
{
	char why[256] = "";
	for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
		const struct tcase *t = &cases[ci];
		size_t n = strlen(t->out);
		int bad = 0;
		for (size_t i = 0; i <= n && !bad; i++)
			for (size_t j = i; j <= n && !bad; j++) {
				struct tool_split s = {0};
				struct strbuf content = {0};
				json_t *calls = NULL;
				size_t cut[4] = {0, i, j, n};
				for (int k = 0; k < 3 && !bad; k++) {
					json_decref(calls);
					bad = tool_split_feed(&s, t->parser, t->out + cut[k], cut[k + 1] - cut[k],
							      k == 2, &content, &calls) < 0;
				}
				bad = bad || content.n != strlen(t->content) ||
				      memcmp(content.p ? content.p : "", t->content, content.n) ||
				      check_calls(t, calls, why, sizeof why);
				EXPECTF(!bad, "case %zu cut at %zu, %zu: content '%.*s'; %s", ci, i, j, (int)content.n,
					content.p ? content.p : "", why);
				json_decref(calls);
				strbuf_fini(&content);
				tool_split_fini(&s);
			}
	}
}

static void test_parser_names(void)
{
	EXPECT(tool_parser_from_name("deepseek_v3") == TOOL_PARSER_DEEPSEEK_V3);
	EXPECT(tool_parser_from_name("deepseek_v31") == TOOL_PARSER_DEEPSEEK_V31);
	EXPECT(tool_parser_from_name("deepseek_v32") == TOOL_PARSER_DEEPSEEK_V32);
	EXPECT(tool_parser_from_name("deepseek_v4") == TOOL_PARSER_DEEPSEEK_V4);
	EXPECT(tool_parser_from_name("hermes") == -1);
}

TESTS(T(test_parse_whole), T(test_split_every_cut), T(test_parser_names))
