#include "ops/route.h"

#include <math.h>

#include "base/err.h"
#include "ops/vec.h"

void ops_moe_route(const struct route_params *p, const float *logits, int *ids, float *w)
{
	int n = p->n_experts;
	CHECK(n > 0 && n <= ROUTE_MAX_EXPERTS && p->top_k > 0 && p->top_k <= n && p->top_k <= ROUTE_MAX_TOPK);
	float s[ROUTE_MAX_EXPERTS], choice[ROUTE_MAX_EXPERTS];
	for (int i = 0; i < n; i++)
		s[i] = logits[i];
	if (p->sigmoid)
		for (int i = 0; i < n; i++)
			s[i] = 1.0f / (1.0f + expf(-s[i]));
	else
		ops_softmax(s, n);
	for (int i = 0; i < n; i++)
		choice[i] = p->bias ? s[i] + p->bias[i] : s[i];

	int ng = p->n_group > 0 ? p->n_group : 1;
	int kg = p->topk_group > 0 ? p->topk_group : ng;
	if (ng > 1 && kg < ng) {
		CHECK(n % ng == 0);
		int gs = n / ng;
		float gscore[ROUTE_MAX_EXPERTS];
		for (int g = 0; g < ng; g++) {
			const float *c = choice + g * gs;
			if (p->bias) { /* sum of the two largest */
				int top[2];
				int k2 = gs < 2 ? gs : 2;
				ops_topk(c, gs, k2, top);
				gscore[g] = 0;
				for (int j = 0; j < k2; j++)
					gscore[g] += c[top[j]];
			} else {
				float m = -INFINITY;
				for (int j = 0; j < gs; j++)
					if (c[j] > m)
						m = c[j];
				gscore[g] = m;
			}
		}
		int keep[ROUTE_MAX_EXPERTS];
		ops_topk(gscore, ng, kg, keep);
		for (int g = 0; g < ng; g++) {
			int kept = 0;
			for (int j = 0; j < kg; j++)
				if (keep[j] == g)
					kept = 1;
			if (!kept)
				for (int j = 0; j < gs; j++)
					choice[g * gs + j] = -INFINITY;
		}
	}
	ops_topk(choice, n, p->top_k, ids);
	float sum = 0;
	for (int k = 0; k < p->top_k; k++) {
		w[k] = s[ids[k]];
		sum += w[k];
	}
	for (int k = 0; k < p->top_k; k++) {
		if (p->norm_topk_prob)
			w[k] /= sum;
		w[k] *= p->routed_scaling_factor;
	}
}
