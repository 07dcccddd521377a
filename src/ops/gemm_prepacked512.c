/* AVX512_BF16 GEMM on weights packed at load (layout: ops/prepack.h), for any token count.
 * Per 32-row block and k chunk of KP pairs, every token tile of up to TT tokens runs an
 * outer-product micro-kernel: per pair step two weight loads (32 rows), nt broadcasts of an x
 * pair and 2·nt vdpbf16ps into 2·nt accumulators (24 at nt = 12); no conversion, transpose
 * or horizontal sum in the loop: in L2 it runs at the one-thread dp peak from 8 tokens on,
 * which the row-dot kernels do not reach.
 *
 * Streaming from DRAM, the tiles after the first re-read the chunk from L1/L2 while no miss
 * is outstanding, so each tile prefetches its share of the NEXT chunk (which follows in
 * memory: blocks are k-major and a thread's blocks contiguous): memory and the dp units are
 * busy together.
 *
 * fp8 weights (1-byte pairs): one chunk per 128-column scale segment, each chunk's partial
 * sums scaled per row as they are added into y (panel_fp8).
 *
 * Where vdpbf16ps does fewer multiply-adds than the fp32 FMA (ops_cpu_bf16_dp_slow: Intel's
 * Xeons, half), bf16 weights from FMA_MIN_TOKENS tokens on run fp32 FMAs instead (mkf_t): each
 * pair step widens its two weight vectors once, then two FMAs a token, odd k first as
 * vdpbf16ps adds its products (exact in fp32), under DAZ and FTZ as vdpbf16ps: the sums are
 * vdpbf16ps's, bit for bit.
 *
 * Every (row, token) is summed in the same order whatever n is (pairs in order within a
 * chunk, chunks added into y in order): a token's result does not depend on its batch. */
#include <immintrin.h>

#include "ops/bf16_512.h"
#include "ops/fp8_512.h"
#include "ops/cpu.h"
#include "ops/gemm_internal.h"
#include "ops/prepack.h"

#define A512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))
#define A512_INLINE                                                                                             \
	static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma," \
							   "f16c")))

#define SR PREPACK_ROWS /* rows per block: two zmm of pairs */
#define TT 12           /* tokens per tile at most (24 accumulators) */
#define KP 256          /* pairs per k chunk: a full tile's x (12 x 1 KB) stays in L1 */
#define PF_SINGLE 8192  /* one tile: prefetch distance (beats prefetching the next chunk's 32 KB) */

static inline __mmask16 mask16(int n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* store_acc's flags: add into y; round the result to bf16 (the last chunk of a
 * gemm_job.round_bf16: here, while the rows are in cache, instead of a pass over y after the
 * panel) */
#define ACC_ADD 1
#define ACC_ROUND 2

static inline int acc_flags(const struct gemm_job *j, int k0, int k1, int P)
{
	return (k0 > 0 || j->accumulate ? ACC_ADD : 0) | (j->round_bf16 && k1 == P ? ACC_ROUND : 0);
}

/* y[t][0..32) = (fl & ACC_ADD ? y : 0) + sc[row] · (a0 | a1)[t] for nt tokens (sc NULL: 1),
 * 16 rows per accumulator, masked to the block's rows, then rounded if fl & ACC_ROUND. The one
 * epilogue of every micro-kernel, so that fp8 chunks give the same bits whichever kernel ran
 * them. */
A512_INLINE void store_acc(const __m512 *a0, const __m512 *a1, float *y, size_t ldy, __mmask16 m0, __mmask16 m1,
			   int fl, const float *sc, const int nt)
{
	const int add = fl & ACC_ADD;
	__m512 s0 = sc ? _mm512_load_ps(sc) : _mm512_set1_ps(1.0f), s1 = sc ? _mm512_load_ps(sc + 16) : s0;
#pragma GCC unroll 12
	for (int t = 0; t < nt; t++) {
		float *yt = y + (size_t)t * ldy;
		__m512 v0, v1;
		if (!sc) {
			v0 = add ? _mm512_add_ps(a0[t], _mm512_maskz_loadu_ps(m0, yt)) : a0[t];
			v1 = add ? _mm512_add_ps(a1[t], _mm512_maskz_loadu_ps(m1, yt + 16)) : a1[t];
		} else {
			v0 = add ? _mm512_fmadd_ps(a0[t], s0, _mm512_maskz_loadu_ps(m0, yt))
				 : _mm512_mul_ps(a0[t], s0);
			v1 = add ? _mm512_fmadd_ps(a1[t], s1, _mm512_maskz_loadu_ps(m1, yt + 16))
				 : _mm512_mul_ps(a1[t], s1);
		}
		if (fl & ACC_ROUND)
			v0 = round_bf16_512(v0), v1 = round_bf16_512(v1);
		_mm512_mask_storeu_ps(yt, m0, v0);
		_mm512_mask_storeu_ps(yt + 16, m1, v1);
	}
}

/* y[t][0..32) (+)= sc[row] · Σ_{p < np} wp[p][row] · xp[t][p] for nt tokens (sc NULL: 1);
 * prefetches pf + p·pfs (two lines when pfs > 64) */
A512_INLINE void mk_t(const uint32_t *wp, int np, const uint32_t *xp, size_t ldxp, float *y, size_t ldy, __mmask16 m0,
		      __mmask16 m1, int fl, const float *sc, uintptr_t pf, int pfs, const int nt)
{
	__m512 a0[TT], a1[TT];
#pragma GCC unroll 12
	for (int t = 0; t < nt; t++)
		a0[t] = a1[t] = _mm512_setzero_ps();
	for (int p = 0; p < np; p++) {
		/* into L2: an L1 prefetch holds a fill buffer for the whole DRAM trip (L2 wins at 1-4
		 * tokens from DRAM, bf16 and fp8) */
		_mm_prefetch((const char *)(pf + (uintptr_t)p * (uintptr_t)pfs), _MM_HINT_T1);
		if (pfs > 64)
			_mm_prefetch((const char *)(pf + (uintptr_t)p * (uintptr_t)pfs + 64), _MM_HINT_T1);
		__m512i w0 = _mm512_load_si512(wp + (size_t)p * SR), w1 = _mm512_load_si512(wp + (size_t)p * SR + 16);
#pragma GCC unroll 12
		for (int t = 0; t < nt; t++) {
			__m512i xb = _mm512_set1_epi32((int)xp[(size_t)t * ldxp + (size_t)p]);
			a0[t] = _mm512_dpbf16_ps(a0[t], (__m512bh)w0, (__m512bh)xb);
			a1[t] = _mm512_dpbf16_ps(a1[t], (__m512bh)w1, (__m512bh)xb);
		}
	}
	store_acc(a0, a1, y, ldy, m0, m1, fl, sc, nt);
}

/* mk_t's sums by fp32 FMAs: the pairs of a step widened to fp32 (even k: << 16, odd k: the high
 * half), x read as fp32 (bf16-exact: gemm_job.x_bf16) at x + t·ldx + 2p */
A512_INLINE void mkf_t(const uint32_t *wp, int np, const float *x, size_t ldx, float *y, size_t ldy, __mmask16 m0,
		       __mmask16 m1, int fl, uintptr_t pf, int pfs, const int nt)
{
	__m512 a0[TT], a1[TT];
	const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
	/* DAZ and FTZ, as vdpbf16ps reads and writes subnormals (and no microcode assist on them:
	 * 25x slower on weights with many); the volatile asms keep the FMAs between the two
	 * MXCSR writes */
	unsigned csr = _mm_getcsr();
	_mm_setcsr(csr | 0x8040);
#pragma GCC unroll 12
	for (int t = 0; t < nt; t++) {
		a0[t] = a1[t] = _mm512_setzero_ps();
		__asm__ volatile("" : "+v"(a0[t]), "+v"(a1[t]));
	}
	for (int p = 0; p < np; p++) {
		_mm_prefetch((const char *)(pf + (uintptr_t)p * (uintptr_t)pfs), _MM_HINT_T1);
		if (pfs > 64)
			_mm_prefetch((const char *)(pf + (uintptr_t)p * (uintptr_t)pfs + 64), _MM_HINT_T1);
		__m512i w0 = _mm512_load_si512(wp + (size_t)p * SR), w1 = _mm512_load_si512(wp + (size_t)p * SR + 16);
		__m512 w0e = _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)),
		       w0o = _mm512_castsi512_ps(_mm512_and_si512(w0, hi)),
		       w1e = _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)),
		       w1o = _mm512_castsi512_ps(_mm512_and_si512(w1, hi));
#pragma GCC unroll 12
		for (int t = 0; t < nt; t++) {
			const float *xt = x + (size_t)t * ldx + 2 * (size_t)p;
			__m512 xo = _mm512_set1_ps(xt[1]), xe = _mm512_set1_ps(xt[0]);
			a0[t] = _mm512_fmadd_ps(w0e, xe, _mm512_fmadd_ps(w0o, xo, a0[t]));
			a1[t] = _mm512_fmadd_ps(w1e, xe, _mm512_fmadd_ps(w1o, xo, a1[t]));
		}
	}
#pragma GCC unroll 12
	for (int t = 0; t < nt; t++)
		__asm__ volatile("" : "+v"(a0[t]), "+v"(a1[t]));
	_mm_setcsr(csr); /* y's sums as the vdpbf16ps kernel makes them */
	store_acc(a0, a1, y, ldy, m0, m1, fl, NULL, nt);
}

static A512 void mkf(const uint32_t *wp, int np, const float *x, size_t ldx, float *y, size_t ldy, __mmask16 m0,
		     __mmask16 m1, int fl, uintptr_t pf, int pfs, int nt)
{
#define MK(N) mkf_t(wp, np, x, ldx, y, ldy, m0, m1, fl, pf, pfs, N)
	switch (nt) { /* tiles of under 8 tokens where n is not a multiple of 12 */
	case 1: MK(1); break;
	case 2: MK(2); break;
	case 3: MK(3); break;
	case 4: MK(4); break;
	case 5: MK(5); break;
	case 6: MK(6); break;
	case 7: MK(7); break;
	case 8: MK(8); break;
	case 9: MK(9); break;
	case 10: MK(10); break;
	case 11: MK(11); break;
	default: MK(12); break;
	}
#undef MK
}

#define FMA_MIN_TOKENS 8 /* fewer: bound by the weights' bytes */

/* one copy per tile size: the accumulators stay in registers */
static A512 void mk(const uint32_t *wp, int np, const uint32_t *xp, size_t ldxp, float *y, size_t ldy, __mmask16 m0,
		    __mmask16 m1, int fl, const float *sc, uintptr_t pf, int pfs, int nt)
{
#define MK(N) mk_t(wp, np, xp, ldxp, y, ldy, m0, m1, fl, sc, pf, pfs, N)
	switch (nt) {
	case 1: MK(1); break;
	case 2: MK(2); break;
	case 3: MK(3); break;
	case 4: MK(4); break;
	case 5: MK(5); break;
	case 6: MK(6); break;
	case 7: MK(7); break;
	case 8: MK(8); break;
	case 9: MK(9); break;
	case 10: MK(10); break;
	case 11: MK(11); break;
	default: MK(12); break;
	}
#undef MK
}

/* ---- fp8: 64 bytes per step (32 rows x a pair), decoded to bf16 pairs (ops/fp8_512.h);
 * tiles of up to TT8 tokens (16 accumulators, room for the decode's temporaries) ---- */
#define TT8 8

static int fp8_decoder = -1; /* gemm_prepacked512_fp8_decoder */

void gemm_prepacked512_fp8_decoder(int vbmi) { fp8_decoder = vbmi; }

/* the kernels once per step decoder (ops/gemm_fp8_dp.inc): on AVX512_VBMI CPUs (Zen 4 and
 * later; Cooper Lake, the one AVX512_BF16 CPU without it, takes the first set) the byte
 * lookups of fp8_vbmi_decode, a few times fewer operations per weight */
#define FP8_SFX _512
#define FP8_FN A512
#define FP8_INLINE A512_INLINE
#define FP8_REGS __m512i sub = fp8_512_table()
#define FP8_DECODE(raw, w0, w1) fp8_512_decode_step(raw, sub, &w0, &w1)
#include "ops/gemm_fp8_dp.inc"

#define A512V __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi,fma,f16c")))
#define FP8_SFX _vbmi
#define FP8_FN A512V
#define FP8_INLINE static inline __attribute__((always_inline)) A512V
#define FP8_REGS            \
	struct fp8_vbmi tv; \
	fp8_vbmi_load(&tv)
#define FP8_DECODE(raw, w0, w1) fp8_vbmi_decode(raw, &tv, &w0, &w1)
#include "ops/gemm_fp8_dp.inc"

/* Up to TT8 tokens the steps are decoded in the kernel; more tokens would decode every
 * step once per tile, so each chunk is decoded once into an L1 buffer and the bf16 kernel
 * (tiles of TT) runs on it, scaling as mk8_t does: the same sums, bit for bit. */
static A512 void panel_fp8(const struct gemm_job *j, const uint32_t *xp, size_t ldxp, int r0, int r1)
{
	const struct wmat *w = j->w;
	int vbmi = ops_cpu_has_vbmi() && fp8_decoder != 0;
	void (*decode_chunk)(const uint8_t *, int, uint32_t *) = vbmi ? decode_chunk_vbmi : decode_chunk_512;
	void (*mk8)(const uint8_t *, int, const uint32_t *, size_t, float *, size_t, __mmask16, __mmask16, int,
		    const float *, uintptr_t, int, int) = vbmi ? mk8_vbmi : mk8_512;
	int P = (w->cols + 1) / 2, stride = w->packed_pairs, seg = w->blk_c / 2, S = prepack_segments(w);
	CHECK(seg <= PREPACK_FP8_SEG_PAIRS);
	if (j->n > TT8) {
		_Alignas(64) uint32_t dec[PREPACK_FP8_SEG_PAIRS * SR]; /* 8 KB */
		int ntile = (j->n + TT - 1) / TT;
		for (int rb = r0; rb < r1; rb += SR) {
			int nr = r1 - rb < SR ? r1 - rb : SR;
			const uint8_t *wp = (const uint8_t *)(const void *)w->packed +
					    (size_t)(rb / SR) * (size_t)stride * 2 * SR;
			const float *sc = w->packed_scale + (size_t)(rb / SR) * (size_t)S * SR;
			for (int k0 = 0, g = 0; k0 < P; k0 += seg, g++) {
				int kn = P - k0 < seg ? P - k0 : seg;
				uintptr_t next = (uintptr_t)(wp + (size_t)(k0 + kn) * 2 * SR),
					  bytes = (uintptr_t)kn * 2 * SR;
				decode_chunk(wp + (size_t)k0 * 2 * SR, kn, dec);
				for (int ti = 0, t0 = 0; ti < ntile; ti++) {
					int nt = j->n / ntile + (ti < j->n % ntile);
					mk(dec, kn, xp + (size_t)t0 * ldxp + (size_t)k0, ldxp,
					   j->y + (size_t)t0 * (size_t)j->ldy + rb, (size_t)j->ldy, mask16(nr),
					   mask16(nr - 16), acc_flags(j, k0, k0 + kn, P), sc + (size_t)g * SR,
					   next + bytes * (uintptr_t)ti / (uintptr_t)ntile,
					   (int)(2 * SR / ntile > 0 ? 2 * SR / ntile : 1), nt);
					t0 += nt;
				}
			}
		}
		return;
	}
	int rb = r0;
	void (*mk8x2)(const uint8_t *, const uint8_t *, int, const uint32_t *, float *, float *, __mmask16, __mmask16,
		      __mmask16, __mmask16, int, const float *, const float *, uintptr_t, uintptr_t,
		      int) = vbmi ? mk8x2_vbmi : mk8x2_512;
	for (; j->n == 1 && rb + SR < r1; rb += 2 * SR) { /* one token: two blocks at a time */
		int nb = r1 - rb - SR < SR ? r1 - rb - SR : SR;
		size_t bstep = (size_t)stride * 2 * SR;
		const uint8_t *wa = (const uint8_t *)(const void *)w->packed + (size_t)(rb / SR) * bstep,
			      *wb = wa + bstep;
		const float *sca = w->packed_scale + (size_t)(rb / SR) * (size_t)S * SR, *scb = sca + (size_t)S * SR;
		for (int k0 = 0, g = 0; k0 < P; k0 += seg, g++) {
			int kn = P - k0 < seg ? P - k0 : seg;
			mk8x2(wa + (size_t)k0 * 2 * SR, wb + (size_t)k0 * 2 * SR, kn, xp + (size_t)k0, j->y + rb,
			      j->y + rb + SR, 0xffff, 0xffff, mask16(nb), mask16(nb - 16),
			      acc_flags(j, k0, k0 + kn, P), sca + (size_t)g * SR, scb + (size_t)g * SR,
			      (uintptr_t)(wa + (size_t)k0 * 2 * SR) + PF_SINGLE,
			      (uintptr_t)(wb + (size_t)k0 * 2 * SR) + PF_SINGLE, 2 * SR);
		}
	}
	for (; rb < r1; rb += SR) { /* one tile: decode in the kernel */
		int nr = r1 - rb < SR ? r1 - rb : SR;
		const uint8_t *wp = (const uint8_t *)(const void *)w->packed +
				    (size_t)(rb / SR) * (size_t)stride * 2 * SR;
		const float *sc = w->packed_scale + (size_t)(rb / SR) * (size_t)S * SR;
		for (int k0 = 0, g = 0; k0 < P; k0 += seg, g++) {
			int kn = P - k0 < seg ? P - k0 : seg;
			mk8(wp + (size_t)k0 * 2 * SR, kn, xp + (size_t)k0, ldxp, j->y + rb, (size_t)j->ldy, mask16(nr),
			    mask16(nr - 16), acc_flags(j, k0, k0 + kn, P), sc + (size_t)g * SR,
			    (uintptr_t)(wp + (size_t)k0 * 2 * SR) + PF_SINGLE, 2 * SR, j->n);
		}
	}
}

int gemm_prepacked_ldxb(int cols)
{
	/* whole zmm per row, plus 64 bytes so that rows 4 KB apart do not share L1 sets */
	return (cols + 31) / 32 * 32 + 32;
}

A512 void gemm_x_to_bf16(const float *x, int ldx, int t0, int t1, int cols, uint16_t *xb, int ldxb)
{
	for (int t = t0; t < t1; t++) {
		const float *s = x + (size_t)t * (size_t)ldx;
		uint16_t *d = xb + (size_t)t * (size_t)ldxb;
		for (int c = 0; c < ldxb; c += 32) { /* zero past cols: the odd pair's pad and beyond */
			__m512 lo = _mm512_maskz_loadu_ps(mask16(cols - c), s + c);
			__m512 hi = _mm512_maskz_loadu_ps(mask16(cols - c - 16), s + c + 16);
			_mm512_storeu_si512(d + c, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
		}
	}
}

int gemm_panel_prepacked512(const struct gemm_job *j, const uint16_t *xb, int ldxb, int r0, int r1)
{
	const struct wmat *w = j->w;
	CHECK(w->packed && r0 % SR == 0 && ldxb % 2 == 0 && w->packed_pairs >= (w->cols + 1) / 2);
	/* the view's pairs; blocks are packed_pairs apart (a column-prefix view uses fewer) */
	int P = (w->cols + 1) / 2, stride = w->packed_pairs, ntile = (j->n + TT - 1) / TT;
	const uint32_t *xp = (const uint32_t *)(const void *)xb;
	size_t ldxp = (size_t)ldxb / 2;
	if (w->dtype == DT_F8_E4M3) {
		panel_fp8(j, xp, ldxp, r0, r1);
		return P > 0; /* rounded in store_acc (acc_flags) */
	}
	/* fp32 FMAs: x as the job has it (bf16-exact; not V4's fp8-rounded copy in xb; none when the
	 * caller gave bf16 rows only: prepack_gemm_1t_xb), whole
	 * pairs of columns only (an odd last column's pair would read x past cols) */
	int fma = j->n >= FMA_MIN_TOKENS && j->x && j->x_bf16 && !j->act_fp8 && w->cols % 2 == 0 &&
		  ops_cpu_bf16_dp_slow();
	for (int rb = r0; rb < r1; rb += SR) {
		int nr = r1 - rb < SR ? r1 - rb : SR;
		const uint32_t *wp = w->packed + (size_t)(rb / SR) * (size_t)stride * SR;
		for (int k0 = 0; k0 < P; k0 += KP) {
			int kn = P - k0 < KP ? P - k0 : KP;
			uintptr_t chunk = (uintptr_t)(wp + (size_t)k0 * SR), bytes = (uintptr_t)kn * SR * 4;
			for (int ti = 0, t0 = 0; ti < ntile; ti++) {
				int nt = j->n / ntile + (ti < j->n % ntile); /* near-equal tiles */
				float *y = j->y + (size_t)t0 * (size_t)j->ldy + rb;
				uintptr_t pf = ntile == 1 ? chunk + PF_SINGLE
							  : chunk + bytes + bytes * (uintptr_t)ti / (uintptr_t)ntile;
				int pfs = (int)(SR * 4 / ntile > 0 ? SR * 4 / ntile : 1),
				    fl = acc_flags(j, k0, k0 + kn, P);
				if (fma)
					mkf(wp + (size_t)k0 * SR, kn,
					    j->x + (size_t)t0 * (size_t)j->ldx + 2 * (size_t)k0, (size_t)j->ldx, y,
					    (size_t)j->ldy, mask16(nr), mask16(nr - 16), fl, pf, pfs, nt);
				else
					mk(wp + (size_t)k0 * SR, kn, xp + (size_t)t0 * ldxp + (size_t)k0, ldxp, y,
					   (size_t)j->ldy, mask16(nr), mask16(nr - 16), fl, NULL, pf, pfs, nt);
				t0 += nt;
			}
		}
	}
	return P > 0;
}
