/* fp8 e4m3 → bf16 on AVX512_BF16 for the dot-product GEMM kernels (gemm_avx512.c,
 * gemm_prepacked512.c). Exact: every e4m3 value is a normal bf16 (vdpbf16ps would flush
 * denormal inputs). Normal values by integer arithmetic (the exponent rebiased from 7 to 127 is
 * an add on the shifted magnitude), the 8 subnormals (exponent field 0) from a one-register
 * table: one fast single-source permute instead of the four two-source ones of a 128-entry
 * table, which held the fp8 kernels well under the bandwidth at one token. The NaN bytes
 * 0x7f/0xff decode as ±480 (never present in checkpoints). Include from files whose functions
 * carry an AVX512_BF16 target attribute. */
#ifndef MLA_OPS_FP8_512_H
#define MLA_OPS_FP8_512_H

#include <immintrin.h>

#include "base/dtype.h"

#define FP8_512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* the subnormal magnitudes 0..7 (m x 2^-9) as bf16 bits in t[0..8), zeros after (plain C:
 * callers without an AVX-512 target keep it in memory) */
static inline void fp8_512_table_words(uint16_t t[32])
{
	for (int m = 0; m < 32; m++)
		t[m] = m < 8 ? fp8_e4m3_bf16_bits[m] : 0;
}

/* the same table in a register */
static inline FP8_512_TARGET __m512i fp8_512_table(void)
{
	uint16_t t[32];
	fp8_512_table_words(t);
	return _mm512_loadu_si512(t);
}

/* 32 e4m3 bytes (one per 16-bit lane of b) → their bf16 bits */
static inline __attribute__((always_inline)) FP8_512_TARGET __m512i fp8_512_decode(__m512i b, __m512i sub)
{
	__m512i mag = _mm512_and_si512(b, _mm512_set1_epi16(0x7f));
	__m512i v = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(120 << 7));
	__mmask32 is_sub = _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8));
	v = _mm512_mask_mov_epi16(v, is_sub, _mm512_permutexvar_epi16(mag, sub));
	return _mm512_or_si512(v, _mm512_slli_epi16(_mm512_and_si512(b, _mm512_set1_epi16(0x80)), 8));
}

/* ---- one packed fp8 step (64 bytes, ops/prepack.h) → bf16 pairs of rows 0-15 (w0) and
 * rows 16-31 (w1) ----
 * The step's bytes alternate between the two halves: byte 2q is word q of w0, byte 2q + 1
 * word q of w1. As 16-bit lanes, a step is then already both halves in order (the low byte
 * and the high byte of each lane), so no byte shuffle precedes the decode. */

/* the arithmetic decoder: each half's bytes as one 16-bit lane each (fp8_512_decode ignores
 * the lane's high byte) */
static inline __attribute__((always_inline)) FP8_512_TARGET void fp8_512_decode_step(__m512i raw, __m512i sub,
										     __m512i *w0, __m512i *w1)
{
	*w0 = fp8_512_decode(raw, sub);
	*w1 = fp8_512_decode(_mm512_srli_epi16(raw, 8), sub);
}

/* ---- the step decoder on AVX512_VBMI (every AMX CPU, Ice Lake and later, Zen 4) ----
 * The decode above costs ~10 vector operations per 32 weights; here two byte lookups on the
 * 7 magnitude bits (vpermi2b: 128-entry tables, one for the low and one for the high byte of
 * the bf16) give every value, subnormals included, the sign is or'ed into the high bytes, and
 * two shift-and-merges pair each byte's low and high halves in its lane: 7 operations per 64
 * weights, 2 of them on the shuffle port (the byte-interleaved layout this replaced needed a
 * byte permute and two unpacks there too: 5 of 6). The same bits: both decoders take their
 * values from fp8_e4m3_bf16_bits. */
#define FP8_VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi")))

/* the tables in registers */
struct fp8_vbmi {
	__m512i lo0, lo1, hi0, hi1; /* low / high byte of fp8_e4m3_bf16_bits, magnitudes 0-63, 64-127 */
};

/* the words' low and high bytes of 64 table entries from t */
static inline __attribute__((always_inline)) FP8_VBMI_TARGET __m512i fp8_vbmi_bytes(const uint16_t *t, int hi)
{
	__m512i a = _mm512_loadu_si512(t), b = _mm512_loadu_si512(t + 32);
	if (hi)
		a = _mm512_srli_epi16(a, 8), b = _mm512_srli_epi16(b, 8);
	return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(a)), _mm512_cvtepi16_epi8(b), 1);
}

static inline __attribute__((always_inline)) FP8_VBMI_TARGET void fp8_vbmi_load(struct fp8_vbmi *r)
{
	r->lo0 = fp8_vbmi_bytes(fp8_e4m3_bf16_bits, 0);
	r->lo1 = fp8_vbmi_bytes(fp8_e4m3_bf16_bits + 64, 0);
	r->hi0 = fp8_vbmi_bytes(fp8_e4m3_bf16_bits, 1);
	r->hi1 = fp8_vbmi_bytes(fp8_e4m3_bf16_bits + 64, 1);
}

static inline __attribute__((always_inline)) FP8_VBMI_TARGET void fp8_vbmi_decode(__m512i raw,
										  const struct fp8_vbmi *t,
										  __m512i *w0, __m512i *w1)
{
	__m512i lo = _mm512_permutex2var_epi8(t->lo0, raw, t->lo1); /* index bits 0-6: the sign is ignored */
	__m512i hi = _mm512_permutex2var_epi8(t->hi0, raw, t->hi1);
	hi = _mm512_ternarylogic_epi32(hi, raw, _mm512_set1_epi8((char)0x80), 0xf8); /* hi | (raw & 0x80) */
	/* w0 = lo's low bytes | hi's low bytes << 8, w1 = lo's high bytes >> 8 | hi's high bytes */
	*w0 = _mm512_ternarylogic_epi32(lo, _mm512_slli_epi16(hi, 8), _mm512_set1_epi16(0x00ff),
					0xec); /* (a & c) | b */
	*w1 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(lo, 8), hi, _mm512_set1_epi16((short)0xff00),
					0xf8); /* a | (b & c) */
}

#endif
