/* DeepSeek-V4's step (forward_v4.c) and the family's own state (struct v4_model, at
 * m->fam_state): the config, the weights, and the per-sequence attention state.
 *
 * The KV state of this first version is NOT the paged pool: each sequence owns a slot of
 * per-layer buffers (model_v4/v4_block.h: the window ring of sliding_window rows, the
 * compressed entries, the indexer's keys, the compressors' unfinished windows) allocated at
 * load for max_model_len positions, max_seqs slots. A sequence is known by the first block of
 * its block table: it takes a slot when it starts at position 0 and must then continue where
 * it stopped, so prefix caching, preemption with recompute from a cached prefix, TP and DCP
 * are refused (family_v4.c, and a one-line error at the step) rather than computed wrong. The
 * paged layouts of attn/kv_cache.h come next; the engine's KV cache is allocated but unused. */
#ifndef MLA_MODEL_FORWARD_V4_H
#define MLA_MODEL_FORWARD_V4_H

#include "model/tensors_v4.h"

struct v4_slot {
	int32_t first_block;       /* the sequence's first block (-1: free) */
	long pos;                  /* positions fed */
	unsigned long last_step;   /* for reuse, least recently used first */
	struct v4_seq_attn *layer; /* [num_hidden_layers] */
};

struct v4_model {
	struct v4_config c;
	struct v4_weights w;
	int max_len; /* positions a slot holds */
	int n_slots;
	struct v4_slot *slots;
	unsigned long step;
};

/* The arena bytes of one step (every buffer of forward_v4.c's layout at max_batch_tokens). */
size_t v4_step_scratch_bytes(const struct model *m);
/* model.h's forward: logits [n_logits, vocab] (fp32, act-quant off: DeepSeek's reference with
 * exact activations into the GEMMs, KV / indexer fp8 / fp4 simulations on). */
int v4_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *be,
	       float *logits, struct err *e);

#endif
