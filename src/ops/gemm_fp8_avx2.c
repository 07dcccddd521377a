/* fp8 e4m3 GEMM on weights packed at load in the AVX2 layout (ops/prepack.h,
 * PREPACK_KIND_FP8_AVX2), for any token count, fp32 x and fp32 sums.
 *
 * Why a layout of its own: the row-major kernels of gemm.c spent ~10 operations per 8 weights
 * (a byte load and zero-extension, two shifts, two masks, an or, the conversion, the FMA),
 * plus per 128-column segment and row a horizontal sum and a block-scale lookup with two
 * integer divisions: 1/3 of the bandwidth bound at one token. Here a thread streams its
 * 32-row blocks k-major (one sequential stream), a 64-byte step holds 32 rows x 2 columns,
 * 8 bytes per column and 8 rows; rows sit in the lanes, so x is one broadcast per column, the
 * segment's block scale one vector per 8 rows, and no horizontal sum is left.
 *
 * Two exact decodes. The f16 one: two vpunpck{l,h}bw against zero (each byte becomes the high
 * byte of a word), vpsraw 1 and a mask (e4m3's fields in f16's, 2^-8 too small), four
 * vcvtph2ps per 32 bytes. The integer one (dec8): vpmovsxbd, a shift and a mask per 8 bytes
 * give fp32 bits 2^-120 too small, e4m3's subnormals as fp32 denormals; it leaves Zen 5's two
 * FMA pipes, which vcvtph2ps shares, to the FMAs (1.04-1.17x at one token). It runs where
 * denormal operands cost nothing (ops_cpu_denormals_fast), for one token: batch-1 decode,
 * bound by this loop. Few tokens decode in the loop; more decode each segment once (f16)
 * into an L1 buffer of fp32 that the token tiles share (prefill). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/err.h"
#include "ops/cpu.h"
#include "ops/gemm_internal.h"
#include "ops/prepack.h"
#include "ops/tiles_avx2.h"

#define A2 __attribute__((target("avx2,fma,f16c")))
#define A2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#define SR PREPACK_ROWS /* rows per block */
#define STEP 64         /* bytes per pair step of a block */
#define TD 2            /* tokens decoded in the loop at most (8 accumulators) */
#define PF 4096         /* prefetch distance of the stream, bytes (1.1x 1024's at one token) */

/* 8 rows of a column (8 bytes) → their e4m3 values times 2^-120, exactly: the byte
 * sign-extended and shifted so that its sign lands on fp32's and its 7 other bits on the low 4
 * bits of the exponent and the top 3 of the mantissa (e4m3's subnormals become fp32 denormals,
 * the same 2^-120 apart). Needs denormals kept (no DAZ). */
A2_INLINE __m256 dec8(const uint8_t *p)
{
	__m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
	return _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(v, 20), _mm256_set1_epi32((int)0x87f00000u)));
}

/* 16 rows x 2 columns (32 bytes) → w[0], w[1]: column 0, rows 0-7 and 8-15; w[2], w[3]:
 * column 1; 2^-8 too small (e4m3 in f16's fields) */
A2_INLINE void dec16_f16(const uint8_t *p, __m256 w[4])
{
	__m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p), z = _mm256_setzero_si256();
	__m256i m = _mm256_set1_epi16((short)0xbfff); /* bit 14: the sign's copy */
	__m256i lo = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpacklo_epi8(z, v), 1), m);
	__m256i hi = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpackhi_epi8(z, v), 1), m);
	w[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(lo));
	w[1] = _mm256_cvtph_ps(_mm256_castsi256_si128(hi));
	w[2] = _mm256_cvtph_ps(_mm256_extracti128_si256(lo, 1));
	w[3] = _mm256_cvtph_ps(_mm256_extracti128_si256(hi, 1));
}

/* the same from dec8: 2^-120 too small */
A2_INLINE void dec16_tiny(const uint8_t *p, __m256 w[4])
{
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++)
		w[i] = dec8(p + 8 * i);
}

/* the block's scales of segment g for its 32 rows, times 2^8 (the decode's bias) */
A2_INLINE void seg_scale(const float *sc, __m256 s[4])
{
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++)
		s[q] = _mm256_mul_ps(_mm256_loadu_ps(sc + 8 * q), _mm256_set1_ps(256.0f));
}

/* One block, nt <= TD tokens, decoding in the loop: tot[t][0..32) = Σ over the columns.
 * Pairs [0, np2) are whole; an odd last column (cols odd) is a half pair with x 0.
 * tiny (one token, ops_cpu_denormals_fast): the integer decode, 2^-120 small, so x is taken
 * times xs = 2^S (S <= 112, x_scale) and each segment's sums times us = 2^(112 - S): those are
 * the sums of the f16 decode (2^-8 small, as the tiles have it), to the bit, since every
 * product and sum is only scaled by a power of 2 (for S < 112, a token with |x| >= 2^15,
 * while none of them falls under fp32's normal range). */
A2_INLINE void block_stream_t(const uint8_t *wp, const float *sc, int cols, int seg, const float *x, size_t ldx,
			      float xs, float us, float *tot, const int nt, const int tiny)
{
	__m256 t8[TD][4];
#pragma GCC unroll 4
	for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			t8[t][q] = _mm256_setzero_ps();
	int P = (cols + 1) / 2, full = cols / 2;
	for (int k0 = 0, g = 0; k0 < P; k0 += seg, g++) {
		int k1 = P - k0 < seg ? P : k0 + seg, kf = k1 < full ? k1 : full;
		__m256 a[TD][4];
#pragma GCC unroll 4
		for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++)
				a[t][q] = _mm256_setzero_ps();
		for (int p = k0; p < k1; p++) {
			const uint8_t *s = wp + (size_t)p * STEP;
			/* into L2 ahead of the stream: the DRAM trip overlaps the decode */
			__asm__ volatile("prefetcht1 %0" ::"m"(*(const char *)(s + PF)));
			__m256 x0[TD], x1[TD];
			stream_x_pair_avx2(x, ldx, p, kf, x0, x1, nt);
#pragma GCC unroll 2
			for (int t = 0; t < nt && tiny; t++) {
				x0[t] = _mm256_mul_ps(x0[t], _mm256_set1_ps(xs));
				x1[t] = _mm256_mul_ps(x1[t], _mm256_set1_ps(xs));
			}
#pragma GCC unroll 4
			for (int h = 0; h < 2; h++) {
				__m256 w[4];
				if (tiny)
					dec16_tiny(s + 32 * h, w);
				else
					dec16_f16(s + 32 * h, w);
#pragma GCC unroll 4
				for (int t = 0; t < nt; t++) {
					a[t][2 * h] = _mm256_fmadd_ps(w[0], x0[t], a[t][2 * h]);
					a[t][2 * h + 1] = _mm256_fmadd_ps(w[1], x0[t], a[t][2 * h + 1]);
					a[t][2 * h] = _mm256_fmadd_ps(w[2], x1[t], a[t][2 * h]);
					a[t][2 * h + 1] = _mm256_fmadd_ps(w[3], x1[t], a[t][2 * h + 1]);
				}
			}
		}
		__m256 s[4];
		seg_scale(sc + (size_t)g * SR, s);
#pragma GCC unroll 4
		for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++)
				t8[t][q] = _mm256_fmadd_ps(tiny ? _mm256_mul_ps(a[t][q], _mm256_set1_ps(us)) : a[t][q],
							   s[q], t8[t][q]);
	}
#pragma GCC unroll 4
	for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			_mm256_storeu_ps(tot + (size_t)t * SR + 8 * q, t8[t][q]);
}

static A2 void block_stream(const uint8_t *wp, const float *sc, int cols, int seg, const float *x, size_t ldx,
			    float xs, float us, float *tot, int nt, int tiny)
{
	if (nt == 1 && tiny)
		block_stream_t(wp, sc, cols, seg, x, ldx, xs, us, tot, 1, 1);
	else if (nt == 1)
		block_stream_t(wp, sc, cols, seg, x, ldx, xs, us, tot, 1, 0);
	else /* two tokens: the integer decode's x scaling cost more than it saved (0.92-0.95x) */
		block_stream_t(wp, sc, cols, seg, x, ldx, xs, us, tot, 2, 0);
}

/* x[0..cols) → *xs = 2^S, *us = 2^(112 - S): S = 112 unless x times 2^112 could overflow
 * (|x| >= 2^15), then as large as keeps max|x| 2^S under 2^128. Inf and NaN keep 112: their
 * sums are inf or NaN either way. */
static A2 void x_scale(const float *x, int cols, float *xs, float *us)
{
	__m256 m = _mm256_setzero_ps(), abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	int c = 0;
	for (; c + 8 <= cols; c += 8)
		m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + c), abs));
	_Alignas(32) float v[8];
	_mm256_store_ps(v, m);
	uint32_t top = 0;
	for (int i = 0; i < 8 + cols - c; i++) { /* the 8 lanes, then the columns past them */
		float f = i < 8 ? v[i] : fabsf(x[c + i - 8]);
		uint32_t b;
		memcpy(&b, &f, 4);
		top = b > top ? b : top;
	}
	int e = (int)(top >> 23) - 127, S = e >= 128 || 127 - e > 112 ? 112 : 127 - e; /* max|x| < 2^(e + 1) */
	uint32_t xb = (uint32_t)(S + 127) << 23, ub = (uint32_t)(112 - S + 127) << 23;
	memcpy(xs, &xb, 4);
	memcpy(us, &ub, 4);
}

/* pairs [k0, k1) of a block → dec[c][32 rows] fp32 (2^-8 too small), c = 2 (p - k0) + i */
static A2 void decode_seg(const uint8_t *wp, int k0, int k1, float *dec)
{
	for (int p = k0; p < k1; p++) {
		float *d = dec + (size_t)(p - k0) * 2 * SR;
#pragma GCC unroll 4
		for (int h = 0; h < 2; h++) {
			__m256 w[4];
			dec16_f16(wp + (size_t)p * STEP + 32 * h, w);
			_mm256_store_ps(d + 16 * h, w[0]);
			_mm256_store_ps(d + 16 * h + 8, w[1]);
			_mm256_store_ps(d + SR + 16 * h, w[2]);
			_mm256_store_ps(d + SR + 16 * h + 8, w[3]);
		}
	}
}

/* more than TD tokens: per block, each segment decoded once, then every token tile over it,
 * the first tile prefetching the next segment into L2 (without, DRAM idled while the tiles
 * ran and each decode waited on its misses)
 * (tot [n][32]: the block's sums of every token). The same order of sums as block_stream_t,
 * so a token's result does not depend on its batch. */
static void block_tiles(const uint8_t *wp, const float *sc, int cols, int seg, const struct gemm_job *j, float *tot,
			float *dec)
{
	int P = (cols + 1) / 2;
	for (int k0 = 0, g = 0; k0 < P; k0 += seg, g++) {
		int k1 = P - k0 < seg ? P : k0 + seg, nc = (2 * k1 < cols ? 2 * k1 : cols) - 2 * k0;
		decode_seg(wp, k0, k1, dec);
		for (int t0 = 0; t0 < j->n; t0 += TILE_TT) {
			int nt = j->n - t0 < TILE_TT ? j->n - t0 : TILE_TT;
			/* the AVX2 decode is 2^-8 small: x 256 with the scale */
			tile_avx2(dec, nc, j->x + (size_t)t0 * (size_t)j->ldx + 2 * (size_t)k0, (size_t)j->ldx,
				  sc + (size_t)g * SR, 256.0f, g == 0, tot + (size_t)t0 * SR,
				  t0 ? NULL : (const char *)(wp + (size_t)k1 * STEP), STEP / 2, nt);
		}
	}
}

#define TOK_CHUNK 128 /* tokens per pass over a block: tot stays 16 KB of stack */

void gemm_panel_fp8_avx2(const struct gemm_job *j, int r0, int r1)
{
	const struct wmat *w = j->w;
	CHECK(r0 % SR == 0 && w->packed_kind == PREPACK_KIND_FP8_AVX2 && w->blk_c % 2 == 0 &&
	      w->blk_c <= 2 * PREPACK_FP8_SEG_PAIRS);
	int seg = w->blk_c / 2, S = prepack_segments(w);
	_Alignas(32) float tot[TOK_CHUNK * SR];
	_Alignas(32) float dec[2 * PREPACK_FP8_SEG_PAIRS * SR]; /* 16 KB */
	float xs = 1, us = 1;                                   /* the integer decode's x scales */
	int t_last = (j->n - 1) / TOK_CHUNK * TOK_CHUNK, tiny = j->n - t_last == 1 && ops_cpu_denormals_fast();
	/* a last token chunk of one token: the integer decode. Each thread of the call takes x's
	 * maximum itself (cols floats against its rows x cols weight bytes) */
	if (tiny)
		x_scale(j->x + (size_t)t_last * (size_t)j->ldx, w->cols, &xs, &us);
	for (int rb = r0; rb < r1; rb += SR) {
		int nr = r1 - rb < SR ? r1 - rb : SR;
		const uint8_t *wp = (const uint8_t *)(const void *)w->packed +
				    (size_t)(rb / SR) * (size_t)w->packed_pairs * STEP;
		const float *sc = w->packed_scale + (size_t)(rb / SR) * (size_t)S * SR;
		for (int t0 = 0; t0 < j->n; t0 += TOK_CHUNK) {
			int n = j->n - t0 < TOK_CHUNK ? j->n - t0 : TOK_CHUNK;
			struct gemm_job jc = *j;
			jc.x = j->x + (size_t)t0 * (size_t)j->ldx;
			jc.n = n;
			if (n <= TD)
				block_stream(wp, sc, w->cols, seg, jc.x, (size_t)j->ldx, xs, us, tot, n, tiny);
			else
				block_tiles(wp, sc, w->cols, seg, &jc, tot, dec);
			tile_store_rows(j->y + (size_t)t0 * (size_t)j->ldy + rb, (size_t)j->ldy, tot, n, nr,
					j->accumulate);
		}
	}
}
