/* The ranks of a -tp/-dcp job, as the sub-commands start them: the flags checked against
 * the model, the relaunch under mpirun, the world joined, and the worker ranks' loop (model
 * shard from the flags, then engine/dist_exec.h's plans until rank 0 stops). */
#ifndef MLA_SETUP_RANKS_H
#define MLA_SETUP_RANKS_H

#include "base/err.h"
#include "dist/comm.h"
#include "setup/engine_args.h"

/* Checks -tp/-dcp/interleave against the model before any rank starts: tp divides the
 * heads, dcp divides tp, the interleave divides the block size (the --block-size flag or the
 * backend's default). Reads only config.json. */
int ranks_check_args(const struct engine_args *a, struct err *e);

/* A sub-command's start with a->tp_size > 1, before any thread exists: checks the flags
 * against the model, re-executes the process as tp_size ranks under mpirun when not started
 * by a launcher (does not return then), joins the world (c) and sets a->comm, a->tp_rank and
 * a->threads for this rank. argv as the sub-command got it (argv[0] = its name). */
int ranks_start(int argc, char **argv, struct engine_args *a, struct comm *c, struct err *e);

/* A worker rank (world rank > 0) of `generate`/`serve`: loads its model shard from a, waits
 * for the setup, allocates its KV shard and runs plans until rank 0's stop. SIGINT/SIGTERM
 * are blocked (rank 0 decides when the job ends). Returns 0 after the stop. */
int ranks_worker_run(const struct engine_args *a, struct comm *c, struct err *e);

/* Threads for one rank's pool: the --threads value, else the CPUs shared by the ranks on
 * this host (at least 1). */
int ranks_threads(int threads_flag, const struct comm *c);

#endif
