/* fp8 e4m3 → bf16 on AVX512_BF16 for the dot-product GEMM kernels (gemm_avx512.c,
 * gemm_prepacked512.c): a table lookup on the 7 magnitude bits plus the sign. Exact: every
 * e4m3 value is a normal bf16 (vdpbf16ps would flush denormal inputs). Include from files
 * whose functions carry an AVX512_BF16 target attribute. */
#ifndef MLA_OPS_FP8_512_H
#define MLA_OPS_FP8_512_H

#include <immintrin.h>

#include "base/dtype.h"

#define FP8_512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* the e4m3 magnitudes 0..127 as bf16 bits, in four registers of 32 */
static inline FP8_512_TARGET void fp8_512_table(__m512i tb[4])
{
	for (int q = 0; q < 4; q++) {
		__m512 lo = _mm512_loadu_ps(fp8_e4m3_table + 32 * q), hi = _mm512_loadu_ps(fp8_e4m3_table + 32 * q + 16);
		tb[q] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
	}
}

/* 32 e4m3 bytes (one per 16-bit lane of b) → their bf16 bits */
static inline __attribute__((always_inline)) FP8_512_TARGET __m512i fp8_512_decode(__m512i b, const __m512i tb[4])
{
	__m512i lo = _mm512_permutex2var_epi16(tb[0], b, tb[1]); /* index bits 0-5 */
	__m512i hi = _mm512_permutex2var_epi16(tb[2], b, tb[3]);
	__mmask32 upper = _mm512_test_epi16_mask(b, _mm512_set1_epi16(0x40));
	__m512i mag = _mm512_mask_blend_epi16(upper, lo, hi);
	return _mm512_or_si512(mag, _mm512_and_si512(_mm512_slli_epi16(b, 8), _mm512_set1_epi16((short)0x8000)));
}

#endif
