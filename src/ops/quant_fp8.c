#include "ops/quant_fp8.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/dtype.h"
#include "ops/cpu.h"
#include "ops/pool.h"

#define QMAX 448.0f /* the largest e4m3fn value */

struct qctx {
	const struct wmat *src;
	int r0, nr, c0, nc, blk, scale_ld;
	uint8_t *q;
	float *scale;
	int vec; /* bf16 rows by 8 lanes (AVX2 and up): the same bytes as the scalar code */
};

#define A2 __attribute__((target("avx2")))

/* 8 bf16 weights as floats */
A2 static inline __m256 load8_bf16(const uint16_t *p)
{
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const void *)p)), 16));
}

/* max |w| over n (a multiple of 8) bf16 weights; *finite cleared by a NaN or infinity */
A2 static float amax_bf16_avx2(const uint16_t *p, int n, int *finite)
{
	__m256 m = _mm256_setzero_ps(), big = _mm256_set1_ps(FLT_MAX),
	       mag = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	int ok = 0xff;
	for (int j = 0; j < n; j += 8) {
		__m256 a = _mm256_and_ps(load8_bf16(p + j), mag);
		ok &= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_LE_OQ));
		m = _mm256_max_ps(m, a);
	}
	*finite &= ok == 0xff;
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	return _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
}

/* f32_to_fp8_e4m3(w / s) of n (a multiple of 8) bf16 weights, lane by lane */
A2 static void encode_bf16_avx2(const uint16_t *p, int n, float s, uint8_t *out)
{
	const __m256 sv = _mm256_set1_ps(s), magic = _mm256_set1_ps(8388608.0f), k512 = _mm256_set1_ps(512.0f);
	const __m256i mag = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1);
	for (int j = 0; j < n; j += 8) {
		__m256 v = _mm256_div_ps(load8_bf16(p + j), sv);
		__m256i u = _mm256_castps_si256(v), a = _mm256_and_si256(u, mag);
		__m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80));
		/* normal: the mantissa rounded to 3 bits, nearest even */
		__m256i r = _mm256_add_epi32(_mm256_add_epi32(a, _mm256_set1_epi32(0x7ffff)),
					     _mm256_and_si256(_mm256_srli_epi32(a, 20), one));
		r = _mm256_and_si256(r, _mm256_set1_epi32(~0xfffff));
		__m256i nb = _mm256_or_si256(
			_mm256_slli_epi32(_mm256_sub_epi32(_mm256_srli_epi32(r, 23), _mm256_set1_epi32(120)), 3),
			_mm256_and_si256(_mm256_srli_epi32(r, 20), _mm256_set1_epi32(7)));
		/* subnormal: |v| x 512 rounded by the float adder */
		__m256 m = _mm256_mul_ps(_mm256_castsi256_ps(a), k512);
		__m256i sb = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(m, magic), magic));
		/* a is at most 0x7fffffff: signed compares are right */
		__m256i b = _mm256_blendv_epi8(nb, sb, _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3c800000), a));
		b = _mm256_blendv_epi8(b, _mm256_set1_epi32(0x7e),
				       _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x43e80000)));
		b = _mm256_blendv_epi8(b, _mm256_set1_epi32(0x7f),
				       _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)));
		b = _mm256_or_si256(b, sign); /* 0-255 per dword: packed to bytes per 128-bit lane */
		__m256i b8 = _mm256_packus_epi16(_mm256_packus_epi32(b, b), _mm256_packus_epi32(b, b));
		uint32_t lo = (uint32_t)_mm256_cvtsi256_si32(b8),
			 hi = (uint32_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(b8, 1));
		memcpy(out + j, &lo, 4);
		memcpy(out + j + 4, &hi, 4);
	}
}

/* n weights of src's row r from column c as floats */
static void load_row(const struct wmat *src, int r, int c, int n, float *out)
{
	const char *p = (const char *)src->data + ((size_t)r * (size_t)src->ld + (size_t)c) * dtype_size(src->dtype);
	if (src->dtype == DT_F32) {
		memcpy(out, p, sizeof(float) * (size_t)n);
		return;
	}
	for (int j = 0; j < n; j++) {
		uint16_t h;
		memcpy(&h, p + 2 * (size_t)j, 2);
		out[j] = src->dtype == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
	}
}

/* Block rows [begin, end) of the region: each block's amax, then its bytes */
static void quant_block_rows(void *arg, int begin, int end, int tid)
{
	(void)tid;
	const struct qctx *c = arg;
	int blk = c->blk;
	float buf[blk];
	for (int br = begin; br < end; br++) {
		int ra = c->r0 + br * blk, rb = ra + blk < c->r0 + c->nr ? ra + blk : c->r0 + c->nr;
		for (int ca = c->c0; ca < c->c0 + c->nc; ca += blk) {
			int w = ca + blk < c->c0 + c->nc ? blk : c->c0 + c->nc - ca;
			float amax = 0.0f;
			int finite = 1;
			int wv = c->vec ? w / 8 * 8 : 0; /* columns the vector code takes */
			for (int r = ra; r < rb; r++) {
				const uint16_t *row = (const uint16_t *)c->src->data + (size_t)r * (size_t)c->src->ld +
						      ca;
				if (wv) {
					float m = amax_bf16_avx2(row, wv, &finite);
					amax = m > amax ? m : amax;
				}
				load_row(c->src, r, ca + wv, w - wv, buf);
				for (int j = 0; j < w - wv; j++) {
					float a = fabsf(buf[j]);
					finite &= a <= FLT_MAX; /* false for NaN and infinities */
					amax = a > amax ? a : amax;
				}
			}
			float s = amax / QMAX;
			s = s > 0.0f ? s : 1.0f; /* an all-zero block (or one too small to scale) */
			c->scale[(size_t)(ra / blk) * (size_t)c->scale_ld + (size_t)(ca / blk)] = finite ? s : NAN;
			if (!finite)
				continue;
			for (int r = ra; r < rb; r++) {
				uint8_t *out = c->q + (size_t)(r - c->r0) * (size_t)c->nc + (size_t)(ca - c->c0);
				const uint16_t *row = (const uint16_t *)c->src->data + (size_t)r * (size_t)c->src->ld +
						      ca;
				if (wv)
					encode_bf16_avx2(row, wv, s, out);
				load_row(c->src, r, ca + wv, w - wv, buf);
				for (int j = 0; j < w - wv; j++)
					out[wv + j] = f32_to_fp8_e4m3(buf[j] / s);
			}
		}
	}
}

int quant_fp8_blocks(struct pool *p, const struct wmat *src, int r0, int nr, int c0, int nc, int blk, uint8_t *q,
		     float *scale, int *bad_r, int *bad_c)
{
	struct qctx c = {src,
			 r0,
			 nr,
			 c0,
			 nc,
			 blk,
			 (src->cols + blk - 1) / blk,
			 q,
			 scale,
			 src->dtype == DT_BF16 && ops_level_best() >= OPS_AVX2};
	int nbr = (nr + blk - 1) / blk;
	pool_for(p, nbr, 1, quant_block_rows, &c);
	/* a non-finite block's scale is NaN: name its first bad weight */
	for (int r = r0; r < r0 + nr; r++)
		for (int ca = c0; ca < c0 + nc; ca += blk) {
			if (!isnan(scale[(size_t)(r / blk) * (size_t)c.scale_ld + (size_t)(ca / blk)]))
				continue;
			int w = ca + blk < c0 + nc ? blk : c0 + nc - ca;
			float buf[blk];
			load_row(src, r, ca, w, buf);
			for (int j = 0; j < w; j++)
				if (!(fabsf(buf[j]) <= FLT_MAX)) {
					*bad_r = r;
					*bad_c = ca + j;
					return -1;
				}
		}
	return 0;
}
