/* DeepSeek-V4's weights (family_v4.c) and their table: a row per checkpoint tensor, by
 * DeepSeek's own names (layers.N.attn.wq_a.weight, layers.N.ffn.experts.E.w1.weight,
 * layers.N.hc_attn_fn, hc_head_fn, mtp.0.e_proj.weight, ...: model.py's, no "model." prefix),
 * its shape from the V4 config, its format, and on which layers it is.
 *
 * V4's own walker (not tensors.c's) loads it, because its formats are not DeepSeek V3's:
 *   - FP8 e4m3 matrices with F8_E8M0 `.scale` per 128x128 block (not F32 `_scale_inv`): the
 *     existing fp8 row, the ue8m0 bytes widened to fp32 powers of two (exact);
 *   - every matrix wmat.fixed_order (ops/gemm.h): its GEMMs sum alike whatever the chunking
 *     of a prompt (prefix caching's warm = cold), wo_a's in fp8 as the others';
 *   - routed experts: I8 e2m1 pairs + F8_E8M0 per 32 along K, read in place by the MXFP4
 *     weight row (ops/wf_fp4.h, DT_F4_E2M1);
 *   - hyper-connection, ape and sink tensors F32; tid2eid I64.
 * Errors name the file and the tensor, as the DeepSeek family's loader does. */
#ifndef MLA_MODEL_TENSORS_V4_H
#define MLA_MODEL_TENSORS_V4_H

#include <stdint.h>

#include "model/model_internal.h"
#include "model_v4/hc.h"
#include "model_v4/v4_block.h"
#include "model_v4/v4_config.h"
#include "model_v4/v4_moe_route.h"

/* One block (a main layer, or an MTP module's block) */
struct v4_layer {
	int idx;                     /* its compress_ratios entry: the layer, or num_hidden_layers + k */
	float *attn_norm, *ffn_norm; /* [D] */
	struct wmat wq_a;            /* [q_lora, D] fp8 */
	float *q_norm;               /* [q_lora] */
	struct wmat wq_b;            /* [H*hd, q_lora] fp8 */
	struct wmat wkv;             /* [hd, D] fp8 */
	float *kv_norm, *sink;       /* [hd], [H] */
	struct wmat wo_a;            /* [G*o_lora, H*hd/G] fp8: group g's rows g*o_lora.. */
	struct wmat wo_b;            /* [D, G*o_lora] fp8 */
	/* the compressor (ratio > 0): width = 2 hd for ratio 4, else hd */
	struct wmat c_wkv, c_wgate; /* [width, D] */
	float *c_ape, *c_norm;      /* [ratio, width], [hd] */
	/* the indexer (ratio 4) and its compressor (width 2 di) */
	struct wmat ix_wq_b;          /* [Hi*di, q_lora] fp8 */
	struct wmat ix_wproj;         /* [Hi, D] */
	struct wmat ic_wkv, ic_wgate; /* [2 di, D] */
	float *ic_ape, *ic_norm;      /* [4, 2 di], [di] */
	/* hyper-connections around attention and the MoE: fn [(2+hc)*hc, hc*D], base, scale [3] */
	float *hca_fn, *hca_base, *hca_scale, *hcf_fn, *hcf_base, *hcf_scale;
	/* MoE: the router, its bias (score layers) or tid2eid (hash layers), experts, shared */
	struct wmat gate;          /* [E, D] */
	float *gate_bias;          /* [E] */
	int64_t *tid2eid;          /* [vocab, k] */
	struct wmat *w1, *w3, *w2; /* [E] each: [I, D], [I, D], [D, I] MXFP4 */
	struct wmat s1, s3, s2;    /* the shared expert, fp8 */
	/* derived at load */
	struct v4_attn_layer attn;
	struct v4_hc hca, hcf;
	struct v4_route route;
};

/* An MTP module (mtp.K.*): its block, and what feeds it and reads it out */
struct v4_mtp {
	struct v4_layer blk;
	struct wmat e_proj, h_proj;        /* [D, D] fp8 */
	float *enorm, *hnorm, *norm;       /* [D] */
	float *hc_fn, *hc_base, *hc_scale; /* its hc_head: [hc, hc*D], [hc], [1] */
	struct v4_hc hch;
};

struct v4_weights {
	struct wmat embed, head;                          /* [vocab, D] */
	float *norm;                                      /* [D] */
	float *hc_head_fn, *hc_head_base, *hc_head_scale; /* [hc, hc*D], [hc], [1] */
	struct v4_hc hch;
	struct v4_layer *layers; /* [num_hidden_layers] */
	struct v4_mtp *mtp;      /* [n_mtp] */
	int n_mtp;
	size_t format_bytes[DT_COUNT]; /* bytes held per format (fp8 and fp4: with their scales) */
};

struct v4_tensor_spec;
/* The table (rows in load order) and its size: tests walk it. */
extern const struct v4_tensor_spec *const v4_tensor_rows;
extern const int v4_tensor_n_rows;
/* Row k's name pattern ("%s" the block's prefix "layers.N." / "mtp.K.", then an expert's
 * index) and whether it is a block's (else the model's or an MTP module's own). */
const char *v4_tensor_name(int k);

/* Loads every tensor of the table into w (the model's m->st open): the model's own rows, each
 * main layer's, and n_mtp MTP modules. cfg is the V4 config; m receives the bytes counted
 * and owns the memory. Errors: "FILE: tensor NAME: ..." / "DIR: missing tensor NAME". */
int v4_tensors_load(struct model *m, const struct v4_config *cfg, struct v4_weights *w, int n_mtp, struct err *e);

/* The bytes --load-format dummy will allocate for this config (whole matrices, also under
 * TP), per format in out (fp8 / fp4 with their scale bytes), and their total: checked against
 * the memory available before anything is allocated. */
size_t v4_tensors_dummy_bytes(struct model *m, const struct v4_config *cfg, int n_mtp, size_t out[DT_COUNT]);

#endif
