/* The growing byte buffer: NUL-terminated text (bytes may hold NULs too), with one
 * out-of-memory policy: an append that fails (out of memory, or past an optional size limit)
 * returns -1 and sets the sticky `oom`, after which every append does nothing. So a caller
 * checks each append, or appends freely and checks `oom` once at the end (text generators:
 * regexes built from bounds, grammars translated, JSON written). A streaming reader takes
 * bytes from the front (strbuf_take). */
#ifndef MLA_BASE_STRBUF_H
#define MLA_BASE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf {
	char *p; /* NULL until the first append */
	size_t n, cap;
	size_t limit; /* 0: none; an append past limit bytes fails as out of memory does */
	size_t off;   /* bytes already taken by a streaming reader */
	bool oom;     /* sticky: an append failed */
};

int strbuf_put(struct strbuf *b, const void *s, size_t k); /* 0, or -1 (oom set) */
/* Inline when there is room: byte-at-a-time writers (tokenizer) pay no call per byte. */
static inline int strbuf_putc(struct strbuf *b, char c)
{
	if (b->n + 2 <= b->cap && !b->oom && !b->limit) {
		b->p[b->n++] = c;
		b->p[b->n] = 0;
		return 0;
	}
	return strbuf_put(b, &c, 1);
}
int strbuf_puts(struct strbuf *b, const char *s);
int strbuf_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Bytes appended and not yet taken; strbuf_take moves up to max of them to dst and returns
 * how many (the buffer starts over when drained). */
/* Room for `extra` more bytes, so that appends totalling at most that do not move p (an
 * append may then copy from the buffer itself). 0, or -1 (oom set). */
int strbuf_reserve(struct strbuf *b, size_t extra);
size_t strbuf_unread(const struct strbuf *b);
size_t strbuf_take(struct strbuf *b, char *dst, size_t max);
void strbuf_fini(struct strbuf *b);

#endif
