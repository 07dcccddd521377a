/* Tool-call parsers (vLLM's `--enable-auto-tool-choice --tool-call-parser NAME`): find the
 * tool calls a DeepSeek model wrote in its chat output and return them as OpenAI
 * `tool_calls`; the text before them stays the content.
 *
 * deepseek_v3 (V3, R1-0528):
 *   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```<｜tool▁call▁end｜>
 *   (more calls, "\n" between them) <｜tool▁calls▁end｜>
 * deepseek_v31 (V3.1):
 *   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGUMENTS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
 *
 * deepseek_v32 (V3.2, its DSML markup, as its encoder writes it: tok/chat_dsv32.h):
 *   CONTENT\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="NAME">\n
 *   <｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>\n ... </｜DSML｜invoke>\n
 *   (more invokes) </｜DSML｜function_calls>
 *   Each whole invoke is a call (vLLM's deepseek_v32 parser; the closing function_calls tag
 *   is not needed, as the other parsers need no closing tag). Its arguments are the JSON
 *   object of its parameters, written as Python's json.dumps: a string="true" VALUE is a
 *   string as written, a string="false" one the JSON value it is (a string as written when it
 *   is not JSON), as DeepSeek's own decoder reads them; a repeated KEY keeps the last value.
 *   The content is the text before "<｜DSML｜function_calls>" without the "\n\n" that
 *   separates them (DeepSeek's parse_message_from_completion_text; vLLM keeps it), so that the
 *   message sent back renders to the same prompt.
 * deepseek_v4 (V4: tok/chat_dsv4.h): the same DSML inside <｜DSML｜tool_calls> instead of
 *   <｜DSML｜function_calls> (vLLM's deepseek_v4 parser is its deepseek_v32 one with that tag).
 *
 * kimi_k2 (Kimi K2, K2.5, K2.6; vLLM's KimiK2ToolParser):
 *   <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>ARGUMENTS
 *   <|tool_call_end|> (more calls) <|tool_calls_section_end|>
 *   The call's id is its "functions.NAME:IDX" as written (the chat template renders it back in
 *   the history), its name what lies between the last "." and the first ":" of it, its
 *   arguments the text as written, whitespace around them trimmed (tool_calls_kimi_glm.c).
 * glm47 (GLM-4.7, GLM-5, GLM-5.1; vLLM's Glm47MoeModelToolParser):
 *   <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...</tool_call>
 *   A VALUE whose parameter the request's tool schema types "string" stays as written; any
 *   other is read as JSON, then as a Python literal, else kept as a string; the arguments are
 *   json.dumps of them (tool_calls_kimi_glm.c). Content of only whitespace before the calls is
 *   none (vLLM's whole-output answer; streamed, it is held back until something else comes).
 *
 * A call that does not have its parser's shape is skipped; when no call parses at all, the
 * whole output stays content (vLLM would drop it). While streaming, content goes out up to
 * the first "<｜tool▁calls▁begin｜>" (deepseek_v32: "\n\n<｜DSML｜function_calls>", deepseek_v4:
 * "\n\n<｜DSML｜tool_calls>"; a possible start of it is held back); everything from there is
 * kept and parsed when the output ends, and the calls go out in the last chunk, the same calls
 * and content as the whole output's. */
#ifndef MLA_SERVER_PARSERS_TOOL_CALLS_H
#define MLA_SERVER_PARSERS_TOOL_CALLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/strbuf.h"

enum tool_parser {
	TOOL_PARSER_NONE = 0,
	TOOL_PARSER_DEEPSEEK_V3,
	TOOL_PARSER_DEEPSEEK_V31,
	TOOL_PARSER_DEEPSEEK_V32,
	TOOL_PARSER_DEEPSEEK_V4,
	TOOL_PARSER_KIMI_K2,
	TOOL_PARSER_GLM47,
};

/* The parser called `name` (vLLM's names); -1 when unknown. */
int tool_parser_from_name(const char *name);
#define TOOL_PARSER_NAMES "deepseek_v3, deepseek_v31, deepseek_v32, deepseek_v4, glm47, kimi_k2"

/* Parses a whole output: *calls gets a new array of {"id", "type", "function": {"name",
 * "arguments"}} (empty when there are none) and *content_len how much of text is content.
 * 0 ok, -1 out of memory. */
int tool_calls_parse(int parser, const char *text, size_t len, json_t **calls, size_t *content_len);
/* The same with the request's `tools` array (NULL: none), which glm47 reads the argument
 * types from. */
int tool_calls_parse_typed(int parser, const json_t *tools, const char *text, size_t len, json_t **calls,
			   size_t *content_len);

/* One streaming choice, zero-initialized to start. */
struct tool_split {
	bool in_calls;       /* the calls have begun: text is being kept */
	bool emitted;        /* some content has gone out */
	struct strbuf kept;  /* the held-back tail, then (in_calls) everything from the calls on */
	const json_t *tools; /* the request's tools (borrowed; NULL: none): set before the first piece */
};

/* Feeds the next piece of content; appends to *content what is decided to be content. At the
 * end (last), *calls gets the parsed calls (NULL when there are none; new reference). */
int tool_split_feed(struct tool_split *s, int parser, const char *text, size_t len, bool last, struct strbuf *content,
		    json_t **calls);
void tool_split_fini(struct tool_split *s);

/* The output of a forced tool_choice (server/openai/structured.h), which guided decoding kept to
 * its grammar: "required" (required true) is [{"name", "parameters"}, ...] and each element
 * becomes a call whose arguments are the parameters as vLLM writes them (Python's
 * json.dumps, base/pyjson.h); a named choice is one call of `name`
 * with the whole output as its arguments. *calls is NULL when a "required" output is not
 * whole JSON (cut by max_tokens or a stop string; or a number jansson cannot hold, like
 * an integer past 64 bits): it then stays content. 0, or -1 out of memory. */
int tool_calls_forced(bool required, const char *name, const char *text, size_t len, json_t **calls);
/* Streaming. Named: each piece is a tool_calls delta, the first with the call's id, type and
 * name, the next ones only more "arguments" (clients join them, as for vLLM's). "required":
 * nothing is content until the end (last), when *calls gets the calls or, when there are
 * none, *content gets the whole output. */
int tool_forced_feed(struct tool_split *s, bool required, const char *name, const char *text, size_t len, bool last,
		     struct strbuf *content, json_t **calls);

#endif
