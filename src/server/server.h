/* The OpenAI-compatible HTTP server (`mlaserve serve`): libmicrohttpd, one thread per
 * connection (bounded by max_connections), streaming through a blocking content reader.
 * Endpoints (docs/reference.md C.1): GET /health /ping /version /v1/models /metrics, POST /ping
 * /v1/chat/completions /v1/completions /tokenize /detokenize.
 *
 * Three folders: http/ is the transport and includes only base/ (it calls the protocol through
 * struct http_handler: on_request, error_body, on_stop; streams through http_reply_stream);
 * openai/ is the protocol (routes.c is the handler; struct server, openai/state.h, owns the
 * http_server); parsers/ splits the output text (reasoning, tool calls). server.c wires openai/
 * into http/. max_tokens is stored once: sampling_params.max_tokens is the request's own value
 * or -1 (an explicit one must fit the context), the generation_config default is filled in at
 * submission (generate.c) and the engine caps it; engine_submit checks every sampling
 * parameter as its invariant. */
#ifndef MLA_SERVER_SERVER_H
#define MLA_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* struct server_config, struct server_deps: what the OpenAI server is configured with */
#include "server/openai/config.h"

void server_config_init(struct server_config *c); /* port 8000, 16 MiB, 30 s, 1024, n <= 128, log */

struct server;

/* Binds and starts serving. */
int server_start(const struct server_config *c, const struct server_deps *d, struct server **out, struct err *e);
int server_port(const struct server *s); /* the bound port */
/* Graceful stop: stop accepting, abort in-flight requests (streams end with finish_reason
 * "abort" and [DONE]), wait for connection threads, free. Call before engine_free. */
void server_stop(struct server *s);

/* The engine can go on no more (a rank died): every open stream gets an error event and
 * [DONE], every request waiting for its answer a 500 JSON error, new ones a 503; then
 * server_wait_idle waits (up to timeout_s) until each of them has been answered. The caller
 * exits without server_stop (the engine may be stuck in a collective with the dead rank). */
void server_fail(struct server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool server_wait_idle(struct server *s, double timeout_s);

/* Totals for the periodic throughput log line. */
struct server_counters {
	unsigned long long requests, errors;
};
void server_counters_get(struct server *s, struct server_counters *c);

#endif
