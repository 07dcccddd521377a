#include "tools/load/stats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void bench_req_result_fini(struct bench_req_result *r)
{
	free(r->itls);
	free(r->error);
	r->itls = NULL;
	r->error = NULL;
	r->n_itl = 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_percentile(const double *sorted, size_t n, double p)
{
	if (n == 0)
		return 0;
	if (!(p > 0)) /* also NaN */
		p = 0;
	if (p > 100)
		p = 100;
	double rank = p / 100.0 * (double)(n - 1);
	size_t lo = (size_t)floor(rank);
	size_t hi = lo + 1 < n ? lo + 1 : lo;
	double frac = rank - (double)lo;
	return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

void bench_dist_of(double *x, size_t n, struct bench_dist *d)
{
	memset(d, 0, sizeof *d);
	d->n = n;
	if (n == 0)
		return;
	qsort(x, n, sizeof *x, cmp_double);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += x[i];
	double mean = sum / (double)n, ss = 0;
	for (size_t i = 0; i < n; i++)
		ss += (x[i] - mean) * (x[i] - mean);
	d->mean = mean * 1e3;
	d->std = sqrt(ss / (double)n) * 1e3; /* population std, like np.std */
	d->median = bench_percentile(x, n, 50) * 1e3;
	d->p99 = bench_percentile(x, n, 99) * 1e3;
}

/* Peak number of requests in flight: sweep over start (+1) and end (-1) events. Ends sort
 * before starts at equal times, so back-to-back requests do not count as overlapping. */
struct event {
	double t;
	int d;
};

static int cmp_event(const void *a, const void *b)
{
	const struct event *x = a, *y = b;
	if (x->t != y->t)
		return (x->t > y->t) - (x->t < y->t);
	return x->d - y->d;
}

static int peak_concurrency(const struct bench_req_result *r, size_t n, int *out)
{
	struct event *ev = malloc((2 * n + 1) * sizeof *ev);
	if (!ev)
		return -1;
	for (size_t i = 0; i < n; i++) {
		ev[2 * i] = (struct event){r[i].start, +1};
		ev[2 * i + 1] = (struct event){r[i].start + r[i].e2e, -1};
	}
	qsort(ev, 2 * n, sizeof *ev, cmp_event);
	int cur = 0, peak = 0;
	for (size_t i = 0; i < 2 * n; i++) {
		cur += ev[i].d;
		if (cur > peak)
			peak = cur;
	}
	free(ev);
	*out = peak;
	return 0;
}

/* Peak content chunks per 1 s bucket of the benchmark timeline (vLLM's
 * max_output_tokens_per_s counts one token per chunk the same way). */
static int peak_output_rate(const struct bench_req_result *r, size_t n, double duration, double *out)
{
	*out = 0;
	if (!(duration > 0))
		return 0;
	size_t nb = (size_t)ceil(duration) + 1;
	if (nb > 10u * 1000 * 1000) /* a week-long run: coarser is fine, cap the buffer */
		nb = 10u * 1000 * 1000;
	uint32_t *bucket = calloc(nb, sizeof *bucket);
	if (!bucket)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!r[i].success || r[i].output_len <= 0)
			continue;
		double t = r[i].start + r[i].ttft;
		for (size_t k = 0; k <= r[i].n_itl; k++) {
			if (k > 0)
				t += r[i].itls[k - 1];
			size_t b = t > 0 ? (size_t)t : 0;
			bucket[b < nb ? b : nb - 1]++;
		}
	}
	for (size_t b = 0; b < nb; b++)
		if (bucket[b] > *out)
			*out = bucket[b];
	free(bucket);
	return 0;
}

int bench_metrics_compute(const struct bench_req_result *r, size_t n, double duration, struct bench_metrics *m,
			  struct err *e)
{
	memset(m, 0, sizeof *m);
	m->duration = duration;
	size_t n_itl = 0;
	for (size_t i = 0; i < n; i++)
		if (r[i].success)
			n_itl += r[i].n_itl;
	double *ttft = malloc((n + 1) * sizeof *ttft), *tpot = malloc((n + 1) * sizeof *tpot);
	double *e2el = malloc((n + 1) * sizeof *e2el), *itl = malloc((n_itl + 1) * sizeof *itl);
	if (!ttft || !tpot || !e2el || !itl)
		goto oom;
	size_t n_ok = 0, n_tpot = 0, k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!r[i].success) {
			m->failed++;
			continue;
		}
		m->total_input += r[i].input_len;
		m->total_output += r[i].output_len;
		ttft[n_ok] = r[i].ttft;
		e2el[n_ok] = r[i].e2e;
		n_ok++;
		if (r[i].output_len > 1)
			tpot[n_tpot++] = (r[i].e2e - r[i].ttft) / (r[i].output_len - 1);
		for (size_t j = 0; j < r[i].n_itl; j++)
			itl[k++] = r[i].itls[j];
	}
	m->completed = (int)n_ok;
	if (duration > 0) {
		m->request_throughput = (double)n_ok / duration;
		m->output_throughput = (double)m->total_output / duration;
		m->total_token_throughput = (double)(m->total_input + m->total_output) / duration;
	}
	bench_dist_of(ttft, n_ok, &m->ttft_ms);
	bench_dist_of(tpot, n_tpot, &m->tpot_ms);
	bench_dist_of(itl, k, &m->itl_ms);
	bench_dist_of(e2el, n_ok, &m->e2el_ms);
	free(ttft), free(tpot), free(e2el), free(itl);
	if (peak_concurrency(r, n, &m->max_concurrent_requests) < 0 ||
	    peak_output_rate(r, n, duration, &m->max_output_tokens_per_s) < 0)
		return err_set(e, "bench metrics: out of memory");
	return 0;
oom:
	free(ttft), free(tpot), free(e2el), free(itl);
	return err_set(e, "bench metrics: out of memory for %zu requests", n);
}

static void print_dist(FILE *f, const char *title, const char *name, const struct bench_dist *d)
{
	/* Title centred in a 50-column rule of dashes, like Python's '{:-^50}'. */
	static const char dashes[] = "--------------------------------------------------";
	int fill = 50 - (int)strlen(title);
	if (fill < 0)
		fill = 0;
	fprintf(f, "%.*s%s%.*s\n", fill / 2, dashes, title, fill - fill / 2, dashes);
	char k[64];
	snprintf(k, sizeof k, "Mean %s (ms):", name);
	fprintf(f, "%-40s %-10.2f\n", k, d->mean);
	snprintf(k, sizeof k, "Median %s (ms):", name);
	fprintf(f, "%-40s %-10.2f\n", k, d->median);
	snprintf(k, sizeof k, "P99 %s (ms):", name);
	fprintf(f, "%-40s %-10.2f\n", k, d->p99);
}

void bench_metrics_print(FILE *f, const struct bench_run_info *info, const struct bench_metrics *m,
			 const struct bench_req_result *r, size_t n)
{
	fprintf(f, "============ Serving Benchmark Result ============\n");
	if (info->max_concurrency > 0)
		fprintf(f, "%-40s %-10d\n", "Maximum request concurrency:", info->max_concurrency);
	if (isfinite(info->request_rate))
		fprintf(f, "%-40s %-10.2f\n", "Request rate (req/s):", info->request_rate);
	fprintf(f, "%-40s %-10d\n", "Successful requests:", m->completed);
	fprintf(f, "%-40s %-10d\n", "Failed requests:", m->failed);
	fprintf(f, "%-40s %-10.2f\n", "Benchmark duration (s):", m->duration);
	fprintf(f, "%-40s %-10lld\n", "Total input tokens:", m->total_input);
	fprintf(f, "%-40s %-10lld\n", "Total generated tokens:", m->total_output);
	fprintf(f, "%-40s %-10.2f\n", "Request throughput (req/s):", m->request_throughput);
	fprintf(f, "%-40s %-10.2f\n", "Output token throughput (tok/s):", m->output_throughput);
	fprintf(f, "%-40s %-10.2f\n", "Peak output token throughput (tok/s):", m->max_output_tokens_per_s);
	fprintf(f, "%-40s %-10d\n", "Peak concurrent requests:", m->max_concurrent_requests);
	fprintf(f, "%-40s %-10.2f\n", "Total token throughput (tok/s):", m->total_token_throughput);
	print_dist(f, "Time to First Token", "TTFT", &m->ttft_ms);
	print_dist(f, "Time per Output Token (excl. 1st token)", "TPOT", &m->tpot_ms);
	print_dist(f, "Inter-token Latency", "ITL", &m->itl_ms);
	print_dist(f, "End-to-end Latency", "E2EL", &m->e2el_ms);
	fprintf(f, "==================================================\n");
	/* The first few distinct error messages, with how often each occurred. */
	int shown = 0;
	for (size_t i = 0; i < n && shown < 5; i++) {
		if (r[i].success || !r[i].error)
			continue;
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = !r[j].success && r[j].error && !strcmp(r[j].error, r[i].error);
		if (seen)
			continue;
		int count = 0;
		for (size_t j = i; j < n; j++)
			count += !r[j].success && r[j].error && !strcmp(r[j].error, r[i].error);
		fprintf(f, "error (%d request%s): %s\n", count, count == 1 ? "" : "s", r[i].error);
		shown++;
	}
}

/* json_object_set_new that remembers a failure (jansson returns -1 on out-of-memory). */
static void put(json_t *o, const char *k, json_t *v, bool *ok)
{
	if (!v || json_object_set_new(o, k, v) < 0)
		*ok = false;
}

static void put_dist(json_t *o, const char *name, const struct bench_dist *d, bool *ok)
{
	char k[64];
	snprintf(k, sizeof k, "mean_%s_ms", name);
	put(o, k, json_real(d->mean), ok);
	snprintf(k, sizeof k, "median_%s_ms", name);
	put(o, k, json_real(d->median), ok);
	snprintf(k, sizeof k, "std_%s_ms", name);
	put(o, k, json_real(d->std), ok);
	snprintf(k, sizeof k, "p99_%s_ms", name);
	put(o, k, json_real(d->p99), ok);
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

json_t *bench_result_json(const struct bench_run_info *info, const struct bench_metrics *m,
			  const struct bench_req_result *r, size_t n)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	bool ok = true;
	put(o, "date", str_or_null(info->date), &ok);
	put(o, "base_url", str_or_null(info->base_url), &ok);
	put(o, "endpoint_type", str_or_null(info->endpoint_type), &ok);
	put(o, "model_id", str_or_null(info->model_id), &ok);
	put(o, "tokenizer_id", str_or_null(info->tokenizer_id), &ok);
	put(o, "dataset", str_or_null(info->dataset), &ok);
	put(o, "num_prompts", json_integer(info->num_prompts), &ok);
	put(o, "request_rate", isfinite(info->request_rate) ? json_real(info->request_rate) : json_string("inf"), &ok);
	put(o, "max_concurrency", info->max_concurrency > 0 ? json_integer(info->max_concurrency) : json_null(), &ok);
	put(o, "seed", json_integer(info->seed), &ok);
	put(o, "ignore_eos", json_boolean(info->ignore_eos), &ok);
	put(o, "random_input_len", json_integer(info->random_input_len), &ok);
	put(o, "random_output_len", json_integer(info->random_output_len), &ok);
	put(o, "random_range_ratio", json_real(info->random_range_ratio), &ok);

	put(o, "completed", json_integer(m->completed), &ok);
	put(o, "failed", json_integer(m->failed), &ok);
	put(o, "duration", json_real(m->duration), &ok);
	put(o, "total_input_tokens", json_integer(m->total_input), &ok);
	put(o, "total_output_tokens", json_integer(m->total_output), &ok);
	put(o, "request_throughput", json_real(m->request_throughput), &ok);
	put(o, "output_throughput", json_real(m->output_throughput), &ok);
	put(o, "total_token_throughput", json_real(m->total_token_throughput), &ok);
	put(o, "max_output_tokens_per_s", json_real(m->max_output_tokens_per_s), &ok);
	put(o, "max_concurrent_requests", json_integer(m->max_concurrent_requests), &ok);
	put_dist(o, "ttft", &m->ttft_ms, &ok);
	put_dist(o, "tpot", &m->tpot_ms, &ok);
	put_dist(o, "itl", &m->itl_ms, &ok);
	put_dist(o, "e2el", &m->e2el_ms, &ok);

	json_t *in = json_array(), *out = json_array(), *ttfts = json_array();
	json_t *e2els = json_array(), *itls = json_array(), *errs = json_array();
	put(o, "input_lens", in, &ok);
	put(o, "output_lens", out, &ok);
	put(o, "ttfts", ttfts, &ok);
	put(o, "e2els", e2els, &ok);
	put(o, "itls", itls, &ok);
	put(o, "errors", errs, &ok);
	for (size_t i = 0; ok && i < n; i++) {
		json_t *gaps = json_array();
		for (size_t j = 0; gaps && j < r[i].n_itl; j++)
			if (json_array_append_new(gaps, json_real(r[i].itls[j])) < 0)
				ok = false;
		if (!gaps || json_array_append_new(itls, gaps) < 0 ||
		    json_array_append_new(in, json_integer(r[i].input_len)) < 0 ||
		    json_array_append_new(out, json_integer(r[i].output_len)) < 0 ||
		    json_array_append_new(ttfts, json_real(r[i].ttft)) < 0 ||
		    json_array_append_new(e2els, json_real(r[i].e2e)) < 0 ||
		    json_array_append_new(errs, json_string(r[i].success || !r[i].error ? "" : r[i].error)) < 0)
			ok = false;
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}
