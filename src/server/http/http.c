/* libmicrohttpd plumbing: the daemon (thread per connection, bounded), request bodies with a
 * size limit, replies, streaming through a blocking content reader, client liveness; every
 * complete request goes to the handler (server/http/http.h). */
#include "server/http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mono.h"
#include "server/http/cors.h"
#include "server/http/framing.h"
#include "server/http/http_internal.h"

/* Access log: one line per request when its last reference goes. */
void hreq_unref(struct hreq *r)
{
	if (atomic_fetch_sub(&r->refs, 1) != 1)
		return;
	double total = mono_now_s() - r->t_start;
	char ttft[32] = "-";
	if (r->ttft >= 0)
		snprintf(ttft, sizeof ttft, "%.3fs", r->ttft);
	if (r->hs->cfg.log_requests)
		LOG_I("http", "%s %s %d id=%s prompt_tokens=%ld completion_tokens=%ld ttft=%s total=%.3fs", r->method,
		      r->path, r->status, r->id[0] ? r->id : "-", r->prompt_tokens, r->completion_tokens, ttft, total);
	if (r->status >= 400)
		atomic_fetch_add(&r->hs->n_errors, 1);
	strbuf_fini(&r->body);
	free(r);
}

const char *http_header(struct hreq *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *http_query_arg(struct hreq *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

enum MHD_Result http_queue(struct hreq *r, int status, struct MHD_Response *resp, const char *ctype)
{
	if (!resp)
		return MHD_NO; /* out of memory: MHD closes the connection */
	if (ctype)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (status == 405)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow ? r->allow : "GET");
	if (status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (r->close_after)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	cors_add_headers(&r->hs->cors, r, resp);
	r->status = status;
	r->answered = true;
	enum MHD_Result rc = MHD_queue_response(r->conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return rc;
}

enum MHD_Result http_reply_text(struct hreq *r, int status, const char *ctype, const char *text, size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
	return http_queue(r, status, resp, ctype);
}

enum MHD_Result http_reply_json(struct hreq *r, int status, json_t *json)
{
	char *body = json ? json_dumps(json, JSON_COMPACT) : NULL;
	json_decref(json);
	if (!body)
		return http_reply_error(r, 500, "out of memory building the response");
	struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!resp)
		free(body);
	return http_queue(r, status, resp, "application/json");
}

enum MHD_Result http_reply_json_body(struct hreq *r, int status, char *body, size_t len, const char *msg)
{
	if (!body)
		return MHD_NO;
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!resp)
		free(body);
	if (status >= 500)
		LOG_W("http", "%s %s: %d %s", r->method, r->path, status, msg);
	return http_queue(r, status, resp, "application/json");
}

/* The message is cut as struct api_error cuts it (1023 bytes), so the body is the same
 * whichever layer answers. */
enum MHD_Result http_reply_error(struct hreq *r, int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	size_t len = 0;
	char *body = r->hs->h.error_body(r->hs->h.ctx, status, msg, &len);
	return http_reply_json_body(r, status, body, len, msg);
}

bool http_client_alive(struct hreq *r)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return true;
	char c;
	ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		return false; /* orderly shutdown by the peer */
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		return false; /* reset */
	return true;
}

/* ---- streaming ---- */

struct hstream {
	struct hreq *r;
	const struct http_stream_ops *ops;
	void *ctx;
	struct strbuf out;
	bool complete;
};

/* An SSE comment, which clients skip: sent when a stream has had nothing to send for half the
 * connection timeout (a request queued behind others, a long prefill), because libmicrohttpd
 * closes a connection idle that long even while this callback waits on the engine (a 30 s
 * wait for the first token cut the answer, empty, at the default --http-timeout 30). A client
 * that stops reading still times out: nothing can be written to it. */
static const char KEEPALIVE[] = ": keep-alive\n\n";

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct hstream *st = cls;
	int timeout_s = st->r->hs->cfg.conn_timeout_s;
	double t0 = mono_now_s();
	for (;;) {
		if (strbuf_unread(&st->out))
			return (ssize_t)strbuf_take(&st->out, buf, max);
		if (st->complete)
			return MHD_CONTENT_READER_END_OF_STREAM;
		int rc = st->ops->pump(st->ctx, &st->out, 200);
		if (rc < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (rc == 1)
			st->complete = true;
		else if (!strbuf_unread(&st->out) && !http_client_alive(st->r))
			return MHD_CONTENT_READER_END_WITH_ERROR; /* client gone: close() cancels */
		else if (!strbuf_unread(&st->out) && timeout_s > 0 && mono_now_s() - t0 >= timeout_s / 2.0 &&
			 max >= sizeof KEEPALIVE - 1) {
			memcpy(buf, KEEPALIVE, sizeof KEEPALIVE - 1);
			return (ssize_t)(sizeof KEEPALIVE - 1);
		}
	}
}

static void stream_free(void *cls)
{
	struct hstream *st = cls;
	st->ops->close(st->ctx, st->complete && !strbuf_unread(&st->out));
	strbuf_fini(&st->out);
	hreq_unref(st->r);
	free(st);
}

enum MHD_Result http_reply_stream(struct hreq *r, const struct http_stream_ops *ops, void *ctx)
{
	struct hstream *st = calloc(1, sizeof *st);
	if (!st) {
		ops->close(ctx, false);
		return MHD_NO;
	}
	st->r = r;
	st->ops = ops;
	st->ctx = ctx;
	atomic_fetch_add(&r->refs, 1);
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st,
								      stream_free);
	if (!resp) {
		stream_free(st);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	return http_queue(r, 200, resp, "text/event-stream; charset=utf-8");
}

/* ---- framing ---- */

/* The relay's marker (server/http/framing.h) in a head or a chunked body's trailer: its error. */
static bool relay_error(struct hreq *r, enum MHD_ValueKind kind, int *status, const char **msg)
{
	const char *v = MHD_lookup_connection_value(r->conn, kind, HFRAME_MARK);
	return v && r->hs->relay_on && hframe_mark_parse(v, r->hs->framing_secret, status, msg);
}

struct framing_count {
	int n_cl, n_te, n_host;
	const char *cl, *te;
	bool cl_differ;
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct framing_count *fc = cls;
	if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
		if (fc->n_cl++ && strcmp(fc->cl, value))
			fc->cl_differ = true;
		fc->cl = value;
	} else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
		fc->n_te++;
		fc->te = value;
	} else if (!strcasecmp(key, MHD_HTTP_HEADER_HOST)) {
		fc->n_host++;
	}
	return MHD_YES;
}

/* What libmicrohttpd lets through but RFC 9112 does not (the relay refuses these before,
 * this is for connections without it: TLS): conflicting Content-Length headers (it takes
 * the first, and the rest of the bytes would run as another request), a transfer coding
 * other than chunked (it would wait for the connection's end), both framings, two Hosts. */
struct framing_err {
	int status;
	char msg[128];
};

static int framing_fail(struct framing_err *fe, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int framing_fail(struct framing_err *fe, int status, const char *fmt, ...)
{
	fe->status = status;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(fe->msg, sizeof fe->msg, fmt, ap);
	va_end(ap);
	return -1;
}

static int framing_check(struct hreq *r, struct framing_err *fe)
{
	struct framing_count fc = {0};
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_header, &fc);
	if (fc.cl_differ)
		return framing_fail(fe, 400, "conflicting Content-Length values");
	if (fc.n_te && (fc.n_te > 1 || strcasecmp(fc.te, "chunked")))
		return framing_fail(fe, 501, "Transfer-Encoding '%.40s' is not supported (only chunked is)", fc.te);
	if (fc.n_te && fc.n_cl)
		return framing_fail(fe, 400, "both Transfer-Encoding and Content-Length");
	if (fc.n_host > 1)
		return framing_fail(fe, 400, "more than one Host header");
	return 0;
}

/* ---- the access handler ---- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **req_cls)
{
	struct http_server *s = cls;
	struct hreq *r = *req_cls;
	if (!r) {
		r = calloc(1, sizeof *r);
		if (!r)
			return MHD_NO;
		atomic_init(&r->refs, 1);
		r->hs = s;
		r->conn = conn;
		r->t_start = mono_now_s();
		r->ttft = -1;
		snprintf(r->method, sizeof r->method, "%s", method);
		/* path without the query string */
		size_t n = strcspn(url, "?");
		snprintf(r->path, sizeof r->path, "%.*s", (int)(n < sizeof r->path ? n : sizeof r->path - 1), url);
		*req_cls = r;
		atomic_fetch_add(&s->n_requests, 1);
		int fstatus;
		const char *fmsg;
		struct framing_err fe;
		if (relay_error(r, MHD_HEADER_KIND, &fstatus, &fmsg)) {
			r->close_after = true;
			return http_reply_error(r, fstatus, "%s", fmsg);
		}
		if (framing_check(r, &fe) < 0) {
			r->close_after = true;
			return http_reply_error(r, fe.status, "%s", fe.msg);
		}
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl) {
			unsigned long long len = strtoull(cl, NULL, 10);
			if (len > s->cfg.max_body_bytes) {
				r->too_large = true;
				/* Far too large: answer now, MHD closes the connection after the
				 * reply instead of reading the body. Moderately large bodies are
				 * drained first so the client reliably reads the 413. */
				if (len > 4 * (unsigned long long)s->cfg.max_body_bytes)
					return http_reply_error(r, 413,
								"request body of %llu bytes exceeds the limit of "
								"%zu bytes",
								len, s->cfg.max_body_bytes);
			}
		}
		return MHD_YES;
	}
	if (r->answered) { /* a reply was queued early; discard the rest */
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		r->body_seen += *upload_size;
		if (r->body_seen > 4 * (unsigned long long)s->cfg.max_body_bytes) {
			/* an endless (chunked) body: stop draining, answer, close */
			*upload_size = 0;
			return http_reply_error(r, 413, "request body exceeds the limit of %zu bytes",
						s->cfg.max_body_bytes);
		}
		if (!r->too_large && r->body.n + *upload_size > s->cfg.max_body_bytes) {
			r->too_large = true;
			strbuf_fini(&r->body);
		}
		if (!r->too_large && strbuf_put(&r->body, upload, *upload_size) < 0)
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	int fstatus;
	const char *fmsg;
	if (relay_error(r, MHD_FOOTER_KIND, &fstatus, &fmsg)) {
		r->close_after = true;
		return http_reply_error(r, fstatus, "%s", fmsg);
	}
	if (r->too_large)
		return http_reply_error(r, 413, "request body exceeds the limit of %zu bytes", s->cfg.max_body_bytes);
	int rc;
	if (cors_preflight(&s->cors, r, &rc)) /* before the handler's authentication, as vLLM */
		return (enum MHD_Result)rc;
	return s->h.on_request(s->h.ctx, r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe)
{
	struct hreq *r = *req_cls;
	if (!r)
		return;
	*req_cls = NULL;
	if (!r->answered)
		r->status = 499; /* client closed before an answer (nginx's convention) */
	hreq_unref(r);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	vsnprintf(buf, sizeof buf, fmt, ap);
	size_t n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = 0;
	LOG_D("http", "microhttpd: %s", buf);
}

/* Listens (relay.c for plain HTTP, libmicrohttpd itself under TLS) and starts the daemon. */
static int http_listen(struct http_server *s, struct err *e)
{
	const char *host = s->cfg.host && s->cfg.host[0] ? s->cfg.host : "0.0.0.0";
	char port[16];
	snprintf(port, sizeof port, "%d", s->cfg.port);
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	int gai = getaddrinfo(host, port, &hints, &ai);
	if (gai)
		return err_set(e, "--host %s: %s", host, gai_strerror(gai));
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_POLL |
			 MHD_USE_ERROR_LOG;
	bool tls = s->cfg.tls_key_pem && s->cfg.tls_cert_pem;
	if (!tls)
		flags |= MHD_USE_NO_LISTEN_SOCKET; /* relay.c listens and hands connections over */
	else if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	struct MHD_OptionItem tls_opts[] = {
		{tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)s->cfg.tls_key_pem},
		{MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)s->cfg.tls_cert_pem},
		{MHD_OPTION_END, 0, NULL}};
	if (tls)
		flags |= MHD_USE_TLS;
	struct MHD_OptionItem listen_opts[] = {{tls ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, 0, ai->ai_addr},
					       {tls ? MHD_OPTION_LISTENING_ADDRESS_REUSE : MHD_OPTION_END, 1, NULL},
					       {MHD_OPTION_END, 0, NULL}};
	s->daemon = MHD_start_daemon(
		flags, tls ? (uint16_t)s->cfg.port : 0, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, listen_opts,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.conn_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)s->cfg.max_connections, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
		MHD_OPTION_THREAD_STACK_SIZE, (size_t)2 << 20, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)128 << 10,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
	if (!s->daemon) {
		freeaddrinfo(ai);
		return err_set(e, "cannot listen on %s:%d (address in use or not available%s)", host, s->cfg.port,
			       tls ? ", or TLS refused the key and certificate" : "");
	}
	if (!tls) {
		struct err le;
		int rc = relay_start(s, ai->ai_addr, ai->ai_addrlen, &le);
		freeaddrinfo(ai);
		if (rc < 0) {
			MHD_stop_daemon(s->daemon);
			s->daemon = NULL;
			return err_set(e, "cannot listen on %s:%d (%s)", host, s->cfg.port, le.msg);
		}
		return 0;
	}
	freeaddrinfo(ai);
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : s->cfg.port;
	return 0;
}

int http_start(const struct http_config *c, const struct http_handler *h, struct http_server **out, struct err *e)
{
	struct http_server *s = calloc(1, sizeof *s);
	if (!s)
		return err_set(e, "server: out of memory");
	s->cfg = *c;
	s->h = *h;
	s->listen_fd = -1;
	atomic_init(&s->n_requests, 0);
	atomic_init(&s->n_errors, 0);
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->relays_done, &ca);
	pthread_condattr_destroy(&ca);
	if (cors_init(&s->cors, c->allowed_origins, c->allowed_methods, c->allowed_headers, c->allow_credentials, e) <
	    0)
		goto fail_cors;
	if (http_listen(s, e) < 0)
		goto fail_listen;
	*out = s;
	return 0;
fail_listen:
	cors_fini(&s->cors);
fail_cors:
	pthread_cond_destroy(&s->relays_done);
	pthread_mutex_destroy(&s->mu);
	free(s);
	return -1;
}

int http_port(const struct http_server *hs) { return hs->port; }

void http_counters_get(struct http_server *hs, unsigned long long *requests, unsigned long long *errors)
{
	*requests = atomic_load(&hs->n_requests);
	*errors = atomic_load(&hs->n_errors);
}

void http_stop(struct http_server *s)
{
	if (!s->daemon)
		return;
	/* stop accepting first: the listening socket closes, live connections go on */
	MHD_socket fd = MHD_INVALID_SOCKET;
	if (s->relay_on)
		relay_stop_accepting(s);
	else
		fd = MHD_quiesce_daemon(s->daemon); /* ours to close after the stop */
	/* the aborted requests finish their answers before the connections close */
	s->h.on_stop(s->h.ctx);
	MHD_stop_daemon(s->daemon); /* joins every connection thread */
	s->daemon = NULL;
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	/* each relay ends once its libmicrohttpd end is closed (and a short linger) */
	if (s->relay_on && !relay_wait_all(s, 2 * 2.0 + 1))
		LOG_W("http", "connection relays still running at stop");
}

bool http_free(struct http_server *s)
{
	pthread_mutex_lock(&s->mu);
	int left = s->n_relays;
	pthread_mutex_unlock(&s->mu);
	if (left)
		return false; /* a relay thread still holds s (it said so): left to the process's end */
	cors_fini(&s->cors);
	pthread_cond_destroy(&s->relays_done);
	pthread_mutex_destroy(&s->mu);
	free(s);
	return true;
}
