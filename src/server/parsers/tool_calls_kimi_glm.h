/* The relatives' tool-call formats (tool_calls.h): Kimi K2's and GLM-4.7/5's. Internal to
 * server/parsers. */
#ifndef MLA_SERVER_PARSERS_TOOL_CALLS_KIMI_GLM_H
#define MLA_SERVER_PARSERS_TOOL_CALLS_KIMI_GLM_H

#include <jansson.h>

#define KIMI_SECTION_BEGIN "<|tool_calls_section_begin|>"
#define GLM_CALL_BEGIN "<tool_call>"

/* The calls in [p, end) (p at the tag that opens them) appended to calls. 0, -1 out of memory. */
int kimi_k2_calls(const char *p, const char *end, json_t *calls);
/* tools: the request's tools array (NULL: none), for the parameters' types */
int glm47_calls(const char *p, const char *end, const json_t *tools, json_t *calls);

#endif
