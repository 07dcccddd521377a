/* AMX-BF16 GEMM on weights packed at load (layout: ops/prepack.h), for any token count.
 *
 * The packed layout is already AMX's: in a 32-row block, 16 pairs x 16 rows are one B tile
 * (1 KB at a stride of 128 bytes: rows 0-15 at +0, rows 16-31 at +64), and 16 tokens x 32
 * columns of the bf16 x rows one A tile. Tiles: C0 C1 (first token tile x the block's two
 * row halves), C2 C3 (second token tile), A0 A1, B0 B1. A C tile sums the block's whole k
 * depth (blocks are padded to 16 pairs), then goes through L1 into y.
 *
 * One tdpbf16ps (16 x 16 x 32) costs the same 16 cycles for 1 token as for 16: 3.4 TFLOP/s
 * per core at 16 tokens on a Xeon with AMX (1 token: ~215 GFLOP/s, the dp kernel's peak),
 * while a 1 KB B tile per 16 cycles outruns DRAM. So one kernel serves every token count,
 * and a token's sum runs in the same order whatever its batch (its tile row), as in
 * ops/gemm_prepacked512.c.
 *
 * fp8 weights: each 128-column scale segment of a block is decoded to bf16 pairs in L1
 * (ops/fp8_512.h), multiplied as above, and its C tiles scaled per row into y. */
#include <immintrin.h>

#include "ops/fp8_512.h"
#include "ops/amx.h"
#include "ops/gemm_internal.h"
#include "ops/prepack.h"

#define AMX_FN __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))

#define SR PREPACK_ROWS	       /* rows per block */
#define STEP_PAIRS 16	       /* pairs per tile step */
#define STEP_BYTES (STEP_PAIRS * SR * 4) /* one step of a bf16 block: 2 KB */
#define PF_AHEAD 8192 /* prefetch distance in the weight stream: every line of a step, 4 steps ahead */

/* m0 tokens in the first token tile (1-16); the second is always 16 rows (x is padded).
 * Tiles: 0 1 C and 4 A of the first token tile, 2 3 C and 5 A of the second, 6 7 B. */
static void tiles_config(int m0)
{
	uint8_t m = (uint8_t)m0, rows[8] = {m, m, 16, 16, m, 16, 16, 16};
	amx_tiles_config(rows);
}

/* one step's 32 lines: 1.05-1.1x fewer (2 per step) at 16-64 tokens from DRAM */
static inline void prefetch_step(const char *p)
{
#pragma GCC unroll 32
	for (int l = 0; l < STEP_BYTES / 64; l++)
		_mm_prefetch(p + 64 * l, _MM_HINT_T0);
}

/* C tiles of one block: `steps` steps of B (bf16 pairs, 2 KB per step, blocks stride 128)
 * times one (two) token tiles of x; c gets the C tiles [2 or 4][16][16]. pf: the stream to
 * prefetch (0: none). */
static AMX_FN void block_tiles(const char *wb, int steps, const char *x, size_t ldx_bytes, int two, float *c,
			       const char *pf)
{
	_tile_zero(0);
	_tile_zero(1);
	if (two) {
		_tile_zero(2);
		_tile_zero(3);
		const char *x1 = x + 16 * ldx_bytes;
		for (int s = 0; s < steps; s++) {
			if (pf)
				prefetch_step(pf + (size_t)s * STEP_BYTES);
			_tile_loadd(6, wb + (size_t)s * STEP_BYTES, 128);
			_tile_loadd(7, wb + (size_t)s * STEP_BYTES + 64, 128);
			_tile_loadd(4, x + (size_t)s * 64, ldx_bytes);
			_tile_loadd(5, x1 + (size_t)s * 64, ldx_bytes);
			_tile_dpbf16ps(0, 4, 6);
			_tile_dpbf16ps(1, 4, 7);
			_tile_dpbf16ps(2, 5, 6);
			_tile_dpbf16ps(3, 5, 7);
		}
		_tile_stored(0, c, 64);
		_tile_stored(1, c + 256, 64);
		_tile_stored(2, c + 512, 64);
		_tile_stored(3, c + 768, 64);
		return;
	}
	for (int s = 0; s < steps; s++) {
		if (pf)
			prefetch_step(pf + (size_t)s * STEP_BYTES);
		_tile_loadd(6, wb + (size_t)s * STEP_BYTES, 128);
		_tile_loadd(7, wb + (size_t)s * STEP_BYTES + 64, 128);
		_tile_loadd(4, x + (size_t)s * 64, ldx_bytes);
		_tile_dpbf16ps(0, 4, 6);
		_tile_dpbf16ps(1, 4, 7);
	}
	_tile_stored(0, c, 64);
	_tile_stored(1, c + 256, 64);
}

static inline __mmask16 mask16(int n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* y[t][0..32) = (add ? y : 0) + sc[row] · C[t] (sc NULL: 1) for nt tokens of a token tile
 * whose C tiles are c[0] (rows 0-15) and c[256] (rows 16-31), masked to the block's rows */
static AMX_FN void store_tile(const float *c, int nt, float *y, size_t ldy, __mmask16 m0, __mmask16 m1, int add,
			      const float *sc)
{
	__m512 s0 = sc ? _mm512_load_ps(sc) : _mm512_set1_ps(1.0f), s1 = sc ? _mm512_load_ps(sc + 16) : s0;
	for (int t = 0; t < nt; t++) {
		float *yt = y + (size_t)t * ldy;
		__m512 a0 = _mm512_load_ps(c + 16 * t), a1 = _mm512_load_ps(c + 256 + 16 * t);
		__m512 v0 = add ? _mm512_fmadd_ps(a0, s0, _mm512_maskz_loadu_ps(m0, yt)) : _mm512_mul_ps(a0, s0);
		__m512 v1 = add ? _mm512_fmadd_ps(a1, s1, _mm512_maskz_loadu_ps(m1, yt + 16)) : _mm512_mul_ps(a1, s1);
		_mm512_mask_storeu_ps(yt, m0, v0);
		_mm512_mask_storeu_ps(yt + 16, m1, v1);
	}
}

/* every token of j against one block's steps (wb: bf16 pairs, steps of 2 KB), into the
 * block's 32 columns of y at rb; pf: prefetch for the first pass */
static AMX_FN void block_all_tokens(const struct gemm_job *j, const char *xb, size_t ldx_bytes, const char *wb, int steps,
				    int rb, int nr, int add, const float *sc, const char *pf)
{
	_Alignas(64) float c[4 * 256];
	for (int t0 = 0; t0 < j->n; t0 += 32) {
		int nt = j->n - t0, two = nt > 16;
		block_tiles(wb, steps, xb + (size_t)t0 * ldx_bytes, ldx_bytes, two, c, t0 == 0 ? pf : NULL);
		float *y = j->y + (size_t)t0 * (size_t)j->ldy + rb;
		store_tile(c, nt < 16 ? nt : 16, y, (size_t)j->ldy, mask16(nr), mask16(nr - 16), add, sc);
		if (two)
			store_tile(c + 512, nt - 16 < 16 ? nt - 16 : 16, y + 16 * (size_t)j->ldy, (size_t)j->ldy, mask16(nr),
				   mask16(nr - 16), add, sc);
	}
}

/* fp8 steps [0, np) of a segment → bf16 pairs in the bf16 layout (dec [np][32] words) */
static AMX_FN void decode_segment(const uint8_t *wp, int np, __m512i sub, uint32_t *dec)
{
	for (int p = 0; p < np; p++) {
		_mm_prefetch((const char *)(wp + (size_t)p * 2 * SR) + PF_AHEAD, _MM_HINT_T0);
		__m512i raw = _mm512_load_si512(wp + (size_t)p * 2 * SR);
		_mm512_store_si512(dec + (size_t)p * SR, fp8_512_decode(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(raw)), sub));
		_mm512_store_si512(dec + (size_t)p * SR + 16,
				   fp8_512_decode(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(raw, 1)), sub));
	}
}

AMX_FN void gemm_panel_amx(const struct gemm_job *j, const uint16_t *xb, int ldxb, int r0, int r1)
{
	const struct wmat *w = j->w;
	int P = (w->cols + 1) / 2, P16 = (P + STEP_PAIRS - 1) / STEP_PAIRS * STEP_PAIRS, stride = w->packed_pairs;
	CHECK(w->packed && r0 % SR == 0 && ldxb % 32 == 0 && stride >= P16 && 2 * P16 <= ldxb);
	const char *x = (const char *)xb;
	size_t ldx_bytes = (size_t)ldxb * 2;
	tiles_config(j->n < 16 ? j->n : 16);
	if (w->dtype == DT_F8_E4M3) {
		__m512i sub = fp8_512_table();
		int seg = w->blk_c / 2, S = prepack_segments(w);
		CHECK(seg <= PREPACK_FP8_SEG_PAIRS && seg % STEP_PAIRS == 0);
		_Alignas(64) uint32_t dec[PREPACK_FP8_SEG_PAIRS * SR]; /* 8 KB */
		for (int rb = r0; rb < r1; rb += SR) {
			int nr = r1 - rb < SR ? r1 - rb : SR;
			const uint8_t *wp = (const uint8_t *)(const void *)w->packed + (size_t)(rb / SR) * (size_t)stride * 2 * SR;
			const float *sc = w->packed_scale + (size_t)(rb / SR) * (size_t)S * SR;
			for (int k0 = 0, g = 0; k0 < P; k0 += seg, g++) {
				int kn = P16 - k0 < seg ? P16 - k0 : seg; /* a multiple of 16: the pad pairs are zero */
				decode_segment(wp + (size_t)k0 * 2 * SR, kn, sub, dec);
				block_all_tokens(j, x + (size_t)k0 * 4, ldx_bytes, (const char *)dec, kn / STEP_PAIRS, rb, nr,
						 k0 > 0 || j->accumulate, sc + (size_t)g * SR, NULL);
			}
		}
	} else {
		for (int rb = r0; rb < r1; rb += SR) {
			int nr = r1 - rb < SR ? r1 - rb : SR;
			const char *wb = (const char *)(w->packed + (size_t)(rb / SR) * (size_t)stride * SR);
			block_all_tokens(j, x, ldx_bytes, wb, P16 / STEP_PAIRS, rb, nr, j->accumulate, NULL, wb + PF_AHEAD);
		}
	}
	_tile_release();
}

AMX_FN float gemm_amx_peak_chain(long iters)
{
	_Alignas(64) static const uint16_t zeros[512] = {0}; /* A and B tiles: only the timing matters */
	_Alignas(64) float c[256];
	tiles_config(16);
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	_tile_loadd(4, zeros, 64);
	_tile_loadd(5, zeros, 64);
	_tile_loadd(6, zeros, 64);
	_tile_loadd(7, zeros, 64);
	for (long i = 0; i < iters; i++) {
		_tile_dpbf16ps(0, 4, 6);
		_tile_dpbf16ps(1, 4, 7);
		_tile_dpbf16ps(2, 5, 6);
		_tile_dpbf16ps(3, 5, 7);
	}
	_tile_stored(0, c, 64);
	_tile_release();
	return c[0];
}
