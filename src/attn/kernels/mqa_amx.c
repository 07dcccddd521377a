/* AMX-BF16 kernels of the paged MQA (see mqa_amx.h).
 *
 * Scores as Sᵀ = K·Qᵀ: an A tile is 16 key rows x 32 bf16 read straight from the cache (16
 * keys of one page sit rb bytes apart), the B tiles are the query rows packed once per job,
 * and each 16 keys x 16 rows C tile is transposed into the score rows. (S = Q·Kᵀ would need
 * every key tile transposed into pairs: one 16 x 16 transpose per tdpbf16ps instead of one
 * per 18.)
 *
 * Values as O = P·V, two kernels (below). Their C tiles load `out` itself and go back to it:
 * the online softmax's alpha is exactly 1 for rows whose maximum did not grow, so only the
 * other rows are rescaled beforehand, and no epilogue runs; the price is a column order of
 * their own within each 32 columns, restored once per job.
 *
 * One tdpbf16ps (16 x 16 x 32) costs ~16 cycles; two loads per product from L1 and even a
 * single accumulator chain keep that pace, so the loops are plain. Tiles
 * (palette 1): 0 1 C, 4 5 A, 6 B for the scores and full row groups; 2 3 7 have the row count
 * of a last group of fewer than 16 query rows (C and A of the value pass). */
#include "attn/kernels/mqa_amx.h"

#include <immintrin.h>
#include <string.h>

#include "attn/kernels/mqa.h"
#include "attn/kernels/mqa_avx512.h"
#include "ops/amx.h"
#include "ops/tr16_512.h"

#define AMX_FN __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define INLINE AMX_FN static inline __attribute__((always_inline))
#define KBW MQA_KEY_BLOCK_WIDE /* the most keys of a block; ls: the job's (score rows ls apart) */

_Static_assert(KBW % 32 == 0 && MQA_KEY_BLOCK % 32 == 0 && MQA_KEY_BLOCK <= KBW, "blocks of whole 32-key steps");

#define SPLIT_MAX_G 2 /* row groups up to which the value pass multiplies the cached rows */
#define PROB_TILES_BYTES (SPLIT_MAX_G * (KBW / 16) * 2 * 1024)

size_t mqa_amx_work_bytes(int row)
{
	/* key or value rows of copied groups, then the probability or value tiles (64 KB) */
	_Static_assert(PROB_TILES_BYTES >= (KBW / 32) * 2 * 1024, "the packed pass's value tiles of a block fit");
	return (size_t)KBW * row * 2 + PROB_TILES_BYTES;
}

size_t mqa_amx_q_words(int nr, int row) { return (size_t)(nr + 15) / 16 * 16 * (size_t)(row / 2); }

void mqa_amx_begin(int nr)
{
	uint8_t tail = (uint8_t)(nr % 16 ? nr % 16 : 16), rows[8] = {16, 16, tail, tail, 16, 16, 16, tail};
	amx_tiles_config(rows);
}

AMX_FN void mqa_amx_end(void) { _tile_release(); }

INLINE __mmask16 tail_mask(int n) { return n <= 0 ? 0 : n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1); }

AMX_FN void mqa_amx_pack_q(uint32_t *qv, const float *q, int nr, int row)
{
	int S = row / 32, G = (nr + 15) / 16;
	for (int g = 0; g < G; g++)
		for (int st = 0; st < S; st++) {
			__m512i r[16];
			for (int c = 0; c < 16; c++) { /* r[c]: dword p = (q[2p], q[2p+1]) of row 16g + c */
				int i = 16 * g + c;
				const float *x = q + (size_t)i * row + 32 * st;
				r[c] = i < nr ? (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16),
									     _mm512_loadu_ps(x))
					      : _mm512_setzero_si512();
			}
			tr16(r);
			uint32_t *t = qv + ((size_t)g * S + st) * 256;
			for (int p = 0; p < 16; p++)
				_mm512_store_si512(t + 16 * p, r[p]);
		}
}

/* src[kg] = the rows of key group kg (keys 16 kg ..), rb bytes apart: the cache's when the
 * group is whole and contiguous (in one page, or in pages that follow each other), else the
 * first `bytes` of each row copied into work (at 16 kg rows), so that nothing past the block's
 * rows is read; `zero`: the missing rows of a short copied group become zeros. */
INLINE void group_rows(const uint16_t *const *kr, int nk, size_t rb, size_t bytes, int zero, void *work,
		       const char **src)
{
	for (int kg = 0; kg < (nk + 15) / 16; kg++) {
		int j0 = 16 * kg, n = nk - j0 < 16 ? nk - j0 : 16;
		const char *k0 = (const char *)kr[j0];
		int contig = n == 16;
		for (int j = 1; j < n && contig; j++)
			contig = (const char *)kr[j0 + j] == k0 + (size_t)j * rb;
		if (contig) {
			src[kg] = k0;
			continue;
		}
		char *dst = (char *)work + (size_t)j0 * rb;
		for (int j = 0; j < 16; j++)
			if (j < n)
				memcpy(dst + (size_t)j * rb, kr[j0 + j], bytes);
			else if (zero)
				memset(dst + (size_t)j * rb, 0, bytes);
		src[kg] = dst;
	}
}

/* ---- scores ---- */

/* PF_LINES lines of the next block per pair of tile products (~32 cycles), in address order,
 * through both passes of a block: its loads then overlap this block's work, while denser
 * bursts (8 lines per pair) stall on the fill buffers; sparser ones (2) and every line spread
 * within the score pass (as the AVX-512 kernel does) were slower too. */
#define PF_LINES 4
#define PF_ROWS_AHEAD 4 /* fp8: rows between the one decoded and the one prefetched */

/* prefetches the lines of row r from byte `from` to byte `to` (exclusive) */
INLINE void pf_row(const struct mqa_amx_pf *c, int r, int from, int to)
{
	const char *a = (const char *)c->rows[r];
	uintptr_t l0 = ((uintptr_t)a + (uintptr_t)from) & ~(uintptr_t)63, l1 = (uintptr_t)a + (uintptr_t)to;
	for (uintptr_t l = l0; l < l1; l += 64)
		_mm_prefetch((const char *)l, _MM_HINT_T0);
}

/* decodes `parts` parts of the rows; each part prefetches its share of the row PF_ROWS_AHEAD
 * on (the first rows at the start), so that the lines come a few at a time */
AMX_FN static void dec_parts(struct mqa_amx_pf *c, int parts)
{
	int np = kv_fp8_parts(c->fp8);
	if (c->r == 0 && c->part == 0)
		for (int r = 0; r < PF_ROWS_AHEAD && r < c->n; r++)
			pf_row(c, r, 0, c->bytes);
	for (int i = 0; i < parts && c->r < c->n; i++) {
		if (c->r + PF_ROWS_AHEAD < c->n) /* the whole row's lines over its parts, the last one too */
			pf_row(c, c->r + PF_ROWS_AHEAD, c->bytes * c->part / np,
			       c->part + 1 == np ? c->bytes : c->bytes * (c->part + 1) / np);
		kv_fp8_decode_bf16_part(c->fp8, c->rows[c->r], c->part, c->dst + (size_t)c->r * c->width,
					(enum ops_level)c->level);
		if (++c->part == np)
			c->part = 0, c->r++;
	}
}

void mqa_amx_pf_finish(struct mqa_amx_pf *pf)
{
	if (pf->fp8)
		dec_parts(pf, (pf->n - pf->r) * kv_fp8_parts(pf->fp8));
}

INLINE void pf_some(struct mqa_amx_pf *c)
{
	if (c->fp8) {
		dec_parts(c, c->per);
		return;
	}
	for (int i = 0; i < PF_LINES && c->r < c->n; i++) {
		_mm_prefetch((const char *)c->rows[c->r] + c->off, _MM_HINT_T0);
		if ((c->off += 64) >= c->bytes)
			c->off = 0, c->r++;
	}
}

/* ct: a C tile [16 keys][16 rows] → s[c * ls + j] = scale * ct[j][c] for c < nr, j < nk */
INLINE void store_scores(const float *ct, int nr, int nk, __m512 sc, float *s, int ls)
{
	__m512i r[16];
#pragma GCC unroll 16
	for (int j = 0; j < 16; j++)
		r[j] = _mm512_load_si512(ct + 16 * j);
	tr16(r);
	__mmask16 m = tail_mask(nk);
	for (int c = 0; c < nr; c++)
		_mm512_mask_storeu_ps(s + (size_t)c * ls, m, _mm512_mul_ps(_mm512_castsi512_ps(r[c]), sc));
}

AMX_FN void mqa_amx_scores(const uint32_t *qv, int nr, int row, const uint16_t *const *kr, int nk, float scale,
			   float *s, int ls, void *work, struct mqa_amx_pf *pf)
{
	int S = row / 32, G = (nr + 15) / 16, ng = (nk + 15) / 16;
	size_t rb = (size_t)row * 2;
	/* a short group's missing rows only reach C rows that are not stored */
	const char *src[KBW / 16];
	group_rows(kr, nk, rb, rb, 0, work, src);
	__m512 sc = _mm512_set1_ps(scale);
	_Alignas(64) float ct[2 * 256];
	/* key groups outer: two groups' rows (36 KB) stay in L1 while the query tiles pass */
	for (int kg = 0; kg < ng; kg += 2) {
		int two = kg + 1 < ng;
		const char *a0 = src[kg], *a1 = src[kg + two];
		int g = 0;
		/* past two groups (q 54 KB and more, in L2 anyway), two whole row groups at once
		 * (tiles 2 3 7 then have 16 rows): every key and query tile serves two products, one
		 * load per product instead of 1.5 (with the value pass's pairs, a clear gain at 128
		 * heads); with 2 groups the pair of query tiles pushed the keys out of L1 and lost */
		for (; two && G > 2 && nr % 16 == 0 && g + 1 < G; g += 2) {
			const char *b0 = (const char *)(qv + (size_t)g * S * 256), *b1 = b0 + (size_t)S * 1024;
			_tile_zero(0);
			_tile_zero(1);
			_tile_zero(2);
			_tile_zero(3);
			for (int st = 0; st < S; st++) {
				pf_some(pf);
				_tile_loadd(4, a0 + (size_t)st * 64, rb);
				_tile_loadd(6, b0 + (size_t)st * 1024, 64);
				_tile_dpbf16ps(0, 4, 6);
				_tile_loadd(5, a1 + (size_t)st * 64, rb);
				_tile_dpbf16ps(1, 5, 6);
				_tile_loadd(7, b1 + (size_t)st * 1024, 64);
				_tile_dpbf16ps(2, 4, 7);
				_tile_dpbf16ps(3, 5, 7);
			}
			float *o = s + (size_t)16 * g * ls + 16 * kg;
			_tile_stored(0, ct, 64);
			_tile_stored(1, ct + 256, 64);
			store_scores(ct, 16, nk - 16 * kg, sc, o, ls);
			store_scores(ct + 256, 16, nk - 16 * kg - 16, sc, o + 16, ls);
			_tile_stored(2, ct, 64);
			_tile_stored(3, ct + 256, 64);
			store_scores(ct, 16, nk - 16 * kg, sc, o + (size_t)16 * ls, ls);
			store_scores(ct + 256, 16, nk - 16 * kg - 16, sc, o + (size_t)16 * ls + 16, ls);
		}
		for (; g < G; g++) {
			const char *b = (const char *)(qv + (size_t)g * S * 256);
			_tile_zero(0);
			_tile_zero(1);
			for (int st = 0; st < S; st++) {
				pf_some(pf);
				_tile_loadd(6, b + (size_t)st * 1024, 64);
				_tile_loadd(4, a0 + (size_t)st * 64, rb);
				_tile_dpbf16ps(0, 4, 6);
				if (two) {
					_tile_loadd(5, a1 + (size_t)st * 64, rb);
					_tile_dpbf16ps(1, 5, 6);
				}
			}
			_tile_stored(0, ct, 64);
			if (two)
				_tile_stored(1, ct + 256, 64);
			int rows = nr - 16 * g < 16 ? nr - 16 * g : 16;
			float *o = s + (size_t)16 * g * ls + 16 * kg;
			store_scores(ct, rows, nk - 16 * kg, sc, o, ls);
			if (two)
				store_scores(ct + 256, rows, nk - 16 * kg - 16, sc, o + 16, ls);
		}
	}
}

/* ---- values ---- */

/* Both value kernels leave each 32 columns of an out row split, [16 even | 16 odd] columns
 * (their C tiles), until mqa_amx_unsplit; alpha and the final 1 / l scale every column alike.
 * The rows of a last group of fewer than 16 use the tail tiles 2 3 7. */

/* whether a row of group g sees a key of the block: the others (zero probabilities, alpha 1)
 * keep their rows */
INLINE int group_active(const int *nvis, int nr, int g)
{
	__m512i v = _mm512_maskz_loadu_epi32(tail_mask(nr - 16 * g), nvis + 16 * g);
	return _mm512_cmpgt_epi32_mask(v, _mm512_setzero_si512()) != 0;
}

/* the C tile pair of one row group's 32 columns at `o` (rows `ldo` bytes apart): load,
 * STEPS, store */
#define C_PASS(CE, CO, STEPS)                  \
	do {                                   \
		_tile_loadd(CE, o, ldo);       \
		_tile_loadd(CO, o + 16, ldo);  \
		STEPS;                         \
		_tile_stored(CE, o, ldo);      \
		_tile_stored(CO, o + 16, ldo); \
	} while (0)

/* Up to SPLIT_MAX_G row groups: B = 16 cached rows x 32 columns as they are (pairs of
 * neighbouring columns of one key), A = the probabilities widened to (p, 0) dwords for the
 * even columns and (0, p) for the odd ones: twice the products of the packed kernel, but
 * nothing to pack (with 16 rows, faster per block than packing). */

/* one row group's A tiles: for each 16-key step s, [s][even, odd][16 rows][16 keys] dwords;
 * rounded as mqa512_prob_pairs; zero past nk */
INLINE void widen_probs(const float *s, int ls, int n, int nk, uint32_t *a)
{
	for (int m = 0; m < n; m++)
		for (int st = 0; st < (nk + 15) / 16; st++) {
			__m512 x = _mm512_maskz_loadu_ps(tail_mask(nk - 16 * st), s + (size_t)m * ls + 16 * st);
			__m512i e = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x));
			_mm512_store_si512(a + (size_t)st * 512 + 16 * m, e);
			_mm512_store_si512(a + (size_t)st * 512 + 256 + 16 * m, _mm512_slli_epi32(e, 16));
		}
}

static AMX_FN void accum_widened(float *out, int nr, int dv, const float *s, int ls, const int *nvis,
				 const uint16_t *const *vr, int nk, size_t rb, void *work, struct mqa_amx_pf *pc)
{
	int G = (nr + 15) / 16, ng = (nk + 15) / 16;
	size_t ldo = (size_t)dv * sizeof(float);
	/* value rows of each 16-key group; a short group's missing rows zeroed (a zero
	 * probability times an arbitrary word could be NaN) */
	const char *src[KBW / 16];
	group_rows(vr, nk, rb, (size_t)dv * 2, 1, work, src);
	uint32_t *at = (uint32_t *)((char *)work + (size_t)KBW * rb);
	for (int g = 0; g < G; g++)
		if (group_active(nvis, nr, g))
			widen_probs(s + (size_t)16 * g * ls, ls, nr - 16 * g < 16 ? nr - 16 * g : 16, nk,
				    at + (size_t)g * (ls / 16) * 512);
	for (int d = 0; d < dv; d += 32)
		for (int g = 0; g < G; g++) {
			if (!group_active(nvis, nr, g))
				continue;
			float *o = out + (size_t)16 * g * dv + d;
			const uint32_t *a = at + (size_t)g * (ls / 16) * 512;
			if (nr - 16 * g >= 16)
				C_PASS(
					0, 1, for (int kg = 0; kg < ng; kg++) {
						_tile_loadd(6, src[kg] + 2 * d, rb);
						_tile_loadd(4, a + kg * 512, 64);
						_tile_loadd(5, a + kg * 512 + 256, 64);
						_tile_dpbf16ps(0, 4, 6);
						_tile_dpbf16ps(1, 5, 6);
						pf_some(pc);
					});
			else
				C_PASS(
					2, 3, for (int kg = 0; kg < ng; kg++) {
						_tile_loadd(6, src[kg] + 2 * d, rb);
						_tile_loadd(7, a + kg * 512, 64);
						_tile_dpbf16ps(2, 7, 6);
						_tile_loadd(7, a + kg * 512 + 256, 64);
						_tile_dpbf16ps(3, 7, 6);
						pf_some(pc);
					});
		}
}

/* More row groups: B = the block's values interleaved by key pairs (for pair p and column c,
 * V[2p][c] and V[2p+1][c] side by side; even columns in one tile, odd in the other), built
 * per 32 columns and shared by every group; A = the probability pairs. */

static AMX_FN void accum_packed(float *out, int nr, int dv, const float *s, int ls, const int *nvis,
				const uint16_t *const *vr, int nk, uint32_t *pp, uint32_t *vb, struct mqa_amx_pf *pc)
{
	int G = (nr + 15) / 16, ks = (nk + 31) / 32;
	size_t ldo = (size_t)dv * sizeof(float);
	mqa512_prob_pairs(s, ls, nr, nk, pp);
	const __mmask32 odd = 0xAAAAAAAAu;
	for (int d = 0; d < dv; d += 32) {
		/* vb [k-step][even, odd][16 pairs][16 columns] dwords; zero past nk */
		for (int p = 0; p < 16 * ks; p++) {
			__m512i a = 2 * p < nk ? _mm512_loadu_si512(vr[2 * p] + d) : _mm512_setzero_si512();
			__m512i b = 2 * p + 1 < nk ? _mm512_loadu_si512(vr[2 * p + 1] + d) : _mm512_setzero_si512();
			uint32_t *t = vb + (size_t)(p / 16) * 512 + (p % 16) * 16;
			_mm512_store_si512(t, _mm512_mask_blend_epi16(odd, a, _mm512_slli_epi32(b, 16)));
			_mm512_store_si512(t + 256, _mm512_mask_blend_epi16(odd, _mm512_srli_epi32(a, 16), b));
		}
		for (int g = 0; g < G; g++) {
			if (!group_active(nvis, nr, g))
				continue;
			float *o = out + (size_t)16 * g * dv + d;
			const char *a = (const char *)(pp + (size_t)16 * g * (ls / 2));
			/* two whole active row groups at once (tiles 2 3 7 then have 16 rows): each value
			 * tile serves four products, the C tiles of both groups in one pass */
			if (nr % 16 == 0 && g + 1 < G && group_active(nvis, nr, g + 1)) {
				float *o1 = o + (size_t)16 * dv;
				const char *a1 = a + (size_t)16 * ls * 2;
				_tile_loadd(0, o, ldo);
				_tile_loadd(1, o + 16, ldo);
				_tile_loadd(2, o1, ldo);
				_tile_loadd(3, o1 + 16, ldo);
				for (int st = 0; st < ks; st++) {
					_tile_loadd(4, a + st * 64, ls * 2);
					_tile_loadd(5, vb + st * 512, 64);
					_tile_loadd(6, vb + st * 512 + 256, 64);
					_tile_dpbf16ps(0, 4, 5);
					_tile_dpbf16ps(1, 4, 6);
					_tile_loadd(7, a1 + st * 64, ls * 2);
					_tile_dpbf16ps(2, 7, 5);
					_tile_dpbf16ps(3, 7, 6);
					pf_some(pc);
				}
				_tile_stored(0, o, ldo);
				_tile_stored(1, o + 16, ldo);
				_tile_stored(2, o1, ldo);
				_tile_stored(3, o1 + 16, ldo);
				g++;
				continue;
			}
			if (nr - 16 * g >= 16)
				C_PASS(
					0, 1, for (int st = 0; st < ks; st++) {
						_tile_loadd(4, a + st * 64, ls * 2);
						_tile_loadd(5, vb + st * 512, 64);
						_tile_loadd(6, vb + st * 512 + 256, 64);
						_tile_dpbf16ps(0, 4, 5);
						_tile_dpbf16ps(1, 4, 6);
						pf_some(pc);
					});
			else
				C_PASS(
					2, 3, for (int st = 0; st < ks; st++) {
						_tile_loadd(7, a + st * 64, ls * 2);
						_tile_loadd(5, vb + st * 512, 64);
						_tile_loadd(6, vb + st * 512 + 256, 64);
						_tile_dpbf16ps(2, 7, 5);
						_tile_dpbf16ps(3, 7, 6);
						pf_some(pc);
					});
		}
	}
}

AMX_FN void mqa_amx_accum(float *out, int nr, int dv, const float *alpha, const float *s, int ls, const int *nvis,
			  const uint16_t *const *vr, int row, int nk, uint32_t *pp, void *work, struct mqa_amx_pf *pf)
{
	int G = (nr + 15) / 16;
	/* out *= alpha where alpha != 1: rows whose maximum grew (rows with nvis <= 0 have 1) */
	for (int i = 0; i < nr; i++) {
		if (alpha[i] == 1.0f)
			continue;
		float *o = out + (size_t)i * dv;
		__m512 a = _mm512_set1_ps(alpha[i]);
		for (int d = 0; d < dv; d += 16)
			_mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), a));
	}
	if (G <= SPLIT_MAX_G)
		accum_widened(out, nr, dv, s, ls, nvis, vr, nk, (size_t)row * 2, work, pf);
	else
		accum_packed(out, nr, dv, s, ls, nvis, vr, nk, pp, (uint32_t *)((char *)work + (size_t)KBW * row * 2),
			     pf);
}

AMX_FN void mqa_amx_unsplit(float *out, int nr, int dv)
{
	static const int32_t lo[16] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
	static const int32_t hi[16] = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
	const __m512i il = _mm512_loadu_si512(lo), ih = _mm512_loadu_si512(hi);
	for (size_t i = 0; i < (size_t)nr * dv; i += 32) {
		__m512 e = _mm512_loadu_ps(out + i), o = _mm512_loadu_ps(out + i + 16);
		_mm512_storeu_ps(out + i, _mm512_permutex2var_ps(e, il, o));
		_mm512_storeu_ps(out + i + 16, _mm512_permutex2var_ps(e, ih, o));
	}
}
