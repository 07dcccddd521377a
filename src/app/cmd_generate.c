/* mlaserve generate MODEL_DIR: offline batch generation through the engine.
 *   --prompts-file FILE.jsonl  one {"prompt": "..."} or {"prompt_token_ids": [...]} per line,
 *                              with optional sampling fields (max_tokens, temperature, top_p,
 *                              top_k, min_p, seed, stop, stop_token_ids, ignore_eos, n, ...,
 *                              and structured outputs: response_format, guided_json,
 *                              guided_choice, guided_regex, guided_grammar,
 *                              structured_outputs)
 *   --prompt "text"            one prompt (repeatable)
 *   --prompt-ids 0,5,9         one prompt of token ids (repeatable); given alone (no
 *                              --output), stdout gets just the generated ids, one line each
 * Every prompt goes through the engine together. Output: one JSON line per prompt (and
 * choice) {"index", "token_ids", "text", "finish_reason"} to stdout or --output; a
 * throughput summary on stderr. Sampling is greedy unless --temperature / a line says
 * otherwise. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/mono.h"
#include "setup/cli_util.h"
#include "app/commands.h"
#include "engine/dist_exec.h"
#include "setup/ranks.h"
#include "setup/engine_args.h"
#include "io/json_util.h"
#include "server/openai/openai_json.h"
#include "server/openai/structured.h"
#include "tok/tokenizer.h"

struct gen_item {
	int32_t *ids;
	int n;
	struct sampling_params p;
	struct engine_req *h;
};

struct gen_opts {
	struct engine_args ea;
	const char *prompts_file, *output;
	int max_tokens;
	float temperature;
	bool has_temperature;
	bool ignore_eos;
	const char **texts, **idstrs; /* --prompt / --prompt-ids values, in argv order */
	int n_texts, n_idstrs;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: mlaserve generate MODEL_DIR (--prompts-file FILE.jsonl | --prompt TEXT | --prompt-ids "
		   "0,5,9)...\n"
		   "         [--max-tokens N] [--temperature T] [--ignore-eos] [--output FILE.jsonl]\n");
	engine_args_usage(f);
}

static int num_field(json_t *o, const char *k, double *v, int line, struct err *e)
{
	json_t *x = json_object_get(o, k);
	if (!x || json_is_null(x))
		return 0;
	if (!json_is_number(x))
		return err_set(e, "line %d: \"%s\" must be a number", line, k);
	*v = json_number_value(x);
	return 1;
}

/* An integer field: a whole number within [lo, hi] (a cast outside would be undefined) */
static int int_field(json_t *o, const char *k, double lo, double hi, double *v, int line, struct err *e)
{
	int r = num_field(o, k, v, line, e);
	if (r > 0 && (*v != floor(*v) || *v < lo || *v > hi))
		return err_set(e, "line %d: \"%s\" must be an integer from %.0f to %.0f", line, k, lo, hi);
	return r;
}

/* Sampling fields of one JSONL line over the command-line defaults. */
static int line_params(json_t *o, int line, struct sampling_params *p, struct err *e)
{
	double v;
	int r;
#define NUM(key, dst, conv)                           \
	if ((r = num_field(o, key, &v, line, e)) < 0) \
		return -1;                            \
	if (r)                                        \
		dst = (conv)v;
#define INT(key, dst)                                                   \
	if ((r = int_field(o, key, INT_MIN, INT_MAX, &v, line, e)) < 0) \
		return -1;                                              \
	if (r)                                                          \
		dst = (int)v;
	INT("max_tokens", p->max_tokens)
	INT("min_tokens", p->min_tokens)
	NUM("temperature", p->temperature, float)
	NUM("top_p", p->top_p, float)
	INT("top_k", p->top_k)
	NUM("min_p", p->min_p, float)
	NUM("presence_penalty", p->presence_penalty, float)
	NUM("frequency_penalty", p->frequency_penalty, float)
	NUM("repetition_penalty", p->repetition_penalty, float)
	INT("n", p->n)
	INT("logprobs", p->logprobs)
	INT("prompt_logprobs", p->prompt_logprobs)
	INT("priority", p->priority)
#undef INT
#undef NUM
	if ((r = int_field(o, "seed", -9.2e18, 9.2e18, &v, line, e)) < 0)
		return -1;
	if (r) {
		p->has_seed = true;
		p->seed = (uint64_t)(int64_t)v;
	}
	json_t *x = json_object_get(o, "ignore_eos");
	if (json_is_boolean(x))
		p->ignore_eos = json_is_true(x);
	x = json_object_get(o, "include_stop_str_in_output");
	if (json_is_boolean(x))
		p->include_stop_str_in_output = json_is_true(x);
	x = json_object_get(o, "stop");
	if (json_is_string(x)) {
		snprintf(p->stop[0], ENGINE_MAX_STOP_STR_LEN, "%s", json_string_value(x));
		p->n_stop = 1;
	} else if (json_is_array(x)) {
		size_t i;
		json_t *s;
		json_array_foreach(x, i, s)
		{
			if (!json_is_string(s) || i >= ENGINE_MAX_STOP_STRS)
				return err_set(e, "line %d: \"stop\" must be up to %d strings", line,
					       ENGINE_MAX_STOP_STRS);
			snprintf(p->stop[i], ENGINE_MAX_STOP_STR_LEN, "%s", json_string_value(s));
			p->n_stop = (int)i + 1;
		}
	}
	x = json_object_get(o, "stop_token_ids");
	if (json_is_array(x)) {
		size_t i;
		json_t *s;
		json_array_foreach(x, i, s)
		{
			if (i >= ENGINE_MAX_STOP_IDS - 8 || !json_util_id(s, &p->stop_token_ids[i]))
				return err_set(e, "line %d: bad \"stop_token_ids\"", line);
			p->n_stop_token_ids = (int)i + 1;
		}
	}
	x = json_object_get(o, "logit_bias"); /* {"token id": bias}, as the server takes it */
	if (x && !json_is_null(x)) {
		const char *key;
		json_t *b;
		if (!json_is_object(x) || json_object_size(x) > ENGINE_MAX_LOGIT_BIAS)
			return err_set(e, "line %d: \"logit_bias\" must be an object of up to %d token ids", line,
				       ENGINE_MAX_LOGIT_BIAS);
		json_object_foreach(x, key, b)
		{
			char *end;
			long id = strtol(key, &end, 10);
			if (end == key || *end || id < 0 || id > INT32_MAX || !json_is_number(b))
				return err_set(e, "line %d: bad \"logit_bias\" entry \"%s\"", line, key);
			double bv = json_number_value(b);
			p->logit_bias_ids[p->n_logit_bias] = (int32_t)id;
			p->logit_bias[p->n_logit_bias++] = (float)(bv < -100 ? -100 : bv > 100 ? 100 : bv);
		}
	}
	/* structured outputs as the server takes them; the item owns the reference */
	struct srv_structured st;
	struct api_error ae;
	if (srv_structured_parse(o, false, &st, &ae) < 0)
		return err_set(e, "line %d: %s", line, ae.message);
	p->guide = st.guide;
	return 0;
}

/* Appends a zeroed item with sampling parameters def; NULL when out of memory. */
static struct gen_item *add_item(struct gen_item **items, int *n, int *cap, const struct sampling_params *def,
				 struct err *e)
{
	if (*n == *cap) {
		int c = *cap ? *cap * 2 : 16;
		struct gen_item *ni = realloc(*items, sizeof *ni * (size_t)c);
		if (!ni) {
			err_set(e, "out of memory");
			return NULL;
		}
		*items = ni;
		*cap = c;
	}
	struct gen_item *it = &(*items)[(*n)++];
	memset(it, 0, sizeof *it);
	it->p = *def;
	return it;
}

static int read_prompts_file(const char *path, struct tok *t, const struct sampling_params *def,
			     struct gen_item **items, int *n_items, int *cap, struct err *e)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return err_set(e, "%s: %s", path, strerror(errno));
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	int lineno = 0, rc = 0;
	while ((len = getline(&line, &lcap, f)) >= 0) {
		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (len == 0)
			continue;
		json_error_t je;
		json_t *o = json_loadb(line, (size_t)len, 0, &je);
		if (!o || !json_is_object(o)) {
			json_decref(o);
			rc = err_set(e, "%s:%d: not a JSON object (%s)", path, lineno, o ? "" : je.text);
			break;
		}
		struct gen_item *it = add_item(items, n_items, cap, def, e);
		if (!it) {
			json_decref(o);
			rc = -1;
			break;
		}
		json_t *ids = json_object_get(o, "prompt_token_ids");
		json_t *txt = json_object_get(o, "prompt");
		if (json_is_array(ids)) {
			it->n = (int)json_array_size(ids);
			it->ids = malloc(sizeof *it->ids * (size_t)(it->n ? it->n : 1));
			if (!it->ids)
				rc = err_set(e, "%s:%d: out of memory", path, lineno);
			for (int k = 0; it->ids && k < it->n; k++) {
				json_t *v = json_array_get(ids, (size_t)k);
				if (!json_is_integer(v)) {
					rc = err_set(e, "%s:%d: prompt_token_ids[%d] is not an integer", path, lineno,
						     k);
					break;
				}
				/* a plain int32 cast would turn 2^32 + 5 into the valid id 5 */
				if (!json_util_id(v, &it->ids[k])) {
					rc = err_set(e, "%s:%d: prompt_token_ids[%d] = %lld is out of range", path,
						     lineno, k, (long long)json_integer_value(v));
					break;
				}
			}
		} else if (json_is_string(txt)) {
			if (!t)
				rc = err_set(e, "%s:%d: a text prompt needs a tokenizer", path, lineno);
			else {
				size_t n = 0;
				if (tok_encode(t, json_string_value(txt), json_string_length(txt), true, &it->ids, &n,
					       e) < 0)
					rc = err_prefix(e, "%s:%d", path, lineno);
				it->n = (int)n;
			}
		} else {
			rc = err_set(e, "%s:%d: needs \"prompt\" (string) or \"prompt_token_ids\" (array)", path,
				     lineno);
		}
		if (rc == 0 && line_params(o, lineno, &it->p, e) < 0)
			rc = err_prefix(e, "%s", path);
		json_decref(o);
		if (rc)
			break;
	}
	free(line);
	fclose(f);
	return rc;
}

/* Collects one item's choices and prints them. Returns generated tokens, or -1. */
static int collect(struct gen_item *it, int index, const struct tok *tok, FILE *out, bool ids_mode, struct err *e)
{
	int n = it->p.n;
	json_t **ids = calloc((size_t)n, sizeof *ids);
	json_t **lps = calloc((size_t)n, sizeof *lps); /* per choice: vLLM's logprobs list */
	char **text = calloc((size_t)n, sizeof *text);
	size_t *tl = calloc((size_t)n, sizeof *tl);
	const char **fin = calloc((size_t)n, sizeof *fin);
	int total = 0;
	if (!ids || !lps || !text || !tl || !fin) {
		free(ids);
		free(lps);
		free(text);
		free(tl);
		free(fin);
		return err_set(e, "out of memory");
	}
	for (int c = 0; c < n; c++) {
		ids[c] = json_array();
		lps[c] = it->p.logprobs >= 0 ? json_array() : NULL;
	}
	struct engine_event ev;
	while (engine_next_event(it->h, &ev, -1) == ENGINE_EV_OK) {
		int c = ev.index;
		for (int k = 0; k < ev.n_tokens; k++) {
			json_array_append_new(ids[c], json_integer(ev.token_ids[k]));
			if (lps[c] && ev.logprobs)
				json_array_append_new(lps[c], oj_logprob_entry_vllm(tok, &ev.logprobs[k]));
		}
		total += ev.n_tokens;
		if (ev.text_len) {
			char *t = realloc(text[c], tl[c] + ev.text_len + 1);
			if (t) {
				memcpy(t + tl[c], ev.text, ev.text_len);
				tl[c] += ev.text_len;
				t[tl[c]] = 0;
				text[c] = t;
			}
		}
		if (ev.finish) {
			fin[c] = engine_finish_name(ev.finish);
			if (ev.error)
				LOG_W("generate", "prompt %d: %s", index, ev.error);
		}
	}
	for (int c = 0; c < n; c++) {
		json_t *o = json_object();
		json_object_set_new(o, "index", json_integer(index));
		if (n > 1)
			json_object_set_new(o, "choice", json_integer(c));
		json_object_set_new(o, "token_ids", ids[c]);
		json_object_set_new(o, "text", json_stringn(text[c] ? text[c] : "", tl[c]));
		json_object_set_new(o, "finish_reason", fin[c] ? json_string(fin[c]) : json_null());
		/* as vLLM's RequestOutput: per token {"id": {"logprob", "rank", "decoded_token"}} */
		if (lps[c])
			json_object_set_new(o, "logprobs", lps[c]);
		int n_plp;
		const struct engine_logprob *plp = engine_prompt_logprobs(it->h, &n_plp);
		if (it->p.prompt_logprobs >= 0)
			json_object_set_new(o, "prompt_logprobs",
					    plp ? oj_prompt_logprobs_vllm(tok, plp, n_plp) : json_null());
		if (ids_mode) { /* --prompt-ids alone: just the generated ids */
			json_t *a = json_object_get(o, "token_ids");
			size_t k;
			json_t *v;
			json_array_foreach(a, k, v) fprintf(out, "%s%lld", k ? "," : "", json_integer_value(v));
			fprintf(out, "\n");
		} else {
			char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
			if (s) {
				fprintf(out, "%s\n", s);
				free(s);
			}
		}
		json_decref(o);
		free(text[c]);
	}
	free(ids);
	free(lps);
	free(text);
	free(tl);
	free(fin);
	return total;
}

/* Fills o from argv. Returns 0, 1 after --help, or 2 after a usage error (printed). */
static int parse_args(int argc, char **argv, struct gen_opts *o)
{
	struct err e;
	for (int i = 1; i < argc;) {
		const char *a = argv[i];
		int r = engine_args_parse(&o->ea, argc, argv, &i, &e);
		if (r < 0) {
			fprintf(stderr, "mlaserve generate: %s\n", e.msg);
			return 2;
		}
		if (r > 0)
			continue;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 1;
		}
		if (!strcmp(a, "--ignore-eos")) {
			o->ignore_eos = true;
			i++;
			continue;
		}
		if (a[0] != '-') {
			if (o->ea.model_dir) {
				fprintf(stderr, "mlaserve generate: unexpected argument '%s'\n", a);
				return 2;
			}
			o->ea.model_dir = a;
			i++;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "mlaserve generate: %s needs a value (or is unknown)\n", a);
			usage(stderr);
			return 2;
		}
		const char *v = argv[i + 1];
		char *end;
		if (!strcmp(a, "--prompts-file"))
			o->prompts_file = v;
		else if (!strcmp(a, "--output"))
			o->output = v;
		else if (!strcmp(a, "--prompt"))
			o->texts[o->n_texts++] = v;
		else if (!strcmp(a, "--prompt-ids"))
			o->idstrs[o->n_idstrs++] = v;
		else if (!strcmp(a, "--max-tokens")) {
			/* a plain (int)strtol would wrap 5000000000 to a valid count */
			if (cli_int_parse("--max-tokens", v, 1, INT_MAX, &o->max_tokens, &e) < 0) {
				fprintf(stderr, "mlaserve generate: %s\n", e.msg);
				return 2;
			}
		} else if (!strcmp(a, "--temperature")) {
			o->temperature = strtof(v, &end);
			o->has_temperature = true;
			if (end == v || *end || !(o->temperature >= 0)) {
				fprintf(stderr, "mlaserve generate: --temperature: invalid value '%s'\n", v);
				return 2;
			}
		} else {
			fprintf(stderr, "mlaserve generate: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		}
		i += 2;
	}
	if (!o->ea.model_dir || (!o->prompts_file && !o->n_texts && !o->n_idstrs)) {
		usage(stderr);
		return 2;
	}
	return 0;
}

/* One item per --prompt-ids, then per --prompt, then per line of --prompts-file. */
static int build_items(const struct gen_opts *o, const struct engine_runtime *rt, struct gen_item **items,
		       int *n_items, struct err *e)
{
	int cap = 0;
	struct sampling_params def;
	sampling_params_init(&def, &rt->defaults);
	def.temperature = o->has_temperature ? o->temperature : 0.0f; /* greedy unless asked */
	def.max_tokens = o->max_tokens;
	def.ignore_eos = o->ignore_eos;
	for (int k = 0; k < o->n_idstrs; k++) {
		struct gen_item *it = add_item(items, n_items, &cap, &def, e);
		if (!it)
			return -1;
		size_t n;
		if (cli_ids_parse("--prompt-ids", o->idstrs[k], false, &it->ids, &n, e) < 0)
			return -1;
		it->n = (int)n;
	}
	for (int k = 0; k < o->n_texts; k++) {
		if (!rt->tok)
			return err_set(e, "--prompt needs a tokenizer (the model dir has none)");
		struct gen_item *it = add_item(items, n_items, &cap, &def, e);
		if (!it)
			return -1;
		size_t n;
		if (tok_encode(rt->tok, o->texts[k], strlen(o->texts[k]), true, &it->ids, &n, e) < 0)
			return -1;
		it->n = (int)n;
	}
	if (o->prompts_file && read_prompts_file(o->prompts_file, rt->tok, &def, items, n_items, &cap, e) < 0)
		return -1;
	return 0;
}

/* Submits every item together, writes the results, and the summary line on stderr. */
static int run_items(const struct gen_opts *o, struct engine_runtime *rt, struct gen_item *items, int n_items,
		     double t_load, struct err *e)
{
	FILE *out = stdout;
	if (o->output && !(out = fopen(o->output, "w")))
		return err_set(e, "%s: %s", o->output, strerror(errno));
	bool ids_mode = o->n_idstrs && !o->n_texts && !o->prompts_file && !o->output;
	double t0 = mono_now_s();
	long long prompt_tokens = 0, gen_tokens = 0;
	int submitted = 0;
	for (int k = 0; k < n_items; k++) {
		int r = engine_submit(rt->engine, items[k].ids, items[k].n, &items[k].p, &items[k].h, e);
		if (r < 0) {
			err_prefix(e, "prompt %d", k);
			break;
		}
		submitted++;
		prompt_tokens += items[k].n;
	}
	for (int k = 0; k < submitted; k++) {
		int g = collect(&items[k], k, rt->tok, out, ids_mode, e);
		if (g > 0)
			gen_tokens += g;
		engine_release(items[k].h);
	}
	double dt = mono_now_s() - t0;
	if (out != stdout)
		fclose(out);
	if (submitted < n_items)
		return -1;
	struct engine_stats st;
	engine_stats_get(rt->engine, &st);
	fprintf(stderr,
		"generate: %d prompts, %lld prompt + %lld generated tokens in %.3f s (load %.2f s): "
		"%.1f tok/s generated, %.1f tok/s total; %llu steps, %llu preemptions, prefix cache %llu/%llu tokens "
		"hit\n",
		n_items, prompt_tokens, gen_tokens, dt, t_load, dt > 0 ? gen_tokens / dt : 0.0,
		dt > 0 ? (prompt_tokens + gen_tokens) / dt : 0.0, (unsigned long long)st.steps,
		(unsigned long long)st.preemptions, (unsigned long long)st.prefix_hits,
		(unsigned long long)st.prefix_queries);
	if (st.spec_k > 0)
		fprintf(stderr,
			"generate: speculative decoding: %llu of %llu draft tokens accepted (%.1f%%), "
			"%.2f tokens per choice and step with drafts\n",
			(unsigned long long)st.spec_accepted_tokens, (unsigned long long)st.spec_draft_tokens,
			st.spec_draft_tokens ? 100.0 * (double)st.spec_accepted_tokens / (double)st.spec_draft_tokens
					     : 0.0,
			st.spec_drafts ? 1.0 + (double)st.spec_accepted_tokens / (double)st.spec_drafts : 0.0);
	return 0;
}

int cmd_generate(int argc, char **argv)
{
	struct gen_opts o;
	memset(&o, 0, sizeof o);
	engine_args_init(&o.ea, false);
	o.max_tokens = 16;
	struct err e;
	struct gen_item *items = NULL;
	int n_items = 0, rc = 1;
	o.texts = calloc((size_t)argc, sizeof *o.texts);
	o.idstrs = calloc((size_t)argc, sizeof *o.idstrs);
	if (!o.texts || !o.idstrs)
		goto out;
	int pr = parse_args(argc, argv, &o);
	if (pr) {
		rc = pr == 1 ? 0 : 2;
		goto out;
	}
	struct engine_runtime rt;
	memset(&rt, 0, sizeof rt);
	struct comm comm;
	struct dist_exec dx;
	memset(&dx, 0, sizeof dx);
	bool dist = o.ea.tp_size > 1 || o.ea.dcp_size > 1;
	if (dist) {
		if (ranks_start(argc, argv, &o.ea, &comm, &e) < 0) {
			fprintf(stderr, "mlaserve generate: %s\n", e.msg);
			goto out;
		}
		if (comm.world_rank != 0) { /* a worker: runs rank 0's plans until its stop */
			rc = ranks_worker_run(&o.ea, &comm, &e) < 0 ? 1 : 0;
			comm_fini(&comm);
			goto out;
		}
	}
	struct engine_forward_hook hook = {dist_exec_hook, &dx};
	double t_load = mono_now_s();
	if (engine_runtime_open(&o.ea, dist ? &hook : NULL, &rt, &e) < 0) {
		fprintf(stderr, "mlaserve generate: %s\n", e.msg);
		goto dist_end;
	}
	if (dist) {
		dist_exec_init(&dx, &comm, rt.model, engine_kv_cache(rt.engine), engine_backend(rt.engine),
			       o.ea.dcp_interleave);
		if (dist_exec_send_setup(&dx, engine_kv_cache(rt.engine), engine_backend(rt.engine), &e) < 0)
			goto fail;
	}
	t_load = mono_now_s() - t_load;
	if (build_items(&o, &rt, &items, &n_items, &e) < 0 || run_items(&o, &rt, items, n_items, t_load, &e) < 0)
		goto fail;
	rc = 0;
	engine_runtime_close(&rt);
	goto dist_end;
fail:
	fprintf(stderr, "mlaserve generate: %s\n", e.msg);
	engine_runtime_close(&rt);
	rc = 1;
dist_end:
	if (dist) { /* rank 0: the engine is stopped; release the workers */
		if (comm_plan_send_stop(&comm, &e) < 0)
			fprintf(stderr, "mlaserve generate: %s\n", e.msg);
		dist_exec_fini(&dx);
		comm_fini(&comm);
	}
out:
	for (int k = 0; k < n_items; k++) {
		free(items[k].ids);
		guide_unref(items[k].p.guide);
	}
	free(items);
	free(o.texts);
	free(o.idstrs);
	return rc;
}
