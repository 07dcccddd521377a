/* Packing of weights at load (layout: ops/prepack.h): the entry points, which ask the weight's
 * format (ops/wformat.h), bf16's packer (fp8's: wf_fp8.c), and f32 values packed as bf16 for
 * the prefill attention. It runs once per weight, over the pool's threads by 32-row blocks. */
#include "ops/prepack.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/err.h"
#include "base/log.h"
#include "ops/bf16_512.h"
#include "ops/cpu.h"
#include "ops/gemm_internal.h"
#include "ops/pool.h"
#include "ops/tr16_512.h"
#include "ops/wformat.h"

static size_t blocks_of(const struct wmat *w) { return (size_t)((w->rows + PREPACK_ROWS - 1) / PREPACK_ROWS); }

size_t prepack_value_bytes(const struct wmat *w)
{
	size_t b = blocks_of(w) * (size_t)prepack_pairs(w->cols) *
		   (size_t)prepack_words_per_pair(wformat_of(w->dtype)->bits) * 4;
	return (b + 63) & ~(size_t)63;
}

size_t prepack_bytes(const struct wmat *w)
{
	const struct wformat *f = wformat_of(w->dtype);
	return f && f->prepack_bytes ? f->prepack_bytes(w) : 0;
}

/* MLASERVE_PREPACK=0 keeps the weights as loaded: half the memory for bf16 checkpoints loaded
 * with --load-format dummy (a real checkpoint's mapping is page cache the kernel can drop),
 * and A/B runs against the row-dot kernels. */
static bool prepack_enabled(void)
{
	static atomic_int cached = -1;
	int v = atomic_load_explicit(&cached, memory_order_relaxed);
	if (v < 0) {
		const char *s = env_get(ENV_PREPACK);
		v = !s || !*s || strcmp(s, "0") != 0;
		if (s && *s && strcmp(s, "0") && strcmp(s, "1"))
			LOG_W("ops", "MLASERVE_PREPACK=%s is neither 0 nor 1: ignored, packing", s);
		atomic_store_explicit(&cached, v, memory_order_relaxed);
	}
	return v;
}

bool prepack_wanted(const struct wmat *w, bool act_bf16)
{
	const struct wformat *f = wformat_of(w->dtype);
	if (w->rows <= 0 || w->cols <= 0 || !prepack_enabled() || !f || !f->prepack_wanted)
		return false;
	return f->prepack_wanted(w, act_bf16);
}

bool prepack_level_wants(bool act_bf16)
{
	enum ops_level l = ops_level_best();
	return l == OPS_AVX2 || (act_bf16 && l >= OPS_AVX512_BF16); /* AVX2: fp32 FMAs, any activations */
}

struct pack_ctx {
	const struct wmat *w;
	uint32_t *dst;
};

/* AVX-512: 16 rows x 16 pairs at a time, loaded as 16 rows of 32 bf16 (zero past the
 * columns or the rows) and transposed as 32-bit words, so that each pair step is stored
 * whole: the scalar loop took seconds for a multi-GB model. */
static __attribute__((target("avx512f,avx512bw"))) void pack_block_avx512(const struct wmat *w, int b, uint32_t *d)
{
	size_t P = (size_t)((w->cols + 1) / 2);
	for (size_t p = P; p < (size_t)prepack_pairs(w->cols); p++) { /* the pad */
		_mm512_store_si512(d + p * PREPACK_ROWS, _mm512_setzero_si512());
		_mm512_store_si512(d + p * PREPACK_ROWS + 16, _mm512_setzero_si512());
	}
	int nrow = w->rows - b * PREPACK_ROWS < PREPACK_ROWS ? w->rows - b * PREPACK_ROWS : PREPACK_ROWS;
	for (int c = 0; c < w->cols; c += 32) {
		__mmask32 m = w->cols - c >= 32 ? 0xffffffffu : (__mmask32)((1u << (w->cols - c)) - 1);
		size_t np = P - (size_t)c / 2 < 16 ? P - (size_t)c / 2 : 16;
		for (int half = 0; half < 2; half++) {
			__m512i r[16];
			for (int i = 0; i < 16; i++) {
				int row = half * 16 + i;
				const uint16_t *src = (const uint16_t *)w->data +
						      (size_t)(b * PREPACK_ROWS + row) * (size_t)w->ld;
				r[i] = row < nrow ? _mm512_maskz_loadu_epi16(m, src + c) : _mm512_setzero_si512();
			}
			tr16(r); /* r[p]: pair c/2 + p of the 16 rows */
			for (size_t p = 0; p < np; p++)
				_mm512_store_si512(d + ((size_t)c / 2 + p) * PREPACK_ROWS + (size_t)half * 16, r[p]);
		}
	}
}

/* AVX2: 8 rows x 8 pairs at a time (32 bytes of each row), transposed as 32-bit words, so that
 * each pair step's 8 rows are stored whole; the pairs past the last 8 whole ones (an odd last
 * column among them) word by word. Several times the scalar loop. */
#define A2_PACK_FN __attribute__((target("avx2")))
static A2_PACK_FN void pack_block_avx2(const struct wmat *w, int b, uint32_t *d)
{
	size_t P = (size_t)((w->cols + 1) / 2), PP = (size_t)prepack_pairs(w->cols), full = (size_t)w->cols / 2;
	memset(d + P * PREPACK_ROWS, 0, (PP - P) * PREPACK_ROWS * sizeof(uint32_t)); /* the pad */
	int nrow = w->rows - b * PREPACK_ROWS < PREPACK_ROWS ? w->rows - b * PREPACK_ROWS : PREPACK_ROWS;
	size_t vec = full / 8 * 8; /* pairs packed 8 at a time */
	for (int g = 0; g < PREPACK_ROWS / 8; g++) {
		const uint16_t *src[8];
		for (int i = 0; i < 8; i++) {
			int row = g * 8 + i;
			src[i] = row < nrow
					 ? (const uint16_t *)w->data + (size_t)(b * PREPACK_ROWS + row) * (size_t)w->ld
					 : NULL;
		}
		for (size_t p = 0; p < vec; p += 8) {
			__m256i r[8];
			for (int i = 0; i < 8; i++)
				r[i] = src[i] ? _mm256_loadu_si256((const __m256i *)(const void *)(src[i] + 2 * p))
					      : _mm256_setzero_si256();
			/* 8x8 transpose of 32-bit words: t[i] = word p + i of the 8 rows */
			__m256i a0 = _mm256_unpacklo_epi32(r[0], r[1]), a1 = _mm256_unpackhi_epi32(r[0], r[1]);
			__m256i a2 = _mm256_unpacklo_epi32(r[2], r[3]), a3 = _mm256_unpackhi_epi32(r[2], r[3]);
			__m256i a4 = _mm256_unpacklo_epi32(r[4], r[5]), a5 = _mm256_unpackhi_epi32(r[4], r[5]);
			__m256i a6 = _mm256_unpacklo_epi32(r[6], r[7]), a7 = _mm256_unpackhi_epi32(r[6], r[7]);
			__m256i b0 = _mm256_unpacklo_epi64(a0, a2), b1 = _mm256_unpackhi_epi64(a0, a2);
			__m256i b2 = _mm256_unpacklo_epi64(a1, a3), b3 = _mm256_unpackhi_epi64(a1, a3);
			__m256i b4 = _mm256_unpacklo_epi64(a4, a6), b5 = _mm256_unpackhi_epi64(a4, a6);
			__m256i b6 = _mm256_unpacklo_epi64(a5, a7), b7 = _mm256_unpackhi_epi64(a5, a7);
			__m256i t[8] = {
				_mm256_permute2x128_si256(b0, b4, 0x20), _mm256_permute2x128_si256(b1, b5, 0x20),
				_mm256_permute2x128_si256(b2, b6, 0x20), _mm256_permute2x128_si256(b3, b7, 0x20),
				_mm256_permute2x128_si256(b0, b4, 0x31), _mm256_permute2x128_si256(b1, b5, 0x31),
				_mm256_permute2x128_si256(b2, b6, 0x31), _mm256_permute2x128_si256(b3, b7, 0x31)};
			for (int i = 0; i < 8; i++)
				_mm256_store_si256(
					(__m256i *)(void *)(d + (p + (size_t)i) * PREPACK_ROWS + (size_t)g * 8), t[i]);
		}
		for (size_t p = vec; p < P; p++)
			for (int i = 0; i < 8; i++) {
				uint32_t v = 0;
				if (src[i])
					v = p < full ? (uint32_t)src[i][2 * p] | (uint32_t)src[i][2 * p + 1] << 16
						     : src[i][2 * p]; /* the odd last column */
				d[p * PREPACK_ROWS + (size_t)g * 8 + (size_t)i] = v;
			}
	}
}

/* blocks [b0, b1): row by row, so the source is read sequentially */
static void pack_blocks(void *arg, int b0, int b1, int tid)
{
	(void)tid;
	const struct pack_ctx *c = arg;
	const struct wmat *w = c->w;
	size_t P = (size_t)((w->cols + 1) / 2), PP = (size_t)prepack_pairs(w->cols);
	if (ops_level_best() >= OPS_AVX512) {
		for (int b = b0; b < b1; b++)
			pack_block_avx512(w, b, c->dst + (size_t)b * PP * PREPACK_ROWS);
		return;
	}
	if (ops_level_best() >= OPS_AVX2) {
		for (int b = b0; b < b1; b++)
			pack_block_avx2(w, b, c->dst + (size_t)b * PP * PREPACK_ROWS);
		return;
	}
	for (int b = b0; b < b1; b++) {
		uint32_t *d = c->dst + (size_t)b * PP * PREPACK_ROWS;
		memset(d, 0, PP * PREPACK_ROWS * sizeof(uint32_t));
		for (int r = 0; r < PREPACK_ROWS && b * PREPACK_ROWS + r < w->rows; r++) {
			const uint16_t *src = (const uint16_t *)w->data +
					      (size_t)(b * PREPACK_ROWS + r) * (size_t)w->ld;
			for (int c2 = 0; c2 + 1 < w->cols; c2 += 2)
				d[(size_t)(c2 / 2) * PREPACK_ROWS + (size_t)r] = (uint32_t)src[c2] |
										 (uint32_t)src[c2 + 1] << 16;
			if (w->cols & 1)
				d[(P - 1) * PREPACK_ROWS + (size_t)r] = src[w->cols - 1];
		}
	}
}

void prepack_weights(struct wmat *w, uint32_t *dst, struct pool *p)
{
	const struct wformat *f = wformat_of(w->dtype);
	CHECK(f && f->prepack);
	f->prepack(w, dst, p, f->prepack_kind ? f->prepack_kind(w) : PREPACK_KIND_DP);
}

void prepack_weights_kind(struct wmat *w, uint32_t *dst, struct pool *p, int kind)
{
	const struct wformat *f = wformat_of(w->dtype);
	CHECK(f && f->prepack);
	f->prepack(w, dst, p, kind);
}

void prepack_bf16(struct wmat *w, uint32_t *dst, struct pool *p)
{
	CHECK(w->dtype == DT_BF16 && ((uintptr_t)dst & 63) == 0);
	struct pack_ctx c = {w, dst};
	pool_for(p, (int)blocks_of(w), 1, pack_blocks, &c);
	w->packed = dst;
	w->packed_pairs = prepack_pairs(w->cols);
	w->packed_kind = PREPACK_KIND_DP;
	w->packed_scale = NULL;
}

#define F32_PACK_FN __attribute__((target("avx512f,avx512bw")))

/* 16 rows (r0.., those past `rows` zero) of pairs [p0, p0 + np) of block b, columns contiguous
 * in each source row (ld_c 1): each row's 32 values rounded, their high halves paired by one
 * word permute, then a 16 x 16 transpose makes each pair's 16 rows one store */
static F32_PACK_FN void pack16_rows(uint32_t *d, int rows, int r0, int nc, int c, int np, const float *src,
				    size_t ld_r)
{
	const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29,
					     27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
	int left = nc - c; /* columns of the range from c on */
	__mmask16 m0 = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
	__mmask16 m1 = left >= 32 ? 0xffff : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1);
	__m512i r[16];
	for (int i = 0; i < 16; i++) {
		if (r0 + i >= rows) {
			r[i] = _mm512_setzero_si512();
			continue;
		}
		const float *s = src + (size_t)(r0 + i) * ld_r + (size_t)c;
		__m512 a = round_bf16_512(_mm512_maskz_loadu_ps(m0, s)),
		       b = round_bf16_512(_mm512_maskz_loadu_ps(m1, s + 16));
		r[i] = _mm512_permutex2var_epi16(_mm512_castps_si512(a), odd, _mm512_castps_si512(b));
	}
	tr16(r);
	for (int p = 0; p < np; p++)
		_mm512_storeu_si512(d + (size_t)p * PREPACK_ROWS, r[p]);
}

/* 16 rows (r0..) of pair p (columns c, c + 1; c + 1 past the range: 0), rows contiguous in
 * each source column (ld_r 1): the two columns' rounded values, high halves side by side */
static F32_PACK_FN void pack16_cols(uint32_t *d, int rows, int r0, int nc, int c, const float *src, size_t ld_c)
{
	int left = rows - r0;
	__mmask16 m = left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
	__m512i a = _mm512_castps_si512(round_bf16_512(_mm512_maskz_loadu_ps(m, src + (size_t)c * ld_c + (size_t)r0)));
	__m512i b = c + 1 < nc ? _mm512_castps_si512(round_bf16_512(
					 _mm512_maskz_loadu_ps(m, src + (size_t)(c + 1) * ld_c + (size_t)r0)))
			       : _mm512_setzero_si512();
	_mm512_storeu_si512(d, _mm512_or_si512(_mm512_srli_epi32(a, 16),
					       _mm512_and_si512(b, _mm512_set1_epi32((int)0xffff0000u))));
}

void prepack_f32(uint32_t *dst, int rows, int cols, int c0, int nc, const float *src, size_t ld_r, size_t ld_c)
{
	CHECK(c0 % 2 == 0 && c0 + nc <= cols);
	size_t P = (size_t)prepack_pairs(cols);
	int blocks = (rows + PREPACK_ROWS - 1) / PREPACK_ROWS;
	bool vec = ops_level_best() >= OPS_AVX512 && (ld_c == 1 || ld_r == 1);
	for (int b = 0; b < blocks; b++) {
		if (c0 + nc == cols) /* the last range zeroes the pad */
			memset(dst + ((size_t)b * P + (size_t)(cols + 1) / 2) * PREPACK_ROWS, 0,
			       (P - (size_t)(cols + 1) / 2) * PREPACK_ROWS * sizeof(uint32_t));
		if (vec) { /* the same words as the loop below (round_bf16_512 is f32_to_bf16) */
			for (int h = 0; h < PREPACK_ROWS; h += 16) {
				int r0 = b * PREPACK_ROWS + h;
				for (int c = 0; c < nc; c += ld_c == 1 ? 32 : 2) {
					uint32_t *d = dst + ((size_t)b * P + (size_t)(c0 + c) / 2) * PREPACK_ROWS + h;
					if (ld_c == 1) {
						int np = (nc - c + 1) / 2 < 16 ? (nc - c + 1) / 2 : 16;
						pack16_rows(d, rows, r0, nc, c, np, src, ld_r);
					} else {
						pack16_cols(d, rows, r0, nc, c, src, ld_c);
					}
				}
			}
			continue;
		}
		for (int c = 0; c < nc; c += 2) {
			uint32_t *d = dst + ((size_t)b * P + (size_t)(c0 + c) / 2) * PREPACK_ROWS;
			for (int r = 0; r < PREPACK_ROWS; r++) {
				int row = b * PREPACK_ROWS + r;
				if (row >= rows) {
					d[r] = 0;
					continue;
				}
				const float *s = src + (size_t)row * ld_r + (size_t)c * ld_c;
				uint32_t lo = f32_to_bf16(s[0]), hi = c + 1 < nc ? f32_to_bf16(s[ld_c]) : 0;
				d[r] = lo | hi << 16;
			}
		}
	}
}
