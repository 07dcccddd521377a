/* Private to src/server/http/: the transport's state, shared by http.c, relay.c and cors.c. */
#ifndef MLA_SERVER_HTTP_HTTP_INTERNAL_H
#define MLA_SERVER_HTTP_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "server/http/cors.h"
#include "server/http/http.h"

struct http_server {
	struct http_config cfg;
	struct http_handler h;
	struct MHD_Daemon *daemon;
	int port;
	atomic_ullong n_requests, n_errors;
	/* plain HTTP: our listening socket and the framing relays in front of libmicrohttpd
	 * (relay.c); under TLS libmicrohttpd listens itself */
	bool relay_on;
	int listen_fd, wake[2];
	pthread_t accept_thread;
	pthread_mutex_t mu; /* guards n_relays */
	int n_relays;       /* live relay threads */
	pthread_cond_t relays_done;
	char framing_secret[33]; /* the framing marker's secret (framing.h) */
	struct cors cors;
};

/* Queues resp (consumed) with its content type and the headers every answer gets. */
enum MHD_Result http_queue(struct hreq *r, int status, struct MHD_Response *resp, const char *ctype);
/* An error the transport answers itself: the handler's JSON error body for status and the
 * printf-style message. */
enum MHD_Result http_reply_error(struct hreq *r, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* relay.c: the plain-HTTP listener; each connection's bytes go through framing.h */
int relay_start(struct http_server *s, const struct sockaddr *addr, socklen_t alen, struct err *e);
void relay_stop_accepting(struct http_server *s);
bool relay_wait_all(struct http_server *s, double timeout_s); /* false: relays still running */

#endif
