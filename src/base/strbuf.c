/* The growing byte buffer (base/strbuf.h). */
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int strbuf_reserve(struct strbuf *b, size_t k)
{
	if (b->oom)
		return -1;
	if ((b->limit && b->n + k > b->limit) || k > SIZE_MAX / 2 - b->n) {
		b->oom = true;
		return -1;
	}
	if (b->n + k + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + k + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return -1;
		}
		b->p = p;
		b->cap = cap;
	}
	return 0;
}

int strbuf_put(struct strbuf *b, const void *s, size_t k)
{
	if (strbuf_reserve(b, k))
		return -1;
	if (k)
		memcpy(b->p + b->n, s, k);
	b->n += k;
	b->p[b->n] = 0;
	return 0;
}

int strbuf_puts(struct strbuf *b, const char *s) { return strbuf_put(b, s, strlen(s)); }

int strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if ((size_t)n < sizeof tmp)
		return strbuf_put(b, tmp, (size_t)n);
	char *big = malloc((size_t)n + 1);
	if (!big) {
		b->oom = true;
		return -1;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	int rc = strbuf_put(b, big, (size_t)n);
	free(big);
	return rc;
}

size_t strbuf_unread(const struct strbuf *b) { return b->n - b->off; }

size_t strbuf_take(struct strbuf *b, char *dst, size_t max)
{
	size_t n = strbuf_unread(b);
	if (n > max)
		n = max;
	if (n)
		memcpy(dst, b->p + b->off, n);
	b->off += n;
	if (b->off == b->n)
		b->off = b->n = 0;
	return n;
}

void strbuf_fini(struct strbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}
