/* The deepseek_r1 reasoning split (src/server/parsers/reasoning.c): every output below, fed whole and
 * cut into three pieces at every pair of positions, must split as vLLM's
 * DeepSeekR1ReasoningParser splits the whole text, except that "<think>" counts only at the
 * very start (vLLM drops whatever precedes a first "<think>" anywhere in a whole output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/parsers/reasoning.h"

struct want {
	const char *out, *reasoning, *content; /* content NULL: null (nothing after "</think>") */
};

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
};

/* feeds out in up to three pieces cut at i <= j; 0 when the split is as wanted */
static int split_differs(const struct want *w, size_t i, size_t j, char *got, size_t cap)
{
	size_t n = strlen(w->out);
	struct reasoning_split s = {0};
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

static void test_r1_split_every_cut(void)
{
	char got[256];
	for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
		size_t n = strlen(cases[t].out);
		int bad = 0;
		for (size_t i = 0; i <= n && !bad; i++)
			for (size_t j = i; j <= n && !bad; j++)
				if ((bad = split_differs(&cases[t], i, j, got, sizeof got)))
					EXPECTF(0, "'%s' cut at %zu, %zu: %s", cases[t].out, i, j, got);
	}
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
		EXPECT(reasoning_applies(REASONING_DEEPSEEK_R1, k));
		EXPECT(!reasoning_applies(REASONING_NONE, k));
		json_decref(k);
	}
}

static void test_parser_names(void)
{
	EXPECT(reasoning_parser_from_name("deepseek_r1") == REASONING_DEEPSEEK_R1);
	EXPECT(reasoning_parser_from_name("deepseek_v3") == REASONING_DEEPSEEK_V3);
	EXPECT(reasoning_parser_from_name("qwen3") == -1);
	EXPECT(reasoning_parser_from_name("") == -1);
}

TESTS(T(test_r1_split_every_cut), T(test_r1_long_piece), T(test_v3_thinking_switch), T(test_parser_names))
