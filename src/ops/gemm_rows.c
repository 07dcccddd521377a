/* GEMM panels on row-major float weights (f32, f16, bf16, fp8 e4m3 with block scales): the
 * kernels every such row of the format table (ops/wformat.h) shares. Loop order per thread:
 * row panels of PANEL rows (the panel stays in L2) → token tiles of NT tokens (their x rows
 * stay in L1) → 4-row blocks → columns. Every weight byte is read from DRAM once per call
 * whatever n is. fp8 weights are decoded per 128-column block segment; the block scale
 * multiplies the segment's partial dot. Portable and AVX2 kernels here; AVX-512 ones in
 * gemm_avx512.c / gemm_pack512.c, load-time packed ones in gemm_prepacked512.c / gemm_amx.c. */
#include "ops/gemm_internal.h"

#include <immintrin.h>
#include <string.h>

#include "ops/prepack.h"
#include "ops/scratch.h"
#include "ops/wformat.h"

#define PANEL GEMM_PANEL
#define NR 4 /* rows per register block */
#define NT 3 /* tokens per register block */

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
/* below this many tokens packing costs more than it saves (the two break even in the 30s) */
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

typedef void (*blk_fn)(const void *, int64_t, int, const float *, int, int, int, int, float[NR][NT]);

int gemm_panel_rows(enum ops_level lvl, const struct gemm_job *j, const void *act, int r0, int r1)
{
	if (act) /* x as bf16 rows for the load-time packed weights */
		return gemm_panel_prepacked(lvl, j, act, gemm_prepacked_ldxb(j->w->cols), r0, r1);
	if (lvl >= OPS_AVX512 && j->w->cols > 0) {
		/* bf16 dot products: bf16-exact x, and weights whose values are (bf16, fp8) */
		bool dp = lvl >= OPS_AVX512_BF16 && j->x_bf16 && wformat_of(j->w->dtype)->bf16_exact;
		if (!j->w->fixed_order && j->n >= gemm_pack512_min_tokens(j->w->dtype, dp))
			gemm_panel_packed_avx512(j, r0, r1, dp);
		else
			gemm_panel_avx512(j, r0, r1, dp);
		return 0;
	}
	float *pack_buf;
	if (lvl == OPS_AVX2 && !j->w->fixed_order && j->n >= PACK_MIN_TOKENS && j->w->cols > 0 &&
	    (pack_buf = ops_scratch(OPS_SCRATCH_AVX2_PACK, PACK_BUF_BYTES))) {
		gemm_panel_packed(j, r0, r1, pack_buf);
		return 0;
	}
	const struct wmat *w = j->w;
	size_t esz = dtype_size(w->dtype);
	int fp8 = w->dtype == DT_F8_E4M3;
	blk_fn fn = NULL;
	if (lvl == OPS_AVX2)
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
