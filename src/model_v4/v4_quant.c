#include "model_v4/v4_quant.h"

#include <math.h>

#include "base/dtype.h"
#include "model_v4/fp4.h"

/* 2^ceil(log2 s) for s > 0 */
static double pow2_ceil(double s)
{
	int e;
	double m = frexp(s, &e); /* s = m 2^e, 0.5 <= m < 1 */
	return m == 0.5 ? s : ldexp(1.0, e);
}

static float block_amax(const float *x, int n)
{
	float a = 0;
	for (int i = 0; i < n; i++)
		a = fmaxf(a, fabsf(x[i]));
	return a;
}

float v4_fp8_scale(float amax)
{
	/* the product rounded to fp32 first, as the kernel computes it */
	float s = fmaxf(amax, 1e-4f) * (1.0f / 448.0f);
	return (float)pow2_ceil(s);
}

void v4_fp8_sim(float *x, int n, int block)
{
	for (int b = 0; b < n; b += block) {
		int m = n - b < block ? n - b : block;
		float s = v4_fp8_scale(block_amax(x + b, m));
		for (int i = b; i < b + m; i++) /* x / s is exact: s is a power of two */
			x[i] = fp8_e4m3_to_f32(f32_to_fp8_e4m3(fminf(fmaxf(x[i] / s, -448.0f), 448.0f))) * s;
	}
}

float v4_fp4_scale(float amax)
{
	/* this product stays in double in the kernel's formula (no fp32 rounding) */
	double a = fmax(amax, 6.0 * 0x1p-126);
	return (float)pow2_ceil(a * (double)(1.0f / 6.0f));
}

void v4_fp4_sim(float *x, int n, int block)
{
	for (int b = 0; b < n; b += block) {
		int m = n - b < block ? n - b : block;
		float s = v4_fp4_scale(block_amax(x + b, m));
		for (int i = b; i < b + m; i++)
			x[i] = fp4_e2m1_to_f32(fp4_f32_to_e2m1(fminf(fmaxf(x[i] / s, -6.0f), 6.0f))) * s;
	}
}
