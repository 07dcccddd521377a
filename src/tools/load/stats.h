/* Serving-benchmark statistics: per-request results, the summary metrics `vllm bench serve`
 * reports (throughputs; mean / median / std / p99 of TTFT, TPOT, ITL, E2EL), the printed
 * table and the JSON result (vLLM's key names, plus per-request arrays).
 *
 * Times are seconds in per-request results and milliseconds in the summary (`*_ms`). */
#ifndef MLA_TOOLS_LOAD_STATS_H
#define MLA_TOOLS_LOAD_STATS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/err.h"

/* One request as measured by the client. */
struct bench_req_result {
	bool success;
	int input_len;            /* prompt tokens as generated / counted by the client */
	int output_len;           /* completion tokens: usage chunk, else content chunks */
	int server_prompt_tokens; /* usage.prompt_tokens, -1 when the server sent none */
	double start;             /* send time, seconds after the benchmark start */
	double ttft;              /* first content chunk - send (s) */
	double e2e;               /* end of stream - send (s) */
	double *itls;             /* [n_itl] gaps between content chunks (s), owned */
	size_t n_itl;
	char *error; /* owned; NULL on success */
};

void bench_req_result_fini(struct bench_req_result *r);

/* Summary of one distribution, in milliseconds. All 0 for an empty set (as vLLM reports). */
struct bench_dist {
	double mean, median, std, p99;
	size_t n;
};

struct bench_metrics {
	int completed, failed;
	double duration;                                                      /* s, first send to last completion */
	long long total_input, total_output;                                  /* over successful requests */
	double request_throughput, output_throughput, total_token_throughput; /* per s */
	struct bench_dist ttft_ms, tpot_ms, itl_ms, e2el_ms;
	double max_output_tokens_per_s; /* peak over 1 s windows of content-chunk arrivals */
	int max_concurrent_requests;    /* peak number of requests in flight */
};

/* The run's configuration, echoed into the JSON result. Strings are borrowed. */
struct bench_run_info {
	const char *date; /* "YYYYMMDD-HHMMSS" (UTC) */
	const char *base_url;
	const char *endpoint_type; /* "openai-chat" or "openai" (completions) */
	const char *model_id;
	const char *tokenizer_id; /* may be NULL */
	const char *dataset;      /* "random" or the JSONL path */
	int num_prompts;
	double request_rate; /* INFINITY: all at once */
	int max_concurrency; /* 0: unlimited */
	int seed;
	bool ignore_eos;
	int random_input_len, random_output_len;
	double random_range_ratio;
};

/* Percentile of sorted[0..n) with numpy's default linear interpolation: rank p/100*(n-1).
 * n == 0 gives 0. p is clamped to [0, 100]. */
double bench_percentile(const double *sorted, size_t n, double p);
/* Summary of x[0..n) (seconds) in milliseconds; x is sorted in place. */
void bench_dist_of(double *x, size_t n, struct bench_dist *d);

/* Computes the summary over r[0..n). duration: benchmark wall time in seconds. Per-request
 * TPOT = (e2e - ttft) / (output_len - 1) for successful requests with output_len > 1; ITLs
 * of all successful requests are pooled. Fails only on out-of-memory. */
int bench_metrics_compute(const struct bench_req_result *r, size_t n, double duration, struct bench_metrics *m,
			  struct err *e);

/* Prints the vLLM-style table (and the first few distinct error messages, if any). */
void bench_metrics_print(FILE *f, const struct bench_run_info *info, const struct bench_metrics *m,
			 const struct bench_req_result *r, size_t n);

/* Builds the JSON result object: the configuration (date, endpoint_type, model_id,
 * num_prompts, request_rate ("inf" or a number), max_concurrency (null = unlimited), ...),
 * the metrics (completed, failed, duration, total_input_tokens, total_output_tokens,
 * request_throughput, output_throughput, total_token_throughput, {mean,median,std,p99}_
 * {ttft,tpot,itl,e2el}_ms, max_output_tokens_per_s, max_concurrent_requests) and per-request
 * arrays input_lens, output_lens, ttfts, e2els, itls (array of arrays, seconds) and errors
 * ("" for a successful request). Returns a new reference, or NULL on out-of-memory. */
json_t *bench_result_json(const struct bench_run_info *info, const struct bench_metrics *m,
			  const struct bench_req_result *r, size_t n);

#endif
