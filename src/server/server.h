/* The OpenAI-compatible HTTP server (`mlaserve serve`): libmicrohttpd, one thread per
 * connection (bounded by max_connections), streaming through a blocking content reader.
 * Endpoints (spec C.1): GET /health /ping /version /v1/models /metrics, POST /ping
 * /v1/chat/completions /v1/completions /tokenize /detokenize. */
#ifndef MLA_SERVER_SERVER_H
#define MLA_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "engine/engine.h"

struct tok;
struct chat_template;

#define SERVER_MAX_NAMES 8

struct server_config {
	const char *host;		/* NULL or "": all interfaces (IPv4 0.0.0.0) */
	int port;			/* 0: any free port (see server_port) */
	const char *served_names[SERVER_MAX_NAMES]; /* first one is used in responses */
	int n_served_names;
	const char *model_root;		/* shown as "root" in /v1/models */
	const char *api_key;		/* NULL: no auth on the /v1 paths */
	size_t max_body_bytes;		/* larger request bodies get 413 */
	int conn_timeout_s;		/* idle / slow-client timeout per connection */
	int max_connections;		/* bound on connection threads */
	int max_n;			/* cap on choices per request */
	bool log_requests;		/* one access-log line per request */
	int reasoning_parser;		/* enum reasoning_parser (server/parsers/reasoning.h); 0: none */
	int tool_parser;		/* enum tool_parser (server/parsers/tool_calls.h); 0: none */
	bool auto_tool_choice;		/* parse tool calls when a request's tool_choice is "auto" */
	int max_logprobs;		/* --max-logprobs: cap on logprobs / top_logprobs (0: ENGINE_MAX_LOGPROBS) */
	bool prompt_tokens_details;	/* --enable-prompt-tokens-details: usage reports cached tokens */
	const char *tls_key_pem, *tls_cert_pem; /* HTTPS (server/http/tls.h); NULL: plain HTTP */
	int responses_store_size;	/* stored Responses kept (server/openai/resp_store.h); 0: none */
	/* CORS (server/http/cors.h): JSON lists, NULL = ["*"] */
	const char *allowed_origins, *allowed_methods, *allowed_headers;
	bool allow_credentials;
};

void server_config_init(struct server_config *c); /* port 8000, 16 MiB, 30 s, 1024, n <= 128, log */

struct server_deps {
	struct engine *eng;		  /* not owned */
	const struct tok *tok;		  /* not owned */
	const struct chat_template *tpl;  /* not owned; NULL: chat requests get 400 */
	const char *bos_token, *eos_token; /* template variables (may be NULL) */
	struct sampling_params defaults;  /* generation_config over OpenAI defaults */
	int vocab_size;			  /* token ids accepted in requests */
};

struct server;

/* Binds and starts serving. */
int server_start(const struct server_config *c, const struct server_deps *d,
		 struct server **out, struct err *e);
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
