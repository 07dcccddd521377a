/* GEMM on compact weights. Loop order per thread: row panels of PANEL rows (the panel stays
 * in L2) → token tiles of NT tokens (their x rows stay in L1) → 4-row blocks → columns.
 * Every weight byte is read from DRAM once per call whatever n is. fp8 weights are decoded
 * per 128-column block segment; the block scale multiplies the segment's partial dot. */
#include "ops/gemm_internal.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#include "base/err.h"
#include "ops/pool.h"
#include "ops/prepack.h"
#include "ops/quant_int8.h"
#include "ops/scratch.h"
#include "ops/vec.h"

#define PANEL GEMM_PANEL
#define NR 4 /* rows per register block */
#define NT 3 /* tokens per register block */
#define MAX_JOBS 512

struct wmat wmat_view(const struct wmat *w, int r0, int nr, int c0, int nc)
{
	CHECK(r0 >= 0 && nr >= 0 && r0 + nr <= w->rows && c0 >= 0 && nc >= 0 && c0 + nc <= w->cols);
	struct wmat v = *w;
	if (w->dtype == DT_I8) { /* whole 32-row blocks of all the columns only */
		CHECK(r0 % INT8_ROWS == 0 && c0 == 0 && nc == w->cols);
		v.data = (const char *)w->data + (size_t)(r0 / INT8_ROWS) * int8_block_bytes(w->cols);
		v.rows = nr;
		return v;
	}
	v.data = (const char *)w->data + ((size_t)r0 * (size_t)w->ld + (size_t)c0) * dtype_size(w->dtype);
	v.rows = nr;
	v.cols = nc;
	v.row0 = w->row0 + r0;
	v.col0 = w->col0 + c0;
	v.packed = NULL;
	v.packed_scale = NULL;
	if (w->packed && r0 % PREPACK_ROWS == 0 && c0 == 0) { /* fewer columns: a prefix of each block */
		size_t rb = (size_t)(r0 / PREPACK_ROWS);
		v.packed = w->packed + rb * (size_t)w->packed_pairs * prepack_words_per_pair(w->dtype);
		if (w->packed_scale)
			v.packed_scale = w->packed_scale + rb * (size_t)prepack_segments(w) * PREPACK_ROWS;
	}
	return v;
}

size_t wmat_bytes(const struct wmat *w)
{
	if (w->dtype == DT_I8)
		return int8_data_bytes(w->rows, w->cols);
	size_t b = (size_t)w->rows * (size_t)w->cols * dtype_size(w->dtype);
	if (w->dtype == DT_F8_E4M3)
		b += (size_t)((w->rows + w->blk_r - 1) / w->blk_r) * (size_t)((w->cols + w->blk_c - 1) / w->blk_c) * 4;
	return b;
}

float wmat_get(const struct wmat *w, int r, int c)
{
	if (w->dtype == DT_I8)
		return quant_int8_get(w, r, c);
	float v = gemm_elem(w->dtype, w->data, (size_t)r * (size_t)w->ld + (size_t)c);
	return w->dtype == DT_F8_E4M3 ? v * gemm_wscale(w, r, c) : v;
}

/* ---- portable block kernel: out[r][t] = Σ_{c in [c0,c1)} W[r,c] x[t,c] ---- */
static void blk_portable(enum dtype dt, const void *w, int64_t ld, int nr, const float *x, int ldx, int nt, int c0,
			 int c1, float out[NR][NT])
{
	for (int r = 0; r < nr; r++)
		for (int t = 0; t < nt; t++) {
			const float *xr = x + (size_t)t * (size_t)ldx;
			float s = 0;
			for (int c = c0; c < c1; c++)
				s += gemm_elem(dt, w, (size_t)r * (size_t)ld + (size_t)c) * xr[c];
			out[r][t] = s;
		}
}

/* ---- AVX2 + FMA + F16C ---- */
#define AVX2_FN __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* fp8 e4m3 → f16 bits: exponent/mantissa shifted into the f16 fields (bias 15 vs 7: the
 * value comes out 2^-8 too small, compensated by the caller's scale); f16 handles the
 * subnormals exactly. 0x7f/0xff (NaN) decode as ±480 — never present in checkpoints. */
AVX2_INLINE __m256 load8_avx2(enum dtype dt, const void *base, size_t i)
{
	switch (dt) {
	case DT_F32: return _mm256_loadu_ps((const float *)base + i);
	case DT_BF16: {
		__m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + i));
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
	}
	case DT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
	default: {
		__m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)((const uint8_t *)base + i)));
		__m128i mag = _mm_and_si128(_mm_slli_epi16(b, 7), _mm_set1_epi16(0x3f80));
		__m128i sgn = _mm_and_si128(_mm_slli_epi16(b, 8), _mm_set1_epi16((short)0x8000));
		return _mm256_cvtph_ps(_mm_or_si128(mag, sgn));
	}
	}
}

AVX2_INLINE float hsum_avx2(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

AVX2_INLINE void blk_avx2_t(enum dtype dt, const void *w, int64_t ld, const float *x, int ldx, int c0, int c1,
			    float out[NR][NT], const int nr, const int nt)
{
	__m256 acc[NR][NT];
#pragma GCC unroll 4
	for (int r = 0; r < nr; r++)
#pragma GCC unroll 3
		for (int t = 0; t < nt; t++)
			acc[r][t] = _mm256_setzero_ps();
	int c = c0;
	for (; c + 8 <= c1; c += 8) {
		__m256 xv[NT];
#pragma GCC unroll 3
		for (int t = 0; t < nt; t++)
			xv[t] = _mm256_loadu_ps(x + (size_t)t * (size_t)ldx + c);
#pragma GCC unroll 4
		for (int r = 0; r < nr; r++) {
			__m256 wv = load8_avx2(dt, w, (size_t)r * (size_t)ld + (size_t)c);
#pragma GCC unroll 3
			for (int t = 0; t < nt; t++)
				acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
		}
	}
	for (int r = 0; r < nr; r++)
		for (int t = 0; t < nt; t++) {
			float s = hsum_avx2(acc[r][t]);
			for (int cc = c; cc < c1; cc++) {
				float wv = gemm_elem(dt, w, (size_t)r * (size_t)ld + (size_t)cc);
				if (dt == DT_F8_E4M3)
					wv *= 1.0f / 256; /* match the vector path's 2^-8 */
				s += wv * x[(size_t)t * (size_t)ldx + cc];
			}
			out[r][t] = s;
		}
}

/* One token, 8 rows: eight concurrent weight streams keep more DRAM requests in flight
 * (GEMV-shaped steps are bandwidth-bound). out[r] = Σ_c W[r,c] x[c]. */
AVX2_INLINE void gemv8_avx2_t(enum dtype dt, const void *w, int64_t ld, const float *x, int c0, int c1, float *out)
{
	__m256 acc[8];
#pragma GCC unroll 8
	for (int r = 0; r < 8; r++)
		acc[r] = _mm256_setzero_ps();
	int c = c0;
	for (; c + 8 <= c1; c += 8) {
		__m256 xv = _mm256_loadu_ps(x + c);
#pragma GCC unroll 8
		for (int r = 0; r < 8; r++)
			acc[r] = _mm256_fmadd_ps(load8_avx2(dt, w, (size_t)r * (size_t)ld + (size_t)c), xv, acc[r]);
	}
	for (int r = 0; r < 8; r++) {
		float s = hsum_avx2(acc[r]);
		for (int cc = c; cc < c1; cc++) {
			float wv = gemm_elem(dt, w, (size_t)r * (size_t)ld + (size_t)cc);
			if (dt == DT_F8_E4M3)
				wv *= 1.0f / 256;
			s += wv * x[cc];
		}
		out[r] = s;
	}
}

static AVX2_FN void gemv8_avx2(enum dtype dt, const void *w, int64_t ld, const float *x, int c0, int c1, float *out)
{
	switch (dt) {
	case DT_F32: gemv8_avx2_t(DT_F32, w, ld, x, c0, c1, out); break;
	case DT_BF16: gemv8_avx2_t(DT_BF16, w, ld, x, c0, c1, out); break;
	case DT_F16: gemv8_avx2_t(DT_F16, w, ld, x, c0, c1, out); break;
	default: gemv8_avx2_t(DT_F8_E4M3, w, ld, x, c0, c1, out); break;
	}
}

#define BLK_CASES(DT)                                                         \
	switch (nr * 4 + nt) {                                                \
	case 4 + 1: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 1, 1); break;  \
	case 4 + 2: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 1, 2); break;  \
	case 4 + 3: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 1, 3); break;  \
	case 8 + 1: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 2, 1); break;  \
	case 8 + 2: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 2, 2); break;  \
	case 8 + 3: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 2, 3); break;  \
	case 12 + 1: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 3, 1); break; \
	case 12 + 2: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 3, 2); break; \
	case 12 + 3: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 3, 3); break; \
	case 16 + 1: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 4, 1); break; \
	case 16 + 2: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 4, 2); break; \
	default: blk_avx2_t(DT, w, ld, x, ldx, c0, c1, out, 4, 3); break;     \
	}

static AVX2_FN void blk_avx2_f32(const void *w, int64_t ld, int nr, const float *x, int ldx, int nt, int c0, int c1,
				 float out[NR][NT])
{
	BLK_CASES(DT_F32)
}
static AVX2_FN void blk_avx2_bf16(const void *w, int64_t ld, int nr, const float *x, int ldx, int nt, int c0, int c1,
				  float out[NR][NT])
{
	BLK_CASES(DT_BF16)
}
static AVX2_FN void blk_avx2_f16(const void *w, int64_t ld, int nr, const float *x, int ldx, int nt, int c0, int c1,
				 float out[NR][NT])
{
	BLK_CASES(DT_F16)
}
static AVX2_FN void blk_avx2_fp8(const void *w, int64_t ld, int nr, const float *x, int ldx, int nt, int c0, int c1,
				 float out[NR][NT])
{
	BLK_CASES(DT_F8_E4M3)
}

/* ---- AVX2 packed path for many tokens (prefill): outer-product micro-kernel ----
 * A sub-panel of 16 rows x KB columns is dequantized once into fp32, k-major ([KB][16], L1
 * resident), then every tile of 6 tokens runs 12 accumulators over it: per k two weight
 * loads, six broadcasts and twelve FMAs, no conversion or horizontal sum in the loop. */
#define PK_R 16
#define PK_T 6
#define PK_K 512
/* below this many tokens packing costs more than it saves (measured: equal at 32, packed
 * +10% at 47) */
#define PACK_MIN_TOKENS 40

static void pack_panel(const struct wmat *w, int r0, int nr, int k0, int kb, float *wp)
{
	size_t esz = dtype_size(w->dtype);
	for (int j = 0; j < PK_R; j++) {
		if (j >= nr) {
			for (int k = 0; k < kb; k++)
				wp[(size_t)k * PK_R + j] = 0;
			continue;
		}
		const char *row = (const char *)w->data + (size_t)(r0 + j) * (size_t)w->ld * esz;
		switch (w->dtype) {
		case DT_BF16:
			for (int k = 0; k < kb; k++) {
				uint16_t h;
				memcpy(&h, row + 2 * (size_t)(k0 + k), 2);
				wp[(size_t)k * PK_R + j] = bf16_to_f32(h);
			}
			break;
		case DT_F8_E4M3:
			for (int k = 0; k < kb; k++)
				wp[(size_t)k * PK_R + j] = fp8_e4m3_table[(uint8_t)row[k0 + k]] *
							   gemm_wscale(w, r0 + j, k0 + k);
			break;
		default:
			for (int k = 0; k < kb; k++)
				wp[(size_t)k * PK_R + j] = gemm_elem(w->dtype, row, (size_t)(k0 + k));
		}
	}
}

/* 8 rows x 8 columns of the weight (converted to fp32, fp8 scaled) → 8 k-major vectors. */
AVX2_INLINE void transpose8_store(__m256 r[8], float *dst)
{
	__m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
	__m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
	__m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
	__m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
	__m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
	__m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
	__m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
	__m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
	_mm256_store_ps(dst + 0 * PK_R, _mm256_permute2f128_ps(s0, s4, 0x20));
	_mm256_store_ps(dst + 1 * PK_R, _mm256_permute2f128_ps(s1, s5, 0x20));
	_mm256_store_ps(dst + 2 * PK_R, _mm256_permute2f128_ps(s2, s6, 0x20));
	_mm256_store_ps(dst + 3 * PK_R, _mm256_permute2f128_ps(s3, s7, 0x20));
	_mm256_store_ps(dst + 4 * PK_R, _mm256_permute2f128_ps(s0, s4, 0x31));
	_mm256_store_ps(dst + 5 * PK_R, _mm256_permute2f128_ps(s1, s5, 0x31));
	_mm256_store_ps(dst + 6 * PK_R, _mm256_permute2f128_ps(s2, s6, 0x31));
	_mm256_store_ps(dst + 7 * PK_R, _mm256_permute2f128_ps(s3, s7, 0x31));
}

/* pack_panel with 8x8 transposes; columns an fp8 scale block boundary cuts, and the tail
 * columns, go through the scalar packer. One group of 8 rows at a time over all kb columns:
 * rows ld apart with ld a multiple of 4 KB share one L1 set, so only 8 row streams stay
 * cached while a cache line's 4 (bf16) column steps are consumed; 16 would evict each other
 * and refetch every line from L2 four times. */
AVX2_INLINE void pack_panel_avx2_t(const struct wmat *w, int r0, int nr, int k0, int kb, float *wp,
				   const enum dtype dt)
{
	int fp8 = dt == DT_F8_E4M3;
	for (int g = 0; g < PK_R / 8; g++) {
		for (int k = 0; k < kb; k += 8) {
			int c = k0 + k;
			if (k + 8 > kb || (fp8 && (w->col0 + c) / w->blk_c != (w->col0 + c + 7) / w->blk_c)) {
				/* the tail, or 8 columns cut by an fp8 scale block boundary: scalar,
				 * all 16 rows at once (in the first group's pass) */
				if (g > 0)
					continue;
				float tmp[PK_R * 8];
				int n = kb - k < 8 ? kb - k : 8;
				pack_panel(w, r0, nr, c, n, tmp);
				memcpy(wp + (size_t)k * PK_R, tmp, sizeof(float) * PK_R * (size_t)n);
				continue;
			}
			__m256 rv[8];
			for (int i = 0; i < 8; i++) {
				int j = g * 8 + i;
				if (j >= nr) {
					rv[i] = _mm256_setzero_ps();
					continue;
				}
				size_t off = (size_t)(r0 + j) * (size_t)w->ld + (size_t)c;
				if (fp8) /* the f16 decode is 2^-8 small: folded into the scale */
					rv[i] = _mm256_mul_ps(load8_avx2(DT_F8_E4M3, w->data, off),
							      _mm256_set1_ps(gemm_wscale(w, r0 + j, c) * 256.0f));
				else
					rv[i] = load8_avx2(dt, w->data, off);
			}
			transpose8_store(rv, wp + (size_t)k * PK_R + g * 8);
		}
	}
}

/* one copy per weight dtype: the per-row dtype switch stays out of the packing loop */
static AVX2_FN void pack_panel_avx2(const struct wmat *w, int r0, int nr, int k0, int kb, float *wp)
{
	switch (w->dtype) {
	case DT_BF16: pack_panel_avx2_t(w, r0, nr, k0, kb, wp, DT_BF16); break;
	case DT_F16: pack_panel_avx2_t(w, r0, nr, k0, kb, wp, DT_F16); break;
	case DT_F32: pack_panel_avx2_t(w, r0, nr, k0, kb, wp, DT_F32); break;
	default: pack_panel_avx2_t(w, r0, nr, k0, kb, wp, DT_F8_E4M3); break;
	}
}

AVX2_INLINE void mk_avx2_t(const float *wp, int kb, const float *x, int ldx, float out[PK_T][PK_R], const int nt)
{
	__m256 a0[PK_T], a1[PK_T];
#pragma GCC unroll 6
	for (int t = 0; t < nt; t++)
		a0[t] = a1[t] = _mm256_setzero_ps();
	for (int k = 0; k < kb; k++) {
		__m256 w0 = _mm256_load_ps(wp + (size_t)k * PK_R), w1 = _mm256_load_ps(wp + (size_t)k * PK_R + 8);
#pragma GCC unroll 6
		for (int t = 0; t < nt; t++) {
			__m256 xb = _mm256_broadcast_ss(x + (size_t)t * (size_t)ldx + k);
			a0[t] = _mm256_fmadd_ps(w0, xb, a0[t]);
			a1[t] = _mm256_fmadd_ps(w1, xb, a1[t]);
		}
	}
#pragma GCC unroll 6
	for (int t = 0; t < nt; t++) {
		_mm256_storeu_ps(out[t], a0[t]);
		_mm256_storeu_ps(out[t] + 8, a1[t]);
	}
}

static AVX2_FN void mk_avx2(const float *wp, int kb, const float *x, int ldx, float out[PK_T][PK_R], int nt)
{
	switch (nt) {
	case 1: mk_avx2_t(wp, kb, x, ldx, out, 1); break;
	case 2: mk_avx2_t(wp, kb, x, ldx, out, 2); break;
	case 3: mk_avx2_t(wp, kb, x, ldx, out, 3); break;
	case 4: mk_avx2_t(wp, kb, x, ldx, out, 4); break;
	case 5: mk_avx2_t(wp, kb, x, ldx, out, 5); break;
	default: mk_avx2_t(wp, kb, x, ldx, out, 6); break;
	}
}

static AVX2_FN void store16_avx2(float *y, const float *v, int add)
{
	__m256 a = _mm256_loadu_ps(v), b = _mm256_loadu_ps(v + 8);
	if (add) {
		a = _mm256_add_ps(a, _mm256_loadu_ps(y));
		b = _mm256_add_ps(b, _mm256_loadu_ps(y + 8));
	}
	_mm256_storeu_ps(y, a);
	_mm256_storeu_ps(y + 8, b);
}

/* per-thread packing buffer: one work item's PANEL rows x PK_K columns (128 KB, L2 resident) */
#define PACK_BUF_BYTES (sizeof(float) * PANEL * PK_K)

/* Per k block: pack the item's sub-panels, then run every token tile over all of them, so a
 * tile's x (6 x PK_K floats) is reused from L1 across the panel's rows. */
static void gemm_panel_packed(const struct gemm_job *j, int r0, int r1, float *pack_buf)
{
	const struct wmat *w = j->w;
	int nsub = (r1 - r0 + PK_R - 1) / PK_R;
	for (int k0 = 0; k0 < w->cols; k0 += PK_K) {
		int kb = w->cols - k0 < PK_K ? w->cols - k0 : PK_K;
		for (int sp = 0; sp < nsub; sp++) {
			int sr = r0 + sp * PK_R, nr = r1 - sr < PK_R ? r1 - sr : PK_R;
			pack_panel_avx2(w, sr, nr, k0, kb, pack_buf + (size_t)sp * PK_K * PK_R);
		}
		int add = k0 > 0 || j->accumulate;
		for (int t0 = 0; t0 < j->n; t0 += PK_T) {
			int nt = j->n - t0 < PK_T ? j->n - t0 : PK_T;
			const float *x = j->x + (size_t)t0 * (size_t)j->ldx + k0;
			for (int sp = 0; sp < nsub; sp++) {
				int sr = r0 + sp * PK_R, nr = r1 - sr < PK_R ? r1 - sr : PK_R;
				float out[PK_T][PK_R];
				mk_avx2(pack_buf + (size_t)sp * PK_K * PK_R, kb, x, j->ldx, out, nt);
				for (int t = 0; t < nt; t++) {
					float *y = j->y + (size_t)(t0 + t) * (size_t)j->ldy + sr;
					if (nr == PK_R)
						store16_avx2(y, out[t], add);
					else
						for (int r = 0; r < nr; r++)
							y[r] = add ? y[r] + out[t][r] : out[t][r];
				}
			}
		}
	}
}

/* ---- driver ---- */
struct gemm_ctx {
	enum ops_level lvl;
	/* Threads take panels dynamically (costs differ): even threads from the front of the item
	 * list, odd ones from the back, so a call mixing memory-bound items (MoE experts with 1-3
	 * tokens) and compute-bound ones (the shared experts with every token, listed last) runs
	 * both kinds at once instead of both threads stalling on DRAM together. `claimed`
	 * counts the items taken from either end, so the two ends never overlap. */
	atomic_int claimed, front, back;
	const struct gemm_job *jobs;
	int n_jobs;
	int first_item[MAX_JOBS + 1]; /* prefix sums of panels per job */
	/* prepacked jobs: x as bf16 rows (NULL: not prepacked), converted once per call */
	const uint16_t *xb[MAX_JOBS]; /* rows gemm_prepacked_ldxb(cols) apart */
	/* the conversions to do: job index per conversion, prefix sums of their tokens */
	int n_conv, conv_job[MAX_JOBS], conv_first[MAX_JOBS + 1];
	/* int8 jobs: x quantized (ops/quant_int8.h) once per call, as xb (NULL: each panel its own) */
	const uint8_t *qx[MAX_JOBS];
	const float *sx[MAX_JOBS];
	int n_q, q_job[MAX_JOBS], q_first[MAX_JOBS + 1];
};

typedef void (*blk_fn)(const void *, int64_t, int, const float *, int, int, int, int, float[NR][NT]);

/* rows [r0, r1) of a job on its load-time packed weights, x already bf16 in xb; returns
 * whether the kernel rounded y itself (gemm_job.round_bf16) */
static int panel_prepacked(enum ops_level lvl, const struct gemm_job *j, const uint16_t *xb, int ldxb, int r0, int r1)
{
	if (lvl >= OPS_AMX)
		return gemm_panel_amx(j, xb, ldxb, r0, r1);
	return gemm_panel_prepacked512(j, xb, ldxb, r0, r1);
}

/* rows [r0, r1) of job ji; returns whether the kernel rounded them (gemm_job.round_bf16) */
static int gemm_panel(const struct gemm_ctx *g, int ji, int r0, int r1)
{
	const struct gemm_job *j = &g->jobs[ji];
	if (j->w->dtype == DT_I8)
		return gemm_panel_int8(g->lvl, j, g->qx[ji], g->sx[ji], r0, r1);
	if (j->w->packed && j->w->packed_kind == PREPACK_KIND_FP8_AVX2 && g->lvl >= OPS_AVX2 && j->w->cols > 0) {
		gemm_panel_fp8_avx2(j, r0, r1);
		return 0;
	}
	if (j->w->packed && j->w->packed_kind == PREPACK_KIND_DP && j->w->dtype == DT_BF16 && g->lvl == OPS_AVX2 &&
	    j->w->cols > 0) {
		gemm_panel_bf16_avx2(j, r0, r1);
		return 0;
	}
	if (g->xb[ji])
		return panel_prepacked(g->lvl, j, g->xb[ji], gemm_prepacked_ldxb(j->w->cols), r0, r1);
	if (g->lvl >= OPS_AVX512 && j->w->cols > 0) {
		bool dp = gemm_use_dp(g->lvl, j);
		if (j->n >= gemm_pack512_min_tokens(j->w->dtype, dp))
			gemm_panel_packed_avx512(j, r0, r1, dp);
		else
			gemm_panel_avx512(j, r0, r1, dp);
		return 0;
	}
	float *pack_buf;
	if (g->lvl == OPS_AVX2 && j->n >= PACK_MIN_TOKENS && j->w->cols > 0 &&
	    (pack_buf = ops_scratch(OPS_SCRATCH_AVX2_PACK, PACK_BUF_BYTES))) {
		gemm_panel_packed(j, r0, r1, pack_buf);
		return 0;
	}
	const struct wmat *w = j->w;
	size_t esz = dtype_size(w->dtype);
	int fp8 = w->dtype == DT_F8_E4M3;
	blk_fn fn = NULL;
	if (g->lvl == OPS_AVX2)
		fn = w->dtype == DT_F32    ? blk_avx2_f32
		     : w->dtype == DT_BF16 ? blk_avx2_bf16
		     : w->dtype == DT_F16  ? blk_avx2_f16
					   : blk_avx2_fp8;
	/* fp8 segment scale multiplier: the AVX2 path decodes 2^-8 too small */
	float fp8_mul = (fp8 && fn) ? 256.0f : 1.0f;
	int r_gemv = r0;
	if (fn && j->n == 1) { /* one token: 8-row blocks, then the 4-row kernel for the rest */
		for (; r_gemv + 8 <= r1; r_gemv += 8) {
			const void *wr = (const char *)w->data + (size_t)r_gemv * (size_t)w->ld * esz;
			float sum[8] = {0}, part[8];
			int c0 = 0;
			while (c0 < w->cols) {
				int c1 = w->cols;
				if (fp8) {
					int nb = ((w->col0 + c0) / w->blk_c + 1) * w->blk_c - w->col0;
					if (nb < c1)
						c1 = nb;
				}
				gemv8_avx2(w->dtype, wr, w->ld, j->x, c0, c1, part);
				for (int rr = 0; rr < 8; rr++)
					sum[rr] += fp8 ? part[rr] * gemm_wscale(w, r_gemv + rr, c0) * fp8_mul
						       : part[rr];
				c0 = c1;
			}
			for (int rr = 0; rr < 8; rr++)
				j->y[r_gemv + rr] = j->accumulate ? j->y[r_gemv + rr] + sum[rr] : sum[rr];
		}
	}
	for (int t0 = 0; t0 < j->n; t0 += NT) {
		int nt = j->n - t0 < NT ? j->n - t0 : NT;
		const float *x = j->x + (size_t)t0 * (size_t)j->ldx;
		for (int r = (j->n == 1 ? r_gemv : r0); r < r1; r += NR) {
			int nr = r1 - r < NR ? r1 - r : NR;
			const void *wr = (const char *)w->data + (size_t)r * (size_t)w->ld * esz;
			float sum[NR][NT] = {{0}}, part[NR][NT];
			int c0 = 0;
			while (c0 < w->cols) {
				int c1 = w->cols;
				if (fp8) {
					int nb = ((w->col0 + c0) / w->blk_c + 1) * w->blk_c - w->col0;
					if (nb < c1)
						c1 = nb;
				}
				if (fn)
					fn(wr, w->ld, nr, x, j->ldx, nt, c0, c1, part);
				else
					blk_portable(w->dtype, wr, w->ld, nr, x, j->ldx, nt, c0, c1, part);
				for (int rr = 0; rr < nr; rr++) {
					float s = fp8 ? gemm_wscale(w, r + rr, c0) * fp8_mul : 1.0f;
					for (int t = 0; t < nt; t++)
						sum[rr][t] += fp8 ? part[rr][t] * s : part[rr][t];
				}
				c0 = c1;
			}
			for (int t = 0; t < nt; t++) {
				float *y = j->y + (size_t)(t0 + t) * (size_t)j->ldy + r;
				for (int rr = 0; rr < nr; rr++)
					y[rr] = j->accumulate ? y[rr] + sum[rr][t] : sum[rr][t];
			}
		}
	}
	return 0;
}

/* Rows per work item: few-token jobs are bandwidth-bound and stream longer contiguous runs
 * in bigger items (measured 5-15% faster at 256 rows); compute-bound ones keep panels that
 * stay in L2 while every token tile passes over them. */
static int job_panel(enum ops_level lvl, const struct gemm_job *j)
{
	/* prepacked: a chunk is reused across token tiles whatever the item size, so items only
	 * set how often a thread's stream jumps (a cold start each time): 256 rows measured
	 * 1.05-1.1x 64 at 6-12 tokens (MoE experts at batch 64), no worse elsewhere */
	if (lvl >= OPS_AVX512_BF16 && j->w->packed && j->w->packed_kind == PREPACK_KIND_DP && j->x_bf16)
		return 4 * PANEL;
	return j->n <= 3 ? 4 * PANEL : PANEL;
}

/* rows [r0, r1) of every token of y, once final (gemm_job.round_bf16) */
static void round_rows(const struct gemm_job *j, int r0, int r1)
{
	if (!j->round_bf16)
		return;
	for (int t = 0; t < j->n; t++)
		ops_round_bf16(j->y + (size_t)t * (size_t)j->ldy + r0, r1 - r0);
}

static void gemm_items(void *arg, int begin, int end, int tid)
{
	struct gemm_ctx *g = arg;
	int total = g->first_item[g->n_jobs];
	for (;;) {
		if (atomic_fetch_add_explicit(&g->claimed, 1, memory_order_relaxed) >= total)
			break;
		int it = (tid & 1) ? total - 1 - atomic_fetch_add_explicit(&g->back, 1, memory_order_relaxed)
				   : atomic_fetch_add_explicit(&g->front, 1, memory_order_relaxed);
		/* binary search of the job holding item `it` */
		int lo = 0, hi = g->n_jobs - 1;
		while (lo < hi) {
			int mid = (lo + hi + 1) / 2;
			if (g->first_item[mid] <= it)
				lo = mid;
			else
				hi = mid - 1;
		}
		const struct gemm_job *j = &g->jobs[lo];
		int r0 = (it - g->first_item[lo]) * job_panel(g->lvl, j);
		int r1 = r0 + job_panel(g->lvl, j) < j->w->rows ? r0 + job_panel(g->lvl, j) : j->w->rows;
		if (!gemm_panel(g, lo, r0, r1))
			round_rows(j, r0, r1);
	}
}

/* tokens [begin, end) of all conversions (prefix sums conv_first) → their jobs' xb */
static void convert_x(void *arg, int begin, int end, int tid)
{
	(void)tid;
	const struct gemm_ctx *g = arg;
	int c = 0;
	while (g->conv_first[c + 1] <= begin)
		c++;
	for (int t = begin; t < end;) {
		while (g->conv_first[c + 1] <= t)
			c++;
		const struct gemm_job *j = &g->jobs[g->conv_job[c]];
		int t0 = t - g->conv_first[c],
		    t1 = (end < g->conv_first[c + 1] ? end : g->conv_first[c + 1]) - g->conv_first[c];
		gemm_x_to_bf16(j->x, j->ldx, t0, t1, j->w->cols, (uint16_t *)g->xb[g->conv_job[c]],
			       gemm_prepacked_ldxb(j->w->cols));
		t += t1 - t0;
	}
}

/* Jobs on prepacked weights get their x as bf16 rows, converted once per call (jobs with the
 * same x, like the MoE gate and up, share one conversion) into the calling thread's scratch:
 * on that thread up to CONVERT_SERIAL_ELEMS values (~30 us; a pool wake-up measured 70-80 us
 * per call on a shared 2-vCPU machine), over the pool beyond. Without memory, the jobs take
 * the unpacked kernels. */
#define CONVERT_SERIAL_ELEMS ((size_t)1 << 19)

/* job i reads job i - 1's x, converted already (off[i - 1] set: the MoE gate and up, listed
 * together); only the neighbour is compared, as a call can hold hundreds of jobs */
static bool shares_prev_x(const struct gemm_job *jobs, const size_t *off, int i)
{
	if (i == 0 || off[i - 1] == SIZE_MAX)
		return false;
	const struct gemm_job *pj = &jobs[i - 1], *j = &jobs[i];
	return pj->x == j->x && pj->ldx == j->ldx && pj->n >= j->n && pj->w->cols == j->w->cols;
}

/* fn over the tokens of a call's conversions: on this thread when they are small (a decode
 * step's: waking the pool costs more), else over the pool */
static void over_tokens(struct pool *p, int tokens, size_t elems, void (*fn)(void *, int, int, int),
			struct gemm_ctx *g)
{
	if (elems <= CONVERT_SERIAL_ELEMS) {
		fn(g, 0, tokens, 0);
		return;
	}
	int nt = p ? pool_size(p) : 1;
	pool_for(p, tokens, (tokens + 2 * nt - 1) / (2 * nt), fn, g);
}

static void prepare_prepacked(struct gemm_ctx *g, struct pool *p)
{
	size_t total = 0, off[MAX_JOBS];
	g->n_conv = 0;
	g->conv_first[0] = 0;
	for (int i = 0; i < g->n_jobs; i++) {
		const struct gemm_job *j = &g->jobs[i];
		g->xb[i] = NULL;
		off[i] = SIZE_MAX;
		if (g->lvl < OPS_AVX512_BF16 || !j->w->packed || j->w->packed_kind != PREPACK_KIND_DP || !j->x_bf16 ||
		    j->n <= 0 || j->w->rows <= 0 || j->w->cols <= 0)
			continue;
		if (shares_prev_x(g->jobs, off, i)) {
			off[i] = off[i - 1];
			continue;
		}
		off[i] = total;
		total += prepack_x_elems(j->n, j->w->cols);
		g->conv_job[g->n_conv] = i;
		g->conv_first[g->n_conv + 1] = g->conv_first[g->n_conv] + j->n;
		g->n_conv++;
	}
	if (!g->n_conv)
		return;
	uint16_t *buf = ops_scratch(OPS_SCRATCH_PREPACK_X, total * sizeof(uint16_t));
	if (!buf)
		return;
	for (int i = 0; i < g->n_jobs; i++)
		if (off[i] != SIZE_MAX)
			g->xb[i] = buf + off[i];
	over_tokens(p, g->conv_first[g->n_conv], total, convert_x, g);
}

/* tokens [begin, end) of all int8 quantizations (prefix sums q_first) → their jobs' qx, sx */
static void quantize_x(void *arg, int begin, int end, int tid)
{
	(void)tid;
	const struct gemm_ctx *g = arg;
	int c = 0;
	for (int t = begin; t < end; t++) {
		while (g->q_first[c + 1] <= t)
			c++;
		int ji = g->q_job[c], tt = t - g->q_first[c], cols = g->jobs[ji].w->cols;
		gemm_int8_quant_x(g->lvl, g->jobs[ji].x + (size_t)tt * (size_t)g->jobs[ji].ldx, cols, g->jobs[ji].n, tt,
				  (uint8_t *)g->qx[ji], (float *)g->sx[ji] + (size_t)tt * (size_t)int8_groups(cols));
	}
}

/* Jobs on int8 weights get their x quantized once per call (jobs with the same x share it),
 * into the calling thread's scratch, serially when small (a decode step's), else over the pool */
static void prepare_int8(struct gemm_ctx *g, struct pool *p)
{
	size_t total = 0, off[MAX_JOBS];
	g->n_q = 0;
	g->q_first[0] = 0;
	for (int i = 0; i < g->n_jobs; i++) {
		const struct gemm_job *j = &g->jobs[i];
		g->qx[i] = NULL;
		g->sx[i] = NULL;
		off[i] = SIZE_MAX;
		if (j->w->dtype != DT_I8 || j->n <= 0 || j->w->rows <= 0)
			continue;
		if (shares_prev_x(g->jobs, off, i)) {
			off[i] = off[i - 1];
			continue;
		}
		off[i] = total;
		/* bytes then scales, each job's scales 4-byte aligned */
		total += (gemm_int8_x_bytes(g->lvl, j->n, j->w->cols) + 3) / 4 * 4 +
			 sizeof(float) * (size_t)j->n * (size_t)int8_groups(j->w->cols);
		g->q_job[g->n_q] = i;
		g->q_first[g->n_q + 1] = g->q_first[g->n_q] + j->n;
		g->n_q++;
	}
	if (!g->n_q)
		return;
	char *buf = ops_scratch(OPS_SCRATCH_INT8_X, total);
	if (!buf)
		return;
	for (int i = 0; i < g->n_jobs; i++)
		if (off[i] != SIZE_MAX) {
			const struct gemm_job *j = &g->jobs[i];
			g->qx[i] = (const uint8_t *)(buf + off[i]);
			g->sx[i] = (const float *)(const void *)(buf + off[i] +
							   (gemm_int8_x_bytes(g->lvl, j->n, j->w->cols) + 3) / 4 * 4);
		}
	over_tokens(p, g->q_first[g->n_q], total, quantize_x, g);
}

void ops_gemm_multi_at(enum ops_level lvl, struct pool *p, int n_jobs, const struct gemm_job *jobs)
{
	while (n_jobs > 0) {
		struct gemm_ctx g;
		g.lvl = lvl > ops_level_best() ? ops_level_best() : lvl;
		g.jobs = jobs;
		g.n_jobs = n_jobs < MAX_JOBS ? n_jobs : MAX_JOBS;
		g.first_item[0] = 0;
		for (int i = 0; i < g.n_jobs; i++) {
			const struct gemm_job *j = &jobs[i];
			int np = (j->n > 0 && j->w->rows > 0)
					 ? (j->w->rows + job_panel(g.lvl, j) - 1) / job_panel(g.lvl, j)
					 : 0;
			g.first_item[i + 1] = g.first_item[i] + np;
		}
		prepare_prepacked(&g, p);
		prepare_int8(&g, p);
		atomic_init(&g.claimed, 0);
		atomic_init(&g.front, 0);
		atomic_init(&g.back, 0);
		int items = g.first_item[g.n_jobs];
		if (items > 0) {
			int nt = p ? pool_size(p) : 1;
			pool_for(p, items < nt ? items : nt, 1, gemm_items, &g);
		}
		jobs += g.n_jobs;
		n_jobs -= g.n_jobs;
	}
}

void ops_gemm_multi(struct pool *p, int n_jobs, const struct gemm_job *jobs)
{
	ops_gemm_multi_at(ops_level_best(), p, n_jobs, jobs);
}

void ops_gemm(struct pool *p, const struct wmat *w, const float *x, int ldx, int n, float *y, int ldy)
{
	struct gemm_job j = {.w = w, .x = x, .y = y, .n = n, .ldx = ldx, .ldy = ldy};
	ops_gemm_multi(p, 1, &j);
}

size_t prepack_x_elems(int n, int cols)
{
	/* the AMX kernel reads whole 16-row tiles past 16 tokens */
	int rows = n <= 0 ? 0 : n <= 16 ? n : (n + 15) / 16 * 16;
	return (size_t)rows * (size_t)gemm_prepacked_ldxb(cols);
}

int prepack_x_ld(int cols) { return gemm_prepacked_ldxb(cols); }

void prepack_gemm_1t(const struct gemm_job *j, uint16_t *xb)
{
	CHECK(ops_level_best() >= OPS_AVX512_BF16 && j->w->packed && j->x_bf16);
	if (j->n > 0 && j->w->rows > 0 && j->w->cols > 0)
		gemm_x_to_bf16(j->x, j->ldx, 0, j->n, j->w->cols, xb, gemm_prepacked_ldxb(j->w->cols));
	prepack_gemm_1t_xb(j, xb);
}

void prepack_gemm_1t_xb(const struct gemm_job *j, const uint16_t *xb)
{
	CHECK(ops_level_best() >= OPS_AVX512_BF16 && j->w->packed);
	if (j->n <= 0 || j->w->rows <= 0)
		return;
	if (j->w->cols <= 0) { /* nothing to sum: y = 0 (or unchanged) */
		for (int t = 0; t < j->n && !j->accumulate; t++)
			memset(j->y + (size_t)t * (size_t)j->ldy, 0, sizeof(float) * (size_t)j->w->rows);
		round_rows(j, 0, j->w->rows);
		return;
	}
	if (!panel_prepacked(ops_level_best(), j, xb, gemm_prepacked_ldxb(j->w->cols), 0, j->w->rows))
		round_rows(j, 0, j->w->rows);
}
