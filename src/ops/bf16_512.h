/* fp32 → bf16-exact fp32 on 16 lanes for AVX-512 code: round to nearest even, NaN kept quiet
 * (as f32_to_bf16). ops_round_bf16 and the AMX GEMM's stores share it. Include from a file
 * whose functions carry an AVX-512 target attribute. */
#ifndef MLA_OPS_BF16_512_H
#define MLA_OPS_BF16_512_H

#include <immintrin.h>

static inline __attribute__((always_inline, target("avx512f"))) __m512 round_bf16_512(__m512 v)
{
	__m512i u = _mm512_castps_si512(v);
	__m512i r = _mm512_add_epi32(
		u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
				    _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
	__mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
						_mm512_set1_epi32(0x7f800000));
	r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
	return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u)));
}

#endif
