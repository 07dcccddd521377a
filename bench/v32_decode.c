/* DeepSeek-V3.2 against dense V3 at decode, the same weights (docs/PERFORMANCE.md): one decode
 * step of B sequences at context C through model_forward, for a V3.2 config (sparse
 * attention: the indexer scans C index keys, MLA attends index_topk of them) and for its
 * dense twin (the same config without the indexer: MLA attends all C), in one run. The KV
 * cache (latent rows and the indexer's fp8 keys) is filled with random values instead of a
 * prefill (their cost does not depend on them; a 32K prefill would take the indexer's
 * quadratic scan). Prints per (model, B, C): the step's median, the indexer's median share
 * (its projections, key write and top-k), and the dense/sparse ratio.
 *
 *   v32_decode SPARSE_DIR DENSE_DIR [--ctx 1024,4096,16384,32768] [--batch 1,8] [--reps 3]
 *              [--threads N] [--json FILE]
 *
 * Weights are --load-format dummy (seeded by tensor name, so both models get the same ones);
 * activations and the KV cache bf16, as served. */
#include <jansson.h>
#include <stdint.h>

#include "attn/attn.h"
#include "attn/kv_cache.h"
#include "base/err.h"
#include "base/log.h"
#include "model/model.h"
#include "ops/pool.h"

#include "bench_util.h"

#define MAXV 8
#define BS 64
#define POOL_ROWS 1024 /* distinct random rows, cycled over the context */

struct res {
	double step_ms, index_ms;
};

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* every layer's rows of positions [0, C) of B sequences (block table bt [B][mb]) */
static void fill_cache(struct kv_cache *kv, int B, int C, const int32_t *bt, int mb, const float *rows,
		       const uint8_t *codes, const float *scales)
{
	int64_t slots[256];
	for (int l = 0; l < kv->n_layers; l++)
		for (int s = 0; s < B; s++)
			for (int p0 = 0; p0 < C; p0 += 256) {
				int n = C - p0 < 256 ? C - p0 : 256,
				    off = (p0 / 256 * 256 + s * 97 + l * 31) % (POOL_ROWS - 256);
				for (int j = 0; j < n; j++)
					slots[j] = kv_cache_slot(bt + (size_t)s * mb, BS, p0 + j);
				kv_cache_write_strided(kv, l, slots, rows + (size_t)off * kv->row, kv->row,
						       rows + (size_t)off * kv->row + kv->kv_lora_rank, kv->row, n);
				if (kv->index_dim)
					kv_cache_index_write(kv, l, slots, codes + (size_t)off * kv->index_dim,
							     scales + (size_t)off * kv->index_groups, n);
			}
}

/* one model's cache and step buffers at (B, C) */
struct runner {
	struct model *m;
	const struct attn_backend *be;
	struct kv_cache kv;
	int B, C, mb;
	int32_t *bt, tok[64], pos[64], qs[65], sl[64], lrow[64];
	int64_t slots[64];
	float *logits;
};

static int runner_init(struct runner *r, struct model *m, int B, int C, int reps, const float *rows,
		       const uint8_t *codes, const float *scales, struct err *e)
{
	memset(r, 0, sizeof *r);
	r->m = m;
	r->be = model_default_backend(m);
	r->B = B;
	r->C = C;
	r->mb = (C + reps + 2 + BS - 1) / BS;
	r->bt = malloc(sizeof(int32_t) * (size_t)B * r->mb);
	r->logits = malloc(sizeof(float) * (size_t)B * model_config(m)->vocab_size);
	if (!r->bt || !r->logits)
		return err_set(e, "out of memory");
	if (model_kv_cache_init(m, &r->kv, 1 + B * r->mb, BS, DT_BF16, e))
		return -1;
	for (int i = 0; i < B * r->mb; i++)
		r->bt[i] = 1 + i;
	fill_cache(&r->kv, B, C, r->bt, r->mb, rows, codes, scales);
	return 0;
}

static void runner_fini(struct runner *r)
{
	kv_cache_fini(&r->kv);
	free(r->bt);
	free(r->logits);
}

/* decode step k: B tokens at position C + k; its seconds and the indexer's */
static int runner_step(struct runner *r, int k, double *step_s, double *index_s, struct err *e)
{
	const struct model_config *c = model_config(r->m);
	for (int s = 0; s < r->B; s++) {
		int p = r->C + k;
		r->tok[s] = (int32_t)(rnd() % (uint32_t)c->vocab_size);
		r->pos[s] = p;
		r->qs[s] = s;
		r->sl[s] = p + 1;
		r->lrow[s] = s;
		r->slots[s] = kv_cache_slot(r->bt + (size_t)s * r->mb, BS, p);
	}
	r->qs[r->B] = r->B;
	struct batch d = {
		.n_tokens = r->B, .tokens = r->tok, .positions = r->pos, .n_logits = r->B, .logits_rows = r->lrow};
	d.attn = (struct attn_meta){.n_seqs = r->B,
				    .n_tokens = r->B,
				    .query_start = r->qs,
				    .seq_lens = r->sl,
				    .block_table = r->bt,
				    .max_blocks = r->mb,
				    .slots = r->slots,
				    .n_decodes = r->B,
				    .n_decode_tokens = r->B,
				    .dcp_size = 1,
				    .local_seq_lens = r->sl};
	double t0 = mono_now_s();
	if (model_forward(r->m, &d, &r->kv, r->be, r->logits, e))
		return -1;
	*step_s = mono_now_s() - t0;
	*index_s = model_step_index_seconds(r->m);
	return 0;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
	return v[n / 2];
}

/* both models at (B, C), their steps alternating (the machine's noise hits both alike);
 * step 0 warms the caches */
static int run_pair(struct model *const *m, int B, int C, int reps, const float *rows, const uint8_t *codes,
		    const float *scales, struct res *out, struct err *e)
{
	struct runner r[2];
	double st[2][64], it[2][64];
	int rc = -1;
	memset(r, 0, sizeof r);
	for (int k = 0; k < 2; k++)
		if (runner_init(&r[k], m[k], B, C, reps, rows, codes, scales, e))
			goto out;
	for (int step = 0; step <= reps; step++)
		for (int k = 0; k < 2; k++)
			if (runner_step(&r[k], step, &st[k][step], &it[k][step], e))
				goto out;
	for (int k = 0; k < 2; k++) {
		out[k].step_ms = 1e3 * median(st[k] + 1, reps);
		out[k].index_ms = 1e3 * median(it[k] + 1, reps);
	}
	rc = 0;
out:
	for (int k = 0; k < 2; k++)
		runner_fini(&r[k]);
	return rc;
}

int main(int argc, char **argv)
{
	int ctx[MAXV] = {1024, 4096, 16384, 32768}, nc = 4, batch[MAXV] = {1, 8}, nb = 2, reps = 3, threads = 0;
	const char *dirs[2] = {NULL, NULL}, *json_path = NULL;
	int nd = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--ctx") && v && !bench_list_parse(v, ctx, &nc, MAXV, 1 << 20))
			i++;
		else if (!strcmp(a, "--batch") && v && !bench_list_parse(v, batch, &nb, MAXV, 64))
			i++;
		else if (!strcmp(a, "--reps") && v && (reps = atoi(v)) > 0 && reps < 64)
			i++;
		else if (!strcmp(a, "--threads") && v && (threads = atoi(v)) > 0)
			i++;
		else if (!strcmp(a, "--json") && v)
			json_path = argv[++i];
		else if (a[0] != '-' && nd < 2)
			dirs[nd++] = a;
		else {
			fprintf(stderr,
				"usage: v32_decode SPARSE_DIR DENSE_DIR [--ctx 1024,4096,16384,32768] [--batch 1,8] "
				"[--reps 3] [--threads N] [--json FILE]\n");
			return 2;
		}
	}
	if (nd != 2) {
		fprintf(stderr, "v32_decode: two model directories (V3.2, its dense twin) expected\n");
		return 2;
	}
	log_level = LOG_WARN;
	struct err e = {0};
	struct pool *pool = NULL;
	if (pool_new(threads, &pool, &e)) {
		fprintf(stderr, "v32_decode: %s\n", e.msg);
		return 1;
	}
	int max_c = 0, max_b = 0;
	for (int i = 0; i < nc; i++)
		max_c = ctx[i] > max_c ? ctx[i] : max_c;
	for (int i = 0; i < nb; i++)
		max_b = batch[i] > max_b ? batch[i] : max_b;
	float *rows = malloc(sizeof(float) * POOL_ROWS * 576);
	uint8_t *codes = malloc((size_t)POOL_ROWS * 1024);
	float *scales = malloc(sizeof(float) * POOL_ROWS * 8);
	for (size_t i = 0; i < (size_t)POOL_ROWS * 576; i++)
		rows[i] = ((float)(rnd() % 2001) - 1000.0f) / 1000.0f;
	for (size_t i = 0; i < (size_t)POOL_ROWS * 1024; i++) {
		uint8_t b = (uint8_t)rnd();
		codes[i] = (b & 0x7f) == 0x7f ? (uint8_t)(b ^ 1) : b;
	}
	for (size_t i = 0; i < (size_t)POOL_ROWS * 8; i++)
		scales[i] = 1.0f / 64;
	struct res r[2][MAXV][MAXV];
	json_t *out = json_array();
	struct model *m[2] = {NULL, NULL};
	for (int k = 0; k < 2; k++) {
		struct model_options mo = {.act_dtype = DT_BF16,
					   .load_dummy = true,
					   .dummy_seed = 1,
					   .max_batch_tokens = max_b,
					   .max_seqs = max_b,
					   .max_model_len = max_c + reps + 2,
					   .pool = pool};
		if (model_load(dirs[k], &mo, &m[k], &e)) {
			fprintf(stderr, "v32_decode: %s\n", e.msg);
			return 1;
		}
		if (config_is_sparse(model_config(m[k])) != (k == 0)) {
			fprintf(stderr,
				"v32_decode: %s is %s; the first directory is the V3.2 one, the second dense\n",
				dirs[k], k ? "sparse" : "dense");
			return 1;
		}
	}
	printf("decode step, batch B at context C, median of %d (V3.2 and dense alternating), %d threads\n", reps,
	       pool_size(pool));
	for (int bi = 0; bi < nb; bi++)
		for (int ci = 0; ci < nc; ci++) {
			struct res pr[2];
			if (run_pair(m, batch[bi], ctx[ci], reps, rows, codes, scales, pr, &e)) {
				fprintf(stderr, "v32_decode: %s\n", e.msg);
				return 1;
			}
			r[0][bi][ci] = pr[0];
			r[1][bi][ci] = pr[1];
			printf("  batch %d, context %6d: v3.2 %8.2f ms (indexer %7.2f ms), dense %8.2f ms\n",
			       batch[bi], ctx[ci], pr[0].step_ms, pr[0].index_ms, pr[1].step_ms);
			fflush(stdout);
		}
	model_free(m[0]);
	model_free(m[1]);
	printf("\n%-6s %-8s %10s %12s %10s %10s %12s\n", "batch", "context", "v3.2 ms", "indexer ms", "share",
	       "dense ms", "dense/v3.2");
	for (int bi = 0; bi < nb; bi++)
		for (int ci = 0; ci < nc; ci++) {
			struct res *s = &r[0][bi][ci], *d = &r[1][bi][ci];
			printf("%-6d %-8d %10.2f %12.2f %9.0f%% %10.2f %11.2fx\n", batch[bi], ctx[ci], s->step_ms,
			       s->index_ms, 100 * s->index_ms / s->step_ms, d->step_ms, d->step_ms / s->step_ms);
			json_array_append_new(out,
					      json_pack("{s:i, s:i, s:f, s:f, s:f}", "batch", batch[bi], "context",
							ctx[ci], "v32_step_ms", s->step_ms, "v32_indexer_ms",
							s->index_ms, "dense_step_ms", d->step_ms));
		}
	if (json_path && json_dump_file(out, json_path, JSON_INDENT(1)))
		fprintf(stderr, "v32_decode: cannot write %s\n", json_path);
	json_decref(out);
	free(rows), free(codes), free(scales);
	pool_free(pool);
	return 0;
}
