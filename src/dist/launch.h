/* Self-launch: `mlaserve CMD ... -tp T` started without mpirun re-executes itself as T ranks
 * on this machine under Open MPI's mpirun; started under mpirun (one host or several) it
 * keeps the ranks it was given. */
#ifndef MLA_DIST_LAUNCH_H
#define MLA_DIST_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/env.h"
#include "base/err.h"

/* Set in the ranks of a self-launch; seeing it without a launcher means the launch failed. */
#define DIST_LAUNCH_ENV ENV_NAME_DIST_LAUNCHED
/* Overrides the mpirun program (default: "mpirun" on PATH). */
#define DIST_MPIRUN_ENV ENV_NAME_MPIRUN
/* Seconds mpirun has to end after its last rank did before it is killed (default 10). */
#define DIST_GRACE_ENV ENV_NAME_MPIRUN_GRACE

/* Call early, before threads or files are opened, with the sub-command's argc/argv as
 * app/commands.h passes them (argv[0] = the command name, e.g. "serve"). Returns 0 when the
 * caller should go on in this process (n_ranks <= 1, or already under a launcher).
 * Otherwise replaces the process with
 * `mpirun -np n_ranks --allow-run-as-root --oversubscribe --bind-to none
 *  --mca odls_base_sigkill_timeout 3 -x OMPI_MCA_mpi_yield_when_idle=1
 *  -x MLASERVE_DIST_LAUNCHED=1 /proc/self/exe argv[0..]`
 * and only returns (-1, e set) when that fails. mpirun then owns the job: it forwards
 * SIGTERM/SIGINT to every rank, and a rank that dies abnormally aborts all of them. A
 * watchdog process forked first kills mpirun if it has not ended MLASERVE_MPIRUN_GRACE
 * seconds (default 10) after its last rank did (mpirun can hang in its own shutdown). */
int dist_maybe_relaunch(int argc, char **argv, int n_ranks, struct err *e);

/* Builds the mpirun argument vector into out[cap] (NULL-terminated) without executing it;
 * returns the number of arguments or -1 if cap is too small. exe is the program to run;
 * argv[0..argc) follow it. */
int dist_launch_argv(const char *mpirun, const char *exe, int argc, char **argv, int n_ranks, char *np_buf, int np_cap,
		     char **out, int cap);

/* The ranks of this job that run on this machine, as mpirun started them (its children,
 * each with OMPI_COMM_WORLD_RANK in its environment): pids[r] for r < n, 0 where rank r is
 * not found here. Call from a rank; returns how many were found. */
int dist_local_ranks(pid_t *pids, int n);
/* Starts a thread that learns how each of pids ends the moment it does (pidfds). */
void dist_rank_watch(const pid_t *pids, int n);
/* Whether the process pid has ended; *how then says how when it can still be read ("was
 * killed by signal 9 (Killed)", "exited with status 1"), else "ended". */
bool dist_rank_ended(pid_t pid, char *how, size_t n);

#endif
