#include "model_v4/compressor.h"

#include <math.h>
#include <string.h>

#include "base/err.h"
#include "model_v4/v4_pack.h"
#include "model_v4/v4_quant.h"
#include "ops/vec.h"

/* state: an open accumulator of `w` features is three rows [w]: running max m, sum z of
 * exp(s - m), weighted sum a of exp(s - m) kv. Layout: cur (width) then, for ratio 4, prev (d):
 * the first d channels of the last completed window. */
struct acc {
	float *m, *z, *a;
};

static struct acc acc_at(float *p, int w) { return (struct acc){p, p + w, p + 2 * w}; }

static void acc_reset(struct acc s, int w)
{
	for (int f = 0; f < w; f++) {
		s.m[f] = -INFINITY;
		s.z[f] = 0;
		s.a[f] = 0;
	}
}

size_t v4_comp_state_floats(const struct v4_comp *c)
{
	return 3 * (size_t)v4_comp_width(c) + (c->ratio == 4 ? 3 * (size_t)c->d : 0);
}

void v4_comp_state_init(const struct v4_comp *c, float *state)
{
	int w = v4_comp_width(c);
	acc_reset(acc_at(state, w), w);
	if (c->ratio == 4)
		acc_reset(acc_at(state + 3 * w, c->d), c->d);
}

/* One token into the open window: score s [w] (ape added), kv [w]. */
static void acc_add(struct acc s, int w, const float *kv, const float *score, const float *ape)
{
	for (int f = 0; f < w; f++) {
		double sc = (double)score[f] + ape[f], m = s.m[f];
		if (sc > m) { /* rescale what is there to the new max (m = -inf: nothing there) */
			double k = exp(m - sc);
			s.z[f] = (float)(s.z[f] * k + 1);
			s.a[f] = (float)(s.a[f] * k + kv[f]);
			s.m[f] = (float)sc;
		} else {
			double k = exp(sc - m);
			s.z[f] = (float)(s.z[f] + k);
			s.a[f] = (float)(s.a[f] + k * kv[f]);
		}
	}
}

/* The pooled value of feature f over one accumulator or two (the second may be empty: m = -inf). */
static double pooled(const float *m1, const float *z1, const float *a1, const float *m2, const float *z2,
		     const float *a2, int f)
{
	double m = m2 ? fmax(m1[f], m2[f]) : m1[f];
	double k1 = exp(m1[f] - m), z = z1[f] * k1, a = a1[f] * k1;
	if (m2 && m2[f] != -INFINITY) {
		double k2 = exp(m2[f] - m);
		z += z2[f] * k2;
		a += a2[f] * k2;
	}
	return a / z;
}

/* The pooled v [d] -> out [d]: RMSNorm, RoPE at the window's first position, the kind's round trip. */
static void finish(const struct v4_comp *c, double *v, float *out, long pos)
{
	int d = c->d;
	double ss = 0;
	for (int f = 0; f < d; f++)
		ss += v[f] * v[f];
	double r = 1 / sqrt(ss / d + c->eps);
	for (int f = 0; f < d; f++)
		out[f] = (float)(v[f] * r * c->norm[f]);
	v4_rope_apply(c->rope, out, d, pos, 0);
	if (c->kind == V4_COMP_KV)
		v4_fp8_sim(out, d - c->rope->dim, 64);
	else if (c->kind == V4_COMP_INDEX) {
		ops_hadamard(out, d);
		v4_fp4_sim(out, d, 32);
	}
}

int v4_comp_feed(const struct v4_comp *c, float *state, long pos0, int n, const float *kv, const float *score,
		 float *entries)
{
	int r = c->ratio, d = c->d, w = v4_comp_width(c), count = 0;
	struct acc cur = acc_at(state, w), prev = acc_at(state + 3 * w, d);
	double v[8192];
	CHECK(d <= 8192 && r >= 2);
	for (int t = 0; t < n; t++) {
		long pos = pos0 + t;
		acc_add(cur, w, kv + (size_t)t * (size_t)w, score + (size_t)t * (size_t)w,
			c->ape + (size_t)(pos % r) * (size_t)w);
		if (pos % r != r - 1)
			continue;
		/* window pos / r is complete */
		if (r == 4) { /* prev's first half + cur's second half; then cur's first half is prev */
			for (int f = 0; f < d; f++)
				v[f] = pooled(cur.m + d, cur.z + d, cur.a + d, prev.m, prev.z, prev.a, f);
			memcpy(prev.m, cur.m, (size_t)d * sizeof *prev.m);
			memcpy(prev.z, cur.z, (size_t)d * sizeof *prev.z);
			memcpy(prev.a, cur.a, (size_t)d * sizeof *prev.a);
		} else {
			for (int f = 0; f < d; f++)
				v[f] = pooled(cur.m, cur.z, cur.a, NULL, NULL, NULL, f);
		}
		acc_reset(cur, w);
		finish(c, v, entries + (size_t)count * (size_t)d, pos + 1 - r);
		count++;
	}
	return count;
}

size_t v4_comp_entry_floats(const struct v4_comp *c)
{
	return c->kind == V4_COMP_KV      ? v4_pack_kv_floats(c->d, c->rope->dim)
	       : c->kind == V4_COMP_INDEX ? v4_pack_ix_floats(c->d)
					  : (size_t)c->d;
}

void v4_comp_store(const struct v4_comp *c, const float *x, float *dst)
{
	if (c->kind == V4_COMP_KV)
		v4_pack_kv(x, c->d, c->rope->dim, dst);
	else if (c->kind == V4_COMP_INDEX)
		v4_pack_ix(x, c->d, dst);
	else
		memcpy(dst, x, sizeof(float) * (size_t)c->d);
}

void v4_comp_load(const struct v4_comp *c, const float *src, float *x)
{
	if (c->kind == V4_COMP_KV)
		v4_unpack_kv(src, c->d, c->rope->dim, x);
	else if (c->kind == V4_COMP_INDEX)
		v4_unpack_ix(src, c->d, x);
	else
		memcpy(x, src, sizeof(float) * (size_t)c->d);
}
