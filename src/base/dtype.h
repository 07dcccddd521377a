/* Element types of checkpoint tensors, weights and the KV cache, with scalar conversions. */
#ifndef MLA_BASE_DTYPE_H
#define MLA_BASE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"

/* DT_I8: int8 weights of --quantization int8 (ops/quant_int8.h), and a checkpoint's I8 tensors
 * (V4's FP4 experts: e2m1 pairs as bytes); DT_F8_E8M0: scale bytes 2^(e - 127) (MXFP4's);
 * DT_F4_E2M1: a weight of e2m1 pairs, two per byte (ops/wf_fp4.c), never a checkpoint's dtype;
 * DT_I4: int4 weights in groups of 32 (ops/quant_int4.h), made at load */
enum dtype { DT_F32, DT_F16, DT_BF16, DT_F8_E4M3, DT_I64, DT_I32, DT_I8, DT_F8_E8M0, DT_U8, DT_F4_E2M1,
	     DT_I4, DT_COUNT };

size_t dtype_size(enum dtype dt);
const char *dtype_name(enum dtype dt);                  /* safetensors spelling: "BF16" ... */
int dtype_from_name(const char *name, enum dtype *out); /* 0 ok, -1 unknown */
/* The value of a dtype flag (--dtype, --kv-cache-dtype): "float32" (DT_F32), "bfloat16"
 * (DT_BF16) or "auto" (*is_auto, *out DT_F32: the caller resolves it); flag names it in e. */
int dtype_parse_flag(const char *flag, const char *s, enum dtype *out, bool *is_auto, struct err *e);
/* --kv-cache-dtype: dtype_parse_flag's values, and "fp8" / "fp8_e4m3" (DT_F8_E4M3: the latent
 * cache in e4m3 with scales); "fp8_e5m2" is refused in one line. */
int dtype_parse_kv_flag(const char *s, enum dtype *out, bool *is_auto, struct err *e);

static inline float bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* Round to nearest even; NaN stays NaN. */
static inline uint16_t f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

float f16_to_f32(uint16_t h);
extern const float fp8_e4m3_table[256]; /* e4m3fn decoding, 0x7f/0xff = NaN */
/* bf16 bits of each e4m3 magnitude (the low 7 bits of a byte; every e4m3 value is a normal
 * bf16), as the vector decoders give them: 0x7f, a NaN, as 480 */
extern const uint16_t fp8_e4m3_bf16_bits[128];
static inline float fp8_e4m3_to_f32(uint8_t b) { return fp8_e4m3_table[b]; }
/* The nearest e4m3fn value (ties to an even mantissa), saturating at ±448; NaN -> 0x7f. */
static inline uint8_t f32_to_fp8_e4m3(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint8_t sign = (uint8_t)((u >> 24) & 0x80);
	uint32_t a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return sign | 0x7f;
	if (a > 0x43e80000u) /* above 464, the midpoint of 448 and 480 (not a value): saturate */
		return sign | 0x7e;
	if (a < 0x3c800000u) { /* below 2^-6: subnormals m x 2^-9, by the float's own rounding */
		float m = f < 0 ? -f * 512.0f : f * 512.0f; /* exact; m + 2^23 rounds it to nearest even */
		float r = (m + 8388608.0f) - 8388608.0f;    /* m = 8 is 2^-6, encoded 0x08 */
		return sign | (uint8_t)r;
	}
	/* round the fp32 mantissa to 3 bits, nearest even; a carry moves into the exponent */
	uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1)) & ~0xfffffu;
	return sign | (uint8_t)((((r >> 23) - 120) << 3) | ((r >> 20) & 7));
}

#endif
