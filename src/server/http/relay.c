/* The plain-HTTP front of the server: our own listening socket and accept thread; each
 * connection gets a socket pair whose other end is handed to libmicrohttpd
 * (MHD_add_connection) and a relay thread that passes the client's bytes through the strict
 * framing parser (server/http/framing.h) and libmicrohttpd's answers back unchanged. A client's
 * half-close or reset reaches libmicrohttpd's end as the same event (http_client_alive
 * keeps working), a slow reader holds back libmicrohttpd's writes as before, and when
 * libmicrohttpd closes, the relay closes the client's side after reading off what it still
 * sends (so that a client that is still uploading reads its answer instead of a reset). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mono.h"
#include "server/http/framing.h"
#include "server/http/http_internal.h"

#define RELAY_LINGER_S 2.0

struct relay_conn {
	struct http_server *s;
	int cfd, mfd; /* the client's socket, our end of the pair */
	int idle_ms;  /* give up after this long without progress */
};

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void relay_exit(struct http_server *s)
{
	pthread_mutex_lock(&s->mu);
	if (--s->n_relays == 0)
		pthread_cond_broadcast(&s->relays_done);
	pthread_mutex_unlock(&s->mu);
}

/* After libmicrohttpd closed: our FIN, then what the client still sends is read and dropped
 * until its own FIN (or a short while), then the socket closes without a reset. */
static void linger_close(int cfd)
{
	shutdown(cfd, SHUT_WR);
	double until = mono_now_s() + RELAY_LINGER_S;
	char buf[4096];
	for (;;) {
		double left = until - mono_now_s();
		if (left <= 0)
			break;
		struct pollfd p = {.fd = cfd, .events = POLLIN};
		if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			break;
		ssize_t n = recv(cfd, buf, sizeof buf, 0);
		if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR)))
			break;
	}
	close(cfd);
}

static void *relay_main(void *arg)
{
	struct relay_conn *c = arg;
	struct http_server *s = c->s;
	struct hframe hf;
	hframe_init(&hf, s->framing_secret);
	struct strbuf up = {0};     /* to libmicrohttpd */
	char *down = malloc(65536); /* to the client */
	char *in = malloc(16384);
	size_t d_off = 0, d_len = 0;
	bool c_eof = false, m_eof = false, up_shut = false, c_broken = !down || !in;
	double last = mono_now_s();
	while (!c_broken) {
		if (m_eof && d_off == d_len)
			break; /* libmicrohttpd is done and all of it went out */
		struct pollfd p[2] = {{.fd = c->cfd}, {.fd = c->mfd}};
		if (!c_eof && !strbuf_unread(&up))
			p[0].events |= POLLIN;
		if (d_off < d_len)
			p[0].events |= POLLOUT;
		if (!m_eof && d_off == d_len)
			p[1].events |= POLLIN;
		if (strbuf_unread(&up))
			p[1].events |= POLLOUT;
		/* a side nothing is asked of is left out: POLLHUP (a closed end) is reported
		 * whatever the events, and would spin the loop */
		for (int k = 0; k < 2; k++)
			if (!p[k].events)
				p[k].fd = -1;
		int rc = poll(p, 2, 1000);
		if (rc < 0 && errno != EINTR)
			break;
		double now = mono_now_s();
		if (rc <= 0) {
			/* while libmicrohttpd holds its end, it alone times the connection out (a
			 * long request moves no bytes for as long as it runs); after it let go, a
			 * client that reads nothing of what is left is dropped after this bound */
			if (m_eof && (now - last) * 1000 > c->idle_ms)
				break;
			continue;
		}
		last = now;
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR) && p[0].events & POLLIN) {
			ssize_t n = recv(c->cfd, in, 16384, 0);
			if (n > 0) {
				if (hframe_feed(&hf, in, (size_t)n, &up) < 0)
					c_broken = true;
			} else if (n == 0) {
				c_eof = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				c_broken = true; /* reset: libmicrohttpd sees its end close */
			}
		}
		if (strbuf_unread(&up) && p[1].revents & (POLLOUT | POLLHUP | POLLERR)) {
			ssize_t n = send(c->mfd, up.p + up.off, up.n - up.off, MSG_NOSIGNAL);
			if (n > 0) {
				up.off += (size_t)n;
				if (up.off == up.n)
					up.off = up.n = 0;
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				up.off = up.n = 0; /* libmicrohttpd closed: what it sent still goes out */
				m_eof = true;
			}
		}
		if (c_eof && !strbuf_unread(&up) && !up_shut) {
			shutdown(c->mfd, SHUT_WR); /* the client's half-close, passed on */
			up_shut = true;
		}
		if (!m_eof && d_off == d_len && p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = recv(c->mfd, down, 65536, 0);
			if (n > 0)
				d_off = 0, d_len = (size_t)n;
			else if (n == 0 || (errno != EAGAIN && errno != EINTR))
				m_eof = true;
		}
		if (d_off < d_len && p[0].revents & (POLLOUT | POLLHUP | POLLERR)) {
			ssize_t n = send(c->cfd, down + d_off, d_len - d_off, MSG_NOSIGNAL);
			if (n > 0)
				d_off += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				c_broken = true;
		}
	}
	close(c->mfd);
	if (c_broken || c_eof)
		close(c->cfd);
	else
		linger_close(c->cfd);
	hframe_fini(&hf);
	strbuf_fini(&up);
	free(down);
	free(in);
	free(c);
	relay_exit(s);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct http_server *s = arg;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	/* the default stack size: static thread-local buffers elsewhere (hundreds of KB) are
	 * carved out of each thread's stack, and a small fixed size makes pthread_create fail */
	for (;;) {
		struct pollfd p[2] = {{.fd = s->listen_fd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		struct sockaddr_storage addr;
		socklen_t alen = sizeof addr;
		int cfd = accept4(s->listen_fd, (struct sockaddr *)&addr, &alen, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (cfd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				usleep(10000); /* out of descriptors: let connections end first */
			continue;
		}
		pthread_mutex_lock(&s->mu);
		bool full = s->n_relays >= s->cfg.max_connections;
		if (!full)
			s->n_relays++;
		pthread_mutex_unlock(&s->mu);
		if (full) {
			close(cfd);
			continue;
		}
		int one = 1;
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		int sp[2];
		struct relay_conn *c = calloc(1, sizeof *c);
		if (!c || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
			free(c);
			close(cfd);
			relay_exit(s);
			continue;
		}
		set_nonblock(sp[0]);
		c->s = s;
		c->cfd = cfd;
		c->mfd = sp[0];
		/* libmicrohttpd times the connection out; this bound only ends a relay that the
		 * client does not move after libmicrohttpd has let go */
		c->idle_ms = (s->cfg.conn_timeout_s > 0 ? s->cfg.conn_timeout_s : 3600) * 1000 + 5000;
		/* on failure libmicrohttpd closes sp[1]: the relay then just closes the client */
		if (MHD_add_connection(s->daemon, sp[1], (struct sockaddr *)&addr, alen) != MHD_YES)
			LOG_W("http", "libmicrohttpd refused a connection: %s", strerror(errno));
		pthread_t th;
		int er = pthread_create(&th, &at, relay_main, c);
		if (er) {
			LOG_W("http", "cannot start a connection relay thread: %s", strerror(er));
			close(sp[0]);
			close(cfd);
			free(c);
			relay_exit(s);
		}
	}
	pthread_attr_destroy(&at);
	return NULL;
}

int relay_start(struct http_server *s, const struct sockaddr *addr, socklen_t alen, struct err *e)
{
	unsigned char rnd[HFRAME_SECRET_LEN / 2];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return err_set(e, "server: no random bytes for the framing marker: %s", strerror(errno));
	for (size_t i = 0; i < sizeof rnd; i++)
		snprintf(s->framing_secret + 2 * i, 3, "%02x", rnd[i]);
	s->listen_fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0)
		return err_set(e, "server: socket: %s", strerror(errno));
	int one = 1;
	setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(s->listen_fd, addr, alen) < 0 || listen(s->listen_fd, 1024) < 0) {
		int er = errno;
		close(s->listen_fd);
		s->listen_fd = -1;
		return err_set(e, "%s", strerror(er));
	}
	struct sockaddr_storage sa;
	socklen_t sl = sizeof sa;
	if (getsockname(s->listen_fd, (struct sockaddr *)&sa, &sl) == 0)
		s->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
							 : ((struct sockaddr_in *)&sa)->sin_port);
	if (pipe2(s->wake, O_CLOEXEC) < 0 || pthread_create(&s->accept_thread, NULL, accept_main, s)) {
		close(s->listen_fd);
		s->listen_fd = -1;
		return err_set(e, "server: cannot start the accept thread");
	}
	s->relay_on = true;
	return 0;
}

void relay_stop_accepting(struct http_server *s)
{
	if (!s->relay_on || s->listen_fd < 0)
		return;
	if (write(s->wake[1], "x", 1) < 0)
		LOG_W("http", "cannot wake the accept thread: %s", strerror(errno));
	pthread_join(s->accept_thread, NULL);
	close(s->listen_fd);
	close(s->wake[0]);
	close(s->wake[1]);
	s->listen_fd = -1;
}

bool relay_wait_all(struct http_server *s, double timeout_s)
{
	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += (time_t)timeout_s + 1;
	pthread_mutex_lock(&s->mu);
	while (s->n_relays && pthread_cond_timedwait(&s->relays_done, &s->mu, &deadline) != ETIMEDOUT)
		;
	bool done = s->n_relays == 0;
	pthread_mutex_unlock(&s->mu);
	return done;
}
