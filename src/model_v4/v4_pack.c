#include "model_v4/v4_pack.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/dtype.h"
#include "model_v4/fp4.h"

static size_t to_floats(size_t bytes) { return (bytes + 3) / 4; }

/* the e8m0 byte of a power of two s */
static uint8_t e8m0_of(float s)
{
	int e;
	frexp(s, &e); /* s = 0.5 x 2^e */
	return (uint8_t)(e - 1 + 127);
}

/* The smallest power of two s (at least 2^-127, e8m0's least) with amax <= top * s. The block's
 * values are codes times a power of two s0 with amax <= top * s0, so s <= s0 and each value / s
 * is a code times 2^k that stays within top: a code too. (The kernel's own formula is not
 * used again: its fp32 product with 1/6 or 1/448 can round a block whose largest value is top
 * x s0 up to 2 s0.) */
static float least_scale(float amax, double top)
{
	if (!(amax > 0))
		return 1.0f;
	int e, k;
	frexp(amax, &e); /* amax < 2^e */
	for (k = e - 10; ldexp(top, k) < amax; k++)
		;
	return ldexpf(1.0f, k < -127 ? -127 : k);
}

static float block_amax(const float *x, int n)
{
	float a = 0;
	for (int i = 0; i < n; i++)
		a = fmaxf(a, fabsf(x[i]));
	return a;
}

size_t v4_pack_kv_floats(int d, int rd)
{
	int n = d - rd;
	return (size_t)rd + to_floats((size_t)n + (size_t)(n + 63) / 64);
}

void v4_pack_kv(const float *x, int d, int rd, float *dst)
{
	int n = d - rd;
	memcpy(dst, x + n, sizeof(float) * (size_t)rd);
	uint8_t *codes = (uint8_t *)(dst + rd), *exps = codes + n;
	for (int b = 0; b < n; b += 64) {
		int m = n - b < 64 ? n - b : 64;
		float s = least_scale(block_amax(x + b, m), 448.0);
		exps[b / 64] = e8m0_of(s);
		for (int i = b; i < b + m; i++)
			codes[i] = f32_to_fp8_e4m3(x[i] / s);
	}
}

void v4_unpack_kv(const float *src, int d, int rd, float *x)
{
	int n = d - rd;
	memcpy(x + n, src, sizeof(float) * (size_t)rd);
	const uint8_t *codes = (const uint8_t *)(src + rd), *exps = codes + n;
	for (int b = 0; b < n; b += 64) {
		float s = fp4_e8m0_to_f32(exps[b / 64]);
		for (int i = b; i < n && i < b + 64; i++)
			x[i] = fp8_e4m3_to_f32(codes[i]) * s;
	}
}

size_t v4_pack_ix_floats(int d) { return to_floats((size_t)d / 2 + (size_t)(d + 31) / 32); }

void v4_pack_ix(const float *x, int d, float *dst)
{
	uint8_t *codes = (uint8_t *)dst, *exps = codes + d / 2;
	memset(codes, 0, (size_t)d / 2);
	for (int b = 0; b < d; b += 32) {
		int m = d - b < 32 ? d - b : 32;
		float s = least_scale(block_amax(x + b, m), 6.0);
		exps[b / 32] = e8m0_of(s);
		for (int i = b; i < b + m; i++)
			codes[i / 2] |= (uint8_t)((fp4_f32_to_e2m1(x[i] / s) & 0xF) << (i % 2 ? 4 : 0));
	}
}

void v4_unpack_ix(const float *src, int d, float *x)
{
	const uint8_t *codes = (const uint8_t *)src, *exps = codes + d / 2;
	for (int b = 0; b < d; b += 32) {
		float s = fp4_e8m0_to_f32(exps[b / 32]);
		for (int i = b; i < d && i < b + 32; i++)
			x[i] = fp4_e2m1_to_f32((uint8_t)(codes[i / 2] >> (i % 2 ? 4 : 0)) & 0xF) * s;
	}
}
