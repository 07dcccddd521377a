/* DeepSeek-V4's activation rule (kernel.py act_quant, scale_fmt ue8m0) as activations a GEMM
 * call prepares once (ops/wformat.h's struct wact): each token's x, per 128 columns from its
 * first, rounded to e4m3 under a power-of-two scale
 *   s = 2^ceil(log2(fp32(max(amax, 1e-4)) * fp32(1/448))),  x = e4m3_rne(clamp(x / s, ±448)) * s
 * (model_v4/v4_quant.h's v4_fp8_sim with block 128, the oracle of the tests). Every rounded
 * value is an e4m3 one times a power of two, so exact in bf16 and fp32: the kernels then run
 * on it as on any bf16-exact x. A job asks by gemm_job.act_fp8; the rows whose GEMMs V4
 * quantizes (fp8, fp4) give it, the others ignore the flag, as V4 runs its bf16 layers on x. */
#include <math.h>
#include <string.h>

#include "ops/gemm_internal.h"
#include "ops/prepack.h"
#include "ops/wformat.h"

#define ACT_BLK 128

/* 2^ceil(log2 v) for v > 0 (a power of two stays) */
static float pow2_ceil(float v)
{
	int e;
	float m = frexpf(v, &e); /* v = m 2^e, 0.5 <= m < 1 */
	return m == 0.5f ? v : ldexpf(1.0f, e);
}

/* v (|v| <= 448) to the nearest e4m3 value, ties to even, as a float */
static float round_e4m3(float v)
{
	float a = fabsf(v);
	if (a < 0x1p-6f) { /* subnormals: multiples of 2^-9, by the float's own rounding */
		float r = ((a * 512.0f + 8388608.0f) - 8388608.0f) / 512.0f;
		return copysignf(r, v);
	}
	uint32_t u;
	memcpy(&u, &a, 4);
	u = (u + 0x7ffffu + ((u >> 20) & 1)) & ~0xfffffu; /* 3 mantissa bits, nearest even */
	float r;
	memcpy(&r, &u, 4);
	return copysignf(r, v);
}

void wact_fp8_round(const float *x, int n, float *out)
{
	for (int b = 0; b < n; b += ACT_BLK) {
		int m = n - b < ACT_BLK ? n - b : ACT_BLK;
		float amax = 0;
		for (int i = b; i < b + m; i++)
			amax = fmaxf(amax, fabsf(x[i]));
		float s = pow2_ceil(fmaxf(amax, 1e-4f) * (1.0f / 448.0f));
		for (int i = b; i < b + m; i++) /* x / s exact: s a power of two */
			out[i] = round_e4m3(fminf(fmaxf(x[i] / s, -448.0f), 448.0f)) * s;
	}
}

/* ---- fp32 rows [n, cols] ---- */
static size_t f32_bytes(enum ops_level lvl, const struct gemm_job *j)
{
	return sizeof(float) * (size_t)j->n * (size_t)j->w->cols;
}

static void f32_fill(enum ops_level lvl, const struct gemm_job *j, int t0, int t1, void *buf)
{
	int cols = j->w->cols;
	for (int t = t0; t < t1; t++)
		wact_fp8_round(j->x + (size_t)t * (size_t)j->ldx, cols, (float *)buf + (size_t)t * (size_t)cols);
}

const struct wact wact_fp8_act128 = {.name = "fp8 act128", .bytes = f32_bytes, .fill = f32_fill};

/* ---- bf16 rows, as wact_bf16_rows lays them (zero past cols) ---- */
static size_t bf16_bytes(enum ops_level lvl, const struct gemm_job *j)
{
	return prepack_x_elems(j->n, j->w->cols) * sizeof(uint16_t);
}

static void bf16_fill(enum ops_level lvl, const struct gemm_job *j, int t0, int t1, void *buf)
{
	int cols = j->w->cols, ldxb = gemm_prepacked_ldxb(cols);
	for (int t = t0; t < t1; t++) {
		uint16_t *xb = (uint16_t *)buf + (size_t)t * (size_t)ldxb;
		for (int c = 0; c < cols; c += ACT_BLK) {
			float r[ACT_BLK];
			int m = cols - c < ACT_BLK ? cols - c : ACT_BLK;
			wact_fp8_round(j->x + (size_t)t * (size_t)j->ldx + c, m, r);
			for (int i = 0; i < m; i++)
				xb[c + i] = f32_to_bf16(r[i]); /* exact */
		}
		memset(xb + cols, 0, sizeof(uint16_t) * (size_t)(ldxb - cols));
	}
}

const struct wact wact_fp8_act128_bf16 = {.name = "fp8 act128 bf16", .bytes = bf16_bytes, .fill = bf16_fill};

struct gemm_job wact_fp8_job(const struct gemm_job *j, const void *act)
{
	struct gemm_job r = *j;
	r.x = act;
	r.ldx = j->w->cols;
	r.x_bf16 = 1;
	r.act_fp8 = 0;
	return r;
}
