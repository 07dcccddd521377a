/* W8A8 int8 GEMM on the packed blocks of ops/quant_int8.h, activations already quantized (qxu
 * [n][int8_cols_pad(cols)] offset by 128, sx [n][groups]). Per chunk of tokens, per 32-row
 * block, per 128-column group, per tile of tokens: the group's exact int32 dots over its
 * 4-column steps (4 KB of weights, reused from L1 by every tile), then one fma(dot, sw · sx,
 * tot) per row and token into tot [tokens][32], the same order on every level (quant_int8.h),
 * so the levels agree to the bit.
 *
 * AVX-512 VNNI: vpdpbusd multiplies the broadcast 4 offset bytes of a token by a step's 16 rows
 * x 4 signed weights and adds the 4 products into each row's int32; qsum removes the 128 offset
 * once per group. AVX-VNNI (its 256-bit VEX form, on AVX2 CPUs: Intel cores since Alder Lake,
 * Zen 5) does the same 8 rows at a time, well ahead of the AVX2 kernel. AVX2 (no VNNI): vpsignb
 * moves the activation's sign onto the weights, vpmaddubsw multiplies |qx| (unsigned) by them
 * into int16 pairs (at most 2 x 127 x 127: never saturates) and vpmaddwd by ones sums the pairs
 * into int32. Its x has a layout of its own (AVX2_X below): qx and |qx| made once per call, not
 * per block and step. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/err.h"
#include "ops/cpu.h"
#include "ops/gemm_internal.h"
#include "ops/quant_int8.h"
#include "ops/vec.h"

#define R INT8_ROWS
#define TOK_CHUNK 64 /* tokens per pass over a block: tot is 8 KB */
#define PF 2048      /* prefetch distance in the weight stream, bytes: covers DRAM latency at one or two tokens */
/* most columns of a matrix whose x the panel quantizes itself, a token at a time (V3's widest
 * GEMM input has 18432) */
#define INT8_STACK_COLS 32768

/* the step PF bytes ahead in the weight stream (a step is 128 bytes) */
static inline void prefetch_step(const int8_t *s)
{
	__asm__ volatile("prefetcht0 %0" ::"m"(*(const char *)(s + PF)));
	__asm__ volatile("prefetcht0 %0" ::"m"(*(const char *)(s + PF + 64)));
}

/* group g of block rb: its steps [q0, q1) (w: step q0's bytes) and its scales and offset sums */
struct grp {
	const int8_t *w;
	int q0, q1;
	const float *sw;   /* [32] */
	const int32_t *qs; /* [32] */
};

static struct grp group_of(const struct wmat *w, int rb, int g)
{
	int c1 = (g + 1) * INT8_GROUP < w->cols ? (g + 1) * INT8_GROUP : w->cols;
	const char *p = int8_group(w, rb, g);
	return (struct grp){(const int8_t *)(p + INT8_HDR), g * INT8_GROUP / 4, (c1 + 3) / 4, int8_scales(p),
			    int8_qsums(p)};
}

/* ---- portable ---- */
static void block_portable(struct grp gr, const uint8_t *qx, size_t ldq, const float *sx_col,
			   size_t ldsx, int nt, float *tot, int first)
{
	for (int t = 0; t < nt; t++)
		for (int i = 0; i < R; i++) {
			int32_t dot = 0;
			for (int q = gr.q0; q < gr.q1; q++)
				for (int c = 0; c < 4; c++)
					dot += (int32_t)gr.w[(size_t)(q - gr.q0) * INT8_STEP + (size_t)(4 * i + c)] *
					       ((int32_t)qx[(size_t)t * ldq + (size_t)(4 * q + c)] - 128);
			float comb = gr.sw[i] * sx_col[(size_t)t * ldsx];
			float *o = tot + (size_t)t * R + i;
			*o = fmaf((float)dot, comb, first ? 0.0f : *o);
		}
}

/* ---- AVX2, and AVX-VNNI (the 256-bit VEX vpdpbusd) ---- */
#define A2 __attribute__((target("avx2,fma")))
#define A2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))
#define TT2 2 /* tokens per AVX2 tile: 8 int32 accumulators */
#define TTV 3 /* tokens per AVX-VNNI tile: 12 accumulators */

/* acc += the u8 x s8 products of a and b, 4 per lane (inline asm, as dpbusd's for AVX-512;
 * only run where ops_cpu_has_avx_vnni) */
A2_INLINE __m256i dpbusd256(__m256i acc, __m256i a, __m256i b)
{
	__asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
	return acc;
}

/* the int32 sums acc[t][h] (rows 8h..8h+7) of nt tokens, less the offset sums where sub_qs, into tot */
A2_INLINE void finish_avx2(struct grp gr, __m256i acc[][4], const float *sx_col, size_t ldsx, float *tot,
			   int first, int sub_qs, const int nt)
{
#pragma GCC unroll 3
	for (int t = 0; t < nt; t++) {
		__m256 sxv = _mm256_set1_ps(sx_col[(size_t)t * ldsx]);
#pragma GCC unroll 4
		for (int h = 0; h < 4; h++) {
			__m256i d = acc[t][h];
			if (sub_qs)
				d = _mm256_sub_epi32(d, _mm256_loadu_si256((const __m256i *)(const void *)(gr.qs + 8 * h)));
			__m256 comb = _mm256_mul_ps(_mm256_loadu_ps(gr.sw + 8 * h), sxv);
			float *o = tot + (size_t)t * R + 8 * h;
			__m256 prev = first ? _mm256_setzero_ps() : _mm256_loadu_ps(o);
			_mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), comb, prev));
		}
	}
}

/* AVX-VNNI: the offset activations (qxu rows ldq apart) times the weights by vpdpbusd, qsum
 * removed at the end. Three tokens: 12 independent sums keep both pipes busy through vpdpbusd's
 * latency; the weights sit in registers, as memory operands of each vpdpbusd ran slower. */
A2_INLINE void tile_vnni_t(struct grp gr, const uint8_t *qx, size_t ldq, const float *sx_col, size_t ldsx,
			   float *tot, int first, int stream, const int nt)
{
	__m256i acc[TTV][4];
#pragma GCC unroll 3
	for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
		for (int h = 0; h < 4; h++)
			acc[t][h] = _mm256_setzero_si256();
	for (int q = gr.q0; q < gr.q1; q++) {
		const int8_t *s = gr.w + (size_t)(q - gr.q0) * INT8_STEP;
		if (stream)
			prefetch_step(s);
		__m256i xb[TTV];
#pragma GCC unroll 3
		for (int t = 0; t < nt; t++) {
			int32_t b;
			memcpy(&b, qx + (size_t)t * ldq + 4 * (size_t)q, 4);
			xb[t] = _mm256_set1_epi32(b);
		}
#pragma GCC unroll 4
		for (int h = 0; h < 4; h++) {
			__m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(s + 32 * h));
#pragma GCC unroll 3
			for (int t = 0; t < nt; t++)
				acc[t][h] = dpbusd256(acc[t][h], xb[t], w);
		}
	}
	finish_avx2(gr, acc, sx_col, ldsx, tot, first, 1, nt);
}

static A2 void block_vnni(struct grp gr, const uint8_t *qx, size_t ldq, const float *sx_col,
			  size_t ldsx, int n, float *tot, int first)
{
	for (int t0 = 0; t0 < n; t0 += TTV) {
		const uint8_t *q = qx + (size_t)t0 * ldq;
		const float *s = sx_col + (size_t)t0 * ldsx;
		float *o = tot + (size_t)t0 * R;
		if (n - t0 >= 3)
			tile_vnni_t(gr, q, ldq, s, ldsx, o, first, t0 == 0, 3);
		else if (n - t0 == 2)
			tile_vnni_t(gr, q, ldq, s, ldsx, o, first, t0 == 0, 2);
		else
			tile_vnni_t(gr, q, ldq, s, ldsx, o, first, t0 == 0, 1);
	}
}

/* AVX2 without VNNI. Its x layout, AVX2_X: tokens in chunks of TOK_CHUNK; a chunk of n tokens
 * is G runs (one per column group) of n x AVX2_X_TOK bytes, token after token, each token's
 * run its group's steps of 8 bytes: the step's 4 qx (signed), then their 4 |qx|. So the
 * tiles of a group read one contiguous run (a qxu row per token, 128 bytes every ldq, stalled
 * the kernel on those loads), and the kernel does not make qx and |qx| again for every block
 * (2 of its 18 vector operations per step and token). */
#define AVX2_X_TOK (INT8_GROUP / 4 * 8)

/* tokens 0 and 1 of a tile, one step: 32 multiply-adds per operation pair. Inline asm: with
 * intrinsics GCC kept 3-4 of the 8 sums on the stack (all 16 ymm registers are in use). */
A2_INLINE void step2_avx2(const int8_t *s, const uint8_t *x, __m256i ones, __m256i acc[TT2][4])
{
	__m256i xs0, xa0, xs1, xa1, w, t0, t1;
#define H(off, a0, a1)                                  \
	"vmovdqu " off "(%[s]), %[w]\n\t"                  \
	"vpsignb %[xs0], %[w], %[t0]\n\t"                  \
	"vpsignb %[xs1], %[w], %[t1]\n\t"                  \
	"vpmaddubsw %[t0], %[xa0], %[t0]\n\t"              \
	"vpmaddubsw %[t1], %[xa1], %[t1]\n\t"              \
	"vpmaddwd %[ones], %[t0], %[t0]\n\t"               \
	"vpmaddwd %[ones], %[t1], %[t1]\n\t"               \
	"vpaddd %[t0], %[" a0 "], %[" a0 "]\n\t"           \
	"vpaddd %[t1], %[" a1 "], %[" a1 "]\n\t"
	__asm__("vpbroadcastd (%[x]), %[xs0]\n\t"
		"vpbroadcastd 4(%[x]), %[xa0]\n\t"
		"vpbroadcastd %c[tok](%[x]), %[xs1]\n\t"
		"vpbroadcastd %c[tok4](%[x]), %[xa1]\n\t"
		H("0", "a00", "a10") H("32", "a01", "a11") H("64", "a02", "a12") H("96", "a03", "a13")
		: [a00] "+x"(acc[0][0]), [a01] "+x"(acc[0][1]), [a02] "+x"(acc[0][2]), [a03] "+x"(acc[0][3]),
		  [a10] "+x"(acc[1][0]), [a11] "+x"(acc[1][1]), [a12] "+x"(acc[1][2]), [a13] "+x"(acc[1][3]),
		  [xs0] "=&x"(xs0), [xa0] "=&x"(xa0), [xs1] "=&x"(xs1), [xa1] "=&x"(xa1), [w] "=&x"(w), [t0] "=&x"(t0),
		  [t1] "=&x"(t1)
		: [x] "r"(x), [s] "r"(s), [ones] "x"(ones), [tok] "i"(AVX2_X_TOK), [tok4] "i"(AVX2_X_TOK + 4),
		  "m"(*(const char(*)[INT8_STEP])s), "m"(*(const char(*)[AVX2_X_TOK + 8])x));
#undef H
}

/* nt tokens of AVX2_X (xt: the first one's run in this group) */
A2_INLINE void tile_avx2_t(struct grp gr, const uint8_t *xt, const float *sx_col, size_t ldsx, float *tot,
			   int first, int stream, const int nt)
{
	__m256i acc[TT2][4];
	const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 2
	for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
		for (int h = 0; h < 4; h++)
			acc[t][h] = _mm256_setzero_si256();
	for (int q = gr.q0; q < gr.q1; q++) {
		const int8_t *s = gr.w + (size_t)(q - gr.q0) * INT8_STEP;
		const uint8_t *x = xt + 8 * (size_t)(q - gr.q0);
		if (stream)
			prefetch_step(s);
		if (nt == 2) {
			step2_avx2(s, x, ones, acc);
			continue;
		}
		int32_t b, a;
		memcpy(&b, x, 4);
		memcpy(&a, x + 4, 4);
		__m256i xs = _mm256_set1_epi32(b), xa = _mm256_set1_epi32(a);
#pragma GCC unroll 4
		for (int h = 0; h < 4; h++) {
			__m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(s + 32 * h));
			acc[0][h] = _mm256_add_epi32(acc[0][h],
						     _mm256_madd_epi16(_mm256_maddubs_epi16(xa, _mm256_sign_epi8(w, xs)), ones));
		}
	}
	finish_avx2(gr, acc, sx_col, ldsx, tot, first, 0, nt);
}

/* the n tokens of a chunk on group gr (x: the group's run of AVX2_X) */
static A2 void block_avx2(struct grp gr, const uint8_t *x, const float *sx_col, size_t ldsx, int n, float *tot,
			  int first)
{
	for (int t0 = 0; t0 < n; t0 += TT2) {
		const uint8_t *xt = x + (size_t)t0 * AVX2_X_TOK;
		const float *s = sx_col + (size_t)t0 * ldsx;
		if (n - t0 >= 2)
			tile_avx2_t(gr, xt, s, ldsx, tot + (size_t)t0 * R, first, t0 == 0, 2);
		else
			tile_avx2_t(gr, xt, s, ldsx, tot + (size_t)t0 * R, first, t0 == 0, 1);
	}
}

/* one group of one token, qxu [int8_cols_pad(cols)] (cols <= INT8_GROUP), into its AVX2_X run */
static A2 void to_avx2_x(const uint8_t *qxu, int cols, uint8_t *o)
{
	const __m128i flip = _mm_set1_epi8((char)0x80);
	int steps = int8_cols_pad(cols) / 4, k = 0;
	for (; k + 4 <= steps; k += 4) {
		__m128i v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)(qxu + 4 * k)), flip);
		__m128i a = _mm_abs_epi8(v);
		_mm_storeu_si128((__m128i *)(void *)(o + 8 * k), _mm_unpacklo_epi32(v, a));
		_mm_storeu_si128((__m128i *)(void *)(o + 8 * k + 16), _mm_unpackhi_epi32(v, a));
	}
	for (; k < steps; k++)
		for (int c = 0; c < 4; c++) {
			int v = (int)qxu[4 * k + c] - 128;
			o[8 * k + c] = (uint8_t)(int8_t)v;
			o[8 * k + 4 + c] = (uint8_t)(v < 0 ? -v : v);
		}
}

/* ---- AVX-512 VNNI ---- */
#define A5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define A5_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define TT5 6 /* tokens per tile: 12 int32 accumulators */

/* acc += the u8 x s8 products of a and b, 4 per lane: the intrinsic made GCC copy each
 * accumulator to another register and back around every instruction */
A5_INLINE __m512i dpbusd(__m512i acc, __m512i a, __m512i b)
{
	__asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
	return acc;
}

A5_INLINE void tile_512_t(struct grp gr, const uint8_t *qx, size_t ldq, const float *sx_col,
			  size_t ldsx, float *tot, int first, int stream, const int nt)
{
	__m512i acc[TT5][2];
#pragma GCC unroll 6
	for (int t = 0; t < nt; t++)
		acc[t][0] = acc[t][1] = _mm512_setzero_si512();
	for (int q = gr.q0; q < gr.q1; q++) {
		const int8_t *s = gr.w + (size_t)(q - gr.q0) * INT8_STEP;
		if (stream)
			prefetch_step(s);
		__m512i w0 = _mm512_loadu_si512((const void *)s), w1 = _mm512_loadu_si512((const void *)(s + 64));
#pragma GCC unroll 6
		for (int t = 0; t < nt; t++) {
			int32_t b;
			memcpy(&b, qx + (size_t)t * ldq + 4 * (size_t)q, 4);
			__m512i xb = _mm512_set1_epi32(b);
			acc[t][0] = dpbusd(acc[t][0], xb, w0);
			acc[t][1] = dpbusd(acc[t][1], xb, w1);
		}
	}
	__m512i qs0 = _mm512_loadu_si512((const void *)gr.qs), qs1 = _mm512_loadu_si512((const void *)(gr.qs + 16));
	__m512 sw0 = _mm512_loadu_ps(gr.sw), sw1 = _mm512_loadu_ps(gr.sw + 16);
#pragma GCC unroll 6
	for (int t = 0; t < nt; t++) {
		__m512 sxv = _mm512_set1_ps(sx_col[(size_t)t * ldsx]);
		float *o = tot + (size_t)t * R;
		__m512 p0 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o);
		__m512 p1 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o + 16);
		_mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[t][0], qs0)),
						    _mm512_mul_ps(sw0, sxv), p0));
		_mm512_storeu_ps(o + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[t][1], qs1)),
							 _mm512_mul_ps(sw1, sxv), p1));
	}
}

/* One token on NB blocks at once (block i bb bytes past block 0, its group too): two chains per block, or
 * for one block four (its halves x even and odd steps; int32 sums are exact in any order), and
 * NB streams in flight: at one token the chains' latency, not memory, bounded one block. */
A5_INLINE void gemv_512_t(size_t bb, struct grp gr, const uint8_t *qx, float sxv,
			  float *tot, int first, const int NB)
{
	__m512i a[2][2], b[2][2];
#pragma GCC unroll 2
	for (int i = 0; i < NB; i++)
		a[i][0] = a[i][1] = b[i][0] = b[i][1] = _mm512_setzero_si512();
	int q = gr.q0;
	for (; q + 2 <= gr.q1; q += 2) {
		int32_t x0, x1;
		memcpy(&x0, qx + 4 * (size_t)q, 4);
		memcpy(&x1, qx + 4 * (size_t)q + 4, 4);
		__m512i xb0 = _mm512_set1_epi32(x0), xb1 = _mm512_set1_epi32(x1);
#pragma GCC unroll 2
		for (int i = 0; i < NB; i++) {
			const int8_t *s = gr.w + i * bb + (size_t)(q - gr.q0) * INT8_STEP;
			__asm__ volatile("prefetcht0 %0" ::"m"(*(const char *)(s + PF)));
			__asm__ volatile("prefetcht0 %0" ::"m"(*(const char *)(s + PF + 64)));
			__asm__ volatile("prefetcht0 %0" ::"m"(*(const char *)(s + PF + 128)));
			__asm__ volatile("prefetcht0 %0" ::"m"(*(const char *)(s + PF + 192)));
			a[i][0] = dpbusd(a[i][0], xb0, _mm512_loadu_si512((const void *)s));
			a[i][1] = dpbusd(a[i][1], xb0, _mm512_loadu_si512((const void *)(s + 64)));
			b[i][0] = dpbusd(b[i][0], xb1, _mm512_loadu_si512((const void *)(s + 128)));
			b[i][1] = dpbusd(b[i][1], xb1, _mm512_loadu_si512((const void *)(s + 192)));
		}
	}
	if (q < gr.q1) {
		int32_t x0;
		memcpy(&x0, qx + 4 * (size_t)q, 4);
		__m512i xb0 = _mm512_set1_epi32(x0);
#pragma GCC unroll 2
		for (int i = 0; i < NB; i++) {
			const int8_t *s = gr.w + i * bb + (size_t)(q - gr.q0) * INT8_STEP;
			a[i][0] = dpbusd(a[i][0], xb0, _mm512_loadu_si512((const void *)s));
			a[i][1] = dpbusd(a[i][1], xb0, _mm512_loadu_si512((const void *)(s + 64)));
		}
	}
	__m512 sv = _mm512_set1_ps(sxv);
#pragma GCC unroll 2
	for (int i = 0; i < NB; i++)
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			const char *hdr = (const char *)gr.sw + i * bb; /* block i's scales, then its sums */
			__m512i d = _mm512_sub_epi32(_mm512_add_epi32(a[i][h], b[i][h]),
						     _mm512_loadu_si512((const void *)(hdr + 128 + 64 * h)));
			float *o = tot + i * R + 16 * h;
			__m512 p = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o);
			_mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(d),
							    _mm512_mul_ps(_mm512_loadu_ps((const float *)(const void *)(hdr + 64 * h)),
									  sv),
							    p));
		}
}

/* one token, two blocks (the second bb bytes past the first, its group too; tot [2][32]) */
static A5 void gemv2_512(size_t bb, struct grp gr, const uint8_t *qx, float sxv,
			 float *tot, int first)
{
	gemv_512_t(bb, gr, qx, sxv, tot, first, 2);
}

static A5 void block_512(struct grp gr, const uint8_t *qx, size_t ldq, const float *sx_col,
			 size_t ldsx, int n, float *tot, int first)
{
	if (n == 1) {
		gemv_512_t(0, gr, qx, sx_col[0], tot, first, 1);
		return;
	}
	for (int t0 = 0; t0 < n; t0 += TT5) {
		int nt = n - t0 < TT5 ? n - t0 : TT5;
		const uint8_t *q = qx + (size_t)t0 * ldq;
		const float *s = sx_col + (size_t)t0 * ldsx;
		float *o = tot + (size_t)t0 * R;
		int st = t0 == 0; /* the first tile streams the group in, the others find it in L1 */
#define T5(N) tile_512_t(gr, q, ldq, s, ldsx, o, first, st, N)
		switch (nt) {
		case 1: T5(1); break;
		case 2: T5(2); break;
		case 3: T5(3); break;
		case 4: T5(4); break;
		case 5: T5(5); break;
		default: T5(6); break;
		}
#undef T5
	}
}

/* ---- driver ---- */

/* y[0, n) = (add ? y : 0) + v (no branch per row: it dominated the kernel's time), then
 * rounded to bf16 when the job asks (gemm_job.round_bf16) while the rows are in L1 */
static void store_rows(float *restrict y, const float *restrict v, int n, int add, int round)
{
	if (!add)
		memcpy(y, v, sizeof(float) * (size_t)n);
	else
		for (int i = 0; i < n; i++)
			y[i] += v[i];
	if (round)
		ops_round_bf16(y, n);
}
static int has_vnni(void)
{
	static int v = -1;
	if (v < 0) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx512vnni") ? 1 : 0;
	}
	return v;
}

int gemm_int8_kernel(enum ops_level lvl)
{
	if (lvl >= OPS_AVX512 && has_vnni())
		return 2;
	if (lvl >= OPS_AVX2 && ops_cpu_has_avx_vnni())
		return 3;
	return lvl >= OPS_AVX2 ? 1 : 0;
}

const char *gemm_int8_kernel_name(enum ops_level lvl)
{
	static const char *names[] = {"portable", "AVX2", "AVX-512 VNNI", "AVX-VNNI"};
	return names[gemm_int8_kernel(lvl)];
}

size_t gemm_int8_x_bytes(enum ops_level lvl, int n, int cols)
{
	if (gemm_int8_kernel(lvl) == 1)
		return (size_t)n * (size_t)int8_groups(cols) * AVX2_X_TOK;
	return (size_t)n * (size_t)int8_cols_pad(cols);
}

void gemm_int8_quant_x(enum ops_level lvl, const float *x, int cols, int n, int t, uint8_t *qx, float *sx)
{
	if (gemm_int8_kernel(lvl) != 1) {
		quant_int8_row(x, cols, qx + (size_t)t * (size_t)int8_cols_pad(cols), sx);
		return;
	}
	int G = int8_groups(cols), c0 = t / TOK_CHUNK * TOK_CHUNK, nc = n - c0 < TOK_CHUNK ? n - c0 : TOK_CHUNK;
	uint8_t *o = qx + ((size_t)c0 * (size_t)G + (size_t)(t - c0)) * AVX2_X_TOK;
	uint8_t qg[INT8_GROUP];
	for (int g = 0; g < G; g++) { /* a group at a time: its scale and bytes are those of the whole row's */
		int a = g * INT8_GROUP, b = a + INT8_GROUP < cols ? a + INT8_GROUP : cols;
		quant_int8_row(x + a, b - a, qg, sx + g);
		to_avx2_x(qg, b - a, o + (size_t)g * (size_t)nc * AVX2_X_TOK);
	}
}

int gemm_panel_int8(enum ops_level lvl, const struct gemm_job *j, const uint8_t *qx, const float *sx, int r0, int r1)
{
	const struct wmat *w = j->w;
	CHECK(w->dtype == DT_I8 && r0 % R == 0);
	int G = int8_groups(w->cols), kern = gemm_int8_kernel(lvl);
	size_t ldq = (size_t)int8_cols_pad(w->cols), ldsx = (size_t)G;
	if (!qx) { /* the caller had no memory for the call's quantized x: a token at a time, on the stack */
		CHECK(w->cols <= INT8_STACK_COLS);
		_Alignas(64) uint8_t q1[INT8_STACK_COLS / INT8_GROUP * AVX2_X_TOK];
		float s1[INT8_STACK_COLS / INT8_GROUP];
		struct gemm_job j1 = *j;
		j1.n = 1;
		for (int t = 0; t < j->n; t++, j1.x += j->ldx, j1.y += j->ldy) {
			gemm_int8_quant_x(lvl, j1.x, w->cols, 1, 0, q1, s1);
			gemm_panel_int8(lvl, &j1, q1, s1, r0, r1);
		}
		return 1;
	}
	_Alignas(64) float tot[TOK_CHUNK * R];
	int rb = r0;
	if (kern == 2 && j->n == 1) /* two blocks at a time */
		for (; rb + 2 * R <= r1; rb += 2 * R) {
			int b = rb / R;
			for (int g = 0; g < G; g++)
				gemv2_512(int8_block_bytes(w->cols), group_of(w, b, g), qx, sx[g],
					  tot, g == 0);
			if (!G)
				memset(tot, 0, sizeof(float) * 2 * R);
			store_rows(j->y + rb, tot, 2 * R, j->accumulate, j->round_bf16);
		}
	/* token chunks outside the blocks: a chunk's rows of y are written a panel's width at a time
	 * (with the blocks outside, each 128-byte store went to another token's row, 4 KB-aliased),
	 * while the panel's weights (64 rows) stay in L2 across the chunks */
	int rb0 = rb;
	for (int t0 = 0; t0 < j->n; t0 += TOK_CHUNK) {
		int n = j->n - t0 < TOK_CHUNK ? j->n - t0 : TOK_CHUNK;
		const uint8_t *q = qx + (size_t)t0 * ldq;
		const uint8_t *xc = qx + (size_t)t0 * (size_t)G * AVX2_X_TOK; /* AVX2_X: the chunk's runs */
		for (rb = rb0; rb < r1; rb += R) {
			int nr = r1 - rb < R ? r1 - rb : R, b = rb / R;
			if (!G) /* no columns: every sum is 0 */
				memset(tot, 0, sizeof tot);
			for (int g = 0; g < G; g++) {
				struct grp gr = group_of(w, b, g);
				const float *s = sx + (size_t)t0 * ldsx + (size_t)g;
				if (kern == 2)
					block_512(gr, q, ldq, s, ldsx, n, tot, g == 0);
				else if (kern == 3)
					block_vnni(gr, q, ldq, s, ldsx, n, tot, g == 0);
				else if (kern == 1)
					block_avx2(gr, xc + (size_t)g * (size_t)n * AVX2_X_TOK, s, ldsx, n, tot, g == 0);
				else
					block_portable(gr, q, ldq, s, ldsx, n, tot, g == 0);
			}
			for (int t = 0; t < n; t++)
				store_rows(j->y + (size_t)(t0 + t) * (size_t)j->ldy + rb, tot + (size_t)t * R, nr,
					   j->accumulate, j->round_bf16);
		}
	}
	return 1;
}
