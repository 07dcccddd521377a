/* DeepSeek-V4's two output parsers chained as the server chains them (server/openai/generate*.c):
 * --reasoning-parser deepseek_v4 (the thinking ends at </think> or at a tool-call block), its
 * content through --tool-call-parser deepseek_v4 (V3.2's DSML inside <｜DSML｜tool_calls>). The
 * output streamed, cut into three pieces at every pair of positions, must give the reasoning,
 * content and calls of the whole output. Each parser alone: test_server_reasoning.c,
 * test_server_tool_calls.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/parsers/reasoning.h"
#include "server/parsers/tool_calls.h"

#define DS "｜DSML｜"
#define TC "<" DS "tool_calls>"
#define TCE "</" DS "tool_calls>"
#define INV(name) "<" DS "invoke name=\"" name "\">\n"
#define INVE "</" DS "invoke>\n"
#define PAR(name, str, v) "<" DS "parameter name=\"" name "\" string=\"" str "\">" v "</" DS "parameter>\n"

struct chained {
	struct strbuf reasoning, content;
	json_t *calls;
};

/* out through the reasoning split and its content through the tool-call split, in the pieces
 * cut[0..n_cut] makes; 0, or -1 out of memory */
static int chain(const char *out, const size_t *cut, int n_cut, struct chained *ch)
{
	struct reasoning_split rs = {.dsml = true};
	struct tool_split ts = {0};
	int rc = 0;
	*ch = (struct chained){0};
	for (int k = 0; k < n_cut && !rc; k++) {
		struct strbuf text = {0};
		json_t *calls = NULL;
		bool last = k == n_cut - 1;
		rc = reasoning_feed(&rs, out + cut[k], cut[k + 1] - cut[k], last, &ch->reasoning, &text) < 0 ||
				     tool_split_feed(&ts, TOOL_PARSER_DEEPSEEK_V4, text.p, text.n, last, &ch->content,
						     &calls) < 0
			     ? -1
			     : 0;
		if (calls) {
			json_decref(ch->calls);
			ch->calls = calls;
		}
		strbuf_fini(&text);
	}
	tool_split_fini(&ts);
	return rc;
}

static bool same_text(const struct strbuf *a, const struct strbuf *b)
{
	return a->n == b->n && (!a->n || !memcmp(a->p, b->p, a->n));
}

/* the calls' names and arguments (ids are random) */
static bool same_calls(const json_t *a, const json_t *b)
{
	if (json_array_size(a) != json_array_size(b))
		return false;
	for (size_t i = 0; i < json_array_size(a); i++) {
		const json_t *fa = json_object_get(json_array_get(a, i), "function"),
			     *fb = json_object_get(json_array_get(b, i), "function");
		if (!json_equal(json_object_get(fa, "name"), json_object_get(fb, "name")) ||
		    !json_equal(json_object_get(fa, "arguments"), json_object_get(fb, "arguments")))
			return false;
	}
	return true;
}

static void test_chained_every_cut(void)
{
	static const char *const outs[] = {
		"need weather" TC "\n" INV("w") PAR("city", "true", "Paris") INVE TCE,
		"need weather</think>Checking.\n\n" TC "\n" INV("w") PAR("n", "false", "2") INVE TCE,
		"plain</think>answer",
	};
	for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++) {
		size_t n = strlen(outs[o]), whole_cut[2] = {0, n};
		struct chained whole;
		EXPECT(chain(outs[o], whole_cut, 1, &whole) == 0);
		EXPECTF(o == 2 ? !whole.calls : json_array_size(whole.calls) == 1, "output %zu: calls", o);
		int bad = 0;
		for (size_t i = 0; i <= n && !bad; i++)
			for (size_t j = i; j <= n && !bad; j++) {
				size_t cut[4] = {0, i, j, n};
				struct chained got;
				bad = chain(outs[o], cut, 3, &got) < 0 ||
				      !same_text(&got.reasoning, &whole.reasoning) ||
				      !same_text(&got.content, &whole.content) || !same_calls(got.calls, whole.calls);
				EXPECTF(!bad, "output %zu cut at %zu, %zu: reasoning '%.*s', content '%.*s'", o, i, j,
					(int)got.reasoning.n, got.reasoning.p ? got.reasoning.p : "",
					(int)got.content.n, got.content.p ? got.content.p : "");
				strbuf_fini(&got.reasoning);
				strbuf_fini(&got.content);
				json_decref(got.calls);
			}
		strbuf_fini(&whole.reasoning);
		strbuf_fini(&whole.content);
		json_decref(whole.calls);
	}
}

TESTS(T(test_chained_every_cut))
