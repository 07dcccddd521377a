/* DeepSeek-V4's step (forward_v4.c) and the family's own state (struct v4_model, at
 * m->fam_state): the config, the weights, and the per-sequence attention state.
 *
 * The KV state of this first version is NOT the paged pool: each sequence owns a slot of
 * per-layer buffers (model_v4/v4_block.h: the window ring of sliding_window rows, the
 * compressed entries, the indexer's keys, the compressors' unfinished windows) allocated at
 * load for max_model_len positions, max_seqs slots. A sequence is known by the first block of
 * its block table: it takes a slot when it starts at position 0 and must then continue where
 * it stopped (the MTP module's state the same, apart), so prefix caching, preemption with
 * recompute from a cached prefix, rejected speculative drafts and DCP are refused
 * (family_v4.c, and a one-line error at the step) rather than computed wrong. Under TP every
 * rank keeps the whole state (one shared kv, the compressors and the indexer are replicated). The paged
 * layouts of attn/kv_cache.h come next; the engine's KV cache is allocated but unused. */
#ifndef MLA_MODEL_FORWARD_V4_H
#define MLA_MODEL_FORWARD_V4_H

#include "model/tensors_v4.h"

struct v4_slot {
	int32_t first_block;       /* the sequence's first block (-1: free) */
	long pos;                  /* positions fed */
	long mtp_pos;              /* positions fed to the MTP module */
	unsigned long last_step;   /* for reuse, least recently used first */
	struct v4_seq_attn *layer; /* [n_state_layers]: the main layers, then the MTP blocks */
};

struct v4_model {
	struct v4_config c;
	struct v4_weights w;
	int max_len; /* positions a slot holds */
	int n_slots;
	struct v4_slot *slots;
	int n_state_layers; /* num_hidden_layers + the MTP blocks */
	unsigned long step;
	/* with the MTP module (model_options.load_mtp): the last forward's final streams, before
	 * hc_head [max_batch_tokens, hc, D], and the last MTP step's output streams of its logits
	 * rows [max_seqs, hc, D] (a chained draft's input) */
	float *hid, *mtp_hid;
	int n_hid, n_mtp_hid;
};

/* The attention of state layer i: main layer i, then MTP block i - num_hidden_layers */
static inline const struct v4_attn_layer *v4_state_layer(const struct v4_model *v, int i)
{
	int L = v->c.num_hidden_layers;
	return i < L ? &v->w.layers[i].attn : &v->w.mtp[i - L].blk.attn;
}

/* The arena bytes of one step (every buffer of forward_v4.c's layout at max_batch_tokens). */
size_t v4_step_scratch_bytes(const struct model *m);
/* model.h's forward: logits [n_logits, vocab] (fp32, act-quant off: DeepSeek's reference with
 * exact activations into the GEMMs, KV / indexer fp8 / fp4 simulations on). */
int v4_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *be,
	       float *logits, struct err *e);
/* model.h's MTP step (the first MTP module; README T of the golden): token t (the token after
 * hidden row hidden_rows[t]'s) at that row's position: x = e_proj(enorm(embed(token))) +
 * h_proj(hnorm(h)) per stream of the row's final streams h, the MTP block over its own state,
 * logits = head(norm(hc_head(x))) with the module's norm and hc_head, the main head. */
int v4_mtp_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *be,
		   float *logits, struct err *e);

#endif
