/* The OpenAI server's state (struct server), shared by the files of src/server/openai/ and
 * the lifecycle in server/server.c (not a public API). It owns the transport
 * (struct http_server), the in-flight generations (struct gen, generate_internal.h) and the
 * stored Responses. */
#ifndef MLA_SERVER_OPENAI_STATE_H
#define MLA_SERVER_OPENAI_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "server/http/http.h"
#include "server/openai/errors.h"
#include "server/openai/request.h"
#include "server/openai/config.h"

struct gen;

struct server {
	struct server_config cfg;
	struct server_deps deps;
	struct srv_limits lim;
	struct http_server *http; /* the transport (server/http/http.h), owned */
	int max_model_len;
	long long started_at; /* unix seconds, "created" of /v1/models */
	pthread_mutex_t mu;   /* guards stopping, the gen list, engine_submit on stop */
	bool stopping;
	struct gen *gens;          /* in-flight generations (cancelled on stop) */
	pthread_cond_t gens_empty; /* signalled when the last generation leaves */
	struct resp_store *store;  /* stored Responses (server/openai/resp_store.h) */
	atomic_bool failed;        /* server_fail: every generation ends with fatal_msg */
	char fatal_msg[256];       /* written once before failed is set */
};

#endif
