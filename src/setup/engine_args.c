/* Shared engine flags and start-up of the whole stack (engine_args.h). */
#include "setup/engine_args.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/attn.h"
#include "base/dtype.h"
#include "base/env.h"
#include "base/log.h"
#include "model/model.h"
#include "ops/pool.h"
#include "ops/wformat.h"
#include "tok/tokenizer.h"

#define MOD "engine"

void engine_args_init(struct engine_args *a, bool serving)
{
	memset(a, 0, sizeof *a);
	a->dtype = "auto";
	a->kv_cache_dtype = "auto";
	a->enable_prefix_caching = true;
	a->max_num_seqs = 256;
	a->max_num_batched_tokens = serving ? 2048 : 8192;
	a->max_waiting = 4096;
	a->tp_size = 1;
	a->dcp_size = 1;
	a->dcp_interleave = 1;
	a->generation_config = "auto";
}

/* --quantization NAME: one entry per row of the weight format table that quantizes at load */
static void usage_quantization(FILE *f)
{
	for (int dt = 0; dt < DT_COUNT; dt++) {
		const struct wformat *w = wformat_of((enum dtype)dt);
		if (!w || !w->quantize)
			continue;
		char flag[64];
		snprintf(flag, sizeof flag, "--quantization %s, -q %s", w->name, w->name);
		fprintf(f, "  %-33s ", flag);
		for (const char *s = w->usage;;) { /* its lines under one another */
			size_t n = strcspn(s, "\n");
			fprintf(f, "%.*s\n", (int)n, s);
			if (!s[n])
				break;
			s += n + 1;
			fprintf(f, "%36s", "");
		}
	}
}

void engine_args_usage(FILE *f)
{
	fprintf(f, "engine options:\n"
		   "  --dtype auto|float32|bfloat16     activation dtype (default auto = checkpoint)\n"
		   "  --load-format auto|dummy          dummy: random weights from config.json\n");
	usage_quantization(f);
	fprintf(f, "  --quantization-rest NAME|bf16     under -q, the linear layers other than the routed\n"
		   "                                    experts (attention, shared experts, dense MLP):\n"
		   "                                    fp8, int8, int4 or bf16 (as the checkpoint has\n"
		   "                                    them); default -q's, int8 under -q int4\n");
	fprintf(f, "  --quantize-lm-head                the lm_head quantized too (it stays bf16 in DeepSeek's\n"
		   "                                    fp8 checkpoints and under -q fp8/int8; Q8_0 GGUFs\n"
		   "                                    have it in 8 bits): fewer bytes per decode step\n"
		   "  --quantize-embedding              the token embedding quantized too, in the\n"
		   "                                    lm_head's format (--quantization-rest int4: every\n"
		   "                                    matrix in 4 bits, as a Q4_0 GGUF): fewer bytes held\n"
		   "  --attention-backend NAME          (or env MLASERVE_ATTENTION_BACKEND) FLASHMLA,\n"
		   "                                    FLASH_ATTN_MLA or REFERENCE_MLA for dense MLA;\n"
		   "                                    FLASHMLA_SPARSE for V3.2 (sparse attention);\n"
		   "                                    DEEPSEEK_V4 for V4; default: the first of the\n"
		   "                                    model's kind\n"
		   "  --block-size N                    tokens per KV block (default: backend's)\n"
		   "  --reorder-batch-threshold N       longest query still run as a decode (default:\n"
		   "                                    the backend's; still 1 under DCP if unsupported)\n"
		   "  --kv-cache-memory BYTES           KV pool size, e.g. 2GiB (default: auto)\n"
		   "  --kv-cache-dtype auto|bfloat16|float32|fp8   fp8 (= fp8_e4m3): the latent cache in e4m3\n"
		   "                                    with fp32 scales per 128 values: 596 bytes a token\n"
		   "                                    and layer (V2/V3: 1152 in bf16, 1.93x the tokens),\n"
		   "                                    656 for V3.2 (FlashMLA's fp8_ds_mla) + its indexer's\n"
		   "                                    132; not for DeepSeek-V4\n"
		   "  --enable-prefix-caching | --no-enable-prefix-caching   (default on)\n"
		   "  --max-num-seqs N                  running requests per step (256)\n"
		   "  --max-num-batched-tokens N        token budget per step\n"
		   "  --max-model-len N                 context length (default: config)\n"
		   "  --max-waiting-requests N          queue bound before 503 (4096)\n"
		   "  --scheduling-policy fcfs|priority priority: requests' \"priority\" (lower first) orders\n"
		   "                                    the queue and picks who is preempted (default fcfs)\n"
		   "  --seed N                          engine seed (default 0)\n"
		   "  --threads N                       compute threads (default: all CPUs)\n"
		   "  --tokenizer PATH                  tokenizer dir, tokenizer.json or (Kimi) tiktoken.model\n"
		   "  --generation-config auto|vllm|DIR sampling defaults from the model's\n"
		   "                                    generation_config.json (auto), none (vllm), or DIR's\n"
		   "  --override-generation-config JSON e.g. '{\"temperature\": 0.6}', over those defaults\n"
		   "  --speculative-config JSON         speculative decoding: prompt lookup, e.g.\n"
		   "                                    '{\"method\": \"ngram\", \"num_speculative_tokens\": 3,\n"
		   "                                    \"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2}', or the\n"
		   "                                    checkpoint's MTP layer: '{\"method\": \"deepseek_mtp\"}'\n"
		   "                                    (\"num_speculative_tokens\": k > 1 chains it, as vLLM)\n"
		   "  (vLLM's --trust-remote-code, --enforce-eager, --enable-chunked-prefill and\n"
		   "   --gpu-memory-utilization are taken and have no effect)\n"
		   "parallelism (ranks self-launched with mpirun unless started under it):\n"
		   "  --tensor-parallel-size, -tp N     tensor-parallel ranks; divides the heads (1)\n"
		   "  --decode-context-parallel-size, -dcp N  KV shards inside the TP group; divides -tp (1)\n"
		   "  --dcp-kv-cache-interleave-size N  tokens per DCP shard run; divides the block size (1)\n");
}

int engine_args_parse_bytes(const char *s, size_t *out)
{
	errno = 0;
	char *end;
	double v = strtod(s, &end);
	if (end == s || errno || !(v >= 0))
		return -1;
	double mul = 1;
	if (!*end || !strcmp(end, "B"))
		mul = 1;
	else if (!strcasecmp(end, "K") || !strcasecmp(end, "KB") || !strcasecmp(end, "KiB"))
		mul = 1024.0;
	else if (!strcasecmp(end, "M") || !strcasecmp(end, "MB") || !strcasecmp(end, "MiB"))
		mul = 1024.0 * 1024;
	else if (!strcasecmp(end, "G") || !strcasecmp(end, "GB") || !strcasecmp(end, "GiB"))
		mul = 1024.0 * 1024 * 1024;
	else
		return -1;
	v *= mul;
	if (v > 1e18)
		return -1;
	*out = (size_t)v;
	return 0;
}

static int parse_int(const char *flag, const char *v, int lo, int *out, struct err *e)
{
	errno = 0;
	char *end;
	long x = strtol(v, &end, 10);
	if (end == v || *end || errno || x < lo || x > INT_MAX)
		return err_set(e, "%s: invalid value '%s' (an integer >= %d)", flag, v, lo);
	*out = (int)x;
	return 0;
}

/* --override-generation-config: generation_config.json's sampling keys, as vLLM maps them */
static int apply_generation_override(struct sampling_defaults *d, const char *text, struct err *e)
{
	json_error_t je;
	json_t *o = json_loads(text, 0, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return err_set(e, "--override-generation-config: not a JSON object (%s)", o ? "" : je.text);
	}
	const char *key;
	json_t *v;
	int rc = 0;
	json_object_foreach(o, key, v)
	{
		bool num = json_is_number(v), integer = json_is_integer(v);
		double x = num ? json_number_value(v) : 0;
		if (!strcmp(key, "temperature") && num)
			d->temperature = (float)x;
		else if (!strcmp(key, "top_p") && num)
			d->top_p = (float)x;
		else if (!strcmp(key, "top_k") && integer)
			d->top_k = (int)x;
		else if (!strcmp(key, "min_p") && num)
			d->min_p = (float)x;
		else if (!strcmp(key, "repetition_penalty") && num)
			d->repetition_penalty = (float)x;
		else if (!strcmp(key, "presence_penalty") && num)
			d->presence_penalty = (float)x;
		else if (!strcmp(key, "frequency_penalty") && num)
			d->frequency_penalty = (float)x;
		else if ((!strcmp(key, "max_new_tokens") || !strcmp(key, "max_tokens")) && integer && x >= 1)
			d->max_tokens = (int)x;
		else if (!strcmp(key, "temperature") || !strcmp(key, "top_p") || !strcmp(key, "top_k") ||
			 !strcmp(key, "min_p") || !strcmp(key, "repetition_penalty") ||
			 !strcmp(key, "presence_penalty") || !strcmp(key, "frequency_penalty") ||
			 !strcmp(key, "max_new_tokens") || !strcmp(key, "max_tokens")) {
			rc = err_set(e, "--override-generation-config: \"%s\" has the wrong type or range", key);
			break;
		} else {
			LOG_W("args", "--override-generation-config: \"%s\" is not a sampling default; ignored", key);
		}
	}
	json_decref(o);
	return rc;
}

/* sampling defaults: generation_config.json's (whose, per --generation-config) under the
 * override */
static void apply_generation_config(const struct hf_config *h, struct sampling_defaults *d)
{
	if (h->has_temperature)
		d->temperature = (float)h->temperature;
	if (h->has_top_p)
		d->top_p = (float)h->top_p;
	if (h->has_top_k)
		d->top_k = h->top_k;
	if (h->has_min_p)
		d->min_p = (float)h->min_p;
	if (h->has_repetition_penalty)
		d->repetition_penalty = (float)h->repetition_penalty;
	if (h->has_max_new_tokens)
		d->max_tokens = h->max_new_tokens;
}

/* --generation-config DIR: DIR/generation_config.json's fields replace the model's */
static int load_generation_config_dir(const char *dir, struct hf_config *h, struct err *e)
{
	struct hf_config g;
	if (hf_config_load(dir, &g, e) < 0)
		return err_prefix(e, "--generation-config");
	if (!g.has_generation_config) {
		hf_config_free(&g);
		return err_set(e, "--generation-config: %s/generation_config.json not found", dir);
	}
	h->has_generation_config = true;
	h->gen_bos_token_id = g.gen_bos_token_id;
	memcpy(h->gen_eos_token_ids, g.gen_eos_token_ids, sizeof g.gen_eos_token_ids);
	h->n_gen_eos = g.n_gen_eos;
	h->gen_pad_token_id = g.gen_pad_token_id;
	h->has_do_sample = g.has_do_sample, h->do_sample = g.do_sample;
	h->has_temperature = g.has_temperature, h->temperature = g.temperature;
	h->has_top_p = g.has_top_p, h->top_p = g.top_p;
	h->has_top_k = g.has_top_k, h->top_k = g.top_k;
	h->has_min_p = g.has_min_p, h->min_p = g.min_p;
	h->has_repetition_penalty = g.has_repetition_penalty, h->repetition_penalty = g.repetition_penalty;
	h->has_max_new_tokens = g.has_max_new_tokens, h->max_new_tokens = g.max_new_tokens;
	hf_config_free(&g);
	return 0;
}

int engine_args_parse(struct engine_args *a, int argc, char **argv, int *i, struct err *e)
{
	const char *arg = argv[*i];
	/* parallelism: vLLM's short aliases have one dash */
	static const char *const par[][2] = {{"--tensor-parallel-size", "-tp"},
					     {"--decode-context-parallel-size", "-dcp"},
					     {"--dcp-kv-cache-interleave-size", "--cp-kv-cache-interleave-size"}};
	for (int k = 0; k < 3; k++)
		for (int al = 0; al < 2; al++) {
			const char *f = par[k][al];
			size_t fl = strlen(f);
			if (strncmp(arg, f, fl) || (arg[fl] && arg[fl] != '='))
				continue;
			const char *v = arg[fl] == '=' ? arg + fl + 1 : NULL;
			if (!v) {
				if (*i + 1 >= argc)
					return err_set(e, "%s needs a value", par[k][0]);
				v = argv[*i + 1];
			}
			int *dst = k == 0 ? &a->tp_size : k == 1 ? &a->dcp_size : &a->dcp_interleave;
			if (parse_int(par[k][0], v, 1, dst, e) < 0)
				return -1;
			*i += arg[fl] == '=' ? 1 : 2;
			return 1;
		}
	if (strncmp(arg, "--", 2) && strcmp(arg, "-q") && strncmp(arg, "-q=", 3)) /* vLLM's -q: --quantization */
		return 0;
	/* flags without a value */
	if (!strcmp(arg, "--enable-prefix-caching")) {
		a->enable_prefix_caching = true;
		a->prefix_caching_set = true;
		(*i)++;
		return 1;
	}
	if (!strcmp(arg, "--no-enable-prefix-caching")) {
		a->enable_prefix_caching = false;
		a->prefix_caching_set = true;
		(*i)++;
		return 1;
	}
	if (!strcmp(arg, "--quantize-lm-head")) {
		a->quantize_lm_head = true;
		(*i)++;
		return 1;
	}
	if (!strcmp(arg, "--quantize-embedding")) {
		a->quantize_embedding = true;
		(*i)++;
		return 1;
	}
	/* vLLM flags that have nothing to do here: taken, so that a vLLM command line starts */
	static const char *const noop[][2] = {{"--trust-remote-code", "no remote code is ever run"},
					      {"--enforce-eager", "there are no CUDA graphs"},
					      {"--enable-chunked-prefill", "chunked prefill is always on"}};
	for (size_t k = 0; k < sizeof noop / sizeof *noop; k++)
		if (!strcmp(arg, noop[k][0])) {
			LOG_I("args", "%s has no effect here: %s", arg, noop[k][1]);
			(*i)++;
			return 1;
		}
	static const char *const with_value[] = {"--dtype",
						 "--load-format",
						 "--quantization",
						 "-q",
						 "--quantization-rest",
						 "--attention-backend",
						 "--block-size",
						 "--reorder-batch-threshold",
						 "--kv-cache-memory",
						 "--kv-cache-dtype",
						 "--max-num-seqs",
						 "--max-num-batched-tokens",
						 "--max-model-len",
						 "--max-waiting-requests",
						 "--seed",
						 "--threads",
						 "--tokenizer",
						 "--gpu-memory-utilization",
						 "--generation-config",
						 "--override-generation-config",
						 "--speculative-config",
						 "--scheduling-policy"};
	size_t flen = strcspn(arg, "=");
	const char *flag = NULL;
	for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
		if (strlen(with_value[k]) == flen && !strncmp(arg, with_value[k], flen))
			flag = with_value[k];
	if (!flag)
		return 0;
	const char *v;
	int used;
	if (arg[flen] == '=') {
		v = arg + flen + 1;
		used = 1;
	} else {
		if (*i + 1 >= argc)
			return err_set(e, "%s needs a value", flag);
		v = argv[*i + 1];
		used = 2;
	}
	int rc = 0;
	enum dtype dt;
	bool dt_auto;
	if (!strcmp(flag, "--dtype")) {
		if (dtype_parse_flag(flag, v, &dt, &dt_auto, e) < 0)
			return -1;
		a->dtype = v;
	} else if (!strcmp(flag, "--load-format")) {
		if (strcmp(v, "auto") && strcmp(v, "dummy") && strcmp(v, "safetensors"))
			return err_set(e, "--load-format: invalid value '%s' (auto or dummy)", v);
		a->load_dummy = !strcmp(v, "dummy");
	} else if (!strcmp(flag, "--quantization") || !strcmp(flag, "-q")) {
		rc = engine_args_quantization(v, &a->quant, e);
	} else if (!strcmp(flag, "--quantization-rest")) {
		rc = engine_args_quantization_rest(v, &a->quant_rest, &a->quant_rest_set, e);
	} else if (!strcmp(flag, "--attention-backend")) {
		if (!attn_backend_by_name(v)) {
			char names[256] = "";
			for (int k = 0; k < attn_backend_count(); k++) {
				strncat(names, k ? ", " : "", sizeof names - strlen(names) - 1);
				strncat(names, attn_backend_at(k)->name, sizeof names - strlen(names) - 1);
			}
			return err_set(e, "--attention-backend: unknown backend '%s' (%s)", v, names);
		}
		a->attention_backend = v;
	} else if (!strcmp(flag, "--block-size")) {
		rc = parse_int(flag, v, 1, &a->block_size, e);
	} else if (!strcmp(flag, "--reorder-batch-threshold")) {
		rc = parse_int(flag, v, 1, &a->reorder_batch_threshold, e);
	} else if (!strcmp(flag, "--kv-cache-memory")) {
		if (engine_args_parse_bytes(v, &a->kv_cache_memory) < 0 || a->kv_cache_memory == 0)
			return err_set(e, "--kv-cache-memory: invalid size '%s' (e.g. 1073741824, 512MiB, 2G)", v);
	} else if (!strcmp(flag, "--kv-cache-dtype")) {
		if (dtype_parse_kv_flag(v, &dt, &dt_auto, e) < 0)
			return -1;
		a->kv_cache_dtype = v;
	} else if (!strcmp(flag, "--max-num-seqs")) {
		rc = parse_int(flag, v, 1, &a->max_num_seqs, e);
	} else if (!strcmp(flag, "--max-num-batched-tokens")) {
		rc = parse_int(flag, v, 1, &a->max_num_batched_tokens, e);
	} else if (!strcmp(flag, "--max-model-len")) {
		rc = parse_int(flag, v, 2, &a->max_model_len, e);
	} else if (!strcmp(flag, "--max-waiting-requests")) {
		rc = parse_int(flag, v, 1, &a->max_waiting, e);
	} else if (!strcmp(flag, "--gpu-memory-utilization")) {
		char *end;
		double u = strtod(v, &end);
		if (end == v || *end || !(u > 0.0 && u <= 1.0))
			return err_set(e, "--gpu-memory-utilization: invalid value '%s' (a fraction in (0, 1])", v);
		LOG_W("args", "--gpu-memory-utilization has no effect on the CPU: the KV cache takes "
			      "--kv-cache-memory (default: from the free memory)");
	} else if (!strcmp(flag, "--seed")) {
		errno = 0;
		char *end;
		unsigned long long s = strtoull(v, &end, 10);
		if (end == v || *end || errno || *v == '-')
			return err_set(e, "--seed: invalid value '%s'", v);
		a->seed = s;
	} else if (!strcmp(flag, "--threads")) {
		rc = parse_int(flag, v, 0, &a->threads, e);
	} else if (!strcmp(flag, "--generation-config")) {
		a->generation_config = v;
	} else if (!strcmp(flag, "--override-generation-config")) {
		struct sampling_defaults d;
		sampling_defaults_init(&d);
		if (apply_generation_override(&d, v, e) < 0)
			return -1;
		a->override_generation_config = v;
	} else if (!strcmp(flag, "--speculative-config")) {
		rc = spec_config_parse(v, &a->spec, e);
	} else if (!strcmp(flag, "--scheduling-policy")) {
		if (strcmp(v, "fcfs") && strcmp(v, "priority"))
			return err_set(e, "--scheduling-policy: invalid value '%s' (fcfs or priority)", v);
		a->priority_scheduling = !strcmp(v, "priority");
	} else if (!strcmp(flag, "--tokenizer")) {
		a->tokenizer = v;
	}
	if (rc < 0)
		return -1;
	*i += used;
	return 1;
}

int engine_args_quantization(const char *v, const struct wformat **out, struct err *e)
{
	return wformat_parse_quantization(v, out, e); /* the last one given wins */
}

int engine_args_quantization_rest(const char *v, const struct wformat **out, bool *set, struct err *e)
{
	const struct wformat *f = wformat_by_name(v);
	if (strcmp(v, "bf16") && strcmp(v, "none") && !(f && f->quantize)) {
		char names[128];
		wformat_quant_names(names, sizeof names, ", ");
		return err_set(e, "--quantization-rest: invalid value '%s' (%s, or bf16: as the checkpoint has them)",
			       v, names);
	}
	*out = f && f->quantize ? f : NULL;
	*set = true;
	return 0;
}

int engine_args_check_family(const struct engine_args *a, const struct model_probe *p, struct err *e)
{
	if (p->no_parallel && (a->tp_size > 1 || a->dcp_size > 1))
		return err_set(e, "%s: %s (--tensor-parallel-size %d, --decode-context-parallel-size %d)",
			       a->model_dir, p->no_parallel, a->tp_size, a->dcp_size);
	if (p->no_dcp && a->dcp_size > 1)
		return err_set(e, "%s: %s (--decode-context-parallel-size %d)", a->model_dir, p->no_dcp, a->dcp_size);
	if (p->no_spec && a->spec.method != SPEC_NONE)
		return err_set(e, "%s: --speculative-config is not supported: %s", a->model_dir, p->no_spec);
	if (p->no_prefix_caching && a->prefix_caching_set && a->enable_prefix_caching)
		return err_set(e, "%s: --enable-prefix-caching is not supported: %s", a->model_dir,
			       p->no_prefix_caching);
	return 0;
}

/* engine_args_open_model on the checkpoint's probe (read once by the caller) */
static int open_model(const struct engine_args *a, const struct model_probe *p, struct pool **pool,
		      struct model **model, enum dtype *kv_dtype, struct err *e)
{
	*pool = NULL;
	*model = NULL;
	if (a->quant_rest_set && !a->quant)
		return err_set(e, "--quantization-rest needs --quantization (the routed experts' format)");
	if (engine_args_check_family(a, p, e))
		return -1;
	const struct model_config *cfg = &p->cfg;
	int max_model_len = a->max_model_len > 0 ? a->max_model_len : cfg->max_position_embeddings;
	/* a backend of the wrong kind (dense / sparse MLA, V4) is refused before the weights load */
	const char *bname = a->attention_backend && *a->attention_backend ? a->attention_backend
									  : env_get(ENV_ATTENTION_BACKEND);
	const struct attn_backend *be = bname && *bname ? attn_backend_by_name(bname) : NULL;
	if (be && attn_backend_check_kind(be, p->attn_kind, e))
		return err_prefix(e, "%s", a->model_dir);
	enum dtype act_dtype, kvd;
	bool act_auto, kv_auto;
	if (dtype_parse_flag("--dtype", a->dtype, &act_dtype, &act_auto, e) < 0 ||
	    dtype_parse_kv_flag(a->kv_cache_dtype, &kvd, &kv_auto, e) < 0)
		return -1;
	/* the fp8 row is the MLA latent cache's (attn/kernels/kv_fp8.h); V4 keeps its own float32 state */
	if (kvd == DT_F8_E4M3 && strcmp(p->family, "deepseek"))
		return err_set(e,
			       "--kv-cache-dtype fp8: %s keeps its own attention state (float32), not the MLA latent "
			       "cache; fp8 is not supported for it (use auto)",
			       p->family);
	if (act_auto && p->auto_float32) { /* the family runs float32 only, whatever the checkpoint's dtype */
		act_dtype = DT_F32;
		act_auto = false;
		LOG_I(MOD, "--dtype auto: float32 (%s runs float32 activations only for now)", p->family);
	}
	if (pool_new(a->threads, pool, e) < 0)
		return -1;
	struct model_options mo = {.act_dtype = DT_F32,
				   .load_dummy = a->load_dummy,
				   .dummy_seed = a->seed,
				   .max_batch_tokens = a->max_num_batched_tokens,
				   .max_seqs = a->max_num_seqs,
				   .max_model_len = max_model_len,
				   .pool = *pool,
				   .tp_size = a->tp_size,
				   .tp_rank = a->tp_rank,
				   .comm = a->comm,
				   .dcp_interleave = a->dcp_interleave,
				   .load_mtp = a->spec.method == SPEC_MTP,
				   .max_rollback = a->spec.method != SPEC_NONE ? a->spec.k : 0,
				   .quant = a->quant,
				   .quant_rest = a->quant_rest,
				   .quant_rest_set = a->quant_rest_set,
				   .quantize_lm_head = a->quantize_lm_head,
				   .quantize_embedding = a->quantize_embedding};
	mo.act_dtype = act_dtype;
	mo.act_dtype_auto = act_auto;
	if (model_load(a->model_dir, &mo, model, e) < 0) {
		pool_free(*pool);
		*pool = NULL;
		return -1;
	}
	/* the KV cache follows the activations unless told: float32 runs stay exact */
	if (!kv_auto)
		*kv_dtype = kvd;
	else if (mo.act_dtype_auto)
		*kv_dtype = strcmp(cfg->torch_dtype, "float32") ? DT_BF16 : DT_F32;
	else
		*kv_dtype = mo.act_dtype == DT_F32 ? DT_F32 : DT_BF16;
	return 0;
}

int engine_args_open_model(const struct engine_args *a, struct pool **pool, struct model **model, enum dtype *kv_dtype,
			   struct err *e)
{
	*pool = NULL;
	*model = NULL;
	if (!a->model_dir)
		return err_set(e, "no model directory");
	struct model_probe p;
	if (model_probe_config(a->model_dir, a->tp_size, &p, e) < 0)
		return -1;
	return open_model(a, &p, pool, model, kv_dtype, e);
}

int engine_runtime_open(const struct engine_args *a, const struct engine_forward_hook *hook, struct engine_runtime *rt,
			struct err *e)
{
	memset(rt, 0, sizeof *rt);
	if (!a->model_dir)
		return err_set(e, "no model directory");
	struct model_probe p;
	if (model_probe_config(a->model_dir, a->tp_size, &p, e) < 0)
		return -1;
	const struct model_config cfg = p.cfg;
	int max_model_len = a->max_model_len > 0 ? a->max_model_len : cfg.max_position_embeddings;
	enum dtype kvd;
	if (open_model(a, &p, &rt->pool, &rt->model, &kvd, e) < 0)
		goto fail;

	const char *tdir = a->tokenizer ? a->tokenizer : a->model_dir;
	if (a->tokenizer || tok_dir_kind(a->model_dir) != TOK_DIR_NONE) {
		if (tok_load(tdir, &rt->tok, e) < 0)
			goto fail;
	} else {
		LOG_W(MOD, "%s has no tokenizer.json or tiktoken.model: token ids only, no text or stop strings",
		      a->model_dir);
	}
	if (hf_config_load(a->model_dir, &rt->hf, e) < 0)
		goto fail;
	if (rt->tok)
		tok_resolve_special_ids(rt->tok, &rt->hf);

	const char *gc = a->generation_config ? a->generation_config : "auto";
	if (strcmp(gc, "auto") && strcmp(gc, "vllm") && load_generation_config_dir(gc, &rt->hf, e) < 0)
		goto fail;
	sampling_defaults_init(&rt->defaults);
	const struct hf_config *h = &rt->hf;
	if (strcmp(gc, "vllm")) /* vllm: the OpenAI defaults (EOS ids still from the model's) */
		apply_generation_config(h, &rt->defaults);
	if (a->override_generation_config &&
	    apply_generation_override(&rt->defaults, a->override_generation_config, e) < 0)
		goto fail;

	struct engine_options *o = &rt->opts;
	engine_options_init(o);
	o->model = rt->model;
	o->tok = rt->tok;
	if (a->attention_backend)
		o->backend = attn_backend_by_name(a->attention_backend);
	o->block_size = a->block_size;
	o->reorder_batch_threshold = a->reorder_batch_threshold;
	o->kv_cache_memory = a->kv_cache_memory; /* 0: blocks for max_num_seqs sequences */
	o->kv_dtype = kvd;
	o->enable_prefix_caching = a->enable_prefix_caching;
	if (p.no_prefix_caching && o->enable_prefix_caching) { /* vLLM's way with such models: off, said once */
		LOG_W(MOD, "prefix caching is off for %s: %s", p.family, p.no_prefix_caching);
		o->enable_prefix_caching = false;
	}
	o->max_num_seqs = a->max_num_seqs;
	o->max_num_batched_tokens = a->max_num_batched_tokens;
	o->max_model_len = max_model_len;
	o->max_waiting = a->max_waiting;
	o->seed = a->seed;
	o->dcp_size = a->dcp_size;
	o->dcp_interleave = a->dcp_interleave;
	o->spec = a->spec;
	o->priority_scheduling = a->priority_scheduling;
	if (hook)
		o->hook = *hook;
	/* EOS: the model's, then generation_config's others (deduplicated) */
	int32_t primary = cfg.eos_token_id >= 0 ? cfg.eos_token_id
			  : h->n_gen_eos > 0    ? h->gen_eos_token_ids[0]
						: h->eos_token_id;
	if (primary >= 0)
		o->eos_ids[o->n_eos_ids++] = primary;
	for (int k = 0; k < h->n_gen_eos && o->n_eos_ids < 8; k++) {
		bool dup = false;
		for (int j = 0; j < o->n_eos_ids; j++)
			dup |= o->eos_ids[j] == h->gen_eos_token_ids[k];
		if (!dup)
			o->eos_ids[o->n_eos_ids++] = h->gen_eos_token_ids[k];
	}
	if (engine_new(o, &rt->engine, e) < 0)
		goto fail;
	return 0;
fail:
	engine_runtime_close(rt);
	return -1;
}

void engine_runtime_close(struct engine_runtime *rt)
{
	engine_free(rt->engine);
	hf_config_free(&rt->hf);
	if (rt->tok)
		tok_free(rt->tok);
	model_free(rt->model);
	pool_free(rt->pool);
	memset(rt, 0, sizeof *rt);
}
