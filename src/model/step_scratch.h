/* The step arena's layout (forward.c's ALLOCs), computed in one place from the shapes, as
 * llama2.c's RunState names its buffers: the regions that live through a step, and the phases
 * that reuse the space after them (one layer's attention, its FFN, the head). The arena is
 * sized by its total; test_step_scratch checks the forwards' high-water mark against it. */
#ifndef MLA_MODEL_STEP_SCRATCH_H
#define MLA_MODEL_STEP_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>

struct model;

/* Sparse attention runs its tokens through the absorbed path this many at a time (bounds
 * the [tokens, heads, 576] buffers whatever the batch) */
#define SPARSE_CHUNK 256

/* What the layout depends on (the model's, step_shapes_of) */
struct step_shapes {
	int n; /* max_batch_tokens: the rows of every activation */
	int max_seqs, n_threads;
	int D, H, W;             /* hidden; this rank's heads; DCP ranks (1: off) */
	int dn, dr, dv, Lq, Lkv; /* MLA's widths (attn.h) */
	int I, E, k, Im, Is;     /* dense intermediate; experts, top-k, expert and shared widths */
	int ws_rows;             /* prefill context rows per chunk */
	int tp;                  /* TP ranks */
	int vocab_cols;          /* this rank's logit columns (TP only) */
	bool mtp;                /* the MTP step's [n, 2D] input */
	bool sparse;             /* DeepSeek Sparse Attention (V3.2) */
	int topk;                /* its keys per token */
	size_t indexer;          /* its selection's bytes (model_indexer_scratch_bytes) */
};

/* The regions, in bytes: each a sum of 64-byte-rounded allocations (arena_alloc's alignment),
 * so that an allocation sequence's high-water mark is at most its region's sum */
struct step_scratch {
	size_t plan;     /* the backend's per-step plan (bounded by its whole decode scratch) */
	size_t resident; /* h, xn [n, D]; the MTP step's eh [n, 2D] */
	size_t attn;     /* a layer's attention: q, kv rows, cq, o, prefill or the indexer, the
			  * absorbed path (its decode or sparse backend call), the DCP / TP temporaries */
	size_t ffn;      /* a layer's FFN: dense SwiGLU or MoE, TP's partial sums */
	size_t head;     /* lm_head's column slice under TP */
	size_t total;    /* plan + resident + the largest phase */
};

void step_shapes_of(const struct model *m, struct step_shapes *s);
void step_scratch_layout(const struct step_shapes *s, struct step_scratch *out);
/* The arena bytes of a model's forwards (its family's scratch_bytes) */
size_t deepseek_step_scratch_bytes(const struct model *m);

#endif
