#include "server/openai/metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shortest decimal that reads back as the same double (Go's strconv 'g' style, as the
 * Python client prints floats); +Inf / -Inf / NaN spelled as Prometheus expects. */
static void fmt_double(double v, char *buf, size_t n)
{
	if (isnan(v)) {
		snprintf(buf, n, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, n, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v == floor(v) && fabs(v) < 1e15) { /* counts: "10.0", not "1e+01" */
		snprintf(buf, n, "%.1f", v);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, n, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	if (!strpbrk(buf, ".eEnN")) /* "1" -> "1.0" like the Python client */
		strncat(buf, ".0", n - strlen(buf) - 1);
}

/* model_name label value with \, " and newline escaped */
static void escape_label(const char *s, char *buf, size_t n)
{
	size_t o = 0;
	for (; *s && o + 3 < n; s++) {
		if (*s == '\\' || *s == '"') {
			buf[o++] = '\\';
			buf[o++] = *s;
		} else if (*s == '\n') {
			buf[o++] = '\\';
			buf[o++] = 'n';
		} else {
			buf[o++] = *s;
		}
	}
	buf[o] = 0;
}

struct ctx {
	struct strbuf *out;
	char labels[600]; /* model_name="...",engine="0" */
	int rc;
};

static void head(struct ctx *c, const char *name, const char *type, const char *help)
{
	c->rc |= strbuf_printf(c->out, "# HELP vllm:%s %s\n# TYPE vllm:%s %s\n", name, help, name, type);
}

static void sample(struct ctx *c, const char *name, const char *extra, double v)
{
	char num[40];
	fmt_double(v, num, sizeof num);
	c->rc |= strbuf_printf(c->out, "vllm:%s{%s%s} %s\n", name, c->labels, extra ? extra : "", num);
}

static void gauge(struct ctx *c, const char *name, const char *help, double v)
{
	head(c, name, "gauge", help);
	sample(c, name, NULL, v);
}

static void counter(struct ctx *c, const char *name, const char *help, double v)
{
	head(c, name, "counter", help);
	sample(c, name, NULL, v);
}

static void histogram(struct ctx *c, const char *name, const char *help, const struct engine_hist *h)
{
	head(c, name, "histogram", help);
	char bucket[128], le[48], num[40];
	snprintf(bucket, sizeof bucket, "%s_bucket", name);
	uint64_t cum = 0;
	for (int i = 0; i < h->n_bounds && i < ENGINE_HIST_MAX_BUCKETS; i++) {
		cum += h->counts[i];
		fmt_double(h->bounds[i], num, sizeof num);
		snprintf(le, sizeof le, ",le=\"%s\"", num);
		sample(c, bucket, le, (double)cum);
	}
	int last = h->n_bounds < ENGINE_HIST_MAX_BUCKETS ? h->n_bounds : ENGINE_HIST_MAX_BUCKETS;
	cum += h->counts[last];
	sample(c, bucket, ",le=\"+Inf\"", (double)cum);
	snprintf(bucket, sizeof bucket, "%s_sum", name);
	sample(c, bucket, NULL, h->sum);
	snprintf(bucket, sizeof bucket, "%s_count", name);
	/* _count equals the +Inf bucket by construction */
	sample(c, bucket, NULL, (double)cum);
}

int metrics_render(const struct engine_stats *s, const char *model_name, struct strbuf *out)
{
	struct ctx c = {.out = out};
	char esc[512];
	escape_label(model_name, esc, sizeof esc);
	snprintf(c.labels, sizeof c.labels, "model_name=\"%s\",engine=\"0\"", esc);

	gauge(&c, "num_requests_running", "Number of requests in model execution batches.", s->n_running);
	gauge(&c, "num_requests_waiting", "Number of requests waiting to be processed.", s->n_waiting);
	gauge(&c, "kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s->kv_usage);
	gauge(&c, "kv_cache_num_blocks", "Number of usable KV-cache blocks.", s->n_blocks);
	counter(&c, "num_preemptions_total", "Cumulative number of preemptions from the engine.",
		(double)s->preemptions);
	counter(&c, "prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
		(double)s->prefix_queries);
	counter(&c, "prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
		(double)s->prefix_hits);
	counter(&c, "prompt_tokens_total", "Number of prefill tokens processed.", (double)s->prompt_tokens);
	counter(&c, "generation_tokens_total", "Number of generation tokens processed.", (double)s->generation_tokens);
	if (s->spec_k > 0) { /* vLLM's speculative decoding counters */
		counter(&c, "spec_decode_num_drafts_total", "Number of spec decoding drafts.", (double)s->spec_drafts);
		counter(&c, "spec_decode_num_draft_tokens_total", "Number of draft tokens.",
			(double)s->spec_draft_tokens);
		counter(&c, "spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
			(double)s->spec_accepted_tokens);
		head(&c, "spec_decode_num_accepted_tokens_per_pos_total", "counter",
		     "Accepted tokens per draft position.");
		for (int i = 0; i < s->spec_k && i < SPEC_MAX_TOKENS; i++) {
			char extra[32];
			snprintf(extra, sizeof extra, ",position=\"%d\"", i);
			sample(&c, "spec_decode_num_accepted_tokens_per_pos_total", extra,
			       (double)s->spec_accepted_per_pos[i]);
		}
	}
	head(&c, "request_success_total", "counter", "Count of successfully processed requests.");
	static const struct {
		enum engine_finish f;
		const char *name;
	} reasons[] = {{ENGINE_FINISH_STOP, "stop"}, {ENGINE_FINISH_LENGTH, "length"}, {ENGINE_FINISH_ABORT, "abort"}};
	for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
		char extra[64];
		snprintf(extra, sizeof extra, ",finished_reason=\"%s\"", reasons[i].name);
		sample(&c, "request_success_total", extra, (double)s->finished[reasons[i].f]);
	}
	histogram(&c, "time_to_first_token_seconds", "Histogram of time to first token in seconds.", &s->ttft);
	histogram(&c, "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &s->itl);
	histogram(&c, "e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &s->e2e);
	histogram(&c, "request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
		  &s->queue);
	return c.rc ? -1 : 0;
}
