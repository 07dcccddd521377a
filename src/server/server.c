/* Server lifecycle: configuration defaults, start (the OpenAI state, then the transport with
 * the routes as its handler), graceful stop. */
#include "server/server.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "server/http/http.h"
#include "server/openai/generate.h"
#include "server/openai/resp_store.h"
#include "server/openai/routes.h"
#include "server/openai/state.h"

void server_config_init(struct server_config *c)
{
	memset(c, 0, sizeof *c);
	c->port = 8000;
	c->max_body_bytes = (size_t)16 << 20;
	c->conn_timeout_s = 30;
	c->max_connections = 1024;
	c->max_n = 128;
	c->log_requests = true;
	c->responses_store_size = 1024;
}

/* http_handler.on_stop: abort the in-flight generations and let them finish their answers
 * (streams send their finish chunk and [DONE]) before the connections are closed; a client
 * that does not read is cut after a few seconds. */
static void on_stop(void *server)
{
	struct server *s = server;
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	gen_cancel_all_locked(s);
	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += 5;
	while (s->gens && pthread_cond_timedwait(&s->gens_empty, &s->mu, &deadline) != ETIMEDOUT)
		;
	if (s->gens)
		LOG_W("http", "stopping with requests still streaming to clients that do not read");
	pthread_mutex_unlock(&s->mu);
}

int server_start(const struct server_config *c, const struct server_deps *d, struct server **out, struct err *e)
{
	if (c->n_served_names < 1 || !c->served_names[0])
		return err_set(e, "server: no served model name");
	if (!d->eng || !d->tok)
		return err_set(e, "server: engine and tokenizer are required");
	struct server *s = calloc(1, sizeof *s);
	if (!s)
		return err_set(e, "server: out of memory");
	s->cfg = *c;
	s->deps = *d;
	s->lim.vocab_size = d->vocab_size;
	s->lim.max_n = c->max_n > 0 ? c->max_n : 128;
	s->lim.max_prompts = 256;
	s->lim.auto_tools = c->auto_tool_choice && c->tool_parser != 0;
	s->lim.max_logprobs = c->max_logprobs > 0 && c->max_logprobs < ENGINE_MAX_LOGPROBS ? c->max_logprobs
											   : ENGINE_MAX_LOGPROBS;
	s->max_model_len = engine_max_model_len(d->eng);
	s->lim.priority = engine_priority_scheduling(d->eng);
	s->started_at = (long long)time(NULL);
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->gens_empty, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&s->failed, false);
	s->store = resp_store_new(c->responses_store_size);
	if (!s->store) {
		err_set(e, "server: out of memory");
		goto fail_store;
	}
	const struct http_config hc = {.host = c->host,
				       .port = c->port,
				       .tls_key_pem = c->tls_key_pem,
				       .tls_cert_pem = c->tls_cert_pem,
				       .max_body_bytes = c->max_body_bytes,
				       .conn_timeout_s = c->conn_timeout_s,
				       .max_connections = c->max_connections,
				       .log_requests = c->log_requests,
				       .allowed_origins = c->allowed_origins,
				       .allowed_methods = c->allowed_methods,
				       .allowed_headers = c->allowed_headers,
				       .allow_credentials = c->allow_credentials};
	const struct http_handler h = {
		.ctx = s, .on_request = routes_dispatch, .error_body = routes_error_body, .on_stop = on_stop};
	if (http_start(&hc, &h, &s->http, e) < 0)
		goto fail_http;
	*out = s;
	return 0;
fail_http:
	resp_store_free(s->store);
fail_store:
	pthread_cond_destroy(&s->gens_empty);
	pthread_mutex_destroy(&s->mu);
	free(s);
	return -1;
}

int server_port(const struct server *s) { return http_port(s->http); }

void server_stop(struct server *s)
{
	if (!s)
		return;
	http_stop(s->http);
	if (!http_free(s->http))
		return; /* a relay thread still holds the transport: left to the process's end */
	resp_store_free(s->store);
	pthread_cond_destroy(&s->gens_empty);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void server_counters_get(struct server *s, struct server_counters *c)
{
	http_counters_get(s->http, &c->requests, &c->errors);
}

void server_fail(struct server *s, const char *fmt, ...)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	if (!atomic_load(&s->failed)) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->fatal_msg, sizeof s->fatal_msg, fmt, ap);
		va_end(ap);
		s->stopping = true; /* new requests: 503 */
		atomic_store(&s->failed, true);
	}
	pthread_mutex_unlock(&s->mu);
}

bool server_wait_idle(struct server *s, double timeout_s)
{
	if (!s)
		return true;
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	long long ns = dl.tv_nsec + (long long)(timeout_s * 1e9);
	dl.tv_sec += (time_t)(ns / 1000000000LL);
	dl.tv_nsec = (long)(ns % 1000000000LL);
	pthread_mutex_lock(&s->mu);
	while (s->gens && pthread_cond_timedwait(&s->gens_empty, &s->mu, &dl) != ETIMEDOUT)
		;
	bool idle = !s->gens;
	pthread_mutex_unlock(&s->mu);
	return idle;
}
