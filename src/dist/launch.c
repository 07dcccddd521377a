/* Self-launch under mpirun. See launch.h. */
#include "dist/launch.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/comm.h"

int dist_launch_argv(const char *mpirun, const char *exe, int argc, char **argv, int n_ranks,
		     char *np_buf, int np_cap, char **out, int cap)
{
	static const char *const fixed[] = {
		"--allow-run-as-root", /* CI and containers run as root */
		"--oversubscribe",     /* more ranks than cores is fine for tests */
		"--bind-to", "none",   /* each rank runs its own thread pool */
		"-x", "OMPI_MCA_mpi_yield_when_idle=1",
		"-x", DIST_LAUNCH_ENV "=1",
	};
	int n_fixed = (int)(sizeof fixed / sizeof fixed[0]);
	/* mpirun "-np" N + fixed + exe + argv[0..argc) + NULL */
	if (argc < 0 || cap < 3 + n_fixed + 1 + argc + 1)
		return -1;
	int n = 0;
	snprintf(np_buf, (size_t)np_cap, "%d", n_ranks);
	out[n++] = (char *)mpirun;
	out[n++] = "-np";
	out[n++] = np_buf;
	for (int i = 0; i < n_fixed; i++)
		out[n++] = (char *)fixed[i];
	out[n++] = (char *)exe;
	for (int i = 0; i < argc; i++)
		out[n++] = argv[i];
	out[n] = NULL;
	return n;
}

int dist_maybe_relaunch(int argc, char **argv, int n_ranks, struct err *e)
{
	if (n_ranks <= 1 || comm_under_launcher())
		return 0;
	if (getenv(DIST_LAUNCH_ENV))
		return err_set(e, "self-launch of %d ranks: %s is set but no mpi launcher variables are (mpirun did not start the ranks)",
			       n_ranks, DIST_LAUNCH_ENV);
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (k <= 0)
		return err_set(e, "self-launch: cannot read /proc/self/exe: %s", strerror(errno));
	exe[k] = 0;
	const char *mpirun = getenv(DIST_MPIRUN_ENV);
	if (!mpirun || !*mpirun)
		mpirun = "mpirun";
	int cap = argc + 32;
	char **av = calloc((size_t)cap, sizeof *av);
	if (!av)
		return err_set(e, "self-launch: out of memory");
	char np[16];
	if (dist_launch_argv(mpirun, exe, argc, argv, n_ranks, np, sizeof np, av, cap) < 0) {
		free(av);
		return err_set(e, "self-launch: argument vector too small");
	}
	fflush(NULL);
	execvp(mpirun, av);
	int err = errno;
	free(av);
	return err_set(e, "self-launch of %d ranks: cannot run %s: %s (install openmpi-bin, or start under mpirun -np %d)",
		       n_ranks, mpirun, strerror(err), n_ranks);
}
