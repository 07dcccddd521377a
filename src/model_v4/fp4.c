#include "model_v4/fp4.h"

#include <math.h>
#include <string.h>

static const float e2m1_mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float fp4_e2m1_to_f32(uint8_t code)
{
	float m = e2m1_mag[code & 7];
	return code & 8 ? -m : m;
}

uint8_t fp4_f32_to_e2m1(float v)
{
	if (isnan(v))
		return 0;
	uint8_t sign = signbit(v) ? 8 : 0;
	float a = fabsf(v);
	int lo = 0; /* the largest magnitude <= a */
	while (lo < 7 && e2m1_mag[lo + 1] <= a)
		lo++;
	if (lo == 7)
		return sign | 7;
	float dl = a - e2m1_mag[lo], dh = e2m1_mag[lo + 1] - a; /* exact: few-bit values */
	int c = dl < dh || (dl == dh && lo % 2 == 0) ? lo : lo + 1;
	return sign | (uint8_t)c;
}

float fp4_e8m0_to_f32(uint8_t e) { return e == 0xff ? NAN : ldexpf(1.0f, (int)e - 127); }

void fp4_decode_row(const uint8_t *packed, const uint8_t *scales, int k, float *out)
{
	for (int i = 0; i < k; i += 2) {
		float s = fp4_e8m0_to_f32(scales[i / FP4_BLOCK]);
		uint8_t b = packed[i / 2];
		out[i] = fp4_e2m1_to_f32(b & 15) * s;
		out[i + 1] = fp4_e2m1_to_f32(b >> 4) * s;
	}
}

void fp4_gemv_ref(const uint8_t *packed, const uint8_t *scales, int n, int k, const float *x, float *y)
{
	int nb = (k + FP4_BLOCK - 1) / FP4_BLOCK;
	for (int r = 0; r < n; r++) {
		const uint8_t *p = packed + (size_t)r * (size_t)(k / 2);
		const uint8_t *s = scales + (size_t)r * (size_t)nb;
		double acc = 0;
		for (int b = 0; b < nb; b++) { /* the block sum in codes, then one scale */
			double part = 0;
			int end = (b + 1) * FP4_BLOCK < k ? (b + 1) * FP4_BLOCK : k;
			for (int i = b * FP4_BLOCK; i < end; i += 2) {
				part += (double)fp4_e2m1_to_f32(p[i / 2] & 15) * x[i];
				part += (double)fp4_e2m1_to_f32(p[i / 2] >> 4) * x[i + 1];
			}
			acc += part * fp4_e8m0_to_f32(s[b]);
		}
		y[r] = (float)acc;
	}
}
