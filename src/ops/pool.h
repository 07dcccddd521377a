/* Fixed thread pool for data-parallel kernels. After a job a worker polls for the next one
 * for at most ~150 us (a decode step calls pool_for back to back, and a wake-up costs tens
 * of us on a shared machine), then sleeps on a condition variable: an idle process spins
 * no longer than that. pool_for blocks until every range is done. */
#ifndef MLA_OPS_POOL_H
#define MLA_OPS_POOL_H

#include "base/err.h"

struct pool;

/* n_threads <= 0: the number of CPUs this process may run on. */
int pool_new(int n_threads, struct pool **out, struct err *e);
void pool_free(struct pool *p);
int pool_size(const struct pool *p);

/* Splits [0, n) into pool_size() contiguous ranges (at least `grain` items each, except the
 * last) and runs fn(ctx, begin, end, tid) on them, the caller's thread taking one range. Range
 * t always runs with tid t, so per-tid buffers and results do not depend on timing. Once its
 * own range is done the caller runs every range whose worker has not started it (a claim per
 * range): a worker that is asleep or kept off its core by another process then costs no wait
 * for its wake-up at each of a step's hundreds of jobs. A NULL pool runs fn(ctx, 0, n, 0)
 * inline. Not reentrant: do not call pool_for from fn. */
void pool_for(struct pool *p, int n, int grain, void (*fn)(void *ctx, int begin, int end, int tid), void *ctx);

#endif
