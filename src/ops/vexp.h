/* exp on 16 fp32 lanes for AVX-512 code and on 8 for AVX2 code (the softmax of the MQA and
 * of the prefill attention, SiLU): Cephes' expf polynomial, about 1 ulp; 2^n applied with
 * correct underflow to 0 (gradual, one rounding); NaN stays NaN. Both give the same bits.
 * Include from a file whose functions carry an AVX-512 or AVX2 target attribute. */
#ifndef MLA_OPS_VEXP_H
#define MLA_OPS_VEXP_H

#include <immintrin.h>

/* The reduction and polynomial, once for both widths: M(op) names the width's intrinsic, ROUND
 * its round-to-nearest; declares n (the power of two) and p (exp of the remainder). */
#define VEXP_POLY(M, T, ROUND, x, n, p)                                                                  \
	x = M(min_ps)(M(set1_ps)(88.72f), x); /* constant first: a NaN x passes */                      \
	x = M(max_ps)(M(set1_ps)(-104.0f), x);                                                           \
	T n = ROUND(M(mul_ps)(x, M(set1_ps)(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); \
	T vexp_r = M(fnmadd_ps)(n, M(set1_ps)(0.693359375f), x);                                         \
	vexp_r = M(fnmadd_ps)(n, M(set1_ps)(-2.12194440e-4f), vexp_r);                                  \
	T p = M(set1_ps)(1.9875691500e-4f);                                                              \
	p = M(fmadd_ps)(p, vexp_r, M(set1_ps)(1.3981999507e-3f));                                        \
	p = M(fmadd_ps)(p, vexp_r, M(set1_ps)(8.3334519073e-3f));                                        \
	p = M(fmadd_ps)(p, vexp_r, M(set1_ps)(4.1665795894e-2f));                                        \
	p = M(fmadd_ps)(p, vexp_r, M(set1_ps)(1.6666665459e-1f));                                        \
	p = M(fmadd_ps)(p, vexp_r, M(set1_ps)(5.0000001201e-1f));                                        \
	p = M(fmadd_ps)(M(mul_ps)(p, vexp_r), vexp_r, M(add_ps)(vexp_r, M(set1_ps)(1.0f)))
#define VEXP_M512(op) _mm512_##op
#define VEXP_M256(op) _mm256_##op

static inline __attribute__((always_inline, target("avx512f,fma"))) __m512 exp512(__m512 x)
{
	VEXP_POLY(VEXP_M512, __m512, _mm512_roundscale_ps, x, n, p);
	return _mm512_scalef_ps(p, n);
}

static inline __attribute__((always_inline, target("avx2,fma"))) __m256 exp256(__m256 x)
{
	VEXP_POLY(VEXP_M256, __m256, _mm256_round_ps, x, n, p);
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
