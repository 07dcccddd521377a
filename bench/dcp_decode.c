/* DCP decode attention, one layer, per step: on each of the W ranks of a tp = dcp = W group
 * (started by mpirun; W = 1 runs without MPI), the pieces of docs/mla-dcp.md §4.8 timed apart:
 *   q all-gather     comm_dcp_allgather_inner: q [B, H/W, 576] -> [B, H, 576]
 *   attention        backend plan + decode (FLASHMLA by default) for all H heads over this
 *                    rank's KV shard (local_len(L) ~ L/W tokens per sequence), wall and
 *                    process CPU time
 *   lse all-gather   comm_dcp_allgather: lse [B, H] -> [W, B, H]
 *   lse correction   dcp_lse_correct (local arithmetic)
 *   reduce-scatter   comm_dcp_reduce_scatter_inner: out [B, H, 512] -> [B, H/W, 512]
 * Each piece starts after a barrier, so a collective's time is the communication itself, not
 * the wait for a slower rank; the collectives also run --comm-reps more rounds alone. With
 * W = 1 there is no collective (as in the engine). The KV shard is built with the engine's slot mapping
 * (dcp_slot over a virtual block table of block_size x W tokens); its values are random (the
 * cost does not depend on them). Medians over reps of the max over ranks (CPU: mean over
 * ranks), with min and max over reps.
 *
 *   mpirun -np W dcp_decode [--heads 128] [--ctx 4096,16384,65536] [--batch 1,4] [--reps 5]
 *          [--block-size 16] [--interleave 1] [--threads N] [--kv-dtype bfloat16|float32]
 *          [--attention-backend NAME] [--comm-reps 30] [--json FILE]
 *
 * --threads: per rank (default: the CPUs shared by the ranks on this host, as the engine). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/attn.h"
#include "attn/backends/backends.h"
#include "attn/dcp.h"
#include "attn/kv_cache.h"
#include "base/arena.h"
#include "base/dtype.h"
#include "base/err.h"
#include "dist/comm.h"
#include "engine/dist_exec.h"
#include "setup/ranks.h"
#include "ops/pool.h"

#include "bench_util.h"

#define MAXV 16
#define ROPE 64
#define LORA 512
#define ROW (LORA + ROPE)

/* timed pieces of one rep on one rank */
enum { T_Q, T_ATTN, T_CPU, T_LSE, T_CORR, T_RS, NT };
static const char *const tname[NT] = {"q_allgather",   "attn_wall",   "attn_cpu",
				      "lse_allgather", "lse_correct", "reduce_scatter"};


static float rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return ((float)(*s >> 40) / (float)(1 << 24) - 0.5f) * 2;
}

struct bench {
	struct comm *c;
	const struct attn_backend *be;
	struct pool *pool;
	struct arena scratch;
	int W, r, I, bs, H, Hl, threads;
	enum dtype kvd;
};

/* The buffers of one (context, batch) point. */
struct point {
	struct kv_cache kv;
	int32_t *bt, *qs, *sl, *ll;
	int64_t *slots;
	float *ql, *qg, *out, *lse, *lses, *mine;
	int mb;
};

static void point_free(struct point *p)
{
	if (p->kv.data)
		kv_cache_fini(&p->kv);
	free(p->bt), free(p->qs), free(p->sl), free(p->ll), free(p->slots);
	free(p->ql), free(p->qg), free(p->out), free(p->lse), free(p->lses), free(p->mine);
	memset(p, 0, sizeof *p);
}

/* This rank's shard of B sequences of L tokens, written through the engine's slot mapping. */
static int point_init(struct bench *b, struct point *p, int L, int B, struct err *e)
{
	memset(p, 0, sizeof *p);
	int vbs = b->bs * b->W;
	p->mb = (L + vbs - 1) / vbs; /* virtual blocks per sequence = physical blocks per rank */
	if (kv_cache_init(&p->kv, 1, 1 + B * p->mb, b->bs, LORA, ROPE, b->kvd, e))
		return -1;
	p->bt = malloc(sizeof *p->bt * (size_t)B * p->mb);
	p->qs = malloc(sizeof *p->qs * (size_t)(B + 1));
	p->sl = malloc(sizeof *p->sl * (size_t)B);
	p->ll = malloc(sizeof *p->ll * (size_t)B);
	p->slots = malloc(sizeof *p->slots * (size_t)B);
	p->ql = malloc(sizeof(float) * (size_t)B * b->Hl * ROW);
	p->qg = malloc(sizeof(float) * (size_t)B * b->H * ROW);
	p->out = malloc(sizeof(float) * (size_t)B * b->H * LORA);
	p->lse = malloc(sizeof(float) * (size_t)B * b->H);
	p->lses = malloc(sizeof(float) * (size_t)b->W * B * b->H);
	p->mine = malloc(sizeof(float) * (size_t)B * b->Hl * LORA);
	if (!p->bt || !p->qs || !p->sl || !p->ll || !p->slots || !p->ql || !p->qg || !p->out || !p->lse || !p->lses ||
	    !p->mine)
		return err_set(e, "out of memory for %d sequences of %d tokens", B, L);
	/* pages in reverse order, as after churn */
	for (int i = 0; i < B * p->mb; i++)
		p->bt[i] = B * p->mb - i;
	uint64_t s = 7 + (uint64_t)b->r * 1000003u;
	int64_t written = 0;
	for (int i = 0; i < B; i++) {
		p->qs[i] = i;
		p->sl[i] = L;
		const int32_t *row = p->bt + (size_t)i * p->mb;
		for (int64_t pos = 0; pos < L; pos++) {
			int64_t slot = dcp_slot(row, b->bs, b->W, b->r, b->I, pos);
			if (slot < 0)
				continue;
			void *d = kv_cache_row_ptr(&p->kv, 0, slot);
			for (int k = 0; k < ROW; k++) {
				float x = rnd(&s);
				if (b->kvd == DT_F32)
					((float *)d)[k] = x;
				else
					((uint16_t *)d)[k] = f32_to_bf16(x);
			}
			written++;
		}
		/* the step's own token sits at L - 1 (already written above) */
		p->slots[i] = dcp_slot(row, b->bs, b->W, b->r, b->I, L - 1);
	}
	p->qs[B] = B;
	dcp_local_seq_lens(p->sl, B, b->W, b->r, b->I, p->ll);
	int64_t want = 0;
	for (int i = 0; i < B; i++)
		want += p->ll[i];
	if (written != want)
		return err_set(e, "rank %d: slot mapping wrote %lld rows, local lengths sum to %lld", b->r,
			       (long long)written, (long long)want);
	for (size_t i = 0; i < (size_t)B * b->Hl * ROW; i++)
		p->ql[i] = rnd(&s) * 0.5f;
	return 0;
}

/* The three collectives alone, each after a barrier (no attention in between): t[T_Q],
 * t[T_LSE], t[T_RS]. Cheap, so they get more repeats than the attention. */
static int comm_only(struct bench *b, struct point *p, int B, double *t, struct err *e)
{
	struct comm *c = b->c;
	double t0;
	memset(t, 0, sizeof(double) * NT);
	if (comm_barrier(c, e))
		return -1;
	t0 = mono_now_s();
	if (comm_dcp_allgather_inner(c, p->ql, (size_t)B, (size_t)b->Hl * ROW, p->qg, e))
		return -1;
	t[T_Q] = mono_now_s() - t0;
	if (comm_barrier(c, e))
		return -1;
	t0 = mono_now_s();
	if (comm_dcp_allgather(c, p->lse, (size_t)B * b->H, p->lses, e))
		return -1;
	t[T_LSE] = mono_now_s() - t0;
	if (comm_barrier(c, e))
		return -1;
	t0 = mono_now_s();
	if (comm_dcp_reduce_scatter_inner(c, p->out, (size_t)B, (size_t)b->Hl * LORA, p->mine, e))
		return -1;
	t[T_RS] = mono_now_s() - t0;
	return 0;
}

/* One decode step of one layer, piece by piece; t[NT] gets this rank's times. With D = 1
 * there is no collective (the engine calls none): q is used as is, out is the result. */
static int step(struct bench *b, struct point *p, int B, double *t, struct err *e)
{
	struct comm *c = b->c;
	double t0, c0;
	memset(t, 0, sizeof(double) * NT);
	if (b->W == 1) {
		memcpy(p->qg, p->ql, sizeof(float) * (size_t)B * b->H * ROW);
	} else {
		if (comm_barrier(c, e))
			return -1;
		t0 = mono_now_s();
		if (comm_dcp_allgather_inner(c, p->ql, (size_t)B, (size_t)b->Hl * ROW, p->qg, e))
			return -1;
		t[T_Q] = mono_now_s() - t0;
	}

	if (comm_barrier(c, e))
		return -1;
	struct attn_meta m = {.n_seqs = B,
			      .n_tokens = B,
			      .query_start = p->qs,
			      .seq_lens = p->sl,
			      .block_table = p->bt,
			      .max_blocks = p->mb,
			      .slots = p->slots,
			      .n_decodes = B,
			      .n_decode_tokens = B,
			      .dcp_size = b->W,
			      .dcp_rank = b->r,
			      .dcp_interleave = b->I,
			      .local_seq_lens = p->ll};
	t0 = mono_now_s();
	c0 = proc_cpu_s();
	arena_reset(&b->scratch);
	if (b->be->plan && b->be->plan(&m, b->H, &(struct compute_ctx){.scratch = &b->scratch}, e))
		return -1;
	struct attn_decode_args a = {.meta = &m,
				     .kv = &p->kv,
				     .layer = 0,
				     .n_heads = b->H,
				     .scale = 1.0f / sqrtf(192.0f),
				     .q = p->qg,
				     .out = p->out,
				     .lse = p->lse,
				     .cx = &(struct compute_ctx){.pool = b->pool, .scratch = &b->scratch}};
	b->be->decode(&a);
	t[T_ATTN] = mono_now_s() - t0;
	t[T_CPU] = proc_cpu_s() - c0;

	if (b->W == 1) {
		memcpy(p->mine, p->out, sizeof(float) * (size_t)B * b->H * LORA);
	} else {
		if (comm_barrier(c, e))
			return -1;
		t0 = mono_now_s();
		if (comm_dcp_allgather(c, p->lse, (size_t)B * b->H, p->lses, e))
			return -1;
		t[T_LSE] = mono_now_s() - t0;
		t0 = mono_now_s();
		dcp_lse_correct(p->lses, b->W, B, b->H, b->r, p->out, LORA, NULL);
		t[T_CORR] = mono_now_s() - t0;
		if (comm_barrier(c, e))
			return -1;
		t0 = mono_now_s();
		if (comm_dcp_reduce_scatter_inner(c, p->out, (size_t)B, (size_t)b->Hl * LORA, p->mine, e))
			return -1;
		t[T_RS] = mono_now_s() - t0;
	}
	for (size_t i = 0; i < (size_t)B * b->Hl * LORA; i++)
		if (!isfinite(p->mine[i]))
			return err_set(e, "rank %d: output element %zu is %g", b->r, i, (double)p->mine[i]);
	return 0;
}

/* Median, min and max of v[n] (sorted in place). */
static void summarize(double *v, int n, double out[3])
{
	qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
	out[0] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
	out[1] = v[0];
	out[2] = v[n - 1];
}

/* Runs reps steps (after one untimed) and, with D > 1, creps more rounds of the collectives
 * alone; gathers every rank's times; rank 0 fills res[NT][3] (ms: median, min, max over the
 * repeats of the max over ranks; CPU: of the mean over ranks). The collectives' statistics
 * cover the steps' and the extra rounds' calls. */
static int measure(struct bench *b, struct point *p, int B, int reps, int creps, double res[NT][3], struct err *e)
{
	double t[NT];
	if (step(b, p, B, t, e))
		return -1;
	if (b->W == 1)
		creps = 0;
	int R = reps + creps;
	size_t n = (size_t)R * NT;
	float *mine = malloc(sizeof(float) * n), *all = malloc(sizeof(float) * n * (size_t)b->W);
	double *v = malloc(sizeof(double) * (size_t)R);
	int rc = -1;
	if (!mine || !all || !v) {
		err_set(e, "out of memory");
		goto out;
	}
	for (int k = 0; k < R; k++) {
		if (k < reps ? step(b, p, B, t, e) : comm_only(b, p, B, t, e))
			goto out;
		for (int j = 0; j < NT; j++)
			mine[k * NT + j] = (float)t[j];
	}
	if (b->W > 1) {
		if (comm_dcp_allgather(b->c, mine, n, all, e))
			goto out;
	} else {
		memcpy(all, mine, sizeof(float) * n);
	}
	for (int j = 0; j < NT; j++) {
		int is_comm = j == T_Q || j == T_LSE || j == T_RS, nk = is_comm ? R : reps;
		for (int k = 0; k < nk; k++) {
			double agg = 0;
			for (int w = 0; w < b->W; w++) {
				double x = all[(size_t)w * n + (size_t)k * NT + j];
				if (j == T_CPU)
					agg += x / b->W;
				else if (x > agg)
					agg = x;
			}
			v[k] = agg * 1e3;
		}
		summarize(v, nk, res[j]);
	}
	rc = 0;
out:
	free(mine), free(all), free(v);
	return rc;
}

int main(int argc, char **argv)
{
	int cv[MAXV] = {4096, 16384, 65536}, nc = 3, bv[MAXV] = {1, 4}, nb = 2;
	int reps = 5, creps = 30, bs = 16, I = 1, H = 128, threads = 0;
	const char *json = NULL, *backend = "FLASHMLA", *kvdt = "bfloat16";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "dcp_decode: %s needs a value\n", a);
			return 2;
		}
		i++;
		int bad = 0;
		if (!strcmp(a, "--ctx"))
			bad = bench_list_parse(v, cv, &nc, MAXV, 1 << 22);
		else if (!strcmp(a, "--batch"))
			bad = bench_list_parse(v, bv, &nb, MAXV, 1 << 22);
		else if (!strcmp(a, "--reps"))
			bad = (reps = atoi(v)) < 1;
		else if (!strcmp(a, "--comm-reps"))
			bad = (creps = atoi(v)) < 0;
		else if (!strcmp(a, "--block-size"))
			bad = (bs = atoi(v)) < 1;
		else if (!strcmp(a, "--interleave"))
			bad = (I = atoi(v)) < 1;
		else if (!strcmp(a, "--heads"))
			bad = (H = atoi(v)) < 1;
		else if (!strcmp(a, "--threads"))
			bad = (threads = atoi(v)) < 0;
		else if (!strcmp(a, "--kv-dtype")) {
			kvdt = v;
			bad = strcmp(v, "bfloat16") && strcmp(v, "float32");
		} else if (!strcmp(a, "--attention-backend"))
			backend = v;
		else if (!strcmp(a, "--json"))
			json = v;
		else
			bad = 1;
		if (bad) {
			fprintf(stderr, "dcp_decode: bad option %s %s\n", a, v);
			return 2;
		}
	}
	struct err e = {{0}};
	struct comm c;
	int W = 1;
	if (comm_under_launcher()) {
		/* tp = dcp = the world: one DCP group, as `-tp W -dcp W` */
		const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
		W = ws ? atoi(ws) : 1;
	}
	if (W < 1 || comm_init(&c, W, W, &e)) {
		fprintf(stderr, "dcp_decode: %s\n", W < 1 ? "bad world size" : e.msg);
		return 1;
	}
	struct bench b = {.c = &c,
			  .W = c.dcp_size,
			  .r = c.dcp_rank,
			  .I = I,
			  .bs = bs,
			  .H = H,
			  .kvd = strcmp(kvdt, "float32") ? DT_BF16 : DT_F32};
	json_t *rows = json_array();
	int rc = 1;
	b.be = attn_backend_by_name(backend);
	if (!b.be || !b.be->returns_lse) {
		err_set(&e, "attention backend '%s' is unknown or returns no lse", backend);
		goto fail;
	}
	if (comm_config_check(b.W, b.W, H, I, bs, &e))
		goto fail;
	b.Hl = H / b.W;
	b.threads = ranks_threads(threads, &c);
	int bmax = 1;
	for (int i = 0; i < nb; i++)
		bmax = bv[i] > bmax ? bv[i] : bmax;
	if (pool_new(b.threads, &b.pool, &e))
		goto fail;
	if (arena_init(&b.scratch,
		       attn_decode_scratch_bytes(b.threads, bmax, bmax, H, LORA, ROPE) + ((size_t)1 << 20))) {
		err_set(&e, "out of memory for the attention scratch");
		goto fail;
	}
	if (c.world_rank == 0) {
		printf("dcp_decode: D = %d ranks (tp = dcp = %d), %d heads (%d per rank), backend %s, %s KV, "
		       "block %d, interleave %d, %d threads per rank; ms, median [min..max] of %d steps "
		       "(collectives: + %d rounds alone)\n",
		       b.W, b.W, H, b.Hl, b.be->name, dtype_name(b.kvd), bs, I, b.threads, reps, b.W > 1 ? creps : 0);
		printf("%2s %6s %3s %8s | %22s %9s | %20s %20s %20s | %9s\n", "D", "ctx", "B", "local", "attn wall",
		       "attn cpu", "q all-gather", "lse all-gather", "reduce-scatter", "comm sum");
		fflush(stdout);
	}
	for (int ci = 0; ci < nc; ci++)
		for (int bi = 0; bi < nb; bi++) {
			int L = cv[ci], B = bv[bi];
			struct point p;
			double res[NT][3];
			int bad = point_init(&b, &p, L, B, &e) || measure(&b, &p, B, reps, creps, res, &e);
			point_free(&p);
			if (bad)
				goto fail;
			if (c.world_rank != 0)
				continue;
			double comm = res[T_Q][0] + res[T_LSE][0] + res[T_RS][0];
			printf("%2d %6d %3d %8d | %7.2f [%6.2f..%6.2f] %9.2f | ", b.W, L, B,
			       dcp_local_seq_len(L, b.W, 0, I), res[T_ATTN][0], res[T_ATTN][1], res[T_ATTN][2],
			       res[T_CPU][0]);
			if (b.W == 1)
				printf("%20s %20s %20s | %9s\n", "-", "-", "-", "-");
			else
				printf("%6.3f [%5.3f..%5.3f] %6.3f [%5.3f..%5.3f] %6.3f [%5.3f..%5.3f] | %9.3f\n",
				       res[T_Q][0], res[T_Q][1], res[T_Q][2], res[T_LSE][0], res[T_LSE][1],
				       res[T_LSE][2], res[T_RS][0], res[T_RS][1], res[T_RS][2], comm);
			fflush(stdout);
			json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s}", "D", b.W, "ctx", L,
					      "batch", B, "heads", H, "threads_per_rank", b.threads, "local_len_rank0",
					      dcp_local_seq_len(L, b.W, 0, I), "reps", reps, "comm_reps",
					      b.W > 1 ? reps + creps : 0, "backend", b.be->name, "kv_dtype",
					      dtype_name(b.kvd));
			for (int j = 0; j < NT; j++)
				json_object_set_new(o, tname[j],
						    json_pack("{s:f, s:f, s:f}", "median_ms", res[j][0], "min_ms",
							      res[j][1], "max_ms", res[j][2]));
			json_object_set_new(o, "q_bytes", json_integer((json_int_t)B * H * ROW * 4));
			json_object_set_new(o, "out_bytes", json_integer((json_int_t)B * H * LORA * 4));
			json_array_append_new(rows, o);
		}
	if (c.world_rank == 0 && json && json_dump_file(rows, json, JSON_INDENT(1))) {
		err_set(&e, "cannot write %s", json);
		goto fail;
	}
	rc = 0;
fail:
	if (rc)
		fprintf(stderr, "dcp_decode: rank %d: %s\n", c.world_rank, e.msg);
	json_decref(rows);
	arena_fini(&b.scratch);
	pool_free(b.pool);
	if (rc && c.world_size > 1)
		comm_abort(&c, 1);
	comm_fini(&c);
	return rc;
}
