/* Structured outputs in requests (src/server/openai/structured.c): every request field form becomes
 * a guide grammar (checked by feeding outputs to the byte matcher, src/guide/matcher.c), the
 * refused forms and conflicts are 400s naming the field, forced tool choices ("required",
 * named) build vLLM's grammars; through srv_request_parse (src/server/openai/request.c) the grammar
 * reaches sp.guide and is released by srv_request_fini; and the forced tool-call output
 * becomes message.tool_calls (src/server/parsers/tool_calls.c: tool_calls_forced, tool_forced_feed). */
#include <stdlib.h>
#include <string.h>

#include "guide/matcher.h"
#include "harness.h"
#include "server/openai/errors.h"
#include "server/openai/request.h"
#include "base/pyjson.h"
#include "server/openai/structured.h"
#include "server/parsers/tool_calls.h"

/* ---- helpers ---- */

/* Parses `text` with srv_structured_parse; returns 0 or the error status. The body is kept
 * until the next call (forced_name points into it). */
static int sparse(const char *text, bool chat, struct srv_structured *s, struct api_error *ae)
{
	static json_t *last;
	json_decref(last);
	last = NULL;
	memset(ae, 0, sizeof *ae);
	json_error_t je;
	json_t *body = json_loads(text, 0, &je);
	if (!body) {
		harness_fail(__FILE__, __LINE__, "bad test json (%s): %s", je.text, text);
		memset(s, 0, sizeof *s);
		return -1;
	}
	last = body;
	int rc = srv_structured_parse(body, chat, s, ae);
	if (rc < 0 && !ae->status)
		harness_fail(__FILE__, __LINE__, "%s: -1 without a status", text);
	return rc < 0 ? ae->status : 0;
}

enum { REFUSED = 0, PREFIX = 1, WHOLE = 2 };

/* What the matcher makes of output `out`: a byte refused, a prefix of a valid output, or a
 * whole valid output. */
static int match(const struct guide_grammar *g, const char *out, size_t n)
{
	struct jm_state st;
	jm_init(&st, g);
	if (!jm_feed_bytes(&st, g, (const uint8_t *)out, n))
		return REFUSED;
	return jm_complete(&st, g) ? WHOLE : PREFIX;
}
#define MATCH(g, s) match((g), (s), strlen(s))

static bool accepts(const struct guide_grammar *g, const char *out) { return g && MATCH(g, out) == WHOLE; }
static bool refuses(const struct guide_grammar *g, const char *out) { return g && MATCH(g, out) != WHOLE; }

/* Expects a 400 whose param is `param` ("" = null) and whose message contains `needle`. */
static void expect_400(const char *text, bool chat, const char *param, const char *needle)
{
	struct srv_structured s;
	struct api_error ae;
	int st = sparse(text, chat, &s, &ae);
	EXPECTF(st == 400, "%s: status %d, expected 400", text, st);
	EXPECTF(!s.guide && s.forced == SRV_TOOLS_FREE, "%s: output not left empty", text);
	if (param)
		EXPECTF(!strcmp(ae.param, param), "%s: param '%s', expected '%s' (%s)", text, ae.param, param,
			ae.message);
	if (needle)
		EXPECTF(strstr(ae.message, needle), "%s: message '%s' lacks '%s'", text, ae.message, needle);
	EXPECTF(ae.message[0], "%s: empty message", text);
	srv_structured_fini(&s);
}

#define FN(name, params) "{\"type\":\"function\",\"function\":{\"name\":\"" name "\"" params "}}"
#define F_PARAMS \
	",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}"
#define TOOL_F FN("f", F_PARAMS)
#define TOOL_G FN("g", "")

/* ---- each field form parses to a grammar ---- */

static void test_field_forms(void)
{
	static const struct {
		bool chat;
		const char *body, *what, *good[3], *bad[3];
	} cases[] = {
		{true,
		 "{\"response_format\":{\"type\":\"json_object\"}}",
		 "json_object",
		 {"{\"a\":[1,2,{\"b\":null}]}", "{}", "{\"x\": \"y\"}"},
		 {"[1]", "\"s\"", "{\"a\":}"}},
		{false,
		 "{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":"
		 "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"]}}}}",
		 "json_schema",
		 {"{\"n\":-3}", "{\"n\": 0}", NULL},
		 {"{\"n\":1.5}", "{}", "{\"m\":1}"}},
		{false,
		 "{\"guided_json\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":2},\"maxItems\":2}"
		 "}",
		 "json_schema",
		 {"[\"ab\",\"c\"]", "[]", "[\"\\u00e9\"]"},
		 {"[\"abc\"]", "[\"a\",\"b\",\"c\"]", "[1]"}},
		{true,
		 "{\"guided_json\":\"{\\\"type\\\":\\\"boolean\\\"}\"}",
		 "json_schema",
		 {"true", "false", NULL},
		 {"1", "\"true\"", "null"}},
		{false,
		 "{\"guided_choice\":[\"yes\",\"no\",\"yes sir\"]}",
		 "choice",
		 {"yes", "no", "yes sir"},
		 {"maybe", "\"yes\"", "yes "}},
		{true,
		 "{\"structured_outputs\":{\"json\":{\"enum\":[\"a\",1,[true]]}}}",
		 "json_schema",
		 {"\"a\"", "1", "[true]"},
		 {"\"b\"", "2", "[ true]"}},
		{false,
		 "{\"structured_outputs\":{\"json\":\"{\\\"type\\\":\\\"integer\\\"}\"}}",
		 "json_schema",
		 {"12", "-7", NULL},
		 {"1.0", "\"1\"", "1e3"}},
		{true,
		 "{\"structured_outputs\":{\"choice\":[\"x y\",\"z\"]}}",
		 "choice",
		 {"x y", "z", NULL},
		 {"x", "w", "zz"}},
		{false,
		 "{\"structured_outputs\":{\"json_object\":true}}",
		 "json_object",
		 {"{}", "{\"k\":[1]}", NULL},
		 {"\"s\"", "[]", "1"}},
		{false,
		 "{\"guided_grammar\":\"root ::= (\\\"a\\\" | [0-9]+) \\\"!\\\"?\"}",
		 "grammar",
		 {"a", "42!", "7"},
		 {"b", "a!!", "!"}},
		{true,
		 "{\"structured_outputs\":{\"grammar\":\"root ::= pair (\\\",\\\" pair)*\\npair ::= [a-z] \\\"=\\\" "
		 "[0-9]\"}}",
		 "grammar",
		 {"a=1", "a=1,b=2", NULL},
		 {"a=1,", "a", "A=1"}},
		{true,
		 "{\"guided_json\":{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":1},"
		 "\"b\":{\"type\":\"boolean\"}},\"required\":[\"b\"]}}",
		 "json_schema",
		 {"{\"s\":\"x\",\"b\":true}", "{\"b\":false}", NULL},
		 {"{\"s\":\"\",\"b\":true}", "{\"b\":true,\"s\":\"x\"}", "{\"s\":\"x\"}"}},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct srv_structured s;
		struct api_error ae;
		int st = sparse(cases[i].body, cases[i].chat, &s, &ae);
		EXPECTF(st == 0 && s.guide, "case %zu: status %d, guide %p (%s)", i, st, (void *)s.guide, ae.message);
		if (!s.guide)
			continue;
		EXPECTF(s.forced == SRV_TOOLS_FREE && !s.forced_name, "case %zu: forced %d", i, s.forced);
		EXPECTF(!strcmp(s.guide->what, cases[i].what), "case %zu: what '%s', expected '%s'", i, s.guide->what,
			cases[i].what);
		for (int k = 0; k < 3; k++) {
			if (cases[i].good[k])
				EXPECTF(accepts(s.guide, cases[i].good[k]), "case %zu: '%s' refused", i,
					cases[i].good[k]);
			if (cases[i].bad[k])
				EXPECTF(refuses(s.guide, cases[i].bad[k]), "case %zu: '%s' accepted", i,
					cases[i].bad[k]);
		}
		srv_structured_fini(&s);
		EXPECT(!s.guide);
	}
}

/* Requests without structured output: no grammar, nothing forced. */
static void test_free_output(void)
{
	static const struct {
		bool chat;
		const char *body;
	} cases[] = {
		{true, "{}"},
		{true, "{\"response_format\":{\"type\":\"text\"}}"},
		{false, "{\"response_format\":{\"type\":\"text\"}}"},
		{true,
		 "{\"response_format\":null,\"guided_json\":null,\"guided_choice\":null,\"structured_outputs\":null,"
		 "\"guided_regex\":null,\"guided_grammar\":null,\"tool_choice\":null}"},
		{true, "{\"structured_outputs\":{\"regex\":null,\"json\":null}}"},
		{true, "{\"tools\":[" TOOL_F "],\"tool_choice\":\"auto\"}"},
		{true, "{\"tools\":[" TOOL_F "],\"tool_choice\":\"none\"}"},
		{true, "{\"tools\":[" TOOL_F "]}"},
		/* completions have no tool_choice: it is not looked at */
		{false, "{\"tools\":[" TOOL_F "],\"tool_choice\":\"required\"}"},
		{false, "{\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct srv_structured s;
		struct api_error ae;
		int st = sparse(cases[i].body, cases[i].chat, &s, &ae);
		EXPECTF(st == 0 && !s.guide && s.forced == SRV_TOOLS_FREE,
			"case %zu: status %d, guide %p, forced %d (%s)", i, st, (void *)s.guide, s.forced, ae.message);
		srv_structured_fini(&s);
	}
}

/* json_schema without a schema (OpenAI allows it): any JSON value, still without outer
 * whitespace. */
static void test_json_schema_without_schema(void)
{
	static const char *const bodies[] = {
		"{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"anything\"}}}",
		"{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":null}}}",
		"{\"guided_json\":true}",
	};
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		struct srv_structured s;
		struct api_error ae;
		int st = sparse(bodies[i], i != 2, &s, &ae);
		EXPECTF(st == 0 && s.guide, "case %zu: status %d (%s)", i, st, ae.message);
		if (!s.guide)
			continue;
		static const char *const good[] = {"\"s\"", "[1,{\"a\":null}]", "{\"a\":1}", "null",
						   "12",    "-0.5e3",           "true"};
		for (size_t k = 0; k < sizeof good / sizeof good[0]; k++)
			EXPECTF(accepts(s.guide, good[k]), "case %zu: '%s' refused", i, good[k]);
		static const char *const bad[] = {" 1", "[1,]", "{\"a\"}", "nul", "tru e", "'s'", "01"};
		for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
			EXPECTF(refuses(s.guide, bad[k]), "case %zu: '%s' accepted", i, bad[k]);
		srv_structured_fini(&s);
	}
	expect_400("{\"response_format\":{\"type\":\"json_schema\"}}", true, "response_format", "json_schema");
	expect_400("{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":false}}}", true,
		   "response_format.json_schema.schema", NULL);
	expect_400("{\"response_format\":{\"type\":\"yaml\"}}", true, "response_format", "yaml");
	expect_400("{\"response_format\":{}}", true, "response_format", NULL);
	expect_400("{\"response_format\":\"json_object\"}", false, "response_format", NULL);
}

/* Schemas given as JSON text must be valid JSON; schemas must be objects. */
static void test_bad_schema_values(void)
{
	expect_400("{\"guided_json\":\"{\\\"type\\\": \"}", false, "guided_json", "guided_json");
	expect_400("{\"guided_json\":\"not json\"}", true, "guided_json", "guided_json");
	expect_400("{\"structured_outputs\":{\"json\":\"{\"}}", true, "structured_outputs.json",
		   "structured_outputs.json");
	expect_400("{\"guided_json\":5}", false, "guided_json", "guided_json");
	expect_400("{\"guided_json\":[{\"type\":\"string\"}]}", false, "guided_json", "guided_json");
	expect_400("{\"guided_json\":\"[1]\"}", false, "guided_json", "guided_json");
	expect_400("{\"guided_json\":{\"type\":\"strnig\"}}", false, "guided_json", "strnig");
	expect_400("{\"guided_json\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}}", false, "guided_json",
		   "maxLength");
	expect_400("{\"guided_json\":{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}}", false,
		   "guided_json", "required");
	expect_400("{\"guided_json\":{\"$ref\":\"#/$defs/missing\"}}", false, "guided_json", "#/$defs/missing");
	expect_400("{\"guided_choice\":[]}", false, "guided_choice", NULL);
	expect_400("{\"guided_choice\":\"yes\"}", false, "guided_choice", NULL);
	expect_400("{\"guided_choice\":[\"a\",1]}", false, "guided_choice", "[1]");
	expect_400("{\"guided_choice\":[\"a\",\"\"]}", false, "guided_choice", NULL);
	expect_400("{\"structured_outputs\":\"json\"}", true, "structured_outputs", NULL);
}

/* A keyword outside the subset is refused, never ignored: the message names it and the
 * field. */
static void test_unsupported_keyword(void)
{
	expect_400("{\"guided_json\":{\"type\":\"string\",\"pattern\":\"(a\"}}", false, "guided_json", "pattern");
	expect_400("{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"object\","
		   "\"properties\":{\"age\":{\"type\":\"number\",\"minimum\":1e-30}}}}}}",
		   true, "response_format.json_schema.schema", "properties.age: a bound has more than 18 decimals");
	expect_400("{\"structured_outputs\":{\"json\":{\"type\":\"array\",\"uniqueItems\":true}}}", true,
		   "structured_outputs.json", "uniqueItems: supported when items is an enum");
	expect_400("{\"tools\":[" FN("f",
				     ",\"parameters\":{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\","
				     "\"format\":\"email\",\"not\":{}}}}") "],\"tool_choice\":\"required\"}",
		   true, "tool_choice", "'not'");
	/* and the path to it */
	expect_400("{\"guided_json\":{\"type\":\"object\",\"properties\":{\"deep\":{\"type\":\"string\",\"format\":"
		   "\"date\","
		   "\"not\":{}}}}}",
		   false, "guided_json", "deep");
}

/* Forms outside what is supported are refused (400), not ignored: structural tags, and
 * regexes and grammars outside the syntax */
static void test_refused_forms(void)
{
	expect_400("{\"guided_regex\":\"a(?=b)\"}", false, "guided_regex", "lookaround");
	expect_400("{\"guided_regex\":\"(a\"}", true, "guided_regex", "missing )");
	expect_400("{\"guided_regex\":5}", true, "guided_regex", "string");
	expect_400("{\"guided_grammar\":\"expr ::= expr \\\"+\\\" | \\\"1\\\"\"}", true, "guided_grammar", "root");
	expect_400("{\"guided_grammar\":\"root ::= \\\"x\\\"? root \\\"+\\\" | \\\"1\\\"\"}", true, "guided_grammar",
		   "left recursion behind a part that may match nothing, through rule root");
	expect_400("{\"guided_grammar\":\"start: \\\"a\\\"\\n%declare X\"}", true, "guided_grammar",
		   "%declare (Lark)");
	expect_400("{\"guided_grammar\":[\"root ::= x\"]}", true, "guided_grammar", "string");
	expect_400("{\"structured_outputs\":{\"regex\":\"\\\\1\"}}", false, "structured_outputs.regex",
		   "backreference");
	expect_400("{\"structured_outputs\":{\"grammar\":\"root ::= x\"}}", true, "structured_outputs.grammar",
		   "undefined rule x");
	expect_400("{\"structured_outputs\":{\"structural_tag\":\"{}\"}}", true, "structured_outputs",
		   "structural_tag");
	/* refused even next to a form that is supported */
	expect_400("{\"guided_grammar\":\"root ::= \\\"a\\\"\",\"guided_choice\":[\"a\"]}", false, NULL, "only one");
	expect_400("{\"structured_outputs\":{\"regex\":\"a\",\"json_object\":true}}", false, "structured_outputs",
		   "only one");
}

/* Two kinds of structured output in one request: 400. */
static void test_two_kinds(void)
{
	static const struct {
		bool chat;
		const char *body;
	} cases[] = {
		{true, "{\"response_format\":{\"type\":\"json_object\"},\"guided_json\":{\"type\":\"integer\"}}"},
		{false, "{\"guided_json\":{\"type\":\"integer\"},\"guided_choice\":[\"a\"]}"},
		{false, "{\"guided_choice\":[\"a\"],\"structured_outputs\":{\"choice\":[\"b\"]}}"},
		{true, "{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{}}},"
		       "\"structured_outputs\":{\"json_object\":true}}"},
		{true, "{\"tools\":[" TOOL_F "],\"tool_choice\":\"required\",\"guided_choice\":[\"a\"]}"},
		{true, "{\"tools\":[" TOOL_F "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
		       "\"response_format\":{\"type\":\"json_object\"}}"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		expect_400(cases[i].body, cases[i].chat, NULL, "only one");
	expect_400("{\"structured_outputs\":{\"json\":{},\"choice\":[\"a\"]}}", false, "structured_outputs",
		   "only one");
	expect_400("{\"structured_outputs\":{\"choice\":[\"a\"],\"json_object\":true}}", false, "structured_outputs",
		   "only one");
	/* a forced tool_choice only counts in chat */
	struct srv_structured s;
	struct api_error ae;
	EXPECT_EQ_INT(sparse("{\"tools\":[" TOOL_F "],\"tool_choice\":\"required\",\"guided_choice\":[\"a\"]}", false,
			     &s, &ae),
		      0);
	EXPECT(s.guide && s.forced == SRV_TOOLS_FREE && accepts(s.guide, "a"));
	srv_structured_fini(&s);
}

static void test_tool_choice_errors(void)
{
	expect_400("{\"tool_choice\":\"required\"}", true, "tool_choice", "tools");
	expect_400("{\"tool_choice\":\"required\",\"tools\":[]}", true, "tool_choice", "tools");
	expect_400("{\"tool_choice\":\"required\",\"tools\":null}", true, "tool_choice", "tools");
	expect_400("{\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}}", true, "tool_choice",
		   NULL);
	expect_400("{\"tools\":[" TOOL_F "," TOOL_G
		   "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"h\"}}}",
		   true, "tool_choice", "'h'");
	expect_400("{\"tools\":[" TOOL_F "],\"tool_choice\":{\"type\":\"function\",\"function\":{}}}", true,
		   "tool_choice", NULL);
	expect_400("{\"tools\":[" TOOL_F "],\"tool_choice\":{\"type\":\"function\"}}", true, "tool_choice", NULL);
	expect_400("{\"tools\":[{\"type\":\"function\",\"function\":{\"description\":\"no name\"}}],\"tool_choice\":"
		   "\"required\"}",
		   true, "tools", "tools[0]");
	/* "required" is one matcher alternative per tool: at most SRV_MAX_FORCED_TOOLS */
	for (int n = SRV_MAX_FORCED_TOOLS; n <= SRV_MAX_FORCED_TOOLS + 1; n++) {
		char body[8192];
		int o = snprintf(body, sizeof body, "{\"tool_choice\":\"required\",\"tools\":[");
		for (int i = 0; i < n; i++)
			o += snprintf(body + o, sizeof body - (size_t)o,
				      "%s{\"type\":\"function\",\"function\":{\"name\":\"t%d\"}}", i ? "," : "", i);
		snprintf(body + o, sizeof body - (size_t)o, "]}");
		if (n > SRV_MAX_FORCED_TOOLS) {
			char want[32];
			snprintf(want, sizeof want, "%d", SRV_MAX_FORCED_TOOLS);
			expect_400(body, true, "tool_choice", want);
		} else {
			struct srv_structured s;
			struct api_error ae;
			EXPECTF(sparse(body, true, &s, &ae) == 0 && s.guide && s.forced == SRV_TOOLS_REQUIRED,
				"%d tools: %s", n, ae.message);
			/* every tool is reachable: the first, the last, and a list naming all of them */
			char last[128], all[4096];
			snprintf(last, sizeof last, "[{\"name\":\"t%d\",\"parameters\":{}}]", n - 1);
			int a = snprintf(all, sizeof all, "[");
			for (int i = n - 1; i >= 0; i--)
				a += snprintf(all + a, sizeof all - (size_t)a,
					      "%s{\"name\":\"t%d\",\"parameters\":{}}", i < n - 1 ? "," : "", i);
			snprintf(all + a, sizeof all - (size_t)a, "]");
			EXPECT(accepts(s.guide, "[{\"name\":\"t0\",\"parameters\":{}}]"));
			EXPECTF(accepts(s.guide, last), "%s refused", last);
			EXPECTF(accepts(s.guide, all), "%d tools: a call of each refused", n);
			srv_structured_fini(&s);
		}
	}
	/* a named choice does not build alternatives: any number of tools */
	char body[16384];
	int o = snprintf(body, sizeof body,
			 "{\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"t40\"}},\"tools\":[");
	for (int i = 0; i < 41; i++)
		o += snprintf(body + o, sizeof body - (size_t)o,
			      "%s{\"type\":\"function\",\"function\":{\"name\":\"t%d\"}}", i ? "," : "", i);
	snprintf(body + o, sizeof body - (size_t)o, "]}");
	struct srv_structured s;
	struct api_error ae;
	EXPECTF(sparse(body, true, &s, &ae) == 0 && s.forced == SRV_TOOLS_NAMED && s.forced_name &&
			!strcmp(s.forced_name, "t40"),
		"41 tools, named: %s", ae.message);
	srv_structured_fini(&s);
}

/* tool_choice "required": a JSON array (at least one element) of {"name": one of the tools,
 * "parameters": that tool's parameters}, keys in that order. */
static void test_required_grammar(void)
{
	struct srv_structured s;
	struct api_error ae;
	EXPECT_EQ_INT(sparse("{\"tools\":[" TOOL_F "," TOOL_G "],\"tool_choice\":\"required\"}", true, &s, &ae), 0);
	EXPECTF(s.guide && s.forced == SRV_TOOLS_REQUIRED && !s.forced_name, "%s", ae.message);
	static const char *const good[] = {
		"[{\"name\":\"f\",\"parameters\":{\"a\":1}}]",
		"[{\"name\":\"g\",\"parameters\":{}}]",
		"[{\"name\":\"f\",\"parameters\":{\"a\":-20}},{\"name\":\"g\",\"parameters\":{}},{\"name\":\"f\","
		"\"parameters\":{\"a\":0}}]",
		"[\n  {\"name\": \"f\", \"parameters\": {\"a\": 2}}\n]",
		"[{\"name\": \"g\", \"parameters\": {\"any\": [1, \"x\"]}}]", /* g has no parameters: any object */
	};
	for (size_t k = 0; k < sizeof good / sizeof good[0]; k++)
		EXPECTF(accepts(s.guide, good[k]), "'%s' refused", good[k]);
	static const char *const bad[] = {
		"[{\"name\":\"h\",\"parameters\":{\"a\":1}}]", /* unknown name */
		"[{\"name\":\"ff\",\"parameters\":{\"a\":1}}]",
		"[]",                                   /* at least one call */
		"[{\"name\":\"f\",\"parameters\":{}}]", /* a is required */
		"[{\"name\":\"f\",\"parameters\":{\"a\":\"1\"}}]",
		"[{\"name\":\"f\",\"parameters\":{\"a\":1.5}}]",
		"[{\"name\":\"f\",\"parameters\":{\"a\":1,\"b\":2}}]", /* no other keys */
		"[{\"parameters\":{\"a\":1},\"name\":\"f\"}]",         /* keys in order */
		"[{\"name\":\"f\"}]",
		"{\"name\":\"f\",\"parameters\":{\"a\":1}}", /* not in an array */
		"[{\"name\":\"f\",\"parameters\":{\"a\":1}}] ",
		" [{\"name\":\"f\",\"parameters\":{\"a\":1}}]",
		"[{\"name\":\"f\",\"parameters\":{\"a\":1}},]",
	};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
		EXPECTF(refuses(s.guide, bad[k]), "'%s' accepted", bad[k]);
	/* a cut output is a prefix, not refused */
	EXPECT(s.guide && MATCH(s.guide, "[{\"name\":\"f\",\"param") == PREFIX);
	srv_structured_fini(&s);
}

/* A named function: its arguments object. */
static void test_named_grammar(void)
{
	struct srv_structured s;
	struct api_error ae;
	EXPECT_EQ_INT(sparse("{\"tools\":[" TOOL_G "," TOOL_F "],\"tool_choice\":{\"type\":\"function\",\"function\":"
			     "{\"name\":\"f\"}}}",
			     true, &s, &ae),
		      0);
	EXPECTF(s.guide && s.forced == SRV_TOOLS_NAMED && s.forced_name && !strcmp(s.forced_name, "f"), "%s",
		ae.message);
	static const char *const good[] = {"{\"a\":1}", "{ \"a\": 7 }", "{\n\t\"a\": -12\n}"};
	for (size_t k = 0; k < sizeof good / sizeof good[0]; k++)
		EXPECTF(accepts(s.guide, good[k]), "'%s' refused", good[k]);
	static const char *const bad[] = {"{\"b\":1}",         "{}",
					  "{\"a\":1,\"b\":2}", "[{\"name\":\"f\",\"parameters\":{\"a\":1}}]",
					  "{\"a\":true}",      "1"};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
		EXPECTF(refuses(s.guide, bad[k]), "'%s' accepted", bad[k]);
	srv_structured_fini(&s);
	/* a function without parameters: an object with any keys */
	EXPECT_EQ_INT(sparse("{\"tools\":[" TOOL_G
			     "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}",
			     true, &s, &ae),
		      0);
	EXPECT(accepts(s.guide, "{}") && accepts(s.guide, "{\"x\":[1]}") && refuses(s.guide, "[]"));
	srv_structured_fini(&s);
}

/* The matcher's whitespace rules (guide/matcher.h): none around the top-level value, at most
 * JM_MAX_WS bytes per gap with at most one line break. */
static void test_whitespace(void)
{
	struct srv_structured s;
	struct api_error ae;
	EXPECT_EQ_INT(sparse("{\"response_format\":{\"type\":\"json_object\"}}", true, &s, &ae), 0);
	if (!s.guide)
		return;
	char out[128];
	for (int n = JM_MAX_WS; n <= JM_MAX_WS + 1; n++) {
		snprintf(out, sizeof out, "{\"a\":%*s1}", n, "");
		EXPECTF(MATCH(s.guide, out) == (n <= JM_MAX_WS ? WHOLE : REFUSED), "%d spaces: %d", n,
			MATCH(s.guide, out));
	}
	EXPECT(accepts(s.guide, "{\n  \"a\": [\n    1,\n    2\n  ]\n}"));
	EXPECT(accepts(s.guide, "{\r\n  \"a\": 1\r\n}"));
	EXPECT(MATCH(s.guide, "{\n\n") == REFUSED);
	EXPECT(MATCH(s.guide, "{\"a\":\n \n1}") == REFUSED);
	EXPECT(MATCH(s.guide, " {}") == REFUSED);
	EXPECT(MATCH(s.guide, "\n{}") == REFUSED);
	EXPECT(MATCH(s.guide, "{} ") == REFUSED);
	EXPECT(MATCH(s.guide, "{}\n") == REFUSED);
	/* a string's own spaces are not a gap */
	snprintf(out, sizeof out, "{\"a\":\"%*s\"}", 40, "");
	EXPECT(accepts(s.guide, out));
	srv_structured_fini(&s);
}

/* ---- through srv_request_parse ---- */

static struct sampling_params base;
static struct srv_limits lim = {.vocab_size = 1024, .max_n = 128, .max_prompts = 16};

static int rparse(const char *text, enum srv_api api, struct srv_request *r, struct api_error *ae)
{
	struct sampling_defaults d;
	sampling_defaults_init(&d);
	sampling_params_init(&base, &d);
	static json_t *last;
	json_decref(last);
	last = json_loads(text, 0, NULL);
	if (!last) {
		harness_fail(__FILE__, __LINE__, "bad test json: %s", text);
		memset(r, 0, sizeof *r);
		return -1;
	}
	memset(ae, 0, sizeof *ae);
	return srv_request_parse(last, api, &base, &lim, r, ae, NULL, 0) < 0 ? ae->status : 0;
}

#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"

static void test_request_parse(void)
{
	struct srv_request r;
	struct api_error ae;
	lim.auto_tools = true;
	/* json_schema in chat: sp.guide is the request's grammar, one reference held by it */
	EXPECT_EQ_INT(rparse("{" MSGS ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
			     "{\"type\":\"integer\"}}}}",
			     SRV_API_CHAT, &r, &ae),
		      0);
	EXPECTF(r.sp.guide && r.sp.guide == r.structured.guide, "%s", ae.message);
	if (r.sp.guide) {
		struct guide_grammar *g = guide_ref(r.sp.guide);
		EXPECT_EQ_INT(atomic_load(&g->refs), 2);
		EXPECT(accepts(g, "42") && refuses(g, "\"42\""));
		srv_request_fini(&r);
		EXPECT_EQ_INT(atomic_load(&g->refs), 1); /* fini released the request's reference */
		EXPECT(!r.sp.guide && !r.structured.guide);
		guide_unref(g);
	} else {
		srv_request_fini(&r);
	}
	/* guided_choice in a completion */
	EXPECT_EQ_INT(rparse("{\"prompt\":\"hi\",\"n\":4,\"guided_choice\":[\"red\",\"blue\"]}", SRV_API_COMPLETION,
			     &r, &ae),
		      0);
	EXPECT(r.sp.guide && r.sp.guide == r.structured.guide && accepts(r.sp.guide, "blue") && r.sp.n == 4);
	srv_request_fini(&r);
	/* no structured output: no grammar */
	EXPECT_EQ_INT(rparse("{" MSGS ",\"response_format\":{\"type\":\"text\"}}", SRV_API_CHAT, &r, &ae), 0);
	EXPECT(!r.sp.guide && !r.structured.guide);
	srv_request_fini(&r);
	/* forced tool choices: the calls are the guided output, the model's own format is not
	 * parsed (even with the server's parser on) */
	static const char *const forced[] = {"\"required\"", "{\"type\":\"function\",\"function\":{\"name\":\"f\"}}"};
	for (int i = 0; i < 2; i++) {
		char text[1024];
		snprintf(text, sizeof text, "{" MSGS ",\"tools\":[" TOOL_F "," TOOL_G "],\"tool_choice\":%s}",
			 forced[i]);
		int st = rparse(text, SRV_API_CHAT, &r, &ae);
		EXPECTF(st == 0, "%s: %d %s", forced[i], st, ae.message);
		EXPECTF(!st && !r.parse_tools && r.sp.guide && r.sp.guide == r.structured.guide &&
				r.structured.forced == (i ? SRV_TOOLS_NAMED : SRV_TOOLS_REQUIRED),
			"%s: parse_tools %d, guide %p, forced %d", forced[i], r.parse_tools, (void *)r.sp.guide,
			r.structured.forced);
		if (i)
			EXPECT(r.structured.forced_name && !strcmp(r.structured.forced_name, "f") &&
			       accepts(r.sp.guide, "{\"a\":3}"));
		else
			EXPECT(accepts(r.sp.guide, "[{\"name\":\"f\",\"parameters\":{\"a\":1}}]"));
		srv_request_fini(&r);
	}
	/* tool_choice auto with the server's parser: parsed, not guided */
	EXPECT_EQ_INT(rparse("{" MSGS ",\"tools\":[" TOOL_F "],\"tool_choice\":\"auto\"}", SRV_API_CHAT, &r, &ae), 0);
	EXPECT(r.parse_tools && !r.sp.guide && r.structured.forced == SRV_TOOLS_FREE);
	srv_request_fini(&r);
	/* errors: a 400 from structured outputs leaves the request empty */
	static const struct {
		enum srv_api api;
		const char *body, *param;
	} errs[] = {
		{SRV_API_CHAT, "{" MSGS ",\"guided_regex\":\"a{3,1}\"}", "guided_regex"},
		{SRV_API_COMPLETION, "{\"prompt\":\"p\",\"guided_grammar\":\"g\"}", "guided_grammar"},
		{SRV_API_COMPLETION, "{\"prompt\":\"p\",\"structured_outputs\":{\"regex\":\"[b-a]\"}}",
		 "structured_outputs.regex"},
		{SRV_API_CHAT, "{" MSGS ",\"tool_choice\":\"required\"}", "tool_choice"},
		{SRV_API_CHAT, "{" MSGS ",\"guided_json\":{\"type\":\"string\",\"pattern\":\"\\\\1\"}}",
		 "guided_json"},
		{SRV_API_CHAT, "{" MSGS ",\"guided_json\":{},\"guided_choice\":[\"a\"]}", ""},
		{SRV_API_CHAT, "{" MSGS ",\"tools\":[" TOOL_F "],\"tool_choice\":\"sometimes\"}", "tool_choice"},
	};
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
		int st = rparse(errs[i].body, errs[i].api, &r, &ae);
		EXPECTF(st == 400 && !strcmp(ae.param, errs[i].param), "%s: status %d, param '%s' (%s)", errs[i].body,
			st, ae.param, ae.message);
		EXPECTF(!r.sp.guide && !r.structured.guide && !r.messages, "%s: request not left empty", errs[i].body);
		srv_request_fini(&r);
	}
	lim.auto_tools = false;
}

/* ---- forced tool calls → message.tool_calls ---- */

/* Checks calls against n (name, arguments) pairs; ids "chatcmpl-tool-..." and distinct. */
static void expect_calls(const char *what, const json_t *calls, int n, const char *const *want)
{
	int got = calls ? (int)json_array_size(calls) : -1;
	EXPECTF(got == n, "%s: %d calls, expected %d", what, got, n);
	if (got != n)
		return;
	for (int i = 0; i < n; i++) {
		const json_t *c = json_array_get(calls, (size_t)i), *f = json_object_get(c, "function");
		const char *id = json_string_value(json_object_get(c, "id"));
		const char *type = json_string_value(json_object_get(c, "type"));
		const char *name = json_string_value(json_object_get(f, "name"));
		const char *args = json_string_value(json_object_get(f, "arguments"));
		EXPECTF(id && !strncmp(id, "chatcmpl-tool-", 14) && strlen(id) > 14, "%s: call %d id '%s'", what, i,
			id ? id : "(none)");
		EXPECTF(type && !strcmp(type, "function"), "%s: call %d type", what, i);
		EXPECTF(name && !strcmp(name, want[2 * i]), "%s: call %d name '%s', expected '%s'", what, i,
			name ? name : "(none)", want[2 * i]);
		EXPECTF(args && !strcmp(args, want[2 * i + 1]), "%s: call %d arguments '%s', expected '%s'", what, i,
			args ? args : "(none)", want[2 * i + 1]);
		for (int j = 0; j < i && id; j++) {
			const char *other = json_string_value(json_object_get(json_array_get(calls, (size_t)j), "id"));
			EXPECTF(other && strcmp(other, id), "%s: calls %d and %d share id %s", what, j, i, id);
		}
	}
}

static void test_forced_required_calls(void)
{
	static const struct {
		const char *out;
		int n;
		const char *want[6];
	} cases[] = {
		{"[{\"name\":\"f\",\"parameters\":{\"a\":1,\"b\":[1,2]}}]", 1, {"f", "{\"a\": 1, \"b\": [1, 2]}"}},
		/* whitespace as generated does not matter; key order is kept; empty containers */
		{"[\n  {\"name\": \"get_weather\", \"parameters\": {\"z\" :true,\n \"a\":null, \"m\": {\"x\": {}, "
		 "\"y\": []}}},"
		 "{\"name\":\"g\",\"parameters\":{}}\n]",
		 2,
		 {"get_weather", "{\"z\": true, \"a\": null, \"m\": {\"x\": {}, \"y\": []}}", "g", "{}"}},
		/* UTF-8 kept (ensure_ascii=False), escapes decoded, quotes and newlines escaped */
		{"[{\"name\":\"f\",\"parameters\":{\"city\":\"Z\xc3\xbcrich "
		 "\\u00e9\\ud83d\\ude00\",\"q\":\"a\\\"b\\\\c\\nd/e\\/f\"}}]",
		 1,
		 {"f", "{\"city\": \"Z\xc3\xbcrich \xc3\xa9\xf0\x9f\x98\x80\", \"q\": \"a\\\"b\\\\c\\nd/e/f\"}"}},
		/* numbers: integers and the reals Python writes the same way */
		{"[{\"name\":\"n\",\"parameters\":{\"i\":-42,\"r\":1.5,\"e\":1E5,\"z\":0,\"one\":1.0}}]",
		 1,
		 {"n", "{\"i\": -42, \"r\": 1.5, \"e\": 100000.0, \"z\": 0, \"one\": 1.0}"}},
		{"[{\"name\":\"a\",\"parameters\":{\"k\":1}},{\"name\":\"a\",\"parameters\":{\"k\":2}},{\"name\":"
		 "\"b\","
		 "\"parameters\":{}}]",
		 3,
		 {"a", "{\"k\": 1}", "a", "{\"k\": 2}", "b", "{}"}},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *calls = NULL;
		EXPECT_EQ_INT(tool_calls_forced(true, NULL, cases[i].out, strlen(cases[i].out), &calls), 0);
		char what[32];
		snprintf(what, sizeof what, "case %zu", i);
		expect_calls(what, calls, cases[i].n, cases[i].want);
		json_decref(calls);
	}
	/* not whole calls (cut by max_tokens or a stop string): no calls, the text stays content */
	static const char *const cut[] = {
		"[{\"name\":\"f\",\"parameters\":{\"a\":1",
		"[{\"name\":\"f\",\"parameters\":{\"a\":1}}",
		"[{\"name\":\"f\",\"para",
		"[",
		"",
		"[]",
		"{\"name\":\"f\",\"parameters\":{}}",
		"[{\"name\":\"f\",\"parameters\":{}}] trailing",
		"[{\"name\":1,\"parameters\":{}}]",
	};
	for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
		json_t *calls = (json_t *)1;
		EXPECT_EQ_INT(tool_calls_forced(true, NULL, cut[i], strlen(cut[i]), &calls), 0);
		EXPECTF(calls == NULL, "'%s': calls given", cut[i]);
		if (calls != (json_t *)1)
			json_decref(calls);
	}
}

static void test_forced_named_calls(void)
{
	static const char *const outs[] = {
		"{\"a\": 1}",
		"{\n  \"a\":1 }", /* verbatim: not re-serialized */
		"{\"city\": \"Z\xc3\xbcrich\"}",
		"{\"a\": ", /* cut by max_tokens: still the call's arguments */
		"",
	};
	for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
		json_t *calls = NULL;
		EXPECT_EQ_INT(tool_calls_forced(false, "get_weather", outs[i], strlen(outs[i]), &calls), 0);
		const char *want[2] = {"get_weather", outs[i]};
		char what[64];
		snprintf(what, sizeof what, "named '%s'", outs[i]);
		expect_calls(what, calls, 1, want);
		json_decref(calls);
	}
}

/* Streaming: every piece is kept; nothing is content before the last one. Cut into three
 * pieces at every pair of positions. */
static void test_forced_feed(void)
{
	static const struct {
		bool required;
		const char *name, *out;
		int n;
		const char *want[4], *content; /* content at the end when there are no calls */
	} cases[] = {
		{true,
		 NULL,
		 "[{\"name\":\"f\",\"parameters\":{\"a\":1,\"b\":[1,2]}}]",
		 1,
		 {"f", "{\"a\": 1, \"b\": [1, 2]}"},
		 NULL},
		{true,
		 NULL,
		 "[{\"name\":\"f\",\"parameters\":{}},{\"name\":\"g\",\"parameters\":{\"s\":\"\xc3\xa9\"}}]",
		 2,
		 {"f", "{}", "g", "{\"s\": \"\xc3\xa9\"}"},
		 NULL},
		{true,
		 NULL,
		 "[{\"name\":\"f\",\"parameters\":{\"a\":1",
		 0,
		 {NULL},
		 "[{\"name\":\"f\",\"parameters\":{\"a\":1"},
	};
	for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
		const char *t = cases[ci].out;
		size_t n = strlen(t);
		int bad = 0;
		for (size_t i = 0; i <= n && !bad; i++)
			for (size_t j = i; j <= n && !bad; j++) {
				struct tool_split s = {0};
				struct strbuf content = {0};
				json_t *calls = NULL;
				size_t cuts[4] = {0, i, j, n};
				for (int k = 0; k < 3 && !bad; k++) {
					bool last = k == 2;
					if (tool_forced_feed(&s, cases[ci].required, cases[ci].name, t + cuts[k],
							     cuts[k + 1] - cuts[k], last, &content, &calls) < 0)
						bad = 1;
					else if (!last && (content.n || calls))
						bad = 2; /* nothing before the last piece */
				}
				if (!bad && cases[ci].n) {
					bad = content.n                                              ? 3
					      : !calls || (int)json_array_size(calls) != cases[ci].n ? 4
												     : 0;
					for (int c = 0; !bad && c < cases[ci].n; c++) {
						const json_t *f = json_object_get(json_array_get(calls, (size_t)c),
										  "function");
						const char *nm = json_string_value(json_object_get(f, "name"));
						const char *args = json_string_value(json_object_get(f, "arguments"));
						if (!nm || !args || strcmp(nm, cases[ci].want[2 * c]) ||
						    strcmp(args, cases[ci].want[2 * c + 1]))
							bad = 5;
					}
				} else if (!bad) {
					bad = calls ? 6
					      : content.n != strlen(cases[ci].content) ||
							      memcmp(content.p, cases[ci].content, content.n)
						      ? 7
						      : 0;
				}
				EXPECTF(!bad, "case %zu cut at %zu, %zu: failure %d, content '%.*s', %d calls", ci, i,
					j, bad, (int)content.n, content.p ? content.p : "",
					calls ? (int)json_array_size(calls) : -1);
				json_decref(calls);
				strbuf_fini(&content);
				tool_split_fini(&s);
			}
	}
	/* named: every piece is a delta; the first names the call, the others add arguments (cut
	 * between characters, as the engine's text deltas are) */
	static const char *const named[] = {"{\"a\": 1, \"b\": \"\xc3\xa9\"}", "{\"a\": ", ""};
	for (size_t ci = 0; ci < 3; ci++) {
		const char *t = named[ci];
		size_t n = strlen(t);
		for (size_t i = 0; i <= n; i++)
			for (size_t j = i; j <= n; j++) {
				if ((i < n && (t[i] & 0xC0) == 0x80) || (j < n && (t[j] & 0xC0) == 0x80))
					continue;
				struct tool_split s = {0};
				struct strbuf content = {0}, args = {0};
				size_t cuts[4] = {0, i, j, n};
				int deltas = 0, names = 0, bad = 0;
				for (int k = 0; k < 3 && !bad; k++) {
					json_t *calls = NULL;
					if (tool_forced_feed(&s, false, "f", t + cuts[k], cuts[k + 1] - cuts[k],
							     k == 2, &content, &calls) < 0) {
						bad = 1;
						break;
					}
					if (calls) {
						const json_t *c = json_array_get(calls, 0),
							     *f = json_object_get(c, "function");
						const json_t *a = json_object_get(f, "arguments"),
							     *nm = json_object_get(f, "name");
						deltas++;
						if (nm) {
							names++;
							if (deltas != 1 || strcmp(json_string_value(nm), "f") ||
							    !json_is_string(json_object_get(c, "id")))
								bad = 2;
						}
						if (json_array_size(calls) != 1 || !json_is_string(a))
							bad = 3;
						else
							strbuf_put(&args, json_string_value(a), json_string_length(a));
					}
					json_decref(calls);
				}
				EXPECTF(!bad && names == 1 && !content.n && args.n == n &&
						!memcmp(args.p ? args.p : "", t, n),
					"named '%s' cut at %zu, %zu: failure %d, %d names, %d deltas, arguments "
					"'%.*s'",
					t, i, j, bad, names, deltas, (int)args.n, args.p ? args.p : "");
				strbuf_fini(&content);
				strbuf_fini(&args);
				tool_split_fini(&s);
			}
	}
	/* the last event may carry no text (and no buffer): its delta still comes, so that the
	 * chunk finishes "tool_calls" */
	struct tool_split s = {0};
	struct strbuf content = {0};
	json_t *calls = NULL;
	EXPECT(tool_forced_feed(&s, false, "f", "{}", 2, false, &content, &calls) == 0 && calls);
	json_decref(calls);
	calls = NULL;
	EXPECT(tool_forced_feed(&s, false, "f", NULL, 0, true, &content, &calls) == 0 && json_array_size(calls) == 1);
	json_decref(calls);
	tool_split_fini(&s);
	strbuf_fini(&content);
}

/* pyjson_dump writes what Python's json.dumps(v, ensure_ascii=False) writes */
static void test_pyjson(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{"0.1", "0.1"},
		{"100000.0", "100000.0"},
		{"1e-05", "1e-05"},
		{"0.0001", "0.0001"},
		{"1e16", "1e+16"},
		{"1e15", "1000000000000000.0"},
		{"1.5e-07", "1.5e-07"},
		{"-0.0", "-0.0"},
		{"123.456", "123.456"},
		{"1.2345678901234568e+17", "1.2345678901234568e+17"},
		{"2.5e-300", "2.5e-300"},
		{"0.30000000000000004", "0.30000000000000004"},
		{"-7", "-7"},
		{"\"\\u001b\\u0000\\n\\\"\\u00e9\\u007f\"", "\"\\u001b\\u0000\\n\\\"\xc3\xa9\x7f\""},
		{"{\"b\":[1,{}],\"a\":[],\"c\":null}", "{\"b\": [1, {}], \"a\": [], \"c\": null}"},
		{"[true,false]", "[true, false]"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *v = json_loads(cases[i].in, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		struct strbuf o = {0};
		EXPECTF(v && pyjson_dump(v, &o) == 0 && o.n == strlen(cases[i].want) &&
				!memcmp(o.p, cases[i].want, o.n),
			"%s: got '%.*s', want '%s'", cases[i].in, (int)o.n, o.p ? o.p : "", cases[i].want);
		strbuf_fini(&o);
		json_decref(v);
	}
}

TESTS(T(test_pyjson), T(test_field_forms), T(test_free_output), T(test_json_schema_without_schema),
      T(test_bad_schema_values), T(test_unsupported_keyword), T(test_refused_forms), T(test_two_kinds),
      T(test_tool_choice_errors), T(test_required_grammar), T(test_named_grammar), T(test_whitespace),
      T(test_request_parse), T(test_forced_required_calls), T(test_forced_named_calls), T(test_forced_feed))
