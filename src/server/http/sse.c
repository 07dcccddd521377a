#include "server/http/sse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sbuf_append(struct sbuf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
	return 0;
}

int sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if ((size_t)n < sizeof tmp)
		return sbuf_append(b, tmp, (size_t)n);
	char *big = malloc((size_t)n + 1);
	if (!big)
		return -1;
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	int rc = sbuf_append(b, big, (size_t)n);
	free(big);
	return rc;
}

size_t sbuf_unread(const struct sbuf *b)
{
	return b->len - b->off;
}

size_t sbuf_take(struct sbuf *b, char *dst, size_t max)
{
	size_t n = sbuf_unread(b);
	if (n > max)
		n = max;
	memcpy(dst, b->data + b->off, n);
	b->off += n;
	if (b->off == b->len)
		b->off = b->len = 0;
	return n;
}

void sbuf_fini(struct sbuf *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}

static int dump_cb(const char *buf, size_t size, void *data)
{
	return sbuf_append(data, buf, size);
}

int sse_event(struct sbuf *b, const json_t *obj)
{
	if (sbuf_append(b, "data: ", 6) < 0)
		return -1;
	if (json_dump_callback(obj, dump_cb, b, JSON_COMPACT) < 0)
		return -1;
	return sbuf_append(b, "\n\n", 2);
}

int sse_done(struct sbuf *b)
{
	return sbuf_append(b, "data: [DONE]\n\n", 14);
}
