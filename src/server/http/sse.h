/* Server-sent events framing (docs/reference.md C.4) into the byte buffer the HTTP layer streams from
 * (base/strbuf.h): every event is "data: <compact json>\n\n"; the stream ends with
 * "data: [DONE]\n\n". */
#ifndef MLA_SERVER_HTTP_SSE_H
#define MLA_SERVER_HTTP_SSE_H

#include <jansson.h>
#include <stddef.h>

#include "base/strbuf.h"

/* Appends one event: "data: " + compact JSON of obj + "\n\n". Steals nothing. */
int sse_event(struct strbuf *b, const json_t *obj);
int sse_done(struct strbuf *b); /* "data: [DONE]\n\n" */

#endif
