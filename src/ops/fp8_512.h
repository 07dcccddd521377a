/* fp8 e4m3 → bf16 on AVX512_BF16 for the dot-product GEMM kernels (gemm_avx512.c,
 * gemm_prepacked512.c). Exact: every e4m3 value is a normal bf16 (vdpbf16ps would flush
 * denormal inputs). Normal values by integer arithmetic (the exponent rebiased from 7 to
 * 127 is an add on the shifted magnitude), the 8 subnormals (exponent field 0) from a
 * one-register table: one fast single-source permute instead of the four two-source ones
 * of a 128-entry table, which held the fp8 kernels to ~33 GB/s at one token. The NaN bytes
 * 0x7f/0xff decode as ±480 (never present in checkpoints). Include from files whose
 * functions carry an AVX512_BF16 target attribute. */
#ifndef MLA_OPS_FP8_512_H
#define MLA_OPS_FP8_512_H

#include <immintrin.h>

#include "base/dtype.h"

#define FP8_512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* the subnormal magnitudes 0..7 (m x 2^-9) as bf16 bits in t[0..8), zeros after (plain C:
 * callers without an AVX-512 target keep it in memory) */
static inline void fp8_512_table_words(uint16_t t[32])
{
	for (int m = 0; m < 32; m++)
		t[m] = m < 8 ? f32_to_bf16(fp8_e4m3_table[m]) : 0;
}

/* the same table in a register */
static inline FP8_512_TARGET __m512i fp8_512_table(void)
{
	uint16_t t[32];
	fp8_512_table_words(t);
	return _mm512_loadu_si512(t);
}

/* 32 e4m3 bytes (one per 16-bit lane of b) → their bf16 bits */
static inline __attribute__((always_inline)) FP8_512_TARGET __m512i fp8_512_decode(__m512i b, __m512i sub)
{
	__m512i mag = _mm512_and_si512(b, _mm512_set1_epi16(0x7f));
	__m512i v = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(120 << 7));
	__mmask32 is_sub = _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8));
	v = _mm512_mask_mov_epi16(v, is_sub, _mm512_permutexvar_epi16(mag, sub));
	return _mm512_or_si512(v, _mm512_slli_epi16(_mm512_and_si512(b, _mm512_set1_epi16(0x80)), 8));
}

#endif
