/* AVX-512 packed GEMM for many tokens (prefill). Per work item (≤ GEMM_PANEL rows) and k block,
 * sub-panels of SR = 32 rows are packed once, k-major (one k step of a sub-panel = two zmm),
 * then every tile of up to TT tokens runs an outer-product micro-kernel over them: per k step
 * two weight loads, nt broadcasts of x and 2·nt FMAs into 2·nt accumulators (24 at nt = 12),
 * no conversion or horizontal sum in the loop. Two kinds:
 *   f:  fp32 x; the weights widened to fp32 at packing, the fp8 block scale folded in.
 *   dp: bf16 x, bf16/fp8 weights as bf16 pairs: wp[kp][row] = 32-bit (W[2kp], W[2kp+1]), for
 *       vdpbf16ps (exact products, fp32 sums). fp8 decodes exactly (every e4m3 value x 2^-8 is
 *       a normal bf16, so nothing is flushed); its block scale would round if folded, so the
 *       k blocks are cut at scale blocks and each one's partial tile is scaled per row as it
 *       is added into y.
 * Packing transposes 16 rows at a time (16 x 16 words); column tails and scale block ends use
 * masked loads, partial sub-panels masked stores: nothing outside y's rows [r0, r1) x tokens
 * [0, n), nor past a row of W or x, is read or written. */
#include <immintrin.h>

#include "ops/gemm_internal.h"
#include "ops/tr16_512.h"
#include "ops/scratch.h"

#define A512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))
#define A512_INLINE                                                                                             \
	static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma," \
							   "f16c")))

#define SR 32                  /* rows per sub-panel */
#define NSUB (GEMM_PANEL / SR) /* sub-panels per work item */
#define TT 12                  /* tokens per tile (at most) */
#define KF 256                 /* f: columns per k block */
#define KP 256                 /* dp: column pairs per k block */
#define MAX_SEG 8              /* dp: fp8 scale segments per k block */
#define XS (KF + 16)           /* x tile row stride (KF = KP): rows spread over L1 sets */
#define PF_BYTES 256           /* packing: prefetch distance along a weight row */

/* The packed weights of one work item for one k block: f [NSUB][KF][SR] fp32, dp [NSUB][KP][SR]
 * bf16 pairs (64 KB) */
union pk_buf {
	float f[NSUB * KF * SR];
	uint32_t p[NSUB * KP * SR];
};
/* One token tile's x for the k block [TT][XS]: f an fp32 copy, dp bf16 pairs */
union xt_buf {
	float f[TT * XS];
	uint32_t p[TT * XS];
};
/* dp + fp8: the rows' block scale (x 2^8, see ld32) per sub-panel and segment */
typedef float seg_sc_buf[NSUB][MAX_SEG][SR];
/* this thread's buffers (ops_scratch: not static TLS, see ops/scratch.h), set per work item */
static _Thread_local union pk_buf *pk_p;
static _Thread_local union xt_buf *xt_p;
static _Thread_local seg_sc_buf *seg_sc_p;
#define pk (*pk_p)
#define xt (*xt_p)
#define seg_sc (*seg_sc_p)

/* prefetch into L2; integer arithmetic, as the address may lie past the array (harmless) */
static inline void pf_l2(const void *p, ptrdiff_t off)
{
	_mm_prefetch((const char *)((uintptr_t)p + (uintptr_t)off), _MM_HINT_T1);
}

static inline __mmask16 mask16(int n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }
static inline __mmask32 mask32(int n)
{
	return n >= 32 ? (__mmask32)0xffffffffu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1);
}

/* ---- packing ---- */

/* fp8 e4m3 bytes (16-bit lanes) → f16 bits of the value x 2^-8 (f16 holds every e4m3 value so
 * scaled, subnormals included; 0x7f/0xff (NaN) decode as ±480, never in checkpoints) */
A512_INLINE __m256i fp8_f16(__m256i b)
{
	__m256i mag = _mm256_and_si256(_mm256_slli_epi16(b, 7), _mm256_set1_epi16(0x3f80));
	return _mm256_or_si256(mag, _mm256_and_si256(_mm256_slli_epi16(b, 8), _mm256_set1_epi16((short)0x8000)));
}

/* 32 bf16/fp8 weights → 16 bf16 pairs (fp8: exact, x 2^-8) */
A512_INLINE __m512i ld32(const enum dtype dt, const char *row, size_t c, __mmask32 m)
{
	if (dt == DT_BF16)
		return _mm512_maskz_loadu_epi16(m, (const uint16_t *)row + c);
	__m512i b = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, (const uint8_t *)row + c));
	__m512 lo = _mm512_cvtph_ps(fp8_f16(_mm512_castsi512_si256(b)));
	__m512 hi = _mm512_cvtph_ps(fp8_f16(_mm512_extracti64x4_epi64(b, 1)));
	return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* 16 f32/f16 weights → fp32 */
A512_INLINE __m512 ld16(const enum dtype dt, const char *row, size_t c, __mmask16 m)
{
	if (dt == DT_F32)
		return _mm512_maskz_loadu_ps(m, (const float *)row + c);
	return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + c));
}

static inline size_t esize(enum dtype dt) { return dt == DT_F32 ? 4 : dt == DT_F8_E4M3 ? 1 : 2; }

/* the 16 rows from sr + rb of a sub-panel of nr rows (past nr: a valid row, never loaded) */
static inline void rows16(const struct wmat *w, int sr, int rb, int nr, const char *row[16])
{
	for (int i = 0; i < 16; i++)
		row[i] = (const char *)w->data +
			 (size_t)(sr + (rb + i < nr ? rb + i : rb)) * (size_t)w->ld * esize(w->dtype);
}

/* Columns [c, c + min(32, e - c)) of 16 rows (the first nv real) as bf16 pairs, transposed:
 * v[i] = pair i of every row, zero past e (an odd end pads its last pair with 0). */
A512_INLINE void pairs16(const enum dtype dt, const char *const row[16], int nv, int c, int e, __m512i v[16])
{
	__mmask32 m = mask32(e - c);
#pragma GCC unroll 16
	for (int i = 0; i < 16; i++) {
		if (i >= nv) {
			v[i] = _mm512_setzero_si512();
			continue;
		}
		pf_l2(row[i], (ptrdiff_t)((size_t)c * esize(dt) + PF_BYTES));
		v[i] = ld32(dt, row[i], (size_t)c, m);
	}
	tr16(v);
}

/* rows [sr, sr+nr) x columns [k0, k1) → wp[k - k0][row] fp32, fp8 scaled. Chunks never cross
 * an fp8 scale block (a masked one ends each block). bf16/fp8 go through the bf16 pair
 * transpose (half the shuffles of an fp32 one) and split each pair word into its two columns. */
A512_INLINE void pack_f_t(const struct wmat *w, int sr, int nr, int k0, int k1, float *wp, const enum dtype dt)
{
	for (int rb = 0; rb < nr; rb += 16) {
		const char *row[16];
		float sc[16] = {0};
		int nv = nr - rb;
		rows16(w, sr, rb, nr, row);
		for (int c = k0, e; c < k1; c = e) {
			e = gemm_seg_end(w, c) < k1 ? gemm_seg_end(w, c) : k1;
			if (dt == DT_F8_E4M3) /* the decode is 2^-8 small: folded into the scale */
				for (int i = 0; i < 16 && i < nv; i++)
					sc[i] = gemm_wscale(w, sr + rb + i, c) * 256.0f;
			__m512 scv = _mm512_loadu_ps(sc);
			for (int cc = c; cc < e; cc += dt == DT_BF16 || dt == DT_F8_E4M3 ? 32 : 16) {
				__m512i v[16];
				float *d = wp + (size_t)(cc - k0) * SR + rb;
				if (dt == DT_BF16 || dt == DT_F8_E4M3) {
					pairs16(dt, row, nv, cc, e, v);
#pragma GCC unroll 16
					for (int i = 0; i < 16; i++) {
						__m512 lo = _mm512_castsi512_ps(_mm512_slli_epi32(v[i], 16));
						__m512 hi = _mm512_castsi512_ps(
							_mm512_and_si512(v[i], _mm512_set1_epi32((int)0xffff0000u)));
						if (dt == DT_F8_E4M3) {
							lo = _mm512_mul_ps(lo, scv);
							hi = _mm512_mul_ps(hi, scv);
						}
						if (2 * i < e - cc)
							_mm512_store_ps(d + (size_t)(2 * i) * SR, lo);
						if (2 * i + 1 < e - cc)
							_mm512_store_ps(d + (size_t)(2 * i + 1) * SR, hi);
					}
					continue;
				}
				__mmask16 m = mask16(e - cc);
#pragma GCC unroll 16
				for (int i = 0; i < 16; i++) {
					if (i >= nv) {
						v[i] = _mm512_setzero_si512();
						continue;
					}
					pf_l2(row[i], (ptrdiff_t)((size_t)cc * esize(dt) + PF_BYTES));
					v[i] = _mm512_castps_si512(ld16(dt, row[i], (size_t)cc, m));
				}
				tr16(v);
#pragma GCC unroll 16
				for (int i = 0; i < 16; i++)
					if (i < e - cc)
						_mm512_store_si512((__m512i *)(d + (size_t)i * SR), v[i]);
			}
		}
	}
}

static A512 void pack_f(const struct wmat *w, int sr, int nr, int k0, int k1, float *wp)
{
	switch (w->dtype) {
	case DT_F32: pack_f_t(w, sr, nr, k0, k1, wp, DT_F32); break;
	case DT_BF16: pack_f_t(w, sr, nr, k0, k1, wp, DT_BF16); break;
	case DT_F16: pack_f_t(w, sr, nr, k0, k1, wp, DT_F16); break;
	default: pack_f_t(w, sr, nr, k0, k1, wp, DT_F8_E4M3); break;
	}
}

/* A dp k block: segments [s, e) (one per fp8 scale block; one for bf16) whose pairs start at
 * pair p of the block, each zero-padded to whole pairs (a pair never spans two scales). */
struct kblock {
	int n, s[MAX_SEG], e[MAX_SEG], p[MAX_SEG], np;
};

/* the dp k block from column k0: whole segments up to KP pairs (a longer one is cut); returns
 * its end */
static int kblock_next(const struct wmat *w, int k0, struct kblock *kb)
{
	int c = k0, p = 0;
	kb->n = 0;
	while (c < w->cols && kb->n < MAX_SEG) {
		int e = gemm_seg_end(w, c), np = (e - c + 1) / 2;
		if (p + np > KP) {
			if (kb->n > 0)
				break;
			e = c + 2 * KP;
			np = KP;
		}
		kb->s[kb->n] = c;
		kb->e[kb->n] = e;
		kb->p[kb->n] = p;
		kb->n++;
		p += np;
		c = e;
	}
	kb->np = p;
	return c;
}

/* rows [sr, sr+nr) over the block's segments → wp[pair][row] */
A512_INLINE void pack_dp_t(const struct wmat *w, int sr, int nr, const struct kblock *kb, uint32_t *wp,
			   const enum dtype dt)
{
	for (int rb = 0; rb < nr; rb += 16) {
		const char *row[16];
		rows16(w, sr, rb, nr, row);
		for (int g = 0; g < kb->n; g++)
			for (int c = kb->s[g], e = kb->e[g]; c < e; c += 32) {
				__m512i v[16];
				pairs16(dt, row, nr - rb, c, e, v);
				uint32_t *d = wp + (size_t)(kb->p[g] + (c - kb->s[g]) / 2) * SR + rb;
#pragma GCC unroll 16
				for (int i = 0; i < 16; i++)
					if (2 * i < e - c)
						_mm512_store_si512((__m512i *)(d + (size_t)i * SR), v[i]);
			}
	}
}

static A512 void pack_dp(const struct wmat *w, int sr, int nr, const struct kblock *kb, uint32_t *wp)
{
	if (w->dtype == DT_BF16)
		pack_dp_t(w, sr, nr, kb, wp, DT_BF16);
	else
		pack_dp_t(w, sr, nr, kb, wp, DT_F8_E4M3);
}

/* Prefetches into L2 part i of parts (by rows) of the weights [r0, r1) x [c0, c1): the next k
 * block, spread over the current one's token tiles so that its DRAM reads overlap kernels. */
static void prefetch_w(const struct wmat *w, int r0, int r1, int c0, int c1, int i, int parts)
{
	if (c0 >= c1)
		return;
	size_t esz = esize(w->dtype), bytes = (size_t)(c1 - c0) * esz;
	for (int r = r0 + (r1 - r0) * i / parts; r < r0 + (r1 - r0) * (i + 1) / parts; r++) {
		const char *p = (const char *)w->data + ((size_t)r * (size_t)w->ld + (size_t)c0) * esz;
		for (uintptr_t q = (uintptr_t)p & ~(uintptr_t)63; q < (uintptr_t)(p + bytes); q += 64)
			pf_l2((const void *)q, 0);
	}
}

/* ---- x tiles ---- */

/* token tiles: ceil(n / TT) of near-equal size (no short last tile) */
static inline int tile_size(int n, int ntile, int i) { return n / ntile + (i < n % ntile); }

/* x offset (floats) from the tile at token t0 (nt tokens, k block [k0, k1)) to the next tile,
 * or the first one of the next k block: it is prefetched while this one is converted, to be in
 * L2 when this tile's kernels are done */
static inline ptrdiff_t next_tile(const struct gemm_job *j, int t0, int nt, int k0, int k1)
{
	if (t0 + nt < j->n)
		return (ptrdiff_t)nt * j->ldx;
	return k1 < j->w->cols ? (ptrdiff_t)(k1 - k0) - (ptrdiff_t)t0 * j->ldx : 0;
}

/* f: nt token rows of x, columns [0, kb) → xt.f[t][k] (a copy: rows ldx apart would share L1
 * sets); prefetches pf floats on */
static A512 void copy_x(const float *x, int ldx, int nt, int kb, ptrdiff_t pf)
{
	for (int t = 0; t < nt; t++) {
		const float *src = x + (size_t)t * (size_t)ldx;
		float *d = xt.f + (size_t)t * XS;
		int c = 0;
		for (; c + 16 <= kb; c += 16) {
			pf_l2(src + c, pf * 4);
			_mm512_store_ps(d + c, _mm512_loadu_ps(src + c));
		}
		if (c < kb)
			_mm512_store_ps(d + c, _mm512_maskz_loadu_ps(mask16(kb - c), src + c));
	}
}

/* dp: nt token rows of x over the block's segments → xt.p[t][pair] (exact: the values are
 * bf16), odd segment ends padded with 0; prefetches pf floats on */
static A512 void pack_x(const float *x, int ldx, int nt, const struct kblock *kb, ptrdiff_t pf)
{
	for (int t = 0; t < nt; t++)
		for (int g = 0; g < kb->n; g++) {
			const float *src = x + (size_t)t * (size_t)ldx + kb->s[g];
			uint32_t *d = xt.p + (size_t)t * XS + kb->p[g];
			int len = kb->e[g] - kb->s[g], c = 0;
			for (; c + 32 <= len; c += 32) {
				pf_l2(src + c, pf * 4);
				pf_l2(src + c + 16, pf * 4);
				_mm512_storeu_si512(d + c / 2,
						    (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + c + 16),
										 _mm512_loadu_ps(src + c)));
			}
			if (c < len) {
				__m512 lo = _mm512_maskz_loadu_ps(mask16(len - c), src + c);
				__m512 hi = _mm512_maskz_loadu_ps(mask16(len - c - 16), src + c + 16);
				_mm512_mask_storeu_epi32(d + c / 2, mask16((len - c + 1) / 2),
							 (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
			}
		}
}

/* ---- micro-kernels: nt tokens x nh halves of 16 rows (store masks m0, m1) ---- */

/* f: y[t][row] (+)= Σ_{k < kb} wp[k][row] · xt.f[t][k] */
A512_INLINE void mk_f_t(const float *wp, int kb, float *y, int ldy, __mmask16 m0, __mmask16 m1, int add, const int nt,
			const int nh)
{
	__m512 a0[TT], a1[TT];
#pragma GCC unroll 12
	for (int t = 0; t < nt; t++)
		a0[t] = a1[t] = _mm512_setzero_ps();
	for (int k = 0; k < kb; k++) {
		__m512 w0 = _mm512_load_ps(wp + (size_t)k * SR), w1 = _mm512_setzero_ps();
		if (nh == 2)
			w1 = _mm512_load_ps(wp + (size_t)k * SR + 16);
#pragma GCC unroll 12
		for (int t = 0; t < nt; t++) {
			__m512 xb = _mm512_set1_ps(xt.f[(size_t)t * XS + k]);
			a0[t] = _mm512_fmadd_ps(w0, xb, a0[t]);
			if (nh == 2)
				a1[t] = _mm512_fmadd_ps(w1, xb, a1[t]);
		}
	}
#pragma GCC unroll 12
	for (int t = 0; t < nt; t++) {
		float *yt = y + (size_t)t * (size_t)ldy;
		__m512 v = add ? _mm512_add_ps(a0[t], _mm512_maskz_loadu_ps(m0, yt)) : a0[t];
		_mm512_mask_storeu_ps(yt, m0, v);
		if (nh == 2) {
			v = add ? _mm512_add_ps(a1[t], _mm512_maskz_loadu_ps(m1, yt + 16)) : a1[t];
			_mm512_mask_storeu_ps(yt + 16, m1, v);
		}
	}
}

/* dp: y[t][row] (+)= sc[row] · Σ_{pairs [p0, p1)} wp[p][row] · xt.p[t][p] (sc NULL: 1) */
A512_INLINE void mk_dp_t(const uint32_t *wp, int p0, int p1, const float *sc, float *y, int ldy, __mmask16 m0,
			 __mmask16 m1, int add, const int nt, const int nh)
{
	__m512 a0[TT], a1[TT];
#pragma GCC unroll 12
	for (int t = 0; t < nt; t++)
		a0[t] = a1[t] = _mm512_setzero_ps();
	for (int p = p0; p < p1; p++) {
		__m512i w0 = _mm512_load_si512(wp + (size_t)p * SR), w1 = _mm512_setzero_si512();
		if (nh == 2)
			w1 = _mm512_load_si512(wp + (size_t)p * SR + 16);
#pragma GCC unroll 12
		for (int t = 0; t < nt; t++) {
			__m512i xb = _mm512_set1_epi32((int)xt.p[(size_t)t * XS + p]);
			a0[t] = _mm512_dpbf16_ps(a0[t], (__m512bh)w0, (__m512bh)xb);
			if (nh == 2)
				a1[t] = _mm512_dpbf16_ps(a1[t], (__m512bh)w1, (__m512bh)xb);
		}
	}
	__m512 s0 = sc ? _mm512_load_ps(sc) : _mm512_set1_ps(1.0f), s1 = sc ? _mm512_load_ps(sc + 16) : s0;
#pragma GCC unroll 12
	for (int t = 0; t < nt; t++) {
		float *yt = y + (size_t)t * (size_t)ldy;
		__m512 v = add ? _mm512_fmadd_ps(a0[t], s0, _mm512_maskz_loadu_ps(m0, yt)) : _mm512_mul_ps(a0[t], s0);
		_mm512_mask_storeu_ps(yt, m0, v);
		if (nh == 2) {
			v = add ? _mm512_fmadd_ps(a1[t], s1, _mm512_maskz_loadu_ps(m1, yt + 16))
				: _mm512_mul_ps(a1[t], s1);
			_mm512_mask_storeu_ps(yt + 16, m1, v);
		}
	}
}

/* one copy per (tokens, halves): the accumulators stay in registers */
#define MK_CASES(F, NH, ...)                    \
	switch (nt) {                           \
	case 1: F(__VA_ARGS__, 1, NH); break;   \
	case 2: F(__VA_ARGS__, 2, NH); break;   \
	case 3: F(__VA_ARGS__, 3, NH); break;   \
	case 4: F(__VA_ARGS__, 4, NH); break;   \
	case 5: F(__VA_ARGS__, 5, NH); break;   \
	case 6: F(__VA_ARGS__, 6, NH); break;   \
	case 7: F(__VA_ARGS__, 7, NH); break;   \
	case 8: F(__VA_ARGS__, 8, NH); break;   \
	case 9: F(__VA_ARGS__, 9, NH); break;   \
	case 10: F(__VA_ARGS__, 10, NH); break; \
	case 11: F(__VA_ARGS__, 11, NH); break; \
	default: F(__VA_ARGS__, 12, NH); break; \
	}

static A512 void mk_f(const float *wp, int kb, float *y, int ldy, int nr, int add, int nt)
{
	__mmask16 m0 = mask16(nr), m1 = mask16(nr - 16);
	if (nr > 16)
		MK_CASES(mk_f_t, 2, wp, kb, y, ldy, m0, m1, add)
	else
		MK_CASES(mk_f_t, 1, wp, kb, y, ldy, m0, m1, add)
}

static A512 void mk_dp(const uint32_t *wp, int p0, int p1, const float *sc, float *y, int ldy, int nr, int add, int nt)
{
	__mmask16 m0 = mask16(nr), m1 = mask16(nr - 16);
	if (nr > 16)
		MK_CASES(mk_dp_t, 2, wp, p0, p1, sc, y, ldy, m0, m1, add)
	else
		MK_CASES(mk_dp_t, 1, wp, p0, p1, sc, y, ldy, m0, m1, add)
}

/* ---- work items ---- */

/* Per k block: pack the item's sub-panels, then for every token tile convert its x and run it
 * over them (the tile's x is reused from L1 across the panel's rows). */
static A512 void panel_f(const struct gemm_job *j, int r0, int r1)
{
	const struct wmat *w = j->w;
	int nsub = (r1 - r0 + SR - 1) / SR, ntile = (j->n + TT - 1) / TT;
	for (int k0 = 0, k1; k0 < w->cols; k0 = k1) {
		k1 = w->cols - k0 < KF ? w->cols : k0 + KF;
		for (int sp = 0; sp < nsub; sp++) {
			int sr = r0 + sp * SR;
			pack_f(w, sr, r1 - sr < SR ? r1 - sr : SR, k0, k1, pk.f + (size_t)sp * KF * SR);
		}
		for (int ti = 0, t0 = 0, nt; ti < ntile; t0 += nt, ti++) {
			nt = tile_size(j->n, ntile, ti);
			copy_x(j->x + (size_t)t0 * (size_t)j->ldx + k0, j->ldx, nt, k1 - k0,
			       next_tile(j, t0, nt, k0, k1));
			for (int sp = 0; sp < nsub; sp++) {
				int sr = r0 + sp * SR;
				mk_f(pk.f + (size_t)sp * KF * SR, k1 - k0, j->y + (size_t)t0 * (size_t)j->ldy + sr,
				     j->ldy, r1 - sr < SR ? r1 - sr : SR, k0 > 0 || j->accumulate, nt);
			}
			prefetch_w(w, r0, r1, k1, k1 + KF < w->cols ? k1 + KF : w->cols, ti, ntile);
		}
	}
}

static A512 void panel_dp(const struct gemm_job *j, int r0, int r1)
{
	const struct wmat *w = j->w;
	int fp8 = w->dtype == DT_F8_E4M3;
	int nsub = (r1 - r0 + SR - 1) / SR, ntile = (j->n + TT - 1) / TT;
	struct kblock kb;
	for (int k0 = 0, k1; k0 < w->cols; k0 = k1) {
		k1 = kblock_next(w, k0, &kb);
		for (int sp = 0; sp < nsub; sp++) {
			int sr = r0 + sp * SR, nr = r1 - sr < SR ? r1 - sr : SR;
			pack_dp(w, sr, nr, &kb, pk.p + (size_t)sp * KP * SR);
			if (fp8) /* the decode is 2^-8 small: folded into the scale */
				for (int g = 0; g < kb.n; g++)
					for (int r = 0; r < SR; r++)
						seg_sc[sp][g][r] = r < nr ? gemm_wscale(w, sr + r, kb.s[g]) * 256.0f
									  : 0.0f;
		}
		for (int ti = 0, t0 = 0, nt; ti < ntile; t0 += nt, ti++) {
			nt = tile_size(j->n, ntile, ti);
			pack_x(j->x + (size_t)t0 * (size_t)j->ldx, j->ldx, nt, &kb, next_tile(j, t0, nt, k0, k1));
			for (int sp = 0; sp < nsub; sp++) {
				int sr = r0 + sp * SR, nr = r1 - sr < SR ? r1 - sr : SR;
				float *y = j->y + (size_t)t0 * (size_t)j->ldy + sr;
				const uint32_t *wp = pk.p + (size_t)sp * KP * SR;
				if (!fp8)
					mk_dp(wp, 0, kb.np, NULL, y, j->ldy, nr, k0 > 0 || j->accumulate, nt);
				else
					for (int g = 0; g < kb.n; g++)
						mk_dp(wp, kb.p[g], kb.p[g] + (kb.e[g] - kb.s[g] + 1) / 2,
						      seg_sc[sp][g], y, j->ldy, nr, k0 > 0 || g > 0 || j->accumulate,
						      nt);
			}
			prefetch_w(w, r0, r1, k1, k1 + 2 * KP < w->cols ? k1 + 2 * KP : w->cols, ti, ntile);
		}
	}
}

/* ---- entry ---- */

/* Token counts from which packing beats the register-blocked kernels (gemm_avx512.c), per
 * weight dtype (bench/gemm_pack512.sh compares the levels). Packing costs about as much per
 * weight as 8-16 tokens of kernel; the register-blocked fp8 tiles are small (a second
 * accumulator set) and fp32 weights double its bytes, so packing pays much sooner for those. */
int gemm_pack512_min_tokens(enum dtype dt, bool dp)
{
	switch (dt) {
	case DT_F8_E4M3: return dp ? 8 : 12;
	case DT_F32: return 12;
	case DT_BF16: return dp ? 48 : 64;
	default: return 80;
	}
}

void gemm_panel_packed_avx512(const struct gemm_job *j, int r0, int r1, bool dp)
{
	CHECK(r1 - r0 <= GEMM_PANEL);
	pk_p = ops_scratch(OPS_SCRATCH_PACK512_W, sizeof(union pk_buf));
	xt_p = ops_scratch(OPS_SCRATCH_PACK512_X, sizeof(union xt_buf));
	seg_sc_p = ops_scratch(OPS_SCRATCH_PACK512_SC, sizeof(seg_sc_buf));
	if (!pk_p || !xt_p || !seg_sc_p) /* out of memory: the register-blocked kernels need none */
		gemm_panel_avx512(j, r0, r1, dp);
	else if (dp)
		panel_dp(j, r0, r1);
	else
		panel_f(j, r0, r1);
}
