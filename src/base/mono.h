/* Clocks. The monotonic clock in seconds: for durations, rates and deadlines (never wall time). */
#ifndef MLA_BASE_MONO_H
#define MLA_BASE_MONO_H

#include <time.h>

static inline double mono_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (all threads) in seconds: for benchmarks on a shared machine. */
static inline double proc_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
