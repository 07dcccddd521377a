/* Self-launch under mpirun. See launch.h. */
#include "dist/launch.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
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

#include "base/env.h"
#include "dist/comm.h"

int dist_launch_argv(const char *mpirun, const char *exe, int argc, char **argv, int n_ranks, char *np_buf, int np_cap,
		     char **out, int cap)
{
	static const char *const fixed[] = {
		"--allow-run-as-root", /* CI and containers run as root */
		"--oversubscribe",     /* more ranks than cores is fine for tests */
		"--bind-to",
		"none", /* each rank runs its own thread pool */
		/* the time a rank has between mpirun's SIGTERM and its SIGKILL (default 1 s):
		 * rank 0 answers its open requests in it when another rank died */
		"--mca",
		"odls_base_sigkill_timeout",
		"3",
		"-x",
		"OMPI_MCA_mpi_yield_when_idle=1",
		"-x",
		DIST_LAUNCH_ENV "=1",
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

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static bool read_stat(pid_t pid, char *state, pid_t *ppid, int *exit_code);

/* Whether process pid is a rank (OMPI_COMM_WORLD_RANK in its environment) still running. */
static bool live_rank(pid_t pid)
{
	char st, path[64], env[65536];
	pid_t pp;
	int code;
	if (!read_stat(pid, &st, &pp, &code) || st == 'Z' || st == 'X')
		return false;
	snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t len = fread(env, 1, sizeof env - 1, f);
	fclose(f);
	env[len] = 0;
	for (size_t i = 0; i < len; i += strlen(env + i) + 1)
		if (!strncmp(env + i, "OMPI_COMM_WORLD_RANK=", 21))
			return true;
	return false;
}

/* The running ranks among mpirun's children (/proc/PID/task/TID/children, every thread). */
static int count_ranks(pid_t mpirun)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/task", (int)mpirun);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/task/%.20s/children", (int)mpirun, de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		int pid;
		while (fscanf(f, "%d", &pid) == 1)
			n += live_rank((pid_t)pid);
		fclose(f);
	}
	closedir(d);
	return n;
}

/* The watchdog, a small process forked before mpirun is exec'd (so its child): once every
 * rank it saw has ended, mpirun has DIST_GRACE_ENV seconds (default 10) to end too, else
 * it is killed. mpirun can hang in its own shutdown (seen after a SIGTERM on a loaded
 * 2-core machine: the ranks ended, mpirun never did), and then nothing else ends the job.
 * It dies with mpirun (PR_SET_PDEATHSIG). */
static void watchdog(pid_t mpirun, const char *name)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_NAME, "mlaserve-watch"); /* told apart from the ranks in ps / pgrep */
	if (getppid() != mpirun)
		_exit(0);
	/* the terminal's signals are for the job, not for this process */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	const char *g = env_get(ENV_MPIRUN_GRACE);
	double grace = g && atof(g) > 0 ? atof(g) : 10, none_since = 0;
	bool seen = false;
	struct timespec nap = {0, 200000000L};
	for (;;) {
		nanosleep(&nap, NULL);
		if (getppid() != mpirun)
			_exit(0);
		int n = count_ranks(mpirun);
		if (n < 0)
			_exit(0);
		if (n > 0) {
			seen = true;
			none_since = 0;
			continue;
		}
		if (!seen)
			continue;
		if (none_since == 0)
			none_since = now_s();
		else if (now_s() - none_since > grace) {
			fprintf(stderr, "mlaserve: %s did not end %.0f s after its last rank did: killing it\n", name,
				grace);
			kill(mpirun, SIGKILL);
			_exit(0);
		}
	}
}

int dist_maybe_relaunch(int argc, char **argv, int n_ranks, struct err *e)
{
	if (n_ranks <= 1 || comm_under_launcher())
		return 0;
	if (env_get(ENV_DIST_LAUNCHED))
		return err_set(e,
			       "self-launch of %d ranks: %s is set but no mpi launcher variables are (mpirun did not "
			       "start the ranks)",
			       n_ranks, DIST_LAUNCH_ENV);
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (k <= 0)
		return err_set(e, "self-launch: cannot read /proc/self/exe: %s", strerror(errno));
	exe[k] = 0;
	const char *mpirun = env_get(ENV_MPIRUN);
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
	pid_t self = getpid();
	pid_t dog = fork();
	if (dog == 0) {
		watchdog(self, mpirun);
		_exit(0);
	}
	execvp(mpirun, av);
	int err = errno;
	free(av);
	if (dog > 0) {
		kill(dog, SIGKILL);
		waitpid(dog, NULL, 0);
	}
	return err_set(
		e, "self-launch of %d ranks: cannot run %s: %s (install openmpi-bin, or start under mpirun -np %d)",
		n_ranks, mpirun, strerror(err), n_ranks);
}

/* /proc/<pid>/stat: the state and, for a zombie, the exit code (fields 3, 4 and 52). */
static bool read_stat(pid_t pid, char *state, pid_t *ppid, int *exit_code)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (!p || sscanf(p + 1, " %c %d", state, (int *)ppid) != 2)
		return false;
	*exit_code = -1;
	int field = 2;
	for (const char *q = p + 1; *q; q++)
		if (*q == ' ' && ++field == 52) {
			*exit_code = atoi(q + 1);
			break;
		}
	return true;
}

int dist_local_ranks(pid_t *pids, int n)
{
	memset(pids, 0, (size_t)n * sizeof *pids);
	pid_t parent = getppid();
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	int found = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		char st;
		pid_t pp;
		int code;
		if (*end || pid <= 0 || !read_stat((pid_t)pid, &st, &pp, &code) || pp != parent)
			continue;
		char path[64], env[65536];
		snprintf(path, sizeof path, "/proc/%ld/environ", pid);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(env, 1, sizeof env - 1, f);
		fclose(f);
		env[len] = 0;
		for (size_t i = 0; i < len; i += strlen(env + i) + 1) {
			if (strncmp(env + i, "OMPI_COMM_WORLD_RANK=", 21))
				continue;
			int r = atoi(env + i + 21);
			if (r >= 0 && r < n && !pids[r]) {
				pids[r] = (pid_t)pid;
				found++;
			}
			break;
		}
	}
	closedir(d);
	return found;
}

/* How a zombie ended, from its exit code. */
static void describe(int code, char *how, size_t n)
{
	if (code >= 0 && WIFSIGNALED(code))
		snprintf(how, n, "was killed by signal %d (%s)", WTERMSIG(code), strsignal(WTERMSIG(code)));
	else if (code >= 0 && WIFEXITED(code))
		snprintf(how, n, "exited with status %d", WEXITSTATUS(code));
	else
		snprintf(how, n, "ended (mpirun reports how)");
}

/* The watch thread: woken through pidfds the moment a rank ends, it reads the zombie's
 * exit code before mpirun reaps it (dist_rank_ended alone often comes too late for that). */
#define WATCH_MAX 64
static struct {
	int n;
	pid_t pid[WATCH_MAX];
	int fd[WATCH_MAX];
	char how[WATCH_MAX][96];
	atomic_bool done[WATCH_MAX];
} watch;

static void *watch_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[WATCH_MAX];
		int n = 0;
		for (int i = 0; i < watch.n; i++)
			if (!atomic_load(&watch.done[i]))
				p[n++] = (struct pollfd){.fd = watch.fd[i], .events = POLLIN};
		if (!n || (poll(p, (nfds_t)n, -1) < 0 && errno != EINTR))
			return NULL;
		for (int i = 0; i < watch.n; i++) {
			struct pollfd q = {.fd = watch.fd[i], .events = POLLIN};
			if (atomic_load(&watch.done[i]) || poll(&q, 1, 0) <= 0)
				continue;
			char st;
			pid_t pp;
			int code = -1;
			if (!read_stat(watch.pid[i], &st, &pp, &code))
				code = -1;
			describe(code, watch.how[i], sizeof watch.how[i]);
			atomic_store(&watch.done[i], true);
		}
	}
}

void dist_rank_watch(const pid_t *pids, int n)
{
	if (watch.n)
		return;
	for (int i = 0; i < n && watch.n < WATCH_MAX; i++) {
		if (pids[i] <= 0)
			continue;
		int fd = (int)syscall(SYS_pidfd_open, pids[i], 0);
		if (fd < 0)
			continue; /* an older kernel: dist_rank_ended reads /proc alone */
		watch.pid[watch.n] = pids[i];
		watch.fd[watch.n++] = fd;
	}
	pthread_t th;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (watch.n && pthread_create(&th, &at, watch_main, NULL))
		watch.n = 0;
	pthread_attr_destroy(&at);
}

bool dist_rank_ended(pid_t pid, char *how, size_t n)
{
	char st;
	pid_t pp;
	int code;
	if (pid <= 0)
		return false;
	for (int i = 0; i < watch.n; i++)
		if (watch.pid[i] == pid && atomic_load(&watch.done[i])) {
			snprintf(how, n, "%s", watch.how[i]);
			return true;
		}
	if (!read_stat(pid, &st, &pp, &code) || pp != getppid()) { /* reaped (the pid maybe reused) */
		describe(-1, how, n);
		return true;
	}
	if (st != 'Z' && st != 'X')
		return false;
	describe(code, how, n);
	return true;
}
