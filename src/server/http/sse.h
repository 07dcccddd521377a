/* Server-sent events framing (spec C.4) and the growable byte buffer the HTTP layer streams
 * from: every event is "data: <compact json>\n\n"; the stream ends with "data: [DONE]\n\n". */
#ifndef MLA_SERVER_SSE_H
#define MLA_SERVER_SSE_H

#include <jansson.h>
#include <stddef.h>

struct sbuf {
	char *data;
	size_t len, cap;
	size_t off; /* bytes already consumed by the reader (streaming) */
};

int sbuf_append(struct sbuf *b, const void *p, size_t n); /* 0 ok, -1 out of memory */
int sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Moves up to max unread bytes to dst; returns how many. Compacts the buffer when drained. */
size_t sbuf_take(struct sbuf *b, char *dst, size_t max);
size_t sbuf_unread(const struct sbuf *b);
void sbuf_fini(struct sbuf *b);

/* Appends one event: "data: " + compact JSON of obj + "\n\n". Steals nothing. */
int sse_event(struct sbuf *b, const json_t *obj);
int sse_done(struct sbuf *b); /* "data: [DONE]\n\n" */

#endif
