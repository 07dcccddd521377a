/* AVX-512 kernels of the paged MQA (see mqa_avx512.h): 4 query rows x 4 keys per score
 * pass, 4 rows x 64 outputs per value pass, a polynomial exp for the softmax. fp32 math. */
#include "attn/kernels/mqa_avx512.h"

#include <immintrin.h>
#include <math.h>

#include "attn/kernels/mqa.h"
#include "base/dtype.h"
#include "ops/vexp.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define INLINE AVX512 static inline __attribute__((always_inline))
#define KB MQA_KEY_BLOCK

/* the first n of 16 lanes (n may be <= 0 or >= 16) */
INLINE __mmask16 tail_mask(int n) { return n <= 0 ? 0 : n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1); }

AVX512 void mqa512_bf16_row(float *dst, const uint16_t *src, int n)
{
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		__m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
		_mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	if (i < n) {
		__mmask16 k = tail_mask(n - i);
		__m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, src + i));
		_mm512_mask_storeu_ps(dst + i, k, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
	}
}

/* ---- scores ---- */

/* One 16-float step of the 4 x 4 dot products: 4 key loads and 4 query loads feed 16 FMAs. */
#define DOT_STEP(LD)                                                                       \
	do {                                                                               \
		__m512 y0 = LD(k0 + d), y1 = LD(k1 + d), y2 = LD(k2 + d), y3 = LD(k3 + d); \
		__m512 x = LD(q0 + d);                                                     \
		a00 = _mm512_fmadd_ps(x, y0, a00), a01 = _mm512_fmadd_ps(x, y1, a01);      \
		a02 = _mm512_fmadd_ps(x, y2, a02), a03 = _mm512_fmadd_ps(x, y3, a03);      \
		x = LD(q1 + d);                                                            \
		a10 = _mm512_fmadd_ps(x, y0, a10), a11 = _mm512_fmadd_ps(x, y1, a11);      \
		a12 = _mm512_fmadd_ps(x, y2, a12), a13 = _mm512_fmadd_ps(x, y3, a13);      \
		x = LD(q2 + d);                                                            \
		a20 = _mm512_fmadd_ps(x, y0, a20), a21 = _mm512_fmadd_ps(x, y1, a21);      \
		a22 = _mm512_fmadd_ps(x, y2, a22), a23 = _mm512_fmadd_ps(x, y3, a23);      \
		x = LD(q3 + d);                                                            \
		a30 = _mm512_fmadd_ps(x, y0, a30), a31 = _mm512_fmadd_ps(x, y1, a31);      \
		a32 = _mm512_fmadd_ps(x, y2, a32), a33 = _mm512_fmadd_ps(x, y3, a33);      \
	} while (0)

/* (a + b) with a's and b's 256-bit halves folded: lanes 0-7 partials of a, 8-15 of b */
INLINE __m512 fold256(__m512 a, __m512 b)
{
	return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
}
/* 128-bit lane c of the result: 4 partials of input c (inputs from fold256) */
INLINE __m512 fold128(__m512 a, __m512 b)
{
	return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
}
INLINE __m512 fold64(__m512 a, __m512 b)
{
	return _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
			     _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}
INLINE __m512 fold32(__m512 a, __m512 b)
{
	return _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
			     _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Prefetch cursor over the lines of the next block's rows. */
struct pf_cursor {
	const void *const *rows;
	int n, r, bytes, off;
};
INLINE void pf_next(struct pf_cursor *c)
{
	_mm_prefetch((const char *)c->rows[c->r] + c->off, _MM_HINT_T0);
	if ((c->off += 64) >= c->bytes)
		c->off = 0, c->r++;
}

#define LOADU(p) _mm512_loadu_ps(p)
#define LOADM(p) _mm512_maskz_loadu_ps(tm, p)

/* Lane 4 r + c of the result = q_r . k_c over n floats. */
INLINE __m512 dot4x4(const float *q0, const float *q1, const float *q2, const float *q3, const float *k0,
		     const float *k1, const float *k2, const float *k3, int n, struct pf_cursor *pc, int pn)
{
	__m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
	__m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
	__m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
	__m512 a30 = a00, a31 = a00, a32 = a00, a33 = a00;
	int d = 0, st = n >= 16 ? n / 16 : 1, pk = (pn + st - 1) / st; /* lines per step */
	for (; d + 16 <= n; d += 16) {
		for (int e = 0; e < pk && pn > 0; e++, pn--)
			pf_next(pc);
		DOT_STEP(LOADU);
	}
	if (d < n) {
		__mmask16 tm = tail_mask(n - d);
		DOT_STEP(LOADM);
	}
	/* vector r + 4 c holds q_r . k_c; the folds put its total in lane 4 r + c */
	__m512 w0 = fold128(fold256(a00, a10), fold256(a20, a30));
	__m512 w1 = fold128(fold256(a01, a11), fold256(a21, a31));
	__m512 w2 = fold128(fold256(a02, a12), fold256(a22, a32));
	__m512 w3 = fold128(fold256(a03, a13), fold256(a23, a33));
	return fold32(fold64(w0, w1), fold64(w2, w3));
}

AVX512 void mqa512_scores(const float *q, int nr, int row, const float *const *kp, int nk, float scale, float *s,
			  const void *const *pf, int npf, int pf_bytes)
{
	__m512 sc = _mm512_set1_ps(scale);
	/* the next block's lines, spread evenly over the tiles and their steps */
	struct pf_cursor pc = {pf, npf, 0, pf_bytes, 0};
	int lines = npf * ((pf_bytes + 63) / 64), tiles = ((nk + 3) / 4) * ((nr + 3) / 4);
	int per = (lines + tiles - 1) / tiles;
	/* keys outer: 4 key rows stay in L1 while the query rows stream past. Missing rows or
	 * keys of a partial 4 x 4 tile repeat the last one and are not stored. */
	for (int j = 0; j < nk; j += 4) {
		int kc = nk - j < 4 ? nk - j : 4;
		const float *k0 = kp[j], *k1 = kp[j + (kc > 1)], *k2 = kp[j + (kc > 2) * 2],
			    *k3 = kp[j + (kc > 3) * 3];
		for (int i = 0; i < nr; i += 4) {
			int rc = nr - i < 4 ? nr - i : 4;
			const float *q0 = q + (size_t)i * row, *q1 = q0 + (size_t)(rc > 1) * row;
			const float *q2 = q0 + (size_t)(rc > 2) * 2 * row;
			const float *q3 = q0 + (size_t)(rc > 3) * 3 * row;
			int pn = per < lines ? per : lines;
			lines -= pn;
			__m512 r = dot4x4(q0, q1, q2, q3, k0, k1, k2, k3, row, &pc, pn);
			r = _mm512_mul_ps(r, sc);
			float *o = s + (size_t)i * KB + j;
			if (kc == 4 && rc == 4) {
				_mm_storeu_ps(o, _mm512_castps512_ps128(r));
				_mm_storeu_ps(o + KB, _mm512_extractf32x4_ps(r, 1));
				_mm_storeu_ps(o + 2 * KB, _mm512_extractf32x4_ps(r, 2));
				_mm_storeu_ps(o + 3 * KB, _mm512_extractf32x4_ps(r, 3));
			} else {
				float t[16];
				_mm512_storeu_ps(t, r);
				for (int a = 0; a < rc; a++)
					for (int c = 0; c < kc; c++)
						o[a * KB + c] = t[4 * a + c];
			}
		}
	}
}

/* ---- softmax ---- */

AVX512 void mqa512_softmax(float *s, int ls, int nr, int nk, const int *nvis, float *m, float *l, float *alpha)
{
	const __m512 ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
	for (int i = 0; i < nr; i++) {
		float *si = s + (size_t)i * ls;
		int nv = nvis[i];
		if (nv <= 0) {
			alpha[i] = 1.0f;
			for (int j = 0; j < nk; j += 16)
				_mm512_mask_storeu_ps(si + j, tail_mask(nk - j), zero);
			continue;
		}
		__m512 mx = ninf;
		for (int j = 0; j < nv; j += 16) {
			__m512 x = _mm512_mask_loadu_ps(ninf, tail_mask(nv - j), si + j);
			mx = _mm512_max_ps(mx, x);
		}
		float bm = _mm512_reduce_max_ps(mx);
		float mn = bm > m[i] ? bm : m[i];
		alpha[i] = m[i] == -INFINITY ? 0.0f : expf(m[i] - mn);
		__m512 vm = _mm512_set1_ps(mn), sum = zero;
		for (int j = 0; j < nk; j += 16) {
			__mmask16 kv = j < nv ? tail_mask(nv - j) : 0;
			__m512 e = _mm512_maskz_mov_ps(kv,
						       exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(kv, si + j), vm)));
			sum = _mm512_add_ps(sum, e);
			_mm512_mask_storeu_ps(si + j, tail_mask(nk - j), e);
		}
		l[i] = l[i] * alpha[i] + _mm512_reduce_add_ps(sum);
		m[i] = mn;
	}
}

/* ---- values ---- */

/* R rows (R <= 4, a constant after inlining) x up to 64 outputs from column d: the value
 * loads of a key are shared by R rows, the score broadcasts by 4 vectors. Masks limit the
 * columns (all ones when `full`). */
#define ACC_ROW(A, P)                                                                     \
	do {                                                                              \
		__m512 x = _mm512_set1_ps((P)[j]);                                        \
		A##0 = _mm512_fmadd_ps(x, v0, A##0), A##1 = _mm512_fmadd_ps(x, v1, A##1); \
		A##2 = _mm512_fmadd_ps(x, v2, A##2), A##3 = _mm512_fmadd_ps(x, v3, A##3); \
	} while (0)
#define LD_O(A, O, AL)                                                        \
	__m512 A##0 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, (O)), AL),      \
	       A##1 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m1, (O) + 16), AL), \
	       A##2 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m2, (O) + 32), AL), \
	       A##3 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m3, (O) + 48), AL)
#define ST_O(A, O)                                         \
	do {                                               \
		_mm512_mask_storeu_ps((O), m0, A##0);      \
		_mm512_mask_storeu_ps((O) + 16, m1, A##1); \
		_mm512_mask_storeu_ps((O) + 32, m2, A##2); \
		_mm512_mask_storeu_ps((O) + 48, m3, A##3); \
	} while (0)

INLINE void acc_rows(int R, float *o, int dv, const float *al, const float *p, const float *const *kp, int nk, int d,
		     int full, __mmask16 m0, __mmask16 m1, __mmask16 m2, __mmask16 m3)
{
	float *o0 = o + d, *o1 = o0 + dv, *o2 = o1 + dv, *o3 = o2 + dv;
	const float *p0 = p, *p1 = p + KB, *p2 = p + 2 * KB, *p3 = p + 3 * KB;
	LD_O(a, o0, _mm512_set1_ps(al[0]));
	LD_O(b, R > 1 ? o1 : o0, _mm512_set1_ps(R > 1 ? al[1] : 0));
	LD_O(c, R > 2 ? o2 : o0, _mm512_set1_ps(R > 2 ? al[2] : 0));
	LD_O(e, R > 3 ? o3 : o0, _mm512_set1_ps(R > 3 ? al[3] : 0));
	for (int j = 0; j < nk; j++) {
		const float *v = kp[j] + d;
		__m512 v0, v1, v2, v3;
		if (full) {
			v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
			v2 = _mm512_loadu_ps(v + 32), v3 = _mm512_loadu_ps(v + 48);
		} else {
			v0 = _mm512_maskz_loadu_ps(m0, v);
			v1 = _mm512_maskz_loadu_ps(m1, v + 16);
			v2 = _mm512_maskz_loadu_ps(m2, v + 32);
			v3 = _mm512_maskz_loadu_ps(m3, v + 48);
		}
		ACC_ROW(a, p0);
		if (R > 1)
			ACC_ROW(b, p1);
		if (R > 2)
			ACC_ROW(c, p2);
		if (R > 3)
			ACC_ROW(e, p3);
	}
	ST_O(a, o0);
	if (R > 1)
		ST_O(b, o1);
	if (R > 2)
		ST_O(c, o2);
	if (R > 3)
		ST_O(e, o3);
}

AVX512 void mqa512_accum(float *out, int nr, int dv, const float *alpha, const float *s, const int *nvis,
			 const float *const *kp, int nk)
{
	/* columns outer: a 64-column stripe of the block's values (nk x 256 bytes) stays in L1
	 * for every row group */
	for (int d = 0; d < dv; d += 64) {
		int w = dv - d;
		__mmask16 m0 = tail_mask(w), m1 = tail_mask(w - 16), m2 = tail_mask(w - 32), m3 = tail_mask(w - 48);
		for (int i = 0; i < nr; i += 4) {
			int R = nr - i < 4 ? nr - i : 4, n = 0;
			for (int r = 0; r < R; r++)
				n = nvis[i + r] > n ? nvis[i + r] : n;
			if (n <= 0)
				continue;
			n = n < nk ? n : nk; /* keys past a row's nvis have score 0 */
			float *o = out + (size_t)i * dv;
			const float *p = s + (size_t)i * KB, *al = alpha + i;
			if (w >= 64 && R == 4)
				acc_rows(4, o, dv, al, p, kp, n, d, 1, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF);
			else if (R == 4)
				acc_rows(4, o, dv, al, p, kp, n, d, 0, m0, m1, m2, m3);
			else if (R == 3)
				acc_rows(3, o, dv, al, p, kp, n, d, 0, m0, m1, m2, m3);
			else if (R == 2)
				acc_rows(2, o, dv, al, p, kp, n, d, 0, m0, m1, m2, m3);
			else
				acc_rows(1, o, dv, al, p, kp, n, d, 0, m0, m1, m2, m3);
		}
	}
}

/* ---- bf16 scores (AVX512_BF16): q and the cached keys both bf16, vdpbf16ps ---- */

#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define INLINE_BF16 BF16 static inline __attribute__((always_inline))

BF16 void mqa512_to_bf16(uint16_t *dst, const float *src, int n)
{
	int i = 0;
	for (; i + 32 <= n; i += 32)
		_mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16),
									  _mm512_loadu_ps(src + i)));
	for (; i < n; i++)
		dst[i] = f32_to_bf16(src[i]);
}

/* The bf16 twin of DOT_STEP / dot4x4 / mqa512_scores. One generic version (element type and
 * multiply-add as template constants) ran slower on gcc 12: it spilled the query vector
 * through the stack on every bf16 step. */
#define DP_STEP(LD)                                                                          \
	do {                                                                                 \
		__m512bh y0 = LD(k0 + d), y1 = LD(k1 + d), y2 = LD(k2 + d), y3 = LD(k3 + d); \
		__m512bh x = LD(q0 + d);                                                     \
		a00 = _mm512_dpbf16_ps(a00, x, y0), a01 = _mm512_dpbf16_ps(a01, x, y1);      \
		a02 = _mm512_dpbf16_ps(a02, x, y2), a03 = _mm512_dpbf16_ps(a03, x, y3);      \
		x = LD(q1 + d);                                                              \
		a10 = _mm512_dpbf16_ps(a10, x, y0), a11 = _mm512_dpbf16_ps(a11, x, y1);      \
		a12 = _mm512_dpbf16_ps(a12, x, y2), a13 = _mm512_dpbf16_ps(a13, x, y3);      \
		x = LD(q2 + d);                                                              \
		a20 = _mm512_dpbf16_ps(a20, x, y0), a21 = _mm512_dpbf16_ps(a21, x, y1);      \
		a22 = _mm512_dpbf16_ps(a22, x, y2), a23 = _mm512_dpbf16_ps(a23, x, y3);      \
		x = LD(q3 + d);                                                              \
		a30 = _mm512_dpbf16_ps(a30, x, y0), a31 = _mm512_dpbf16_ps(a31, x, y1);      \
		a32 = _mm512_dpbf16_ps(a32, x, y2), a33 = _mm512_dpbf16_ps(a33, x, y3);      \
	} while (0)
#define LOADU16(p) ((__m512bh)_mm512_loadu_si512(p))
#define LOADM16(p) ((__m512bh)_mm512_maskz_loadu_epi16(tm, p))

INLINE_BF16 __m512 dot4x4_dp(const uint16_t *q0, const uint16_t *q1, const uint16_t *q2, const uint16_t *q3,
			     const uint16_t *k0, const uint16_t *k1, const uint16_t *k2, const uint16_t *k3, int n,
			     struct pf_cursor *pc, int pn)
{
	__m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
	__m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
	__m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
	__m512 a30 = a00, a31 = a00, a32 = a00, a33 = a00;
	int d = 0, st = n >= 32 ? n / 32 : 1, pk = (pn + st - 1) / st; /* lines per step */
	for (; d + 32 <= n; d += 32) {
		for (int e = 0; e < pk && pn > 0; e++, pn--)
			pf_next(pc);
		DP_STEP(LOADU16);
	}
	if (d < n) {
		__mmask32 tm = (__mmask32)((1u << (n - d)) - 1);
		DP_STEP(LOADM16);
	}
	__m512 w0 = fold128(fold256(a00, a10), fold256(a20, a30));
	__m512 w1 = fold128(fold256(a01, a11), fold256(a21, a31));
	__m512 w2 = fold128(fold256(a02, a12), fold256(a22, a32));
	__m512 w3 = fold128(fold256(a03, a13), fold256(a23, a33));
	return fold32(fold64(w0, w1), fold64(w2, w3));
}

BF16 void mqa512_scores_dp(const uint16_t *q, int nr, int row, const uint16_t *const *kr, int nk, float scale,
			   float *s, const void *const *pf, int npf, int pf_bytes)
{
	__m512 sc = _mm512_set1_ps(scale);
	struct pf_cursor pc = {pf, npf, 0, pf_bytes, 0};
	int lines = npf * ((pf_bytes + 63) / 64), tiles = ((nk + 3) / 4) * ((nr + 3) / 4);
	int per = (lines + tiles - 1) / tiles;
	for (int j = 0; j < nk; j += 4) {
		int kc = nk - j < 4 ? nk - j : 4;
		const uint16_t *k0 = kr[j], *k1 = kr[j + (kc > 1)], *k2 = kr[j + (kc > 2) * 2],
			       *k3 = kr[j + (kc > 3) * 3];
		for (int i = 0; i < nr; i += 4) {
			int rc = nr - i < 4 ? nr - i : 4;
			const uint16_t *q0 = q + (size_t)i * row, *q1 = q0 + (size_t)(rc > 1) * row;
			const uint16_t *q2 = q0 + (size_t)(rc > 2) * 2 * row;
			const uint16_t *q3 = q0 + (size_t)(rc > 3) * 3 * row;
			int pn = per < lines ? per : lines;
			lines -= pn;
			__m512 r = _mm512_mul_ps(dot4x4_dp(q0, q1, q2, q3, k0, k1, k2, k3, row, &pc, pn), sc);
			float *o = s + (size_t)i * KB + j;
			float t[16];
			_mm512_storeu_ps(t, r);
			for (int a = 0; a < rc; a++)
				for (int c = 0; c < kc; c++)
					o[a * KB + c] = t[4 * a + c];
		}
	}
}

/* ---- bf16 value pass (AVX512_BF16): probabilities rounded to bf16, vdpbf16ps ---- */

#define PV_R 8 /* query rows per pass: 8 x 32 outputs in 16 accumulators */

BF16 void mqa512_prob_pairs(const float *s, int ls, int nr, int nk, uint32_t *pp)
{
	_Static_assert(KB % 32 == 0 && MQA_KEY_BLOCK_WIDE % 32 == 0, "whole 32-key conversions");
	for (int i = 0; i < nr; i++)
		for (int j = 0; j < nk; j += 32) {
			const float *si = s + (size_t)i * ls + j;
			__m512 lo = _mm512_maskz_loadu_ps(tail_mask(nk - j), si);
			__m512 hi = _mm512_maskz_loadu_ps(tail_mask(nk - j - 16), si + 16);
			_mm512_storeu_si512(pp + (size_t)i * (ls / 2) + j / 2, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
		}
}

/* The key pairs are interleaved with unpacklo/hi_epi16 (one cheap uop each; vpermt2w made the
 * pass slower than the whole fp32 one), which interleave within 128-bit lanes: accumulator 0
 * holds columns {0-3, 8-11, 16-19, 24-27} of the stripe, accumulator 1 the others. The
 * outputs are permuted into that order when loaded and back when stored. */
INLINE_BF16 void split_cols(__m512 lo, __m512 hi, __m512i ia, __m512i ib, __m512 *a0, __m512 *a1)
{
	*a0 = _mm512_permutex2var_ps(lo, ia, hi);
	*a1 = _mm512_permutex2var_ps(lo, ib, hi);
}

BF16 void mqa512_accum_dp(float *out, int nr, int dv, const float *alpha, const float *s, const int *nvis,
			  const uint16_t *const *vr, int nk, uint32_t *pp)
{
	mqa512_prob_pairs(s, KB, nr, nk, pp);
	/* stripe column c (0..31) → (accumulator, lane) and back: ia/ib gather the columns of
	 * accumulators 0/1 from the stripe's two vectors; ja/jb scatter them back */
	int32_t ia[16], ib[16], ja[16], jb[16];
	for (int q = 0; q < 16; q++) {
		ia[q] = 8 * (q / 4) + q % 4;
		ib[q] = ia[q] + 4;
	}
	for (int c = 0; c < 32; c++) { /* column c sits in accumulator (c / 4) % 2, lane 4 (c / 8) + c % 4 */
		int lane = 4 * (c / 8) + c % 4, acc = (c / 4) % 2;
		if (c < 16)
			ja[c] = lane + 16 * acc;
		else
			jb[c - 16] = lane + 16 * acc;
	}
	const __m512i via = _mm512_loadu_si512(ia), vib = _mm512_loadu_si512(ib);
	const __m512i vja = _mm512_loadu_si512(ja), vjb = _mm512_loadu_si512(jb);
	/* columns outer: a 32-column stripe of the block's values (nk x 64 bytes) stays in L1
	 * for every row group */
	for (int d = 0; d < dv; d += 32) {
		bool full = dv - d >= 32;
		__mmask32 mv = full ? 0xffffffffu : (__mmask32)((1u << (dv - d)) - 1);
		__mmask16 m0 = tail_mask(dv - d), m1 = tail_mask(dv - d - 16);
		for (int i = 0; i < nr; i += PV_R) {
			int R = nr - i < PV_R ? nr - i : PV_R, n = 0;
			for (int r = 0; r < R; r++)
				n = nvis[i + r] > n ? nvis[i + r] : n;
			if (n <= 0)
				continue;
			n = n < nk ? n : nk; /* probabilities past a row's nvis are 0 */
			/* rows past R repeat row i and are not stored */
			const uint32_t *p0 = pp + (size_t)i * (KB / 2);
			int rs[PV_R];
			__m512 a0[PV_R], a1[PV_R];
#pragma GCC unroll 8
			for (int r = 0; r < PV_R; r++) {
				rs[r] = (r < R ? r : 0) * (KB / 2);
				const float *o = out + (size_t)(i + (r < R ? r : 0)) * dv + d;
				__m512 al = _mm512_set1_ps(alpha[i + (r < R ? r : 0)]);
				split_cols(_mm512_mul_ps(_mm512_maskz_loadu_ps(m0, o), al),
					   _mm512_mul_ps(_mm512_maskz_loadu_ps(m1, o + 16), al), via, vib, &a0[r],
					   &a1[r]);
			}
			for (int p = 0; 2 * p < n; p++) {
				const uint16_t *va = vr[2 * p] + d, *vb = vr[2 * p + 1 < n ? 2 * p + 1 : 2 * p] + d;
				__m512i a = full ? _mm512_loadu_si512(va) : _mm512_maskz_loadu_epi16(mv, va);
				__m512i b = full ? _mm512_loadu_si512(vb) : _mm512_maskz_loadu_epi16(mv, vb);
				__m512bh z0 = (__m512bh)_mm512_unpacklo_epi16(a, b),
					 z1 = (__m512bh)_mm512_unpackhi_epi16(a, b);
#pragma GCC unroll 8
				for (int r = 0; r < PV_R; r++) {
					__m512bh pb = (__m512bh)_mm512_set1_epi32((int)p0[rs[r] + p]);
					a0[r] = _mm512_dpbf16_ps(a0[r], z0, pb);
					a1[r] = _mm512_dpbf16_ps(a1[r], z1, pb);
				}
			}
#pragma GCC unroll 8
			for (int r = 0; r < PV_R; r++) { /* constant indices: the accumulators stay in registers */
				if (r >= R)
					break;
				float *o = out + (size_t)(i + r) * dv + d;
				_mm512_mask_storeu_ps(o, m0, _mm512_permutex2var_ps(a0[r], vja, a1[r]));
				_mm512_mask_storeu_ps(o + 16, m1, _mm512_permutex2var_ps(a0[r], vjb, a1[r]));
			}
		}
	}
}
