#include "model_v4/v4_attn.h"

#include <math.h>
#include <stdlib.h>

#include "base/err.h"
#include "model_v4/v4_kernels.h"
#include "model_v4/v4_quant.h"
#include "ops/pool.h"

void v4_rmsnorm_rows(float *x, int n, int d, const float *w, float eps)
{
	for (int t = 0; t < n; t++) {
		float *r = x + (size_t)t * (size_t)d;
		double ss = 0;
		for (int i = 0; i < d; i++)
			ss += (double)r[i] * r[i];
		double rs = 1 / sqrt(ss / d + eps);
		for (int i = 0; i < d; i++)
			r[i] = (float)(w ? r[i] * rs * w[i] : r[i] * rs);
	}
}

void v4_attn_prep_q(const struct v4_rope *r, int n_heads, int head_dim, float eps, long pos, float *q)
{
	v4_rmsnorm_rows(q, n_heads, head_dim, NULL, eps);
	for (int h = 0; h < n_heads; h++)
		v4_rope_apply(r, q + (size_t)h * (size_t)head_dim, head_dim, pos, 0);
}

void v4_attn_prep_kv(const struct v4_rope *r, int head_dim, long pos, int kv_quant, float *kv)
{
	v4_rope_apply(r, kv, head_dim, pos, 0);
	if (kv_quant)
		v4_fp8_sim(kv, head_dim - r->dim, 64);
}

void v4_attn_one(int n_heads, int head_dim, float scale, const float *q, const float *const *kv, int n_kv,
		 const float *sink, float *o, float *lse)
{
	double stack_s[512], *s = n_kv <= 512 ? stack_s : malloc((size_t)n_kv * sizeof *s);
	double *acc = malloc((size_t)head_dim * sizeof *acc);
	CHECK(s && acc);
	for (int h = 0; h < n_heads; h++) {
		const float *qh = q + (size_t)h * (size_t)head_dim;
		float *oh = o + (size_t)h * (size_t)head_dim;
		double m = sink ? sink[h] : -INFINITY;
		for (int j = 0; j < n_kv; j++) {
			double dot = 0;
			for (int i = 0; i < head_dim; i++)
				dot += (double)qh[i] * kv[j][i];
			s[j] = dot * scale;
			m = fmax(m, s[j]);
		}
		for (int i = 0; i < head_dim; i++)
			acc[i] = 0;
		if (m == -INFINITY) { /* no keys, no sink: nothing to attend */
			for (int i = 0; i < head_dim; i++)
				oh[i] = 0;
			lse[h] = -INFINITY;
			continue;
		}
		double z = sink ? exp(sink[h] - m) : 0;
		for (int j = 0; j < n_kv; j++) {
			double p = exp(s[j] - m);
			z += p;
			for (int i = 0; i < head_dim; i++)
				acc[i] += p * kv[j][i];
		}
		for (int i = 0; i < head_dim; i++)
			oh[i] = (float)(acc[i] / z);
		lse[h] = (float)(m + log(z));
	}
	if (s != stack_s)
		free(s);
	free(acc);
}

struct heads_job {
	enum ops_level lv;
	int hd, n_kv;
	float scale;
	const float *q, *const *kv, *sink;
	float *o, *lse;
	double *scratch;
};

size_t v4_attn_fast_scratch(int n_heads, int head_dim, int n_kv)
{
	return (size_t)n_heads * ((size_t)n_kv + 2 * (size_t)head_dim);
}

static void heads_range(void *ctx, int h0, int h1, int tid)
{
	const struct heads_job *j = ctx;
	/* v4k_attn_heads' scratch, at most (h1 - h0) (n_kv + 2 hd) doubles: the range's own */
	double *s = j->scratch + (size_t)h0 * ((size_t)j->n_kv + 2 * (size_t)j->hd);
	v4k_attn_heads(j->lv, h0, h1, j->hd, j->scale, j->q, j->kv, j->n_kv, j->sink, j->o, j->lse, s);
}

void v4_attn_fast(struct pool *pool, int n_heads, int head_dim, float scale, const float *q, const float *const *kv,
		  int n_kv, const float *sink, float *o, float *lse, double *scratch)
{
	struct heads_job j = {ops_level_best(), head_dim, n_kv, scale, q, kv, sink, o, lse, scratch};
	pool_for(pool, n_heads, 4, heads_range, &j); /* whole groups of 4 heads (v4_kernels.h) */
}

void v4_attn_add_sink(int n_heads, int dv, const float *sink, float *o, float *lse)
{
	for (int h = 0; h < n_heads; h++) {
		double l = lse[h], sk = sink[h], m = fmax(l, sk);
		double total = m + log(exp(l - m) + exp(sk - m)); /* l = -inf: the sink alone */
		double keep = l == -INFINITY ? 0 : exp(l - total);
		for (int i = 0; i < dv; i++)
			o[(size_t)h * (size_t)dv + (size_t)i] = (float)(o[(size_t)h * (size_t)dv + (size_t)i] * keep);
		lse[h] = (float)total;
	}
}

void v4_attn_unrope(const struct v4_rope *r, int n_heads, int head_dim, float *o, long pos)
{
	for (int h = 0; h < n_heads; h++)
		v4_rope_apply(r, o + (size_t)h * (size_t)head_dim, head_dim, pos, 1);
}
