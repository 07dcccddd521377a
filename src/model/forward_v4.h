/* DeepSeek-V4's step (forward_v4.c) and the family's own state (struct v4_model, at
 * m->fam_state): the config, the weights, and the per-sequence attention state.
 *
 * The KV state is in two parts. What grows with the context, each compressed layer's entries
 * (ratio 4 CSA, ratio 128 HCA) and the indexer's keys, lives in the engine's paged block pool:
 * struct kv_cache's data is the family's own layout (v4_pool_layout: per block, per state
 * layer, ceil(block_size / ratio) entry slots and as many indexer key slots; v4_block.h's
 * v4_pages addresses them through the sequence's block table). What is bounded, the sliding
 * window's last `window` kv rows and the compressors' unfinished windows, is a slot of
 * per-sequence state (max_seqs slots, allocated at load): a sequence is known by the first
 * block of its block table, takes a slot when it starts at position 0 and must then continue
 * where it stopped (the MTP module's state the same, apart); a preempted sequence recomputes
 * from position 0 into a fresh slot. Under TP every rank keeps the whole state (one shared kv,
 * the compressors and the indexer are replicated). */
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

/* The paged pool's layout of one block of bs tokens, in floats (v4_pool_layout) */
struct v4_pool {
	int bs;              /* 0: not laid out yet */
	size_t block_floats; /* used floats of a block */
	size_t *ent, *ix;    /* [n_state_layers] offsets of each layer's entries, indexer keys */
	size_t ent_b, ix_b;  /* floats of a block: all CSA + HCA entries, all indexer keys */
};

struct v4_model {
	struct v4_config c;
	struct v4_weights w;
	int max_len; /* positions a sequence may reach (max_model_len) */
	int n_slots;
	struct v4_slot *slots;
	size_t slot_bytes;  /* one slot's state */
	int n_state_layers; /* num_hidden_layers + the MTP blocks */
	unsigned long step;
	struct v4_pool pool;
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

/* Lays the pool out for blocks of bs tokens (v->pool; its offset arrays were allocated at load). */
void v4_pool_layout(struct v4_model *v, int bs);

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
