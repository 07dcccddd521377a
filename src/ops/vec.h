/* Small fp32 vector kernels for the attention inner loops and elementwise layers, with
 * runtime dispatch (ops/cpu.h). */
#ifndef MLA_OPS_VEC_H
#define MLA_OPS_VEC_H

#include <stdbool.h>
#include <stdint.h>

float ops_dot(const float *a, const float *b, int n);
void ops_axpy(float *y, float a, const float *x, int n); /* y += a·x */

/* y[i] = x[i] / sqrt(mean(x²) + eps) * w[i], statistics in fp32; for n rows of width d with
 * row strides ldx / ldy (y may equal x). */
void ops_rmsnorm(float *y, int ldy, const float *x, int ldx, const float *w, int n, int d, float eps);
/* out[i] = silu(g[i]) * u[i] */
void ops_silu_mul(float *out, const float *g, const float *u, int n);
/* In place softmax over n values (max-subtracted, fp32); returns the log-sum-exp. */
float ops_softmax(float *x, int n);
/* x [n] (a power of two) times the Sylvester Hadamard matrix, times n^-1/2, in place (the
 * rotation DeepSeek's indexers and V4's indexer compressor apply before rounding) */
void ops_hadamard(float *x, int n);
/* The same on x[i] * scale (x is scaled in place first), the probabilities then rounded to
 * bf16 if round_bf16: the bits of the scale loop, ops_softmax and ops_round_bf16 in turn, in
 * fewer passes over the row (the prefill attention's score rows). */
float ops_softmax_scaled(float *x, int n, float scale, bool round_bf16);
/* ops_softmax_scaled(x, n, scale, true) with the probabilities written as bf16 words to
 * out[0..n) and zeros to out[n..n_out) instead of back to x (x is left as scratch): the input
 * row of a bf16 GEMM (prepack_gemm_1t_xb) without a conversion pass. Needs AVX-512. */
float ops_softmax_scaled_to_bf16(float *x, int n, float scale, uint16_t *out, int n_out);
/* Indices of the k largest values (k <= n), descending; ties: the lower index wins; NaN ranks
 * below every number. */
void ops_topk(const float *x, int n, int k, int *idx);
/* Round every value to bf16 precision (round to nearest even), in place. */
void ops_round_bf16(float *x, int64_t n);

#endif
