/* The 8-bit latent cache row: encoding (the scale rule of kv_fp8.h) and decoding at each kernel
 * level. Every level gives the same values: code * scale is one fp32 product of exact factors. */
#include "attn/kernels/kv_fp8.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/dtype.h"

int kv_fp8_layout_init(struct kv_fp8_layout *l, int nope, int rope, bool rope_bf16, struct err *e)
{
	memset(l, 0, sizeof *l);
	int g = nope < 128 ? nope : 128;
	if (nope <= 0 || rope < 0 || nope % g || nope / g >= KV_FP8_MAX_SCALES ||
	    nope + 3 * rope + 256 > KV_FP8_MAX_ROW_BYTES)
		return err_set(e, "kv cache fp8: the latent width %d is not a multiple of its scale group %d", nope,
			       g);
	l->nope = nope;
	l->rope = rope;
	l->group = g;
	l->rope_bf16 = rope_bf16;
	if (rope_bf16) {
		l->n_scales = nope / g;
		l->scale_off = nope;
		l->rope_off = nope + 4 * l->n_scales;
		l->row_bytes = l->rope_off + 2 * rope;
	} else {
		l->n_scales = nope / g + (rope > 0);
		l->rope_off = nope;
		l->scale_off = nope + rope;
		l->row_bytes = l->scale_off + 4 * l->n_scales;
	}
	return 0;
}

/* codes of n values under one scale: s = max(amax / 448, FLT_MIN), code = e4m3(x / s) */
static float encode_group(const float *x, int n, uint8_t *codes)
{
	float amax = 0;
	for (int i = 0; i < n; i++)
		amax = fmaxf(amax, fabsf(x[i]));
	float s = fmaxf(amax / 448.0f, FLT_MIN);
	for (int i = 0; i < n; i++)
		codes[i] = f32_to_fp8_e4m3(x[i] / s);
	return s;
}

static float *row_scales(const struct kv_fp8_layout *l, uint8_t *row) { return (float *)(row + l->scale_off); }

void kv_fp8_encode(const struct kv_fp8_layout *l, const float *kv_c, const float *k_pe, uint8_t *row)
{
	float sc[KV_FP8_MAX_SCALES];
	int ng = l->nope / l->group;
	for (int g = 0; g < ng; g++)
		sc[g] = encode_group(kv_c + g * l->group, l->group, row + g * l->group);
	if (l->rope_bf16) {
		uint16_t *r = (uint16_t *)(row + l->rope_off);
		for (int i = 0; i < l->rope; i++)
			r[i] = f32_to_bf16(k_pe[i]);
	} else if (l->rope > 0) {
		sc[ng] = encode_group(k_pe, l->rope, row + l->rope_off);
	}
	memcpy(row_scales(l, row), sc, sizeof(float) * (size_t)l->n_scales);
}

float kv_fp8_value(const struct kv_fp8_layout *l, const uint8_t *row, int k)
{
	float s;
	if (k < l->nope) {
		memcpy(&s, row + l->scale_off + 4 * (k / l->group), 4);
		return fp8_e4m3_table[row[k]] * s;
	}
	k -= l->nope;
	if (l->rope_bf16) {
		uint16_t h;
		memcpy(&h, row + l->rope_off + 2 * k, 2);
		return bf16_to_f32(h);
	}
	memcpy(&s, row + l->scale_off + 4 * (l->n_scales - 1), 4);
	return fp8_e4m3_table[row[l->rope_off + k]] * s;
}

/* ---- decoding n codes under scale s into fp32 ---- */

static void codes_portable(const uint8_t *c, int n, float s, float *dst)
{
	for (int i = 0; i < n; i++)
		dst[i] = fp8_e4m3_table[c[i]] * s;
}

/* e4m3 → fp32 through fp16: a code's bits shifted into an fp16's (the byte sign-extended and
 * shifted left by 7 puts exponent and mantissa at bits 7-13 and the sign at 14-15; bit 14 cleared) are an fp16 of value code * 2^-8, subnormal codes included, which the
 * hardware converts to fp32 exactly; the 2^8 joins the scale (s * 256 is exact, and the product
 * (code * 2^-8) * (s * 2^8) rounds as code * s does). 0x7f (NaN, never written: the encoder
 * saturates) gives 480. */
#define AVX2 __attribute__((target("avx2,fma,f16c")))
AVX2 static void codes_avx2(const uint8_t *c, int n, float s, float *dst)
{
	const __m256 vs = _mm256_set1_ps(s * 256.0f);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m128i b = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(c + i)));
		__m128i h = _mm_and_si128(_mm_slli_epi16(b, 7), _mm_set1_epi16((short)0xbf80));
		_mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(h), vs));
	}
	codes_portable(c + i, n - i, s, dst + i);
}

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
/* 32 codes as fp16 bits (code * 2^-8) in 16-bit lanes, in order */
AVX512 static inline __m512i fp16_of_codes(const uint8_t *c)
{
	__m512i b = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)c));
	return _mm512_and_si512(_mm512_slli_epi16(b, 7), _mm512_set1_epi16((short)0xbf80));
}

AVX512 static void codes_avx512(const uint8_t *c, int n, float s, float *dst)
{
	const __m512 vs = _mm512_set1_ps(s * 256.0f);
	int i = 0;
	for (; i + 32 <= n; i += 32) {
		__m512i h = fp16_of_codes(c + i);
		_mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), vs));
		_mm512_storeu_ps(dst + i + 16, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), vs));
	}
	codes_portable(c + i, n - i, s, dst + i);
}

#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
/* through fp32, for any scale: bf16(code * s) */
AVX512BF16 static void codes_bf16_512_any(const uint8_t *c, int n, float s, uint16_t *dst)
{
	const __m512 vs = _mm512_set1_ps(s * 256.0f);
	int i = 0;
	for (; i + 32 <= n; i += 32) {
		__m512i h = fp16_of_codes(c + i);
		__m512 lo = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), vs);
		__m512 hi = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), vs);
		_mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
	}
	for (; i < n; i++)
		dst[i] = f32_to_bf16(fp8_e4m3_table[c[i]] * s);
}

/* The same bits by table, where every product stays a normal float (2^-116 <= s <= 2^100):
 * scaling by a power of two commutes with both roundings (fp32, then bf16), so a normal code
 * (exponent e >= 1, mantissa m) gives bf16(1.m * s) with e - 7 added to its exponent field, and
 * a subnormal one (e = 0) bf16(m 2^-9 * s): 16 products per group instead of one per value.
 * A code's low 5 bits (m, e mod 4) pick from a 32-word table holding bf16(1.m * s) + (e mod 4
 * - 7) << 7; (e & 12) << 7 and the sign are added from the code's shifted bits; subnormal
 * codes then take their own 8 words. (0x7f, never written, gives 480 s as the fp32 path.) */
AVX512BF16 static void codes_bf16_512(const uint8_t *c, int n, float s, uint16_t *dst)
{
	if (!(s >= 0x1p-116f && s <= 0x1p100f) || n % 32) {
		codes_bf16_512_any(c, n, s, dst);
		return;
	}
	/* 1.m for m = 0..7, then m 2^-9 */
	const __m512 f = _mm512_setr_ps(1.0f, 1.125f, 1.25f, 1.375f, 1.5f, 1.625f, 1.75f, 1.875f, 0, 0x1p-9f, 0x2p-9f,
					0x3p-9f, 0x4p-9f, 0x5p-9f, 0x6p-9f, 0x7p-9f);
	__m256i b = (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(f, _mm512_set1_ps(s)));
	/* word 8k + m: bf16(1.m * s) + (k - 7) << 7, k = e mod 4 */
	static const int16_t exp_off[32] = {-896, -896, -896, -896, -896, -896, -896, -896, -768, -768, -768,
					    -768, -768, -768, -768, -768, -640, -640, -640, -640, -640, -640,
					    -640, -640, -512, -512, -512, -512, -512, -512, -512, -512};
	const __m512i off = _mm512_loadu_si512(exp_off);
	const __m512i norm = _mm512_add_epi16(_mm512_broadcast_i32x4(_mm256_castsi256_si128(b)), off);
	const __m512i sub = _mm512_castsi256_si512(_mm256_permute2x128_si256(b, b, 0x11));
	const __m512i hi_bits = _mm512_set1_epi16((short)0x8600), e_bits = _mm512_set1_epi16(0x78);
	for (int i = 0; i < n; i += 32) {
		/* the sign-extended code: bits 0-2 m, 3-6 e, 7-15 the sign */
		__m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(c + i)));
		__m512i r = _mm512_permutexvar_epi16(w, norm);
		r = _mm512_mask_permutexvar_epi16(r, _mm512_testn_epi16_mask(w, e_bits), w, sub);
		/* (w << 4) & 0x8600: the sign at bit 15, e & 12 at bits 9-10 (no carry: the field
		 * stays within 1..254 for these scales) */
		r = _mm512_add_epi16(r, _mm512_and_si512(_mm512_slli_epi16(w, 4), hi_bits));
		_mm512_storeu_si512(dst + i, r);
	}
}

static void codes_at(const uint8_t *c, int n, float s, float *dst, enum ops_level level)
{
	if (level >= OPS_AVX512)
		codes_avx512(c, n, s, dst);
	else if (level >= OPS_AVX2)
		codes_avx2(c, n, s, dst);
	else
		codes_portable(c, n, s, dst);
}

void kv_fp8_decode_f32(const struct kv_fp8_layout *l, const uint8_t *row, float *dst, enum ops_level level)
{
	float sc[KV_FP8_MAX_SCALES];
	memcpy(sc, row + l->scale_off, sizeof(float) * (size_t)l->n_scales);
	int ng = l->nope / l->group;
	for (int g = 0; g < ng; g++)
		codes_at(row + g * l->group, l->group, sc[g], dst + g * l->group, level);
	if (l->rope_bf16) {
		const uint16_t *r = (const uint16_t *)(row + l->rope_off);
		for (int i = 0; i < l->rope; i++)
			dst[l->nope + i] = bf16_to_f32(r[i]);
	} else if (l->rope > 0) {
		codes_at(row + l->rope_off, l->rope, sc[ng], dst + l->nope, level);
	}
}

void kv_fp8_decode_bf16_part(const struct kv_fp8_layout *l, const uint8_t *row, int part, uint16_t *dst,
			     enum ops_level level)
{
	int ng = l->nope / l->group;
	const uint8_t *c = part < ng ? row + part * l->group : row + l->rope_off;
	int n = part < ng ? l->group : l->rope;
	uint16_t *d = dst + part * l->group;
	if (part == ng && l->rope_bf16) {
		memcpy(d, c, sizeof(uint16_t) * (size_t)n);
		return;
	}
	float s;
	memcpy(&s, row + l->scale_off + 4 * part, 4);
	if (level >= OPS_AVX512_BF16) {
		codes_bf16_512(c, n, s, d);
		return;
	}
	for (int i = 0; i < n; i++)
		d[i] = f32_to_bf16(fp8_e4m3_table[c[i]] * s);
}

void kv_fp8_decode_bf16(const struct kv_fp8_layout *l, const uint8_t *row, uint16_t *dst, enum ops_level level)
{
	for (int p = 0; p < kv_fp8_parts(l); p++)
		kv_fp8_decode_bf16_part(l, row, p, dst, level);
}
