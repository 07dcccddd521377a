/* Private to model/: the loaded weights and per-step state that the model's files share:
 * model.c (the object: its memory, the API's dispatch to the family), load.c and the family's
 * loading (family.h, tensors.h, weights.h), forward.c and indexer.c (the step). */
#ifndef MLA_MODEL_MODEL_INTERNAL_H
#define MLA_MODEL_MODEL_INTERNAL_H

#include "base/arena.h"
#include "base/bigmem.h"
#include "dist/comm.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "model/model_types.h"
#include "ops/backend.h"
#include "ops/gemm.h"
#include "ops/rope.h"

/* Buffers the model owns (base/bigmem.h: huge pages for the large ones) */
struct owned {
	void *p;
	size_t bytes;
};

struct layer_weights {
	float *attn_norm, *ffn_norm; /* [D] */
	float *q_a_norm;             /* [Lq] (q_lora only) */
	float *kv_a_norm;            /* [Lkv] */
	struct wmat q_proj;          /* [H*(dn+dr), D] when q_lora_rank == 0 */
	struct wmat q_a, q_b;        /* [Lq, D], [H*(dn+dr), Lq] */
	struct wmat kv_a;            /* [Lkv+dr, D] */
	struct wmat kv_b;            /* [H*(dn+dv), Lkv]: per head dn rows W_UK, dv rows W_UV */
	struct wmat *uk_t;           /* [H] W_UK[h]ᵀ, each [Lkv, dn] */
	struct wmat o_proj;          /* [D, H*dv] */
	/* DeepSeek Sparse Attention's lightning indexer (V3.2; Hi heads of di), on every TP rank */
	struct wmat ix_wq_b;              /* [Hi*di, Lq] */
	struct wmat ix_wk;                /* [di, D] */
	float *ix_k_norm_w, *ix_k_norm_b; /* [di] the LayerNorm of k */
	struct wmat ix_weights_proj;      /* [Hi, D] the per-head weights */
	bool moe;
	struct wmat gate, up, down; /* dense MLP, or the shared experts on MoE layers */
	bool has_shared;
	struct wmat router;                  /* [E, D] */
	float *bias;                         /* [E] e_score_correction_bias or NULL */
	struct wmat *e_gate, *e_up, *e_down; /* [E] each */
};

/* DeepSeek-V3's multi-token prediction module, model.layers.{L} with L = num_hidden_layers
 * (its decoder layer is layers[L]): the draft model of --speculative-config deepseek_mtp */
struct mtp_weights {
	float *enorm, *hnorm;     /* [D] */
	struct wmat eh_proj;      /* [D, 2D] over [enorm(embed(next token)) | hnorm(hidden)] */
	float *head_norm;         /* [D] shared_head.norm */
	struct wmat embed;        /* [vocab, D] its embed_tokens, or the model's when equal */
	struct wmat head;         /* [vocab (this rank's rows), D] shared_head.head, or lm_head */
	bool own_embed, own_head; /* false: the model's own (not loaded twice) */
};

struct model_family;

struct model {
	const struct model_family *fam; /* what loaded it and runs it (model/family.h) */
	void *fam_state;                /* the family's own (model_own'd), if any */
	struct model_config cfg;        /* the family fills the fields the engine reads */
	struct model_options opt;
	struct st_set *st;
	struct wmat embed;            /* [vocab, D] */
	struct wmat lm_head;          /* [vocab, D] */
	float *final_norm;            /* [D] */
	struct layer_weights *layers; /* [n_layers]: the main layers, then the MTP layer if loaded */
	int n_layers;                 /* = the latent cache's layers */
	struct mtp_weights mtp;       /* when n_layers > num_hidden_layers */
	float *hidden;                /* [max_batch_tokens, D] with MTP: the last model_forward's final-normed rows */
	int n_hidden;                 /* rows of it that the last model_forward wrote */
	float *mtp_hidden;            /* [max_seqs, D] with MTP: the last model_mtp_forward's output rows
					 * (before its head's norm) of its logits rows: a chained pass's input */
	int n_mtp_hidden;             /* rows of it that the last model_mtp_forward wrote (0 when it had
					 * more logits rows than max_seqs) */
	int tp_size, tp_rank;         /* 1, 0 without TP */
	int n_heads_local, head0;     /* this rank's heads [head0, head0 + n_heads_local) */
	int *vocab_cols;              /* [tp_size] lm_head rows (logit columns) per rank */
	int vocab0;                   /* this rank's first vocabulary row */
	struct rope rope;
	float scale; /* MLA softmax scale */
	int ws_rows; /* prefill context chunk rows */
	int n_threads;
	size_t weight_bytes;
	size_t quant_src_bytes;   /* --quantization: the bytes quantized */
	double quant_s;           /* and the seconds it took */
	struct ct_ignore *ct;     /* a compressed-tensors int4 checkpoint's ignore list while loading */
	size_t ct_bytes;          /* and the int4 bytes repacked from it */
	size_t step_weight_bytes; /* weights read by the last forward */
	double step_index_s;      /* seconds the last forward spent in the sparse-attention indexer */
	struct arena arena;       /* per-step scratch */
	struct owned *owned;      /* buffers to free (model.c) */
	int n_owned, cap_owned;
	struct bigmem_slab small; /* the owned buffers under BIGMEM_MIN (model_own) */
	struct owned *qbufs;      /* quantized values a packed copy replaces (walloc's drop_when_packed) */
	int n_qbufs, cap_qbufs;
};

/* The lightning indexer (model/indexer.c; its weights are rows of the DeepSeek tensor table):
 * one step's selection for the batch (xn [n, D] the layer's normed input, cq [n, Lq] the
 * normed q latent): writes the step's index keys to the indexer cache, then fills
 * sel_start [n + 1] and *sel (scratch) as attn_index_select does; the scratch bytes of one
 * layer's selection. */
int model_indexer(struct model *m, int li, const struct batch *b, const struct attn_meta *meta, struct kv_cache *kv,
		  const float *xn, const float *cq, int32_t *sel_start, int32_t **sel, struct err *e);
size_t model_indexer_scratch_bytes(const struct model *m);

/* Shared by forward.c and indexer.c: the step's GEMMs (bf16 activations: x rounded, see
 * forward.c), the weight-bytes accounting, the activation rounding. */
static inline bool model_act_bf16(const struct model *m) { return m->opt.act_dtype == DT_BF16; }
static inline void model_gemm_run(const struct model *m, int n_jobs, struct gemm_job *j)
{
	for (int i = 0; i < n_jobs; i++)
		j[i].x_bf16 = model_act_bf16(m);
	ops_gemm_multi(m->opt.pool, n_jobs, j);
}
static inline void model_used(struct model *m, const struct wmat *w) { m->step_weight_bytes += wmat_bytes(w); }

/* Test hook (used by test_mla_paths): the prefill workspace rows; values < 1 are clamped. */
void model_set_prefill_chunk(struct model *m, int ws_rows);

/* A buffer the model owns until model_free (model.c); NULL when out of memory. own_in: the
 * same into the list *o of *n (capacity *cap), mapped (base/bigmem.h) whatever its size. */
void *model_own(struct model *m, size_t bytes);
void *model_own_in(struct owned **o, int *n, int *cap, size_t bytes);
/* Packs every weight the CPU's kernels want packed (model_pack.c: the family lists them), or
 * leaves them as loaded when the memory left is short (logged). */
int model_prepack_all(struct model *m, struct err *e);

/* The step's execution context: the CPU ops backend (ops/backend.h) on the model's pool and
 * per-step arena. The one place a device backend would be chosen, for every family. */
static inline struct compute_ctx model_step_cx(struct model *m)
{
	return (struct compute_ctx){.ops = &ops_backend_cpu, .pool = m->opt.pool, .scratch = &m->arena};
}

#endif
