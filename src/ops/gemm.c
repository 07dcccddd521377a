/* The GEMM driver: threads take row panels of every job of a call; each job's activations are
 * prepared once per call for what its weight format's kernels read (ops/wformat.h: x as bf16
 * rows for load-time packed weights, int8 groups for W8A8), then each panel runs its format's
 * kernel for the level. No per-format code here: the format table holds it. */
#include "ops/gemm_internal.h"

#include <stdatomic.h>
#include <string.h>

#include "base/err.h"
#include "ops/pool.h"
#include "ops/prepack.h"
#include "ops/scratch.h"
#include "ops/vec.h"
#include "ops/wformat.h"

#define PANEL GEMM_PANEL
#define MAX_JOBS 512

struct gemm_ctx {
	enum ops_level lvl;
	/* Threads take panels dynamically (costs differ): even threads from the front of the item
	 * list, odd ones from the back, so a call mixing memory-bound items (MoE experts with 1-3
	 * tokens) and compute-bound ones (the shared experts with every token, listed last) runs
	 * both kinds at once instead of both threads stalling on DRAM together. `claimed`
	 * counts the items taken from either end, so the two ends never overlap. */
	atomic_int claimed, front, back;
	const struct gemm_job *jobs;
	int n_jobs;
	int first_item[MAX_JOBS + 1]; /* prefix sums of panels per job */
	const struct wformat *fmt[MAX_JOBS];
	/* each job's activations as its kernels read them (NULL: j->x as it is), prepared once
	 * per call: the kind, and the bytes */
	const struct wact *wact[MAX_JOBS];
	const void *act[MAX_JOBS];
	/* the preparations to do: job index per preparation, prefix sums of their tokens */
	int n_prep, prep_job[MAX_JOBS], prep_first[MAX_JOBS + 1];
};

/* rows [r0, r1) of job ji, by its format's kernel for the level; returns whether the kernel
 * rounded them (gemm_job.round_bf16) */
static int gemm_panel(const struct gemm_ctx *g, int ji, int r0, int r1)
{
	return g->fmt[ji]->panel[g->lvl](g->lvl, &g->jobs[ji], g->act[ji], r0, r1);
}

/* Rows per work item: few-token jobs are bandwidth-bound and stream longer contiguous runs
 * in bigger items (measured 5-15% faster at 256 rows); compute-bound ones keep panels that
 * stay in L2 while every token tile passes over them. */
static int job_panel(enum ops_level lvl, const struct gemm_job *j)
{
	/* prepacked: a chunk is reused across token tiles whatever the item size, so items only
	 * set how often a thread's stream jumps (a cold start each time): 256 rows measured
	 * 1.05-1.1x 64 at 6-12 tokens (MoE experts at batch 64), no worse elsewhere */
	if (lvl >= OPS_AVX512_BF16 && j->w->packed && j->w->packed_kind == PREPACK_KIND_DP &&
	    (j->x_bf16 || j->act_fp8))
		return 4 * PANEL;
	return j->n <= 3 ? 4 * PANEL : PANEL;
}

/* rows [r0, r1) of every token of y, once final (gemm_job.round_bf16) */
static void round_rows(const struct gemm_job *j, int r0, int r1)
{
	if (!j->round_bf16)
		return;
	for (int t = 0; t < j->n; t++)
		ops_round_bf16(j->y + (size_t)t * (size_t)j->ldy + r0, r1 - r0);
}

static void gemm_items(void *arg, int begin, int end, int tid)
{
	struct gemm_ctx *g = arg;
	int total = g->first_item[g->n_jobs];
	for (;;) {
		if (atomic_fetch_add_explicit(&g->claimed, 1, memory_order_relaxed) >= total)
			break;
		int it = (tid & 1) ? total - 1 - atomic_fetch_add_explicit(&g->back, 1, memory_order_relaxed)
				   : atomic_fetch_add_explicit(&g->front, 1, memory_order_relaxed);
		/* binary search of the job holding item `it` */
		int lo = 0, hi = g->n_jobs - 1;
		while (lo < hi) {
			int mid = (lo + hi + 1) / 2;
			if (g->first_item[mid] <= it)
				lo = mid;
			else
				hi = mid - 1;
		}
		const struct gemm_job *j = &g->jobs[lo];
		int r0 = (it - g->first_item[lo]) * job_panel(g->lvl, j);
		int r1 = r0 + job_panel(g->lvl, j) < j->w->rows ? r0 + job_panel(g->lvl, j) : j->w->rows;
		if (!gemm_panel(g, lo, r0, r1))
			round_rows(j, r0, r1);
	}
}

/* A call's activations are prepared (bf16 rows, int8 groups) on the calling thread up to
 * CONVERT_SERIAL_ELEMS values (~30 us; a pool wake-up measured 70-80 us per call on a shared
 * 2-vCPU machine), over the pool beyond. */
#define CONVERT_SERIAL_ELEMS ((size_t)1 << 19)

/* job i reads job i - 1's x, prepared already (off[i - 1] set: the MoE gate and up, listed
 * together); only the neighbour is compared, as a call can hold hundreds of jobs */
static bool shares_prev_x(const struct gemm_job *jobs, const size_t *off, int i)
{
	if (i == 0 || off[i - 1] == SIZE_MAX)
		return false;
	const struct gemm_job *pj = &jobs[i - 1], *j = &jobs[i];
	return pj->x == j->x && pj->ldx == j->ldx && pj->n >= j->n && pj->w->cols == j->w->cols;
}

/* fn over the tokens of a call's preparations: on this thread when they are small (a decode
 * step's: waking the pool costs more), else over the pool */
static void over_tokens(struct pool *p, int tokens, size_t elems, void (*fn)(void *, int, int, int),
			struct gemm_ctx *g)
{
	if (elems <= CONVERT_SERIAL_ELEMS) {
		fn(g, 0, tokens, 0);
		return;
	}
	int nt = p ? pool_size(p) : 1;
	pool_for(p, tokens, (tokens + 2 * nt - 1) / (2 * nt), fn, g);
}

/* tokens [begin, end) of all preparations (prefix sums prep_first) → their jobs' act */
static void prepare_tokens(void *arg, int begin, int end, int tid)
{
	(void)tid;
	const struct gemm_ctx *g = arg;
	int c = 0;
	for (int t = begin; t < end;) {
		while (g->prep_first[c + 1] <= t)
			c++;
		int ji = g->prep_job[c];
		int t0 = t - g->prep_first[c],
		    t1 = (end < g->prep_first[c + 1] ? end : g->prep_first[c + 1]) - g->prep_first[c];
		g->wact[ji]->fill(g->lvl, &g->jobs[ji], t0, t1, (void *)g->act[ji]);
		t += t1 - t0;
	}
}

/* Each job's activations as its format's kernels want them (wformat.act), prepared once per
 * call (jobs with the same x and kind share one), into the calling thread's scratch. Without
 * memory, the jobs' panels read x as it is. */
static void prepare_act(struct gemm_ctx *g, struct pool *p)
{
	size_t total = 0, values = 0, off[MAX_JOBS];
	g->n_prep = 0;
	g->prep_first[0] = 0;
	for (int i = 0; i < g->n_jobs; i++) {
		const struct gemm_job *j = &g->jobs[i];
		g->act[i] = NULL;
		off[i] = SIZE_MAX;
		g->wact[i] = g->fmt[i]->act && j->n > 0 && j->w->rows > 0 ? g->fmt[i]->act(g->lvl, j) : NULL;
		if (!g->wact[i])
			continue;
		if (shares_prev_x(g->jobs, off, i) && g->wact[i - 1] == g->wact[i]) {
			off[i] = off[i - 1];
			continue;
		}
		off[i] = total;
		total += (g->wact[i]->bytes(g->lvl, j) + 63) / 64 * 64;
		values += (size_t)j->n * (size_t)j->w->cols;
		g->prep_job[g->n_prep] = i;
		g->prep_first[g->n_prep + 1] = g->prep_first[g->n_prep] + j->n;
		g->n_prep++;
	}
	if (!g->n_prep)
		return;
	char *buf = ops_scratch(OPS_SCRATCH_ACT, total);
	if (!buf)
		return;
	for (int i = 0; i < g->n_jobs; i++)
		if (off[i] != SIZE_MAX)
			g->act[i] = buf + off[i];
	over_tokens(p, g->prep_first[g->n_prep], values, prepare_tokens, g);
}

void ops_gemm_multi_at(enum ops_level lvl, struct pool *p, int n_jobs, const struct gemm_job *jobs)
{
	while (n_jobs > 0) {
		struct gemm_ctx g;
		g.lvl = lvl > ops_level_best() ? ops_level_best() : lvl;
		g.jobs = jobs;
		g.n_jobs = n_jobs < MAX_JOBS ? n_jobs : MAX_JOBS;
		g.first_item[0] = 0;
		for (int i = 0; i < g.n_jobs; i++) {
			const struct gemm_job *j = &jobs[i];
			g.fmt[i] = wformat_of(j->w->dtype);
			CHECK(g.fmt[i] && "unsupported weight dtype");
			int np = (j->n > 0 && j->w->rows > 0)
					 ? (j->w->rows + job_panel(g.lvl, j) - 1) / job_panel(g.lvl, j)
					 : 0;
			g.first_item[i + 1] = g.first_item[i] + np;
		}
		prepare_act(&g, p);
		atomic_init(&g.claimed, 0);
		atomic_init(&g.front, 0);
		atomic_init(&g.back, 0);
		int items = g.first_item[g.n_jobs];
		if (items > 0) {
			int nt = p ? pool_size(p) : 1;
			pool_for(p, items < nt ? items : nt, 1, gemm_items, &g);
		}
		jobs += g.n_jobs;
		n_jobs -= g.n_jobs;
	}
}

void ops_gemm_multi(struct pool *p, int n_jobs, const struct gemm_job *jobs)
{
	ops_gemm_multi_at(ops_level_best(), p, n_jobs, jobs);
}

void ops_gemm(struct pool *p, const struct wmat *w, const float *x, int ldx, int n, float *y, int ldy)
{
	struct gemm_job j = {.w = w, .x = x, .y = y, .n = n, .ldx = ldx, .ldy = ldy};
	ops_gemm_multi(p, 1, &j);
}

size_t prepack_x_elems(int n, int cols)
{
	/* the AMX kernel reads whole 16-row tiles past 16 tokens */
	int rows = n <= 0 ? 0 : n <= 16 ? n : (n + 15) / 16 * 16;
	return (size_t)rows * (size_t)gemm_prepacked_ldxb(cols);
}

int prepack_x_ld(int cols) { return gemm_prepacked_ldxb(cols); }

void prepack_gemm_1t(const struct gemm_job *j, uint16_t *xb)
{
	CHECK(ops_level_best() >= OPS_AVX512_BF16 && j->w->packed && j->x_bf16);
	if (j->n > 0 && j->w->rows > 0 && j->w->cols > 0)
		gemm_x_to_bf16(j->x, j->ldx, 0, j->n, j->w->cols, xb, gemm_prepacked_ldxb(j->w->cols));
	prepack_gemm_1t_xb(j, xb);
}

void prepack_gemm_1t_xb(const struct gemm_job *j, const uint16_t *xb)
{
	CHECK(ops_level_best() >= OPS_AVX512_BF16 && j->w->packed);
	if (j->n <= 0 || j->w->rows <= 0)
		return;
	if (j->w->cols <= 0) { /* nothing to sum: y = 0 (or unchanged) */
		for (int t = 0; t < j->n && !j->accumulate; t++)
			memset(j->y + (size_t)t * (size_t)j->ldy, 0, sizeof(float) * (size_t)j->w->rows);
		round_rows(j, 0, j->w->rows);
		return;
	}
	if (!gemm_panel_prepacked(ops_level_best(), j, xb, gemm_prepacked_ldxb(j->w->cols), 0, j->w->rows))
		round_rows(j, 0, j->w->rows);
}
