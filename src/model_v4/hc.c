#include "model_v4/hc.h"

#include <math.h>
#include <stddef.h>

#include "base/err.h"

static double sigmoid(double z) { return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)); }

void v4_hc_mixes(const struct v4_hc *h, int head, int n, const float *x, float *mixes)
{
	int m = head ? h->hc : (2 + h->hc) * h->hc;
	size_t len = (size_t)h->hc * (size_t)h->dim;
	for (int t = 0; t < n; t++) {
		const float *f = x + (size_t)t * len;
		double ss = 0;
		for (size_t i = 0; i < len; i++)
			ss += (double)f[i] * f[i];
		double r = 1 / sqrt(ss / (double)len + h->norm_eps);
		for (int o = 0; o < m; o++) {
			const float *w = h->fn + (size_t)o * len;
			double acc = 0;
			for (size_t i = 0; i < len; i++)
				acc += (double)w[i] * f[i];
			mixes[(size_t)t * (size_t)m + (size_t)o] = (float)(acc * r);
		}
	}
}

/* Divides every row (rows != 0) or every column of c [hc, hc] by its sum + eps. */
static void normalise(double c[V4_HC_MAX][V4_HC_MAX], int hc, double eps, int rows)
{
	for (int a = 0; a < hc; a++) {
		double z = eps;
		for (int b = 0; b < hc; b++)
			z += rows ? c[a][b] : c[b][a];
		for (int b = 0; b < hc; b++)
			*(rows ? &c[a][b] : &c[b][a]) /= z;
	}
}

void v4_hc_sinkhorn(int hc, int iters, float eps, float *comb)
{
	double c[V4_HC_MAX][V4_HC_MAX];
	CHECK(hc <= V4_HC_MAX);
	for (int j = 0; j < hc; j++) { /* softmax over each row, + eps */
		double m = comb[j * hc], z = 0;
		for (int k = 1; k < hc; k++)
			m = fmax(m, comb[j * hc + k]);
		for (int k = 0; k < hc; k++)
			z += c[j][k] = exp(comb[j * hc + k] - m);
		for (int k = 0; k < hc; k++)
			c[j][k] = c[j][k] / z + eps;
	}
	for (int it = 0; it < iters; it++) {
		if (it > 0) /* the first round normalises the columns only */
			normalise(c, hc, eps, 1);
		normalise(c, hc, eps, 0);
	}
	for (int j = 0; j < hc; j++)
		for (int k = 0; k < hc; k++)
			comb[j * hc + k] = (float)c[j][k];
}

void v4_hc_split(const struct v4_hc *h, int n, const float *mixes, float *pre, float *post, float *comb)
{
	int hc = h->hc, m = (2 + hc) * hc;
	const float *s = h->scale, *b = h->base;
	for (int t = 0; t < n; t++) {
		const float *mx = mixes + (size_t)t * (size_t)m;
		float *cb = comb + (size_t)t * (size_t)(hc * hc);
		for (int j = 0; j < hc; j++) {
			pre[t * hc + j] = (float)(sigmoid((double)mx[j] * s[0] + b[j]) + h->hc_eps);
			post[t * hc + j] = (float)(2 * sigmoid((double)mx[hc + j] * s[1] + b[hc + j]));
		}
		for (int i = 0; i < hc * hc; i++)
			cb[i] = (float)((double)mx[2 * hc + i] * s[2] + b[2 * hc + i]);
		v4_hc_sinkhorn(hc, h->iters, h->hc_eps, cb);
	}
}

void v4_hc_collapse(int hc, int dim, int n, const float *pre, const float *x, float *y)
{
	for (int t = 0; t < n; t++) {
		const float *xt = x + (size_t)t * (size_t)hc * (size_t)dim;
		float *yt = y + (size_t)t * (size_t)dim;
		for (int i = 0; i < dim; i++) {
			double acc = 0;
			for (int j = 0; j < hc; j++)
				acc += (double)pre[t * hc + j] * xt[(size_t)j * (size_t)dim + (size_t)i];
			yt[i] = (float)acc;
		}
	}
}

void v4_hc_pre(const struct v4_hc *h, int n, const float *x, float *y, float *post, float *comb)
{
	int hc = h->hc;
	CHECK(hc <= V4_HC_MAX);
	float mixes[(2 + V4_HC_MAX) * V4_HC_MAX], pre[V4_HC_MAX];
	for (int t = 0; t < n; t++) { /* one token at a time: no scratch beyond the stack */
		const float *xt = x + (size_t)t * (size_t)hc * (size_t)h->dim;
		v4_hc_mixes(h, 0, 1, xt, mixes);
		v4_hc_split(h, 1, mixes, pre, post + (size_t)t * (size_t)hc, comb + (size_t)t * (size_t)(hc * hc));
		v4_hc_collapse(hc, h->dim, 1, pre, xt, y + (size_t)t * (size_t)h->dim);
	}
}

void v4_hc_post(int hc, int dim, int n, const float *out, const float *x, const float *post, const float *comb,
		float *xo)
{
	double acc[V4_HC_MAX];
	CHECK(hc <= V4_HC_MAX);
	for (int t = 0; t < n; t++) {
		size_t base = (size_t)t * (size_t)hc * (size_t)dim;
		const float *cb = comb + (size_t)t * (size_t)(hc * hc), *pt = post + (size_t)t * (size_t)hc;
		for (int i = 0; i < dim; i++) { /* all of column i read before any is written: xo may be x */
			for (int k = 0; k < hc; k++) {
				acc[k] = (double)pt[k] * out[(size_t)t * (size_t)dim + (size_t)i];
				for (int j = 0; j < hc; j++)
					acc[k] += (double)cb[j * hc + k] *
						  x[base + (size_t)j * (size_t)dim + (size_t)i];
			}
			for (int k = 0; k < hc; k++)
				xo[base + (size_t)k * (size_t)dim + (size_t)i] = (float)acc[k];
		}
	}
}

void v4_hc_head(const struct v4_hc *h, int n, const float *x, float *y)
{
	int hc = h->hc;
	CHECK(hc <= V4_HC_MAX);
	float mixes[V4_HC_MAX], pre[V4_HC_MAX];
	for (int t = 0; t < n; t++) {
		const float *xt = x + (size_t)t * (size_t)hc * (size_t)h->dim;
		v4_hc_mixes(h, 1, 1, xt, mixes);
		for (int j = 0; j < hc; j++)
			pre[j] = (float)(sigmoid((double)mixes[j] * h->scale[0] + h->base[j]) + h->hc_eps);
		v4_hc_collapse(hc, h->dim, 1, pre, xt, y + (size_t)t * (size_t)h->dim);
	}
}
