/* The deepseek_r1 reasoning split (src/server/parsers/reasoning.c): every output below, fed whole and
 * cut into three pieces at every pair of positions, must split as vLLM's
 * DeepSeekR1ReasoningParser splits the whole text, except that "<think>" counts only at the
 * very start (vLLM drops whatever precedes a first "<think>" anywhere in a whole output); the
 * deepseek_v4 ones as its DeepSeekV4ReasoningParser does (a tool-call block ends the reasoning). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/parsers/reasoning.h"

struct want {
	const char *out, *reasoning, *content; /* content NULL: null (nothing after "</think>") */
};

#define TC "<｜DSML｜tool_calls>"

static const struct want cases[] = {
	{"I think so.</think>\n\nYes.", "I think so.", "\n\nYes."},
	{"<think>I think so.</think>Yes.", "I think so.", "Yes."},
	{"no tag at all", "no tag at all", NULL},
	{"", "", NULL},
	{"<think>", "", NULL},
	{"<thin", "<thin", NULL}, /* not the whole tag: text */
	{"a</think>", "a", NULL}, /* ends right after the tag: content null */
	{"</think>", "", NULL},
	{"</think>b</think>c", "", "b</think>c"}, /* only the first tag ends the reasoning */
	{"a</thinkb", "a</thinkb", NULL},
	{"a<</think>b", "a<", "b"},               /* a tag start right before the tag */
	{"x<think>y</think>z", "x<think>y", "z"}, /* "<think>" counts only at the start */
	{"\xe6\x80\x9d\xe8\x80\x83</think>\xe7\xad\x94", "\xe6\x80\x9d\xe8\x80\x83", "\xe7\xad\x94"},
	{"a</th</think>", "a</th", NULL},
	{"r<｜DSML｜tool_calls>x</think>y", "r<｜DSML｜tool_calls>x", "y"}, /* a V4 tool-call block: text */
};

/* deepseek_v4: a tool-call block ends the reasoning too; it is content from its tag on */
static const struct want v4_cases[] = {
	{"weigh it" TC "\n<｜DSML｜invoke name=\"a\">", "weigh it", TC "\n<｜DSML｜invoke name=\"a\">"},
	{"<think>r\n\n" TC "x", "r\n\n", TC "x"},
	{TC, "", TC},
	{"I think.</think>Yes.", "I think.", "Yes."},
	{"no end", "no end", NULL},
	/* after the block the first "</think>" still ends the reasoning: left out (vLLM) */
	{"a" TC "x</think>y</think>z", "a", TC "xy</think>z"},
	{"r</think>c\n\n" TC "x", "r", "c\n\n" TC "x"},                     /* a block after "</think>": content */
	{"r<｜DSML｜tool_ca", "r<｜DSML｜tool_ca", NULL},                   /* not the whole tag */
	{"r<｜DSML｜function_calls>x", "r<｜DSML｜function_calls>x", NULL}, /* V3.2's tag */
	{"r<" TC, "r<", TC},
	{"\xe6\x80\x9d" TC "\xe7\xad\x94", "\xe6\x80\x9d", TC "\xe7\xad\x94"},
};

/* feeds out in up to three pieces cut at i <= j; 0 when the split is as wanted */
static int split_differs(const struct want *w, bool dsml, size_t i, size_t j, char *got, size_t cap)
{
	size_t n = strlen(w->out);
	struct reasoning_split s = {.dsml = dsml};
	struct strbuf r = {0}, c = {0};
	size_t cut[4] = {0, i, j, n};
	for (int k = 0; k < 3; k++)
		if (reasoning_feed(&s, w->out + cut[k], cut[k + 1] - cut[k], k == 2, &r, &c) < 0)
			return -1;
	int bad = r.n != strlen(w->reasoning) || (r.n && memcmp(r.p, w->reasoning, r.n)) ||
		  (w->content ? c.n != strlen(w->content) || memcmp(c.p, w->content, c.n) : c.n != 0);
	snprintf(got, cap, "reasoning '%.*s', content '%.*s'", (int)r.n, r.p ? r.p : "", (int)c.n, c.p ? c.p : "");
	strbuf_fini(&r);
	strbuf_fini(&c);
	return bad;
}

/* each case of list, split as deepseek_v4 splits when dsml */
static void split_every_cut(const struct want *list, size_t n_cases, bool dsml)
{
	char got[256];
	for (size_t t = 0; t < n_cases; t++) {
		size_t n = strlen(list[t].out);
		int bad = 0;
		for (size_t i = 0; i <= n && !bad; i++)
			for (size_t j = i; j <= n && !bad; j++)
				if ((bad = split_differs(&list[t], dsml, i, j, got, sizeof got)))
					EXPECTF(0, "'%s' cut at %zu, %zu: %s", list[t].out, i, j, got);
	}
}

static void test_r1_split_every_cut(void) { split_every_cut(cases, sizeof cases / sizeof cases[0], false); }

static void test_v4_split_every_cut(void)
{
	split_every_cut(v4_cases, sizeof v4_cases / sizeof v4_cases[0], true);
	/* without a block, as deepseek_r1 (all but the last case, whose block is text only there) */
	split_every_cut(cases, sizeof cases / sizeof cases[0] - 1, true);
}

/* a piece longer than the on-stack join, with a held tag start in front */
static void test_r1_long_piece(void)
{
	struct reasoning_split s = {0};
	struct strbuf r = {0}, c = {0};
	size_t n = 5000;
	char *big = malloc(n + 1);
	memset(big, 'x', n);
	memcpy(big + 100, "ink>", 4); /* "</th" + "ink>" */
	big[n] = 0;
	EXPECT(reasoning_feed(&s, "ab</th", 6, false, &r, &c) == 0);
	EXPECT(r.n == 2 && c.n == 0);
	EXPECT(reasoning_feed(&s, big + 100, n - 100, true, &r, &c) == 0);
	EXPECT(r.n == 2 && c.n == n - 104);
	strbuf_fini(&r);
	strbuf_fini(&c);
	free(big);
}

/* deepseek_v3 splits only requests that asked for thinking (Python truthiness of the kwarg) */
static void test_v3_thinking_switch(void)
{
	static const struct {
		const char *kwargs; /* NULL: none */
		bool v3;
	} cases[] = {{NULL, false},
		     {"{}", false},
		     {"{\"thinking\": true}", true},
		     {"{\"thinking\": false}", false},
		     {"{\"thinking\": null}", false},
		     {"{\"thinking\": 1}", true},
		     {"{\"thinking\": 0}", false},
		     {"{\"thinking\": 0.0}", false},
		     {"{\"thinking\": []}", false},
		     {"{\"thinking\": {\"a\": 1}}", true},
		     {"{\"thinking\": \"yes\"}", true},
		     {"{\"thinking\": \"\"}", false},
		     /* vLLM reads enable_thinking too (V3.2's encoder does) */
		     {"{\"enable_thinking\": true}", true},
		     {"{\"enable_thinking\": 0, \"thinking\": false}", false}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *k = cases[i].kwargs ? json_loads(cases[i].kwargs, 0, NULL) : NULL;
		EXPECTF(reasoning_applies(REASONING_DEEPSEEK_V3, k) == cases[i].v3, "%s", cases[i].kwargs);
		EXPECTF(reasoning_applies(REASONING_DEEPSEEK_V4, k) == cases[i].v3, "%s", cases[i].kwargs);
		EXPECT(reasoning_applies(REASONING_DEEPSEEK_R1, k));
		EXPECT(!reasoning_applies(REASONING_NONE, k));
		json_decref(k);
	}
}

/* deepseek_v4 also reads reasoning_effort: "none" is V4's encoder without thinking */
static void test_v4_reasoning_effort(void)
{
	static const struct {
		const char *kwargs;
		bool v4;
	} cases[] = {{"{\"thinking\": true, \"reasoning_effort\": \"none\"}", false},
		     {"{\"thinking\": true, \"reasoning_effort\": \"max\"}", true},
		     {"{\"enable_thinking\": 1, \"reasoning_effort\": null}", true},
		     {"{\"reasoning_effort\": \"high\"}", false}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *k = json_loads(cases[i].kwargs, 0, NULL);
		EXPECTF(reasoning_applies(REASONING_DEEPSEEK_V4, k) == cases[i].v4, "%s", cases[i].kwargs);
		json_decref(k);
	}
}

static void test_parser_names(void)
{
	EXPECT(reasoning_parser_from_name("deepseek_r1") == REASONING_DEEPSEEK_R1);
	EXPECT(reasoning_parser_from_name("deepseek_v3") == REASONING_DEEPSEEK_V3);
	EXPECT(reasoning_parser_from_name("deepseek_v4") == REASONING_DEEPSEEK_V4);
	EXPECT(reasoning_parser_from_name("qwen3") == -1);
	EXPECT(reasoning_parser_from_name("") == -1);
}

TESTS(T(test_r1_split_every_cut), T(test_v4_split_every_cut), T(test_r1_long_piece), T(test_v3_thinking_switch),
      T(test_v4_reasoning_effort), T(test_parser_names))
