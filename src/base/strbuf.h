/* A growing NUL-terminated text whose appends never fail one by one: out of memory is
 * remembered (oom) and checked once at the end, which keeps text generators (regexes built
 * from bounds, grammars translated) free of an error path per append. */
#ifndef MLA_BASE_STRBUF_H
#define MLA_BASE_STRBUF_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct strbuf {
	char *p; /* NULL until the first append */
	size_t n, cap;
	bool oom;
};

static inline void strbuf_put(struct strbuf *b, const char *s, size_t k)
{
	if (b->oom)
		return;
	if (b->n + k + 1 > b->cap) {
		size_t cap = 2 * (b->n + k + 1) + 64;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, k);
	b->n += k;
	b->p[b->n] = 0;
}

static inline void strbuf_puts(struct strbuf *b, const char *s) { strbuf_put(b, s, strlen(s)); }

#endif
