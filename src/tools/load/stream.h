/* Parser for one streamed OpenAI response (server-sent events, docs/reference.md C.4/C.5) as the
 * benchmark client receives it: bytes arrive in arbitrary pieces with their arrival time;
 * the parser assembles SSE events (data: lines up to a blank line), decodes each with
 * jansson and records the timing of content chunks, the usage chunk, error events and the
 * closing `data: [DONE]`.
 *
 * A "content chunk" is a choices[0] event carrying non-empty generated text: delta.content
 * (or delta.reasoning_content / delta.reasoning) for chat, text for completions. The role
 * chunk ({"role":"assistant","content":""}) and empty final chunks are not content. */
#ifndef MLA_TOOLS_LOAD_STREAM_H
#define MLA_TOOLS_LOAD_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "tools/load/stats.h"

struct bench_stream {
	bool chat; /* chat.completion.chunk (delta.content) vs text_completion (text) */
	double t_send;
	/* SSE assembly */
	char *line, *data;
	size_t line_len, line_cap, data_len, data_cap;
	bool have_data; /* at least one data: line in the pending event */
	bool after_cr;  /* the last byte was CR: a following LF ends nothing (CRLF) */
	char raw[2048]; /* the first bytes as received, for non-200 bodies */
	size_t raw_len;
	/* what was seen */
	int n_events, n_content;
	double t_first, t_last; /* first / latest content chunk */
	double t_first_choice;  /* first event with choices (fallback when no content) */
	double *itls;
	size_t n_itl, itl_cap;
	int usage_completion, usage_prompt; /* -1 until a usage object arrives */
	bool done;                          /* data: [DONE] seen */
	char *error;                        /* first error (error event / bad JSON), owned */
};

void bench_stream_init(struct bench_stream *s, bool chat, double t_send);
void bench_stream_fini(struct bench_stream *s);
/* Feeds received bytes; `now` is their arrival time (seconds, same clock as t_send).
 * Returns 0, or -1 on out-of-memory (then s->error says so). Malformed events do not fail
 * the call: they set s->error (the request counts as failed). */
int bench_stream_feed(struct bench_stream *s, const char *p, size_t n, double now);
/* Ends the stream at time `now` and fills r: success when the stream ended with [DONE],
 * had no error event and at least one content chunk or a usage count; otherwise r->error
 * names the reason ("stream ended without data: [DONE]", the server's error message, ...).
 * Moves the ITL array into r. http_status / transport_error are the transfer's outcome:
 * a non-200 status fails with "http STATUS: <error.message or body>" using the bytes fed;
 * transport_error (may be NULL) fails with that message. */
void bench_stream_finish(struct bench_stream *s, double now, long http_status, const char *transport_error,
			 struct bench_req_result *r);

/* Copies at most max bytes of s into a new printable ASCII string (other bytes become '?'),
 * so error messages are safe in a terminal and in JSON. NULL on out-of-memory. */
char *bench_clean_msg(const char *s, size_t len, size_t max);

#endif
