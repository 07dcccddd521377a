/* fp8 e4m3 GEMM on weights packed at load in the AVX2 layout (ops/prepack.h,
 * PREPACK_KIND_FP8_AVX2), for any token count, fp32 x and fp32 sums.
 *
 * Why a layout of its own: the row-major kernels (gemm_rows.c) spent ~10 operations per 8
 * weights (a byte load and zero-extension, two shifts, two masks, an or, the conversion, the
 * FMA), plus per 128-column segment and row a horizontal sum and a block-scale lookup with two
 * integer divisions: far from the bandwidth bound at one token. Here a thread streams its
 * 32-row blocks k-major (one sequential stream), a 64-byte step holds 32 rows x 2 columns; rows
 * sit in the lanes, so x is one broadcast per column, the segment's block scale one vector per
 * 8 rows, and no horizontal sum is left. In each 32 bytes (16 rows), dword j holds rows j and 8
 * + j of both columns (prepack_fp8_avx2_byte), so that 16-bit shifts decode two bytes of every
 * dword at once.
 *
 * Two exact decodes of 32 bytes. The integer one (dec_int_*): two 16-bit arithmetic shifts put
 * bytes 1 and 3 of each dword (and, after a 16-bit shift left, bytes 0 and 2) on fp32's sign,
 * exponent and mantissa bits with their sign above; a 32-bit shift for the low ones and a mask
 * each: 9 operations for 32 weights (vpmovsxbd, a shift and a mask per 8 took 12), fp32 bits
 * 2^-120 too small, e4m3's subnormals as fp32 denormals. The f16 one (dec_f16_*): the same
 * bytes in f16's fields (2^-8 too small) and four vcvtph2ps, which issue on Zen 5's two FMA
 * pipes; its lanes hold rows 0, 8, 1, 9, ... 3, 11 and 4, 12, ... 7, 15 (scales permuted to
 * them, sums put back in order). The integer decode runs where denormal operands cost nothing
 * (ops_cpu_denormals_fast): in the loop for one or two tokens (x scaled up, x_scale), for one
 * token over two blocks at a time (with one, the rows' chains of dependent FMAs, not the
 * operations, bound it), and times 2^112 into the tiles' buffer. Past two tokens each segment
 * is decoded once into an L1 buffer of fp32 that the token tiles share (prefill). */
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
#define PF 4096         /* prefetch distance of the stream, bytes: covers DRAM latency at one token */

/* The decodes of 16 rows x 2 columns (32 bytes) in two steps: dec_*_split, then each of the
 * four vectors by dec_*_w, so that a kernel can use each one as soon as it is made (two
 * tokens spilled an accumulator with all four live). */

/* The integer decode → w 0, 1: column 0, rows 0-7 and 8-15; w 2, 3: column 1; exactly their
 * e4m3 values times 2^-120: each byte on fp32's sign, the low 4 exponent bits and the top 3
 * mantissa bits (subnormals become fp32 denormals, the same 2^-120 apart). Needs denormals
 * kept (no DAZ). */
A2_INLINE void dec_int_split(const uint8_t *p, __m256i *even, __m256i *odd)
{
	__m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p);
	*odd = _mm256_srai_epi16(v, 4);                        /* bytes 1, 3 at bits 4-11, 20-27 */
	*even = _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 4); /* bytes 0, 2 likewise */
}

A2_INLINE __m256 dec_int_w(__m256i even, __m256i odd, const int q)
{
	__m256i v = q < 2 ? even : odd, m = _mm256_set1_epi32((int)0x87f00000u);
	return _mm256_castsi256_ps(_mm256_and_si256(q % 2 ? v : _mm256_slli_epi32(v, 16), m));
}

/* The f16 decode → w 0, 1: column 0, rows 0, 8, 1, 9, 2, 10, 3, 11 and 4, 12, ... 7, 15; w 2,
 * 3: column 1; 2^-8 too small (e4m3 in f16's fields: the byte in a word's high half, shifted
 * right once, its sign's copy and the bits below it cleared) */
A2_INLINE void dec_f16_split(const uint8_t *p, __m256i *even, __m256i *odd)
{
	__m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p), m = _mm256_set1_epi16((short)0xbf80);
	*even = _mm256_and_si256(_mm256_srai_epi16(_mm256_slli_epi16(v, 8), 1), m);
	*odd = _mm256_and_si256(_mm256_srai_epi16(v, 1), m);
}

A2_INLINE __m256 dec_f16_w(__m256i even, __m256i odd, const int q)
{
	__m256i v = q < 2 ? even : odd;
	return _mm256_cvtph_ps(q % 2 ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v));
}

/* all four: w[q] as above */
A2_INLINE void dec_all(const uint8_t *p, __m256 w[4], const int integer)
{
	__m256i e, o;
	if (integer)
		dec_int_split(p, &e, &o);
	else
		dec_f16_split(p, &e, &o);
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++)
		w[q] = integer ? dec_int_w(e, o, q) : dec_f16_w(e, o, q);
}

/* rows 0-7, 8-15 → the f16 decode's lanes: rows 0, 8, 1, 9, 2, 10, 3, 11 and 4, 12, ... 7, 15 */
A2_INLINE void to_f16_lanes(__m256 r0, __m256 r1, __m256 *a, __m256 *b)
{
	__m256 lo = _mm256_unpacklo_ps(r0, r1), hi = _mm256_unpackhi_ps(r0, r1);
	*a = _mm256_permute2f128_ps(lo, hi, 0x20);
	*b = _mm256_permute2f128_ps(lo, hi, 0x31);
}

/* the inverse: the f16 decode's lanes → rows 0-7, 8-15 */
A2_INLINE void from_f16_lanes(__m256 a, __m256 b, __m256 *r0, __m256 *r1)
{
	__m256 lo = _mm256_permute2f128_ps(a, b, 0x20), hi = _mm256_permute2f128_ps(a, b, 0x31);
	*r0 = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
	*r1 = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
}

/* the block's scales of segment g for its 32 rows, times 2^8 (the f16 decode's bias), in the
 * decode's lanes (f16: permuted) */
A2_INLINE void seg_scale(const float *sc, __m256 s[4], const int f16)
{
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++)
		s[q] = _mm256_mul_ps(_mm256_loadu_ps(sc + 8 * q), _mm256_set1_ps(256.0f));
	if (f16) {
		to_f16_lanes(s[0], s[1], &s[0], &s[1]);
		to_f16_lanes(s[2], s[3], &s[2], &s[3]);
	}
}

/* nb blocks (block b at wp + b bstride bytes, its scales at sc + b sstride), nt <= TD tokens,
 * decoding in the loop: tot[b + t][0..32) = Σ over the columns (nb = 2 only with nt = 1).
 * Pairs [0, np2) are whole; an odd last column (cols odd) is a half pair with x 0.
 * tiny (ops_cpu_denormals_fast): the integer decode, 2^-120 small, so token t's x is taken
 * times xs[t] = 2^S (S <= 112, x_scale) and its segment sums times us[t] = 2^(112 - S): those are
 * the sums of the f16 decode (2^-8 small, as the tiles have it), to the bit, since every
 * product and sum is only scaled by a power of 2 (for S < 112, a token with |x| >= 2^15,
 * while none of them falls under fp32's normal range). Each row sums its columns in order in
 * one chain, whatever the decode, lanes or blocks: a token's sums do not depend on its batch. */
A2_INLINE void block_stream_t(const uint8_t *wp, size_t bstride, const float *sc, size_t sstride, int cols, int seg,
			      const float *x, size_t ldx, const float *xs, const float *us, float *tot, const int nt,
			      const int nb, const int tiny)
{
	__m256 t8[TD][4];
#pragma GCC unroll 4
	for (int t = 0; t < nt * nb; t++)
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			t8[t][q] = _mm256_setzero_ps();
	int P = (cols + 1) / 2, full = cols / 2;
	for (int k0 = 0, g = 0; k0 < P; k0 += seg, g++) {
		int k1 = P - k0 < seg ? P : k0 + seg, kf = k1 < full ? k1 : full;
		__m256 a[TD][4]; /* [block or token][2 h + lane set] */
#pragma GCC unroll 4
		for (int t = 0; t < nt * nb; t++)
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++)
				a[t][q] = _mm256_setzero_ps();
		for (int p = k0; p < k1; p++) {
			__m256 x0[TD], x1[TD];
			stream_x_pair_avx2(x, ldx, p, kf, x0, x1, nt);
#pragma GCC unroll 2
			for (int t = 0; t < nt && tiny; t++) {
				x0[t] = _mm256_mul_ps(x0[t], _mm256_set1_ps(xs[t]));
				x1[t] = _mm256_mul_ps(x1[t], _mm256_set1_ps(xs[t]));
			}
#pragma GCC unroll 2
			for (int b = 0; b < nb; b++) {
				const uint8_t *s = wp + (size_t)b * bstride + (size_t)p * STEP;
				/* into L2 ahead of the stream: the DRAM trip overlaps the decode. With two
				 * blocks the first one's distance runs into the second, already read: it
				 * goes to the next pair's second block instead (the second's own runs into
				 * the next pair's first) */
				size_t ahead = PF + (nb == 2 && b == 0 && (size_t)p * STEP + PF >= bstride
							     ? 2 * bstride
							     : 0);
				__asm__ volatile("prefetcht1 %0" ::"m"(*(const char *)(s + ahead)));
#pragma GCC unroll 4
				for (int h = 0; h < 2; h++) {
					/* each row's chain: column 0 (q 0, 1), then column 1 (q 2, 3) */
					__m256i e, o;
					if (tiny)
						dec_int_split(s + 32 * h, &e, &o);
					else
						dec_f16_split(s + 32 * h, &e, &o);
#pragma GCC unroll 4
					for (int q = 0; q < 4; q++) {
						__m256 w = tiny ? dec_int_w(e, o, q) : dec_f16_w(e, o, q);
#pragma GCC unroll 2
						for (int t = 0; t < nt; t++)
							a[b + t][2 * h + q % 2] = _mm256_fmadd_ps(
								w, q < 2 ? x0[t] : x1[t], a[b + t][2 * h + q % 2]);
					}
				}
			}
		}
#pragma GCC unroll 2
		for (int b = 0; b < nb; b++) {
			__m256 s[4];
			seg_scale(sc + (size_t)b * sstride + (size_t)g * SR, s, !tiny);
#pragma GCC unroll 4
			for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
				for (int q = 0; q < 4; q++)
					t8[b + t][q] = _mm256_fmadd_ps(
						tiny ? _mm256_mul_ps(a[b + t][q], _mm256_set1_ps(us[t])) : a[b + t][q],
						s[q], t8[b + t][q]);
		}
	}
#pragma GCC unroll 4
	for (int t = 0; t < nt * nb; t++) {
		if (!tiny) {
			from_f16_lanes(t8[t][0], t8[t][1], &t8[t][0], &t8[t][1]);
			from_f16_lanes(t8[t][2], t8[t][3], &t8[t][2], &t8[t][3]);
		}
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			_mm256_storeu_ps(tot + (size_t)t * SR + 8 * q, t8[t][q]);
	}
}

/* one block, nt <= TD tokens, or with tiny and one token nb = 2 blocks: the second bstride
 * bytes and sstride scales past the first, its sums in tot[SR..2 SR) */
static A2 void block_stream(const uint8_t *wp, size_t bstride, const float *sc, size_t sstride, int cols, int seg,
			    const float *x, size_t ldx, const float *xs, const float *us, float *tot, int nt, int nb,
			    int tiny)
{
	if (tiny && nb == 2)
		block_stream_t(wp, bstride, sc, sstride, cols, seg, x, ldx, xs, us, tot, 1, 2, 1);
	else if (tiny && nt == 1)
		block_stream_t(wp, bstride, sc, sstride, cols, seg, x, ldx, xs, us, tot, 1, 1, 1);
	else if (tiny)
		block_stream_t(wp, bstride, sc, sstride, cols, seg, x, ldx, xs, us, tot, 2, 1, 1);
	else if (nt == 1)
		block_stream_t(wp, bstride, sc, sstride, cols, seg, x, ldx, xs, us, tot, 1, 1, 0);
	else
		block_stream_t(wp, bstride, sc, sstride, cols, seg, x, ldx, xs, us, tot, 2, 1, 0);
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

/* pairs [k0, k1) of a block → dec[c][32 rows] fp32 (2^-8 too small), c = 2 (p - k0) + i; the
 * integer decode times 2^112 where denormals are fast (fewer operations, the same values),
 * else the f16 one, its rows in that decode's lanes (block_tiles puts them back) */
static A2 void decode_seg(const uint8_t *wp, int k0, int k1, float *dec, int fast)
{
	for (int p = k0; p < k1; p++) {
		float *d = dec + (size_t)(p - k0) * 2 * SR;
#pragma GCC unroll 4
		for (int h = 0; h < 2; h++) {
			__m256 w[4];
			dec_all(wp + (size_t)p * STEP + 32 * h, w, fast);
#pragma GCC unroll 4
			for (int q = 0; q < 4 && fast; q++)
				w[q] = _mm256_mul_ps(w[q], _mm256_set1_ps(0x1p112f));
			_mm256_store_ps(d + 16 * h, w[0]);
			_mm256_store_ps(d + 16 * h + 8, w[1]);
			_mm256_store_ps(d + SR + 16 * h, w[2]);
			_mm256_store_ps(d + SR + 16 * h + 8, w[3]);
		}
	}
}

/* 32 values of a block in row order ↔ in the f16 decode's lanes (to: 1, back: 0) */
static A2 void permute_f16_lanes(const float *src, float *dst, int to)
{
	for (int h = 0; h < 2; h++) {
		__m256 a = _mm256_loadu_ps(src + 16 * h), b = _mm256_loadu_ps(src + 16 * h + 8);
		if (to)
			to_f16_lanes(a, b, &a, &b);
		else
			from_f16_lanes(a, b, &a, &b);
		_mm256_storeu_ps(dst + 16 * h, a);
		_mm256_storeu_ps(dst + 16 * h + 8, b);
	}
}

/* more than TD tokens: per block, each segment decoded once, then every token tile over it,
 * the first tile prefetching the next segment into L2 (without, DRAM idled while the tiles
 * ran and each decode waited on its misses)
 * (tot [n][32]: the block's sums of every token). The same order of sums as block_stream_t,
 * so a token's result does not depend on its batch. With the f16 decode the tiles run in its
 * lanes: the scales are permuted to them per segment, the sums back at the end. */
static void block_tiles(const uint8_t *wp, const float *sc, int cols, int seg, const struct gemm_job *j, float *tot,
			float *dec, int fast)
{
	_Alignas(32) float scp[SR];
	int P = (cols + 1) / 2;
	for (int k0 = 0, g = 0; k0 < P; k0 += seg, g++) {
		int k1 = P - k0 < seg ? P : k0 + seg, nc = (2 * k1 < cols ? 2 * k1 : cols) - 2 * k0;
		decode_seg(wp, k0, k1, dec, fast);
		if (!fast)
			permute_f16_lanes(sc + (size_t)g * SR, scp, 1);
		for (int t0 = 0; t0 < j->n; t0 += TILE_TT) {
			int nt = j->n - t0 < TILE_TT ? j->n - t0 : TILE_TT;
			/* the decode is 2^-8 small: x 256 with the scale */
			tile_avx2(dec, nc, j->x + (size_t)t0 * (size_t)j->ldx + 2 * (size_t)k0, (size_t)j->ldx,
				  fast ? sc + (size_t)g * SR : scp, 256.0f, g == 0, tot + (size_t)t0 * SR,
				  t0 ? NULL : (const char *)(wp + (size_t)k1 * STEP), STEP / 2, nt);
		}
	}
	for (int t = 0; t < j->n && !fast; t++)
		permute_f16_lanes(tot + (size_t)t * SR, tot + (size_t)t * SR, 0);
}

#define TOK_CHUNK 128 /* tokens per pass over a block: tot stays 16 KB of stack */

void gemm_panel_fp8_avx2(const struct gemm_job *j, int r0, int r1)
{
	const struct wmat *w = j->w;
	CHECK(r0 % SR == 0 && w->packed_kind == PREPACK_KIND_FP8_AVX2 && w->blk_c % 2 == 0 &&
	      w->blk_c <= 2 * PREPACK_FP8_SEG_PAIRS);
	int seg = w->blk_c / 2, S = prepack_segments(w), fast = ops_cpu_denormals_fast();
	size_t bstride = (size_t)w->packed_pairs * STEP, sstride = (size_t)S * SR;
	_Alignas(32) float tot[TOK_CHUNK * SR];
	_Alignas(32) float dec[2 * PREPACK_FP8_SEG_PAIRS * SR]; /* 16 KB */
	float xs[TD], us[TD];                                   /* the integer decode's x scales */
	int t_last = (j->n - 1) / TOK_CHUNK * TOK_CHUNK, tiny = j->n - t_last <= TD && fast;
	/* a last token chunk decoded in the loop: the integer decode. Each thread of the call takes
	 * x's maximum itself (cols floats a token against its rows x cols weight bytes) */
	for (int t = 0; tiny && t < j->n - t_last; t++)
		x_scale(j->x + (size_t)(t_last + t) * (size_t)j->ldx, w->cols, &xs[t], &us[t]);
	for (int rb = r0; rb < r1;) {
		int nr = r1 - rb < SR ? r1 - rb : SR;
		const uint8_t *wp = (const uint8_t *)(const void *)w->packed + (size_t)(rb / SR) * bstride;
		const float *sc = w->packed_scale + (size_t)(rb / SR) * sstride;
		if (j->n == 1 && tiny && rb + SR < r1) { /* one token: two blocks at a time */
			int nr2 = r1 - rb - SR < SR ? r1 - rb - SR : SR;
			block_stream(wp, bstride, sc, sstride, w->cols, seg, j->x, (size_t)j->ldx, xs, us, tot, 1, 2,
				     1);
			tile_store_rows(j->y + rb, (size_t)j->ldy, tot, 1, SR, j->accumulate);
			tile_store_rows(j->y + rb + SR, (size_t)j->ldy, tot + SR, 1, nr2, j->accumulate);
			rb += 2 * SR;
			continue;
		}
		for (int t0 = 0; t0 < j->n; t0 += TOK_CHUNK) {
			int n = j->n - t0 < TOK_CHUNK ? j->n - t0 : TOK_CHUNK;
			struct gemm_job jc = *j;
			jc.x = j->x + (size_t)t0 * (size_t)j->ldx;
			jc.n = n;
			if (n <= TD)
				block_stream(wp, bstride, sc, sstride, w->cols, seg, jc.x, (size_t)j->ldx, xs, us, tot,
					     n, 1, tiny);
			else
				block_tiles(wp, sc, w->cols, seg, &jc, tot, dec, fast);
			tile_store_rows(j->y + (size_t)t0 * (size_t)j->ldy + rb, (size_t)j->ldy, tot, n, nr,
					j->accumulate);
		}
		rb += SR;
	}
}
