/* Element types of checkpoint tensors, weights and the KV cache, with scalar conversions. */
#ifndef MLA_BASE_DTYPE_H
#define MLA_BASE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum dtype { DT_F32, DT_F16, DT_BF16, DT_F8_E4M3, DT_I64, DT_I32, DT_COUNT };

size_t dtype_size(enum dtype dt);
const char *dtype_name(enum dtype dt);                 /* safetensors spelling: "BF16" ... */
int dtype_from_name(const char *name, enum dtype *out); /* 0 ok, -1 unknown */

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

#endif
