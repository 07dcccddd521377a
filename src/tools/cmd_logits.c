/* mlaserve logits MODEL_DIR --tokens 0,5,9 --out FILE: raw little-endian float32
 * [n_tokens x vocab], row i = the logits after tokens 0..i. One forward over the whole
 * sequence, or --chunk K forwards of K tokens through the KV cache. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/kv_cache.h"
#include "attn/threshold.h"
#include "base/dtype.h"
#include "base/err.h"
#include "base/log.h"
#include "setup/cli_util.h"
#include "tools/tools.h"
#include "io/config.h"
#include "engine/dist_exec.h"
#include "engine/reorder.h"
#include "setup/ranks.h"
#include "model/model.h"
#include "ops/pool.h"
#include "ops/wformat.h"

struct logits_opts {
	const char *dir, *tokens, *out, *dtype, *backend;
	const char *kv_dtype; /* --kv-cache-dtype (NULL: auto) */
	int dummy, threads, chunk;
	/* --quantization NAME (engine_args_quantization: a row of ops/wformat.h, NULL: none) */
	const struct wformat *quant;
	const struct wformat *quant_rest; /* --quantization-rest (engine_args_quantization_rest) */
	bool quant_rest_set;
	bool quantize_lm_head;   /* --quantize-lm-head */
	bool quantize_embedding; /* --quantize-embedding */
	int tp, dcp, interleave, block_size;
	struct comm *comm; /* -tp > 1: every rank runs the same steps on its shard */
};

static void logits_usage(FILE *f)
{
	char q[64]; /* the --quantization methods: the rows of ops/wformat.h that quantize */
	wformat_quant_names(q, sizeof q, "|");
	fprintf(f,
		"usage: mlaserve logits MODEL_DIR --tokens 0,5,9 --out FILE [--dtype float32|bfloat16|auto]\n"
		"         [--load-format auto|dummy] [--threads N] [--attention-backend NAME] [--chunk K]\n"
		"         [-tp T] [-dcp D] [--dcp-kv-cache-interleave-size I] [--block-size N] [--quantization %s]\n"
		"         [--quantization-rest NAME|bf16] [--quantize-lm-head] [--quantize-embedding]\n"
		"         [--kv-cache-dtype auto|float32|bfloat16|fp8]\n"
		"Every rank computes the same chunks on its shard; rank 0 writes FILE.\n",
		q);
}

static int run_logits(const struct logits_opts *o, struct err *e)
{
	int32_t *tok = NULL;
	int n = 0, rc = -1;
	struct pool *pool = NULL;
	struct model *m = NULL;
	struct kv_cache kv = {0};
	float *logits = NULL;
	FILE *f = NULL;
	int32_t *bt = NULL, *pos = NULL, *rows = NULL;
	int64_t *slots = NULL;
	struct dist_exec dx;
	memset(&dx, 0, sizeof dx);
	struct comm *c = o->comm;
	bool rank0 = !c || c->world_rank == 0;
	size_t n_tok;
	if (cli_ids_parse("--tokens", o->tokens, false, &tok, &n_tok, e))
		return -1;
	n = (int)n_tok;
	const struct attn_backend *be = o->backend ? attn_backend_by_name(o->backend) : NULL;
	if (o->backend && !be) {
		err_set(e, "--attention-backend: unknown backend '%s'", o->backend);
		goto out;
	}
	struct model_probe mp; /* a backend of the wrong kind is refused before the weights load */
	if (be && (model_probe_config(o->dir, c ? c->tp_size : 1, &mp, e) ||
		   attn_backend_check_kind(be, mp.attn_kind, e)))
		goto out;
	if (pool_new(o->threads, &pool, e))
		goto out;
	int chunk = o->chunk > 0 && o->chunk < n ? o->chunk : n;
	struct model_options mo = {.act_dtype = DT_F32,
				   .load_dummy = o->dummy,
				   .dummy_seed = 0,
				   .max_batch_tokens = chunk,
				   .max_seqs = 1,
				   .max_model_len = n,
				   .pool = pool,
				   .tp_size = c ? c->tp_size : 1,
				   .tp_rank = c ? c->tp_rank : 0,
				   .comm = c,
				   .dcp_interleave = o->interleave,
				   .quant = o->quant,
				   .quant_rest = o->quant_rest,
				   .quant_rest_set = o->quant_rest_set,
				   .quantize_lm_head = o->quantize_lm_head,
				   .quantize_embedding = o->quantize_embedding};
	if (dtype_parse_flag("--dtype", o->dtype, &mo.act_dtype, &mo.act_dtype_auto, e) < 0)
		goto out;
	if (model_load(o->dir, &mo, &m, e))
		goto out;
	const struct model_config *cfg = model_config(m);
	if (!be)
		be = model_default_backend(m);
	if (model_check_backend(m, be, e))
		goto out;
	for (int i = 0; i < n; i++)
		if (tok[i] >= cfg->vocab_size) {
			err_set(e, "--tokens: token %d outside the vocabulary (%d)", tok[i], cfg->vocab_size);
			goto out;
		}
	int mult = attn_backend_block_multiple(be);
	int bs = o->block_size > 0 ? o->block_size : attn_backend_default_block_size(be);
	if (bs % mult) {
		err_set(e, "--block-size %d: attention backend %s needs a multiple of %d", bs, be->name, mult);
		goto out;
	}
	/* under DCP the block table addresses virtual blocks of bs x W tokens (§4.1) */
	int W = c ? c->dcp_size : 1, I = o->interleave > 0 ? o->interleave : 1;
	int vbs = bs * W, nb = (n + vbs - 1) / vbs;
	struct attn_runner_rule rule; /* the engine's threshold and decode split */
	if (attn_threshold_setup(be, 0, W, I, 0, &rule, e))
		goto out;
	/* the cache dtype follows the activations: float32 runs are exact */
	enum dtype kvd = (mo.act_dtype_auto ? strcmp(cfg->torch_dtype, "float32") : mo.act_dtype != DT_F32) ? DT_BF16
													    : DT_F32;
	bool kv_auto = true;
	enum dtype kv_set;
	if (o->kv_dtype && dtype_parse_kv_flag(o->kv_dtype, &kv_set, &kv_auto, e) < 0)
		goto out;
	if (!kv_auto)
		kvd = kv_set;
	if (model_kv_cache_init(m, &kv, nb + 1, bs, kvd, e))
		goto out;
	logits = malloc(sizeof(float) * (size_t)n * (size_t)cfg->vocab_size);
	bt = malloc(sizeof(int32_t) * (size_t)nb);
	pos = malloc(sizeof(int32_t) * (size_t)n);
	rows = malloc(sizeof(int32_t) * (size_t)n);
	slots = malloc(sizeof(int64_t) * (size_t)n);
	if (!logits || !bt || !pos || !rows || !slots) {
		err_set(e, "logits: out of memory");
		goto out;
	}
	for (int i = 0; i < nb; i++)
		bt[i] = i + 1; /* block 0 is the null block */
	for (int i = 0; i < n; i++) {
		pos[i] = i;
		slots[i] = kv_cache_slot(bt, vbs, i);
	}
	dist_exec_init(&dx, c, m, &kv, be, I);
	for (int s = 0; s < n; s += chunk) {
		int q = n - s < chunk ? n - s : chunk;
		int32_t qs[2] = {0, q}, sl[1] = {s + q};
		/* the runner's split: a query within the (DCP-resolved) threshold decodes */
		struct batch_split sp = {0, 1, 0, q};
		if (rule.threshold > 0)
			sp = split_decodes_and_prefills(qs, 1, rule.threshold, rule.require_uniform);
		bool dec = sp.n_decodes == 1;
		for (int i = 0; i < q; i++)
			rows[i] = i;
		struct step_plan p = {.n_tokens = q,
				      .n_seqs = 1,
				      .max_blocks = nb,
				      .n_decodes = dec ? 1 : 0,
				      .n_decode_tokens = dec ? q : 0,
				      .n_logits = q,
				      .block_size = vbs,
				      .tokens = tok + s,
				      .positions = pos + s,
				      .query_start = qs,
				      .seq_lens = sl,
				      .block_table = bt,
				      .slots = slots + s,
				      .logits_rows = rows};
		if (dist_exec_forward(&dx, &p, logits + (size_t)s * (size_t)cfg->vocab_size, e)) {
			if (c && c->world_size > 1) { /* the others may wait in a collective */
				fprintf(stderr, "mlaserve logits: rank %d: %s\n", c->world_rank, e->msg);
				comm_abort(c, 1);
			}
			goto out;
		}
	}
	if (rank0) {
		f = fopen(o->out, "wb");
		if (!f) {
			err_set(e, "%s: cannot open for writing: %s", o->out, strerror(errno));
			goto out;
		}
		size_t cnt = (size_t)n * (size_t)cfg->vocab_size;
		if (fwrite(logits, sizeof(float), cnt, f) != cnt || fclose(f)) {
			f = NULL;
			err_set(e, "%s: write failed: %s", o->out, strerror(errno));
			goto out;
		}
		f = NULL;
	}
	rc = 0;
out:
	if (f)
		fclose(f);
	dist_exec_fini(&dx);
	free(tok);
	free(logits);
	free(bt);
	free(pos);
	free(rows);
	free(slots);
	kv_cache_fini(&kv);
	model_free(m);
	pool_free(pool);
	return rc;
}

int cmd_logits(int argc, char **argv)
{
	struct logits_opts o = {.dtype = "float32", .tp = 1, .dcp = 1, .interleave = 1};
	struct err e = {{0}};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			logits_usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--quantize-lm-head")) {
			o.quantize_lm_head = true;
		} else if (!strcmp(a, "--quantize-embedding")) {
			o.quantize_embedding = true;
		} else if (!strcmp(a, "-tp") || !strcmp(a, "-dcp")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "mlaserve logits: %s needs a value\n", a);
				return 2;
			}
			if (cli_int_parse(a, argv[++i], 1, 1 << 30, a[1] == 't' ? &o.tp : &o.dcp, &e))
				goto fail;
		} else if (a[0] == '-' && (a[1] == '-' || !strcmp(a, "-q"))) {
			if (i + 1 >= argc) {
				fprintf(stderr, "mlaserve logits: %s needs a value\n", a);
				return 2;
			}
			const char *v = argv[++i];
			if (!strcmp(a, "--tokens"))
				o.tokens = v;
			else if (!strcmp(a, "--out"))
				o.out = v;
			else if (!strcmp(a, "--dtype"))
				o.dtype = v;
			else if (!strcmp(a, "--attention-backend"))
				o.backend = v;
			else if (!strcmp(a, "--kv-cache-dtype"))
				o.kv_dtype = v;
			else if (!strcmp(a, "--quantization") || !strcmp(a, "-q")) {
				if (engine_args_quantization(v, &o.quant, &e))
					goto fail;
			} else if (!strcmp(a, "--quantization-rest")) {
				if (engine_args_quantization_rest(v, &o.quant_rest, &o.quant_rest_set, &e))
					goto fail;
			} else if (!strcmp(a, "--load-format")) {
				if (strcmp(v, "dummy") && strcmp(v, "auto") && strcmp(v, "safetensors")) {
					fprintf(stderr,
						"mlaserve logits: --load-format: invalid value '%s' (auto, "
						"safetensors "
						"or dummy)\n",
						v);
					return 1;
				}
				o.dummy = !strcmp(v, "dummy");
			} else if (!strcmp(a, "--threads")) {
				if (cli_int_parse("--threads", v, 0, 1 << 30, &o.threads, &e))
					goto fail;
			} else if (!strcmp(a, "--chunk")) {
				if (cli_int_parse("--chunk", v, 1, 1 << 30, &o.chunk, &e))
					goto fail;
			} else if (!strcmp(a, "--tensor-parallel-size")) {
				if (cli_int_parse(a, v, 1, 1 << 30, &o.tp, &e))
					goto fail;
			} else if (!strcmp(a, "--decode-context-parallel-size")) {
				if (cli_int_parse(a, v, 1, 1 << 30, &o.dcp, &e))
					goto fail;
			} else if (!strcmp(a, "--dcp-kv-cache-interleave-size") ||
				   !strcmp(a, "--cp-kv-cache-interleave-size")) {
				if (cli_int_parse(a, v, 1, 1 << 30, &o.interleave, &e))
					goto fail;
			} else if (!strcmp(a, "--block-size")) {
				/* bounded: the cache is sized in whole blocks (x DCP size), allocated up front */
				if (cli_int_parse(a, v, 1, 1 << 16, &o.block_size, &e))
					goto fail;
			} else {
				fprintf(stderr, "mlaserve logits: unknown option '%s'\n", a);
				logits_usage(stderr);
				return 2;
			}
		} else if (!o.dir) {
			o.dir = a;
		} else {
			fprintf(stderr, "mlaserve logits: unexpected argument '%s'\n", a);
			return 2;
		}
	}
	if (!o.dir || !o.tokens || !o.out) {
		logits_usage(stderr);
		return 2;
	}
	if (o.quant_rest_set && !o.quant) {
		err_set(&e, "--quantization-rest needs --quantization (the routed experts' format)");
		goto fail;
	}
	if (o.tp > 1 || o.dcp > 1) {
		/* checks, self-launch (before any thread), then every rank runs the same chunks */
		struct engine_args ea;
		engine_args_init(&ea, false);
		ea.model_dir = o.dir;
		ea.attention_backend = o.backend;
		ea.block_size = o.block_size;
		ea.tp_size = o.tp;
		ea.dcp_size = o.dcp;
		ea.dcp_interleave = o.interleave;
		ea.threads = o.threads;
		struct comm c;
		if (ranks_start(argc, argv, &ea, &c, &e))
			goto fail;
		o.comm = &c;
		o.threads = ea.threads;
		int rc = run_logits(&o, &e);
		if (rc)
			fprintf(stderr, "mlaserve logits: rank %d: %s\n", c.world_rank, e.msg);
		comm_fini(&c);
		return rc ? 1 : 0;
	}
	if (run_logits(&o, &e))
		goto fail;
	return 0;
fail:
	fprintf(stderr, "mlaserve logits: %s\n", e.msg);
	return 1;
}
