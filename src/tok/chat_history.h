/* The chat history as vLLM hands it to a chat template (its chat_utils: parse_chat_messages and
 * _postprocess_messages), and vLLM's detection of the template's "content format".
 *
 * Content format "string": a message's content reaches the template as one string (text parts
 * joined with "\n"; null or absent content is ""). "openai": as a list of {"type": "text",
 * "text": ...} parts (a string is one part, null or absent is []), except a tool message's
 * all-text list, joined back into a string. */
#ifndef MLA_TOK_CHAT_HISTORY_H
#define MLA_TOK_CHAT_HISTORY_H

#include <stdbool.h>

#include <jansson.h>

#include "base/err.h"

enum chat_content_format {
	CHAT_CONTENT_AUTO, /* a flag's value only: resolved from the template */
	CHAT_CONTENT_STRING,
	CHAT_CONTENT_OPENAI,
};

/* "auto" / "string" / "openai" -> *out; -1 with e set otherwise */
int chat_content_format_parse(const char *s, enum chat_content_format *out, struct err *e);
const char *chat_content_format_name(enum chat_content_format f);

struct jnode;
/* vLLM's resolve_chat_template_content_format on a parsed template: "openai" when some
 * {% for x in M['content'] %} (or M.content, through filters, tests and slices) loops over the
 * content of M, a loop variable over `messages` or over a variable set from it; else "string". */
enum chat_content_format chat_content_format_detect(const struct jnode *root);

/* *out = a new copy of `messages` (an array of objects) as vLLM renders it in format `fmt`
 * (STRING or OPENAI): contents as above; an assistant message's empty tool_calls list dropped;
 * each tool call's function.arguments, a JSON string, decoded (into whatever JSON value it
 * holds; a string that is not JSON becomes {}, as does an arguments that is neither a string,
 * an object nor an array) unless keep_arguments (then left as sent). Content parts other than
 * text are an error (-1, e set). *decoded (may be NULL): whether some arguments were decoded. */
int chat_history_vllm(const json_t *messages, enum chat_content_format fmt, bool keep_arguments, json_t **out,
		      bool *decoded, struct err *e);

#endif
