#include "server/http/sse.h"

static int dump_cb(const char *buf, size_t size, void *data) { return strbuf_put(data, buf, size); }

int sse_event(struct strbuf *b, const json_t *obj)
{
	if (strbuf_put(b, "data: ", 6) < 0)
		return -1;
	if (json_dump_callback(obj, dump_cb, b, JSON_COMPACT) < 0)
		return -1;
	return strbuf_put(b, "\n\n", 2);
}

int sse_done(struct strbuf *b) { return strbuf_put(b, "data: [DONE]\n\n", 14); }
