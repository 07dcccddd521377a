/* The indexer's scoring kernels (see indexer_kernels.h): portable, AVX2, AVX-512 in fp32 with
 * gathers for the fp8 decode; at avx512_bf16, bf16 pairs through vdpbf16ps (the fp8 values
 * and the dequantized q are exact in bf16, so only the summation order differs). */
#include "attn/kernels/indexer_kernels.h"

#include <immintrin.h>
#include <string.h>

#include "base/dtype.h"
#include "ops/fp8_512.h"

/* s[j] = sum_h w[h] * relu(q[h] . kt[:, j]) for the IX_KB keys of kt [dim][IX_KB] (decoded keys,
 * transposed): each key in its own lane, its dot product summed over d in order, then over
 * h in order, so that a key's score does not depend on the keys scored beside it */
static void dots_portable(const float *q, const uint16_t *qb, const float *w, int H, int dim, const void *ktv,
			  float *s)
{
	const float *kt = ktv;
	(void)qb;
	for (int j = 0; j < IX_KB; j++)
		s[j] = 0;
	for (int h = 0; h < H; h++) {
		float dot[IX_KB] = {0};
		const float *qh = q + (size_t)h * dim;
		for (int d = 0; d < dim; d++)
			for (int j = 0; j < IX_KB; j++)
				dot[j] += qh[d] * kt[d * IX_KB + j];
		for (int j = 0; j < IX_KB; j++)
			if (dot[j] > 0)
				s[j] += w[h] * dot[j];
	}
}

#define AVX2_FN __attribute__((target("avx2,fma")))
#define AVX512_FN __attribute__((target("avx512f,fma")))

/* s0 / s1 += w * relu(a0 / a1): one head's dot products of the block's two key vectors into
 * the scores (every 512-bit kernel) */
static inline __attribute__((always_inline)) AVX512_FN void relu_acc(float w, __m512 a0, __m512 a1, __m512 *s0,
								     __m512 *s1)
{
	__m512 wv = _mm512_set1_ps(w), z = _mm512_setzero_ps();
	*s0 = _mm512_fmadd_ps(wv, _mm512_max_ps(a0, z), *s0);
	*s1 = _mm512_fmadd_ps(wv, _mm512_max_ps(a1, z), *s1);
}

/* the same with fused multiply-adds, 4 heads at a time (8 independent accumulators, named so
 * that they stay in registers) */
AVX512_FN static void dots_avx512(const float *q, const uint16_t *qb, const float *w, int H, int dim, const void *ktv,
				  float *s)
{
	const float *kt = ktv;
	(void)qb;
	__m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), z = _mm512_setzero_ps();
	int h = 0;
	for (; h + 4 <= H; h += 4) {
		__m512 a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
		const float *q0 = q + (size_t)h * dim, *q1 = q0 + dim, *q2 = q1 + dim, *q3 = q2 + dim;
		for (int d = 0; d < dim; d++) {
			__m512 k0 = _mm512_load_ps(kt + d * IX_KB), k1 = _mm512_load_ps(kt + d * IX_KB + 16);
			__m512 b0 = _mm512_set1_ps(q0[d]), b1 = _mm512_set1_ps(q1[d]);
			__m512 b2 = _mm512_set1_ps(q2[d]), b3 = _mm512_set1_ps(q3[d]);
			a00 = _mm512_fmadd_ps(b0, k0, a00);
			a01 = _mm512_fmadd_ps(b0, k1, a01);
			a10 = _mm512_fmadd_ps(b1, k0, a10);
			a11 = _mm512_fmadd_ps(b1, k1, a11);
			a20 = _mm512_fmadd_ps(b2, k0, a20);
			a21 = _mm512_fmadd_ps(b2, k1, a21);
			a30 = _mm512_fmadd_ps(b3, k0, a30);
			a31 = _mm512_fmadd_ps(b3, k1, a31);
		}
		relu_acc(w[h], a00, a01, &s0, &s1);
		relu_acc(w[h + 1], a10, a11, &s0, &s1);
		relu_acc(w[h + 2], a20, a21, &s0, &s1);
		relu_acc(w[h + 3], a30, a31, &s0, &s1);
	}
	for (; h < H; h++) {
		__m512 a0 = z, a1 = z;
		const float *qh = q + (size_t)h * dim;
		for (int d = 0; d < dim; d++) {
			__m512 b = _mm512_set1_ps(qh[d]);
			a0 = _mm512_fmadd_ps(b, _mm512_load_ps(kt + d * IX_KB), a0);
			a1 = _mm512_fmadd_ps(b, _mm512_load_ps(kt + d * IX_KB + 16), a1);
		}
		relu_acc(w[h], a0, a1, &s0, &s1);
	}
	_mm512_storeu_ps(s, s0);
	_mm512_storeu_ps(s + 16, s1);
}

AVX2_FN static void dots_avx2(const float *q, const uint16_t *qb, const float *w, int H, int dim, const void *ktv,
			      float *s)
{
	const float *kt = ktv;
	(void)qb;
	__m256 z = _mm256_setzero_ps(), acc[4] = {z, z, z, z};
	for (int h = 0; h < H; h++) {
		__m256 a[4] = {z, z, z, z};
		const float *qh = q + (size_t)h * dim;
		for (int d = 0; d < dim; d++) {
			__m256 b = _mm256_set1_ps(qh[d]);
			for (int v = 0; v < 4; v++)
				a[v] = _mm256_fmadd_ps(b, _mm256_load_ps(kt + d * IX_KB + 8 * v), a[v]);
		}
		__m256 wv = _mm256_set1_ps(w[h]);
		for (int v = 0; v < 4; v++)
			acc[v] = _mm256_fmadd_ps(wv, _mm256_max_ps(a[v], z), acc[v]);
	}
	for (int v = 0; v < 4; v++)
		_mm256_storeu_ps(s + 8 * v, acc[v]);
}


/* kt [dim][IX_KB] = the n (<= IX_KB) keys at code offsets off[j] from base (scales sc[j]) decoded
 * to fp32, transposed; columns past n are 0 */
static void decode_portable(const uint8_t *base, const int32_t *off, const float *const *sc, int n, int dim, int group,
			    void *ktv)
{
	float *kt = ktv;
	for (int j = 0; j < IX_KB; j++)
		for (int d = 0; d < dim; d++)
			kt[d * IX_KB + j] = j < n ? fp8_e4m3_to_f32(base[off[j] + d]) * sc[j][d / group] : 0.0f;
}

/* the same with gathers: a code byte of 16 keys at once (4 bytes read, the cache is padded),
 * then its table value */
AVX512_FN static void decode_avx512(const uint8_t *base, const int32_t *off, const float *const *sc, int n, int dim,
				    int group, void *ktv)
{
	float *kt = ktv;
	for (int v = 0; v < IX_KB / 16; v++) {
		int32_t o[16];
		float scale[16];
		__mmask16 live = 0;
		for (int j = 0; j < 16; j++) {
			bool in = v * 16 + j < n;
			o[j] = in ? off[v * 16 + j] : 0;
			live |= (__mmask16)(in << j);
		}
		__m512i ov = _mm512_loadu_si512(o), lo = _mm512_set1_epi32(0xff);
		for (int g0 = 0; g0 < dim; g0 += group) {
			for (int j = 0; j < 16; j++)
				scale[j] = v * 16 + j < n ? sc[v * 16 + j][g0 / group] : 0.0f;
			__m512 sv = _mm512_loadu_ps(scale);
			for (int d = g0; d < g0 + group; d++) {
				__m512i c = _mm512_and_si512(
					_mm512_i32gather_epi32(_mm512_add_epi32(ov, _mm512_set1_epi32(d)),
							       (const void *)base, 1),
					lo);
				__m512 x = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, c, fp8_e4m3_table, 4);
				_mm512_store_ps(kt + d * IX_KB + v * 16, _mm512_mul_ps(x, sv));
			}
		}
	}
}

AVX2_FN static void decode_avx2(const uint8_t *base, const int32_t *off, const float *const *sc, int n, int dim,
				int group, void *ktv)
{
	float *kt = ktv;
	for (int v = 0; v < IX_KB / 8; v++) {
		int32_t o[8], live[8];
		float scale[8];
		for (int j = 0; j < 8; j++) {
			bool in = v * 8 + j < n;
			o[j] = in ? off[v * 8 + j] : 0;
			live[j] = in ? -1 : 0;
		}
		__m256i ov = _mm256_loadu_si256((const __m256i *)o), lo = _mm256_set1_epi32(0xff);
		__m256 mask = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)live));
		for (int g0 = 0; g0 < dim; g0 += group) {
			for (int j = 0; j < 8; j++)
				scale[j] = v * 8 + j < n ? sc[v * 8 + j][g0 / group] : 0.0f;
			__m256 sv = _mm256_loadu_ps(scale);
			for (int d = g0; d < g0 + group; d++) {
				__m256i c = _mm256_and_si256(
					_mm256_i32gather_epi32((const int *)(const void *)base,
							       _mm256_add_epi32(ov, _mm256_set1_epi32(d)), 1),
					lo);
				__m256 x = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), fp8_e4m3_table, c, mask, 4);
				_mm256_store_ps(kt + d * IX_KB + v * 8, _mm256_mul_ps(x, sv));
			}
		}
	}
}

/* ---- bf16 pairs (AVX512_BF16): kt [dim/2][IX_KB] 32-bit words (k[2p] | k[2p+1] << 16) ---- */
#define BF16_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

/* 16 rows of 16 32-bit lanes transposed in place (r[i] lane j <-> r[j] lane i) */
static inline __attribute__((always_inline)) BF16_FN void transpose16(__m512i r[16])
{
	__m512i t[16], u[16];
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
	}
	for (int i = 0; i < 16; i += 4) {
		u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
		u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
		u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
		u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
	}
	/* u[4k + m] holds, in each 128-bit chunk c, lanes 4c..4c+3 of column m of rows 4k..4k+3 */
	for (int i = 0; i < 4; i++) {
		__m512i a = _mm512_shuffle_i32x4(u[i], u[4 + i], 0x88), b = _mm512_shuffle_i32x4(u[i], u[4 + i], 0xdd);
		__m512i c = _mm512_shuffle_i32x4(u[8 + i], u[12 + i], 0x88),
			d = _mm512_shuffle_i32x4(u[8 + i], u[12 + i], 0xdd);
		r[i] = _mm512_shuffle_i32x4(a, c, 0x88);
		r[i + 8] = _mm512_shuffle_i32x4(a, c, 0xdd);
		r[i + 4] = _mm512_shuffle_i32x4(b, d, 0x88);
		r[i + 12] = _mm512_shuffle_i32x4(b, d, 0xdd);
	}
}

/* each key's row decoded 32 values at a time (fp8_512_decode: bf16 bits, so that a 32-bit
 * lane is a pair), then 16 keys x 16 pairs at a time transposed into kt [dim/2][IX_KB] */
BF16_FN static void decode_pairs(const uint8_t *base, const int32_t *off, const float *const *sc, int n, int dim,
				 int group, void *ktv)
{
	uint32_t *kt = ktv;
	__m512i sub = fp8_512_table(), zero = _mm512_setzero_si512();
	for (int v = 0; v < IX_KB / 16; v++)
		for (int p0 = 0; p0 < dim / 2; p0 += 16) { /* 16 pairs = 32 values of each key */
			__m512i r[16];
			for (int j = 0; j < 16; j++) {
				int key = v * 16 + j;
				r[j] = key < n ? fp8_512_decode(_mm512_cvtepu8_epi16(_mm256_loadu_si256(
									(const __m256i *)(base + off[key] + 2 * p0))),
								sub)
					       : zero;
			}
			transpose16(r);
			for (int p = 0; p < 16; p++)
				_mm512_store_si512(kt + (size_t)(p0 + p) * IX_KB + v * 16, r[p]);
		}
}

BF16_FN static void dots_pairs(const float *q, const uint16_t *qb, const float *w, int H, int dim, const void *ktv,
			       float *s)
{
	const uint32_t *kt = ktv;
	const uint32_t *q2 = (const uint32_t *)(const void *)qb; /* [H][dim/2] pairs */
	int P = dim / 2;
	__m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), z = _mm512_setzero_ps();
	int h = 0;
#define DP(acc, b, k) acc = _mm512_dpbf16_ps(acc, (__m512bh)(b), (__m512bh)(k))
	for (; h + 4 <= H; h += 4) {
		__m512 a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
		const uint32_t *r0 = q2 + (size_t)h * P, *r1 = r0 + P, *r2 = r1 + P, *r3 = r2 + P;
		for (int p = 0; p < P; p++) {
			__m512i k0 = _mm512_load_si512(kt + (size_t)p * IX_KB),
				k1 = _mm512_load_si512(kt + (size_t)p * IX_KB + 16);
			__m512i b0 = _mm512_set1_epi32((int)r0[p]), b1 = _mm512_set1_epi32((int)r1[p]);
			__m512i b2 = _mm512_set1_epi32((int)r2[p]), b3 = _mm512_set1_epi32((int)r3[p]);
			DP(a00, b0, k0);
			DP(a01, b0, k1);
			DP(a10, b1, k0);
			DP(a11, b1, k1);
			DP(a20, b2, k0);
			DP(a21, b2, k1);
			DP(a30, b3, k0);
			DP(a31, b3, k1);
		}
		relu_acc(w[h], a00, a01, &s0, &s1);
		relu_acc(w[h + 1], a10, a11, &s0, &s1);
		relu_acc(w[h + 2], a20, a21, &s0, &s1);
		relu_acc(w[h + 3], a30, a31, &s0, &s1);
	}
	for (; h < H; h++) {
		__m512 a0 = z, a1 = z;
		const uint32_t *r = q2 + (size_t)h * P;
		for (int p = 0; p < P; p++) {
			__m512i b = _mm512_set1_epi32((int)r[p]);
			DP(a0, b, _mm512_load_si512(kt + (size_t)p * IX_KB));
			DP(a1, b, _mm512_load_si512(kt + (size_t)p * IX_KB + 16));
		}
		relu_acc(w[h], a0, a1, &s0, &s1);
	}
#undef DP
	(void)q;
	_mm512_storeu_ps(s, s0);
	_mm512_storeu_ps(s + 16, s1);
}

void ix_q_to_bf16(const float *q, int n, uint16_t *out)
{
	for (int i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &q[i], 4);
		out[i] = (uint16_t)(u >> 16); /* exact: an fp8 value times a power of two */
	}
}

struct ix_kernels ix_kernels_for(enum ops_level l, int dim, int group)
{
	if (l >= OPS_AVX512_BF16 && group == dim && dim % 32 == 0)
		return (struct ix_kernels){decode_pairs, dots_pairs, true};
	if (l >= OPS_AVX512)
		return (struct ix_kernels){decode_avx512, dots_avx512, false};
	if (l >= OPS_AVX2)
		return (struct ix_kernels){decode_avx2, dots_avx2, false};
	return (struct ix_kernels){decode_portable, dots_portable, false};
}
