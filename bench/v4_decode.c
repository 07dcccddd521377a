/* DeepSeek-V4 decode against context (docs/PERFORMANCE.md, "DeepSeek-V4"): one decode step of
 * B sequences at context C through model_forward, for a V4 config under --load-format dummy
 * (bench/configs/v4-flash-attn-2L: V4-Flash's attention with a small MLP; any v4 stack).
 * Each context gets its own load, sized to it (max_model_len C + reps + 8). Each sequence's
 * attention state (the window ring, the compressed entries, the indexer's keys) is filled with
 * random values instead of a prefill: their cost does not depend on them, and a 1M-token
 * prefill would take the indexer's quadratic scan. The state starts at a window boundary (C a
 * multiple of every ratio), so the compressors' unfinished windows are a fresh sequence's.
 * Prints per (C, B): the step's median and best, tokens/s, the weight bytes a step reads, the
 * keys each layer scans (indexer) and attends, and the state's bytes per sequence.
 *
 *   v4_decode CONFIG_DIR [--ctx 4096,32768,131072,1048576] [--batch 1,8] [--reps 4]
 *             [--threads N] [--json FILE]
 *
 * The state is forward_v4.h's, reached through the model's family state as only a benchmark
 * may: the compressed entries and indexer keys in the engine's paged pool (packed as the pool
 * stores them: fp8 / fp4 codes), the window rows per sequence.
 */
#include <jansson.h>
#include <stdint.h>

#include "base/err.h"
#include "attn/kv_cache.h"
#include "base/log.h"
#include "model/forward_v4.h"
#include "model_v4/compressor.h"
#include "model/model.h"
#include "ops/pool.h"

#include "bench_util.h"

#define MAXV 8
#define POOL_ROWS 4096 /* distinct random rows, cycled over the context */
#define BS 64          /* tokens per KV block */

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* rows [0, n) of width w from the random pool (rows of `pw` floats) */
static void fill_rows(float *dst, long n, int w, const float *pool, int pw, int salt)
{
	for (long i = 0; i < n; i++)
		memcpy(dst + (size_t)i * (size_t)w, pool + (size_t)((i * 7 + salt) % POOL_ROWS) * (size_t)pw,
		       sizeof(float) * (size_t)w);
}

#define PACKED_ROWS 256 /* distinct packed entries, cycled */

/* PACKED_ROWS random rows packed as layer a's pool stores its entries and indexer keys
 * (compressor.h's v4_comp_store); the buffers grow to the widest layer's */
static int pack_rows(const struct v4_attn_layer *a, const float *pool, int pw, float **ent, float **ix, struct err *e)
{
	size_t ew = v4_comp_entry_floats(&a->comp), iw = a->ratio == 4 ? v4_comp_entry_floats(&a->icomp) : 1;
	float *p = realloc(*ent, sizeof(float) * PACKED_ROWS * ew),
	      *q = realloc(*ix, sizeof(float) * PACKED_ROWS * iw);
	if (p)
		*ent = p;
	if (q)
		*ix = q;
	if (!p || !q)
		return err_set(e, "out of memory");
	for (int i = 0; i < PACKED_ROWS; i++) {
		v4_comp_store(&a->comp, pool + (size_t)i * (size_t)pw, p + (size_t)i * ew);
		if (a->ratio == 4)
			v4_comp_store(&a->icomp, pool + (size_t)(i + 1) * (size_t)pw, q + (size_t)i * iw);
	}
	return 0;
}

/* one step of B single tokens at positions pos[s], sequence s on blocks bt + s * mb */
static int step(struct model *m, struct kv_cache *kv, int B, const long *pos, const int32_t *bt, int mb, float *logits,
		struct err *e)
{
	int32_t tok[MAXV * 8], p[MAXV * 8], qs[MAXV * 8 + 1], sl[MAXV * 8], rows[MAXV * 8];
	int64_t slots[MAXV * 8];
	const struct model_config *c = model_config(m);
	for (int s = 0; s < B; s++) {
		tok[s] = (int32_t)(rnd() % (uint32_t)c->vocab_size);
		p[s] = (int32_t)pos[s];
		qs[s] = s;
		sl[s] = p[s] + 1;
		rows[s] = s;
		slots[s] = kv_cache_slot(bt + (size_t)s * (size_t)mb, kv->block_size, pos[s]);
	}
	qs[B] = B;
	struct batch d = {.n_tokens = B, .tokens = tok, .positions = p, .n_logits = B, .logits_rows = rows};
	bool decode = pos[0] > 0;
	d.attn = (struct attn_meta){.n_seqs = B,
				    .n_tokens = B,
				    .query_start = qs,
				    .seq_lens = sl,
				    .block_table = bt,
				    .max_blocks = mb,
				    .slots = slots,
				    .n_decodes = decode ? B : 0,
				    .n_decode_tokens = decode ? B : 0,
				    .dcp_size = 1,
				    .local_seq_lens = sl};
	return model_forward(m, &d, kv, model_default_backend(m), logits, e);
}

struct res {
	int C, B;
	double p50_ms, best_ms, tps, gb_step, state_gb_seq;
	double cpu_ms, busy; /* CPU time a step (all threads); busy: CPU time / wall / threads */
};

/* the keys one decode token scans and attends in each kind of layer at context C */
static void print_keys(const struct v4_config *c, int C)
{
	int topk = c->index_topk, win = c->sliding_window, csa = C / 4;
	printf("context %7d: a CSA layer's indexer scans %d keys, it attends %d window + %d picked; an HCA layer "
	       "attends %d window + %d entries\n",
	       C, csa, win, csa < topk ? csa : topk, win, C / 128);
}

/* B sequences at context C: claim each one's slot with a token at position 0, overwrite its
 * state as if C tokens had run, then time `reps` decode steps */
static int run_ctx(const char *dir, int C, const int *batches, int nb, int reps, struct pool *pool, const float *rpool,
		   int rw, struct res *out, struct err *e)
{
	int Bmax = 1, rc = -1;
	for (int i = 0; i < nb; i++)
		Bmax = batches[i] > Bmax ? batches[i] : Bmax;
	struct model_options mo = {.act_dtype = DT_F32,
				   .load_dummy = true,
				   .dummy_seed = 1,
				   .max_batch_tokens = Bmax,
				   .max_seqs = Bmax,
				   .max_model_len = C + reps + 8,
				   .pool = pool};
	struct model *m = NULL;
	if (model_load(dir, &mo, &m, e))
		return -1;
	struct v4_model *v = m->fam_state;
	if (strcmp(model_config(m)->model_type, "deepseek_v4")) {
		err_set(e, "%s: not a DeepSeek-V4 config", dir);
		goto out;
	}
	int bs = BS, mb = (C + reps + 8 + BS - 1) / BS, V = model_config(m)->vocab_size;
	int32_t *bt = malloc(sizeof(int32_t) * (size_t)Bmax * (size_t)mb);
	struct kv_cache kv = {0};
	float *packed = NULL, *ipacked = NULL;
	float *logits = malloc(sizeof(float) * (size_t)Bmax * (size_t)V);
	if (!logits || !bt) {
		err_set(e, "out of memory");
		goto out_free;
	}
	if (model_kv_cache_init(m, &kv, 1 + Bmax * mb, bs, DT_F32, e))
		goto out_free;
	for (int i = 0; i < Bmax * mb; i++)
		bt[i] = 1 + i;
	print_keys(&v->c, C);
	for (int bi = 0; bi < nb; bi++) {
		int B = batches[bi];
		long pos[MAXV * 8];
		for (int s = 0; s < B; s++)
			pos[s] = 0; /* position 0: each sequence takes (or resets) its slot */
		if (step(m, &kv, B, pos, bt, mb, logits, e))
			goto out_free;
		double state = 0;
		for (int s = 0; s < B; s++) {
			struct v4_slot *sl = NULL;
			for (int i = 0; i < v->n_slots; i++)
				if (v->slots[i].first_block == bt[(size_t)s * (size_t)mb])
					sl = &v->slots[i];
			if (!sl) {
				err_set(e, "sequence %d has no slot", s);
				goto out_free;
			}
			struct v4_pages pg = {.base = kv.data,
					      .block_floats = (size_t)kv.block_size * (size_t)kv.row,
					      .bt = bt + (size_t)s * (size_t)mb,
					      .bs = kv.block_size};
			for (int l = 0; l < v->n_state_layers; l++) {
				const struct v4_attn_layer *a = v4_state_layer(v, l);
				struct v4_seq_attn *st = &sl->layer[l];
				int r = a->ratio;
				v4_seq_attn_reset(a, st);
				fill_rows(st->ring, a->window, a->head_dim, rpool, rw, s + l);
				state += 4.0 * (double)v4_seq_attn_floats(a);
				size_t ew = r ? v4_comp_entry_floats(&a->comp) : 0,
				       iw = r == 4 ? v4_comp_entry_floats(&a->icomp) : 0;
				if (r && pack_rows(a, rpool, rw, &packed, &ipacked, e))
					goto out_free;
				for (long en = 0; r && en < C / r; en++) { /* stored packed, as the pool holds them */
					size_t row = (size_t)((en * 7 + s + l) % PACKED_ROWS);
					memcpy(v4_page_entry(&pg, r, en, ew, v->pool.ent[l]), packed + row * ew,
					       sizeof(float) * ew);
					if (r == 4)
						memcpy(v4_page_entry(&pg, r, en, iw, v->pool.ix[l]),
						       ipacked + row * iw, sizeof(float) * iw);
					state += 4.0 * (double)(ew + iw);
				}
			}
			sl->pos = C;
			for (long x = C - 1 - v->rollback; x < C; x++) /* the blocks of its last positions */
				sl->ck_block[x % (v->rollback + 1)] = pg.bt[x / bs];
			pos[s] = C;
		}
		double t[64], bytes = 0, c0 = proc_cpu_s(), w0 = mono_now_s();
		for (int k = 0; k < reps; k++) {
			double t0 = mono_now_s();
			if (step(m, &kv, B, pos, bt, mb, logits, e))
				goto out_free;
			t[k] = mono_now_s() - t0;
			bytes += (double)model_step_weight_bytes(m);
			for (int s = 0; s < B; s++)
				pos[s]++;
		}
		double cpu = proc_cpu_s() - c0, busy = cpu / (mono_now_s() - w0) / pool_size(pool);
		qsort(t, (size_t)reps, sizeof(double), bench_cmp_double);
		struct res *r = &out[bi];
		*r = (struct res){.C = C,
				  .B = B,
				  .p50_ms = t[reps / 2] * 1e3,
				  .best_ms = t[0] * 1e3,
				  .tps = B / t[reps / 2],
				  .gb_step = bytes / reps / 1e9,
				  .state_gb_seq = state / B / 1e9,
				  .cpu_ms = cpu / reps * 1e3,
				  .busy = busy};
	}
	rc = 0;
out_free:
	kv_cache_fini(&kv);
	free(packed), free(ipacked);
	free(logits);
	free(bt);
out:
	model_free(m);
	return rc;
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *json = NULL;
	int ctx[MAXV] = {4096, 32768}, nc = 2, batches[MAXV] = {1, 8}, nb = 2, reps = 4, threads = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;
		if (a[0] != '-') {
			dir = a;
			continue;
		}
		if (!v)
			bad = 1;
		else if (!strcmp(a, "--ctx"))
			bad = bench_list_parse(v, ctx, &nc, MAXV, 1 << 21);
		else if (!strcmp(a, "--batch"))
			bad = bench_list_parse(v, batches, &nb, MAXV, 64);
		else if (!strcmp(a, "--reps"))
			bad = (reps = atoi(v)) < 1 || reps > 64;
		else if (!strcmp(a, "--threads"))
			threads = atoi(v);
		else if (!strcmp(a, "--json"))
			json = v;
		else
			bad = 1;
		if (bad) {
			fprintf(stderr, "v4_decode: bad option %s\n", a);
			return 2;
		}
		i++;
	}
	if (!dir) {
		fprintf(stderr,
			"usage: v4_decode CONFIG_DIR [--ctx 4096,32768] [--batch 1,8] [--reps 4] [--threads N] "
			"[--json FILE]\n");
		return 2;
	}
	for (int i = 0; i < nc; i++)
		if (ctx[i] % 128) {
			fprintf(stderr, "v4_decode: --ctx %d: a multiple of 128 (every compress ratio)\n", ctx[i]);
			return 2;
		}
	struct err e = {{0}};
	struct pool *pool = NULL;
	if (pool_new(threads, &pool, &e)) {
		fprintf(stderr, "v4_decode: %s\n", e.msg);
		return 1;
	}
	log_level = LOG_WARN;
	/* random rows of values as the state holds them (|x| < 1; RMS-normed kv, fp8-rounded) */
	int rw = 512;
	float *rpool = malloc(sizeof(float) * POOL_ROWS * (size_t)rw);
	for (size_t i = 0; i < (size_t)POOL_ROWS * (size_t)rw; i++)
		rpool[i] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f;
	printf("DeepSeek-V4 decode step against context: %s, %d threads\n", dir, pool_size(pool));
	json_t *arr = json_array();
	int rc = 0;
	for (int i = 0; i < nc; i++) {
		struct res r[MAXV];
		if (run_ctx(dir, ctx[i], batches, nb, reps, pool, rpool, rw, r, &e)) {
			fprintf(stderr, "v4_decode: context %d: %s\n", ctx[i], e.msg);
			rc = 1;
			break;
		}
		for (int b = 0; b < nb; b++) {
			printf("context %7d batch %d: step p50 %8.2f ms (best %8.2f), %7.2f tokens/s, CPU %8.2f ms a "
			       "step "
			       "(busy %.0f%%); %.3f GB of weights a step; state %.3f GB a sequence\n",
			       r[b].C, r[b].B, r[b].p50_ms, r[b].best_ms, r[b].tps, r[b].cpu_ms, 100 * r[b].busy,
			       r[b].gb_step, r[b].state_gb_seq);
			json_array_append_new(arr,
					      json_pack("{s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "context", r[b].C,
							"batch", r[b].B, "step_ms_p50", r[b].p50_ms, "step_ms_best",
							r[b].best_ms, "tokens_per_s", r[b].tps, "weight_gb_step",
							r[b].gb_step, "state_gb_per_seq", r[b].state_gb_seq,
							"cpu_busy", r[b].busy, "cpu_ms_step", r[b].cpu_ms));
		}
		fflush(stdout);
	}
	if (json && json_dump_file(arr, json, JSON_INDENT(2)))
		fprintf(stderr, "v4_decode: cannot write %s\n", json), rc = 1;
	json_decref(arr);
	free(rpool);
	pool_free(pool);
	return rc;
}
