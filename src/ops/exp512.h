/* exp on 16 fp32 lanes for AVX-512 code (the softmax of the MQA, SiLU): Cephes' expf
 * polynomial, about 1 ulp; scalef applies 2^n with correct underflow to 0; NaN stays NaN.
 * Include from a file whose functions carry an AVX-512 target attribute. */
#ifndef MLA_OPS_EXP512_H
#define MLA_OPS_EXP512_H

#include <immintrin.h>

static inline __attribute__((always_inline, target("avx512f,fma"))) __m512 exp512(__m512 x)
{
	x = _mm512_min_ps(_mm512_set1_ps(88.72f), x); /* constant first: a NaN x passes */
	x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
	__m512 p = _mm512_set1_ps(1.9875691500e-4f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
	return _mm512_scalef_ps(p, n);
}

#endif
