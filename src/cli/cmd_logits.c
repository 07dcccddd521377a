/* mlaserve logits MODEL_DIR --tokens 0,5,9 --out FILE: raw little-endian float32
 * [n_tokens x vocab], row i = the logits after tokens 0..i. One forward over the whole
 * sequence, or --chunk K forwards of K tokens through the KV cache. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "base/err.h"
#include "cli/commands.h"
#include "model/model.h"
#include "ops/pool.h"

struct logits_opts {
	const char *dir, *tokens, *out, *dtype, *backend;
	int dummy, threads, chunk;
};

static void logits_usage(FILE *f)
{
	fprintf(f, "usage: mlaserve logits MODEL_DIR --tokens 0,5,9 --out FILE [--dtype float32|bfloat16|auto]\n"
		   "         [--load-format auto|dummy] [--threads N] [--attention-backend NAME] [--chunk K]\n");
}

static int parse_int(const char *s, const char *what, int lo, int *out, struct err *e)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > 1 << 30)
		return err_set(e, "%s: invalid value '%s'", what, s);
	*out = (int)v;
	return 0;
}

static int parse_tokens(const char *s, int32_t **out, int *n, struct err *e)
{
	int cap = 16, cnt = 0;
	int32_t *t = malloc(sizeof *t * (size_t)cap);
	if (!t)
		return err_set(e, "--tokens: out of memory");
	const char *p = s;
	while (*p) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
			free(t);
			return err_set(e, "--tokens: invalid token list '%s'", s);
		}
		if (cnt == cap) {
			int32_t *g = realloc(t, sizeof *t * (size_t)(cap *= 2));
			if (!g) {
				free(t);
				return err_set(e, "--tokens: out of memory");
			}
			t = g;
		}
		t[cnt++] = (int32_t)v;
		p = *end ? end + 1 : end;
	}
	if (!cnt) {
		free(t);
		return err_set(e, "--tokens: empty token list");
	}
	*out = t;
	*n = cnt;
	return 0;
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
	if (parse_tokens(o->tokens, &tok, &n, e))
		return -1;
	const struct attn_backend *be = o->backend ? attn_backend_by_name(o->backend) : attn_backend_at(0);
	if (!be) {
		err_set(e, "--attention-backend: unknown backend '%s'", o->backend);
		goto out;
	}
	if (pool_new(o->threads, &pool, e))
		goto out;
	int chunk = o->chunk > 0 && o->chunk < n ? o->chunk : n;
	struct model_options mo = {.act_dtype = DT_F32, .load_dummy = o->dummy, .dummy_seed = 0,
				   .max_batch_tokens = chunk, .max_seqs = 1, .max_model_len = n, .pool = pool};
	if (!strcmp(o->dtype, "auto"))
		mo.act_dtype_auto = true;
	else if (!strcmp(o->dtype, "bfloat16"))
		mo.act_dtype = DT_BF16;
	else if (strcmp(o->dtype, "float32")) {
		err_set(e, "--dtype: invalid value '%s' (float32, bfloat16 or auto)", o->dtype);
		goto out;
	}
	if (model_load(o->dir, &mo, &m, e))
		goto out;
	const struct model_config *c = model_config(m);
	for (int i = 0; i < n; i++)
		if (tok[i] >= c->vocab_size) {
			err_set(e, "--tokens: token %d outside the vocabulary (%d)", tok[i], c->vocab_size);
			goto out;
		}
	int bs = 16 * (be->block_size_multiple > 0 ? be->block_size_multiple : 1);
	int nb = (n + bs - 1) / bs;
	/* the cache dtype follows the activations: float32 runs are exact */
	enum dtype kvd = (mo.act_dtype_auto ? strcmp(c->torch_dtype, "float32") : mo.act_dtype != DT_F32) ? DT_BF16 : DT_F32;
	if (kv_cache_init(&kv, c->num_hidden_layers, nb + 1, bs, c->kv_lora_rank, c->qk_rope_head_dim, kvd, e))
		goto out;
	logits = malloc(sizeof(float) * (size_t)n * (size_t)c->vocab_size);
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
		slots[i] = (int64_t)bt[i / bs] * bs + i % bs;
	}
	for (int s = 0; s < n; s += chunk) {
		int q = n - s < chunk ? n - s : chunk;
		/* vLLM's split: a short enough query runs the backend's decode path */
		bool dec = q == 1 || (be->query_len_support != QLEN_SINGLE_ONLY && q <= be->reorder_batch_threshold);
		int32_t qs[2] = {0, q}, sl[1] = {s + q};
		for (int i = 0; i < q; i++)
			rows[i] = i;
		struct batch b = {.n_tokens = q, .tokens = tok + s, .positions = pos + s, .n_logits = q, .logits_rows = rows};
		b.attn = (struct attn_meta){.n_seqs = 1, .n_tokens = q, .query_start = qs, .seq_lens = sl, .block_table = bt,
					    .max_blocks = nb, .slots = slots + s, .n_decodes = dec ? 1 : 0,
					    .n_decode_tokens = dec ? q : 0, .dcp_size = 1, .local_seq_lens = sl};
		if (model_forward(m, &b, &kv, be, logits + (size_t)s * (size_t)c->vocab_size, e))
			goto out;
	}
	f = fopen(o->out, "wb");
	if (!f) {
		err_set(e, "%s: cannot open for writing: %s", o->out, strerror(errno));
		goto out;
	}
	size_t cnt = (size_t)n * (size_t)c->vocab_size;
	if (fwrite(logits, sizeof(float), cnt, f) != cnt || fclose(f)) {
		f = NULL;
		err_set(e, "%s: write failed: %s", o->out, strerror(errno));
		goto out;
	}
	f = NULL;
	rc = 0;
out:
	if (f)
		fclose(f);
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
	struct logits_opts o = {.dtype = "float32"};
	struct err e = {{0}};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			logits_usage(stdout);
			return 0;
		}
		if (a[0] == '-' && a[1] == '-') {
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
			else if (!strcmp(a, "--load-format")) {
				if (strcmp(v, "dummy") && strcmp(v, "auto") && strcmp(v, "safetensors")) {
					fprintf(stderr, "mlaserve logits: --load-format: invalid value '%s' (auto, safetensors or dummy)\n", v);
					return 1;
				}
				o.dummy = !strcmp(v, "dummy");
			} else if (!strcmp(a, "--threads")) {
				if (parse_int(v, "--threads", 0, &o.threads, &e))
					goto fail;
			} else if (!strcmp(a, "--chunk")) {
				if (parse_int(v, "--chunk", 1, &o.chunk, &e))
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
	if (run_logits(&o, &e))
		goto fail;
	return 0;
fail:
	fprintf(stderr, "mlaserve logits: %s\n", e.msg);
	return 1;
}
