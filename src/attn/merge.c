#include "attn/merge.h"

#include <math.h>
#include <stddef.h>

void attn_merge_states(int n, int n_heads, int dv, const float *o_p, const float *lse_p, const float *o_s,
		       const float *lse_s, float *out, float *lse_out)
{
	for (size_t i = 0; i < (size_t)n * (size_t)n_heads; i++) {
		float lp = lse_p[i], ls = lse_s[i];
		if (lp == INFINITY)
			lp = -INFINITY;
		if (ls == INFINITY)
			ls = -INFINITY;
		const float *a = o_p + i * (size_t)dv, *b = o_s + i * (size_t)dv;
		float *o = out + i * (size_t)dv;
		if (lp == -INFINITY && ls == -INFINITY) {
			for (int d = 0; d < dv; d++)
				o[d] = 0;
			lse_out[i] = -INFINITY;
			continue;
		}
		float m = lp > ls ? lp : ls;
		float wp = expf(lp - m), ws = expf(ls - m), inv = 1.0f / (wp + ws);
		for (int d = 0; d < dv; d++)
			o[d] = (wp * a[d] + ws * b[d]) * inv;
		lse_out[i] = logf(wp + ws) + m;
	}
}
