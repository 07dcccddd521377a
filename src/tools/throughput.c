/* mlaserve bench throughput (throughput.h): every request is submitted at t0 from this
 * thread; one small waiter thread per request blocks on its handle (no polling) and stamps
 * the first token and the end, so TTFT / TPOT are per request while the engine batches. */
#include "tools/throughput.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mono.h"
#include "base/err.h"
#include "engine/engine.h"
#include "setup/engine_args.h"
#include "io/config.h"
#include "model/model.h"
#include "ops/pool.h"

#define MAX_PROMPTS 4096

struct tp_opts {
	struct engine_args ea;
	int n, in_len, out_len, prefix_len;
	int n_threads; /* of the engine's pool (for the CPU-busy figure) */
	uint64_t seed;
	const char *json;
};

struct tp_req {
	struct engine_req *h;
	double t_submit, t_first, t_end;
	int n_out, n_cached, n_prompt;
	int failed;
	char error[128];
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Reads one request's events until the end; blocks on the handle's condition variable. */
static void *waiter(void *arg)
{
	struct tp_req *r = arg;
	struct engine_event ev;
	int rc;
	while ((rc = engine_next_event(r->h, &ev, -1)) == ENGINE_EV_OK) {
		double t = mono_now_s();
		if (ev.n_tokens > 0 && r->t_first == 0)
			r->t_first = t;
		r->n_out = ev.n_output_tokens;
		r->n_cached = ev.n_cached_tokens;
		r->n_prompt = ev.n_prompt_tokens;
		if (ev.finish == ENGINE_FINISH_ABORT) {
			r->failed = 1;
			snprintf(r->error, sizeof r->error, "%s", ev.error ? ev.error : "aborted");
		}
	}
	r->t_end = mono_now_s();
	return NULL;
}

/* q-quantile of sorted v[n] (nearest rank) */
static double pct(const double *v, int n, double q)
{
	if (n <= 0)
		return 0;
	int k = (int)(q * (n - 1) + 0.5);
	return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

struct dist {
	double mean, p50, p90, p99;
};

static struct dist summarize(double *v, int n)
{
	struct dist d = {0};
	if (n <= 0)
		return d;
	double s = 0;
	for (int i = 0; i < n; i++)
		s += v[i];
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	d.mean = s / n;
	d.p50 = pct(v, n, 0.5);
	d.p90 = pct(v, n, 0.9);
	d.p99 = pct(v, n, 0.99);
	return d;
}

static json_t *dist_json(struct dist d)
{
	return json_pack("{s:f,s:f,s:f,s:f}", "mean", d.mean * 1e3, "p50", d.p50 * 1e3, "p90", d.p90 * 1e3, "p99",
			 d.p99 * 1e3);
}

static uint64_t rng_next(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

static int run(struct tp_opts *o, struct err *e)
{
	struct engine_runtime rt;
	struct tp_req *reqs = calloc((size_t)o->n, sizeof *reqs);
	pthread_t *th = calloc((size_t)o->n, sizeof *th);
	int plen = o->prefix_len + o->in_len, rc = -1, n_started = 0;
	int32_t *prompt = malloc(sizeof(int32_t) * (size_t)plen);
	memset(&rt, 0, sizeof rt);
	if (!reqs || !th || !prompt) {
		err_set(e, "bench throughput: out of memory");
		goto out;
	}
	if (engine_runtime_open(&o->ea, NULL, &rt, e) < 0)
		goto out;
	const struct model_config *c = model_config(rt.model);
	o->n_threads = pool_size(rt.pool);
	struct sampling_params sp;
	sampling_params_init(&sp, &rt.defaults);
	sp.temperature = 0; /* greedy: the cheapest sampler, lengths are fixed by ignore_eos */
	sp.top_p = 1;
	sp.top_k = 0;
	sp.min_p = 0;
	sp.repetition_penalty = 1;
	sp.max_tokens = o->out_len;
	sp.ignore_eos = true;
	uint64_t rs = o->seed * 0x9e3779b97f4a7c15ull + 1;
	for (int i = 0; i < o->prefix_len; i++)
		prompt[i] = (int32_t)(rng_next(&rs) % (uint64_t)c->vocab_size);

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 512 * 1024); /* static TLS of the linked libraries lives here too */
	double t0 = mono_now_s(), c0 = proc_cpu_s();
	for (int k = 0; k < o->n; k++) {
		for (int i = o->prefix_len; i < plen; i++)
			prompt[i] = (int32_t)(rng_next(&rs) % (uint64_t)c->vocab_size);
		reqs[k].t_submit = mono_now_s();
		if (engine_submit(rt.engine, prompt, plen, &sp, &reqs[k].h, e) < 0) {
			err_prefix(e, "request %d", k);
			pthread_attr_destroy(&attr);
			goto join;
		}
		if (pthread_create(&th[k], &attr, waiter, &reqs[k]) != 0) {
			engine_release(reqs[k].h);
			reqs[k].h = NULL;
			err_set(e, "bench throughput: cannot start waiter thread %d", k);
			pthread_attr_destroy(&attr);
			goto join;
		}
		n_started++;
	}
	pthread_attr_destroy(&attr);
	rc = 0;
join:
	for (int k = 0; k < n_started; k++)
		pthread_join(th[k], NULL);
	double elapsed = mono_now_s() - t0, cpu = proc_cpu_s() - c0;
	struct engine_stats st;
	engine_stats_get(rt.engine, &st);
	for (int k = 0; k < n_started; k++)
		engine_release(reqs[k].h);
	if (rc < 0)
		goto out;

	double *ttft = malloc(sizeof(double) * (size_t)o->n), *tpot = malloc(sizeof(double) * (size_t)o->n);
	double *e2e = malloc(sizeof(double) * (size_t)o->n);
	if (!ttft || !tpot || !e2e) {
		free(ttft), free(tpot), free(e2e);
		rc = err_set(e, "bench throughput: out of memory");
		goto out;
	}
	long n_in = 0, n_out = 0, n_cached = 0;
	int n_tpot = 0, n_fail = 0;
	for (int k = 0; k < o->n; k++) {
		struct tp_req *r = &reqs[k];
		if (r->failed) {
			if (!n_fail++)
				fprintf(stderr, "mlaserve bench throughput: request %d failed: %s\n", k, r->error);
			continue;
		}
		n_in += r->n_prompt;
		n_out += r->n_out;
		n_cached += r->n_cached;
		ttft[k - n_fail] = r->t_first - r->t_submit;
		e2e[k - n_fail] = r->t_end - r->t_submit;
		if (r->n_out > 1)
			tpot[n_tpot++] = (r->t_end - r->t_first) / (r->n_out - 1);
	}
	int n_ok = o->n - n_fail;
	struct dist dt = summarize(ttft, n_ok), dp = summarize(tpot, n_tpot), de = summarize(e2e, n_ok);
	free(ttft), free(tpot), free(e2e);
	double rps = n_ok / elapsed, in_tps = n_in / elapsed, out_tps = n_out / elapsed;
	printf("bench throughput: %d requests x (%d prefix + %d input, %d output) tokens, %s\n", o->n, o->prefix_len,
	       o->in_len, o->out_len, o->ea.load_dummy ? "dummy weights" : o->ea.model_dir);
	/* CPU seconds (all threads) per token: less sensitive than wall time to other processes
	 * taking cores on a shared machine, since idle workers sleep */
	printf("  elapsed %.2f s (CPU %.2f s, %.0f%% of %d threads busy), %d steps, %llu preemptions, %d failed\n",
	       elapsed, cpu, 100 * cpu / elapsed / (o->n_threads > 0 ? o->n_threads : 1), o->n_threads, (int)st.steps,
	       (unsigned long long)st.preemptions, n_fail);
	printf("  throughput: %.3f requests/s, %.1f input tokens/s, %.1f output tokens/s, %.1f total tokens/s\n", rps,
	       in_tps, out_tps, in_tps + out_tps);
	printf("  prefix cache: %ld of %ld prompt tokens cached (%.1f%%)\n", n_cached, n_in,
	       n_in ? 100.0 * n_cached / n_in : 0.0);
	printf("  TTFT ms: mean %.1f, p50 %.1f, p90 %.1f, p99 %.1f\n", dt.mean * 1e3, dt.p50 * 1e3, dt.p90 * 1e3,
	       dt.p99 * 1e3);
	printf("  TPOT ms: mean %.1f, p50 %.1f, p90 %.1f, p99 %.1f\n", dp.mean * 1e3, dp.p50 * 1e3, dp.p90 * 1e3,
	       dp.p99 * 1e3);
	printf("  E2E  ms: mean %.1f, p50 %.1f, p90 %.1f, p99 %.1f\n", de.mean * 1e3, de.p50 * 1e3, de.p90 * 1e3,
	       de.p99 * 1e3);
	if (o->json) {
		json_t *j = json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:b,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:"
				      "I,s:o,s:o,s:o}",
				      "model", o->ea.load_dummy ? "dummy" : o->ea.model_dir, "num_requests", o->n,
				      "prefix_len", o->prefix_len, "input_len", o->in_len, "output_len", o->out_len,
				      "block_size", engine_block_size(rt.engine), "enable_prefix_caching",
				      o->ea.enable_prefix_caching, "max_num_batched_tokens",
				      o->ea.max_num_batched_tokens, "failed", n_fail, "elapsed_time", elapsed,
				      "cpu_time", cpu, "requests_per_second", rps, "input_tokens_per_second", in_tps,
				      "output_tokens_per_second", out_tps, "tokens_per_second", in_tps + out_tps,
				      "prefix_hit_rate", n_in ? (double)n_cached / n_in : 0.0, "total_input_tokens",
				      (json_int_t)n_in, "total_output_tokens", (json_int_t)n_out, "cached_tokens",
				      (json_int_t)n_cached, "steps", (json_int_t)st.steps, "ttft_ms", dist_json(dt),
				      "tpot_ms", dist_json(dp), "e2e_ms", dist_json(de));
		if (!j || json_dump_file(j, o->json, JSON_INDENT(2))) {
			json_decref(j);
			rc = err_set(e, "%s: cannot write the JSON report", o->json);
			goto out;
		}
		json_decref(j);
	}
	if (n_fail)
		rc = err_set(e, "%d of %d requests failed", n_fail, o->n);
out:
	engine_runtime_close(&rt);
	free(reqs), free(th), free(prompt);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mlaserve bench throughput MODEL_DIR [--num-prompts N] [--input-len I] [--output-len O]\n"
		   "         [--prefix-len P] [--bench-seed S] [--output-json FILE] [engine options]\n"
		   "  N requests (default 64) of P shared + I random prompt tokens (default 0 + 128) and\n"
		   "  exactly O output tokens each (default 128; ignore_eos, greedy), all submitted at once.\n"
		   "  --max-model-len defaults to P + I + O here.\n");
	engine_args_usage(f);
}

static int int_arg(const char *flag, const char *v, int lo, int hi, int *out, struct err *e)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi)
		return err_set(e, "%s: invalid value '%s' (an integer in [%d, %d])", flag, v, lo, hi);
	*out = (int)x;
	return 0;
}

int bench_throughput_main(int argc, char **argv)
{
	struct tp_opts o = {.n = 64, .in_len = 128, .out_len = 128};
	struct err e = {{0}};
	engine_args_init(&o.ea, false);
	for (int i = 1; i < argc;) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		int r = engine_args_parse(&o.ea, argc, argv, &i, &e);
		if (r < 0)
			goto fail;
		if (r > 0)
			continue;
		if (a[0] != '-') {
			if (o.ea.model_dir) {
				fprintf(stderr, "mlaserve bench throughput: unexpected argument '%s'\n", a);
				return 2;
			}
			o.ea.model_dir = a;
			i++;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "mlaserve bench throughput: %s needs a value\n", a);
			return 2;
		}
		const char *v = argv[i + 1];
		int bad = 0;
		if (!strcmp(a, "--num-prompts"))
			bad = int_arg(a, v, 1, MAX_PROMPTS, &o.n, &e);
		else if (!strcmp(a, "--input-len"))
			bad = int_arg(a, v, 1, 1 << 20, &o.in_len, &e);
		else if (!strcmp(a, "--output-len"))
			bad = int_arg(a, v, 1, 1 << 20, &o.out_len, &e);
		else if (!strcmp(a, "--prefix-len"))
			bad = int_arg(a, v, 0, 1 << 20, &o.prefix_len, &e);
		else if (!strcmp(a, "--bench-seed")) {
			int s;
			bad = int_arg(a, v, 0, INT_MAX, &s, &e);
			o.seed = (uint64_t)s;
		} else if (!strcmp(a, "--output-json"))
			o.json = v;
		else {
			fprintf(stderr, "mlaserve bench throughput: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		}
		if (bad)
			goto fail;
		i += 2;
	}
	if (!o.ea.model_dir) {
		usage(stderr);
		return 2;
	}
	if (o.ea.tp_size > 1 || o.ea.dcp_size > 1) {
		err_set(&e,
			"bench throughput runs one rank: benchmark -tp/-dcp with `mlaserve serve` and bench serve");
		goto fail;
	}
	if (o.ea.max_model_len == 0)
		o.ea.max_model_len = o.prefix_len + o.in_len + o.out_len;
	if (o.ea.max_waiting < o.n)
		o.ea.max_waiting = o.n;
	if (run(&o, &e) < 0)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "mlaserve bench throughput: %s\n", e.msg);
	return 1;
}
