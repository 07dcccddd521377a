/* DeepSeek-V4's in-place quantisation round trips (kernel.py act_quant / fp4_act_quant with
 * scale_fmt ue8m0) and the indexer's Hadamard rotation, on float vectors:
 *   fp8 (blocks of `block`): s = 2^ceil(log2(fp32(max(amax, 1e-4)) * fp32(1/448))),
 *        x = e4m3_rne(clamp(x / s, +-448)) * s
 *        (block 64 on kv[:-rope] of window and compressed KV; block 128 on every FP8 / FP4
 *        GEMM input when activations are quantised)
 *   fp4 (blocks of 32): s = 2^ceil(log2(max(amax, 6 * 2^-126) * fp32(1/6))),
 *        x = e2m1_rne(clamp(x / s, +-6)) * s   (indexer q and indexer compressed keys)
 * A last partial block is quantised on its own (a slice shorter than `block`). */
#ifndef MLA_MODEL_V4_V4_QUANT_H
#define MLA_MODEL_V4_V4_QUANT_H

/* The ue8m0 scale of a block whose largest magnitude is amax. */
float v4_fp8_scale(float amax);
/* The ue8m0 scale of an fp4 block whose largest magnitude is amax. */
float v4_fp4_scale(float amax);
/* x [n] through fp8 e4m3 in blocks of `block`, in place. */
void v4_fp8_sim(float *x, int n, int block);
/* x [n] through fp4 e2m1 in blocks of `block` (32), in place. */
void v4_fp4_sim(float *x, int n, int block);

#endif
