/* v4_ix_amx.h. Scores as Sᵀ = K·Qᵀ, as attn/kernels/mqa_amx.c does: an A tile is 16 keys x 32
 * dims decoded to bf16 (a key's codes through a 16-float table, times its block's scale), the B
 * tiles are the query heads packed once a call (mqa_amx_pack_q), and C tile g holds 16 keys x
 * heads 16g .. 16g + 15. Tiles (palette 1, all 16 x 64 bytes): 0-3 C (four head groups a pass),
 * 4 A, 5-7 B. A key costs 4 tdpbf16ps per 64 heads (di 128), ~1 / 16 of the fp32 FMAs' time. */
#include "model_v4/v4_ix_amx.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "attn/kernels/mqa_amx.h"
#include "model_v4/fp4.h"
#include "ops/amx.h"

#define AMX_FN __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define KB 16 /* keys of a tile */
#define PF 2  /* tiles ahead whose keys are prefetched */

static int bf16_exact(const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t b;
		memcpy(&b, &x[i], sizeof b);
		if (b & 0xFFFF)
			return 0;
	}
	return 1;
}

static float e8m0_f32(uint8_t e) /* fp4_e8m0_to_f32 without the libm call */
{
	uint32_t b = e == 0xFF ? 0x7FC00000u : e ? (uint32_t)e << 23 : 0x00400000u;
	float f;
	memcpy(&f, &b, sizeof f);
	return f;
}

/* key row `codes` (di / 2 e2m1 bytes, then di / 32 e8m0) -> dst [di] bf16 */
AMX_FN static void decode_key(const uint8_t *codes, int di, __m512 lut, uint16_t *dst)
{
	const uint8_t *exps = codes + di / 2;
	const __m128i low4 = _mm_set1_epi8(0x0F);
	for (int b = 0; b < di / 32; b++) {
		__m128i x = _mm_loadu_si128((const __m128i *)(codes + 16 * b));
		__m128i lo = _mm_and_si128(x, low4), hi = _mm_and_si128(_mm_srli_epi16(x, 4), low4);
		__m512 sc = _mm512_set1_ps(e8m0_f32(exps[b]));
		__m512 f0 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), lut),
					  sc);
		__m512 f1 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi)), lut),
					  sc);
		_mm512_storeu_si512(dst + 32 * b, (__m512i)_mm512_cvtne2ps_pbh(f1, f0)); /* dims 0-15 low */
	}
}

/* C tiles 0 .. ng - 1 += A (keys, tile 4) x B (head groups g0 .., step st) over the di / 32 steps */
AMX_FN static void tile_pass(const uint16_t *kb, int di, const uint32_t *qv, int g0, int ng)
{
	int S = di / 32;
	const uint32_t *b0 = qv + (size_t)g0 * (size_t)S * 256;
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	for (int st = 0; st < S; st++) {
		_tile_loadd(4, kb + (size_t)st * 32, di * 2);
		_tile_loadd(5, b0 + (size_t)st * 256, 64);
		_tile_dpbf16ps(0, 4, 5);
		if (ng > 1) {
			_tile_loadd(6, b0 + ((size_t)S + st) * 256, 64);
			_tile_dpbf16ps(1, 4, 6);
		}
		if (ng > 2) {
			_tile_loadd(7, b0 + (2 * (size_t)S + st) * 256, 64);
			_tile_dpbf16ps(2, 4, 7);
		}
		if (ng > 3) {
			_tile_loadd(5, b0 + (3 * (size_t)S + st) * 256, 64);
			_tile_dpbf16ps(3, 4, 5);
		}
	}
}

AMX_FN int v4k_ix_amx_scores(int H, int di, const float *q, const float *w, const struct v4k_keys *k, long e0, long e1,
			     double *s)
{
	int G = (H + 15) / 16;
	if (di <= 0 || di % 32 || di > V4K_MAX_DI || (size_t)G * 16 * (size_t)di > V4_IX_AMX_QMAX ||
	    !bf16_exact(q, (size_t)H * (size_t)di))
		return -1;
	uint32_t qv[V4_IX_AMX_QMAX / 2] __attribute__((aligned(64)));
	uint16_t kb[KB * V4K_MAX_DI] __attribute__((aligned(64)));
	float c[4][KB * 16] __attribute__((aligned(64)));
	double wd[V4_IX_AMX_QMAX / 32] = {0}; /* w, 0 past H (G 16 <= QMAX / di heads) */
	for (int h = 0; h < H; h++)
		wd[h] = w[h];
	float lutf[16];
	for (int i = 0; i < 16; i++)
		lutf[i] = fp4_e2m1_to_f32((uint8_t)i);
	const __m512 lut = _mm512_loadu_ps(lutf), zero = _mm512_setzero_ps();
	int key_bytes = di / 2 + di / 32;
	mqa_amx_pack_q(qv, q, H, di);
	uint8_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
	amx_tiles_config(rows);
	for (long e = e0; e < e1; e += KB) {
		int n = e1 - e < KB ? (int)(e1 - e) : KB;
		/* the tile after next: the pool's blocks lie anywhere, beyond the hardware's prefetch */
		for (long f = e + PF * KB; f < e + (PF + 1) * KB && f < e1; f++)
			for (int o = 0; o < key_bytes; o += 64)
				_mm_prefetch((const char *)k->rows[f] + o, _MM_HINT_T0);
		for (int j = 0; j < n; j++)
			decode_key((const uint8_t *)k->rows[e + j], di, lut, kb + (size_t)j * (size_t)di);
		if (n < KB)
			memset(kb + (size_t)n * (size_t)di, 0, sizeof(uint16_t) * (size_t)(KB - n) * (size_t)di);
		__m512d acc[KB][2];
		memset(acc, 0, sizeof acc);
		for (int g0 = 0; g0 < G; g0 += 4) {
			int ng = G - g0 < 4 ? G - g0 : 4;
			tile_pass(kb, di, qv, g0, ng);
			_tile_stored(0, c[0], 64);
			_tile_stored(1, c[1], 64);
			_tile_stored(2, c[2], 64);
			_tile_stored(3, c[3], 64);
			for (int g = 0; g < ng; g++) { /* acc[j] += w_h relu(q_h . k_j), lanes by head */
				__m512d wl = _mm512_loadu_pd(wd + 16 * (g0 + g)),
					wh = _mm512_loadu_pd(wd + 16 * (g0 + g) + 8);
				for (int j = 0; j < n; j++) {
					__m512 r = _mm512_max_ps(_mm512_load_ps(c[g] + 16 * j), zero);
					acc[j][0] = _mm512_fmadd_pd(wl, _mm512_cvtps_pd(_mm512_castps512_ps256(r)),
								    acc[j][0]);
					acc[j][1] = _mm512_fmadd_pd(
						wh,
						_mm512_cvtps_pd(_mm256_castpd_ps(
							_mm512_extractf64x4_pd(_mm512_castps_pd(r), 1))),
						acc[j][1]);
				}
			}
		}
		for (int j = 0; j < n; j++)
			s[e - e0 + j] = _mm512_reduce_add_pd(_mm512_add_pd(acc[j][0], acc[j][1]));
	}
	_tile_release();
	return 0;
}
