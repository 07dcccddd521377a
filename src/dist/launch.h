/* Self-launch: `mlaserve CMD ... -tp T` started without mpirun re-executes itself as T ranks
 * on this machine under Open MPI's mpirun; started under mpirun (one host or several) it
 * keeps the ranks it was given. */
#ifndef MLA_DIST_LAUNCH_H
#define MLA_DIST_LAUNCH_H

#include "base/err.h"

/* Set in the ranks of a self-launch; seeing it without a launcher means the launch failed. */
#define DIST_LAUNCH_ENV "MLASERVE_DIST_LAUNCHED"
/* Overrides the mpirun program (default: "mpirun" on PATH). */
#define DIST_MPIRUN_ENV "MLASERVE_MPIRUN"
/* Seconds mpirun has to end after a stop signal before it is killed (default 20). */
#define DIST_GRACE_ENV "MLASERVE_MPIRUN_GRACE"

/* Call early, before threads or files are opened, with the sub-command's argc/argv as
 * cli/commands.h passes them (argv[0] = the command name, e.g. "serve"). Returns 0 when the
 * caller should go on in this process (n_ranks <= 1, or already under a launcher).
 * Otherwise runs
 * `mpirun -np n_ranks --allow-run-as-root --oversubscribe --bind-to none
 *  -x OMPI_MCA_mpi_yield_when_idle=1 -x MLASERVE_DIST_LAUNCHED=1 /proc/self/exe argv[0..]`
 * as its child, waits for it and exits with its status (128 + N when a signal N ended it);
 * it only returns (-1, e set) when mpirun cannot be run. mpirun owns the job: it forwards
 * SIGTERM/SIGINT to every rank, and a rank that dies abnormally aborts all of them. This
 * process passes the stop signals it is sent on to mpirun, kills mpirun if it has not
 * ended MLASERVE_MPIRUN_GRACE seconds (default 20) after the first, and takes mpirun (so
 * every rank) down with it if it is killed itself. */
int dist_maybe_relaunch(int argc, char **argv, int n_ranks, struct err *e);

/* Builds the mpirun argument vector into out[cap] (NULL-terminated) without executing it;
 * returns the number of arguments or -1 if cap is too small. exe is the program to run;
 * argv[0..argc) follow it. */
int dist_launch_argv(const char *mpirun, const char *exe, int argc, char **argv, int n_ranks,
		     char *np_buf, int np_cap, char **out, int cap);

#endif
