#include "base/dtype.h"

#include <math.h>

/* made_at_load: a weight layout of ours (packed at load), never a checkpoint tensor's dtype */
static const struct {
	const char *name;
	size_t size;
	bool made_at_load;
} dtype_info[DT_COUNT] = {
	[DT_F32] = {"F32", 4},     [DT_F16] = {"F16", 2},
	[DT_BF16] = {"BF16", 2},   [DT_F8_E4M3] = {"F8_E4M3", 1},
	[DT_I64] = {"I64", 8},     [DT_I32] = {"I32", 4},
	[DT_I8] = {"I8", 1},       [DT_F8_E8M0] = {"F8_E8M0", 1},
	[DT_U8] = {"U8", 1},       [DT_F4_E2M1] = {"F4_E2M1", 1, true},
	[DT_I4] = {"I4", 1, true},
};

size_t dtype_size(enum dtype dt) { return dtype_info[dt].size; }

const char *dtype_name(enum dtype dt) { return dtype_info[dt].name; }

int dtype_parse_flag(const char *flag, const char *s, enum dtype *out, bool *is_auto, struct err *e)
{
	*is_auto = !strcmp(s, "auto");
	if (*is_auto || !strcmp(s, "float32"))
		*out = DT_F32;
	else if (!strcmp(s, "bfloat16"))
		*out = DT_BF16;
	else
		return err_set(e, "%s: invalid value '%s' (auto, float32 or bfloat16)", flag, s);
	return 0;
}

int dtype_parse_kv_flag(const char *s, enum dtype *out, bool *is_auto, struct err *e)
{
	*is_auto = false;
	if (!strcmp(s, "fp8") || !strcmp(s, "fp8_e4m3")) {
		*out = DT_F8_E4M3;
		return 0;
	}
	if (!strcmp(s, "fp8_e5m2"))
		return err_set(e,
			       "--kv-cache-dtype fp8_e5m2: not supported; fp8 (= fp8_e4m3) keeps the latent cache in "
			       "e4m3 with per-group scales");
	if (strcmp(s, "auto") && strcmp(s, "float32") && strcmp(s, "bfloat16"))
		return err_set(e, "--kv-cache-dtype: invalid value '%s' (auto, float32, bfloat16, fp8 or fp8_e4m3)",
			       s);
	return dtype_parse_flag("--kv-cache-dtype", s, out, is_auto, e);
}

int dtype_from_name(const char *name, enum dtype *out)
{
	for (int i = 0; i < DT_COUNT; i++)
		if (!dtype_info[i].made_at_load && strcmp(dtype_info[i].name, name) == 0) {
			*out = (enum dtype)i;
			return 0;
		}
	return -1;
}

float f16_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) & 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	float v;
	if (e == 0)
		v = ldexpf((float)m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexpf((float)(m | 0x400), (int)e - 25);
	return s ? -v : v;
}

/* Generated from the e4m3fn rule (bias 7, no infinities, 0x7f/0xff NaN). */
#define E4M3(b)                                                                                 \
	(((b)&0x7f) == 0x7f        ? NAN                                                        \
	 : (((b) >> 3) & 0xf) == 0 ? (((b)&0x80) ? -1.f : 1.f) * (float)((b)&7) / 8.f / 64.f    \
				   : (((b)&0x80) ? -1.f : 1.f) * (1.f + (float)((b)&7) / 8.f) * \
					     (float)(1u << (((b) >> 3) & 0xf)) / 128.f)
#define R8(b) E4M3(b), E4M3(b + 1), E4M3(b + 2), E4M3(b + 3), E4M3(b + 4), E4M3(b + 5), E4M3(b + 6), E4M3(b + 7)
#define R64(b) R8(b), R8(b + 8), R8(b + 16), R8(b + 24), R8(b + 32), R8(b + 40), R8(b + 48), R8(b + 56)
const float fp8_e4m3_table[256] = {R64(0), R64(64), R64(128), R64(192)};

/* normal: the exponent rebiased from 7 to 127 is an add on the shifted magnitude; the 8
 * subnormals m x 2^-9: 2^-9, 2^-8 and 1.5 x 2^-8, then 2^-7 x (1 + (m - 4) / 4) */
#define E4M3_BF16(m)                                    \
	(uint16_t)((m) >= 8   ? ((m) << 4) + (120 << 7) \
		   : (m) == 0 ? 0                       \
		   : (m) == 1 ? 0x3b00                  \
		   : (m) < 4  ? 0x3b80 | (((m)&1) << 6) \
			      : 0x3c00 | (((m)&3) << 5))
#define B8(m)                                                                                                   \
	E4M3_BF16(m), E4M3_BF16(m + 1), E4M3_BF16(m + 2), E4M3_BF16(m + 3), E4M3_BF16(m + 4), E4M3_BF16(m + 5), \
		E4M3_BF16(m + 6), E4M3_BF16(m + 7)
#define B64(m) B8(m), B8(m + 8), B8(m + 16), B8(m + 24), B8(m + 32), B8(m + 40), B8(m + 48), B8(m + 56)
const uint16_t fp8_e4m3_bf16_bits[128] = {B64(0), B64(64)};
