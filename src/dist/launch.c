/* Self-launch under mpirun. See launch.h. */
#include "dist/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
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

/* Forwarded to mpirun as they come from another process (kill); those a terminal sends
 * to its whole foreground group reach mpirun by themselves. */
static const int FORWARDED[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The launched process waits for mpirun and ends as it does. A stop signal is passed on;
 * if mpirun has not ended DIST_GRACE_ENV seconds (default 20) after the first one,
 * it is killed: mpirun can hang in its own shutdown (seen on a loaded 2-core machine),
 * and then nothing else would ever end the job. */
static int supervise(pid_t child, const char *mpirun, const sigset_t *set)
{
	const char *g = getenv(DIST_GRACE_ENV);
	double grace = g && atof(g) > 0 ? atof(g) : 20, deadline = 0;
	for (;;) {
		int st;
		pid_t w = waitpid(child, &st, WNOHANG);
		if (w == child)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		if (w < 0 && errno != EINTR)
			return 1;
		double left = deadline > 0 ? deadline - now_s() : 3600;
		if (deadline > 0 && left <= 0) {
			fprintf(stderr, "mlaserve: %s did not end %.0f s after the stop signal: killing it\n", mpirun, grace);
			kill(child, SIGKILL);
			deadline = 0;
			continue;
		}
		struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
		siginfo_t si;
		int sig = sigtimedwait(set, &si, &ts);
		if (sig <= 0 || sig == SIGCHLD)
			continue;
		if (si.si_code <= 0) /* sent by a process (kill, sigqueue): pass it on */
			kill(child, sig);
		if ((sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT) && deadline == 0)
			deadline = now_s() + grace;
	}
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
	/* the signals this process forwards, blocked before the fork so that none is lost */
	sigset_t set, old;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof FORWARDED / sizeof *FORWARDED; i++)
		sigaddset(&set, FORWARDED[i]);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &old);
	int pfd[2]; /* the exec's failure, reported through a close-on-exec pipe */
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		free(av);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return err_set(e, "self-launch: pipe: %s", strerror(errno));
	}
	pid_t parent = getpid();
	pid_t child = fork();
	if (child == 0) {
		/* mpirun dies with this process (a SIGKILL here then ends every rank, as
		 * mpirun's own death does) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(pfd[0]);
		execvp(mpirun, av);
		int err = errno;
		if (write(pfd[1], &err, sizeof err) < 0)
			_exit(127);
		_exit(127);
	}
	int err = errno;
	free(av);
	close(pfd[1]);
	if (child < 0) {
		close(pfd[0]);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return err_set(e, "self-launch: fork: %s", strerror(err));
	}
	ssize_t got;
	while ((got = read(pfd[0], &err, sizeof err)) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (got == (ssize_t)sizeof err) {
		waitpid(child, NULL, 0);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return err_set(e, "self-launch of %d ranks: cannot run %s: %s (install openmpi-bin, or start under mpirun -np %d)",
			       n_ranks, mpirun, strerror(err), n_ranks);
	}
	exit(supervise(child, mpirun, &set));
}
