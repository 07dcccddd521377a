/* AVX-512 register-blocked GEMM for jobs with few tokens (decode steps, MoE experts with a
 * handful of tokens each): each weight vector is loaded (and widened or decoded) once and
 * multiplied into every token of the tile held in registers. Two kinds of kernel:
 *   fma: fp32 x, weights widened to fp32 (16 columns per step), any weight dtype;
 *   dp:  bf16 x (exact copies of bf16-valued activations), bf16 weights used as they are or
 *        fp8 decoded exactly to bf16, vdpbf16ps (32 columns per step: exact products, fp32
 *        sums).
 * Tiles of up to 6 tokens (24 accumulators of the 32 registers): a job with one tile streams
 * 1 row (dp) or 8 rows (fma) at a time; a job with several runs all its tiles per 4-row block
 * (gemm_panel_avx512).
 * fp8 weights are summed per 128-column scale block into a second set of accumulators, so
 * their tiles are smaller. Column tails use masked loads (never read past a row). */
#include <immintrin.h>

#include "ops/fp8_512.h"
#include "ops/gemm_internal.h"
#include "ops/scratch.h"

/* One target for the whole file (the shared inline kernels must match their callers): the fma
 * kernels contain no bf16 instruction (gcc emits those only for the dp intrinsics), so they
 * run on AVX-512 CPUs without AVX512_BF16. */
#define A512F A512B
#define A512B __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))
#define A512B_INLINE                                                                                            \
	static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma," \
							   "f16c")))

#define TILE_T 6 /* tokens per tile */
/* Software prefetch distance along the weight stream (into L2). The hardware prefetchers alone
 * leave few-token GEMMs short of the read bandwidth; 8 KB ahead reaches it (A/B over
 * expert-sized matrices, bench/gemm_levels). */
#define PF_AHEAD 8192
#define XB_COLS 32768 /* widest x the dp path converts (wider: the fma path) */

/* per-thread x as bf16 (ops_scratch), each row zero-padded to a multiple of 32 columns: one
 * token tile, or every token of a job when they fit */
#define XB_ELEMS ((size_t)TILE_T * XB_COLS)

struct k512 {
	const struct wmat *w;
	int r;          /* first view row of the block */
	const float *x; /* fma: fp32 tokens [nt, ldx] */
	int ldx;
	const uint16_t *xb; /* dp: bf16 tokens [nt, ldxb] */
	int ldxb;
	size_t pf;            /* prefetch distance (0: PF_AHEAD) */
	uint16_t fp8_sub[32]; /* dp + fp8: the decode's subnormal table (ops/fp8_512.h) */
	float out[8][TILE_T]; /* results */
};

/* 16 weights → fp32. fp8 via the f16 fields (2^-8 too small, compensated by the caller):
 * exact for every byte but NaN, subnormals included. */
A512B_INLINE __m512 load16(const enum dtype dt, const char *base, size_t i, __mmask16 m)
{
	switch (dt) {
	case DT_F32: return _mm512_maskz_loadu_ps(m, (const float *)base + i);
	case DT_BF16: {
		__m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)base + i);
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	case DT_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)base + i));
	default: {
		__m256i b = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(m, (const uint8_t *)base + i));
		__m256i mag = _mm256_and_si256(_mm256_slli_epi16(b, 7), _mm256_set1_epi16(0x3f80));
		__m256i sgn = _mm256_and_si256(_mm256_slli_epi16(b, 8), _mm256_set1_epi16((short)0x8000));
		return _mm512_cvtph_ps(_mm256_or_si256(mag, sgn));
	}
	}
}

/* 32 weights → bf16 bits. fp8: a table lookup on the 7 magnitude bits (exact: every e4m3
 * value is a normal bf16, and vdpbf16ps would flush denormal inputs) plus the sign. */
A512B_INLINE __m512i load32(const enum dtype dt, const char *base, size_t i, __mmask32 m, __m512i sub)
{
	if (dt == DT_BF16) /* plain when whole: AMD runs masked loads slower */
		return m == 0xffffffffu ? _mm512_loadu_si512(base + 2 * i)
					: _mm512_maskz_loadu_epi16(m, (const uint16_t *)base + i);
	return fp8_512_decode(_mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, (const uint8_t *)base + i)), sub);
}

/* Operands of one column step, in locals the compiler can keep in registers. */
struct opnd {
	const char *w;      /* row 0 of the block */
	size_t ldw;         /* bytes between rows */
	const float *x;     /* fma: token 0 */
	const uint16_t *xb; /* dp: token 0 */
	size_t ldx;         /* elements between tokens */
	size_t pf;          /* prefetch distance in bytes along the weight rows */
};

/* One column step of the tile: acc[r][t] += W[r, c..c+step) · x[t, c..c+step). */
A512B_INLINE void step(const struct opnd o, const enum dtype dt, const int dp, int c, __mmask32 m, __m512i sub,
		       __m512 acc[8][TILE_T], const int nr, const int nt)
{
	const size_t esz = dt == DT_F32 ? 4 : dt == DT_F8_E4M3 ? 1 : 2;
	if (dp) {
		__m512i xv[TILE_T];
#pragma GCC unroll 6
		for (int t = 0; t < nt; t++)
			xv[t] = _mm512_maskz_loadu_epi16(m, o.xb + (size_t)t * o.ldx + c);
#pragma GCC unroll 8
		for (int r = 0; r < nr; r++) {
			_mm_prefetch(o.w + (size_t)r * o.ldw + (size_t)c * esz + o.pf, _MM_HINT_T1);
			__m512i wv = load32(dt, o.w + (size_t)r * o.ldw, (size_t)c, m, sub);
#pragma GCC unroll 6
			for (int t = 0; t < nt; t++)
				acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv, (__m512bh)xv[t]);
		}
	} else {
		__m512 xv[TILE_T];
#pragma GCC unroll 6
		for (int t = 0; t < nt; t++)
			xv[t] = _mm512_maskz_loadu_ps((__mmask16)m, o.x + (size_t)t * o.ldx + c);
#pragma GCC unroll 8
		for (int r = 0; r < nr; r++) {
			if (!(c & 31) || esz == 4) /* one prefetch per 64 bytes */
				_mm_prefetch(o.w + (size_t)r * o.ldw + (size_t)c * esz + o.pf, _MM_HINT_T1);
			__m512 wv = load16(dt, o.w + (size_t)r * o.ldw, (size_t)c, (__mmask16)m);
#pragma GCC unroll 6
			for (int t = 0; t < nt; t++)
				acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
		}
	}
}

/* out[r][t] = Σ_c W[k->r + r, c] x[t, c] over all columns, fp8 block scales applied. */
A512B_INLINE void blk_t(struct k512 *k, const enum dtype dt, const int dp, const int nr, const int nt)
{
	const struct wmat *w = k->w;
	const int fp8 = dt == DT_F8_E4M3, W = dp ? 32 : 16, cols = w->cols;
	const size_t esz = dt == DT_F32 ? 4 : fp8 ? 1 : 2;
	const struct opnd o = {.w = (const char *)w->data + (size_t)k->r * (size_t)w->ld * esz,
			       .ldw = (size_t)w->ld * esz,
			       .x = k->x,
			       .xb = k->xb,
			       .ldx = dp ? (size_t)k->ldxb : (size_t)k->ldx,
			       .pf = k->pf ? k->pf : PF_AHEAD};
	__m512i sub = _mm512_loadu_si512(k->fp8_sub); /* built once per panel */
	__m512 acc[8][TILE_T], tot[8][TILE_T];
#pragma GCC unroll 8
	for (int r = 0; r < nr; r++)
#pragma GCC unroll 6
		for (int t = 0; t < nt; t++)
			acc[r][t] = tot[r][t] = _mm512_setzero_ps();
	int c = 0;
	while (c < cols) {
		int ce = fp8 ? gemm_seg_end(w, c) : cols, cs = c;
		for (; c + W <= ce; c += W)
			step(o, dt, dp, c, (__mmask32)0xffffffffu, sub, acc, nr, nt);
		if (c < ce) {
			step(o, dt, dp, c, (__mmask32)((1u << (ce - c)) - 1), sub, acc, nr, nt);
			c = ce;
		}
		if (fp8) { /* the fma decode is 2^-8 small: folded into the scale */
#pragma GCC unroll 8
			for (int r = 0; r < nr; r++) {
				__m512 s = _mm512_set1_ps(gemm_wscale(w, k->r + r, cs) * (dp ? 1.0f : 256.0f));
#pragma GCC unroll 6
				for (int t = 0; t < nt; t++) {
					tot[r][t] = _mm512_fmadd_ps(acc[r][t], s, tot[r][t]);
					acc[r][t] = _mm512_setzero_ps();
				}
			}
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < nr; r++)
#pragma GCC unroll 6
		for (int t = 0; t < nt; t++)
			k->out[r][t] = _mm512_reduce_add_ps(fp8 ? tot[r][t] : acc[r][t]);
}

/* Tile shapes per (dtype, kind), nr * nt accumulators (twice that for fp8) within the
 * register file: see tile_rows(). */
#define SHAPES(F, DT, DP)                                   \
	switch (nr * 8 + nt) {                              \
	case 8 * 8 + 1: F(k, DT, DP, 8, 1); break;          \
	case 8 * 8 + 2: F(k, DT, DP, 8, 2); break;          \
	case 8 * 8 + 3: F(k, DT, DP, 8, 3); break;          \
	case 4 * 8 + 1: F(k, DT, DP, 4, 1); break;          \
	case 2 * 8 + 1: F(k, DT, DP, 2, 1); break;          \
	case 2 * 8 + 2: F(k, DT, DP, 2, 2); break;          \
	case 2 * 8 + 3: F(k, DT, DP, 2, 3); break;          \
	case 4 * 8 + 2: F(k, DT, DP, 4, 2); break;          \
	case 4 * 8 + 3: F(k, DT, DP, 4, 3); break;          \
	case 4 * 8 + 4: F(k, DT, DP, 4, 4); break;          \
	case 4 * 8 + 5: F(k, DT, DP, 4, 5); break;          \
	case 4 * 8 + 6: F(k, DT, DP, 4, 6); break;          \
	case 1 * 8 + 1: F(k, DT, DP, 1, 1); break;          \
	case 1 * 8 + 2: F(k, DT, DP, 1, 2); break;          \
	case 1 * 8 + 3: F(k, DT, DP, 1, 3); break;          \
	case 1 * 8 + 4: F(k, DT, DP, 1, 4); break;          \
	case 1 * 8 + 5: F(k, DT, DP, 1, 5); break;          \
	case 1 * 8 + 6: F(k, DT, DP, 1, 6); break;          \
	default: CHECK(!"gemm_avx512: no such tile shape"); \
	}

static A512F void blk_fma_f32(struct k512 *k, int nr, int nt) { SHAPES(blk_t, DT_F32, 0) }
static A512F void blk_fma_bf16(struct k512 *k, int nr, int nt) { SHAPES(blk_t, DT_BF16, 0) }
static A512F void blk_fma_f16(struct k512 *k, int nr, int nt) { SHAPES(blk_t, DT_F16, 0) }
static A512F void blk_fma_fp8(struct k512 *k, int nr, int nt) { SHAPES(blk_t, DT_F8_E4M3, 0) }
static A512B void blk_dp_bf16(struct k512 *k, int nr, int nt) { SHAPES(blk_t, DT_BF16, 1) }
static A512B void blk_dp_fp8(struct k512 *k, int nr, int nt) { SHAPES(blk_t, DT_F8_E4M3, 1) }

/* tokens per tile: fp8 keeps a second accumulator set (and, for dp, four table registers) */
static int tile_tokens(const struct wmat *w, bool dp) { return w->dtype != DT_F8_E4M3 ? TILE_T : dp ? 2 : 3; }

/* Rows per block for a single tile of nt tokens (several tiles: see gemm_panel_avx512). One
 * tile is bandwidth-bound: dp streams one row at a time (rows 4 KB apart read side by side
 * ran slower), fma needs 8 rows to amortize the x loads over the
 * widening, fp8 fma tiles of 2-3 tokens 4 rows. */
static int tile_rows(const struct wmat *w, int nt, bool dp)
{
	if (dp && w->dtype != DT_F8_E4M3)
		return 1;
	if (nt <= (w->dtype == DT_F8_E4M3 ? (dp ? 2 : 1) : 3))
		return dp ? 1 : 8;
	return 4;
}

/* x rows [nt, ldx] → bf16 [nt, ldxb], zero-padded (exact: the values are bf16 already) */
static A512B void to_bf16(const float *x, int ldx, int nt, int cols, uint16_t *xb, int ldxb)
{
	for (int t = 0; t < nt; t++) {
		const float *s = x + (size_t)t * (size_t)ldx;
		uint16_t *d = xb + (size_t)t * (size_t)ldxb;
		for (int c = 0; c < ldxb; c += 32) {
			__mmask16 m0 = c >= cols ? 0 : cols - c >= 16 ? 0xffff : (__mmask16)((1u << (cols - c)) - 1);
			__mmask16 m1 = c + 16 >= cols        ? 0
				       : cols - c - 16 >= 16 ? 0xffff
							     : (__mmask16)((1u << (cols - c - 16)) - 1);
			__m512 lo = _mm512_maskz_loadu_ps(m0, s + c), hi = _mm512_maskz_loadu_ps(m1, s + c + 16);
			_mm512_store_si512((__m512i *)(d + c), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
		}
	}
}

/* y[t0 + t][r + rr] (+)= k->out[rr][t] for a tile's nt tokens and `rows` rows */
static void store_tile(const struct gemm_job *j, const struct k512 *k, int t0, int nt, int r, int rows)
{
	for (int t = 0; t < nt; t++) {
		float *y = j->y + (size_t)(t0 + t) * (size_t)j->ldy + r;
		for (int rr = 0; rr < rows; rr++)
			y[rr] = j->accumulate ? y[rr] + k->out[rr][t] : k->out[rr][t];
	}
}

void gemm_panel_avx512(const struct gemm_job *j, int r0, int r1, bool dp)
{
	const struct wmat *w = j->w;
	uint16_t *xb_buf = NULL;
	if (dp && (w->cols > XB_COLS || !(xb_buf = ops_scratch(OPS_SCRATCH_X_BF16, XB_ELEMS * sizeof(uint16_t)))))
		dp = false; /* same products, fp32 path */
	struct k512 k = {.w = w, .ldx = j->ldx, .ldxb = (w->cols + 31) / 32 * 32};
	if (dp && w->dtype == DT_F8_E4M3)
		fp8_512_table_words(k.fp8_sub);
	void (*fn)(struct k512 *, int, int);
	switch (w->dtype) {
	case DT_F32: fn = blk_fma_f32; break;
	case DT_F16: fn = blk_fma_f16; break;
	case DT_BF16: fn = dp ? blk_dp_bf16 : blk_fma_bf16; break;
	default: fn = dp ? blk_dp_fp8 : blk_fma_fp8; break;
	}
	int tt = tile_tokens(w, dp);
	if (dp && j->n > tt && (size_t)j->n * (size_t)k.ldxb <= XB_ELEMS) {
		/* Several token tiles: every token converted once, then per block of 4 rows all
		 * tiles, so a block's weights come from DRAM once and stay in L1 for the other
		 * tiles, while the next block is prefetched (a block ahead) behind the compute. */
		to_bf16(j->x, j->ldx, j->n, w->cols, xb_buf, k.ldxb);
		const size_t esz = dtype_size(w->dtype);
		for (int r = r0; r < r1;) {
			int rows = r1 - r >= 4 ? 4 : 1;
			k.r = r;
			k.pf = (size_t)rows * (size_t)w->ld * esz;
			for (int t0 = 0; t0 < j->n; t0 += tt) {
				int nt = j->n - t0 < tt ? j->n - t0 : tt;
				k.xb = xb_buf + (size_t)t0 * (size_t)k.ldxb;
				fn(&k, rows, nt);
				store_tile(j, &k, t0, nt, r, rows);
			}
			r += rows;
		}
		return;
	}
	for (int t0 = 0; t0 < j->n; t0 += tt) {
		int nt = j->n - t0 < tt ? j->n - t0 : tt;
		k.x = j->x + (size_t)t0 * (size_t)j->ldx;
		if (dp) {
			to_bf16(k.x, j->ldx, nt, w->cols, xb_buf, k.ldxb);
			k.xb = xb_buf;
		}
		int nr = tile_rows(w, nt, dp);
		for (int r = r0; r < r1;) {
			int rows = r1 - r >= nr ? nr : 1; /* a panel's last rows one at a time */
			k.r = r;
			fn(&k, rows, nt);
			store_tile(j, &k, t0, nt, r, rows);
			r += rows;
		}
	}
}
