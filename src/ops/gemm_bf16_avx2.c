/* bf16 GEMM at the AVX2 level on weights packed at load in the dot-product layout
 * (ops/prepack.h, PREPACK_KIND_DP), for any token count, fp32 x and fp32 sums.
 *
 * Why: the row-major kernels (gemm_rows.c) transpose every 8x8 block of a weight panel at each
 * call (prefill ran well under the FMA peak at the AVX2 level, and under fp8 in its packed
 * layout) and sum decode rows horizontally. In the packed layout a step (32 rows x a column
 * pair, 128 bytes, one word per row) becomes fp32 with one shift (the even column) and one mask
 * (the odd one) per 8 rows, no shuffle: rows sit in the lanes, x is one broadcast per column
 * and no horizontal sum is left. Few tokens decode in the loop; more decode each 128-column
 * chunk once into an L1 buffer of fp32 that the token tiles share (prefill), as
 * ops/gemm_fp8_avx2.c does for fp8.
 *
 * Every (row, token) sums its columns in order within 128-column chunks and adds the chunks in
 * order, on both paths: a token's result does not depend on its batch. */
#include <immintrin.h>

#include "base/err.h"
#include "ops/gemm_internal.h"
#include "ops/prepack.h"
#include "ops/tiles_avx2.h"

#define A2 __attribute__((target("avx2,fma")))
#define A2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))
#define SR PREPACK_ROWS /* rows per block = 32-bit words per pair step */
#define CP 64           /* pairs per chunk: 128 columns */
#define TD 2            /* tokens decoded in the loop at most (8 accumulators) */
#define PF 4096         /* prefetch distance in the streaming kernel, bytes (32 steps: beats 2048) */
#define TOK_CHUNK 128   /* tokens per pass over a block: tot stays 16 KB of stack */

/* 8 rows of a step (8 words) → column 2p (*e) and 2p + 1 (*o) as fp32 */
A2_INLINE void dec8(const uint32_t *s, __m256 *e, __m256 *o)
{
	__m256i v = _mm256_load_si256((const __m256i *)(const void *)s);
	*e = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
	*o = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
}

/* a[t][0..4) = 0 for t < nt */
A2_INLINE void zero_acc(__m256 a[TD][4], const int nt)
{
#pragma GCC unroll 4
	for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			a[t][q] = _mm256_setzero_ps();
}

/* One block, nt <= TD tokens, decoding in the loop: tot[t][0..32) = Σ over the columns.
 * Pairs [0, full) are whole; an odd last column is a half pair whose x counts as 0. */
A2_INLINE void block_stream_t(const uint32_t *wp, int P, int full, const float *x, size_t ldx, float *tot,
			      const int nt)
{
	__m256 t8[TD][4];
	zero_acc(t8, nt);
	for (int k0 = 0; k0 < P; k0 += CP) {
		int k1 = P - k0 < CP ? P : k0 + CP;
		__m256 a[TD][4];
		zero_acc(a, nt);
		for (int p = k0; p < k1; p++) {
			const uint32_t *s = wp + (size_t)p * SR;
			/* into L2 ahead of the stream: the DRAM trip overlaps the work */
			__asm__ volatile("prefetcht1 %0" ::"m"(*((const char *)s + PF)));
			__asm__ volatile("prefetcht1 %0" ::"m"(*((const char *)s + PF + 64)));
			__m256 x0[TD], x1[TD];
			stream_x_pair_avx2(x, ldx, p, full, x0, x1, nt);
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++) {
				__m256 e, o;
				dec8(s + 8 * q, &e, &o);
#pragma GCC unroll 4
				for (int t = 0; t < nt; t++) {
					a[t][q] = _mm256_fmadd_ps(e, x0[t], a[t][q]);
					a[t][q] = _mm256_fmadd_ps(o, x1[t], a[t][q]);
				}
			}
		}
#pragma GCC unroll 4
		for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++) /* the first chunk as it is, as the tiles store it */
				t8[t][q] = k0 ? _mm256_add_ps(t8[t][q], a[t][q]) : a[t][q];
	}
#pragma GCC unroll 4
	for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			_mm256_storeu_ps(tot + (size_t)t * SR + 8 * q, t8[t][q]);
}

static A2 void block_stream(const uint32_t *wp, int P, int full, const float *x, size_t ldx, float *tot, int nt)
{
	if (nt == 1)
		block_stream_t(wp, P, full, x, ldx, tot, 1);
	else
		block_stream_t(wp, P, full, x, ldx, tot, 2);
}

/* pairs [k0, k1) of a block → dec[c][32 rows] fp32, c = 2 (p - k0) + i */
static A2 void decode_chunk(const uint32_t *wp, int k0, int k1, float *dec)
{
	for (int p = k0; p < k1; p++) {
		float *d = dec + (size_t)(p - k0) * 2 * SR;
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++) {
			__m256 e, o;
			dec8(wp + (size_t)p * SR + 8 * q, &e, &o);
			_mm256_store_ps(d + 8 * q, e);
			_mm256_store_ps(d + SR + 8 * q, o);
		}
	}
}

/* more than TD tokens: per block, each chunk decoded once, then every token tile over it, the
 * first tile prefetching the next chunk into L2 (tot [n][32]: the block's sums of every token) */
static void block_tiles(const uint32_t *wp, int P, int cols, const float *x, size_t ldx, int n, float *tot, float *dec)
{
	for (int k0 = 0; k0 < P; k0 += CP) {
		int k1 = P - k0 < CP ? P : k0 + CP, nc = (2 * k1 < cols ? 2 * k1 : cols) - 2 * k0;
		decode_chunk(wp, k0, k1, dec);
		for (int t0 = 0; t0 < n; t0 += TILE_TT) {
			int nt = n - t0 < TILE_TT ? n - t0 : TILE_TT;
			tile_avx2(dec, nc, x + (size_t)t0 * ldx + 2 * (size_t)k0, ldx, NULL, 1.0f, k0 == 0,
				  tot + (size_t)t0 * SR, t0 ? NULL : (const char *)(wp + (size_t)k1 * SR), 2 * SR, nt);
		}
	}
}

void gemm_panel_bf16_avx2(const struct gemm_job *j, int r0, int r1)
{
	const struct wmat *w = j->w;
	CHECK(r0 % SR == 0 && w->packed && w->dtype == DT_BF16 && w->packed_kind == PREPACK_KIND_DP);
	int P = (w->cols + 1) / 2, full = w->cols / 2;
	_Alignas(32) float tot[TOK_CHUNK * SR];
	_Alignas(32) float dec[2 * CP * SR]; /* 16 KB */
	for (int rb = r0; rb < r1; rb += SR) {
		int nr = r1 - rb < SR ? r1 - rb : SR;
		const uint32_t *wp = w->packed + (size_t)(rb / SR) * (size_t)w->packed_pairs * SR;
		for (int t0 = 0; t0 < j->n; t0 += TOK_CHUNK) {
			int n = j->n - t0 < TOK_CHUNK ? j->n - t0 : TOK_CHUNK;
			const float *x = j->x + (size_t)t0 * (size_t)j->ldx;
			if (n <= TD)
				block_stream(wp, P, full, x, (size_t)j->ldx, tot, n);
			else
				block_tiles(wp, P, w->cols, x, (size_t)j->ldx, n, tot, dec);
			tile_store_rows(j->y + (size_t)t0 * (size_t)j->ldy + rb, (size_t)j->ldy, tot, n, nr,
					j->accumulate);
		}
	}
}
