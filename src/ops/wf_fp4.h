/* MXFP4 weights, the fp4 row of the weight format table (ops/wformat.h; wf_fp4.c): e2m1 codes
 * two per byte along K, element 2i in the LOW nibble and 2i+1 in the high one (DeepSeek-V4's
 * routed experts: I8 [N, K/2], as model_v4/fp4.h), one e8m0 scale byte 2^(e - 127) per 32
 * elements along K (F8_E8M0 [N, K/32]), read through wmat.scale_e8m0:
 *   W[r][c] = e2m1(nibble c of row r) * 2^(scale_e8m0[(row0 + r) * scale_ld + (col0 + c) / 32] - 127)
 * The kernels (gemm_fp4.c) decode the packed bytes as they read them: no widened copy. */
#ifndef MLA_OPS_WF_FP4_H
#define MLA_OPS_WF_FP4_H

#include <stdint.h>
#include <string.h>

#include "ops/cpu.h"
#include "ops/gemm.h"

#define FP4_GROUP 32 /* elements per e8m0 scale */

extern const float wf_fp4_e2m1[16]; /* code -> 0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6 */

/* e8m0 byte -> 2^(e - 127) (e = 0: 2^-127, an fp32 subnormal; 0xff: NaN) */
static inline float wf_fp4_e8m0(uint8_t e)
{
	uint32_t u = e == 0xff ? 0x7fc00000u : e ? (uint32_t)e << 23 : 0x00400000u;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* The wmat of a whole MXFP4 matrix [rows, cols] (cols even): packed [rows, cols / 2] bytes,
 * scales [rows, ceil(cols / 32)] (a checkpoint's weight and scale tensors as they are). */
struct wmat wf_fp4_wmat(const void *packed, const uint8_t *scales, int rows, int cols);

/* gemm_fp4.c: rows [r0, r1) of job j for all its tokens at level lvl, reading x [n, ldx]
 * (fp32), or xb [n, ldxb] (bf16 rows: x rounded to bf16, zero past cols) when xb is not NULL,
 * which the bf16 dot-product kernel takes from AVX512_BF16 on. Returns 0 (y not rounded). */
int gemm_panel_fp4(enum ops_level lvl, const struct gemm_job *j, const float *x, int ldx, const uint16_t *xb, int ldxb,
		   int r0, int r1);
const char *gemm_fp4_kernel_name(enum ops_level lvl);

#endif
