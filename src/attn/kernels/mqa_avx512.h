/* AVX-512 kernels of the paged MQA (mqa.c only). Score rows are MQA_KEY_BLOCK floats apart,
 * or `ls` where a kernel takes it (the AMX path's blocks may be wider). */
#ifndef MLA_ATTN_KERNELS_MQA_AVX512_H
#define MLA_ATTN_KERNELS_MQA_AVX512_H

#include <stdint.h>

/* dst[0:n] = bf16 src[0:n] as fp32 */
void mqa512_bf16_row(float *dst, const uint16_t *src, int n);
/* s[i * KB + j] = scale * q_i . k_j for i < nr, j < nk (q rows `row` apart). Meanwhile
 * prefetches the pf_bytes of each of pf[0:npf] (the next block's rows), spread out. */
void mqa512_scores(const float *q, int nr, int row, const float *const *kp, int nk, float scale, float *s,
		   const void *const *pf, int npf, int pf_bytes);
/* AVX512_BF16: dst[0:n] = src as bf16 (exact for bf16-valued src). */
void mqa512_to_bf16(uint16_t *dst, const float *src, int n);
/* mqa512_scores with bf16 q rows (`row` apart) and bf16 key rows kr[j]: vdpbf16ps, exact
 * products, fp32 sums. */
void mqa512_scores_dp(const uint16_t *q, int nr, int row, const uint16_t *const *kr, int nk, float scale, float *s,
		      const void *const *pf, int npf, int pf_bytes);
/* Online-softmax update of a block: for rows with nvis[i] > 0, s[i][0:nvis) becomes
 * exp(s - m_new), s[i][nvis:nk) 0, m/l updated, alpha[i] = exp(m_old - m_new); rows with
 * nvis[i] <= 0 get alpha 1 and a zero row, so they may join a value pass unchanged. */
void mqa512_softmax(float *s, int ls, int nr, int nk, const int *nvis, float *m, float *l, float *alpha);
/* out[i] = out[i] * alpha[i] + sum_j s[i][j] * kp[j][0:dv] for i < nr, j < nk (out rows dv
 * apart). Rows of 4 share a pass up to their largest nvis, so scores past a row's nvis must
 * be 0 and rows with nvis <= 0 have alpha 1, as mqa512_softmax leaves them. */
void mqa512_accum(float *out, int nr, int dv, const float *alpha, const float *s, const int *nvis,
		  const float *const *kp, int nk);
/* AVX512_BF16: pp[i][p] = bf16 pair (s[i][2p], s[i][2p+1]) for p < ceil(nk / 2), zero past
 * nk (round to nearest even; pp rows ls / 2 words apart): the probabilities of the bf16 value
 * passes (here and AMX's) */
void mqa512_prob_pairs(const float *s, int ls, int nr, int nk, uint32_t *pp);
/* AVX512_BF16: mqa512_accum with bf16 value rows vr[j] and the probabilities rounded to
 * bf16 (as bf16 engines multiply P·V), vdpbf16ps over key pairs; pp: nr x MQA_KEY_BLOCK / 2
 * words of scratch. */
void mqa512_accum_dp(float *out, int nr, int dv, const float *alpha, const float *s, const int *nvis,
		     const uint16_t *const *vr, int nk, uint32_t *pp);

#endif
