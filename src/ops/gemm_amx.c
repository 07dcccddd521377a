/* AMX-BF16 GEMM on weights packed at load (layout: ops/prepack.h), for any token count.
 *
 * The packed layout is already AMX's: in a 32-row block, 16 pairs x 16 rows are one B tile
 * (1 KB at a stride of 128 bytes: rows 0-15 at +0, rows 16-31 at +64), and 16 tokens x 32
 * columns of the bf16 x rows one A tile. Tiles: C0 C1 (first token tile x the block's two
 * row halves), C2 C3 (second token tile), A0 A1, B0 B1. A C tile sums the block's whole k
 * depth (blocks are padded to 16 pairs), then goes through L1 into y.
 *
 * One tdpbf16ps (16 x 16 x 32) costs the same 16 cycles for 1 token as for 16 (at 1 token
 * about the dp kernel's peak, at 16 sixteen times it), while a 1 KB B tile per 16 cycles
 * outruns DRAM. So one kernel serves every token count, and a token's sum runs in the same
 * order whatever its batch (its tile row), as in ops/gemm_prepacked512.c.
 *
 * Past 32 tokens a block takes several passes of 32 tokens; for bf16 weights these run k
 * chunk by k chunk over groups of blocks (panel_bf16_chunked) so that DRAM keeps streaming,
 * and past 64 tokens over groups of blocks x token tiles with chunks small enough that a
 * block's chunk is reused from L1 (panel_bf16_blocked).
 *
 * fp8 weights: each 128-column scale segment of a block is decoded to bf16 pairs in L1
 * (ops/fp8_512.h), multiplied as above, and its C tiles scaled per row into y (past 1
 * token into a per-thread buffer that goes to y once per block, while the passes prefetch
 * the stream ahead into L2). */
#include <immintrin.h>

#include "ops/fp8_512.h"
#include "ops/amx.h"
#include "ops/bf16_512.h"
#include "ops/gemm_internal.h"
#include "ops/prepack.h"
#include "ops/scratch.h"

#define AMX_FN                                                                                                  \
	__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi,fma," \
			      "f16c")))

#define SR PREPACK_ROWS                  /* rows per block */
#define STEP_PAIRS 16                    /* pairs per tile step */
#define STEP_BYTES (STEP_PAIRS * SR * 4) /* one step of a bf16 block: 2 KB */
#define AMX_CHUNK_STEPS 64               /* k chunk of the multi-pass path: 2048 columns */
#define AMX_CBUF_TILES \
	64 /* sets of 4 C tiles (4 KB) parked between chunks: 256 KB of scratch (the chunked path uses 16) */
/* past this many tokens panel_bf16_blocked, else panel_bf16_chunked (weights from DRAM: blocked
 * loses below this and wins more and more above it, bench/gemm_levels) */
#define AMX_BLOCKED_MIN_TOKENS 64
#define AMX_BLOCK_STEPS 8        /* k chunk of the blocked path: 256 columns */
#define AMX_FP8_GROUP_TOKENS 512 /* fp8: tokens per group (acc: G blocks x 512 x 32 floats = 256 KB at G 4) */
/* fp8: past this many tokens groups of blocks (x no longer fits in L2: grouping loses below this
 * and wins more and more above it, bench/gemm_levels) */
#define AMX_FP8_GROUPED_MIN_TOKENS 128
_Static_assert(AMX_BLOCKED_MIN_TOKENS <= 512, "panel_bf16_chunked needs 4 x (token tiles) <= AMX_CBUF_TILES");
#define FP8_PF_AHEAD 32768 /* fp8: the segment this far ahead goes into L2 during the tile passes */
#define PF_AHEAD 8192      /* prefetch distance in the weight stream: every line of a step, 4 steps ahead */

/* m0 tokens in the first token tile (1-16); the second is always 16 rows (x is padded).
 * Tiles: 0 1 C and 4 A of the first token tile, 2 3 C and 5 A of the second, 6 7 B. */
static void tiles_config(int m0)
{
	uint8_t m = (uint8_t)m0, rows[8] = {m, m, 16, 16, m, 16, 16, 16};
	amx_tiles_config(rows);
}

/* Prefetches as volatile asm: gcc 12 deletes a loop whose only effect is _mm_prefetch
 * (seen: every prefetch of this file gone after a change to the loop around them). */
static inline void prefetch_l1(const char *p) { __asm__ volatile("prefetcht0 %0" ::"m"(*p)); }
static inline void prefetch_l2(const char *p) { __asm__ volatile("prefetcht1 %0" ::"m"(*p)); }

/* one step's 32 lines: all of them, which beat 2 per step at 16-64 tokens from DRAM */
static inline void prefetch_step(const char *p)
{
#pragma GCC unroll 32
	for (int l = 0; l < STEP_BYTES / 64; l++)
		prefetch_l1(p + 64 * l);
}

/* What a pass prefetches of the weight stream: `lines` lines per step from p (NULL: none),
 * into L1 (t0) or L2 */
struct stream_pf {
	const char *p, *end; /* end: where this piece of the stream ends (L2 only) */
	int lines, t0;
};

/* step s's share of the prefetch (the struct is copied: tile intrinsics clobber memory) */
static inline void prefetch_lines(struct stream_pf pf, int s)
{
	if (pf.t0) {
		prefetch_step(pf.p + (size_t)s * STEP_BYTES);
		return;
	}
	const char *p = pf.p + (size_t)s * (size_t)pf.lines * 64;
	for (int l = 0; l < pf.lines && p + 64 * l < pf.end; l++)
		prefetch_l2(p + 64 * l);
}

/* C tiles of one block: `steps` steps of B (bf16 pairs, 2 KB per step, blocks stride 128)
 * times one (two) token tiles of x, added to cin (the C tiles a previous k chunk stored:
 * restoring them is exact) or to zero (cin NULL); c gets the C tiles [2 or 4][16][16]. */
static AMX_FN void block_tiles(const char *wb, int steps, const char *x, size_t ldx_bytes, int two, const float *cin,
			       float *c, const struct stream_pf *pfp)
{
	const struct stream_pf pf = *pfp;
	if (cin) {
		_tile_loadd(0, cin, 64);
		_tile_loadd(1, cin + 256, 64);
	} else {
		_tile_zero(0);
		_tile_zero(1);
	}
	if (two) {
		if (cin) {
			_tile_loadd(2, cin + 512, 64);
			_tile_loadd(3, cin + 768, 64);
		} else {
			_tile_zero(2);
			_tile_zero(3);
		}
		const char *x1 = x + 16 * ldx_bytes;
		/* software-pipelined: tiles are not renamed, so a step's loads go in as soon as the
		 * products reading the previous contents have been issued */
		_tile_loadd(6, wb, 128);
		_tile_loadd(7, wb + 64, 128);
		_tile_loadd(4, x, ldx_bytes);
		_tile_loadd(5, x1, ldx_bytes);
		for (int s = 0;; s++) {
			if (pf.p)
				prefetch_lines(pf, s);
			_tile_dpbf16ps(0, 4, 6);
			_tile_dpbf16ps(1, 4, 7);
			if (s + 1 == steps) {
				_tile_dpbf16ps(2, 5, 6);
				_tile_dpbf16ps(3, 5, 7);
				break;
			}
			_tile_loadd(4, x + (size_t)(s + 1) * 64, ldx_bytes);
			_tile_dpbf16ps(2, 5, 6);
			_tile_loadd(6, wb + (size_t)(s + 1) * STEP_BYTES, 128);
			_tile_dpbf16ps(3, 5, 7);
			_tile_loadd(5, x1 + (size_t)(s + 1) * 64, ldx_bytes);
			_tile_loadd(7, wb + (size_t)(s + 1) * STEP_BYTES + 64, 128);
		}
		_tile_stored(0, c, 64);
		_tile_stored(1, c + 256, 64);
		_tile_stored(2, c + 512, 64);
		_tile_stored(3, c + 768, 64);
		return;
	}
	for (int s = 0; s < steps; s++) {
		if (pf.p)
			prefetch_lines(pf, s);
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

/* y[t][0..32) = (add ? y : 0) + sc[row] · C[t] (sc NULL: 1), rounded to bf16 if rnd, for nt
 * tokens of a token tile whose C tiles are c[0] (rows 0-15) and c[256] (rows 16-31), masked
 * to the block's rows */
static AMX_FN void store_tile(const float *c, int nt, float *y, size_t ldy, __mmask16 m0, __mmask16 m1, int add,
			      const float *sc, int rnd)
{
	__m512 s0 = sc ? _mm512_load_ps(sc) : _mm512_set1_ps(1.0f), s1 = sc ? _mm512_load_ps(sc + 16) : s0;
	for (int t = 0; t < nt; t++) {
		float *yt = y + (size_t)t * ldy;
		__m512 a0 = _mm512_load_ps(c + 16 * t), a1 = _mm512_load_ps(c + 256 + 16 * t);
		__m512 v0 = add ? _mm512_fmadd_ps(a0, s0, _mm512_maskz_loadu_ps(m0, yt)) : _mm512_mul_ps(a0, s0);
		__m512 v1 = add ? _mm512_fmadd_ps(a1, s1, _mm512_maskz_loadu_ps(m1, yt + 16)) : _mm512_mul_ps(a1, s1);
		if (rnd)
			v0 = round_bf16_512(v0), v1 = round_bf16_512(v1);
		_mm512_mask_storeu_ps(yt, m0, v0);
		_mm512_mask_storeu_ps(yt + 16, m1, v1);
	}
}

/* a 32-token pass's C tiles c [4][16][16] (block_tiles) → y rows of its nt tokens (1-32) */
static AMX_FN void store_pass(const float *c, int nt, float *y, size_t ldy, int nr, int add, const float *sc, int rnd)
{
	store_tile(c, nt < 16 ? nt : 16, y, ldy, mask16(nr), mask16(nr - 16), add, sc, rnd);
	if (nt > 16)
		store_tile(c + 512, nt - 16 < 16 ? nt - 16 : 16, y + 16 * ldy, ldy, mask16(nr), mask16(nr - 16), add,
			   sc, rnd);
}

/* n tokens' rows of a block: y[t][0..nr) = acc[t][0..nr) (to_y) or acc = y (the 32 - nr
 * columns past the block's rows: 0) */
static AMX_FN void acc_copy(float *acc, int n, float *y, size_t ldy, int nr, int to_y)
{
	__mmask16 m0 = mask16(nr), m1 = mask16(nr - 16);
	for (int t = 0; t < n; t++) {
		float *yt = y + (size_t)t * ldy, *at = acc + 32 * t;
		if (to_y) {
			_mm512_mask_storeu_ps(yt, m0, _mm512_load_ps(at));
			_mm512_mask_storeu_ps(yt + 16, m1, _mm512_load_ps(at + 16));
		} else {
			_mm512_store_ps(at, _mm512_maskz_loadu_ps(m0, yt));
			_mm512_store_ps(at + 16, _mm512_maskz_loadu_ps(m1, yt + 16));
		}
	}
}

/* every token of j against one block's steps (wb: bf16 pairs, steps of 2 KB), into the
 * block's 32 columns of y at rb; pf: prefetch for the first pass (2 KB per step; into L1 up
 * to 16 tokens, else into L2, which wins past 16 tokens from DRAM and loses at 1-4), or pf2:
 * pf2_bytes of the stream into L2, spread over all passes */
static AMX_FN void block_all_tokens(int n, const char *xb, size_t ldx_bytes, const char *wb, int steps, float *yb,
				    size_t ldy, int nr, int add, const float *sc, const char *pf, const char *pf2,
				    int pf2_bytes, int rnd)
{
	_Alignas(64) float c[4 * 256];
	int np = (n + 31) / 32, lines = (pf2_bytes / 64 + np * steps - 1) / (np * steps);
	for (int t0 = 0; t0 < n; t0 += 32) {
		int nt = n - t0, two = nt > 16;
		struct stream_pf spf = {t0 == 0 ? pf : NULL, pf ? pf + (size_t)steps * STEP_BYTES : NULL, 32, n <= 16};
		if (pf2)
			spf = (struct stream_pf){pf2 + (size_t)(t0 / 32) * (size_t)steps * (size_t)lines * 64,
						 pf2 + pf2_bytes, lines, 0};
		block_tiles(wb, steps, xb + (size_t)t0 * ldx_bytes, ldx_bytes, two, NULL, c, &spf);
		store_pass(c, nt, yb + (size_t)t0 * ldy, ldy, nr, add, sc, rnd);
	}
}

/* bf16 weights, more than 32 tokens: each block takes one pass per 32 tokens, and only the
 * first reads the weights from DRAM. So groups of G blocks run k chunk by k chunk: a chunk of x
 * (64 tokens: 256 KB) stays in L2 across the group, and every pass prefetches its share of the
 * next piece of the stream (a block's chunk) into L2, so that DRAM keeps streaming while the
 * later passes work from L2 (faster than one pass at a time with the weights in DRAM, the more
 * so the wider the matrix). The C tiles of a group wait in cbuf [G][passes][4][16][16] between
 * chunks; reloading them is exact, so a token's sum is the one-pass kernel's, bit for bit. */
static AMX_FN void panel_bf16_chunked(const struct gemm_job *j, const char *x, size_t ldx_bytes, int r0, int r1,
				      int steps, float *cbuf)
{
	const struct wmat *w = j->w;
	int np = (j->n + 31) / 32, G = AMX_CBUF_TILES / (4 * np);
	size_t bstride = (size_t)w->packed_pairs * SR * 4; /* bytes per block */
	const char *base = (const char *)w->packed;
	for (int g0 = r0 / SR, gend = (r1 + SR - 1) / SR; g0 < gend; g0 += G) {
		int g1 = g0 + G < gend ? g0 + G : gend;
		for (int s0 = 0; s0 < steps; s0 += AMX_CHUNK_STEPS) {
			int ns = steps - s0 < AMX_CHUNK_STEPS ? steps - s0 : AMX_CHUNK_STEPS, last = s0 + ns == steps;
			for (int b = g0; b < g1; b++) {
				const char *wb = base + (size_t)b * bstride + (size_t)s0 * STEP_BYTES;
				/* the next piece: the next block's chunk, the group's next chunk, the next group */
				int nb = b + 1 < g1 ? b + 1 : !last ? g0 : g1 < gend ? g1 : -1;
				int nsx = b + 1 < g1 ? s0 : !last ? s0 + ns : 0;
				int nns = steps - nsx < AMX_CHUNK_STEPS ? steps - nsx : AMX_CHUNK_STEPS;
				const char *nx = nb < 0 ? NULL
							: base + (size_t)nb * bstride + (size_t)nsx * STEP_BYTES;
				if (steps <= AMX_CHUNK_STEPS && nb >= 0) /* blocks adjacent: half a block ahead */
					nx -= (size_t)ns * STEP_BYTES / 2;
				int lines = (nns * (STEP_BYTES / 64) + np * ns - 1) / (np * ns);
				int rb = b * SR, nr = r1 - rb < SR ? r1 - rb : SR;
				for (int p = 0; p < np; p++) {
					int t0 = 32 * p, nt = j->n - t0, two = nt > 16;
					float *c = cbuf + (size_t)((b - g0) * np + p) * 1024;
					struct stream_pf pf = {nx ? nx + (size_t)p * (size_t)ns * (size_t)lines * 64
								  : NULL,
							       nx ? nx + (size_t)nns * STEP_BYTES : NULL, lines, 0};
					block_tiles(wb, ns, x + (size_t)t0 * ldx_bytes + (size_t)s0 * 64, ldx_bytes,
						    two, s0 ? c : NULL, c, &pf);
					if (!last)
						continue;
					store_pass(c, nt, j->y + (size_t)t0 * (size_t)j->ldy + rb, (size_t)j->ldy, nr,
						   j->accumulate, NULL, j->round_bf16);
				}
			}
		}
	}
}

/* bf16 weights, many tokens (compute-bound): one block's weights and a 32-token tile of x
 * meet in 2x2 C tiles, so each pass loads a weight and an x tile per product pair, and at
 * hundreds of tokens x no longer fits in L2 beside a block (512 tokens of 7168 columns: 7 MB).
 * So the panel runs in groups of G blocks x NT token tiles, k chunk by k chunk of
 * AMX_BLOCK_STEPS: a block's chunk (16 KB) stays in L1 while every token tile of the group
 * passes over it, the group's x chunk (NT x 16 KB) stays in L2, and the C tiles of the group
 * wait in cbuf [G][NT][4][16][16] between chunks (reloading them is exact: the same bits as
 * one pass over the whole k). The next block's chunk goes into L2 during the passes. */
static AMX_FN void panel_bf16_blocked(const struct gemm_job *j, const char *x, size_t ldx_bytes, int r0, int r1,
				      int steps, float *cbuf)
{
	const struct wmat *w = j->w;
	int np = (j->n + 31) / 32, NT = np < AMX_CBUF_TILES / 4 ? np : AMX_CBUF_TILES / 4, G = AMX_CBUF_TILES / NT;
	size_t bstride = (size_t)w->packed_pairs * SR * 4; /* bytes per block */
	const char *base = (const char *)w->packed;
	int bend = (r1 + SR - 1) / SR;
	for (int g0 = r0 / SR; g0 < bend; g0 += G) {
		int g1 = g0 + G < bend ? g0 + G : bend;
		for (int p0 = 0; p0 < np; p0 += NT) {
			int p1 = p0 + NT < np ? p0 + NT : np;
			for (int s0 = 0; s0 < steps; s0 += AMX_BLOCK_STEPS) {
				int ns = steps - s0 < AMX_BLOCK_STEPS ? steps - s0 : AMX_BLOCK_STEPS,
				    last = s0 + ns == steps;
				for (int b = g0; b < g1; b++) {
					const char *wb = base + (size_t)b * bstride + (size_t)s0 * STEP_BYTES;
					/* the next piece: the next block's chunk, else the group's next chunk */
					const char *nx = b + 1 < g1 ? wb + bstride
							 : !last    ? base + (size_t)g0 * bstride +
									   (size_t)(s0 + ns) * STEP_BYTES
								 : NULL;
					int lines = (ns * (STEP_BYTES / 64) + (p1 - p0) * ns - 1) / ((p1 - p0) * ns);
					int rb = b * SR, nr = r1 - rb < SR ? r1 - rb : SR;
					for (int p = p0; p < p1; p++) {
						int t0 = 32 * p, nt = j->n - t0, two = nt > 16;
						float *c = cbuf + (size_t)((b - g0) * NT + (p - p0)) * 1024;
						struct stream_pf pf = {
							nx ? nx + (size_t)(p - p0) * (size_t)ns * (size_t)lines * 64
							   : NULL,
							nx ? nx + (size_t)ns * STEP_BYTES : NULL, lines, 0};
						block_tiles(wb, ns, x + (size_t)t0 * ldx_bytes + (size_t)s0 * 64,
							    ldx_bytes, two, s0 ? c : NULL, c, &pf);
						if (!last)
							continue;
						store_pass(c, nt, j->y + (size_t)t0 * (size_t)j->ldy + rb,
							   (size_t)j->ldy, nr, j->accumulate, NULL, j->round_bf16);
					}
				}
			}
		}
	}
}

/* fp8 steps [0, np) of a segment → bf16 pairs in the bf16 layout (dec [np][32] words); every
 * CPU with AMX has AVX512_VBMI (fp8_vbmi_decode). The stream 8 KB ahead is prefetched into L2,
 * not L1: at 1-16 tokens from DRAM it beats prefetcht0 at the same distance (T0 holds an L1
 * fill buffer for the whole DRAM trip, and the decode between the prefetches leaves too few of
 * them in flight); past 16 tokens the passes prefetch the stream into L2 anyway (FP8_PF_AHEAD),
 * and it makes no difference. */
static AMX_FN void decode_segment(const uint8_t *wp, int np, const struct fp8_vbmi *t, uint32_t *dec)
{
	for (int p = 0; p < np; p++) {
		prefetch_l2((const char *)(wp + (size_t)p * 2 * SR) + PF_AHEAD);
		__m512i w0, w1;
		fp8_vbmi_decode(_mm512_load_si512(wp + (size_t)p * 2 * SR), t, &w0, &w1);
		_mm512_store_si512(dec + (size_t)p * SR, w0);
		_mm512_store_si512(dec + (size_t)p * SR + 16, w1);
	}
}

/* fp8 weights. Each 128-column scale segment of a block is decoded once into dec (L1) and every
 * token of the group passes over it; its C tiles are scaled into acc [tokens][32] (past 1
 * token; contiguous, where y's rows lie a page apart per token) and acc goes to y once per
 * block (a little faster than y directly at 4-16 tokens). Past AMX_FP8_GROUPED_MIN_TOKENS the
 * blocks run in groups of G, segment by segment, over groups of up to AMX_FP8_GROUP_TOKENS
 * tokens, so that a segment's x chunk is reused from L2 by the group's blocks instead of every
 * block streaming all of x (as panel_bf16_blocked). Per (row, token) the same operations in the
 * same order: the same bits whatever the grouping. */
static AMX_FN void panel_fp8(const struct gemm_job *j, const char *x, size_t ldx_bytes, int r0, int r1, int P, int P16)
{
	const struct wmat *w = j->w;
	struct fp8_vbmi t;
	fp8_vbmi_load(&t);
	int seg = w->blk_c / 2, S = prepack_segments(w);
	CHECK(seg <= PREPACK_FP8_SEG_PAIRS && seg % STEP_PAIRS == 0);
	_Alignas(64) uint32_t dec[PREPACK_FP8_SEG_PAIRS * SR]; /* 8 KB */
	enum { ACC_FLOATS = AMX_CBUF_TILES * 1024 };
	float *acc = j->n > 1 ? ops_scratch(OPS_SCRATCH_AMX_C, ACC_FLOATS * sizeof(float)) : NULL;
	int ntok = j->n < AMX_FP8_GROUP_TOKENS ? j->n : AMX_FP8_GROUP_TOKENS;
	int G = acc && j->n > AMX_FP8_GROUPED_MIN_TOKENS ? ACC_FLOATS / (SR * ntok) : 1;
	size_t bbytes = (size_t)w->packed_pairs * 2 * SR, ldy = (size_t)j->ldy; /* bytes per block */
	const uint8_t *base = (const uint8_t *)(const void *)w->packed;
	int bend = (r1 + SR - 1) / SR;
	for (int g0 = r0 / SR; g0 < bend; g0 += G) {
		int g1 = g0 + G < bend ? g0 + G : bend;
		for (int tg = 0; tg < j->n; tg += ntok) {
			int nt = j->n - tg < ntok ? j->n - tg : ntok;
			const char *xg = x + (size_t)tg * ldx_bytes;
			float *yg = j->y + (size_t)tg * ldy;
			for (int b = g0; b < g1 && acc && j->accumulate; b++)
				acc_copy(acc + (size_t)(b - g0) * (size_t)ntok * SR, nt, yg + b * SR, ldy,
					 r1 - b * SR < SR ? r1 - b * SR : SR, 0);
			for (int k0 = 0, g = 0; k0 < P; k0 += seg, g++) {
				int kn = P16 - k0 < seg ? P16 - k0
							: seg; /* a multiple of 16: the pad pairs are zero */
				for (int b = g0; b < g1; b++) {
					int rb = b * SR, nr = r1 - rb < SR ? r1 - rb : SR;
					const uint8_t *wp = base + (size_t)b * bbytes;
					const float *sc = w->packed_scale + (size_t)b * (size_t)S * SR +
							  (size_t)g * SR;
					decode_segment(wp + (size_t)k0 * 2 * SR, kn, &t, dec);
					/* past 16 tokens DRAM streams on while the tiles work: the stream's next
					 * piece into L2 (a segment FP8_PF_AHEAD ahead in the block, or the next
					 * block's segment in a group); not at 1-16 tokens, where the decode is
					 * the bottleneck and it slowed the kernel */
					const uint8_t *ahead = G == 1         ? wp + (size_t)k0 * 2 * SR + FP8_PF_AHEAD
							       : b + 1 < g1   ? wp + bbytes + (size_t)k0 * 2 * SR
							       : k0 + seg < P ? base + (size_t)g0 * bbytes +
											(size_t)(k0 + seg) * 2 * SR
							       : g1 < bend ? base + (size_t)g1 * bbytes
									   : NULL;
					if (j->n <= 16)
						ahead = NULL;
					if (acc)
						block_all_tokens(nt, xg + (size_t)k0 * 4, ldx_bytes, (const char *)dec,
								 kn / STEP_PAIRS,
								 acc + (size_t)(b - g0) * (size_t)ntok * SR, SR, SR,
								 k0 > 0 || j->accumulate, sc, NULL,
								 (const char *)ahead, kn * 2 * SR, 0);
					else
						block_all_tokens(nt, xg + (size_t)k0 * 4, ldx_bytes, (const char *)dec,
								 kn / STEP_PAIRS, yg + rb, ldy, nr,
								 k0 > 0 || j->accumulate, sc, NULL,
								 (const char *)ahead, kn * 2 * SR, 0);
				}
			}
			for (int b = g0; b < g1 && acc; b++)
				acc_copy(acc + (size_t)(b - g0) * (size_t)ntok * SR, nt, yg + b * SR, ldy,
					 r1 - b * SR < SR ? r1 - b * SR : SR, 1);
		}
	}
}

AMX_FN int gemm_panel_amx(const struct gemm_job *j, const uint16_t *xb, int ldxb, int r0, int r1)
{
	const struct wmat *w = j->w;
	int P = (w->cols + 1) / 2, P16 = (P + STEP_PAIRS - 1) / STEP_PAIRS * STEP_PAIRS, stride = w->packed_pairs;
	CHECK(w->packed && r0 % SR == 0 && ldxb % 32 == 0 && stride >= P16 && 2 * P16 <= ldxb);
	const char *x = (const char *)xb;
	size_t ldx_bytes = (size_t)ldxb * 2;
	tiles_config(j->n < 16 ? j->n : 16);
	float *cbuf;
	if (w->dtype == DT_F8_E4M3) {
		panel_fp8(j, x, ldx_bytes, r0, r1, P, P16);
	} else if (j->n > 32 && (cbuf = ops_scratch(OPS_SCRATCH_AMX_C, AMX_CBUF_TILES * 1024 * sizeof(float)))) {
		if (j->n > AMX_BLOCKED_MIN_TOKENS)
			panel_bf16_blocked(j, x, ldx_bytes, r0, r1, P16 / STEP_PAIRS, cbuf);
		else
			panel_bf16_chunked(j, x, ldx_bytes, r0, r1, P16 / STEP_PAIRS, cbuf);
	} else {
		for (int rb = r0; rb < r1; rb += SR) {
			int nr = r1 - rb < SR ? r1 - rb : SR;
			const char *wb = (const char *)(w->packed + (size_t)(rb / SR) * (size_t)stride * SR);
			block_all_tokens(j->n, x, ldx_bytes, wb, P16 / STEP_PAIRS, j->y + rb, (size_t)j->ldy, nr,
					 j->accumulate, NULL, wb + PF_AHEAD, NULL, 0, j->round_bf16);
		}
	}
	_tile_release();
	return w->dtype != DT_F8_E4M3; /* bf16 weights: stored rounded (j->round_bf16) */
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
