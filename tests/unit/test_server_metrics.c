/* /metrics exposition (src/server/openai/metrics.c): checks the rules `promtool check metrics`
 * applies to the text format, on a populated engine_stats. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/openai/metrics.h"

static void fill_hist(struct engine_hist *h, int n_bounds, const double *bounds)
{
	memset(h, 0, sizeof *h);
	h->n_bounds = n_bounds;
	for (int i = 0; i < n_bounds; i++) {
		h->bounds[i] = bounds[i];
		h->counts[i] = (uint64_t)(i % 3);
		h->count += h->counts[i];
		h->sum += bounds[i] * (double)(i % 3);
	}
	h->counts[n_bounds] = 2; /* beyond the largest bound */
	h->count += 2;
	h->sum += 1000;
}

static void make_stats(struct engine_stats *s)
{
	memset(s, 0, sizeof *s);
	s->n_running = 3;
	s->n_waiting = 1;
	s->kv_usage = 0.25;
	s->n_blocks = 100;
	s->block_size = 16;
	s->prefix_queries = 400;
	s->prefix_hits = 128;
	s->preemptions = 2;
	s->prompt_tokens = 1234;
	s->generation_tokens = 5678;
	s->finished[ENGINE_FINISH_STOP] = 10;
	s->finished[ENGINE_FINISH_LENGTH] = 4;
	s->finished[ENGINE_FINISH_ABORT] = 1;
	s->spec_k = 3;
	s->spec_drafts = 7;
	s->spec_draft_tokens = 21;
	s->spec_accepted_tokens = 9;
	s->spec_accepted_per_pos[0] = 5, s->spec_accepted_per_pos[1] = 3, s->spec_accepted_per_pos[2] = 1;
	static const double ttft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
				      1,     2.5,   5,    7.5,  10,   20,   40,   80,  160,  640, 2560};
	static const double itl[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
				     0.75, 1,     2.5,  5,     7.5, 10,   20,  40,  80};
	fill_hist(&s->ttft, 22, ttft);
	fill_hist(&s->itl, 19, itl);
	fill_hist(&s->e2e, 19, itl);
	fill_hist(&s->queue, 19, itl);
}

/* Family name of a sample: the metric name minus a histogram suffix. */
static void family_of(const char *name, const char *type, char *out, size_t n)
{
	snprintf(out, n, "%s", name);
	if (type && !strcmp(type, "histogram")) {
		static const char *const suf[] = {"_bucket", "_sum", "_count"};
		for (int i = 0; i < 3; i++) {
			size_t l = strlen(out), m = strlen(suf[i]);
			if (l > m && !strcmp(out + l - m, suf[i])) {
				out[l - m] = 0;
				break;
			}
		}
	}
}

static void test_exposition_rules(void)
{
	struct engine_stats st;
	make_stats(&st);
	struct strbuf out = {0};
	EXPECT_EQ_INT(metrics_render(&st, "tiny \"v3\"", &out), 0);
	char *text = strdup(out.p);
	char help[128] = "", type_name[128] = "", type[32] = "";
	int n_samples = 0, n_families = 0;
	double last_bucket = -1, inf_bucket = -1;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "# HELP ", 7)) {
			sscanf(line + 7, "%127s", help);
			type_name[0] = 0;
			n_families++;
			continue;
		}
		if (!strncmp(line, "# TYPE ", 7)) {
			EXPECTF(sscanf(line + 7, "%127s %31s", type_name, type) == 2, "%s", line);
			EXPECTF(!strcmp(type_name, help), "TYPE %s after HELP %s", type_name, help);
			EXPECTF(!strcmp(type, "gauge") || !strcmp(type, "counter") || !strcmp(type, "histogram"),
				"type %s", type);
			if (!strcmp(type, "counter")) {
				size_t l = strlen(type_name);
				EXPECTF(l > 6 && !strcmp(type_name + l - 6, "_total"), "counter %s", type_name);
			}
			last_bucket = -1;
			continue;
		}
		EXPECTF(line[0] != '#', "unexpected comment %s", line);
		/* name{labels} value */
		char name[160];
		size_t nl = strcspn(line, "{ ");
		snprintf(name, sizeof name, "%.*s", (int)nl, line);
		EXPECTF(!strncmp(name, "vllm:", 5), "name %s", name);
		char fam[160];
		family_of(name, type, fam, sizeof fam);
		EXPECTF(!strcmp(fam, type_name), "sample %s outside its family %s", name, type_name);
		EXPECTF(strstr(line, "model_name=\"tiny \\\"v3\\\"\"") != NULL, "labels: %s", line);
		const char *val = strrchr(line, ' ') + 1;
		char *end;
		double v = strtod(val, &end);
		EXPECTF(*end == 0 && end != val, "value %s", val);
		if (strstr(name, "_bucket")) {
			EXPECTF(v >= last_bucket, "buckets not cumulative: %s", line);
			last_bucket = v;
			if (strstr(line, "le=\"+Inf\""))
				inf_bucket = v;
		}
		if (strstr(name, "_count") && !strcmp(type, "histogram"))
			EXPECTF(v == inf_bucket, "%s != +Inf bucket %g", line, inf_bucket);
		n_samples++;
	}
	EXPECT(n_families >= 14);
	EXPECT(n_samples > 4 * 20);
	/* spot values, formatted as the Python client does */
	EXPECT(strstr(out.p, "vllm:num_requests_running{model_name=\"tiny \\\"v3\\\"\","
			     "engine=\"0\"} 3.0\n"));
	EXPECT(strstr(out.p, "vllm:kv_cache_usage_perc{model_name=\"tiny \\\"v3\\\"\","
			     "engine=\"0\"} 0.25\n"));
	EXPECT(strstr(out.p, "vllm:request_success_total{model_name=\"tiny \\\"v3\\\"\","
			     "engine=\"0\",finished_reason=\"length\"} 4.0\n"));
	EXPECT(strstr(out.p, "vllm:time_to_first_token_seconds_bucket{model_name=\"tiny "
			     "\\\"v3\\\"\",engine=\"0\",le=\"0.001\"} 0.0\n"));
	EXPECT(strstr(out.p, "vllm:time_to_first_token_seconds_count{model_name=\"tiny "
			     "\\\"v3\\\"\",engine=\"0\"} 23.0\n"));
	static const char *const required[] = {
		"num_requests_running",        "num_requests_waiting",        "kv_cache_usage_perc",
		"prefix_cache_queries_total",  "prefix_cache_hits_total",     "num_preemptions_total",
		"prompt_tokens_total",         "generation_tokens_total",     "time_to_first_token_seconds",
		"inter_token_latency_seconds", "e2e_request_latency_seconds", "request_success_total"};
	for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
		char want[128];
		snprintf(want, sizeof want, "# TYPE vllm:%s ", required[i]);
		EXPECTF(strstr(out.p, want) != NULL, "missing %s", required[i]);
	}
	EXPECT(strstr(out.p, "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"tiny "
			     "\\\"v3\\\"\",engine=\"0\",position=\"1\"} 3.0\n"));
	EXPECT(strstr(out.p, "vllm:spec_decode_num_draft_tokens_total{model_name=\"tiny "
			     "\\\"v3\\\"\",engine=\"0\"} 21.0\n"));
	free(text);
	strbuf_fini(&out);
	/* without speculative decoding the family is absent, as in vLLM */
	st.spec_k = 0;
	struct strbuf out2 = {0};
	EXPECT_EQ_INT(metrics_render(&st, "m", &out2), 0);
	EXPECT(strstr(out2.p, "spec_decode") == NULL);
	strbuf_fini(&out2);
}

TESTS(T(test_exposition_rules))
