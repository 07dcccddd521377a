/* The token tiles and the row store shared by the AVX2 kernels on weights packed at load
 * (ops/gemm_bf16_avx2.c, ops/gemm_fp8_avx2.c). Past a few tokens both decode a block's
 * 128-column chunk once into dec[c][32 rows] fp32 (L1), then every tile of up to TILE_TT
 * tokens runs over it: 16 rows x 6 tokens, two weight loads and six broadcasts per twelve
 * FMAs, all in registers (32 rows x 3 tokens left no register for the weights: every FMA
 * reloaded its weight, 15 loads per 12 FMAs). Include from the kernel files only. */
#ifndef MLA_OPS_TILES_AVX2_H
#define MLA_OPS_TILES_AVX2_H

#include <immintrin.h>
#include <stddef.h>

#include "ops/prepack.h"

#define TILE_TT 6 /* tokens per tile (12 accumulators) */

#define TILE_A2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))

/* the streaming kernels' x for pair p of nt tokens: x0[t] = x[t][2p], x1[t] = x[t][2p + 1], or 0
 * past the whole pairs (an odd last column: x past the row is never read) */
TILE_A2_INLINE void stream_x_pair_avx2(const float *x, size_t ldx, int p, int whole, __m256 *x0, __m256 *x1,
				       const int nt)
{
#pragma GCC unroll 4
	for (int t = 0; t < nt; t++) {
		x0[t] = _mm256_broadcast_ss(x + (size_t)t * ldx + 2 * (size_t)p);
		x1[t] = p < whole ? _mm256_broadcast_ss(x + (size_t)t * ldx + 2 * (size_t)p + 1) : _mm256_setzero_ps();
	}
}

/* tokens [0, nt) of a tile, rows [16 h, 16 h + 16) of the block:
 * v[t][row] (+)= mul sc[row] · Σ_{c < nc} dec[c][row] x[t][c] (sc NULL: no factor), the chunk's
 * sum stored as it is when first, else added. pf (NULL: none): the next chunk, pfc of its bytes
 * per column, prefetched a line at a time. */
TILE_A2_INLINE void tile_avx2_t(const float *dec, int nc, const float *x, size_t ldx, const float *sc, float mul,
				int first, float *v, const char *pf, int pfc, int h, const int nt)
{
	__m256 a0[TILE_TT], a1[TILE_TT];
#pragma GCC unroll 6
	for (int t = 0; t < nt; t++)
		a0[t] = a1[t] = _mm256_setzero_ps();
	const float *d = dec + 16 * h;
	for (int c = 0; c < nc; c++) {
		if (pf && !((c * pfc) & 63))
			__asm__ volatile("prefetcht1 %0" ::"m"(*(pf + (size_t)pfc * (size_t)c)));
		__m256 w0 = _mm256_load_ps(d + (size_t)c * PREPACK_ROWS),
		       w1 = _mm256_load_ps(d + (size_t)c * PREPACK_ROWS + 8);
#pragma GCC unroll 6
		for (int t = 0; t < nt; t++) {
			__m256 xb = _mm256_broadcast_ss(x + (size_t)t * ldx + (size_t)c);
			a0[t] = _mm256_fmadd_ps(w0, xb, a0[t]);
			a1[t] = _mm256_fmadd_ps(w1, xb, a1[t]);
		}
	}
	__m256 s0 = _mm256_setzero_ps(), s1 = s0;
	if (sc) {
		s0 = _mm256_mul_ps(_mm256_loadu_ps(sc + 16 * h), _mm256_set1_ps(mul));
		s1 = _mm256_mul_ps(_mm256_loadu_ps(sc + 16 * h + 8), _mm256_set1_ps(mul));
	}
#pragma GCC unroll 6
	for (int t = 0; t < nt; t++) {
		float *v0 = v + (size_t)t * PREPACK_ROWS + 16 * h, *v1 = v0 + 8;
		if (sc) {
			_mm256_storeu_ps(v0, first ? _mm256_mul_ps(a0[t], s0)
						   : _mm256_fmadd_ps(a0[t], s0, _mm256_loadu_ps(v0)));
			_mm256_storeu_ps(v1, first ? _mm256_mul_ps(a1[t], s1)
						   : _mm256_fmadd_ps(a1[t], s1, _mm256_loadu_ps(v1)));
		} else {
			_mm256_storeu_ps(v0, first ? a0[t] : _mm256_add_ps(_mm256_loadu_ps(v0), a0[t]));
			_mm256_storeu_ps(v1, first ? a1[t] : _mm256_add_ps(_mm256_loadu_ps(v1), a1[t]));
		}
	}
}

/* a tile of nt <= TILE_TT tokens, both halves of the block (the first prefetching) */
static inline __attribute__((target("avx2,fma"))) void tile_avx2(const float *dec, int nc, const float *x, size_t ldx,
								 const float *sc, float mul, int first, float *v,
								 const char *pf, int pfc, int nt)
{
	for (int h = 0; h < 2; h++) {
#define TILE_T(N) tile_avx2_t(dec, nc, x, ldx, sc, mul, first, v, h ? NULL : pf, pfc, h, N)
		switch (nt) {
		case 1: TILE_T(1); break;
		case 2: TILE_T(2); break;
		case 3: TILE_T(3); break;
		case 4: TILE_T(4); break;
		case 5: TILE_T(5); break;
		default: TILE_T(6); break;
		}
#undef TILE_T
	}
}

/* y[t][0..nr) = (add ? y : 0) + v[t][0..nr) (v: [nt][32]) */
static inline void tile_store_rows(float *y, size_t ldy, const float *v, int nt, int nr, int add)
{
	for (int t = 0; t < nt; t++) {
		float *yt = y + (size_t)t * ldy;
		const float *vt = v + (size_t)t * PREPACK_ROWS;
		for (int r = 0; r < nr; r++)
			yt[r] = add ? yt[r] + vt[r] : vt[r];
	}
}

#endif
