/* v4_ix_int.h. A tile is 16 keys (32 at avx512), one per int16 lane: kt [di / 2][16] holds
 * each key's dim pair (2i, 2i + 1) as two bytes 2 e2m1 + 12 (0 .. 24, the pair being one packed
 * code byte); the query is packed once a call as int8 pairs broadcast to 32 bits. Per head and
 * block: 16 vpmaddubsw + vpaddw give sum (k_i + 12) q_i (|.| <= 32 x 24 x 12, an int16), less the
 * query's 12 sum q_i; that times 2^(key exp + query exp) (a float built from its exponent,
 * normal by the tile's check) is added to the head's float32 sum with one rounding, as the
 * float kernel adds its exact block sum. */
#include "model_v4/v4_ix_int.h"

#include <immintrin.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model_v4/fp4.h"

#define KB V4_IX_INT_KB
#define QB (V4_IX_INT_QMAX / 32) /* query blocks */
#define EXP_MIN (-126)           /* a block's product unit 2^(key exp + query exp) within these: */
#define EXP_MAX 114              /* normal, and its sums (< 2^13 units) finite */

/* everything here runs at the avx2 level or above (v4k_index_scores' dispatch) */
#pragma GCC target("avx2,fma")

#define INLINE static inline __attribute__((always_inline))
#define AVX2_FN

struct ix_query {
	uint32_t qp[V4_IX_INT_QMAX / 2]; /* [H][di / 2]: (q_2i, q_2i+1) int8s, twice */
	int16_t corr[QB];                /* [H][di / 32]: 12 sum q_i */
	int32_t eq[QB];                  /* [H][di / 32]: the block's exponent, shifted to a float's */
	double w[QB];
	int lo, hi;        /* the non-zero blocks' exponents' range */
	uint16_t lut[256]; /* a code byte -> its two dims' 2 e2m1 + 12 */
};

/* q's blocks as integers x 2^e, or -1 where one is not */
static int prep_query(int H, int di, const float *q, const float *w, struct ix_query *x)
{
	if (di <= 0 || di % 32 || di > V4K_MAX_DI || (size_t)H * (size_t)di > V4_IX_INT_QMAX)
		return -1;
	int nb = di / 32;
	x->lo = INT_MAX;
	x->hi = INT_MIN;
	for (int h = 0; h < H; h++) {
		x->w[h] = w[h];
		for (int b = 0; b < nb; b++) {
			const float *v = q + (size_t)h * (size_t)di + 32 * (size_t)b;
			float amax = 0;
			for (int i = 0; i < 32; i++)
				amax = fmaxf(amax, fabsf(v[i]));
			if (!(amax < INFINITY))
				return -1;
			int e = 1; /* a zero block: any exponent whose float stays finite for every key */
			if (amax > 0) {
				e = ilogbf(amax) - 3; /* amax / 2^e in [8, 16) */
				x->lo = e < x->lo ? e : x->lo;
				x->hi = e > x->hi ? e : x->hi;
			}
			int corr = 0;
			int8_t qi[32];
			for (int i = 0; i < 32; i++) {
				float t = ldexpf(v[i], -e);
				if (t != rintf(t) || fabsf(t) > 12)
					return -1;
				qi[i] = (int8_t)t;
				corr += 12 * qi[i];
			}
			for (int p = 0; p < 16; p++) {
				uint32_t pair = (uint8_t)qi[2 * p] | (uint32_t)(uint8_t)qi[2 * p + 1] << 8;
				x->qp[(size_t)h * (size_t)(di / 2) + 16 * (size_t)b + (size_t)p] = pair | pair << 16;
			}
			x->corr[h * nb + b] = (int16_t)corr;
			x->eq[h * nb + b] = (int32_t)((uint32_t)e << 23);
		}
	}
	if (x->lo > x->hi) /* all zero */
		x->lo = x->hi = 1;
	for (int c = 0; c < 256; c++) {
		int lo = (int)(2 * fp4_e2m1_to_f32((uint8_t)(c & 0xF))) + 12,
		    hi = (int)(2 * fp4_e2m1_to_f32((uint8_t)(c >> 4))) + 12;
		x->lut[c] = (uint16_t)(lo | hi << 8);
	}
	return 0;
}

/* keys e .. e + n - 1 into kt [di / 2][tw] and kx [di / 32][tw] ((key exp + 127 - 1) << 23: with
 * a block's query exponent added, the float 2^(key exp - 1 + query exp)); lanes past n key 0.
 * 0, or -1 where a key's exponents could leave [EXP_MIN, EXP_MAX] with the query's. */
static int tile_keys(const struct ix_query *x, const struct v4k_keys *k, int di, long e, int n, int tw, uint16_t *kt,
		     int32_t *kx)
{
	int np = di / 2, nb = di / 32;
	for (int j = 0; j < n; j++) {
		const uint8_t *codes = (const uint8_t *)k->rows[e + j], *exps = codes + np;
		for (int b = 0; b < nb; b++) {
			int ek = (int)exps[b] - 127 - 1; /* the key value's unit: 2 e2m1 x 2^ek */
			if (exps[b] == 0xFF || ek + x->lo < EXP_MIN || ek + x->hi > EXP_MAX)
				return -1;
			kx[b * tw + j] = (int32_t)((uint32_t)(ek + 127) << 23);
		}
		for (int p = 0; p < np; p++)
			kt[p * tw + j] = x->lut[codes[p]];
	}
	for (int j = n; j < tw; j++) {
		for (int b = 0; b < nb; b++)
			kx[b * tw + j] = 127 << 23;
		for (int p = 0; p < np; p++)
			kt[p * tw + j] = 12 | 12 << 8;
	}
	return 0;
}

/* G heads from h over a tile: sd[4] (keys 0-3, 4-7, 8-11, 12-15) += w_h relu(q_h . k), in order */
INLINE void tile_heads(int G, int h, int di, const struct ix_query *x, const uint16_t *kt, const int32_t *kx,
		       __m256d *sd)
{
	int np = di / 2, nb = di / 32;
	__m256 a[4][2];
	for (int u = 0; u < G; u++)
		a[u][0] = a[u][1] = _mm256_setzero_ps();
	for (int b = 0; b < nb; b++) {
		__m256i acc[4];
		for (int u = 0; u < G; u++)
			acc[u] = _mm256_setzero_si256();
		const uint32_t *qb = x->qp + (size_t)h * (size_t)np + 16 * (size_t)b;
#pragma GCC unroll 16
		for (int p = 0; p < 16; p++) {
			__m256i kv = _mm256_load_si256((const __m256i *)(kt + (size_t)(16 * b + p) * KB));
#pragma GCC unroll 4
			for (int u = 0; u < G; u++)
				acc[u] = _mm256_add_epi16(
					acc[u],
					_mm256_maddubs_epi16(kv, _mm256_set1_epi32((int)qb[(size_t)u * np + p])));
		}
		__m256i k0 = _mm256_load_si256((const __m256i *)(kx + b * KB)),
			k1 = _mm256_load_si256((const __m256i *)(kx + b * KB + 8));
#pragma GCC unroll 4
		for (int u = 0; u < G; u++) {
			int hb = (h + u) * nb + b;
			__m256i d = _mm256_sub_epi16(acc[u], _mm256_set1_epi16(x->corr[hb]));
			__m256i eq = _mm256_set1_epi32(x->eq[hb]);
			__m256 d0 = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(d)));
			__m256 d1 = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(d, 1)));
			a[u][0] = _mm256_fmadd_ps(d0, _mm256_castsi256_ps(_mm256_add_epi32(k0, eq)), a[u][0]);
			a[u][1] = _mm256_fmadd_ps(d1, _mm256_castsi256_ps(_mm256_add_epi32(k1, eq)), a[u][1]);
		}
	}
	const __m256 zero = _mm256_setzero_ps();
	for (int u = 0; u < G; u++) { /* relu (NaN and -0 to +0, as the float kernel's mask) */
		__m256d wu = _mm256_set1_pd(x->w[h + u]);
		__m256 r0 = _mm256_max_ps(a[u][0], zero), r1 = _mm256_max_ps(a[u][1], zero);
		sd[0] = _mm256_fmadd_pd(wu, _mm256_cvtps_pd(_mm256_castps256_ps128(r0)), sd[0]);
		sd[1] = _mm256_fmadd_pd(wu, _mm256_cvtps_pd(_mm256_extractf128_ps(r0, 1)), sd[1]);
		sd[2] = _mm256_fmadd_pd(wu, _mm256_cvtps_pd(_mm256_castps256_ps128(r1)), sd[2]);
		sd[3] = _mm256_fmadd_pd(wu, _mm256_cvtps_pd(_mm256_extractf128_ps(r1, 1)), sd[3]);
	}
}

INLINE long scores_body(int H, int di, const struct ix_query *x, const struct v4k_keys *k, long e0, long e1, double *s)
{
	uint16_t kt[V4K_MAX_DI / 2 * KB] __attribute__((aligned(32)));
	int32_t kx[V4K_MAX_DI / 32 * KB] __attribute__((aligned(32)));
	for (long e = e0; e < e1; e += KB) {
		int n = e1 - e < KB ? (int)(e1 - e) : KB;
		if (tile_keys(x, k, di, e, n, KB, kt, kx))
			return e - e0;
		__m256d sd[4];
		for (int i = 0; i < 4; i++)
			sd[i] = _mm256_setzero_pd();
		int h = 0;
		for (; h + 4 <= H; h += 4)
			tile_heads(4, h, di, x, kt, kx, sd);
		for (; h < H; h++)
			tile_heads(1, h, di, x, kt, kx, sd);
		double out[KB];
		for (int i = 0; i < 4; i++)
			_mm256_storeu_pd(out + 4 * i, sd[i]);
		memcpy(s + (e - e0), out, sizeof(double) * (size_t)n);
	}
	return e1 - e0;
}

#define KB2 (2 * KB) /* keys of an AVX-512 tile: 32 int16 lanes */

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")

/* tile_heads on a 32-key tile (kt [di / 2][32], kx [di / 32][32]): sd[4] keys 0-7 .. 24-31 */
INLINE void tile_heads512(int G, int h, int di, const struct ix_query *x, const uint16_t *kt, const int32_t *kx,
			  __m512d *sd)
{
	int np = di / 2, nb = di / 32;
	__m512 a[4][2];
	for (int u = 0; u < G; u++)
		a[u][0] = a[u][1] = _mm512_setzero_ps();
	for (int b = 0; b < nb; b++) {
		__m512i acc[4];
		for (int u = 0; u < G; u++)
			acc[u] = _mm512_setzero_si512();
		const uint32_t *qb = x->qp + (size_t)h * (size_t)np + 16 * (size_t)b;
#pragma GCC unroll 16
		for (int p = 0; p < 16; p++) {
			__m512i kv = _mm512_load_si512((const void *)(kt + (size_t)(16 * b + p) * KB2));
#pragma GCC unroll 4
			for (int u = 0; u < G; u++)
				acc[u] = _mm512_add_epi16(
					acc[u],
					_mm512_maddubs_epi16(kv, _mm512_set1_epi32((int)qb[(size_t)u * np + p])));
		}
		__m512i k0 = _mm512_load_si512((const void *)(kx + b * KB2)),
			k1 = _mm512_load_si512((const void *)(kx + b * KB2 + 16));
#pragma GCC unroll 4
		for (int u = 0; u < G; u++) {
			int hb = (h + u) * nb + b;
			__m512i d = _mm512_sub_epi16(acc[u], _mm512_set1_epi16(x->corr[hb]));
			__m512i eq = _mm512_set1_epi32(x->eq[hb]);
			__m512 d0 = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(d)));
			__m512 d1 = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(d, 1)));
			a[u][0] = _mm512_fmadd_ps(d0, _mm512_castsi512_ps(_mm512_add_epi32(k0, eq)), a[u][0]);
			a[u][1] = _mm512_fmadd_ps(d1, _mm512_castsi512_ps(_mm512_add_epi32(k1, eq)), a[u][1]);
		}
	}
	const __m512 zero = _mm512_setzero_ps();
	for (int u = 0; u < G; u++) {
		__m512d wu = _mm512_set1_pd(x->w[h + u]);
		__m512 r0 = _mm512_max_ps(a[u][0], zero), r1 = _mm512_max_ps(a[u][1], zero);
		sd[0] = _mm512_fmadd_pd(wu, _mm512_cvtps_pd(_mm512_castps512_ps256(r0)), sd[0]);
		sd[1] = _mm512_fmadd_pd(
			wu, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(r0), 1))), sd[1]);
		sd[2] = _mm512_fmadd_pd(wu, _mm512_cvtps_pd(_mm512_castps512_ps256(r1)), sd[2]);
		sd[3] = _mm512_fmadd_pd(
			wu, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(r1), 1))), sd[3]);
	}
}

static long scores_avx512(int H, int di, const struct ix_query *x, const struct v4k_keys *k, long e0, long e1,
			  double *s)
{
	uint16_t kt[V4K_MAX_DI / 2 * KB2] __attribute__((aligned(64)));
	int32_t kx[V4K_MAX_DI / 32 * KB2] __attribute__((aligned(64)));
	for (long e = e0; e < e1; e += KB2) {
		int n = e1 - e < KB2 ? (int)(e1 - e) : KB2;
		if (tile_keys(x, k, di, e, n, KB2, kt, kx))
			return e - e0;
		__m512d sd[4];
		for (int i = 0; i < 4; i++)
			sd[i] = _mm512_setzero_pd();
		int h = 0;
		for (; h + 4 <= H; h += 4)
			tile_heads512(4, h, di, x, kt, kx, sd);
		for (; h < H; h++)
			tile_heads512(1, h, di, x, kt, kx, sd);
		double out[KB2];
		for (int i = 0; i < 4; i++)
			_mm512_storeu_pd(out + 8 * i, sd[i]);
		memcpy(s + (e - e0), out, sizeof(double) * (size_t)n);
	}
	return e1 - e0;
}
#pragma GCC pop_options

AVX2_FN static long scores_avx2(int H, int di, const struct ix_query *x, const struct v4k_keys *k, long e0, long e1,
				double *s)
{
	return scores_body(H, di, x, k, e0, e1, s);
}

long v4k_ix_int_scores(int avx512, int H, int di, const float *q, const float *w, const struct v4k_keys *k, long e0,
		       long e1, double *s)
{
	struct ix_query x __attribute__((aligned(32)));
	if (prep_query(H, di, q, w, &x))
		return -1;
	return avx512 ? scores_avx512(H, di, &x, k, e0, e1, s) : scores_avx2(H, di, &x, k, e0, e1, s);
}
