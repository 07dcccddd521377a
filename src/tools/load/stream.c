#include "tools/load/stream.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_MAX_EVENT (64u << 20) /* a longer line / event is an error, not a reallocation */

void bench_stream_init(struct bench_stream *s, bool chat, double t_send)
{
	memset(s, 0, sizeof *s);
	s->chat = chat;
	s->t_send = t_send;
	s->usage_completion = s->usage_prompt = -1;
}

void bench_stream_fini(struct bench_stream *s)
{
	free(s->line);
	free(s->data);
	free(s->itls);
	free(s->error);
	memset(s, 0, sizeof *s);
}

char *bench_clean_msg(const char *p, size_t len, size_t max)
{
	size_t n = len < max ? len : max;
	bool cut = len > max;
	char *o = malloc(n + 4);
	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		o[i] = c == '\n' || c == '\r' || c == '\t' ? ' ' : (c < 0x20 || c > 0x7e ? '?' : (char)c);
	}
	if (cut)
		memcpy(o + n, "...", 3), n += 3;
	o[n] = 0;
	return o;
}

/* Records the first error only: later ones are usually consequences of it. */
static void set_error(struct bench_stream *s, const char *fmt, const char *arg, size_t arg_len)
{
	if (s->error)
		return;
	char *clean = bench_clean_msg(arg ? arg : "", arg ? arg_len : 0, 300);
	size_t n = strlen(fmt) + (clean ? strlen(clean) : 0) + 1;
	s->error = malloc(n);
	if (s->error)
		snprintf(s->error, n, fmt, clean ? clean : "");
	free(clean);
}

static int grow(char **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	char *p = realloc(*buf, c);
	if (!p)
		return -1;
	*buf = p;
	*cap = c;
	return 0;
}

/* Error text of an error object: {"error":{"message":..}}, {"error":"..."} or the older
 * {"object":"error","message":..}. NULL when o is not an error. */
static const char *error_text(const json_t *o)
{
	const json_t *err = json_object_get(o, "error");
	if (json_is_string(err))
		return json_string_value(err);
	if (json_is_object(err)) {
		const json_t *msg = json_object_get(err, "message");
		return json_is_string(msg) ? json_string_value(msg) : "(error without a message)";
	}
	const json_t *obj = json_object_get(o, "object");
	if (json_is_string(obj) && !strcmp(json_string_value(obj), "error")) {
		const json_t *msg = json_object_get(o, "message");
		return json_is_string(msg) ? json_string_value(msg) : "(error without a message)";
	}
	return NULL;
}

static const char *chunk_text(const struct bench_stream *s, const json_t *choice)
{
	if (!s->chat) {
		const json_t *t = json_object_get(choice, "text");
		return json_is_string(t) ? json_string_value(t) : NULL;
	}
	const json_t *delta = json_object_get(choice, "delta");
	static const char *const keys[] = {"content", "reasoning_content", "reasoning"};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		const json_t *t = json_object_get(delta, keys[i]);
		if (json_is_string(t) && json_string_length(t) > 0)
			return json_string_value(t);
	}
	return NULL;
}

static int handle_event(struct bench_stream *s, const char *data, size_t len, double now)
{
	s->n_events++;
	if (len == 6 && !memcmp(data, "[DONE]", 6)) {
		s->done = true;
		return 0;
	}
	json_error_t je;
	json_t *o = json_loadb(data, len, JSON_ALLOW_NUL, &je);
	if (!o || !json_is_object(o)) {
		set_error(s, "malformed stream event: %s", data, len);
		json_decref(o);
		return 0;
	}
	const char *etext = error_text(o);
	if (etext)
		set_error(s, "error event: %s", etext, strlen(etext));
	const json_t *choices = json_object_get(o, "choices");
	if (json_is_array(choices) && json_array_size(choices) > 0) {
		const json_t *c0 = json_array_get(choices, 0);
		if (s->t_first_choice == 0)
			s->t_first_choice = now;
		const char *text = chunk_text(s, c0);
		if (text && text[0]) {
			if (s->n_content == 0) {
				s->t_first = now;
			} else {
				if (s->n_itl == s->itl_cap) {
					size_t c = s->itl_cap ? 2 * s->itl_cap : 64;
					double *p = realloc(s->itls, c * sizeof *p);
					if (!p) {
						json_decref(o);
						return -1;
					}
					s->itls = p;
					s->itl_cap = c;
				}
				s->itls[s->n_itl++] = now - s->t_last;
			}
			s->t_last = now;
			s->n_content++;
		}
	}
	const json_t *usage = json_object_get(o, "usage");
	if (json_is_object(usage)) {
		const json_t *ct = json_object_get(usage, "completion_tokens");
		const json_t *pt = json_object_get(usage, "prompt_tokens");
		if (json_is_integer(ct))
			s->usage_completion = (int)json_integer_value(ct);
		if (json_is_integer(pt))
			s->usage_prompt = (int)json_integer_value(pt);
	}
	json_decref(o);
	return 0;
}

static int dispatch(struct bench_stream *s, double now)
{
	if (!s->have_data)
		return 0;
	size_t n = s->data_len;
	if (n > 0 && s->data[n - 1] == '\n') /* the data buffer ends with one extra LF */
		n--;
	s->data[n] = 0;
	int rc = handle_event(s, s->data, n, now);
	s->data_len = 0;
	s->have_data = false;
	return rc;
}

/* One complete line (without its terminator). */
static int handle_line(struct bench_stream *s, double now)
{
	const char *l = s->line;
	size_t n = s->line_len;
	if (n == 0)
		return dispatch(s, now);
	if (l[0] == ':') /* comment */
		return 0;
	const char *colon = memchr(l, ':', n);
	size_t name_len = colon ? (size_t)(colon - l) : n;
	if (name_len != 4 || memcmp(l, "data", 4)) /* event:, id:, retry: do not matter here */
		return 0;
	const char *v = colon ? colon + 1 : l + n;
	if (v < l + n && *v == ' ')
		v++;
	size_t vlen = (size_t)(l + n - v);
	if (s->data_len + vlen + 2 > STREAM_MAX_EVENT) {
		set_error(s, "stream event longer than 64 MiB%s", NULL, 0);
		return 0;
	}
	if (grow(&s->data, &s->data_cap, s->data_len + vlen + 2) < 0)
		return -1;
	memcpy(s->data + s->data_len, v, vlen);
	s->data_len += vlen;
	s->data[s->data_len++] = '\n';
	s->have_data = true;
	return 0;
}

int bench_stream_feed(struct bench_stream *s, const char *p, size_t n, double now)
{
	size_t keep = sizeof s->raw - 1 - s->raw_len;
	keep = n < keep ? n : keep;
	memcpy(s->raw + s->raw_len, p, keep);
	s->raw_len += keep;
	s->raw[s->raw_len] = 0;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		bool after_cr = s->after_cr;
		s->after_cr = c == '\r';
		if (c == '\n' && after_cr) /* CRLF: the CR already ended the line */
			continue;
		if (c == '\r' || c == '\n') {
			if (handle_line(s, now) < 0)
				goto oom;
			s->line_len = 0;
			continue;
		}
		if (s->line_len + 2 > STREAM_MAX_EVENT) {
			set_error(s, "stream line longer than 64 MiB%s", NULL, 0);
			s->line_len = 0;
			continue;
		}
		if (grow(&s->line, &s->line_cap, s->line_len + 2) < 0)
			goto oom;
		s->line[s->line_len++] = c;
	}
	return 0;
oom:
	set_error(s, "out of memory reading the stream%s", NULL, 0);
	return -1;
}

/* Sets r->error to a printf-style message (cleaned by the callers' inputs). */
static void result_error(struct bench_req_result *r, const char *prefix, const char *msg, size_t msg_len)
{
	char *clean = bench_clean_msg(msg ? msg : "", msg ? msg_len : 0, 300);
	size_t n = strlen(prefix) + (clean ? strlen(clean) : 0) + 1;
	free(r->error);
	r->error = malloc(n);
	if (r->error)
		snprintf(r->error, n, "%s%s", prefix, clean ? clean : "");
	free(clean);
}

void bench_stream_finish(struct bench_stream *s, double now, long http_status, const char *transport_error,
			 struct bench_req_result *r)
{
	/* An event the server did not close with a blank line is still counted. */
	if (s->line_len > 0)
		handle_line(s, now);
	s->line_len = 0;
	dispatch(s, now);

	r->success = false;
	r->e2e = now - s->t_send;
	r->server_prompt_tokens = s->usage_prompt;
	r->output_len = s->usage_completion >= 0 ? s->usage_completion : s->n_content;
	r->ttft = s->n_content > 0        ? s->t_first - s->t_send
		  : s->t_first_choice > 0 ? s->t_first_choice - s->t_send
					  : 0;
	free(r->itls);
	r->itls = s->itls;
	r->n_itl = s->n_itl;
	s->itls = NULL;
	s->n_itl = s->itl_cap = 0;
	free(r->error);
	r->error = NULL;

	if (transport_error) {
		result_error(r, "", transport_error, strlen(transport_error));
		return;
	}
	if (http_status != 200) {
		char prefix[48];
		snprintf(prefix, sizeof prefix, "http %ld: ", http_status);
		json_t *o = json_loadb(s->raw, s->raw_len, 0, NULL);
		const char *msg = json_is_object(o) ? error_text(o) : NULL;
		if (msg)
			result_error(r, prefix, msg, strlen(msg));
		else
			result_error(r, prefix, s->raw, s->raw_len);
		json_decref(o);
		return;
	}
	if (s->error) {
		result_error(r, "", s->error, strlen(s->error));
		return;
	}
	if (!s->done) {
		result_error(r, "stream ended without data: [DONE]", NULL, 0);
		return;
	}
	if (r->output_len <= 0) {
		result_error(r, "stream ended without generated tokens", NULL, 0);
		return;
	}
	r->success = true;
}
