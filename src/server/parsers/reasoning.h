/* Reasoning parsers (vLLM's `--reasoning-parser`): split a chat completion's output text into
 * `reasoning_content` (DeepSeek's API's name; also sent as `reasoning`, vLLM's 2026 name) and
 * `content`.
 *
 * deepseek_r1: DeepSeek-R1's chat template ends the prompt with "<think>\n", so the output
 * starts inside the reasoning (an output that opens with "<think>" anyway has it dropped) and
 * the first "</think>" ends it; the text after it is the content. Without "</think>" all of
 * the output is reasoning and the content is null, as in vLLM. The split works on text as it
 * streams: the tail that may be the start of a tag is held back until the next piece (or the
 * end) decides it, so a tag split across tokens or events is still found. The held bytes begin
 * with the tag's "<", so the pieces given out stay whole UTF-8 sequences.
 *
 * deepseek_v3 (V3.1, V3.2: one model, thinking or not): the deepseek_r1 split for requests
 * whose chat_template_kwargs set "thinking" or "enable_thinking" (vLLM reads both; their
 * template, or V3.2's encoder, then opens the thinking), else none: all of the output is
 * content and reasoning_content stays null, as in vLLM.
 *
 * deepseek_v4 (V4, tok/chat_dsv4.h): the deepseek_v3 split, off also when the request's
 * reasoning_effort is "none" (the encoder then writes no thinking); and a tool-call block
 * "<｜DSML｜tool_calls>" in the reasoning ends it too (the model may call tools without closing
 * its thinking): that block and all after it are content, for the tool-call parser, except the
 * first "</think>", which is left out (vLLM's DeepSeekV4ReasoningParser). A reasoning_split
 * does this when its `dsml` is set.
 *
 * kimi_k2 (Kimi K2-Thinking, K2.5, K2.6; vLLM's KimiK2ReasoningParser): on unless the request's
 * chat_template_kwargs set "thinking" false; the deepseek_r1 split, and the tool-call section
 * "<|tool_calls_section_begin|>" ends the reasoning too: it and all after it are content (a
 * later "</think>" included). vLLM's whole-output path looks for "</think>" first anywhere;
 * its streaming path, which this follows for both, takes whichever comes first. Set `kimi`.
 *
 * glm45 (GLM-4.5 to GLM-5.1; vLLM's DeepSeekV3ReasoningWithThinkingParser, which vLLM
 * registers as glm45 when GLM-5 shipped): the deepseek_v3 split, on by default: off only when
 * chat_template_kwargs give "thinking" or "enable_thinking" and neither is true. */
#ifndef MLA_SERVER_PARSERS_REASONING_H
#define MLA_SERVER_PARSERS_REASONING_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/strbuf.h"

enum reasoning_parser {
	REASONING_NONE = 0,
	REASONING_DEEPSEEK_R1,
	REASONING_DEEPSEEK_V3,
	REASONING_DEEPSEEK_V4,
	REASONING_KIMI_K2,
	REASONING_GLM45,
};

/* The parser called `name` (vLLM's names); -1 when unknown. */
int reasoning_parser_from_name(const char *name);
#define REASONING_PARSER_NAMES "deepseek_r1, deepseek_v3, deepseek_v4, glm45, kimi_k2"
#define REASONING_END "</think>" /* the tag that ends the reasoning (one token in DeepSeek's tokenizers) */

/* Whether `parser` splits the output of a chat request with these chat_template_kwargs
 * (NULL: none given). */
bool reasoning_applies(int parser, const json_t *chat_template_kwargs);

/* One choice's split, zero-initialized to start. */
struct reasoning_split {
	bool dsml;     /* deepseek_v4's split: set before the first piece */
	bool kimi;     /* kimi_k2's split: set before the first piece */
	int state;     /* where the output is (reasoning.c) */
	char hold[32]; /* bytes that may begin a tag */
	size_t n_hold;
};

/* Feeds the next piece of output text; appends to *reasoning and *content what is decided.
 * last: the output ends here (the held bytes are given out). 0 ok, -1 out of memory. */
int reasoning_feed(struct reasoning_split *s, const char *text, size_t len, bool last, struct strbuf *reasoning,
		   struct strbuf *content);

#endif
