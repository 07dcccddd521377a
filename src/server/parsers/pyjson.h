/* A jansson value written as Python's json.dumps(value, ensure_ascii=False) writes it: ", "
 * and ": " separators, keys in their order, non-ASCII kept, control characters as lowercase
 * \u00xx, floats as Python's repr (the shortest text that reads back the same double:
 * 0.1, 100000.0, 1e-05, 1e+16). vLLM builds a forced tool call's arguments this way. */
#ifndef MLA_SERVER_PYJSON_H
#define MLA_SERVER_PYJSON_H

#include <jansson.h>

#include "server/http/sse.h"

/* Appends the text of v to out; 0, or -1 out of memory. */
int pyjson_dump(const json_t *v, struct strbuf *out);

#endif
