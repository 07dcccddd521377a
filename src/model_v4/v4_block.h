/* DeepSeek-V4's attention of one layer over one sequence's new tokens, after the projections
 * (the caller's GEMMs) and before wo_a: the composition of the model_v4 units that
 * tests/unit/test_v4_block.c checks against the reference token by token, here over a chunk.
 * Per token t at position p of the chunk [pos0, pos0 + n):
 *   q_t: per-head RMS + RoPE(p); kv_t: RoPE(p) + fp8 of the non-RoPE dims (v4_attn.h)
 *   the compressor(s) fed the chunk's tokens (compressor.h): an entry completed by t is
 *   visible to t, and only those: entries e < (p + 1) / ratio
 *   ratio 4: the indexer's top-k of the visible indexer entries (v4_indexer.h)
 *   attention over the window [p - window + 1, p] (ring rows before the chunk, the chunk's own
 *   rows after) + the entries, with the sink; the inverse RoPE of each head at p.
 * The sequence's state is the window ring and the compressors' unfinished windows (struct
 * v4_seq_attn, bounded: caller memory) and the compressed and indexer entries (struct
 * v4_pages: the paged pool); any split of a sequence into chunks gives the same results bit
 * for bit. */
#ifndef MLA_MODEL_V4_V4_BLOCK_H
#define MLA_MODEL_V4_V4_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/dcp.h"
#include "base/err.h"
#include "model_v4/compressor.h"
#include "model_v4/v4_rope.h"

/* One layer's attention sizes and weightless parts */
struct v4_attn_layer {
	int ratio;             /* 0: window only; 4: CSA with the indexer; other: HCA */
	int n_heads, head_dim; /* H, hd */
	int window;            /* sliding_window */
	int rollback;          /* positions a sequence may be taken back (speculative drafts; 0: none) */
	int index_heads, index_dim, index_topk;
	int dcp_size;               /* W: the DCP group's size (0 or 1: one process); attended heads W x n_heads */
	float eps;                  /* rms_norm_eps */
	const float *sink;          /* [H] attn_sink */
	struct v4_rope rope;        /* ratio 0: rope_theta; compressed layers: compress_rope_theta + YaRN */
	struct v4_comp comp, icomp; /* the main compressor (ratio > 0), the indexer's (ratio 4) */
};

/* Where a sequence's compressed entries and indexer keys live: the engine's paged pool (the
 * family's layout of struct kv_cache's data, family_v4.c). Entry e of a layer with ratio r
 * belongs to the block of its LAST token q = (e + 1) r - 1, at slot (q % bs) / r of the
 * layer's ceil(bs / r) slots there: it is written while that block is being filled and never
 * after, so a full block (one the prefix cache may share) holds only entries of its own
 * prefix, whatever bs and r. Entries are stored packed (compressor.h's v4_comp_store: fp8 /
 * fp4 codes, exact) and unpacked where attention reads them.
 *
 * Under DCP (dcp != NULL) the block table is the scheduler's virtual one (bs x W tokens a
 * block, docs/mla-dcp.md §4.1) and the entries are a sequence sharded as the MLA cache's
 * tokens are (§4.3), by entry index: entry e lives on rank (e / I) % W only, in the block of
 * its last token, at its rank-local index minus the rank-local count of the entries that end
 * before that block (v4_page_slots_dcp slots a block). */
typedef int (*v4_gather_fn)(void *ctx, const void *send, size_t nbytes, void *recv, struct err *e);
struct v4_cand;
struct v4_dcp {
	int size, rank, interleave; /* W, r, I */
	v4_gather_fn gather;        /* all-gather over the DCP group: send [nbytes] -> recv [W, nbytes] */
	void *gather_ctx;
	float *lse; /* [n, W x H] out: each query's partial LSE (no sink) per attended head */
};

struct v4_pages {
	float *base;              /* block b at base + b * block_floats */
	size_t block_floats;      /* floats of one block (every layer's) */
	const int32_t *bt;        /* the sequence's block table */
	int bs;                   /* tokens per physical block */
	size_t ent_off, ix_off;   /* this layer's entries [slots, ent_w], indexer keys [slots, ix_w] */
	size_t ent_w, ix_w;       /* floats of a stored entry, indexer key (v4_comp_entry_floats) */
	struct pool *pool;        /* the step's workers for the attention and indexer (NULL: none) */
	const struct v4_dcp *dcp; /* NULL: one process */
};

static inline int v4_page_slots(int ratio, int bs) { return ratio ? (bs + ratio - 1) / ratio : 0; }
/* Slots of a block for a layer of ratio r under DCP: the most entries one rank holds of one
 * virtual block of bs x W tokens (v4_page_slots when W is 1). */
int v4_page_slots_dcp(int ratio, int bs, int W, int I);

static inline bool v4_entry_owned(const struct v4_dcp *d, long e)
{
	return !d || (e / d->interleave) % d->size == d->rank;
}
/* entries of this rank among 0 .. n - 1 (all of them in one process) */
static inline long v4_entries_local(const struct v4_dcp *d, long n)
{
	return d ? dcp_local_seq_len((int)n, d->size, d->rank, d->interleave) : n;
}
/* the global index of this rank's j-th entry */
static inline long v4_entry_global(const struct v4_dcp *d, long j)
{
	return d ? (long)dcp_global_pos(j, d->size, d->rank, d->interleave) : j;
}

/* Stored entry e [width floats] of a layer of ratio r at offset off of each block (under DCP
 * only an entry this rank owns) */
static inline float *v4_page_entry(const struct v4_pages *p, int r, long e, size_t width, size_t off)
{
	long q = (e + 1) * r - 1;
	if (!p->dcp)
		return p->base + (size_t)p->bt[q / p->bs] * p->block_floats + off + (size_t)((q % p->bs) / r) * width;
	long vb = (long)p->bs * p->dcp->size, x = q / vb;
	long slot = v4_entries_local(p->dcp, e) - v4_entries_local(p->dcp, x * vb / r);
	return p->base + (size_t)p->bt[x] * p->block_floats + off + (size_t)slot * width;
}

/* out[c] = v4_page_entry(p, r, e_c, width, off) for this rank's entries c < n (e_c its global
 * index): without DCP a block's entries lie width apart, so one division a block instead of
 * three an entry (a CSA layer at 1M context points at 262K entries and keys a step) */
static inline void v4_page_entries(const struct v4_pages *p, int r, long n, size_t width, size_t off,
				   const float **out)
{
	if (p->dcp) {
		for (long c = 0; c < n; c++)
			out[c] = v4_page_entry(p, r, v4_entry_global(p->dcp, c), width, off);
		return;
	}
	for (long c = 0; c < n;) { /* entry c's last token q in block b; the block's entries end at end */
		long q = (c + 1) * r - 1, b = q / p->bs, end = (b + 1) * p->bs / r;
		const float *e = p->base + (size_t)p->bt[b] * p->block_floats + off +
				 (size_t)((q % p->bs) / r) * width;
		for (; c < n && c < end; c++, e += width)
			out[c] = e;
	}
}

/* One sequence's bounded state of one layer (positions 0 .. pos0 - 1 fed): what is not paged.
 * With rollback R > 0 the ring keeps R rows more and the compressors' states after each of
 * the last R + 1 positions fed are kept, so that the sequence may continue from any of the
 * last R positions (rejected drafts): v4_seq_attn_rollback. */
struct v4_seq_attn {
	float *ring;       /* [window + R, hd]: position p's kv at row p % (window + R) */
	float *cst, *icst; /* the compressors' unfinished windows (compressor.h) */
	float *ck;         /* [R + 1, cst + icst floats]: after position x, row x % (R + 1) */
};

/* Floats of one sequence's state of layer l (window rows and compressor states). */
size_t v4_seq_attn_floats(const struct v4_attn_layer *l);
/* Carves s out of mem [v4_seq_attn_floats] and resets it (a fresh sequence). */
void v4_seq_attn_init(const struct v4_attn_layer *l, float *mem, struct v4_seq_attn *s);
/* Resets s (its memory kept): the sequence starts again at position 0. */
void v4_seq_attn_reset(const struct v4_attn_layer *l, struct v4_seq_attn *s);
/* s fed positions up to p - 1 continues at q instead, p - R <= q < p, q >= 1: the
 * compressors' states as they were after position q - 1 (the ring needs nothing). */
void v4_seq_attn_rollback(const struct v4_attn_layer *l, struct v4_seq_attn *s, long q);

/* The chunk's projections (rows of n tokens):
 *   q [n, H*hd] wq_b's output (prepared in place), kv [n, hd] kv_norm's output (in place),
 *   ckv, csc [n, comp width] the compressor's wkv / wgate outputs (ratio > 0),
 *   iq [n, index_heads * index_dim] the indexer's wq_b output (in place), iw [n, index_heads]
 *   its weights_proj output (in place), ikv, isc [n, 2 index_dim] its compressor's (ratio 4)
 * -> o [n, H*hd] the attention output after the inverse RoPE; sel [n, index_topk] the
 * indexer's selection (ascending, -1 padded) when not NULL and ratio 4. The entries the chunk
 * completes are written to pg's blocks (which must cover position pos0 + n - 1). work: the
 * caller's scratch of v4_attn_seq_work_bytes(l, max_len, n) bytes, 64-byte aligned (the step
 * allocates nothing). Fails when the sequence outgrows max_len.
 * Under DCP (pg->dcp, l->dcp_size W): q and o hold the group's W x n_heads heads (the caller
 * gathered q); the rank attends the window rows and the entries it owns (both by the rule of
 * v4_entry_owned, on positions and on entry indices: each key counted once in the group), the
 * CSA selection being the group's top-k (the ranks' candidates gathered every 32 tokens,
 * v4_index_merge, so the selection is one process's). o is then the partial result without
 * the sink and before the inverse RoPE, with its LSE in pg->dcp->lse: the caller merges the
 * ranks' partials (attn/dcp.h), adds the sink once (v4_attn_add_sink) and un-ropes. The window
 * rows and the compressors' states are every rank's (each feeds every token), the entries
 * stored only on their owner. */
int v4_attn_seq(const struct v4_attn_layer *l, struct v4_seq_attn *s, const struct v4_pages *pg, long pos0, int n,
		float *q, float *kv, const float *ckv, const float *csc, float *iq, float *iw, const float *ikv,
		const float *isc, float *o, int32_t *sel, void *work, long max_len, struct err *e);
/* Bytes of v4_attn_seq's work for a sequence of max_len positions fed max_n tokens at a time:
 * the entries' and one query's key pointers, the entries a feed completes, the indexer's picks,
 * the heads' LSEs and the attention's scores (v4_attn_fast_scratch). */
size_t v4_attn_seq_work_bytes(const struct v4_attn_layer *l, long max_len, int max_n);

#endif
