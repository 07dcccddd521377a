/* MLA path sweep: for one sequence with q_len q new tokens and context L (L - q cached
 * tokens), times model_forward with the sequence on the decode (absorbed, MQA over latent
 * rows) path and on the prefill (up-projected, MHA) path. Where the decode path is faster,
 * the reorder threshold should be at least q. Also checks the two paths agree (max |diff|
 * of the logits), since they compute the same attention.
 *
 *   mla_paths CONFIG_DIR [--q 1,16,..] [--ctx 1024,4096] [--reps 3] [--block-size 16]
 *             [--dtype auto|float32|bfloat16] [--attention-backend NAME] [--threads N]
 *             [--json FILE]
 *
 * Random weights (--load-format dummy). The context rows are random latents written
 * straight into the paged cache: attention cost does not depend on their values. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/attn.h"
#include "attn/kv_cache.h"
#include "base/dtype.h"
#include "base/err.h"
#include "model/model.h"
#include "ops/pool.h"

#include "bench_util.h"

#define MAXV 16


struct sweep {
	struct model *m;
	struct kv_cache *kv;
	const struct attn_backend *be;
	int32_t *bt, *tok, *pos;
	int64_t *slots;
	float *logits[2];
	int mb, vocab;
};

/* One forward of the q tokens at positions [L-q, L) on the decode (dec = 1) or prefill path. */
static int one(struct sweep *s, int q, int L, int dec, double *t, double *cpu, struct err *e)
{
	int bs = s->kv->block_size;
	for (int i = 0; i < q; i++) {
		int p = L - q + i;
		s->tok[i] = (int32_t)((p * 7919u) % (unsigned)s->vocab);
		s->pos[i] = p;
		s->slots[i] = (int64_t)s->bt[p / bs] * bs + p % bs;
	}
	int32_t qs[2] = {0, q}, sl[1] = {L}, row[1] = {q - 1};
	struct batch b = {.n_tokens = q, .tokens = s->tok, .positions = s->pos, .n_logits = 1, .logits_rows = row};
	b.attn = (struct attn_meta){.n_seqs = 1,
				    .n_tokens = q,
				    .query_start = qs,
				    .seq_lens = sl,
				    .block_table = s->bt,
				    .max_blocks = s->mb,
				    .slots = s->slots,
				    .n_decodes = dec,
				    .n_decode_tokens = dec ? q : 0,
				    .dcp_size = 1,
				    .local_seq_lens = sl};
	double t0 = mono_now_s(), c0 = proc_cpu_s();
	int rc = model_forward(s->m, &b, s->kv, s->be, s->logits[dec], e);
	*t = mono_now_s() - t0;
	*cpu = proc_cpu_s() - c0;
	return rc;
}

int main(int argc, char **argv)
{
	int qv[MAXV] = {1, 16, 64, 128, 256, 512, 1024}, nq = 7, lv[MAXV] = {1024, 4096}, nl = 2;
	int reps = 3, bs = 16, threads = 0;
	const char *dir = NULL, *dtype = "auto", *backend = NULL, *json = NULL;
	struct err e = {{0}};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (a[0] != '-') {
			dir = a;
			continue;
		}
		if (!v) {
			fprintf(stderr, "mla_paths: %s needs a value\n", a);
			return 2;
		}
		i++;
		int bad = 0;
		if (!strcmp(a, "--q"))
			bad = bench_list_parse(v, qv, &nq, MAXV, 1 << 20);
		else if (!strcmp(a, "--ctx"))
			bad = bench_list_parse(v, lv, &nl, MAXV, 1 << 20);
		else if (!strcmp(a, "--reps"))
			bad = (reps = atoi(v)) < 1;
		else if (!strcmp(a, "--block-size"))
			bad = (bs = atoi(v)) < 1;
		else if (!strcmp(a, "--threads"))
			bad = (threads = atoi(v)) < 0;
		else if (!strcmp(a, "--dtype"))
			dtype = v;
		else if (!strcmp(a, "--attention-backend"))
			backend = v;
		else if (!strcmp(a, "--json"))
			json = v;
		else
			bad = 1;
		if (bad) {
			fprintf(stderr, "mla_paths: bad option %s %s\n", a, v);
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr,
			"usage: mla_paths CONFIG_DIR [--q 1,16,..] [--ctx 1024,4096] [--reps N] [--block-size N]\n"
			"       [--dtype auto|float32|bfloat16] [--attention-backend NAME] [--threads N] [--json "
			"FILE]\n");
		return 2;
	}
	int qmax = 1, lmax = 1;
	for (int i = 0; i < nq; i++)
		qmax = qv[i] > qmax ? qv[i] : qmax;
	for (int i = 0; i < nl; i++)
		lmax = lv[i] > lmax ? lv[i] : lmax;
	const struct attn_backend *be = backend ? attn_backend_by_name(backend) : attn_backend_at(0);
	if (!be) {
		fprintf(stderr, "mla_paths: unknown backend %s\n", backend);
		return 2;
	}
	struct pool *pool = NULL;
	struct sweep s = {.be = be};
	struct kv_cache kv = {0};
	json_t *rows = json_array();
	int rc = 1;
	if (pool_new(threads, &pool, &e))
		goto fail;
	struct model_options mo = {.act_dtype = DT_F32,
				   .load_dummy = true,
				   .dummy_seed = 1,
				   .max_batch_tokens = qmax,
				   .max_seqs = 1,
				   .max_model_len = lmax,
				   .pool = pool};
	if (dtype_parse_flag("--dtype", dtype, &mo.act_dtype, &mo.act_dtype_auto, &e) < 0)
		goto fail;
	if (model_load(dir, &mo, &s.m, &e))
		goto fail;
	const struct model_config *c = model_config(s.m);
	/* the KV dtype the engine's --kv-cache-dtype auto picks: bf16 unless float32 activations */
	enum dtype kvd = !strcmp(dtype, "float32") || (mo.act_dtype_auto && !strcmp(c->torch_dtype, "float32"))
				 ? DT_F32
				 : DT_BF16;
	s.mb = (lmax + bs - 1) / bs;
	if (kv_cache_init(&kv, c->num_hidden_layers, 1 + s.mb, bs, c->kv_lora_rank, c->qk_rope_head_dim, kvd, &e))
		goto fail;
	s.kv = &kv;
	s.vocab = c->vocab_size;
	s.bt = malloc(sizeof(int32_t) * (size_t)s.mb);
	s.tok = malloc(sizeof(int32_t) * (size_t)qmax);
	s.pos = malloc(sizeof(int32_t) * (size_t)qmax);
	s.slots = malloc(sizeof(int64_t) * (size_t)qmax);
	s.logits[0] = malloc(sizeof(float) * (size_t)s.vocab);
	s.logits[1] = malloc(sizeof(float) * (size_t)s.vocab);
	if (!s.bt || !s.tok || !s.pos || !s.slots || !s.logits[0] || !s.logits[1]) {
		err_set(&e, "out of memory");
		goto fail;
	}
	/* pages in reverse order: a block table that is not the identity, as after churn */
	for (int i = 0; i < s.mb; i++)
		s.bt[i] = s.mb - i;
	uint64_t r = 7;
	for (int l = 0; l < c->num_hidden_layers; l++)
		for (int64_t slot = bs; slot < (int64_t)(1 + s.mb) * bs; slot++) {
			void *row = kv_cache_row_ptr(&kv, l, slot);
			for (int k = 0; k < kv.row; k++) {
				r = r * 6364136223846793005ull + 1442695040888963407ull;
				float x = ((float)(r >> 40) / (float)(1 << 24) - 0.5f) * 2;
				if (kvd == DT_F32)
					((float *)row)[k] = x;
				else
					((uint16_t *)row)[k] = f32_to_bf16(x);
			}
		}
	printf("mla_paths %s: %d layers, %d heads, kv_lora_rank %d, backend %s, block size %d, %d threads, %s KV\n",
	       dir, c->num_hidden_layers, c->num_attention_heads, c->kv_lora_rank, be->name, bs, pool_size(pool),
	       dtype_name(kvd));
	printf("%6s %6s %10s %10s %8s %8s %9s %9s %8s %10s\n", "q", "ctx", "decode_ms", "prefill_ms", "dec/pre",
	       "spread%", "dec_cpu", "pre_cpu", "cpu d/p", "max|dlogit|");
	double *td = malloc(sizeof(double) * (size_t)reps), *tp = malloc(sizeof(double) * (size_t)reps);
	if (!td || !tp) {
		free(td), free(tp);
		err_set(&e, "out of memory");
		goto fail;
	}
	for (int li = 0; li < nl; li++)
		for (int qi = 0; qi < nq; qi++) {
			int q = qv[qi], L = lv[li];
			if (q > L)
				continue;
			double warm, wc, cd = 0, cp = 0, c1, c2;
			/* one untimed forward per path, then alternate paths so drift hits both */
			if (one(&s, q, L, 1, &warm, &wc, &e) || one(&s, q, L, 0, &warm, &wc, &e))
				goto fail_t;
			for (int k = 0; k < reps; k++) {
				if (one(&s, q, L, k & 1, k & 1 ? &td[k] : &tp[k], &c1, &e) ||
				    one(&s, q, L, !(k & 1), k & 1 ? &tp[k] : &td[k], &c2, &e))
					goto fail_t;
				cd += k & 1 ? c1 : c2;
				cp += k & 1 ? c2 : c1;
			}
			/* CPU seconds summed over the pool's threads: what another process's load
			 * cannot inflate by taking a core away (workers sleep, never spin) */
			cd /= reps;
			cp /= reps;
			double diff = 0;
			for (int v = 0; v < s.vocab; v++)
				diff = fmax(diff, fabs(s.logits[0][v] - s.logits[1][v]));
			qsort(td, (size_t)reps, sizeof *td, bench_cmp_double);
			qsort(tp, (size_t)reps, sizeof *tp, bench_cmp_double);
			double md = td[reps / 2], mp = tp[reps / 2];
			/* spread: (max - min) / median over both paths' repetitions, the larger */
			double sp = fmax((td[reps - 1] - td[0]) / md, (tp[reps - 1] - tp[0]) / mp);
			printf("%6d %6d %10.2f %10.2f %8.3f %8.1f %9.2f %9.2f %8.3f %10.2e\n", q, L, md * 1e3,
			       mp * 1e3, md / mp, 100 * sp, cd * 1e3, cp * 1e3, cd / cp, diff);
			fflush(stdout);
			json_array_append_new(rows, json_pack("{s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "q_len",
							      q, "ctx", L, "block_size", bs, "decode_ms", md * 1e3,
							      "prefill_ms", mp * 1e3, "decode_min_ms", td[0] * 1e3,
							      "prefill_min_ms", tp[0] * 1e3, "decode_cpu_ms", cd * 1e3,
							      "prefill_cpu_ms", cp * 1e3, "spread", sp,
							      "max_abs_logit_diff", diff));
		}
	free(td), free(tp);
	if (json) {
		json_t *j = json_pack("{s:s,s:s,s:i,s:i,s:O}", "config", dir, "backend", be->name, "block_size", bs,
				      "threads", pool_size(pool), "runs", rows);
		if (!j || json_dump_file(j, json, JSON_INDENT(2))) {
			json_decref(j);
			err_set(&e, "%s: cannot write", json);
			goto fail;
		}
		json_decref(j);
	}
	rc = 0;
	goto out;
fail_t:
	free(td), free(tp);
fail:
	fprintf(stderr, "mla_paths: %s\n", e.msg);
out:
	json_decref(rows);
	free(s.bt), free(s.tok), free(s.pos), free(s.slots), free(s.logits[0]), free(s.logits[1]);
	kv_cache_fini(&kv);
	model_free(s.m);
	pool_free(pool);
	return rc;
}
