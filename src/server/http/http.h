/* The HTTP transport: libmicrohttpd (a thread per connection, bounded), our framing relay in
 * front of it for plain HTTP (server/http/relay.c), TLS, request bodies under a size limit,
 * CORS, replies and SSE streaming through a blocking content reader, client liveness.
 *
 * It knows nothing of the API it serves: a struct http_handler answers each complete
 * request (routing, authentication, bodies), writes the JSON body of the errors the
 * transport answers itself (framing, body limits, CORS refusals) and aborts in-flight work
 * at stop. Depends on base only (plus libmicrohttpd, jansson). */
#ifndef MLA_SERVER_HTTP_HTTP_H
#define MLA_SERVER_HTTP_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "server/http/sse.h"

struct http_server;

struct http_config {
	const char *host;                       /* NULL or "": all interfaces (IPv4 0.0.0.0) */
	int port;                               /* 0: any free port (see http_port) */
	const char *tls_key_pem, *tls_cert_pem; /* HTTPS; NULL: plain HTTP behind the relay */
	size_t max_body_bytes;                  /* larger request bodies get 413 */
	int conn_timeout_s;                     /* idle / slow-client timeout per connection */
	int max_connections;                    /* bound on connection threads */
	bool log_requests;                      /* one access-log line per request */
	/* CORS (server/http/cors.h): JSON lists, NULL = ["*"] */
	const char *allowed_origins, *allowed_methods, *allowed_headers;
	bool allow_credentials;
};

/* One HTTP request; reference counted because a streaming response outlives the access
 * handler call (freed, and its access-log line written, when the last holder lets go). */
struct hreq {
	atomic_int refs;
	struct http_server *hs;
	struct MHD_Connection *conn;
	char method[16];
	char path[128];
	struct strbuf body;
	unsigned long long body_seen; /* bytes received, kept or not */
	bool too_large, answered;
	bool close_after;  /* the reply says Connection: close (a framing error) */
	bool preflight;    /* a CORS preflight (server/http/cors.h) */
	const char *allow; /* a 405's Allow header (set by the handler) */
	double t_start;    /* monotonic seconds */
	int status;
	/* for the access log, filled by the handler */
	char id[64]; /* chatcmpl-/cmpl- id */
	long prompt_tokens, completion_tokens;
	double ttft; /* seconds, < 0 when no token was produced */
};

/* What the transport calls; every callback gets ctx. */
struct http_handler {
	void *ctx;
	/* a complete request (body read and within the limit, not a CORS preflight): answer
	 * it with one of the http_reply_* (their result is the return value) */
	enum MHD_Result (*on_request)(void *ctx, struct hreq *r);
	/* the malloc'd, NUL-terminated JSON body of an error the transport answers itself;
	 * *len gets its length; NULL: out of memory */
	char *(*error_body)(void *ctx, int status, const char *msg, size_t *len);
	/* at stop, once no new connection is accepted and before the live ones are closed:
	 * abort in-flight requests and give their answers a few seconds to finish */
	void (*on_stop)(void *ctx);
};

/* Binds and starts serving (the handler is copied). */
int http_start(const struct http_config *c, const struct http_handler *h, struct http_server **out, struct err *e);
int http_port(const struct http_server *hs); /* the bound port */
/* Stops accepting, calls on_stop, closes the connections, waits for the relays. */
void http_stop(struct http_server *hs);
/* Frees a stopped server; false (and nothing freed) while a relay thread still holds it. */
bool http_free(struct http_server *hs);
void http_counters_get(struct http_server *hs, unsigned long long *requests, unsigned long long *errors);

void hreq_unref(struct hreq *r);

/* Replies (the access handler's return value). */
/* A JSON value (stolen) as the body. */
enum MHD_Result http_reply_json(struct hreq *r, int status, json_t *json);
/* A malloc'd body (consumed) of len bytes, served as application/json; 5xx are logged with
 * msg. NULL body: out of memory (the connection closes). */
enum MHD_Result http_reply_json_body(struct hreq *r, int status, char *body, size_t len, const char *msg);
enum MHD_Result http_reply_text(struct hreq *r, int status, const char *ctype, const char *text, size_t len);

/* Streaming responses: http.c calls pump until it returns 1 (everything appended to out),
 * sending what accumulates; close runs once at the end (completed false when the client
 * went away or the connection failed). */
struct http_stream_ops {
	int (*pump)(void *ctx, struct strbuf *out, int timeout_ms);
	void (*close)(void *ctx, bool completed);
};
enum MHD_Result http_reply_stream(struct hreq *r, const struct http_stream_ops *ops, void *ctx);

/* false once the peer closed its end of the connection */
bool http_client_alive(struct hreq *r);
const char *http_header(struct hreq *r, const char *name);
const char *http_query_arg(struct hreq *r, const char *name); /* ?name=value, or NULL */

#endif
