/* MXFP4 GEMM panels (ops/wf_fp4.h): y[t, r] = Σ_c W[r, c] x[t, c] with W decoded from its
 * packed nibbles and e8m0 scales as it is read. Per level:
 *   portable     scalar decode through a 16-entry table, one group's sum x its scale;
 *   AVX2         16 bytes (a 32-group) → codes in element order → vpshufb to int8 (2 x the
 *                value) → fp32, times the group's scale / 2 (exact: a power of two), FMA;
 *   AVX-512      the same bytes duplicated → vpsrlvd (nibble per lane) → vpermps of the
 *                16-entry fp32 table, times the scale, FMA;
 *   AVX512_BF16  one token (more: the AVX-512 kernel, wf_fp4.c; AMX the same: its tiles would
 *                need one scale per 16 x 32 tile product) 16 bytes
 *                → vpmovzxbd → vpermw of a bf16 table gives the group's 16 bf16 pairs in
 *                element order, vdpbf16ps with x's bf16 pairs, then the group's sum x its
 *                scale in fp32: the codes are exact bf16 and the scale never enters bf16, so
 *                no scale exponent is out of bf16's (denormal-free) range.
 * The vector kernels take whole groups; a view's columns before its first group boundary
 * (col0 not a multiple of 32) and a last part group go through the scalar sum. */
#include <immintrin.h>

#include "ops/gemm_internal.h"
#include "ops/wf_fp4.h"

#define NR 4 /* rows per block */
#define NT 4 /* tokens per block (AVX2: 2) */
#define G FP4_GROUP

const float wf_fp4_e2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
			       -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* fp32 bits of e8m0 byte e, 2^(e - 127) (wf_fp4_e8m0): a load in the kernels' loops */
#define E8M0(e) ((e) == 0 ? 0x00400000u : (e) == 255 ? 0x7fc00000u : (uint32_t)(e) << 23)
#define E8(e) E8M0(e), E8M0(e + 1), E8M0(e + 2), E8M0(e + 3), E8M0(e + 4), E8M0(e + 5), E8M0(e + 6), E8M0(e + 7)
#define E64(e) E8(e), E8(e + 8), E8(e + 16), E8(e + 24), E8(e + 32), E8(e + 40), E8(e + 48), E8(e + 56)
static const uint32_t e8m0_bits[256] = {E64(0), E64(64), E64(128), E64(192)};

/* where the kernels read x: fp32 rows, or bf16 rows */
struct xsrc {
	const float *x;
	const uint16_t *xb;
	int ldx, ldxb;
};

static inline float xval(const struct xsrc *x, int t, int c)
{
	return x->xb ? bf16_to_f32(x->xb[(size_t)t * (size_t)x->ldxb + (size_t)c])
		     : x->x[(size_t)t * (size_t)x->ldx + (size_t)c];
}

/* the bytes of row r from view column c (even) */
static inline const uint8_t *row_at(const struct wmat *w, int r, int c)
{
	return (const uint8_t *)w->data + ((size_t)r * (size_t)w->ld + (size_t)c) / 2;
}

/* the scale byte of row r's group holding view column c */
static inline const uint8_t *scale_at(const struct wmat *w, int r, int c)
{
	return w->scale_e8m0 + (size_t)((w->row0 + r) / w->blk_r) * (size_t)w->scale_ld + (size_t)((w->col0 + c) / G);
}

/* Σ_{c in [c0, c1)} W[r, c] x[t, c] for [c0, c1) inside one scale group: the codes' sum, then
 * the scale (as the reference, fp4_gemv_ref) */
static float seg_dot(const struct wmat *w, int r, const struct xsrc *x, int t, int c0, int c1)
{
	const uint8_t *p = w->data;
	float s = 0;
	for (int c = c0; c < c1; c++) {
		uint8_t b = p[((size_t)r * (size_t)w->ld + (size_t)c) / 2]; /* ld even: the nibble is c's parity */
		s += wf_fp4_e2m1[(c & 1) ? b >> 4 : b & 15] * xval(x, t, c);
	}
	return s * wf_fp4_e8m0(*scale_at(w, r, c0));
}

/* first column after c (view columns) where a new scale group starts, or cols */
static inline int group_end(const struct wmat *w, int c)
{
	int e = ((w->col0 + c) / G + 1) * G - w->col0;
	return e < w->cols ? e : w->cols;
}

/* ---- whole groups: out[rr][t] = Σ_{groups g < ng from c0} scale(rr, g) Σ_g W x ----
 * wp[rr], sp[rr]: row rr's bytes and scales from column c0; wp[NR + rr]: the next block's rows,
 * prefetched a line per 4 groups (rows of a V4 expert are 1-2 KB: the hardware prefetcher
 * barely ramps up within one) */
#define PREFETCH_NEXT(wp, g)                    \
	if (((g)&3) == 0)                       \
		for (int pr = 0; pr < NR; pr++) \
			_mm_prefetch((const char *)(wp)[NR + pr] + (size_t)(g)*G / 2, _MM_HINT_T0);
typedef void (*grp_fn)(const uint8_t *const wp[2 * NR], const uint8_t *const sp[NR], const struct xsrc *x, int c0,
		       int ng, int nr, int nt, float out[NR][NT]);

static void grp_portable(const uint8_t *const wp[2 * NR], const uint8_t *const sp[NR], const struct xsrc *x, int c0,
			 int ng, int nr, int nt, float out[NR][NT])
{
	for (int rr = 0; rr < nr; rr++)
		for (int t = 0; t < nt; t++) {
			float acc = 0;
			for (int g = 0; g < ng; g++) {
				const uint8_t *b = wp[rr] + (size_t)g * G / 2;
				int c = c0 + g * G;
				float s = 0;
				for (int i = 0; i < G / 2; i++)
					s += wf_fp4_e2m1[b[i] & 15] * xval(x, t, c + 2 * i) +
					     wf_fp4_e2m1[b[i] >> 4] * xval(x, t, c + 2 * i + 1);
				acc += s * wf_fp4_e8m0(sp[rr][g]);
			}
			out[rr][t] = acc;
		}
}

/* ---- AVX2 + FMA ---- */
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))
#define AVX2_FN __attribute__((target("avx2,fma")))

/* a group's 16 bytes → twice its 32 values (scaled by sv) in element order */
AVX2_INLINE void dec_avx2(const uint8_t *p, __m256 sv, __m256 v[4])
{
	const __m128i m = _mm_set1_epi8(0x0f);
	const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12); /* 2 x e2m1 */
	__m128i b = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
	__m128i v0 = _mm_shuffle_epi8(lut, _mm_unpacklo_epi8(lo, hi)); /* elements 0..15 */
	__m128i v1 = _mm_shuffle_epi8(lut, _mm_unpackhi_epi8(lo, hi)); /* 16..31 */
	v[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v0)), sv);
	v[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v0, 8))), sv);
	v[2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v1)), sv);
	v[3] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v1, 8))), sv);
}

AVX2_INLINE float hsum_avx2(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

AVX2_INLINE void grp_avx2_t(const uint8_t *const wp[2 * NR], const uint8_t *const sp[NR], const struct xsrc *x, int c0,
			    int ng, float out[NR][NT], const int nr, const int nt)
{
	__m256 acc[NR][2];
#pragma GCC unroll 4
	for (int rr = 0; rr < nr; rr++)
#pragma GCC unroll 2
		for (int t = 0; t < nt; t++)
			acc[rr][t] = _mm256_setzero_ps();
	for (int g = 0; g < ng; g++) {
		const float *xr = x->x + c0 + g * G;
		PREFETCH_NEXT(wp, g)
#pragma GCC unroll 4
		for (int rr = 0; rr < nr; rr++) {
			__m256 v[4];
			dec_avx2(wp[rr] + (size_t)g * G / 2,
				 _mm256_castsi256_ps(_mm256_set1_epi32((int)e8m0_bits[sp[rr][g]])), v);
#pragma GCC unroll 2
			for (int t = 0; t < nt; t++) {
				const float *xt = xr + (size_t)t * (size_t)x->ldx;
				__m256 a = _mm256_fmadd_ps(v[0], _mm256_loadu_ps(xt), acc[rr][t]);
				a = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(xt + 8), a);
				a = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(xt + 16), a);
				acc[rr][t] = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(xt + 24), a);
			}
		}
	}
	for (int rr = 0; rr < nr; rr++)
		for (int t = 0; t < nt; t++)
			out[rr][t] = hsum_avx2(acc[rr][t]) * 0.5f; /* the table's 2 x e2m1 (exact) */
}

static AVX2_FN void grp_avx2(const uint8_t *const wp[2 * NR], const uint8_t *const sp[NR], const struct xsrc *x,
			     int c0, int ng, int nr, int nt, float out[NR][NT])
{
	if (nr == NR)
		nt == 2 ? grp_avx2_t(wp, sp, x, c0, ng, out, NR, 2) : grp_avx2_t(wp, sp, x, c0, ng, out, NR, 1);
	else
		nt == 2 ? grp_avx2_t(wp, sp, x, c0, ng, out, 1, 2) : grp_avx2_t(wp, sp, x, c0, ng, out, 1, 1);
}

/* ---- AVX-512 (fp32 x) ---- */
#define A512_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512bf16,fma")))
#define A512_FN __attribute__((target("avx512f,avx512bw,avx512bf16,fma")))

/* a group's 16 bytes → its 32 values (times s) in element order */
A512_INLINE void dec_512(const uint8_t *p, __m512 s, __m512 *v0, __m512 *v1)
{
	const __m512 lut = _mm512_loadu_ps(wf_fp4_e2m1);
	const __m512i sh = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
	__m128i b = _mm_loadu_si128((const __m128i *)(const void *)p);
	/* each byte twice, the odd lane's shifted by 4: vpermps reads the low 4 bits */
	__m512i i0 = _mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(b, b)), sh);
	__m512i i1 = _mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(b, b)), sh);
	*v0 = _mm512_mul_ps(_mm512_permutexvar_ps(i0, lut), s);
	*v1 = _mm512_mul_ps(_mm512_permutexvar_ps(i1, lut), s);
}

A512_INLINE void grp_512_t(const uint8_t *const wp[2 * NR], const uint8_t *const sp[NR], const struct xsrc *x, int c0,
			   int ng, float out[NR][NT], const int nr, const int nt)
{
	__m512 acc[NR][NT];
#pragma GCC unroll 4
	for (int rr = 0; rr < nr; rr++)
#pragma GCC unroll 4
		for (int t = 0; t < nt; t++)
			acc[rr][t] = _mm512_setzero_ps();
	for (int g = 0; g < ng; g++) {
		const float *xr = x->x + c0 + g * G;
		PREFETCH_NEXT(wp, g)
#pragma GCC unroll 4
		for (int rr = 0; rr < nr; rr++) {
			__m512 v0, v1;
			dec_512(wp[rr] + (size_t)g * G / 2,
				_mm512_castsi512_ps(_mm512_set1_epi32((int)e8m0_bits[sp[rr][g]])), &v0, &v1);
#pragma GCC unroll 4
			for (int t = 0; t < nt; t++) {
				const float *xt = xr + (size_t)t * (size_t)x->ldx;
				acc[rr][t] = _mm512_fmadd_ps(v0, _mm512_loadu_ps(xt), acc[rr][t]);
				acc[rr][t] = _mm512_fmadd_ps(v1, _mm512_loadu_ps(xt + 16), acc[rr][t]);
			}
		}
	}
	for (int rr = 0; rr < nr; rr++)
		for (int t = 0; t < nt; t++)
			out[rr][t] = _mm512_reduce_add_ps(acc[rr][t]);
}

/* ---- AVX512_BF16: bf16 pairs of codes · x's bf16 pairs, then the scale ---- */
/* bf16 bits of e2m1 code i & 15 (32 entries: vpermw reads 5 index bits) */
static const uint16_t e2m1_bf16[32] = {0,      0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x4080, 0x40c0,
				       0x8000, 0xbf00, 0xbf80, 0xbfc0, 0xc000, 0xc040, 0xc080, 0xc0c0,
				       0,      0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x4080, 0x40c0,
				       0x8000, 0xbf00, 0xbf80, 0xbfc0, 0xc000, 0xc040, 0xc080, 0xc0c0};

A512_INLINE __m512i dec_bf16(const uint8_t *p)
{
	const __m512i lut = _mm512_loadu_si512(e2m1_bf16);
	/* dword i = byte i | byte i << 12: its low word's 5 low bits index the low nibble (bit 4,
	 * the high nibble's, is what the table's repeat is for), its high word is byte i >> 4 */
	__m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
	return _mm512_permutexvar_epi16(_mm512_or_si512(d, _mm512_slli_epi32(d, 12)), lut);
}

A512_INLINE void grp_dp_t(const uint8_t *const wp[2 * NR], const uint8_t *const sp[NR], const struct xsrc *x, int c0,
			  int ng, float out[NR][NT], const int nr, const int nt)
{
	__m512 acc[NR][NT];
#pragma GCC unroll 4
	for (int rr = 0; rr < nr; rr++)
#pragma GCC unroll 4
		for (int t = 0; t < nt; t++)
			acc[rr][t] = _mm512_setzero_ps();
	for (int g = 0; g < ng; g++) {
		__m512i xv[NT];
		PREFETCH_NEXT(wp, g)
#pragma GCC unroll 4
		for (int t = 0; t < nt; t++)
			xv[t] = _mm512_loadu_si512(x->xb + (size_t)t * (size_t)x->ldxb + (size_t)(c0 + g * G));
#pragma GCC unroll 4
		for (int rr = 0; rr < nr; rr++) {
			__m512i wv = dec_bf16(wp[rr] + (size_t)g * G / 2);
			__m512 s = _mm512_castsi512_ps(_mm512_set1_epi32((int)e8m0_bits[sp[rr][g]]));
#pragma GCC unroll 4
			for (int t = 0; t < nt; t++)
				acc[rr][t] = _mm512_fmadd_ps(
					_mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)wv, (__m512bh)xv[t]), s,
					acc[rr][t]);
		}
	}
	for (int rr = 0; rr < nr; rr++)
		for (int t = 0; t < nt; t++)
			out[rr][t] = _mm512_reduce_add_ps(acc[rr][t]);
}

/* NR rows or 1, 1 to NT tokens (the panel's blocks) */
#define TOKEN_CASES(T, R)                                 \
	switch (nt) {                                     \
	case 1: T(wp, sp, x, c0, ng, out, R, 1); break;   \
	case 2: T(wp, sp, x, c0, ng, out, R, 2); break;   \
	case 3: T(wp, sp, x, c0, ng, out, R, 3); break;   \
	default: T(wp, sp, x, c0, ng, out, R, NT); break; \
	}
#define BLOCK_CASES(T)             \
	if (nr == NR) {            \
		TOKEN_CASES(T, NR) \
	} else {                   \
		TOKEN_CASES(T, 1)  \
	}

static A512_FN void grp_512(const uint8_t *const wp[2 * NR], const uint8_t *const sp[NR], const struct xsrc *x, int c0,
			    int ng, int nr, int nt, float out[NR][NT])
{
	BLOCK_CASES(grp_512_t)
}

static A512_FN void grp_dp(const uint8_t *const wp[2 * NR], const uint8_t *const sp[NR], const struct xsrc *x, int c0,
			   int ng, int nr, int nt, float out[NR][NT])
{
	BLOCK_CASES(grp_dp_t)
}

const char *gemm_fp4_kernel_name(enum ops_level lvl)
{
	return lvl >= OPS_AVX512_BF16 ? "fp4 vpermw + vdpbf16ps (bf16 x; fp32 x: vpermps + FMA)"
	       : lvl >= OPS_AVX512    ? "fp4 vpermps + FMA"
	       : lvl >= OPS_AVX2      ? "fp4 vpshufb + FMA"
				      : "fp4 scalar";
}

int gemm_panel_fp4(enum ops_level lvl, const struct gemm_job *j, const float *x, int ldx, const uint16_t *xb, int ldxb,
		   int r0, int r1)
{
	const struct wmat *w = j->w;
	CHECK(w->dtype == DT_F4_E2M1 && w->blk_c == G);
	struct xsrc xs = {.x = xb ? NULL : x, .xb = xb, .ldx = ldx, .ldxb = ldxb};
	grp_fn fn = xb && lvl >= OPS_AVX512_BF16 ? grp_dp
		    : lvl >= OPS_AVX512          ? grp_512
		    : lvl >= OPS_AVX2            ? grp_avx2
						 : grp_portable;
	CHECK(!xb || fn == grp_dp);
	int nt_max = fn == grp_avx2 ? 2 : NT;
	/* the columns: a head up to the first group boundary (a view from inside a group), whole
	 * groups, a part group */
	int ch = w->col0 % G ? group_end(w, 0) : 0;
	int ng = (w->cols - ch) / G, ce = ch + ng * G;
	/* blocks of up to nt_max tokens, NR rows or 1: the kernels' shapes */
	for (int t0 = 0, nt; t0 < j->n; t0 += nt) {
		nt = j->n - t0 < nt_max ? j->n - t0 : nt_max;
		struct xsrc xt = xs;
		if (xt.x)
			xt.x += (size_t)t0 * (size_t)ldx;
		if (xt.xb)
			xt.xb += (size_t)t0 * (size_t)ldxb;
		for (int r = r0, nr; r < r1; r += nr) {
			nr = r1 - r >= NR ? NR : 1;
			const uint8_t *wp[2 * NR], *sp[NR];
			for (int rr = 0; rr < NR; rr++) { /* past nr: row r's, never read */
				int rw = rr < nr ? r + rr : r, rn = r + nr + rr < r1 ? r + nr + rr : r1 - 1;
				wp[rr] = row_at(w, rw, ch);
				wp[NR + rr] = row_at(w, rn, ch); /* the next block's, prefetched */
				sp[rr] = scale_at(w, rw, ch);
			}
			float out[NR][NT] = {{0}};
			if (ng)
				fn(wp, sp, &xt, ch, ng, nr, nt, out);
			for (int rr = 0; rr < nr; rr++)
				for (int t = 0; t < nt; t++) {
					float s = out[rr][t];
					if (ch)
						s += seg_dot(w, r + rr, &xt, t, 0, ch);
					if (ce < w->cols)
						s += seg_dot(w, r + rr, &xt, t, ce, w->cols);
					float *y = j->y + (size_t)(t0 + t) * (size_t)j->ldy + (size_t)(r + rr);
					*y = j->accumulate ? *y + s : s;
				}
		}
	}
	return 0;
}
