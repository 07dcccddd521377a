#include "tools/load/bench_serve.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/load/client.h"
#include "tools/load/dataset.h"
#include "tools/load/plot.h"
#include "tools/load/stats.h"
#include "tok/tokenizer.h"

#define MAX_LEVELS 64

struct opts {
	const char *base_url, *model, *endpoint, *dataset, *tokenizer, *api_key;
	const char *result_file, *plot;
	int num_prompts, input_len, output_len, seed;
	double range_ratio, request_rate, temperature, timeout_s;
	bool ignore_eos;
	int levels[MAX_LEVELS]; /* max concurrency per run; 0 = unlimited */
	int n_levels;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: mlaserve bench serve [options]\n"
		   "Benchmarks an OpenAI-compatible server with streamed requests.\n\n"
		   "  --base-url URL            server (default http://127.0.0.1:8000)\n"
		   "  --endpoint chat|completions  /v1/chat/completions or /v1/completions\n"
		   "                            (default completions)\n"
		   "  --model NAME              model name (default: first id of GET /v1/models)\n"
		   "  --api-key KEY             bearer token (default: $OPENAI_API_KEY)\n"
		   "  --num-prompts N           requests per run (default 1000)\n"
		   "  --dataset FILE.jsonl      prompts {\"prompt\": ..., \"output_len\"?: N} per line\n"
		   "                            (default: random prompts)\n"
		   "  --tokenizer DIR           tokenizer for random prompts (required for them) and\n"
		   "                            for counting dataset prompt tokens\n"
		   "  --random-input-len N      prompt tokens (default 1024)\n"
		   "  --random-output-len N     max_tokens per request (default 128)\n"
		   "  --random-range-ratio R    lengths uniform in [L(1-R), L(1+R)] (default 0)\n"
		   "  --max-concurrency N|LIST  cap on requests in flight; a comma list (1,4,16,64)\n"
		   "                            runs one benchmark per value (sweep); default unlimited\n"
		   "  --request-rate R|inf      Poisson arrivals with mean R req/s (default inf)\n"
		   "  --seed N                  prompts and arrivals (default 0)\n"
		   "  --ignore-eos              send ignore_eos (vLLM extension): exact output lengths\n"
		   "  --temperature T           sampling temperature (default 0, greedy)\n"
		   "  --request-timeout S       per-request timeout in seconds (default 0: none)\n"
		   "  --result-file FILE.json   write the results (an array of runs for a sweep)\n"
		   "  --plot FILE.png           chart of throughput vs TPOT / E2E latency per level\n"
		   "Exit status: 0 all requests succeeded, 1 some failed or error, 2 usage.\n");
}

static int parse_int(const char *opt, const char *v, int lo, int *out)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > 1 << 30) {
		fprintf(stderr, "mlaserve bench serve: %s: expected an integer >= %d, got '%s'\n", opt, lo, v);
		return -1;
	}
	*out = (int)x;
	return 0;
}

static int parse_num(const char *opt, const char *v, double *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || end == v || *end || !(x >= 0) || !isfinite(x)) {
		fprintf(stderr, "mlaserve bench serve: %s: expected a number >= 0, got '%s'\n", opt, v);
		return -1;
	}
	*out = x;
	return 0;
}

static int parse_levels(const char *v, struct opts *o)
{
	o->n_levels = 0;
	const char *p = v;
	while (*p) {
		char item[32];
		size_t n = strcspn(p, ",");
		if (n == 0 || n >= sizeof item || o->n_levels == MAX_LEVELS) {
			fprintf(stderr,
				"mlaserve bench serve: --max-concurrency: bad list '%s' "
				"(up to %d positive integers separated by commas)\n",
				v, MAX_LEVELS);
			return -1;
		}
		memcpy(item, p, n);
		item[n] = 0;
		if (parse_int("--max-concurrency", item, 1, &o->levels[o->n_levels++]) < 0)
			return -1;
		p += n;
		if (*p == ',' && !*++p) {
			fprintf(stderr, "mlaserve bench serve: --max-concurrency: trailing comma in '%s'\n", v);
			return -1;
		}
	}
	return 0;
}

/* Returns 0, 1 for --help, -1 on a usage error. Accepts "--opt value" and "--opt=value". */
static int parse_args(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){.base_url = "http://127.0.0.1:8000",
			   .endpoint = "completions",
			   .num_prompts = 1000,
			   .input_len = 1024,
			   .output_len = 128,
			   .request_rate = INFINITY,
			   .n_levels = 1};
	o->api_key = getenv("OPENAI_API_KEY");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			return 1;
		if (!strcmp(a, "--ignore-eos")) {
			o->ignore_eos = true;
			continue;
		}
		if (strncmp(a, "--", 2)) {
			fprintf(stderr, "mlaserve bench serve: unexpected argument '%s'\n", a);
			return -1;
		}
		char name[64];
		const char *eq = strchr(a, '='), *v;
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);
		if (nl >= sizeof name) {
			fprintf(stderr, "mlaserve bench serve: unknown option '%s'\n", a);
			return -1;
		}
		memcpy(name, a, nl);
		name[nl] = 0;
		if (eq) {
			v = eq + 1;
		} else if (i + 1 < argc) {
			v = argv[++i];
		} else {
			fprintf(stderr, "mlaserve bench serve: %s needs a value\n", name);
			return -1;
		}
		int rc = 0;
		if (!strcmp(name, "--base-url"))
			o->base_url = v;
		else if (!strcmp(name, "--model"))
			o->model = v;
		else if (!strcmp(name, "--endpoint"))
			o->endpoint = v;
		else if (!strcmp(name, "--dataset"))
			o->dataset = v;
		else if (!strcmp(name, "--tokenizer"))
			o->tokenizer = v;
		else if (!strcmp(name, "--api-key"))
			o->api_key = v;
		else if (!strcmp(name, "--result-file"))
			o->result_file = v;
		else if (!strcmp(name, "--plot"))
			o->plot = v;
		else if (!strcmp(name, "--num-prompts"))
			rc = parse_int(name, v, 1, &o->num_prompts);
		else if (!strcmp(name, "--random-input-len"))
			rc = parse_int(name, v, 1, &o->input_len);
		else if (!strcmp(name, "--random-output-len"))
			rc = parse_int(name, v, 1, &o->output_len);
		else if (!strcmp(name, "--seed"))
			rc = parse_int(name, v, 0, &o->seed);
		else if (!strcmp(name, "--random-range-ratio"))
			rc = parse_num(name, v, &o->range_ratio);
		else if (!strcmp(name, "--temperature"))
			rc = parse_num(name, v, &o->temperature);
		else if (!strcmp(name, "--request-timeout"))
			rc = parse_num(name, v, &o->timeout_s);
		else if (!strcmp(name, "--request-rate"))
			rc = !strcmp(v, "inf") ? (o->request_rate = INFINITY, 0)
					       : parse_num(name, v, &o->request_rate);
		else if (!strcmp(name, "--max-concurrency"))
			rc = parse_levels(v, o);
		else {
			fprintf(stderr, "mlaserve bench serve: unknown option '%s'\n", name);
			return -1;
		}
		if (rc < 0)
			return -1;
	}
	if (strcmp(o->endpoint, "chat") && strcmp(o->endpoint, "completions")) {
		fprintf(stderr, "mlaserve bench serve: --endpoint: expected chat or completions, got '%s'\n",
			o->endpoint);
		return -1;
	}
	if (o->range_ratio >= 1) {
		fprintf(stderr, "mlaserve bench serve: --random-range-ratio must be < 1, got %g\n", o->range_ratio);
		return -1;
	}
	if (o->request_rate == 0) {
		fprintf(stderr, "mlaserve bench serve: --request-rate must be > 0 (or inf)\n");
		return -1;
	}
	if (!o->dataset && !o->tokenizer) {
		fprintf(stderr, "mlaserve bench serve: random prompts need --tokenizer DIR (the "
				"model directory or a tokenizer.json), or give --dataset FILE.jsonl\n");
		return -1;
	}
	return 0;
}

struct progress {
	char label[32];
	bool drawn; /* a line is on screen without its newline */
};

/* "\r[c=4]  [#########-----------]  45/100  failed 0" on stderr (only when it is a tty). */
static void show_progress(void *ctx, size_t done, size_t failed, size_t n)
{
	struct progress *p = ctx;
	char bar[41];
	size_t fill = n ? done * 40 / n : 40;
	for (size_t i = 0; i < 40; i++)
		bar[i] = i < fill ? '#' : '-';
	bar[40] = 0;
	fprintf(stderr, "\r%s [%s] %zu/%zu  failed %zu", p->label, bar, done, n, failed);
	if (done == n)
		fputc('\n', stderr);
	fflush(stderr);
	p->drawn = done < n;
}

/* The requests of one run: prompts and their JSON bodies. */
struct workload {
	struct bench_prompt *prompts;
	char **bodies;
	size_t n;
};

static void workload_free(struct workload *w)
{
	for (size_t i = 0; w->bodies && i < w->n; i++)
		free(w->bodies[i]);
	free(w->bodies);
	bench_prompts_free(w->prompts, w->n);
	memset(w, 0, sizeof *w);
}

/* Random prompts use `seed`: every level of a sweep gets fresh prompts, so the server's
 * prefix cache does not serve a level the prompts of the level before. */
static int workload_make(const struct opts *o, const struct tok *t, const char *model, uint64_t seed,
			 struct workload *w)
{
	struct err e = {{0}};
	memset(w, 0, sizeof *w);
	w->n = (size_t)o->num_prompts;
	int rc;
	if (o->dataset) {
		rc = bench_prompts_jsonl(o->dataset, t, o->output_len, w->n, &w->prompts, &e);
	} else {
		struct bench_random_opts ro = {.input_len = o->input_len,
					       .output_len = o->output_len,
					       .range_ratio = o->range_ratio,
					       .seed = seed,
					       .as_ids = strcmp(o->endpoint, "chat") != 0};
		size_t mismatch = 0;
		rc = bench_prompts_random(t, &ro, w->n, &w->prompts, &mismatch, &e);
		if (rc == 0 && mismatch)
			fprintf(stderr,
				"mlaserve bench serve: warning: %zu of %zu random prompts "
				"do not re-tokenize to their target length (their lengths are "
				"reported as measured)\n",
				mismatch, w->n);
	}
	if (rc < 0) {
		fprintf(stderr, "mlaserve bench serve: %s\n", e.msg);
		return -1;
	}
	if (!(w->bodies = calloc(w->n, sizeof *w->bodies))) {
		fprintf(stderr, "mlaserve bench serve: out of memory\n");
		goto fail;
	}
	struct bench_body_opts bo = {.model = model,
				     .chat = !strcmp(o->endpoint, "chat"),
				     .ignore_eos = o->ignore_eos,
				     .temperature = o->temperature};
	for (size_t i = 0; i < w->n; i++)
		if (!(w->bodies[i] = bench_request_body(&bo, &w->prompts[i]))) {
			fprintf(stderr,
				"mlaserve bench serve: cannot build request %zu (out of "
				"memory, or the model name is not valid utf-8)\n",
				i);
			goto fail;
		}
	return 0;
fail:
	workload_free(w);
	return -1;
}

/* One benchmark run at concurrency `level`; appends its JSON result to `runs`. */
static int run_level(const struct opts *o, const struct bench_client_opts *co_in, const struct workload *w,
		     const char *model, int level, const char *date, json_t *runs, struct bench_plot_point *pt,
		     int *n_failed)
{
	const struct bench_prompt *prompts = w->prompts;
	size_t n = (size_t)o->num_prompts;
	struct err e = {{0}};
	int rc = -1;
	struct bench_req_result *res = calloc(n, sizeof *res);
	double *arrivals = calloc(n, sizeof *arrivals);
	if (!res || !arrivals) {
		fprintf(stderr, "mlaserve bench serve: out of memory for %zu requests\n", n);
		goto out;
	}
	/* Poisson process: exponential gaps with mean 1/rate; the same seed at every level. */
	struct bench_rng rng = {(uint64_t)o->seed * 0x2545f4914f6cdd1dull + 1};
	for (size_t i = 1; i < n && isfinite(o->request_rate); i++)
		arrivals[i] = arrivals[i - 1] + bench_rng_exp(&rng, o->request_rate);

	struct progress prog;
	snprintf(prog.label, sizeof prog.label, level > 0 ? "c=%d" : "c=inf", level);
	prog.drawn = false;
	struct bench_client_opts co = *co_in;
	if (isatty(STDERR_FILENO)) {
		co.progress = show_progress;
		co.progress_ctx = &prog;
	}
	char conc[16], rate[48];
	snprintf(conc, sizeof conc, level > 0 ? "%d" : "unlimited", level);
	snprintf(rate, sizeof rate, isfinite(o->request_rate) ? "%.2f req/s (poisson)" : "inf", o->request_rate);
	printf("bench serve: %zu prompts, max concurrency %s, request rate %s, %s\n", n, conc, rate, co.url);
	fflush(stdout);
	double duration;
	if (bench_client_run(&co, (const char *const *)w->bodies, arrivals, n, level, res, &duration, &e) < 0) {
		if (prog.drawn) /* end the progress line */
			fputc('\n', stderr);
		fprintf(stderr, "mlaserve bench serve: %s\n", e.msg);
		goto out;
	}
	for (size_t i = 0; i < n; i++) /* prompt length unknown to the client: the server's */
		res[i].input_len = prompts[i].input_len >= 0         ? prompts[i].input_len
				   : res[i].server_prompt_tokens > 0 ? res[i].server_prompt_tokens
								     : 0;
	struct bench_metrics m;
	if (bench_metrics_compute(res, n, duration, &m, &e) < 0) {
		fprintf(stderr, "mlaserve bench serve: %s\n", e.msg);
		goto out;
	}
	struct bench_run_info info = {.date = date,
				      .base_url = o->base_url,
				      .endpoint_type = strcmp(o->endpoint, "chat") ? "openai" : "openai-chat",
				      .model_id = model,
				      .tokenizer_id = o->tokenizer,
				      .dataset = o->dataset ? o->dataset : "random",
				      .num_prompts = o->num_prompts,
				      .request_rate = o->request_rate,
				      .max_concurrency = level,
				      .seed = o->seed,
				      .ignore_eos = o->ignore_eos,
				      .random_input_len = o->input_len,
				      .random_output_len = o->output_len,
				      .random_range_ratio = o->range_ratio};
	bench_metrics_print(stdout, &info, &m, res, n);
	fflush(stdout);
	json_t *j = bench_result_json(&info, &m, res, n);
	if (!j || json_array_append_new(runs, j) < 0) {
		fprintf(stderr, "mlaserve bench serve: out of memory building the result\n");
		goto out;
	}
	snprintf(pt->label, sizeof pt->label, "%s", prog.label);
	pt->output_throughput = m.output_throughput;
	pt->median_tpot_ms = m.tpot_ms.median;
	pt->p99_tpot_ms = m.tpot_ms.p99;
	pt->median_e2el_ms = m.e2el_ms.median;
	pt->p99_e2el_ms = m.e2el_ms.p99;
	*n_failed += m.failed;
	rc = 0;
out:
	for (size_t i = 0; res && i < n; i++)
		bench_req_result_fini(&res[i]);
	free(res);
	free(arrivals);
	return rc;
}

int bench_serve_main(int argc, char **argv)
{
	struct opts o;
	int pr = parse_args(argc, argv, &o);
	if (pr != 0) {
		usage(pr > 0 ? stdout : stderr);
		return pr > 0 ? 0 : 2;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "mlaserve bench serve: libcurl initialization failed\n");
		return 1;
	}
	int status = 1, n_failed = 0;
	struct err e = {{0}};
	struct tok *t = NULL;
	char *model = NULL, *url = NULL;
	json_t *runs = json_array();
	struct bench_plot_point pts[MAX_LEVELS];

	size_t blen = strlen(o.base_url);
	while (blen > 0 && o.base_url[blen - 1] == '/') /* "http://h:p/" + "/v1/..." */
		blen--;
	if (!(url = malloc(blen + 32)) || !runs)
		goto oom;
	snprintf(url, blen + 32, "%.*s/v1/%s", (int)blen, o.base_url,
		 strcmp(o.endpoint, "chat") ? "completions" : "chat/completions");
	if (o.model) {
		if (!(model = strdup(o.model)))
			goto oom;
	} else {
		char base[4096];
		snprintf(base, sizeof base, "%.*s", (int)blen, o.base_url);
		if (bench_client_first_model(base, o.api_key, o.timeout_s, &model, &e) < 0) {
			fprintf(stderr,
				"mlaserve bench serve: cannot find the model (give --model): "
				"%s\n",
				e.msg);
			goto out;
		}
	}
	if (o.tokenizer && tok_load(o.tokenizer, &t, &e) < 0) {
		fprintf(stderr, "mlaserve bench serve: %s\n", e.msg);
		goto out;
	}
	struct bench_client_opts co = {
		.url = url, .api_key = o.api_key, .chat = !strcmp(o.endpoint, "chat"), .timeout_s = o.timeout_s};
	char date[32];
	time_t now = time(NULL);
	strftime(date, sizeof date, "%Y%m%d-%H%M%S", gmtime(&now));
	for (int l = 0; l < o.n_levels; l++) {
		struct workload w;
		if (workload_make(&o, t, model, (uint64_t)o.seed + (uint64_t)l, &w) < 0)
			goto out;
		int rc = run_level(&o, &co, &w, model, o.levels[l], date, runs, &pts[l], &n_failed);
		workload_free(&w);
		if (rc < 0)
			goto out;
	}
	status = n_failed ? 1 : 0;
	if (o.result_file) {
		json_t *doc = o.n_levels > 1 ? json_incref(runs) : json_incref(json_array_get(runs, 0));
		int wr = json_dump_file(doc, o.result_file, JSON_COMPACT);
		json_decref(doc);
		if (wr < 0) {
			fprintf(stderr, "mlaserve bench serve: %s: cannot write the result\n", o.result_file);
			status = 1;
		} else {
			printf("results written to %s\n", o.result_file);
		}
	}
	if (o.plot) {
		char title[512];
		snprintf(title, sizeof title, "mlaserve bench serve: %s, %s, %d prompts per level%s", model,
			 o.dataset ? o.dataset : "random prompts", o.num_prompts, o.ignore_eos ? ", ignore_eos" : "");
		if (bench_plot_png(o.plot, title, pts, (size_t)o.n_levels, &e) < 0) {
			fprintf(stderr, "mlaserve bench serve: %s\n", e.msg);
			status = 1;
		} else {
			printf("plot written to %s\n", o.plot);
		}
	}
	if (n_failed)
		fprintf(stderr, "mlaserve bench serve: %d request%s failed\n", n_failed, n_failed == 1 ? "" : "s");
	goto out;
oom:
	fprintf(stderr, "mlaserve bench serve: out of memory\n");
out:
	tok_free(t);
	json_decref(runs);
	free(model);
	free(url);
	curl_global_cleanup();
	return status;
}
