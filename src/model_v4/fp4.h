/* MXFP4 as DeepSeek-V4 stores its routed experts (expert_dtype "fp4"): e2m1 codes, two per
 * byte, element 2i in the LOW nibble and 2i+1 in the high one (convert.py's FP4_TABLE and the
 * golden README), with one e8m0 scale byte per 32 consecutive elements along K. A weight
 * [N, K] is I8 [N, K/2] + F8_E8M0 [N, K/32]; w[n][k] = e2m1(code) * 2^(scale[n][k/32] - 127).
 *
 * Reference decoding and GEMV only: the fast kernels are a row of the weight-format table
 * (ops/wformat.h). */
#ifndef MLA_MODEL_V4_FP4_H
#define MLA_MODEL_V4_FP4_H

#include <stdint.h>

#define FP4_BLOCK 32 /* elements per e8m0 scale */

/* e2m1 code (low 4 bits: sign, 2 exponent bits, 1 mantissa bit) -> one of 0, ±0.5, ±1, ±1.5,
 * ±2, ±3, ±4, ±6. */
float fp4_e2m1_to_f32(uint8_t code);
/* The nearest e2m1 code to v, ties to the even code (as a cast to float4_e2m1fn_x2),
 * saturating at ±6; NaN -> +0. -0.0 keeps its sign bit. */
uint8_t fp4_f32_to_e2m1(float v);
/* e8m0 scale byte -> 2^(e - 127); 0xFF is NaN (OCP MX). */
float fp4_e8m0_to_f32(uint8_t e);

/* One row of K elements (K a multiple of 2; a last partial block of 32 uses its scale):
 * packed [K/2] codes, scales [ceil(K/32)] -> out [K]. */
void fp4_decode_row(const uint8_t *packed, const uint8_t *scales, int k, float *out);

/* y [n] = W x for W [n, k] in MXFP4 (packed [n, k/2], scales [n, ceil(k/32)]), x [k]; sums
 * in double, one row at a time (a reference for the weight-format kernels). */
void fp4_gemv_ref(const uint8_t *packed, const uint8_t *scales, int n, int k, const float *x, float *y);

#endif
