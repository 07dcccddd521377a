/* bench serve: percentile / summary math, the JSON result schema, the SSE response parser
 * (timings, usage, failures) and the prompt generators. No network. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/load/dataset.h"
#include "tools/load/stats.h"
#include "tools/load/stream.h"
#include "harness.h"
#include "tok/tokenizer.h"

static void test_percentile_numpy_linear(void)
{
	/* values from numpy.percentile (default linear interpolation) */
	const double a[] = {1, 2, 3, 4};
	EXPECT_NEAR(bench_percentile(a, 4, 50), 2.5, 1e-12);
	EXPECT_NEAR(bench_percentile(a, 4, 99), 3.97, 1e-12);
	EXPECT_NEAR(bench_percentile(a, 4, 0), 1, 1e-12);
	EXPECT_NEAR(bench_percentile(a, 4, 100), 4, 1e-12);
	EXPECT_NEAR(bench_percentile(a, 4, 25), 1.75, 1e-12);
	const double b[] = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 1000};
	EXPECT_NEAR(bench_percentile(b, 11, 99), 910, 1e-9); /* rank 9.9: 100 + 0.9*900 */
	EXPECT_NEAR(bench_percentile(b, 11, 50), 60, 1e-12);
	const double one = 5;
	EXPECT_NEAR(bench_percentile(&one, 1, 99), 5, 0);
	EXPECT_NEAR(bench_percentile(NULL, 0, 50), 0, 0);
	EXPECT_NEAR(bench_percentile(a, 4, 150), 4, 0); /* clamped */
	EXPECT_NEAR(bench_percentile(a, 4, NAN), 1, 0);
}

static void test_dist_mean_median_std_ms(void)
{
	double x[] = {0.003, 0.001, 0.002}; /* seconds, unsorted */
	struct bench_dist d;
	bench_dist_of(x, 3, &d);
	EXPECT_EQ_INT(d.n, 3);
	EXPECT_NEAR(d.mean, 2.0, 1e-12);
	EXPECT_NEAR(d.median, 2.0, 1e-12);
	EXPECT_NEAR(d.std, sqrt(2.0 / 3.0), 1e-12); /* population std, like np.std */
	EXPECT_NEAR(d.p99, 2.98, 1e-12);
	EXPECT(x[0] == 0.001 && x[2] == 0.003); /* sorted in place */
	bench_dist_of(NULL, 0, &d);
	EXPECT(d.mean == 0 && d.median == 0 && d.std == 0 && d.p99 == 0 && d.n == 0);
}

/* Three requests: two successful (one with a single output token: no TPOT), one failed. */
static void make_results(struct bench_req_result r[3])
{
	memset(r, 0, 3 * sizeof *r);
	r[0] = (struct bench_req_result){.success = true,
					 .input_len = 10,
					 .output_len = 4,
					 .server_prompt_tokens = 11,
					 .start = 0.0,
					 .ttft = 0.1,
					 .e2e = 0.4};
	r[0].n_itl = 3;
	r[0].itls = malloc(3 * sizeof(double));
	r[0].itls[0] = 0.1, r[0].itls[1] = 0.1, r[0].itls[2] = 0.1;
	r[1] = (struct bench_req_result){
		.success = true, .input_len = 20, .output_len = 1, .start = 0.2, .ttft = 0.3, .e2e = 0.3};
	r[2] = (struct bench_req_result){
		.success = false, .input_len = 5, .output_len = 0, .start = 0.5, .ttft = 0, .e2e = 0.01};
	r[2].error = strdup("http 404: The model `x` does not exist.");
}

static void test_metrics_compute(void)
{
	struct bench_req_result r[3];
	make_results(r);
	struct bench_metrics m;
	struct err e;
	EXPECT_EQ_INT(bench_metrics_compute(r, 3, 2.0, &m, &e), 0);
	EXPECT_EQ_INT(m.completed, 2);
	EXPECT_EQ_INT(m.failed, 1);
	EXPECT_EQ_INT(m.total_input, 30); /* failed request not counted */
	EXPECT_EQ_INT(m.total_output, 5);
	EXPECT_NEAR(m.request_throughput, 1.0, 1e-12);
	EXPECT_NEAR(m.output_throughput, 2.5, 1e-12);
	EXPECT_NEAR(m.total_token_throughput, 17.5, 1e-12);
	EXPECT_NEAR(m.ttft_ms.mean, 200, 1e-9);
	EXPECT_NEAR(m.ttft_ms.median, 200, 1e-9);
	EXPECT_EQ_INT(m.tpot_ms.n, 1); /* (0.4 - 0.1) / (4 - 1) */
	EXPECT_NEAR(m.tpot_ms.mean, 100, 1e-9);
	EXPECT_EQ_INT(m.itl_ms.n, 3);
	EXPECT_NEAR(m.itl_ms.p99, 100, 1e-9);
	EXPECT_NEAR(m.e2el_ms.mean, 350, 1e-9);
	EXPECT(m.ttft_ms.median <= m.ttft_ms.p99 && m.e2el_ms.median <= m.e2el_ms.p99);
	/* in flight: [0,0.4] [0.2,0.5] [0.5,0.51] -> peak 2 */
	EXPECT_EQ_INT(m.max_concurrent_requests, 2);
	/* content chunks at 0.1,0.2,0.3,0.4 and 0.5 all fall in second 0 */
	EXPECT_NEAR(m.max_output_tokens_per_s, 5, 0);
	for (int i = 0; i < 3; i++)
		bench_req_result_fini(&r[i]);

	/* no successful request: all zero, no division by zero */
	struct bench_req_result f = {.success = false, .e2e = 0.1};
	EXPECT_EQ_INT(bench_metrics_compute(&f, 1, 0.1, &m, &e), 0);
	EXPECT_EQ_INT(m.completed, 0);
	EXPECT_EQ_INT(m.failed, 1);
	EXPECT(m.output_throughput == 0 && m.ttft_ms.mean == 0 && m.tpot_ms.p99 == 0);
}

static void test_result_json_schema(void)
{
	struct bench_req_result r[3];
	make_results(r);
	struct bench_metrics m;
	struct err e;
	EXPECT_EQ_INT(bench_metrics_compute(r, 3, 2.0, &m, &e), 0);
	struct bench_run_info info = {.date = "20260101-000000",
				      .base_url = "http://127.0.0.1:1",
				      .endpoint_type = "openai-chat",
				      .model_id = "m",
				      .dataset = "random",
				      .num_prompts = 3,
				      .request_rate = INFINITY,
				      .max_concurrency = 0};
	json_t *j = bench_result_json(&info, &m, r, 3);
	EXPECT(j != NULL);
	static const char *const num_keys[] = {"completed",
					       "failed",
					       "duration",
					       "total_input_tokens",
					       "total_output_tokens",
					       "request_throughput",
					       "output_throughput",
					       "total_token_throughput",
					       "mean_ttft_ms",
					       "median_ttft_ms",
					       "std_ttft_ms",
					       "p99_ttft_ms",
					       "mean_tpot_ms",
					       "median_tpot_ms",
					       "std_tpot_ms",
					       "p99_tpot_ms",
					       "mean_itl_ms",
					       "median_itl_ms",
					       "std_itl_ms",
					       "p99_itl_ms",
					       "mean_e2el_ms",
					       "median_e2el_ms",
					       "std_e2el_ms",
					       "p99_e2el_ms",
					       "max_output_tokens_per_s",
					       "max_concurrent_requests",
					       "num_prompts"};
	for (size_t i = 0; j && i < sizeof num_keys / sizeof num_keys[0]; i++)
		EXPECTF(json_is_number(json_object_get(j, num_keys[i])), "key %s", num_keys[i]);
	static const char *const arr_keys[] = {"input_lens", "output_lens", "ttfts", "e2els", "itls", "errors"};
	for (size_t i = 0; j && i < sizeof arr_keys / sizeof arr_keys[0]; i++)
		EXPECTF(json_array_size(json_object_get(j, arr_keys[i])) == 3, "key %s", arr_keys[i]);
	EXPECT_EQ_INT(json_integer_value(json_object_get(j, "completed")), 2);
	EXPECT_EQ_INT(json_integer_value(json_object_get(j, "failed")), 1);
	EXPECT_EQ_INT(json_integer_value(json_object_get(j, "total_output_tokens")), 5);
	EXPECT(!strcmp(json_string_value(json_object_get(j, "request_rate")), "inf"));
	EXPECT(json_is_null(json_object_get(j, "max_concurrency")));
	EXPECT(!strcmp(json_string_value(json_object_get(j, "endpoint_type")), "openai-chat"));
	json_t *errs = json_object_get(j, "errors");
	EXPECT(!strcmp(json_string_value(json_array_get(errs, 0)), ""));
	EXPECT(strstr(json_string_value(json_array_get(errs, 2)), "404") != NULL);
	json_t *itl0 = json_array_get(json_object_get(j, "itls"), 0);
	EXPECT_EQ_INT(json_array_size(itl0), 3);
	EXPECT_NEAR(json_real_value(json_array_get(itl0, 1)), 0.1, 1e-12);
	EXPECT_EQ_INT(json_integer_value(json_array_get(json_object_get(j, "output_lens"), 0)), 4);
	/* the whole document serializes (no inf / NaN numbers) */
	char *s = json_dumps(j, JSON_COMPACT);
	EXPECT(s != NULL);
	free(s);
	json_decref(j);

	info.request_rate = 2.5, info.max_concurrency = 4;
	j = bench_result_json(&info, &m, r, 3);
	EXPECT_NEAR(json_real_value(json_object_get(j, "request_rate")), 2.5, 0);
	EXPECT_EQ_INT(json_integer_value(json_object_get(j, "max_concurrency")), 4);
	json_decref(j);
	for (int i = 0; i < 3; i++)
		bench_req_result_fini(&r[i]);
}

static void test_print_table(void)
{
	struct bench_req_result r[3];
	make_results(r);
	struct bench_metrics m;
	struct err e;
	EXPECT_EQ_INT(bench_metrics_compute(r, 3, 2.0, &m, &e), 0);
	struct bench_run_info info = {.request_rate = INFINITY, .max_concurrency = 4};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	bench_metrics_print(f, &info, &m, r, 3);
	fclose(f);
	static const char *const lines[] = {"Successful requests:                     2",
					    "Failed requests:                         1",
					    "Benchmark duration (s):                  2.00",
					    "Total input tokens:                      30",
					    "Total generated tokens:                  5",
					    "Request throughput (req/s):              1.00",
					    "Output token throughput (tok/s):         2.50",
					    "Total token throughput (tok/s):          17.50",
					    "Mean TTFT (ms):                          200.00",
					    "Median TPOT (ms):                        100.00",
					    "P99 ITL (ms):                            100.00",
					    "Mean E2EL (ms):                          350.00",
					    "---------------Time to First Token----------------",
					    "error (1 request): http 404: The model `x` does not exist."};
	for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
		EXPECTF(strstr(buf, lines[i]) != NULL, "missing line '%s'", lines[i]);
	free(buf);
	for (int i = 0; i < 3; i++)
		bench_req_result_fini(&r[i]);
}

/* A chat stream as mlaserve / vLLM send it: role chunk, 3 content chunks, an empty final
 * chunk with finish_reason, the usage chunk, [DONE]. Times: event k arrives at 1 + k/10. */
static const char *const chat_events[] = {
	"data: "
	"{\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
	"\"content\":"
	"\"\"},\"finish_reason\":null}]}\n\n",
	"data: "
	"{\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_"
	"reason\":null}]}\n\n",
	"data: "
	"{\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\\u0000\"},"
	"\"finish_reason\":null}]}\n\n",
	"data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" "
	"you\"},\"finish_reason\":null}]}\n\n",
	"data: "
	"{\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_"
	"reason\":\"length\"}]}\n\n",
	"data: "
	"{\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":5,"
	"\"total_tokens\":14}}\n\n",
	"data: [DONE]\n\n",
};

static void feed_events(struct bench_stream *s, const char *const *ev, size_t n, bool bytewise)
{
	for (size_t k = 0; k < n; k++) {
		double t = 1.0 + 0.1 * (double)k;
		if (!bytewise) {
			EXPECT_EQ_INT(bench_stream_feed(s, ev[k], strlen(ev[k]), t), 0);
			continue;
		}
		for (size_t i = 0; ev[k][i]; i++)
			EXPECT_EQ_INT(bench_stream_feed(s, ev[k] + i, 1, t), 0);
	}
}

static void test_stream_chat_timings(void)
{
	for (int bytewise = 0; bytewise < 2; bytewise++) {
		struct bench_stream s;
		bench_stream_init(&s, true, 1.0);
		feed_events(&s, chat_events, 7, bytewise);
		struct bench_req_result r = {0};
		bench_stream_finish(&s, 1.8, 200, NULL, &r);
		EXPECTF(r.success, "error: %s", r.error ? r.error : "(none)");
		EXPECT_NEAR(r.ttft, 0.1, 1e-9); /* the role chunk at t=1.0 is not a token */
		EXPECT_EQ_INT(r.n_itl, 2);
		EXPECT_NEAR(r.itls[0], 0.1, 1e-9);
		EXPECT_NEAR(r.itls[1], 0.1, 1e-9);
		EXPECT_NEAR(r.e2e, 0.8, 1e-9);
		EXPECT_EQ_INT(r.output_len, 5); /* from usage, not the 3 chunks */
		EXPECT_EQ_INT(r.server_prompt_tokens, 9);
		bench_req_result_fini(&r);
		bench_stream_fini(&s);
	}
}

static void test_stream_crlf_comments_no_usage(void)
{
	/* CRLF line ends, a comment line, an event: field, a completions stream, no usage */
	const char *ev[] = {": keep-alive\r\n\r\n",
			    "event: message\r\ndata: "
			    "{\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"a\"}]}\r\n\r\n",
			    "data:{\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"b\"}]}\r\n\r\n",
			    "data: [DONE]\r\n\r\n"};
	struct bench_stream s;
	bench_stream_init(&s, false, 1.0);
	feed_events(&s, ev, 4, true);
	struct bench_req_result r = {0};
	bench_stream_finish(&s, 1.5, 200, NULL, &r);
	EXPECTF(r.success, "error: %s", r.error ? r.error : "(none)");
	EXPECT_EQ_INT(r.output_len, 2); /* fallback: content chunks */
	EXPECT_EQ_INT(r.server_prompt_tokens, -1);
	EXPECT_NEAR(r.ttft, 0.1, 1e-9);
	EXPECT_EQ_INT(r.n_itl, 1);
	bench_req_result_fini(&r);
	bench_stream_fini(&s);
}

static struct bench_req_result run_stream(bool chat, const char *const *ev, size_t n, long status, const char *terr)
{
	struct bench_stream s;
	bench_stream_init(&s, chat, 0);
	feed_events(&s, ev, n, false);
	struct bench_req_result r = {0};
	bench_stream_finish(&s, 2.0, status, terr, &r);
	bench_stream_fini(&s);
	return r;
}

static void test_stream_failures(void)
{
	/* truncated: no [DONE] */
	struct bench_req_result r = run_stream(true, chat_events, 4, 200, NULL);
	EXPECT(!r.success && r.error && strstr(r.error, "[DONE]"));
	EXPECT_EQ_INT(r.output_len, 3);
	bench_req_result_fini(&r);
	/* an error event mid-stream, then [DONE] */
	const char *err_ev[] = {
		chat_events[1],
		"data: {\"error\":{\"message\":\"engine died\",\"type\":\"InternalServerError\",\"code\":500}}\n\n",
		"data: [DONE]\n\n"};
	r = run_stream(true, err_ev, 3, 200, NULL);
	EXPECT(!r.success && r.error && strstr(r.error, "engine died"));
	bench_req_result_fini(&r);
	/* 404 with an OpenAI error body */
	const char *body404[] = {"{\"error\":{\"message\":\"The model `x` does not "
				 "exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}}"};
	r = run_stream(true, body404, 1, 404, NULL);
	EXPECT(!r.success && r.error && !strcmp(r.error, "http 404: The model `x` does not exist."));
	bench_req_result_fini(&r);
	/* 401 {"error":"Unauthorized"} and a non-JSON 502 body */
	const char *body401[] = {"{\"error\": \"Unauthorized\"}"};
	r = run_stream(true, body401, 1, 401, NULL);
	EXPECT(!r.success && r.error && !strcmp(r.error, "http 401: Unauthorized"));
	bench_req_result_fini(&r);
	const char *body502[] = {"<html>bad\ngateway</html>"};
	r = run_stream(true, body502, 1, 502, NULL);
	EXPECT(!r.success && r.error && !strcmp(r.error, "http 502: <html>bad gateway</html>"));
	bench_req_result_fini(&r);
	/* transport error wins */
	r = run_stream(true, chat_events, 2, 0, "Couldn't connect to server");
	EXPECT(!r.success && r.error && !strcmp(r.error, "Couldn't connect to server"));
	bench_req_result_fini(&r);
	/* malformed JSON event */
	const char *bad[] = {"data: {\"choices\": [\n\n", "data: [DONE]\n\n"};
	r = run_stream(true, bad, 2, 200, NULL);
	EXPECT(!r.success && r.error && strstr(r.error, "malformed stream event"));
	bench_req_result_fini(&r);
	/* [DONE] without any token */
	const char *empty[] = {chat_events[0], "data: [DONE]\n\n"};
	r = run_stream(true, empty, 2, 200, NULL);
	EXPECT(!r.success && r.error && strstr(r.error, "without generated tokens"));
	bench_req_result_fini(&r);
	/* tokens that decode to no text: usage says 2, TTFT from the first choices event */
	const char *notext[] = {chat_events[0], chat_events[4], chat_events[5], "data: [DONE]\n\n"};
	notext[2] = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n";
	r = run_stream(true, notext, 4, 200, NULL);
	EXPECTF(r.success, "error: %s", r.error ? r.error : "(none)");
	EXPECT_EQ_INT(r.output_len, 2);
	EXPECT_NEAR(r.ttft, 1.0, 1e-9);
	bench_req_result_fini(&r);
}

static void test_clean_msg(void)
{
	char *m = bench_clean_msg("a\nb\x01\xff", 5, 100);
	EXPECT(m && !strcmp(m, "a b??"));
	free(m);
	m = bench_clean_msg("abcdef", 6, 3);
	EXPECT(m && !strcmp(m, "abc..."));
	free(m);
}

static void test_random_prompts_exact_lengths(void)
{
	struct tok *t;
	struct err e;
	if (tok_load(fixture_path("tiny-v3"), &t, &e) < 0) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	struct bench_random_opts o = {.input_len = 24, .output_len = 8, .range_ratio = 0.5, .seed = 3};
	struct bench_prompt *p, *q;
	size_t mm;
	EXPECT_EQ_INT(bench_prompts_random(t, &o, 50, &p, &mm, &e), 0);
	EXPECT_EQ_INT(mm, 0);
	bool varied = false;
	for (int i = 0; i < 50; i++) {
		EXPECT(p[i].input_len >= 12 && p[i].input_len <= 36);
		EXPECT(p[i].output_len >= 4 && p[i].output_len <= 12);
		varied |= p[i].input_len != p[0].input_len;
		/* the text re-encodes to exactly input_len tokens */
		int32_t *ids;
		size_t n;
		EXPECT_EQ_INT(tok_encode(t, p[i].text, p[i].text_len, false, &ids, &n, &e), 0);
		EXPECT_EQ_INT(n, p[i].input_len);
		free(ids);
	}
	EXPECT(varied);
	/* same seed, same prompts */
	EXPECT_EQ_INT(bench_prompts_random(t, &o, 50, &q, &mm, &e), 0);
	for (int i = 0; i < 50; i++)
		EXPECT(p[i].text_len == q[i].text_len && !memcmp(p[i].text, q[i].text, p[i].text_len) &&
		       p[i].output_len == q[i].output_len);
	bench_prompts_free(q, 50);
	bench_prompts_free(p, 50);

	/* token-id prompts: exact, ordinary ids only */
	o.as_ids = true, o.range_ratio = 0, o.input_len = 7;
	EXPECT_EQ_INT(bench_prompts_random(t, &o, 5, &p, &mm, &e), 0);
	for (int i = 0; i < 5; i++) {
		EXPECT(p[i].text == NULL && p[i].n_ids == 7 && p[i].input_len == 7);
		for (int k = 0; k < 7; k++)
			EXPECT(!tok_is_special(t, p[i].ids[k]) && p[i].ids[k] < tok_vocab_size(t));
	}
	bench_prompts_free(p, 5);
	o.range_ratio = 1.0;
	EXPECT_EQ_INT(bench_prompts_random(t, &o, 5, &p, &mm, &e), -1);
	EXPECT(strstr(e.msg, "range-ratio") != NULL);
	tok_free(t);
}

static void test_request_bodies(void)
{
	int32_t ids[] = {5, 6, 7};
	char text[] = "hi \"there\"\0!"; /* a NUL inside the prompt is kept */
	struct bench_prompt ptext = {.text = text, .text_len = sizeof text - 1, .output_len = 9};
	struct bench_prompt pids = {.ids = ids, .n_ids = 3, .output_len = 4};
	struct bench_body_opts o = {.model = "m", .chat = true, .ignore_eos = true};
	char *s = bench_request_body(&o, &ptext);
	json_t *j = json_loads(s, JSON_ALLOW_NUL, NULL);
	EXPECT(j != NULL);
	EXPECT(!strcmp(json_string_value(json_object_get(j, "model")), "m"));
	json_t *msg = json_array_get(json_object_get(j, "messages"), 0);
	EXPECT(!strcmp(json_string_value(json_object_get(msg, "role")), "user"));
	json_t *content = json_object_get(msg, "content");
	EXPECT(json_string_length(content) == sizeof text - 1 &&
	       !memcmp(json_string_value(content), text, sizeof text - 1));
	EXPECT_EQ_INT(json_integer_value(json_object_get(j, "max_tokens")), 9);
	EXPECT(json_is_true(json_object_get(j, "stream")));
	EXPECT(json_is_true(json_object_get(json_object_get(j, "stream_options"), "include_usage")));
	EXPECT(json_is_true(json_object_get(j, "ignore_eos")));
	json_decref(j);
	free(s);
	o.chat = false, o.ignore_eos = false;
	s = bench_request_body(&o, &pids);
	j = json_loads(s, 0, NULL);
	json_t *pr = json_object_get(j, "prompt");
	EXPECT(json_array_size(pr) == 3 && json_integer_value(json_array_get(pr, 2)) == 7);
	EXPECT(json_object_get(j, "ignore_eos") == NULL);
	EXPECT(json_object_get(j, "messages") == NULL);
	json_decref(j);
	free(s);
}

static void test_jsonl_dataset(void)
{
	char path[] = "/tmp/mlaserve-bench-test-XXXXXX";
	int fd = mkstemp(path);
	EXPECT(fd >= 0);
	const char good[] = "{\"prompt\": \"one\"}\n\n{\"prompt\": \"two\", \"output_len\": 3}\r\n";
	EXPECT(write(fd, good, sizeof good - 1) == (ssize_t)(sizeof good - 1));
	close(fd);
	struct bench_prompt *p;
	struct err e;
	EXPECT_EQ_INT(bench_prompts_jsonl(path, NULL, 16, 5, &p, &e), 0);
	EXPECT(!strcmp(p[0].text, "one") && p[0].output_len == 16 && p[0].input_len == -1);
	EXPECT(!strcmp(p[1].text, "two") && p[1].output_len == 3);
	EXPECT(!strcmp(p[4].text, "one")); /* reused from the start */
	bench_prompts_free(p, 5);

	FILE *f = fopen(path, "w");
	fputs("{\"prompt\": \"ok\"}\n{\"prompt\": \"x\", \"output_len\": 0}\n", f);
	fclose(f);
	EXPECT_EQ_INT(bench_prompts_jsonl(path, NULL, 16, 2, &p, &e), -1);
	EXPECTF(strstr(e.msg, ":2: \"output_len\"") != NULL, "message: %s", e.msg);
	f = fopen(path, "w");
	fputs("{\"prompt\": \"ok\"}\nnot json\n", f);
	fclose(f);
	EXPECT_EQ_INT(bench_prompts_jsonl(path, NULL, 16, 2, &p, &e), -1);
	EXPECTF(strstr(e.msg, ":2: ") != NULL, "message: %s", e.msg);
	unlink(path);
	EXPECT_EQ_INT(bench_prompts_jsonl(path, NULL, 16, 2, &p, &e), -1);
	EXPECT(strstr(e.msg, "cannot open") != NULL);
}

static void test_poisson_gaps(void)
{
	struct bench_rng r = {42};
	double sum = 0;
	int n = 20000;
	for (int i = 0; i < n; i++) {
		double g = bench_rng_exp(&r, 4.0);
		EXPECT(g >= 0 && isfinite(g));
		sum += g;
	}
	/* mean 1/rate = 0.25; the standard error of the mean is 0.25/sqrt(n) ~ 0.0018 */
	EXPECT_NEAR(sum / n, 0.25, 0.01);
}

TESTS(T(test_percentile_numpy_linear), T(test_dist_mean_median_std_ms), T(test_metrics_compute),
      T(test_result_json_schema), T(test_print_table), T(test_stream_chat_timings),
      T(test_stream_crlf_comments_no_usage), T(test_stream_failures), T(test_clean_msg),
      T(test_random_prompts_exact_lengths), T(test_request_bodies), T(test_jsonl_dataset), T(test_poisson_gaps))
