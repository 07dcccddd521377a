/* A jansson value written as Python's json.dumps(value, ensure_ascii=False) writes it: ", "
 * and ": " separators, keys in their order, non-ASCII kept, control characters as lowercase
 * \u00xx, floats as Python's repr (the shortest text that reads back the same double:
 * 0.1, 100000.0, 1e-05, 1e+16). vLLM builds a forced tool call's arguments this way; the chat
 * templates' tojson writes its strings and floats with the same two leaf writers. */
#ifndef MLA_BASE_PYJSON_H
#define MLA_BASE_PYJSON_H

#include <jansson.h>
#include <stddef.h>

#include "base/strbuf.h"

/* Appends the text of v to out; 0, or -1 out of memory. */
int pyjson_dump(const json_t *v, struct strbuf *out);
/* The leaves: a string s[0..n) in double quotes, escaped as json.dumps(ensure_ascii=False)
 * does; a double as json.dumps writes a float (repr, NaN, Infinity, -Infinity). */
int pyjson_put_string(struct strbuf *out, const char *s, size_t n);
int pyjson_put_real(struct strbuf *out, double x);

#endif
