/* exp on 16 fp32 lanes for AVX-512 code and on 8 for AVX2 code (the softmax of the MQA and
 * of the prefill attention, SiLU): Cephes' expf polynomial, about 1 ulp; 2^n applied with
 * correct underflow to 0 (gradual, one rounding); NaN stays NaN. Both give the same bits.
 * Include from a file whose functions carry an AVX-512 or AVX2 target attribute. */
#ifndef MLA_OPS_VEXP_H
#define MLA_OPS_VEXP_H

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

static inline __attribute__((always_inline, target("avx2,fma"))) __m256 exp256(__m256 x)
{
	x = _mm256_min_ps(_mm256_set1_ps(88.72f), x); /* constant first: a NaN x passes */
	x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	/* p * 2^n for n in [-150, 128] as scalef does: two normal powers of two, n = n1 + n2 with
	 * n1, n2 in [-75, 64]; the first product is exact, the second rounds once (a NaN x has a
	 * NaN p, whatever n became) */
	__m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
	const __m256i bias = _mm256_set1_epi32(127);
	__m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
	__m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
	return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
}

#endif
