/* The communicator: MPI ranks (or a world of one without MPI), the TP and DCP groups of
 * docs/mla-dcp.md §4.2, the collectives the forward needs, and the step-plan broadcast.
 *
 * Layout: TP groups are consecutive runs of tp ranks; DCP groups are consecutive runs of dcp
 * ranks, so each lies inside one TP group (TP=8, DCP=2: {0,1} {2,3} {4,5} {6,7}).
 *
 * Threading: every comm_* call of one process must come from one thread at a time (MPI is
 * initialised with MPI_THREAD_SERIALIZED); every rank of a group must reach the group's
 * collectives in the same order with the same sizes (the broadcast plan guarantees it). */
#ifndef MLA_DIST_COMM_H
#define MLA_DIST_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Where one rank sits; pure arithmetic over (world_size, world_rank, tp, dcp). */
struct comm_layout {
	int world_rank, world_size;
	int tp_rank, tp_size, tp_group;    /* tp_group = world_rank / tp_size */
	int dcp_rank, dcp_size, dcp_group; /* dcp_group = world_rank / dcp_size */
};

/* Validates tp >= 1, dcp >= 1, tp % dcp == 0, world_size % tp == 0 and fills out. */
int comm_layout_compute(int world_size, int world_rank, int tp, int dcp, struct comm_layout *out, struct err *e);

/* Model-level checks, for the caller once config.json is read: tp divides n_heads, dcp
 * divides tp, interleave >= 1 divides block_size. n_heads <= 0 or block_size <= 0 skip
 * their checks. */
int comm_config_check(int tp, int dcp, int n_heads, int interleave, int block_size, struct err *e);

struct comm_mpi; /* MPI handles; NULL in a world of one */

struct comm {
	int world_rank, world_size;
	int tp_rank, tp_size, tp_group;
	int dcp_rank, dcp_size, dcp_group;
	int local_rank, local_size; /* ranks on this host (for sizing thread pools) */
	bool mpi;                   /* MPI was initialised by comm_init */
	struct comm_mpi *impl;
	void *scratch; /* packing buffer for the collectives, grown to a high-water mark */
	size_t scratch_bytes;
	uint64_t plan_seq; /* plans sent / received so far */
	bool plan_stopped; /* the stop was sent (rank 0) or received */
};

/* True when started by an MPI launcher (mpirun, srun with PMIx): then comm_init uses MPI. */
bool comm_under_launcher(void);

/* Joins the world. Under a launcher: MPI_Init, world size must equal tp (one model replica).
 * Otherwise: a world of one (tp must be 1; dcp must be 1), no MPI initialisation at all.
 * Sets OMPI_MCA_mpi_yield_when_idle=1 (unless set) so blocked ranks yield the CPU. */
int comm_init(struct comm *c, int tp, int dcp, struct err *e);
/* Frees the groups and finalizes MPI (collective: every rank must call it, so rank 0 sends
 * the stop first when the others wait in comm_plan_recv). A rank that fails in the middle of
 * a step (when the others may be inside a collective) calls comm_abort instead. */
void comm_fini(struct comm *c);
/* Ends every rank of the job now (MPI_Abort), for a rank that cannot go on; returns only in a
 * world of one. */
void comm_abort(struct comm *c, int code);
/* Pre-sizes the packing buffer so the step path does not allocate. */
int comm_reserve(struct comm *c, size_t bytes, struct err *e);
int comm_barrier(struct comm *c, struct err *e);

/* ---- collectives (fp32 unless named otherwise) ---- */

/* TP all-reduce, sum, in place: buf [n] (after o_proj, after the MLP/MoE, embedding). */
int comm_tp_allreduce_sum(struct comm *c, float *buf, size_t n, struct err *e);

/* DCP all-gather along a new leading dimension: send [n] -> recv [dcp_size, n], rank-major
 * (the LSE all-gather of §4.5: lse [B, Hg] -> lses [W, B, Hg]). */
int comm_dcp_allgather(struct comm *c, const float *send, size_t n, float *recv, struct err *e);
/* Same on raw bytes: send [nbytes] -> recv [dcp_size, nbytes] (latent rows in any dtype). */
int comm_dcp_allgather_bytes(struct comm *c, const void *send, size_t nbytes, void *recv, struct err *e);

/* DCP all-gather along an inner dimension: send [n_outer, n_inner] -> recv [n_outer,
 * dcp_size, n_inner], rank-major (the q all-gather of §4.4: q [Td, H, 576] -> [Td, W*H, 576]
 * with n_outer = Td, n_inner = H * 576). */
int comm_dcp_allgather_inner(struct comm *c, const float *send, size_t n_outer, size_t n_inner, float *recv,
			     struct err *e);

/* DCP reduce-scatter (sum) along an inner dimension: send [n_outer, dcp_size, n_inner] ->
 * recv [n_outer, n_inner] = sum over ranks of send[:, dcp_rank, :] (§4.5 step 3: out
 * [B, W*H, 512] -> [B, H, 512] with n_inner = H * 512). recv may not alias send unless
 * dcp_size is 1. */
int comm_dcp_reduce_scatter_inner(struct comm *c, const float *send, size_t n_outer, size_t n_inner, float *recv,
				  struct err *e);

/* TP gather of column slices: rank k holds send [n_rows, cols[k]]; recv [n_rows, sum(cols)]
 * gets rank 0's columns first (vocab-parallel lm_head logits). to_all: every rank receives,
 * else only tp rank 0 (recv may be NULL elsewhere). cols: [tp_size], the same on every rank. */
int comm_tp_gather_cols(struct comm *c, const float *send, size_t n_rows, const int *cols, float *recv, bool to_all,
			struct err *e);

/* ---- step plans: rank 0 -> every rank of the world ---- */

/* A growable byte buffer with bounds-checked reads, for packing a pointer-free plan. */
struct comm_msg {
	uint8_t *data;
	size_t len, cap, pos; /* pos: read cursor */
};

void comm_msg_reset(struct comm_msg *m); /* len = pos = 0, keeps the allocation */
void comm_msg_free(struct comm_msg *m);
int comm_msg_reserve(struct comm_msg *m, size_t cap, struct err *e);
int comm_msg_put(struct comm_msg *m, const void *p, size_t n, struct err *e);
/* Copies the next n bytes to p; fails (naming offsets) if fewer than n remain. */
int comm_msg_get(struct comm_msg *m, void *p, size_t n, struct err *e);

/* Rank 0: sends buf [n] to every other rank (a no-op in a world of one). */
int comm_plan_send(struct comm *c, const void *buf, size_t n, struct err *e);
/* Rank 0: tells every other rank to leave its plan loop. */
int comm_plan_send_stop(struct comm *c, struct err *e);
/* Other ranks: waits for the next plan without spinning (MPI's blocking wait would keep
 * them busy): MPI_Test for 0.1 ms, 50 us naps up to 5 ms, then naps doubling to 1 ms, so an
 * idle server's ranks use little CPU. Returns 1 with the plan in m (pos = 0), 0 on stop
 * (and on every call after it), < 0 on error. */
int comm_plan_recv(struct comm *c, struct comm_msg *m, struct err *e);

#endif
