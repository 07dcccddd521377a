/* int4 GEMM on the blocks of ops/quant_int4.h, reading the packed nibbles and scales only.
 * Per chunk of tokens, per 32-row block, per 32-column group, per tile of tokens: the group's
 * dots over its 8 chunks (576 bytes with the bf16 scales, reused from L1 by every tile), then one
 * fma per row and token into tot [tokens][32].
 *
 * W4A8 (x quantized per token and 128 columns, quant_int4_x): a chunk's `v & 15` and
 * `v >> 4 & 15` are two steps of 4 columns of unsigned u = q + 8, multiplied by 4 broadcast
 * signed activation bytes; the dot is Σ u qx - 8 Σ qx (-8 Σ qx made with x: the sums start
 * from it, no subtraction per group and token). AVX-512 VNNI and
 * AVX-VNNI: vpdpbusd (u8 weights x s8 activations) into int32 per row. AVX2: vpmaddubsw into
 * int16 pairs, which add up within a group without saturating (quant_int4.h), and one
 * vpmaddwd by ones per group. Every level sums the same exact int32 and combines it the same
 * way (quant_int4.h), so they agree to the bit. The amx level runs the AVX-512 VNNI kernel (the
 * group's 32x32 int8 product is one tdpbusd, but the per-group scales would have each tile's
 * result leave the tile registers every 32 columns).
 *
 * W4A16 (bf16-exact x, from the AVX512_BF16 level: the values stay those of the checkpoint's
 * W4A16 numerics): vpermw looks each nibble's bf16 (u - 8) up in a 16-entry table (duplicated
 * so bit 4 of the index, the next nibble's, is ignored), in four 16-bit shifts of the chunk:
 * column pairs (0,2) (4,6) (1,3) (5,7) of 16 rows, which vdpbf16ps multiplies by the matching
 * pairs of x (stored in that order, quant_int4_x_bf16); products exact, fp32 sums; y += dot x
 * sw per group. At the amx level from AMX_MIN_TOKENS tokens those decoded pairs are B tiles
 * for tdpbf16ps (blk_amx). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/err.h"
#include "ops/amx.h"
#include "ops/cpu.h"
#include "ops/gemm_internal.h"
#include "ops/quant_int4.h"
#include "ops/quant_int8.h"
#include "ops/vec.h"

#define R INT4_ROWS
#define TOK_CHUNK 64     /* tokens per pass over a block: tot is 8 KB */
#define STACK_COLS 32768 /* most columns when the panel prepares x itself, a token at a time */
#define PF_GROUPS 4      /* prefetch distance, groups */

/* a call's activations as the kernels read them: token t0's, at group g */
struct xa {
	const int8_t *qx;   /* W4A8: token t's at qx + t ld */
	const float *sx;    /* its scales per 128 columns at sx + t ldsx */
	const int32_t *sum; /* its -8 Σ qx per group at sum + t lds */
	const uint16_t *xb; /* W4A16: token t's at xb + t ld */
	size_t ld, ldsx, lds;
};

/* group g's successor PF_GROUPS ahead, into L1 (a block's groups are one stream) */
static inline void prefetch_ahead(const char *grp, int g, int G)
{
	if (g + PF_GROUPS < G)
		for (int l = 0; l < INT4_GROUP_BYTES; l += 64)
			__builtin_prefetch(grp + PF_GROUPS * INT4_GROUP_BYTES + l);
}

/* ---- portable (W4A8) ---- */
static void grp_portable(const char *grp, const struct xa *a, int g, int nt, float *tot, int first)
{
	for (int t = 0; t < nt; t++)
		for (int i = 0; i < R; i++) {
			int32_t dot = a->sum[(size_t)t * a->lds + (size_t)g];
			for (int c = 0; c < INT4_GROUP; c++) {
				uint8_t b = (uint8_t)grp[int4_byte(i, c)];
				dot += (int32_t)(int4_high(c) ? b >> 4 : b & 15) *
				       a->qx[(size_t)t * a->ld + (size_t)(g * INT4_GROUP + c)];
			}
			float comb = int4_scale(grp, i) * a->sx[(size_t)t * a->ldsx + (size_t)(g / 4)];
			float *o = tot + (size_t)t * R + i;
			*o = fmaf((float)dot, comb, first ? 0.0f : *o);
		}
}

/* the G groups of a block (blk: its first), n tokens, into tot [n][32] */
static void blk_portable(const char *blk, const struct xa *a, int G, int nt, float *tot)
{
	for (int g = 0; g < G; g++) {
		const char *grp = blk + (size_t)g * INT4_GROUP_BYTES;
		grp_portable(grp, a, g, nt, tot, g == 0);
	}
}


/* ---- AVX2 and AVX-VNNI (W4A8) ---- */
#define A2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))
#define A2 __attribute__((target("avx2,fma")))
#define TT2 2 /* tokens per tile: 8 accumulators of 16 */

/* the group's scales of rows r..r + 7, bf16 widened to fp32 */
A2_INLINE __m256 scales8(const char *grp, int r)
{
	__m128i h = _mm_loadu_si128((const __m128i *)(const void *)(grp + 2 * r));
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

A2_INLINE __m256i dpbusd256(__m256i acc, __m256i u, __m256i s)
{
	__asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
	return acc;
}

/* nt tokens on one group by quarters of 8 rows: quarter q is the ymm half q % 2 of chunk
 * 2 p + q / 2 (rows 16 (q / 2) + 8 (q % 2)..); vnni: vpdpbusd, else vpmaddubsw into int16
 * (exact within a group) */
A2_INLINE void tile_avx2_t(const char *grp, const struct xa *a, int g, float *tot, int first, const int nt,
			   const int vnni)
{
	__m256i acc[TT2][4];
	const __m256i m = _mm256_set1_epi8(15);
#pragma GCC unroll 2
	for (int t = 0; t < nt; t++) { /* vnni: from -8 Σ qx; the int16 sums from 0 (it is added after) */
		__m256i s0 = vnni ? _mm256_set1_epi32(a->sum[(size_t)t * a->lds + (size_t)g]) : _mm256_setzero_si256();
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			acc[t][q] = s0;
	}
	const char *ch = grp + INT4_HDR;
#pragma GCC unroll 1
	for (int p = 0; p < 4; p++) {
		__m256i xl[TT2], xh[TT2];
#pragma GCC unroll 2
		for (int t = 0; t < nt; t++) {
			int32_t lo, hi;
			const int8_t *x = a->qx + (size_t)t * a->ld + (size_t)(g * INT4_GROUP + 8 * p);
			memcpy(&lo, x, 4);
			memcpy(&hi, x + 4, 4);
			xl[t] = _mm256_set1_epi32(lo);
			xh[t] = _mm256_set1_epi32(hi);
		}
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++) { /* chunk 2p + q/2, its half q%2 */
			__m256i v = _mm256_loadu_si256(
				(const __m256i *)(const void *)(ch + (2 * p + q / 2) * INT4_CHUNK + 32 * (q % 2)));
			__m256i ul = _mm256_and_si256(v, m), uh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
#pragma GCC unroll 2
			for (int t = 0; t < nt; t++)
				if (vnni) {
					acc[t][q] = dpbusd256(acc[t][q], ul, xl[t]);
					acc[t][q] = dpbusd256(acc[t][q], uh, xh[t]);
				} else {
					acc[t][q] = _mm256_add_epi16(acc[t][q], _mm256_maddubs_epi16(ul, xl[t]));
					acc[t][q] = _mm256_add_epi16(acc[t][q], _mm256_maddubs_epi16(uh, xh[t]));
				}
		}
	}
	const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 2
	for (int t = 0; t < nt; t++) {
		__m256 sxv = _mm256_set1_ps(a->sx[(size_t)t * a->ldsx + (size_t)(g / 4)]);
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++) { /* quarter q: rows 16 (q / 2) + 8 (q % 2) .. */
			int r = 16 * (q / 2) + 8 * (q % 2);
			__m256i d = acc[t][q];
			if (!vnni)
				d = _mm256_add_epi32(_mm256_madd_epi16(d, ones),
						     _mm256_set1_epi32(a->sum[(size_t)t * a->lds + (size_t)g]));
			__m256 comb = _mm256_mul_ps(scales8(grp, r), sxv);
			float *o = tot + (size_t)t * R + r;
			__m256 prev = first ? _mm256_setzero_ps() : _mm256_loadu_ps(o);
			_mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), comb, prev));
		}
	}
}

/* the G groups of a block, each by tiles of n tokens (vnni: AVX-VNNI, else AVX2) */
A2_INLINE void blk_avx2_any(const char *blk, const struct xa *a, int G, int n, float *tot, const int vnni)
{
	for (int g = 0; g < G; g++) {
		const char *grp = blk + (size_t)g * INT4_GROUP_BYTES;
		prefetch_ahead(grp, g, G);
		struct xa at = *a;
		for (int t0 = 0; t0 < n;
		     t0 += TT2, at.qx += TT2 * a->ld, at.sx += TT2 * a->ldsx, at.sum += TT2 * a->lds)
			if (n - t0 >= 2)
				tile_avx2_t(grp, &at, g, tot + (size_t)t0 * R, g == 0, 2, vnni);
			else
				tile_avx2_t(grp, &at, g, tot + (size_t)t0 * R, g == 0, 1, vnni);
	}
}

static A2 void blk_avx2(const char *blk, const struct xa *a, int G, int n, float *tot)
{
	blk_avx2_any(blk, a, G, n, tot, 0);
}

static A2 void blk_vnni(const char *blk, const struct xa *a, int G, int n, float *tot)
{
	blk_avx2_any(blk, a, G, n, tot, 1);
}

/* ---- AVX-512 VNNI (W4A8) ---- */
#define A5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define A5_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define TT5 6 /* tokens per tile: 12 accumulators */

/* the group's scales of rows 16 h..16 h + 15, bf16 widened to fp32 (every AVX-512 kernel's) */
static inline __attribute__((always_inline, target("avx512f"))) __m512 scales16(const char *grp, int h)
{
	__m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(grp + 32 * h));
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
}

A5_INLINE __m512i dpbusd512(__m512i acc, __m512i u, __m512i s)
{
	__asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
	return acc;
}

/* acc[t][h][k]: token t, rows 16 h.., chain k (one token: the high nibbles' steps in chains of
 * their own, so that vpdpbusd's latency does not bound it) */
A5_INLINE void tile_512_t(const char *grp, const struct xa *a, int g, float *tot, int first, const int nt)
{
	const int K = nt == 1 ? 2 : 1;
	__m512i acc[TT5][2][2];
	const __m512i m = _mm512_set1_epi8(15);
#pragma GCC unroll 6
	for (int t = 0; t < nt; t++) { /* from -8 Σ qx */
		acc[t][0][0] = acc[t][1][0] = _mm512_set1_epi32(a->sum[(size_t)t * a->lds + (size_t)g]);
		acc[t][0][K - 1] = acc[t][1][K - 1] = K == 2 ? _mm512_setzero_si512() : acc[t][0][0];
	}
	const char *ch = grp + INT4_HDR;
#pragma GCC unroll 4
	for (int p = 0; p < 4; p++) {
		__m512i v0 = _mm512_loadu_si512((const void *)(ch + 2 * p * INT4_CHUNK));
		__m512i v1 = _mm512_loadu_si512((const void *)(ch + (2 * p + 1) * INT4_CHUNK));
		__m512i l0 = _mm512_and_si512(v0, m), h0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m);
		__m512i l1 = _mm512_and_si512(v1, m), h1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m);
#pragma GCC unroll 6
		for (int t = 0; t < nt; t++) {
			int32_t lo, hi;
			const int8_t *x = a->qx + (size_t)t * a->ld + (size_t)(g * INT4_GROUP + 8 * p);
			memcpy(&lo, x, 4);
			memcpy(&hi, x + 4, 4);
			__m512i xl = _mm512_set1_epi32(lo), xh = _mm512_set1_epi32(hi);
			acc[t][0][0] = dpbusd512(acc[t][0][0], l0, xl);
			acc[t][1][0] = dpbusd512(acc[t][1][0], l1, xl);
			acc[t][0][K - 1] = dpbusd512(acc[t][0][K - 1], h0, xh);
			acc[t][1][K - 1] = dpbusd512(acc[t][1][K - 1], h1, xh);
		}
	}
	__m512 sw0 = scales16(grp, 0), sw1 = scales16(grp, 1);
#pragma GCC unroll 6
	for (int t = 0; t < nt; t++) {
		if (K == 2) /* exact in any order */
			acc[t][0][0] = _mm512_add_epi32(acc[t][0][0], acc[t][0][1]),
			acc[t][1][0] = _mm512_add_epi32(acc[t][1][0], acc[t][1][1]);
		__m512 sxv = _mm512_set1_ps(a->sx[(size_t)t * a->ldsx + (size_t)(g / 4)]);
		float *o = tot + (size_t)t * R;
		__m512 p0 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o);
		__m512 p1 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o + 16);
		_mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t][0][0]), _mm512_mul_ps(sw0, sxv), p0));
		_mm512_storeu_ps(o + 16,
				 _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t][1][0]), _mm512_mul_ps(sw1, sxv), p1));
	}
}

static A5 void blk_512(const char *blk, const struct xa *a, int G, int n, float *tot)
{
	for (int g = 0; g < G; g++) {
		const char *grp = blk + (size_t)g * INT4_GROUP_BYTES;
		prefetch_ahead(grp, g, G);
		if (n == 1) { /* decode: the tile inline, no switch */
			tile_512_t(grp, a, g, tot, g == 0, 1);
			continue;
		}
		struct xa at = *a;
		for (int t0 = 0; t0 < n;
		     t0 += TT5, at.qx += TT5 * a->ld, at.sx += TT5 * a->ldsx, at.sum += TT5 * a->lds) {
			float *o = tot + (size_t)t0 * R;
			switch (n - t0 < TT5 ? n - t0 : TT5) {
			case 1: tile_512_t(grp, &at, g, o, g == 0, 1); break;
			case 2: tile_512_t(grp, &at, g, o, g == 0, 2); break;
			case 3: tile_512_t(grp, &at, g, o, g == 0, 3); break;
			case 4: tile_512_t(grp, &at, g, o, g == 0, 4); break;
			case 5: tile_512_t(grp, &at, g, o, g == 0, 5); break;
			default: tile_512_t(grp, &at, g, o, g == 0, 6); break;
			}
		}
	}
}

/* ---- W4A16: AVX512_BF16 ---- */
#define B5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define B5_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define TTB 4 /* tokens per tile: 16 accumulators (two per half: even and odd column pairs) */

/* bf16 of u - 8 for u = index & 15: -8 .. 7, twice (vpermw reads 5 bits of each index) */
#define BF16_Q                                                                                                  \
	0xc100, 0xc0e0, 0xc0c0, 0xc0a0, 0xc080, 0xc040, 0xc000, 0xbf80, 0x0000, 0x3f80, 0x4000, 0x4040, 0x4080, \
		0x40a0, 0x40c0, 0x40e0
static _Alignas(64) const uint16_t bf16_table[32] = {BF16_Q, BF16_Q};

B5_INLINE __m512 dpbf16(__m512 acc, __m512i w, const uint16_t *x2)
{
	int32_t b;
	memcpy(&b, x2, 4);
	return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)_mm512_set1_epi32(b));
}

B5_INLINE void tile_bf16_t(const char *grp, const struct xa *a, int g, __m512i tab, float *tot, int first,
			   const int nt)
{
	__m512 acc[TTB][2][2];
#pragma GCC unroll 4
	for (int t = 0; t < nt; t++)
		acc[t][0][0] = acc[t][0][1] = acc[t][1][0] = acc[t][1][1] = _mm512_setzero_ps();
	const char *ch = grp + INT4_HDR;
#pragma GCC unroll 4
	for (int p = 0; p < 4; p++)
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			__m512i v = _mm512_loadu_si512((const void *)(ch + (2 * p + h) * INT4_CHUNK));
			__m512i d0 = _mm512_permutexvar_epi16(v, tab);                        /* columns 0, 2 */
			__m512i d1 = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 4), tab);  /* 4, 6 */
			__m512i d2 = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 8), tab);  /* 1, 3 */
			__m512i d3 = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 12), tab); /* 5, 7 */
#pragma GCC unroll 4
			for (int t = 0; t < nt; t++) {
				const uint16_t *x = a->xb + (size_t)t * a->ld + (size_t)(g * INT4_GROUP + 8 * p);
				acc[t][h][0] = dpbf16(acc[t][h][0], d0, x);
				acc[t][h][1] = dpbf16(acc[t][h][1], d1, x + 2);
				acc[t][h][0] = dpbf16(acc[t][h][0], d2, x + 4);
				acc[t][h][1] = dpbf16(acc[t][h][1], d3, x + 6);
			}
		}
	__m512 sw0 = scales16(grp, 0), sw1 = scales16(grp, 1);
#pragma GCC unroll 4
	for (int t = 0; t < nt; t++) {
		float *o = tot + (size_t)t * R;
		__m512 p0 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o);
		__m512 p1 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o + 16);
		_mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_add_ps(acc[t][0][0], acc[t][0][1]), sw0, p0));
		_mm512_storeu_ps(o + 16, _mm512_fmadd_ps(_mm512_add_ps(acc[t][1][0], acc[t][1][1]), sw1, p1));
	}
}

static B5 void blk_bf16(const char *blk, const struct xa *a, int G, int n, float *tot)
{
	__m512i tab = _mm512_loadu_si512((const void *)bf16_table);
	for (int g = 0; g < G; g++) {
		const char *grp = blk + (size_t)g * INT4_GROUP_BYTES;
		prefetch_ahead(grp, g, G);
		if (n == 1) {
			tile_bf16_t(grp, a, g, tab, tot, g == 0, 1);
			continue;
		}
		struct xa at = *a;
		for (int t0 = 0; t0 < n; t0 += TTB, at.xb += TTB * a->ld) {
			float *o = tot + (size_t)t0 * R;
			switch (n - t0 < TTB ? n - t0 : TTB) {
			case 1: tile_bf16_t(grp, &at, g, tab, o, g == 0, 1); break;
			case 2: tile_bf16_t(grp, &at, g, tab, o, g == 0, 2); break;
			case 3: tile_bf16_t(grp, &at, g, tab, o, g == 0, 3); break;
			default: tile_bf16_t(grp, &at, g, tab, o, g == 0, 4); break;
			}
		}
	}
}

/* ---- W4A16 on AMX tiles (the amx level, from AMX_MIN_TOKENS tokens) ----
 * Per group and 16 tokens: the group's 8 chunks decoded as above are its two B tiles (16 pairs
 * x 16 rows each: row 4 p + k of half h is chunk (p, h)'s decoded pairs k, in x's order), the
 * tokens' 32 columns one A tile straight from x; one tdpbf16ps per half, its C tile through
 * L1 into tot with the group's scales. */
#define AMX_FN __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
#define AMX_MIN_TOKENS 2 /* below, the dp kernel: the tile path costs as much for 1 token as for 16 */

static AMX_FN void blk_amx(const char *blk, const struct xa *a, int G, int n, float *tot)
{
	_Alignas(64) uint16_t bt[2][16 * 32]; /* the two B tiles */
	_Alignas(64) float ct[2][16 * 16];    /* the two C tiles */
	__m512i tab = _mm512_loadu_si512((const void *)bf16_table);
	for (int t0 = 0; t0 < n; t0 += 16) {
		int m = n - t0 < 16 ? n - t0 : 16;
		uint8_t rows[8] = {(uint8_t)m, (uint8_t)m, (uint8_t)m, 16, 16, 16, 16, 16}; /* C0 C1 A B0 B1 */
		amx_tiles_config(rows);
		const uint16_t *x = a->xb + (size_t)t0 * a->ld;
		for (int g = 0; g < G; g++) {
			const char *grp = blk + (size_t)g * INT4_GROUP_BYTES;
			prefetch_ahead(grp, g, G);
#pragma GCC unroll 2
			for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
				for (int p = 0; p < 4; p++) {
					__m512i v = _mm512_loadu_si512(
						(const void *)(grp + INT4_HDR + (2 * p + h) * INT4_CHUNK));
					uint16_t *o = bt[h] + 4 * p * 32;
					_mm512_store_si512((void *)o, _mm512_permutexvar_epi16(v, tab));
					_mm512_store_si512((void *)(o + 32),
							   _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 4), tab));
					_mm512_store_si512((void *)(o + 64),
							   _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 8), tab));
					_mm512_store_si512((void *)(o + 96),
							   _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 12), tab));
				}
			_tile_zero(0);
			_tile_zero(1);
			_tile_loadd(2, x + (size_t)g * INT4_GROUP, 2 * a->ld);
			_tile_loadd(3, bt[0], 64);
			_tile_loadd(4, bt[1], 64);
			_tile_dpbf16ps(0, 2, 3);
			_tile_dpbf16ps(1, 2, 4);
			_tile_stored(0, ct[0], 64);
			_tile_stored(1, ct[1], 64);
			__m512 sw0 = scales16(grp, 0), sw1 = scales16(grp, 1);
			for (int t = 0; t < m; t++) {
				float *o = tot + (size_t)(t0 + t) * R;
				__m512 p0 = g == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(o);
				__m512 p1 = g == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(o + 16);
				_mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_load_ps(ct[0] + 16 * t), sw0, p0));
				_mm512_storeu_ps(o + 16, _mm512_fmadd_ps(_mm512_load_ps(ct[1] + 16 * t), sw1, p1));
			}
		}
	}
	_tile_release();
}

/* ---- driver ---- */
/* the G groups of a block (blk: its first) for n tokens into tot [n][32] */
typedef void (*blk_fn)(const char *blk, const struct xa *a, int G, int n, float *tot);

int gemm_int4_w16(enum ops_level lvl, const struct gemm_job *j) { return lvl >= OPS_AVX512_BF16 && j->x_bf16; }

/* W4A8 kernels by gemm_int8_kernel's number (the same CPU features) */
static blk_fn kernel_of(enum ops_level lvl, int w16, int n)
{
	if (w16)
		return lvl >= OPS_AMX && n >= AMX_MIN_TOKENS ? blk_amx : blk_bf16;
	static const blk_fn k[] = {blk_portable, blk_avx2, blk_512, blk_vnni};
	return k[gemm_int8_kernel(lvl)];
}

const char *gemm_int4_kernel_name(enum ops_level lvl)
{
	static const char *names[] = {"W4A8 portable", "W4A8 AVX2", "W4A8 AVX-512 VNNI", "W4A8 AVX-VNNI"};
	if (lvl >= OPS_AMX)
		return "W4A16 AMX tiles (bf16 activations; vdpbf16ps at 1 token), else W4A8 AVX-512 VNNI";
	if (lvl >= OPS_AVX512_BF16)
		return gemm_int8_kernel(lvl) == 2 ? "W4A16 vdpbf16ps (bf16 activations), else W4A8 AVX-512 VNNI"
						  : "W4A16 vdpbf16ps (bf16 activations), else W4A8 AVX2";
	return names[gemm_int8_kernel(lvl)];
}

/* the act buffer: per token a record of its W4A8 qx [ld], sx [int8 groups], sums [groups] (so
 * that a job sharing another's x finds its tokens where they are, whatever its n), or its
 * W4A16 xb [ld] */
static size_t rec_bytes(int cols)
{
	return (size_t)int4_x_ld(cols) + 4 * (size_t)int8_groups(cols) + 4 * (size_t)int4_groups(cols);
}

static struct xa xa_of(const void *buf, int w16, int cols)
{
	size_t ld = (size_t)int4_x_ld(cols), rec = rec_bytes(cols);
	const char *b = buf;
	if (w16)
		return (struct xa){.xb = buf, .ld = ld};
	return (struct xa){.qx = buf,
			   .sx = (const float *)(const void *)(b + ld),
			   .sum = (const int32_t *)(const void *)(b + ld + 4 * (size_t)int8_groups(cols)),
			   .ld = rec,
			   .ldsx = rec / 4,
			   .lds = rec / 4};
}

size_t gemm_int4_act_bytes(int w16, int n, int cols)
{
	return (size_t)n * (w16 ? 2 * (size_t)int4_x_ld(cols) : rec_bytes(cols));
}

void gemm_int4_act_fill(int w16, const struct gemm_job *j, int t0, int t1, void *buf)
{
	int cols = j->w->cols;
	struct xa a = xa_of(buf, w16, cols);
	for (int t = t0; t < t1; t++) {
		const float *x = j->x + (size_t)t * (size_t)j->ldx;
		if (w16)
			quant_int4_x_bf16(x, cols, (uint16_t *)a.xb + (size_t)t * a.ld);
		else
			quant_int4_x(x, cols, (int8_t *)a.qx + (size_t)t * a.ld, (float *)a.sx + (size_t)t * a.ldsx,
				     (int32_t *)a.sum + (size_t)t * a.lds);
	}
}

/* y[0, n) = (add ? y : 0) + v, then rounded to bf16 when the job asks */
static void store_rows(float *y, const float *v, int n, int add, int round)
{
	if (add)
		ops_axpy(y, 1.0f, v, n); /* exactly y + v */
	else
		memcpy(y, v, sizeof(float) * (size_t)n);
	if (round)
		ops_round_bf16(y, n);
}

int gemm_panel_int4(enum ops_level lvl, const struct gemm_job *j, const void *act, int r0, int r1)
{
	const struct wmat *w = j->w;
	CHECK(w->dtype == DT_I4 && r0 % R == 0);
	int G = int4_groups(w->cols), w16 = gemm_int4_w16(lvl, j);
	if (!act) { /* the caller had no memory for the call's x: a token at a time, on the stack */
		CHECK(w->cols <= STACK_COLS);
		_Alignas(64) char b1[2 * STACK_COLS];
		struct gemm_job j1 = *j;
		j1.n = 1;
		for (int t = 0; t < j->n; t++, j1.x += j->ldx, j1.y += j->ldy) {
			gemm_int4_act_fill(w16, &j1, 0, 1, b1);
			gemm_panel_int4(lvl, &j1, b1, r0, r1);
		}
		return 1;
	}
	struct xa a = xa_of(act, w16, w->cols);
	_Alignas(64) float tot[TOK_CHUNK * R];
	for (int t0 = 0; t0 < j->n; t0 += TOK_CHUNK) {
		int n = j->n - t0 < TOK_CHUNK ? j->n - t0 : TOK_CHUNK;
		blk_fn fn = kernel_of(lvl, w16, n);
		struct xa at = a;
		if (w16)
			at.xb += (size_t)t0 * a.ld;
		else
			at.qx += (size_t)t0 * a.ld, at.sx += (size_t)t0 * a.ldsx, at.sum += (size_t)t0 * a.lds;
		for (int rb = r0; rb < r1; rb += R) {
			int nr = r1 - rb < R ? r1 - rb : R;
			if (!G) /* no columns: every sum is 0 */
				memset(tot, 0, sizeof tot);
			fn(int4_group(w, rb / R, 0), &at, G, n, tot);
			for (int t = 0; t < n; t++)
				store_rows(j->y + (size_t)(t0 + t) * (size_t)j->ldy + rb, tot + (size_t)t * R, nr,
					   j->accumulate, j->round_bf16);
		}
	}
	return 1;
}
