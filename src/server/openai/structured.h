/* Structured outputs in requests (vLLM's fields) → one guide grammar (guide/grammar.h):
 *   response_format {"type": "json_object"} or {"type": "json_schema", "json_schema":
 *   {"schema": ...}}, guided_json (a schema, as an object or as JSON text), guided_choice,
 *   guided_regex, guided_grammar (GBNF / EBNF: guide/cfg.h), structured_outputs {"json" |
 *   "choice" | "regex" | "grammar" | "json_object"}, and for chat tool_choice
 *   "required" (a JSON array of {"name", "parameters"} calls, as vLLM builds it) or a named
 *   function (that function's arguments object).
 * structured_outputs.structural_tag is refused (400), as are two kinds of structured output
 * in one request.
 * Pure: no engine, no tokenizer (tests/unit/test_server_structured.c). */
#ifndef MLA_SERVER_OPENAI_STRUCTURED_H
#define MLA_SERVER_OPENAI_STRUCTURED_H

#include <jansson.h>
#include <stdbool.h>

#include "guide/grammar.h"
#include "server/openai/errors.h"

enum srv_forced_tools {
	SRV_TOOLS_FREE = 0, /* no forced call (tool_choice none / auto / unset) */
	SRV_TOOLS_REQUIRED, /* the output is [{"name": ..., "parameters": {...}}, ...] */
	SRV_TOOLS_NAMED,    /* the output is the named function's arguments */
};

#define SRV_MAX_FORCED_TOOLS GUIDE_MAX_ALTS /* tools with tool_choice "required": one anyOf alternative each */

struct srv_structured {
	struct guide_grammar *guide; /* own reference, NULL: free output */
	enum srv_forced_tools forced;
	const char *forced_name; /* NAMED: points into the body */
};

/* chat: tool_choice is looked at (api_chat true). On failure *ae holds a 400 naming the field
 * and *out is empty. */
int srv_structured_parse(const json_t *body, bool api_chat, struct srv_structured *out, struct api_error *ae);
void srv_structured_fini(struct srv_structured *s);

#endif
