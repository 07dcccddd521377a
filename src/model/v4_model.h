/* DeepSeek-V4 family's own state (struct v4_model, at
 * m->fam_state): the config, the weights, and the per-sequence attention state.
 *
 * The KV state is in two parts. What grows with the context, each compressed layer's entries
 * (ratio 4 CSA, ratio 128 HCA) and the indexer's keys, lives in the engine's paged block pool:
 * struct kv_cache's data is the family's own layout (v4_pool_layout: per block, per state
 * layer, ceil(block_size / ratio) entry slots and as many indexer key slots; v4_block.h's
 * v4_pages addresses them through the sequence's block table). What is bounded, the sliding
 * window's last `window` kv rows and the compressors' unfinished windows, is a slot of
 * per-sequence state (max_seqs slots, allocated at load), known by the block of its last fed
 * position (v4_seqstate.c); a preempted sequence recomputes into a fresh slot. A sequence that
 * starts after cached blocks (prefix caching) takes the state at the last one's end from a
 * snapshot that the forward completing that block saved (struct v4_snap, the most recent
 * ones kept; model_prefix_resumable tells the scheduler which blocks have one); with the MTP
 * module loaded a snapshot holds its state too, saved by the MTP step that passes the block. Under TP every rank keeps
 * the whole state (one shared kv, the compressors and the indexer are replicated) and saves
 * the same snapshots. */
#ifndef MLA_MODEL_V4_MODEL_H
#define MLA_MODEL_V4_MODEL_H

#include "model/tensors_v4.h"

struct v4_slot {
	int32_t first_block;       /* the sequence's first block (-1: free) */
	int32_t *ck_block;         /* [R + 1] the block of position x at x % (R + 1), the last R + 1 fed */
	long pos;                  /* positions fed */
	long mtp_pos;              /* positions fed to the MTP module */
	unsigned long last_step;   /* for reuse, least recently used first */
	struct v4_seq_attn *layer; /* [n_state_layers]: the main layers, then the MTP blocks */
};

/* The state of every main layer at the end of a full block (v4_seqstate.c) */
struct v4_snap {
	int32_t block;             /* that block */
	bool valid;                /* the main layers' state is there */
	bool mtp_valid;            /* and the MTP module's (saved by the MTP step that passed it) */
	unsigned long used;        /* the step that saved or last restored it */
	struct v4_seq_attn *layer; /* [n_state_layers] */
};

/* One snapshot a step saves: sequence seq's state at position pos (a block boundary) */
struct v4_save {
	int seq;
	long pos;
	int snap;
};

/* The paged pool's layout of one block of bs tokens, in floats (v4_pool_layout) */
struct v4_pool {
	int bs;              /* tokens of a block table's block (under DCP the virtual pbs x W); 0: not laid out yet */
	int pbs;             /* tokens of a physical block (the kv cache's block size) */
	size_t block_floats; /* used floats of a block */
	size_t *ent, *ix;    /* [n_state_layers] offsets of each layer's entries, indexer keys */
	size_t ent_b, ix_b;  /* floats of a block: all CSA + HCA entries, all indexer keys */
};

struct v4_model {
	struct v4_config c;
	struct v4_weights w;
	int max_len;  /* positions a sequence may reach (max_model_len) */
	int rollback; /* R: positions a step's drafts may take a sequence back */
	int n_slots;
	struct v4_slot *slots;
	size_t slot_bytes; /* one slot's state */
	struct v4_snap *snaps;
	int n_snaps;
	int n_state_layers; /* num_hidden_layers + the MTP blocks */
	unsigned long step;
	struct v4_pool pool;
	int dcp_size, dcp_rank, dcp_interleave; /* W, r, I (1, 0, 1: one process) */
	int dcp_heads;                          /* W x this rank's heads: the heads a rank attends under DCP */
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

/* Lays the pool out for physical blocks of bs tokens (v->pool; its offset arrays were
 * allocated at load; under DCP the block table's blocks are bs x W tokens). */
void v4_pool_layout(struct v4_model *v, int bs);

#endif
