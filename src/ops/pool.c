#include "ops/pool.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/mono.h"

/* After a job, a worker (and the caller waiting for the others) polls for this long before
 * it sleeps: a decode step issues pool_for calls back to back, and waking a sleeping thread
 * costs tens of us per call on a shared machine; bounded, so an idle server's threads still
 * sleep. */
#define SPIN_S 150e-6

struct pool {
	int n_threads; /* including the caller */
	pthread_t *threads;
	pthread_mutex_t mu;
	pthread_cond_t work_cv, done_cv;
	/* the job being run; generation changes once per pool_for. Written under mu; generation,
	 * pending and stop are also polled without it (spin) */
	atomic_ulong generation;
	void (*fn)(void *, int, int, int);
	void *ctx;
	int n, chunk;
	atomic_int pending, stop;
	/* [n_threads] range t of the job is taken (by worker t, or by the caller when worker t
	 * has not started it): each range runs once, with its own tid, on whichever thread is
	 * free, so a worker that a co-tenant keeps off its core costs a wait only if it already
	 * started its range */
	atomic_char *taken;
};

/* Polls for at most SPIN_S until the job after `seen` is posted (or stop), or, with
 * seen == SPIN_DONE, until no range is pending. */
#define SPIN_DONE (~0ul)
static void spin(const struct pool *p, unsigned long seen)
{
	double t0 = 0;
	for (int i = 0;; i++) {
		if (seen == SPIN_DONE ? atomic_load_explicit(&p->pending, memory_order_acquire) == 0
				      : atomic_load_explicit(&p->generation, memory_order_acquire) != seen ||
						atomic_load_explicit(&p->stop, memory_order_relaxed))
			return;
		_mm_pause();
		if ((i & 63) == 63) { /* the clock every 64 pauses */
			double t = mono_now_s();
			if (t0 == 0)
				t0 = t;
			else if (t - t0 > SPIN_S)
				return;
		}
	}
}

static void pool_run_range(struct pool *p, int tid)
{
	int begin = tid * p->chunk, end = begin + p->chunk;
	if (end > p->n)
		end = p->n;
	if (begin < end)
		p->fn(p->ctx, begin, end, tid);
}

/* Runs range r of the job if nobody took it yet; the last range to finish wakes the caller. */
static void pool_try_range(struct pool *p, int r)
{
	if (atomic_exchange_explicit(&p->taken[r], 1, memory_order_acq_rel))
		return;
	pool_run_range(p, r);
	if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_signal(&p->done_cv);
		pthread_mutex_unlock(&p->mu);
	}
}

static void *pool_worker(void *arg)
{
	struct pool *p = arg;
	unsigned long seen = 0;
	pthread_mutex_lock(&p->mu);
	int tid = 0;
	for (int i = 0; i < p->n_threads - 1; i++)
		if (pthread_equal(p->threads[i], pthread_self()))
			tid = i + 1;
	for (;;) {
		while (!p->stop && p->generation == seen)
			pthread_cond_wait(&p->work_cv, &p->mu);
		if (p->stop)
			break;
		seen = p->generation;
		pthread_mutex_unlock(&p->mu);
		pool_try_range(p, tid);
		spin(p, seen); /* the next job, without sleeping */
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int pool_new(int n_threads, struct pool **out, struct err *e)
{
	if (n_threads <= 0) {
		cpu_set_t set;
		n_threads = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
	}
	struct pool *p = calloc(1, sizeof *p);
	if (!p)
		return err_set(e, "thread pool: out of memory");
	p->n_threads = n_threads;
	p->threads = calloc((size_t)n_threads, sizeof *p->threads);
	p->taken = calloc((size_t)n_threads, sizeof *p->taken);
	if (!p->threads || !p->taken) {
		free(p->threads);
		free(p->taken);
		free(p);
		return err_set(e, "thread pool: out of memory");
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work_cv, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	/* hold the lock so workers find their tid only once every handle is stored */
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < n_threads - 1; i++) {
		if (pthread_create(&p->threads[i], NULL, pool_worker, p) != 0) {
			p->n_threads = i + 1;
			pthread_mutex_unlock(&p->mu);
			pool_free(p);
			return err_set(e, "thread pool: cannot start thread %d", i + 1);
		}
	}
	pthread_mutex_unlock(&p->mu);
	*out = p;
	return 0;
}

void pool_free(struct pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->work_cv);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->n_threads - 1; i++)
		pthread_join(p->threads[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work_cv);
	pthread_cond_destroy(&p->done_cv);
	free(p->threads);
	free((void *)p->taken);
	free(p);
}

int pool_size(const struct pool *p) { return p ? p->n_threads : 1; }

void pool_for(struct pool *p, int n, int grain, void (*fn)(void *, int, int, int), void *ctx)
{
	if (n <= 0)
		return;
	if (grain < 1)
		grain = 1;
	int nt = pool_size(p);
	int chunk = (n + nt - 1) / nt;
	if (chunk < grain)
		chunk = grain;
	if (!p || p->n_threads == 1 || chunk >= n) {
		fn(ctx, 0, n, 0);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->ctx = ctx;
	p->n = n;
	p->chunk = chunk;
	atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
	for (int t = 1; t < p->n_threads; t++) /* a late worker's claim sees the job above */
		atomic_store_explicit(&p->taken[t], 0, memory_order_release);
	atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
	pthread_cond_broadcast(&p->work_cv);
	pthread_mutex_unlock(&p->mu);
	pool_run_range(p, 0);
	for (int t = 1; t < p->n_threads; t++) /* the ranges no worker has started yet */
		pool_try_range(p, t);
	spin(p, SPIN_DONE);
	pthread_mutex_lock(&p->mu);
	while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
		pthread_cond_wait(&p->done_cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
