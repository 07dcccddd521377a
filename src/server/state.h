/* Internals shared by the files of src/server/ (not a public API): the server object, one
 * HTTP request, the streaming interface between http.c and generate.c. */
#ifndef MLA_SERVER_STATE_H
#define MLA_SERVER_STATE_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "server/http/cors.h"
#include "server/openai/errors.h"
#include "server/openai/request.h"
#include "server/server.h"
#include "server/http/sse.h"

struct gen;

struct server {
	struct server_config cfg;
	struct server_deps deps;
	struct srv_limits lim;
	struct MHD_Daemon *daemon;
	int port;
	int max_model_len;
	long long started_at;	   /* unix seconds, "created" of /v1/models */
	pthread_mutex_t mu;	   /* guards stopping, the gen list, engine_submit on stop */
	bool stopping;
	struct gen *gens;	   /* in-flight generations (cancelled on stop) */
	pthread_cond_t gens_empty; /* signalled when the last generation leaves */
	atomic_ullong n_requests, n_errors;
	struct resp_store *store;  /* stored Responses (server/openai/resp_store.h) */
	/* plain HTTP: our listening socket and the framing relays in front of libmicrohttpd
	 * (server/http/relay.c); under TLS libmicrohttpd listens itself */
	bool relay_on;
	int listen_fd, wake[2];
	pthread_t accept_thread;
	int n_relays;		   /* live relay threads, under mu */
	pthread_cond_t relays_done;
	char framing_secret[33];   /* the framing marker's secret (server/http/framing.h) */
	struct cors cors;	   /* server/http/cors.h */
	atomic_bool failed;	   /* server_fail: every generation ends with fatal_msg */
	char fatal_msg[256];	   /* written once before failed is set */
};

/* One HTTP request; reference counted because a streaming response outlives the access
 * handler call (freed, and its access-log line written, when the last holder lets go). */
struct hreq {
	atomic_int refs;
	struct server *s;
	struct MHD_Connection *conn;
	char method[16];
	char path[128];
	struct strbuf body;
	unsigned long long body_seen; /* bytes received, kept or not */
	bool too_large, answered;
	bool close_after;	/* the reply says Connection: close (a framing error) */
	bool preflight;		/* a CORS preflight (server/http/cors.h) */
	double t_start;		/* monotonic seconds */
	int status;
	char id[64];		/* chatcmpl-/cmpl- id for the access log */
	long prompt_tokens, completion_tokens;
	double ttft;		/* seconds, < 0 when no token was produced */
};

void hreq_unref(struct hreq *r);

/* Streaming responses: http.c calls pump until it returns 1 (everything appended to out),
 * sending what accumulates; close runs once at the end (completed false when the client
 * went away or the connection failed). */
struct http_stream_ops {
	int (*pump)(void *ctx, struct strbuf *out, int timeout_ms);
	void (*close)(void *ctx, bool completed);
};

/* Replies (the access handler's return value). json is stolen. */
/* Queues resp (consumed) with its content type and the headers every answer gets. */
enum MHD_Result http_queue(struct hreq *r, int status, struct MHD_Response *resp, const char *ctype);
enum MHD_Result http_reply_json(struct hreq *r, int status, json_t *json);
enum MHD_Result http_reply_error(struct hreq *r, const struct api_error *ae);
enum MHD_Result http_reply_text(struct hreq *r, int status, const char *ctype, const char *text,
				size_t len);
enum MHD_Result http_reply_stream(struct hreq *r, const struct http_stream_ops *ops, void *ctx);
/* false once the peer closed its end of the connection */
bool http_client_alive(struct hreq *r);
const char *http_header(struct hreq *r, const char *name);

int http_start(struct server *s, struct err *e);
void http_stop(struct server *s);

/* relay.c: the plain-HTTP listener; each connection's bytes go through server/http/framing.h */
int relay_start(struct server *s, const struct sockaddr *addr, socklen_t alen, struct err *e);
void relay_stop_accepting(struct server *s);
bool relay_wait_all(struct server *s, double timeout_s); /* false: relays still running */

/* routes.c */
enum MHD_Result routes_dispatch(struct hreq *r);
int routes_check_model(struct server *s, const char *model, struct api_error *ae);
const char *routes_model_name(struct server *s);

/* generate.c */
enum MHD_Result gen_handle(struct hreq *r, enum srv_api api, json_t *body);
/* POST /v1/responses (server/openai/responses.h); takes body */
enum MHD_Result gen_handle_responses(struct hreq *r, json_t *body);
/* Renders the chat template and tokenizes (for chat requests and /tokenize). */
int gen_chat_prompt(struct server *s, const json_t *messages, bool add_generation_prompt,
		    bool continue_final_message, const json_t *kwargs, bool add_special_tokens,
		    int32_t **ids, size_t *n_ids, struct api_error *ae);
/* Aborts every in-flight generation (server stop). Caller holds s->mu. */
void gen_cancel_all_locked(struct server *s);

#endif
