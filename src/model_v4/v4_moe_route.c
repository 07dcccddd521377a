#include "model_v4/v4_moe_route.h"

#include <math.h>

#define V4_ROUTE_MAX_K 64

float v4_sqrtsoftplus(float z)
{
	double x = z;
	return (float)sqrt(x > 20 ? x : log1p(exp(x)));
}

/* The k best of v [n] (ties to the lower index), ascending. */
static void top_k(const double *v, int n, int k, int32_t *ids)
{
	int cnt = 0;
	for (int i = 0; i < n; i++) { /* insertion into the best-so-far, kept by (value desc, index asc) */
		int p = cnt;
		while (p > 0 && v[i] > v[ids[p - 1]])
			p--;
		if (p >= k)
			continue;
		for (int q = (cnt < k ? cnt : k - 1); q > p; q--)
			ids[q] = ids[q - 1];
		ids[p] = i;
		cnt += cnt < k;
	}
	for (int a = 1; a < k; a++) /* ascending ids */
		for (int b = a; b > 0 && ids[b - 1] > ids[b]; b--) {
			int32_t t = ids[b];
			ids[b] = ids[b - 1];
			ids[b - 1] = t;
		}
}

int v4_route_one(const struct v4_route *r, const float *logits, int32_t token, int32_t *ids, float *w, struct err *e)
{
	int n = r->n_experts, k = r->k;
	if (k < 1 || k > V4_ROUTE_MAX_K || k > n)
		return err_set(e, "moe route: %d of %d experts: expected 1 .. min(%d, n_experts)", k, n,
			       V4_ROUTE_MAX_K);
	double sc[1 << 12];
	if (n > (int)(sizeof sc / sizeof sc[0]))
		return err_set(e, "moe route: %d experts: at most %zu", n, sizeof sc / sizeof sc[0]);
	for (int i = 0; i < n; i++)
		sc[i] = v4_sqrtsoftplus(logits[i]);
	if (r->tid2eid) {
		if (token < 0 || token >= r->vocab)
			return err_set(e, "moe route: token %d outside tid2eid's %d rows", (int)token, r->vocab);
		for (int a = 0; a < k; a++) {
			int64_t id = r->tid2eid[(int64_t)token * k + a];
			if (id < 0 || id >= n)
				return err_set(e, "moe route: tid2eid[%d][%d] = %lld: expected an expert id < %d",
					       (int)token, a, (long long)id, n);
			for (int b = 0; b < a; b++)
				if (ids[b] == id)
					return err_set(e, "moe route: tid2eid[%d] names expert %lld twice", (int)token,
						       (long long)id);
			ids[a] = (int32_t)id;
		}
	} else {
		double biased[1 << 12];
		for (int i = 0; i < n; i++)
			biased[i] = sc[i] + (r->bias ? r->bias[i] : 0);
		top_k(biased, n, k, ids);
	}
	double z = 0;
	for (int a = 0; a < k; a++)
		z += sc[ids[a]];
	for (int a = 0; a < k; a++)
		w[a] = (float)(sc[ids[a]] / z * r->route_scale);
	return 0;
}

void v4_swiglu_clamped(int n, const float *g, const float *u, float w, float limit, float *h)
{
	for (int i = 0; i < n; i++) {
		double a = g[i], b = u[i];
		if (limit > 0) {
			a = fmin(a, limit);
			b = fmin(fmax(b, -limit), limit);
		}
		h[i] = (float)(w * (a / (1 + exp(-a))) * b);
	}
}
