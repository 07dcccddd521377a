#include "model_v4/v4_indexer.h"

#include <math.h>
#include <stdlib.h>

#include "base/err.h"
#include "model_v4/v4_kernels.h"
#include "model_v4/v4_quant.h"
#include "ops/pool.h"
#include "ops/vec.h"

void v4_index_query(const struct v4_rope *r, int n_heads, int di, long pos, int fp4_sim, float *q)
{
	for (int h = 0; h < n_heads; h++) {
		float *qh = q + (size_t)h * (size_t)di;
		v4_rope_apply(r, qh, di, pos, 0);
		ops_hadamard(qh, di);
		if (fp4_sim)
			v4_fp4_sim(qh, di, 32);
	}
}

void v4_index_weights(int n_heads, int di, float *w)
{
	double s = 1 / sqrt((double)di) / sqrt((double)n_heads);
	for (int h = 0; h < n_heads; h++)
		w[h] = (float)(w[h] * s);
}

double v4_index_score(int n_heads, int di, const float *q, const float *w, const float *k)
{
	double sc = 0;
	for (int h = 0; h < n_heads; h++) {
		double dot = 0;
		for (int i = 0; i < di; i++)
			dot += (double)q[(size_t)h * (size_t)di + (size_t)i] * k[i];
		sc += (double)w[h] * (dot > 0 ? dot : 0);
	}
	return sc;
}

/* heap order: the worst kept entry at the root (lower score, or equal score and higher index) */
struct cand {
	double s;
	int32_t e;
};

static int worse(struct cand a, struct cand b) { return a.s < b.s || (a.s == b.s && a.e > b.e); }

static void sift_down(struct cand *h, int n, int i)
{
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && worse(h[l], h[m]))
			m = l;
		if (r < n && worse(h[r], h[m]))
			m = r;
		if (m == i)
			return;
		struct cand t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static int by_entry(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

int v4_index_select(int n_heads, int di, const float *q, const float *w, v4_index_key_fn key, void *ctx, int visible,
		    int topk, int32_t *sel)
{
	int k = topk < visible ? topk : visible, n = 0;
	if (k <= 0)
		return 0;
	struct cand *h = malloc((size_t)k * sizeof *h);
	float *buf = malloc((size_t)di * sizeof *buf);
	CHECK(h && buf);
	for (int e = 0; e < visible; e++) { /* a min-heap of the k best so far */
		struct cand c = {v4_index_score(n_heads, di, q, w, key(ctx, e, buf)), e};
		if (n < k) {
			h[n++] = c;
			for (int i = n / 2 - 1; n == k && i >= 0; i--)
				sift_down(h, n, i);
		} else if (worse(h[0], c)) {
			h[0] = c;
			sift_down(h, n, 0);
		}
	}
	for (int i = 0; i < k; i++)
		sel[i] = h[i].e;
	free(h);
	free(buf);
	qsort(sel, (size_t)k, sizeof *sel, by_entry);
	return k;
}

struct scores_job {
	enum ops_level lv;
	int H, di;
	const float *q, *w;
	const struct v4k_keys *k;
	long visible;
	double *s;
};

static void scores_range(void *ctx, int t0, int t1, int tid)
{
	const struct scores_job *j = ctx;
	long e0 = (long)t0 * V4K_KB, e1 = (long)t1 * V4K_KB < j->visible ? (long)t1 * V4K_KB : j->visible;
	v4k_index_scores(j->lv, j->H, j->di, j->q, j->w, j->k, e0, e1, j->s + e0);
}

int v4_index_select_fast(struct pool *pool, int n_heads, int di, const float *q, const float *w,
			 const float *const *keys, int packed, int visible, int topk, double *scores, int32_t *sel)
{
	int k = topk < visible ? topk : visible, n = 0;
	if (k <= 0)
		return 0;
	struct v4k_keys kk = {keys, packed};
	struct scores_job j = {ops_level_best(), n_heads, di, q, w, &kk, visible, scores};
	pool_for(pool, (visible + V4K_KB - 1) / V4K_KB, 16, scores_range, &j);
	/* the step's path: the published index_topk (512, 1024) fit the stack */
	struct cand stack_h[2048], *h = k <= 2048 ? stack_h : malloc((size_t)k * sizeof *h);
	CHECK(h);
	for (int e = 0; e < visible; e++) { /* as v4_index_select */
		struct cand c = {scores[e], e};
		if (n < k) {
			h[n++] = c;
			for (int i = n / 2 - 1; n == k && i >= 0; i--)
				sift_down(h, n, i);
		} else if (worse(h[0], c)) {
			h[0] = c;
			sift_down(h, n, 0);
		}
	}
	for (int i = 0; i < k; i++)
		sel[i] = h[i].e;
	if (h != stack_h)
		free(h);
	qsort(sel, (size_t)k, sizeof *sel, by_entry);
	return k;
}

int v4_index_merge(int W, const struct v4_cand *cand, size_t stride, int k, int32_t *sel)
{
	struct cand stack_h[2048], *h = k <= 2048 ? stack_h : malloc((size_t)k * sizeof *h);
	CHECK(h);
	int n = 0;
	for (int r = 0; r < W; r++)
		for (int i = 0; i < k; i++) {
			const struct v4_cand *x = cand + (size_t)r * stride + (size_t)i;
			if (x->e < 0)
				continue;
			struct cand c = {x->s, x->e};
			if (n < k) {
				h[n++] = c;
				for (int j = n / 2 - 1; n == k && j >= 0; j--)
					sift_down(h, n, j);
			} else if (worse(h[0], c)) {
				h[0] = c;
				sift_down(h, n, 0);
			}
		}
	for (int i = 0; i < n; i++)
		sel[i] = h[i].e;
	if (h != stack_h)
		free(h);
	qsort(sel, (size_t)n, sizeof *sel, by_entry);
	return n;
}
