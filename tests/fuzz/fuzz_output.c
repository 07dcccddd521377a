/* Fuzz target "output": what the server makes of a model's output text, whole and streamed.
 * Byte 0 picks the parser; byte 1 seeds where the text is cut into streaming pieces; the rest
 * is the output text.
 *   tool calls (deepseek_v3, deepseek_v31, deepseek_v32's and deepseek_v4's DSML): streamed, the
 *     content and the calls equal those of the whole text (call ids aside: they are random);
 *   forced tool_choice ("required", named): the same;
 *   reasoning (deepseek_r1, deepseek_v4's): streamed, reasoning and content equal those of the
 *     whole text, and together they hold the text less at most the tags. */
#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "fuzz/fuzz.h"
#include "base/utf8.h"
#include "server/parsers/reasoning.h"
#include "server/http/sse.h"
#include "server/parsers/tool_calls.h"
#include "tok/tokenizer.h"

const char fuzz_name[] = "output";

/* The next piece's length: 1-8 bytes from a small generator seeded by the input, then up
 * to the next character boundary (the server's pieces are whole UTF-8 characters). */
static size_t piece(uint32_t *seed, const char *at, size_t left)
{
	*seed = *seed * 1103515245u + 12345u;
	size_t k = 1 + (*seed >> 16) % 8;
	if (k >= left)
		return left;
	while (k < left && ((uint8_t)at[k] & 0xC0) == 0x80)
		k++;
	return k;
}

static void strip_ids(json_t *calls)
{
	size_t i;
	json_t *c;
	json_array_foreach(calls, i, c) json_object_del(c, "id");
}

static bool same_calls(json_t *a, json_t *b)
{
	bool a_none = !a || json_array_size(a) == 0, b_none = !b || json_array_size(b) == 0;
	if (a_none || b_none)
		return a_none == b_none;
	strip_ids(a);
	strip_ids(b);
	return json_equal(a, b);
}

static void tools(int parser, uint32_t seed, const char *text, size_t n)
{
	json_t *whole = NULL;
	size_t content_len = 0;
	FUZZ_CHECK(tool_calls_parse(parser, text, n, &whole, &content_len) == 0);
	FUZZ_CHECK(content_len <= n);
	struct tool_split s = {0};
	struct strbuf content = {0};
	json_t *calls = NULL;
	size_t at = 0;
	do {
		size_t k = piece(&seed, text + at, n - at);
		FUZZ_CHECK(tool_split_feed(&s, parser, text + at, k, at + k == n, &content, &calls) == 0);
		at += k;
	} while (at < n);
	/* with calls the content is what precedes them; without, all of the text */
	if (whole && json_array_size(whole)) {
		FUZZ_CHECK(content.n == content_len && (!content_len || !memcmp(content.p, text, content_len)));
	} else {
		FUZZ_CHECK(content.n == n && (n == 0 || !memcmp(content.p, text, n)));
	}
	FUZZ_CHECK(same_calls(whole, calls));
	json_decref(whole);
	json_decref(calls);
	strbuf_fini(&content);
	tool_split_fini(&s);
}

static void forced(bool required, uint32_t seed, const char *text, size_t n)
{
	json_t *whole = NULL;
	FUZZ_CHECK(tool_calls_forced(required, "get_weather", text, n, &whole) == 0);
	struct tool_split s = {0};
	struct strbuf content = {0};
	json_t *calls = NULL, *joined = NULL;
	size_t at = 0;
	do {
		size_t k = piece(&seed, text + at, n - at);
		json_t *c = NULL;
		FUZZ_CHECK(tool_forced_feed(&s, required, "get_weather", text + at, k, at + k == n, &content, &c) ==
			   0);
		if (c && !required) { /* named: deltas of one call, arguments to be joined */
			json_t *args = json_object_get(json_object_get(json_array_get(c, 0), "function"), "arguments");
			FUZZ_CHECK(json_is_string(args));
			if (!joined) {
				joined = json_deep_copy(c);
			} else {
				json_t *f = json_object_get(json_array_get(joined, 0), "function");
				const json_t *pa = json_object_get(f, "arguments");
				const char *prev = json_string_value(pa);
				size_t pl = json_string_length(pa), al = json_string_length(args);
				char *cat = malloc(pl + al + 1);
				FUZZ_CHECK(cat);
				memcpy(cat, prev, pl);
				memcpy(cat + pl, json_string_value(args), al);
				cat[pl + al] = 0;
				json_object_set_new(f, "arguments", json_stringn(cat, pl + al));
				free(cat);
			}
			json_decref(c);
		} else if (c) {
			FUZZ_CHECK(!calls);
			calls = c;
		}
		at += k;
	} while (at < n);
	if (!required) {
		/* the name's call with the whole text as arguments, as one delta or many */
		FUZZ_CHECK(whole && json_array_size(whole) == 1);
		if (n)
			FUZZ_CHECK(same_calls(whole, joined));
	} else {
		FUZZ_CHECK(same_calls(whole, calls));
		if (!whole)
			FUZZ_CHECK(content.n == n && (n == 0 || !memcmp(content.p, text, n)));
		else
			FUZZ_CHECK(content.n == 0);
	}
	json_decref(whole);
	json_decref(calls);
	json_decref(joined);
	strbuf_fini(&content);
	tool_split_fini(&s);
}

/* dsml: deepseek_v4's split; kimi: kimi_k2's */
static void reasoning(uint32_t seed, const char *text, size_t n, bool dsml, bool kimi)
{
	struct reasoning_split a = {.dsml = dsml, .kimi = kimi}, b = {.dsml = dsml, .kimi = kimi};
	struct strbuf ra = {0}, ca = {0}, rb = {0}, cb = {0};
	FUZZ_CHECK(reasoning_feed(&a, text, n, true, &ra, &ca) == 0);
	size_t at = 0;
	do {
		size_t k = piece(&seed, text + at, n - at);
		FUZZ_CHECK(reasoning_feed(&b, text + at, k, at + k == n, &rb, &cb) == 0);
		at += k;
	} while (at < n);
	FUZZ_CHECK(ra.n == rb.n && (!ra.n || !memcmp(ra.p, rb.p, ra.n)));
	FUZZ_CHECK(ca.n == cb.n && (!ca.n || !memcmp(ca.p, cb.p, ca.n)));
	/* "<think>" at the start and the first "</think>" are all that may go */
	FUZZ_CHECK(ra.n + ca.n <= n && ra.n + ca.n + strlen("<think>") + strlen(REASONING_END) >= n);
	strbuf_fini(&ra);
	strbuf_fini(&ca);
	strbuf_fini(&rb);
	strbuf_fini(&cb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2 || size > 4096)
		return 0;
	uint32_t seed = data[1];
	const char *text = (const char *)data + 2;
	size_t n = size - 2;
	if (!utf8_valid(text, n, NULL)) /* model output is text: the detokenizer's, valid UTF-8 */
		return 0;
	switch (data[0] >= 248 && data[0] <= 250 ? data[0] : data[0] % 8) { /* 248..250: the relatives' */
	case 248: tools(TOOL_PARSER_KIMI_K2, seed, text, n); break;
	case 249: tools(TOOL_PARSER_GLM47, seed, text, n); break;
	case 250: reasoning(seed, text, n, false, true); break;
	case 0: tools(TOOL_PARSER_DEEPSEEK_V3, seed, text, n); break;
	case 1: tools(TOOL_PARSER_DEEPSEEK_V31, seed, text, n); break;
	case 2: forced(true, seed, text, n); break;
	case 3: forced(false, seed, text, n); break;
	case 5: tools(TOOL_PARSER_DEEPSEEK_V32, seed, text, n); break;
	case 6: tools(TOOL_PARSER_DEEPSEEK_V4, seed, text, n); break;
	case 7: reasoning(seed, text, n, true, false); break;
	default: reasoning(seed, text, n, false, false);
	}
	return 0;
}
