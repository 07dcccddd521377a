#include "ops/rope.h"

#include <math.h>
#include <stddef.h>

float ops_yarn_mscale(float scale, float m) { return scale <= 1.0f ? 1.0f : 0.1f * m * logf(scale) + 1.0f; }

static double corr_dim(double n_rot, int dim, double base, double max_pos)
{
	return dim * log(max_pos / (n_rot * 2 * M_PI)) / (2 * log(base));
}

int ops_rope_init(struct rope *r, const struct rope_params *p)
{
	if (p->dim <= 0 || p->dim % 2 || p->dim / 2 > ROPE_MAX_PAIRS)
		return -1;
	int half = p->dim / 2;
	r->dim = p->dim;
	r->mscale = 1.0f;
	double low = 0, high = 0;
	if (p->yarn) {
		low = floor(corr_dim(p->beta_fast, p->dim, p->theta, p->original_max_position));
		high = ceil(corr_dim(p->beta_slow, p->dim, p->theta, p->original_max_position));
		if (low < 0)
			low = 0;
		if (high > p->dim - 1)
			high = p->dim - 1;
		if (low == high)
			high += 0.001;
		r->mscale = ops_yarn_mscale(p->factor, p->mscale) / ops_yarn_mscale(p->factor, p->mscale_all_dim);
	}
	for (int i = 0; i < half; i++) {
		/* as torch: 1 / theta^(2i/dim) in fp32 */
		float f = (float)(1.0 / pow(p->theta, (double)(float)(2 * i) / p->dim));
		if (p->yarn) {
			double ramp = (i - low) / (high - low);
			ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
			float smooth = (float)(1.0 - ramp);
			f = f / p->factor * (1.0f - smooth) + f * smooth;
		}
		r->inv_freq[i] = f;
	}
	return 0;
}

float ops_mla_softmax_scale(int qk_head_dim, const struct rope_params *p)
{
	float s = 1.0f / sqrtf((float)qk_head_dim);
	if (p->yarn && p->mscale_all_dim != 0) {
		float m = ops_yarn_mscale(p->factor, p->mscale_all_dim);
		s *= m * m;
	}
	return s;
}

/* Rotates pair i = (x[i * step], x[i * step + partner]) of each vector by angle pos * inv_freq[i]:
 * interleaved pairs (step 2, partner 1) or NeoX halves (step 1, partner dim / 2). */
static void rotate(const struct rope *r, float *x, int n, int stride, int pos, int step, int partner)
{
	int half = r->dim / 2;
	float c[ROPE_MAX_PAIRS], s[ROPE_MAX_PAIRS];
	for (int i = 0; i < half; i++) {
		float ang = (float)pos * r->inv_freq[i];
		c[i] = (float)cos(ang) * r->mscale;
		s[i] = (float)sin(ang) * r->mscale;
	}
	for (int v = 0; v < n; v++) {
		float *p = x + (size_t)v * (size_t)stride;
		for (int i = 0; i < half; i++) {
			float a = p[i * step], b = p[i * step + partner];
			p[i * step] = a * c[i] - b * s[i];
			p[i * step + partner] = b * c[i] + a * s[i];
		}
	}
}

void ops_rope_apply(const struct rope *r, float *x, int n, int stride, int pos) { rotate(r, x, n, stride, pos, 2, 1); }

void ops_rope_apply_neox(const struct rope *r, float *x, int n, int stride, int pos)
{
	rotate(r, x, n, stride, pos, 1, r->dim / 2);
}
