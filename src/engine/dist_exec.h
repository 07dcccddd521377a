/* Distributed execution of engine steps (tensor parallelism + decode context parallelism over
 * dist/comm): rank 0's engine forward hook broadcasts the pointer-free step plan and runs its
 * shard; every other rank loops on the plans and runs the same forward on its shard.
 *
 * Every rank turns the one plan into its own batch: under DCP (docs/mla-dcp.md §4.3) the slot
 * of a token another rank stores becomes -1, local_seq_lens is the rank's share of each
 * sequence, and the plan's (virtual, block_size x W) block ids address the rank's physical
 * blocks of block_size tokens.
 *
 * Start-up: rank 0 opens the engine (which sizes the KV pool), then sends a setup message
 * (block count, physical block size, KV dtype, backend) so every rank allocates the same
 * cache; rank 0 ends the job with comm_plan_send_stop before comm_fini. */
#ifndef MLA_ENGINE_DIST_EXEC_H
#define MLA_ENGINE_DIST_EXEC_H

#include <stdint.h>

#include "attn/attn.h"
#include "base/err.h"
#include "dist/comm.h"
#include "engine/plan.h"

struct model;

struct dist_exec {
	struct comm *comm;
	struct model *model;
	struct kv_cache *kv; /* this rank's shard of the paged cache */
	const struct attn_backend *backend;
	int dcp_interleave;
	struct comm_msg msg; /* packing (rank 0) / receiving (others) */
	int64_t *slots;      /* [cap_tokens] this rank's slots */
	int32_t *local_lens; /* [cap_seqs] */
	int cap_tokens, cap_seqs;
};

/* Binds a context (zeroed first) to its rank's model, cache and backend. */
void dist_exec_init(struct dist_exec *d, struct comm *c, struct model *m, struct kv_cache *kv,
		    const struct attn_backend *backend, int dcp_interleave);
void dist_exec_fini(struct dist_exec *d);

/* Runs this rank's shard of plan p (collectives inside: every rank of the job must run the
 * same plans in the same order). logits [n_logits, vocab] is filled on world rank 0. */
int dist_exec_forward(struct dist_exec *d, const struct step_plan *p, float *logits, struct err *e);

/* The engine_forward_hook of rank 0 (ctx = struct dist_exec): sends the plan, then runs the
 * forward. A failure in the middle of a step ends the whole job (comm_abort): the other
 * ranks may be waiting inside a collective. */
int dist_exec_hook(void *ctx, const struct step_plan *p, float *logits, struct err *e);

/* Rank 0, once the engine exists: tells every rank how to allocate its KV shard. */
int dist_exec_send_setup(struct dist_exec *d, const struct kv_cache *kv, const struct attn_backend *backend,
			 struct err *e);

/* A worker rank's loop (world rank > 0, after loading its model shard): receives the setup,
 * allocates kv (the rank's shard, owned by the caller) and runs plans until rank 0's stop.
 * Returns 0 after the stop, -1 on an error (the caller ends the job). */
int dist_exec_serve(struct dist_exec *d, struct model *model, struct kv_cache *kv, struct err *e);

#endif
