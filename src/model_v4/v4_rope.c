#include "model_v4/v4_rope.h"

#include <math.h>

int v4_rope_init(struct v4_rope *r, int dim, double theta, int orig, double factor, double beta_fast, double beta_slow,
		 struct err *e)
{
	if (dim <= 0 || dim % 2 || dim / 2 > V4_ROPE_MAX_PAIRS)
		return err_set(e, "rope: dim %d: expected an even number <= %d", dim, 2 * V4_ROPE_MAX_PAIRS);
	if (!(theta > 1) || (orig > 0 && !(factor >= 1 && beta_fast > 0 && beta_slow > 0)))
		return err_set(e, "rope: theta %g, factor %g, beta %g / %g: out of range", theta, factor, beta_fast,
			       beta_slow);
	int half = dim / 2;
	r->dim = dim;
	for (int i = 0; i < half; i++) /* 1 / base^(2i / dim), each step rounded to fp32 */
		r->inv_freq[i] = (float)(1.0 / (double)(float)pow(theta, (double)(float)((double)(2 * i) / dim)));
	if (orig <= 0)
		return 0;
	/* YaRN: blend f / factor and f with a linear ramp between the correction dims */
	double lo = floor(dim * log(orig / (beta_fast * 2 * M_PI)) / (2 * log(theta)));
	double hi = ceil(dim * log(orig / (beta_slow * 2 * M_PI)) / (2 * log(theta)));
	lo = lo < 0 ? 0 : lo;
	hi = hi > dim - 1 ? dim - 1 : hi;
	if (lo == hi)
		hi += 0.001;
	float flo = (float)lo, span = (float)(hi - lo), fac = (float)factor;
	for (int i = 0; i < half; i++) {
		float ramp = ((float)i - flo) / span;
		ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
		float smooth = 1.0f - ramp, f = r->inv_freq[i];
		r->inv_freq[i] = f / fac * (1.0f - smooth) + f * smooth;
	}
	return 0;
}

int v4_rope_init_layer(struct v4_rope *r, const struct v4_config *c, int ratio, struct err *e)
{
	if (!ratio)
		return v4_rope_init(r, c->qk_rope_head_dim, c->rope_theta, 0, 1, 1, 1, e);
	return v4_rope_init(r, c->qk_rope_head_dim, c->compress_rope_theta,
			    c->rope_yarn ? c->yarn_original_max_position : 0, c->yarn_factor, c->yarn_beta_fast,
			    c->yarn_beta_slow, e);
}

void v4_rope_cos_sin(const struct v4_rope *r, long pos, float *cos_out, float *sin_out)
{
	for (int i = 0; i < r->dim / 2; i++) {
		float a = (float)((double)pos * r->inv_freq[i]);
		cos_out[i] = cosf(a);
		sin_out[i] = sinf(a);
	}
}

void v4_rope_apply(const struct v4_rope *r, float *x, int len, long pos, int inverse)
{
	float c[V4_ROPE_MAX_PAIRS], s[V4_ROPE_MAX_PAIRS];
	v4_rope_cos_sin(r, pos, c, s);
	float *p = x + len - r->dim;
	for (int i = 0; i < r->dim / 2; i++) {
		double a = p[2 * i], b = p[2 * i + 1], sn = inverse ? -s[i] : s[i];
		p[2 * i] = (float)(a * c[i] - b * sn);
		p[2 * i + 1] = (float)(a * sn + b * c[i]);
	}
}
