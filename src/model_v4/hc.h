/* DeepSeek-V4 hyper-connections (mHC; model.py Block.hc_pre / hc_post, ParallelHead.hc_head,
 * kernel.py hc_split_sinkhorn). The residual is hc = hc_mult streams per token, x [n, hc, D].
 * Around each sub-layer (attention, MoE):
 *   f = flatten(x_t) [hc*D]; mixes = (fn f) * rsqrt(mean(f^2) + rms_norm_eps)   [(2+hc)*hc]
 *   pre[j]  = sigmoid(mixes[j] * scale[0] + base[j]) + hc_eps                  [hc]
 *   post[j] = 2 sigmoid(mixes[hc+j] * scale[1] + base[hc+j])                   [hc]
 *   comb[j][k] = mixes[2hc + j*hc + k] * scale[2] + base[...]; softmax over k, + hc_eps;
 *      divide by column sums (+ eps); then (iters - 1) x {rows, columns}      [hc, hc]
 *   y = sum_j pre[j] x[j] (the sub-layer's input, before its RMSNorm)          [D]
 *   after the sub-layer (out [D]): x'[k] = post[k] out + sum_j comb[j][k] x[j]
 * hc_head (before the final norm): pre only (scale[0], base[:hc], fn [hc, hc*D]), no Sinkhorn.
 * (HF transformers' modular_deepseek_v4 differs: sigmoid comb, transposed mix; the official
 * reference is followed here.) */
#ifndef MLA_MODEL_V4_HC_H
#define MLA_MODEL_V4_HC_H

#define V4_HC_MAX 16

/* One hyper-connection's weights (layers.N.hc_{attn,ffn}_{fn,scale,base}, all F32) and sizes. */
struct v4_hc {
	int hc, dim;        /* hc_mult, hidden_size */
	int iters;          /* hc_sinkhorn_iters */
	float norm_eps;     /* rms_norm_eps (the weightless norm of f) */
	float hc_eps;       /* hc_eps */
	const float *fn;    /* [(2 + hc) * hc, hc * dim]; hc_head: [hc, hc * dim] */
	const float *scale; /* [3]; hc_head: [1] */
	const float *base;  /* [(2 + hc) * hc]; hc_head: [hc] */
};

/* mixes [n, m] = (fn x_t) * rsqrt(mean(x_t^2) + eps) for x [n, hc, dim]; m = (2 + hc) * hc, or
 * hc for a head (head != 0). Sums in double. A batched GEMM may replace it: the rest only reads
 * mixes. */
void v4_hc_mixes(const struct v4_hc *h, int head, int n, const float *x, float *mixes);
/* The Sinkhorn normalisation of one comb [hc, hc] in place: logits in, the doubly
 * (approximately) stochastic mix out (kernel.py hc_split_sinkhorn). */
void v4_hc_sinkhorn(int hc, int iters, float eps, float *comb);
/* mixes [n, (2+hc)*hc] -> pre [n, hc], post [n, hc], comb [n, hc, hc]. */
void v4_hc_split(const struct v4_hc *h, int n, const float *mixes, float *pre, float *post, float *comb);
/* y [n, dim] = sum_j pre[n, j] x[n, j, :]. */
void v4_hc_collapse(int hc, int dim, int n, const float *pre, const float *x, float *y);
/* hc_pre: x [n, hc, dim] -> y [n, dim], post [n, hc], comb [n, hc, hc]. */
void v4_hc_pre(const struct v4_hc *h, int n, const float *x, float *y, float *post, float *comb);
/* hc_post: out [n, dim] (the sub-layer's output), x [n, hc, dim] -> xo [n, hc, dim];
 * xo may alias x. */
void v4_hc_post(int hc, int dim, int n, const float *out, const float *x, const float *post, const float *comb,
		float *xo);
/* hc_head: x [n, hc, dim] -> y [n, dim] with the head's weights (h->fn [hc, hc*dim]). */
void v4_hc_head(const struct v4_hc *h, int n, const float *x, float *y);

#endif
