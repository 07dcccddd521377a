/* A 16 x 16 transpose of 32-bit elements in AVX-512 registers, shared by the run-time packer
 * (gemm_pack512.c) and the load-time one (prepack.c). Include from files whose functions
 * carry an AVX-512 target attribute. */
#ifndef MLA_OPS_TR16_512_H
#define MLA_OPS_TR16_512_H

#include <immintrin.h>

/* 16 x 16 transpose of 32-bit elements: r[i] = row i in, r[e] = element e of every row out */
static inline __attribute__((always_inline, target("avx512f"))) void tr16(__m512i r[16])
{
	__m512i t[16];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
	}
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) { /* r[4g+e] lane L: element 4L+e of rows 4g..4g+3 */
		r[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
		r[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
		r[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
		r[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
	}
#pragma GCC unroll 4
	for (int e = 0; e < 4; e++) {
		__m512i a = _mm512_shuffle_i32x4(r[e], r[4 + e], 0x88), b = _mm512_shuffle_i32x4(r[e], r[4 + e], 0xdd);
		__m512i c = _mm512_shuffle_i32x4(r[8 + e], r[12 + e], 0x88),
			d = _mm512_shuffle_i32x4(r[8 + e], r[12 + e], 0xdd);
		t[e] = _mm512_shuffle_i32x4(a, c, 0x88);
		t[8 + e] = _mm512_shuffle_i32x4(a, c, 0xdd);
		t[4 + e] = _mm512_shuffle_i32x4(b, d, 0x88);
		t[12 + e] = _mm512_shuffle_i32x4(b, d, 0xdd);
	}
#pragma GCC unroll 16
	for (int i = 0; i < 16; i++)
		r[i] = t[i];
}

#endif
