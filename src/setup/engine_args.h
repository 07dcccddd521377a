/* The engine flags shared by `mlaserve generate` and `mlaserve serve`, and opening the
 * whole stack from them: thread pool, model, tokenizer, generation_config defaults, engine. */
#ifndef MLA_SETUP_ENGINE_ARGS_H
#define MLA_SETUP_ENGINE_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "engine/engine.h"
#include "engine/spec.h"
#include "io/hf_config.h"

struct wformat;

struct engine_args {
	const char *model_dir;
	const char *dtype;           /* --dtype auto|float32|bfloat16 (default auto) */
	bool load_dummy;             /* --load-format dummy */
	const struct wformat *quant; /* --quantization NAME (-q): a row of ops/wformat.h (NULL: none) */
	/* --quantization-rest NAME|bf16 (quant_rest_set): the linear layers other than the routed
	 * experts (NULL: as the checkpoint has them); unset: --quantization's, int8 under int4 */
	const struct wformat *quant_rest;
	bool quant_rest_set;
	bool quantize_lm_head;         /* --quantize-lm-head */
	bool quantize_embedding;       /* --quantize-embedding */
	const char *attention_backend; /* --attention-backend (else env, else the best) */
	int block_size;                /* --block-size (0 = backend default) */
	int reorder_batch_threshold;   /* --reorder-batch-threshold (0 = backend's) */
	size_t kv_cache_memory;        /* --kv-cache-memory BYTES[K|M|G|KiB|MiB|GiB] (0 = auto) */
	const char *kv_cache_dtype;    /* --kv-cache-dtype auto|bfloat16|float32 */
	bool enable_prefix_caching;    /* --enable-prefix-caching / --no-enable-prefix-caching */
	bool prefix_caching_set;       /* one of them given (an explicit on is refused where unsupported) */
	int max_num_seqs;              /* --max-num-seqs */
	int max_num_batched_tokens;    /* --max-num-batched-tokens */
	int max_model_len;             /* --max-model-len (0 = config) */
	int max_waiting;               /* --max-waiting-requests */
	uint64_t seed;                 /* --seed */
	int threads;                   /* --threads (0 = all CPUs) */
	const char *tokenizer;         /* --tokenizer (default: the model dir) */
	/* --generation-config auto|vllm|DIR: sampling defaults (and extra EOS ids) from the
	 * model's generation_config.json, from none (OpenAI defaults), or from DIR's */
	const char *generation_config;
	const char *override_generation_config; /* --override-generation-config JSON, over them */
	struct spec_config spec;                /* --speculative-config JSON (method SPEC_NONE: off) */
	bool priority_scheduling;               /* --scheduling-policy priority (default fcfs) */
	/* set by the caller (not parsed here): this rank's shard and DCP layout */
	int tp_size, tp_rank, dcp_size, dcp_interleave;
	struct comm *comm; /* the communicator (NULL: a world of one) */
};

/* Defaults; `serving` picks the server's token budget (2048) over the offline one (8192). */
void engine_args_init(struct engine_args *a, bool serving);
/* If argv[*i] is an engine flag (`--flag VALUE` or `--flag=VALUE`), stores it, advances *i
 * past it and returns 1; returns 0 for anything else, -1 for a bad value. */
int engine_args_parse(struct engine_args *a, int argc, char **argv, int *i, struct err *e);
void engine_args_usage(FILE *f);
/* --quantization / -q VALUE: the weight format the linear layers are quantized to at load
 * (fp8, int8: the rows of ops/wformat.h that quantize); serve, bench and logits parse it here */
int engine_args_quantization(const char *v, const struct wformat **out, struct err *e);
/* --quantization-rest VALUE: such a row, or bf16 / none (*out NULL: kept as the checkpoint has
 * them); *set true */
int engine_args_quantization_rest(const char *v, const struct wformat **out, bool *set, struct err *e);
/* Parses "123", "4K", "512MiB", "2G" (powers of 1024). */
int engine_args_parse_bytes(const char *s, size_t *out);

struct pool;
struct model;
struct tok;
struct comm;

struct engine_runtime {
	struct pool *pool;
	struct model *model;
	struct tok *tok;                   /* NULL when the model dir has no tokenizer.json */
	struct hf_config hf;               /* tokenizer_config.json + generation_config.json */
	struct sampling_defaults defaults; /* generation_config values over the OpenAI ones */
	struct engine_options opts;        /* as passed to engine_new */
	struct engine *engine;
};

/* The thread pool and this rank's model from a (as engine_runtime_open does), and the KV
 * cache dtype the flags resolve to. */
int engine_args_open_model(const struct engine_args *a, struct pool **pool, struct model **model, enum dtype *kv_dtype,
			   struct err *e);

/* The flags against what the checkpoint's family cannot run (model.h's model_probe): -tp /
 * -dcp > 1, --speculative-config, an explicit --enable-prefix-caching; e names the reason. */
struct model_probe;
int engine_args_check_family(const struct engine_args *a, const struct model_probe *p, struct err *e);

/* Opens everything from a->model_dir. hook may be NULL (local forward). */
int engine_runtime_open(const struct engine_args *a, const struct engine_forward_hook *hook, struct engine_runtime *rt,
			struct err *e);
/* Stops the engine first, then frees the rest. Safe on a zeroed or half-opened runtime. */
void engine_runtime_close(struct engine_runtime *rt);

#endif
