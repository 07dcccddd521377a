/* The relatives' parsers (src/server/parsers/): Kimi K2's and GLM-4.7/5's tool calls
 * (kimi_k2, glm47) and reasoning (kimi_k2, glm45). Each output is parsed whole and streamed cut
 * into three pieces at every pair of positions; both must give the content and calls written
 * here (what vLLM's parsers give for the whole output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/parsers/pyliteral.h"
#include "server/parsers/reasoning.h"
#include "server/parsers/tool_calls.h"

#define KS "<|tool_calls_section_begin|>"
#define KE "<|tool_calls_section_end|>"
#define KB "<|tool_call_begin|>"
#define KA "<|tool_call_argument_begin|>"
#define KC "<|tool_call_end|>"
#define K_CALL(id, args) KB id KA args KC

#define GB "<tool_call>"
#define GE "</tool_call>"
#define ARG(k, v) "<arg_key>" k "</arg_key><arg_value>" v "</arg_value>"

/* the request's tools: get_weather's city is a string, its days an integer */
static const char TOOLS[] = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
			    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, "
			    "\"days\": {\"type\": \"integer\"}, \"note\": {\"type\": [\"string\", \"null\"]}}}}}]";

struct tcase {
	int parser;
	const char *out, *content; /* the content the split leaves */
	int n_calls;
	const char *id0, *name0, *args0, *name1, *args1; /* id0 NULL: a random chatcmpl-tool- id */
};

static const struct tcase cases[] = {
	/* kimi_k2: the id as written, the name from it, the arguments as written */
	{TOOL_PARSER_KIMI_K2, "Let me check." KS K_CALL("functions.get_weather:0", "{\"city\": \"Paris\"}") KE,
	 "Let me check.", 1, "functions.get_weather:0", "get_weather", "{\"city\": \"Paris\"}", NULL, NULL},
	{TOOL_PARSER_KIMI_K2,
	 KS K_CALL("functions.a:0", "{}") "\n" K_CALL(" functions.b:1\n", "\n {\"x\": [1, 2]}\n ") KE, "", 2,
	 "functions.a:0", "a", "{}", "b", "{\"x\": [1, 2]}"},
	{TOOL_PARSER_KIMI_K2, KS K_CALL("search:3", "{\"q\": 1}") KE, "", 1, "search:3", "search", "{\"q\": 1}", NULL,
	 NULL},
	/* a dotted namespace: the name is after the last "." */
	{TOOL_PARSER_KIMI_K2, KS K_CALL("functions.ns.tool:0", "not json") KE, "", 1, "functions.ns.tool:0", "tool",
	 "not json", NULL, NULL},
	{TOOL_PARSER_KIMI_K2, "no tools here", "no tools here", 0, NULL, NULL, NULL, NULL, NULL},
	/* malformed: no index, no argument tag, cut by max_tokens, a "<" in the id: all content */
	{TOOL_PARSER_KIMI_K2, "x" KS K_CALL("functions.a", "{}") KE, "x" KS K_CALL("functions.a", "{}") KE, 0, NULL,
	 NULL, NULL, NULL, NULL},
	{TOOL_PARSER_KIMI_K2, "x" KS KB "functions.a:0{}" KC KE, "x" KS KB "functions.a:0{}" KC KE, 0, NULL, NULL,
	 NULL, NULL, NULL},
	{TOOL_PARSER_KIMI_K2, "cut" KS KB "functions.a:0" KA "{\"q\"", "cut" KS KB "functions.a:0" KA "{\"q\"", 0,
	 NULL, NULL, NULL, NULL, NULL},
	{TOOL_PARSER_KIMI_K2, KS K_CALL("f<x:0", "{}") KE, KS K_CALL("f<x:0", "{}") KE, 0, NULL, NULL, NULL, NULL,
	 NULL},
	/* an unclosed call followed by a whole one: the whole one is the call */
	{TOOL_PARSER_KIMI_K2, "a" KS KB "functions.x:0" KA "{" K_CALL("functions.y:1", "{}") KE, "a", 1,
	 "functions.y:1", "y", "{}", NULL, NULL},
	{TOOL_PARSER_KIMI_K2, "<|tool_calls_sec", "<|tool_calls_sec", 0, NULL, NULL, NULL, NULL, NULL},
	/* glm47: values typed from the schema */
	{TOOL_PARSER_GLM47, "Checking." GB "get_weather" ARG("city", " 42 ") ARG("days", " 3 ") GE, "Checking.", 1,
	 NULL, "get_weather", "{\"city\": \" 42 \", \"days\": 3}", NULL, NULL},
	{TOOL_PARSER_GLM47,
	 GB "get_weather\n" ARG("city", "Paris") "\n" ARG("note", "null") "\n" GE "\n" GB "other" GE, "", 2, NULL,
	 "get_weather", "{\"city\": \"Paris\", \"note\": null}", "other", "{}"},
	/* values that are not JSON: Python literals, else strings; an unknown tool: no types */
	{TOOL_PARSER_GLM47,
	 GB "t" ARG("a", "True") ARG("b", "{'k': (1, 2.5), 3: None}") ARG("c", "hello world") ARG("d", "[1,2]")
		 ARG("e", "'it''s'") GE,
	 "", 1, NULL, "t",
	 "{\"a\": true, \"b\": {\"k\": [1, 2.5], \"3\": null}, \"c\": \"hello world\", \"d\": [1, 2], \"e\": \"its\"}",
	 NULL, NULL},
	/* whitespace around the key and between the tags; a repeated key keeps the last value */
	{TOOL_PARSER_GLM47,
	 GB " f \n<arg_key> k </arg_key>\n<arg_value>1</arg_value><arg_key>k</arg_key> <arg_value>2</arg_value>" GE,
	 "", 1, NULL, "f", "{\"k\": 2}", NULL, NULL},
	{TOOL_PARSER_GLM47, "no tools here", "no tools here", 0, NULL, NULL, NULL, NULL, NULL},
	/* content of only whitespace before the calls is none; whitespace before text is content */
	{TOOL_PARSER_GLM47, "\n \n" GB "f" GE, "", 1, NULL, "f", "{}", NULL, NULL},
	{TOOL_PARSER_GLM47, "\n a\n" GB "f" GE, "\n a\n", 1, NULL, "f", "{}", NULL, NULL},
	{TOOL_PARSER_GLM47, "\n \n", "\n \n", 0, NULL, NULL, NULL, NULL, NULL},
	{TOOL_PARSER_GLM47, "\n" GB "two words" GE, "\n" GB "two words" GE, 0, NULL, NULL, NULL, NULL, NULL},
	/* malformed: a name with a space, cut by max_tokens: all content */
	{TOOL_PARSER_GLM47, "x" GB "two words" GE, "x" GB "two words" GE, 0, NULL, NULL, NULL, NULL, NULL},
	/* no name before the first <arg_key>: vLLM's lazy name runs on to "</tool_call>" */
	{TOOL_PARSER_GLM47, "x" GB ARG("a", "1") GE, "x", 1, NULL, ARG("a", "1"), "{}", NULL, NULL},
	{TOOL_PARSER_GLM47, "cut" GB "f" ARG("a", "1"), "cut" GB "f" ARG("a", "1"), 0, NULL, NULL, NULL, NULL, NULL},
	{TOOL_PARSER_GLM47, "<tool_ca", "<tool_ca", 0, NULL, NULL, NULL, NULL, NULL},
	/* the name runs to the first <arg_key> (vLLM's lazy name), whatever it holds */
	{TOOL_PARSER_GLM47, GB "f<arg_value>x</arg_value>" ARG("b", "\"s\"") GE, "", 1, NULL,
	 "f<arg_value>x</arg_value>", "{\"b\": \"s\"}", NULL, NULL},
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
		bool id_ok = id && (t->parser == TOOL_PARSER_GLM47 ? !strncmp(id, "chatcmpl-tool-", 14)
								   : !i || !strcmp(id, t->id0) || strchr(id, ':'));
		if (i == 0 && t->id0 && (!id || strcmp(id, t->id0)))
			id_ok = false;
		if (!name || !args || !id_ok || !type || strcmp(type, "function") ||
		    strcmp(name, i ? t->name1 : t->name0) || strcmp(args, i ? t->args1 : t->args0))
			return snprintf(why, cap, "call %d: %s %s(%s)", i, id ? id : "?", name ? name : "?",
					args ? args : "?"),
			       1;
	}
	return 0;
}

static void test_tool_calls_whole(void)
{
	char why[512];
	json_t *tools = json_loads(TOOLS, 0, NULL);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct tcase *t = &cases[i];
		json_t *calls = NULL;
		size_t clen;
		EXPECT(tool_calls_parse_typed(t->parser, tools, t->out, strlen(t->out), &calls, &clen) == 0);
		size_t want = t->n_calls ? strlen(t->content) : strlen(t->out);
		EXPECTF(clen == want && !check_calls(t, calls, why, sizeof why), "case %zu: content %zu of %zu; %s", i,
			clen, want, why);
		json_decref(calls);
	}
	json_decref(tools);
}

static void test_tool_calls_every_cut(void)
{
	char why[512] = "";
	json_t *tools = json_loads(TOOLS, 0, NULL);
	for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
		const struct tcase *t = &cases[ci];
		size_t n = strlen(t->out);
		int bad = 0;
		for (size_t i = 0; i <= n && !bad; i++)
			for (size_t j = i; j <= n && !bad; j++) {
				struct tool_split s = {.tools = tools};
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
	json_decref(tools);
}

struct rcase {
	const char *out, *reasoning, *content; /* content NULL: none */
};

/* kimi_k2: "</think>" or the tool-call section, whichever comes first, ends the reasoning */
static const struct rcase kimi_cases[] = {
	{"<think>weigh it</think>Yes.", "weigh it", "Yes."},
	{"weigh it</think>Yes.", "weigh it", "Yes."},
	{"weigh it" KS K_CALL("functions.a:0", "{}") KE, "weigh it", KS K_CALL("functions.a:0", "{}") KE},
	{"r" KS "x</think>y", "r", KS "x</think>y"},
	{"r</think>c" KS "x", "r", "c" KS "x"},
	{"no end", "no end", NULL},
	{"r<|tool_calls_sec", "r<|tool_calls_sec", NULL},
	{"r<" KS, "r<", KS},
};

/* glm45: deepseek_r1's split */
static const struct rcase glm_cases[] = {
	{"<think>weigh it</think>Yes.", "weigh it", "Yes."},
	{"weigh it</think>" GB "f" GE, "weigh it", GB "f" GE},
	{"r" KS "x", "r" KS "x", NULL},
	{"no end", "no end", NULL},
};

static void reasoning_every_cut(const struct rcase *list, size_t n_cases, bool kimi)
{
	for (size_t t = 0; t < n_cases; t++) {
		const struct rcase *w = &list[t];
		size_t n = strlen(w->out);
		int bad = 0;
		for (size_t i = 0; i <= n && !bad; i++)
			for (size_t j = i; j <= n && !bad; j++) {
				struct reasoning_split s = {.kimi = kimi};
				struct strbuf r = {0}, c = {0};
				size_t cut[4] = {0, i, j, n};
				for (int k = 0; k < 3 && !bad; k++)
					bad = reasoning_feed(&s, w->out + cut[k], cut[k + 1] - cut[k], k == 2, &r,
							     &c) < 0;
				bad = bad || r.n != strlen(w->reasoning) || (r.n && memcmp(r.p, w->reasoning, r.n)) ||
				      (w->content ? c.n != strlen(w->content) || memcmp(c.p, w->content, c.n)
						  : c.n != 0);
				EXPECTF(!bad, "'%s' cut at %zu, %zu: reasoning '%.*s', content '%.*s'", w->out, i, j,
					(int)r.n, r.p ? r.p : "", (int)c.n, c.p ? c.p : "");
				strbuf_fini(&r);
				strbuf_fini(&c);
			}
	}
}

static void test_reasoning_every_cut(void)
{
	reasoning_every_cut(kimi_cases, sizeof kimi_cases / sizeof kimi_cases[0], true);
	reasoning_every_cut(glm_cases, sizeof glm_cases / sizeof glm_cases[0], false);
}

/* kimi_k2 thinks unless "thinking" is false; glm45 unless thinking / enable_thinking are given
 * and neither is true */
static void test_reasoning_switch(void)
{
	static const struct {
		const char *kwargs;
		bool kimi, glm;
	} cases[] = {{NULL, true, true},
		     {"{}", true, true},
		     {"{\"thinking\": false}", false, false},
		     {"{\"thinking\": 0}", false, false},
		     {"{\"thinking\": true}", true, true},
		     {"{\"enable_thinking\": false}", true, false},
		     {"{\"enable_thinking\": true, \"thinking\": false}", false, true},
		     {"{\"enable_thinking\": null}", true, false}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *k = cases[i].kwargs ? json_loads(cases[i].kwargs, 0, NULL) : NULL;
		EXPECTF(reasoning_applies(REASONING_KIMI_K2, k) == cases[i].kimi, "kimi %s", cases[i].kwargs);
		EXPECTF(reasoning_applies(REASONING_GLM45, k) == cases[i].glm, "glm %s", cases[i].kwargs);
		json_decref(k);
	}
}

/* ast.literal_eval's values as json.dumps writes them; NULL: not a literal */
static void test_py_literal(void)
{
	static const struct {
		const char *in, *json;
	} cases[] = {{"None", "null"},
		     {"(1,)", "[1]"},
		     {"()", "[]"},
		     {"(1)", "1"},
		     {"-0x10", "-16"},
		     {"1_000", "1000"},
		     {"1e3", "1000.0"},
		     {".5", "0.5"},
		     {"'a\\nb\\x41\\u00e9'", "\"a\\nbAé\""},
		     {"\"q\" 'r'", "\"qr\""},
		     {"{True: 1, None: 2, 1.5: 3}", "{\"true\": 1, \"null\": 2, \"1.5\": 3}"},
		     {"[1, [2, {'a': ()}],]", "[1, [2, {\"a\": []}]]"},
		     {"{1, 2}", NULL},
		     {"b'x'", NULL},
		     {"1j", NULL},
		     {"012", NULL},
		     {"'unterminated", NULL},
		     {"x", NULL},
		     {"[1 2]", NULL},
		     {"1 + 2", NULL},
		     {"{'a' 1}", NULL},
		     {"{,}", NULL}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		bool oom = false;
		json_t *j = py_literal_json(cases[i].in, strlen(cases[i].in), &oom);
		char *got = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER) : NULL;
		json_t *want = cases[i].json ? json_loads(cases[i].json, JSON_DECODE_ANY, NULL) : NULL;
		EXPECTF(!oom && (want ? j && json_equal(j, want) : !j), "%s: got %s", cases[i].in,
			got ? got : "(none)");
		free(got);
		json_decref(j);
		json_decref(want);
	}
}

static void test_parser_names(void)
{
	EXPECT(tool_parser_from_name("kimi_k2") == TOOL_PARSER_KIMI_K2);
	EXPECT(tool_parser_from_name("glm47") == TOOL_PARSER_GLM47);
	EXPECT(tool_parser_from_name("glm45") == -1); /* GLM-4.5's own format is not read */
	EXPECT(reasoning_parser_from_name("kimi_k2") == REASONING_KIMI_K2);
	EXPECT(reasoning_parser_from_name("glm45") == REASONING_GLM45);
}

TESTS(T(test_tool_calls_whole), T(test_tool_calls_every_cut), T(test_reasoning_every_cut), T(test_reasoning_switch),
      T(test_py_literal), T(test_parser_names))
