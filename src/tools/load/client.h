/* HTTP side of the serving benchmark: libcurl's multi interface in one thread drives every
 * streamed request (no client threads, so the measured times are not skewed by a thread
 * pool), releases requests at their arrival times under a concurrency cap, and measures
 * each response with a bench_stream. Call curl_global_init() once before using these. */
#ifndef MLA_TOOLS_LOAD_CLIENT_H
#define MLA_TOOLS_LOAD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "tools/load/stats.h"

struct bench_client_opts {
	const char *url;     /* the endpoint, e.g. http://127.0.0.1:8000/v1/chat/completions */
	const char *api_key; /* NULL: no Authorization header */
	bool chat;           /* chat.completion.chunk vs text_completion streams */
	double timeout_s;    /* per request (connect to last byte); 0: none */
	/* Called from the benchmark loop at most ~10 times a second and once at the end. */
	void (*progress)(void *ctx, size_t done, size_t failed, size_t n);
	void *progress_ctx;
};

/* Monotonic clock in seconds. */
double bench_now(void);

/* Sends bodies[i] (JSON text) as POST requests: request i is released at arrivals[i]
 * seconds after the start (non-decreasing; 0 for all = all at once), then waits for a
 * free slot when max_concurrency > 0 requests are in flight. Fills res[0..n) (caller
 * zero-initializes; bench_req_result_fini each) — every request gets a result, failed ones
 * with an error message — and *duration (first release to last completion, s). Returns
 * -1 only when the benchmark itself cannot run (libcurl setup, out of memory). */
int bench_client_run(const struct bench_client_opts *o, const char *const *bodies, const double *arrivals, size_t n,
		     int max_concurrency, struct bench_req_result *res, double *duration, struct err *e);

/* GET base_url/v1/models and return a malloc'd copy of data[0].id. */
int bench_client_first_model(const char *base_url, const char *api_key, double timeout_s, char **id, struct err *e);

#endif
