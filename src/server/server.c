/* Server lifecycle: configuration defaults, start (bind, limits), graceful stop. */
#include "server/server.h"
#include "server/openai/resp_store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/state.h"

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

int server_start(const struct server_config *c, const struct server_deps *d,
		 struct server **out, struct err *e)
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
	s->lim.max_logprobs = c->max_logprobs > 0 && c->max_logprobs < ENGINE_MAX_LOGPROBS ? c->max_logprobs : ENGINE_MAX_LOGPROBS;
	s->max_model_len = engine_max_model_len(d->eng);
	s->lim.priority = engine_priority_scheduling(d->eng);
	s->started_at = (long long)time(NULL);
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->gens_empty, &ca);
	pthread_cond_init(&s->relays_done, &ca);
	pthread_condattr_destroy(&ca);
	s->listen_fd = -1;
	atomic_init(&s->n_requests, 0);
	atomic_init(&s->n_errors, 0);
	atomic_init(&s->failed, false);
	s->store = resp_store_new(c->responses_store_size);
	bool cors = false;
	if (!s->store || !(cors = cors_init(&s->cors, c->allowed_origins, c->allowed_methods, c->allowed_headers,
					    c->allow_credentials, e) == 0) ||
	    http_start(s, e) < 0) {
		if (!s->store)
			err_set(e, "server: out of memory");
		if (cors)
			cors_fini(&s->cors);
		resp_store_free(s->store);
		pthread_cond_destroy(&s->gens_empty);
		pthread_cond_destroy(&s->relays_done);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return -1;
	}
	*out = s;
	return 0;
}

int server_port(const struct server *s)
{
	return s->port;
}

void server_stop(struct server *s)
{
	if (!s)
		return;
	http_stop(s);
	pthread_mutex_lock(&s->mu);
	int left = s->n_relays;
	pthread_mutex_unlock(&s->mu);
	if (left)
		return; /* a relay thread still holds s (it said so): left to the process's end */
	resp_store_free(s->store);
	cors_fini(&s->cors);
	pthread_cond_destroy(&s->gens_empty);
	pthread_cond_destroy(&s->relays_done);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void server_counters_get(struct server *s, struct server_counters *c)
{
	c->requests = atomic_load(&s->n_requests);
	c->errors = atomic_load(&s->n_errors);
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
