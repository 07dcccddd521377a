#include "ops/scratch.h"

#include <pthread.h>
#include <stdlib.h>

struct scratch {
	void *p[OPS_SCRATCH_N];
	size_t n[OPS_SCRATCH_N];
	int registered;
};

static _Thread_local struct scratch tl;
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void release(void *arg)
{
	struct scratch *s = arg;
	for (int i = 0; i < OPS_SCRATCH_N; i++) {
		free(s->p[i]);
		s->p[i] = NULL;
		s->n[i] = 0;
	}
	s->registered = 0;
}

/* the main thread runs no key destructor: freed at exit instead */
static void release_main(void) { release(&tl); }

static void make_key(void)
{
	pthread_key_create(&key, release);
	atexit(release_main); /* runs in the exiting thread: frees that thread's buffers */
}

void *ops_scratch(enum ops_scratch_id id, size_t bytes)
{
	if (tl.n[id] >= bytes)
		return tl.p[id];
	pthread_once(&once, make_key);
	if (!tl.registered) {
		/* the key's destructor frees a worker's buffers when it exits */
		if (pthread_setspecific(key, &tl))
			return NULL;
		tl.registered = 1;
	}
	free(tl.p[id]);
	tl.n[id] = 0;
	size_t sz = (bytes + 63) & ~(size_t)63;
	tl.p[id] = aligned_alloc(64, sz);
	if (tl.p[id])
		tl.n[id] = sz;
	return tl.p[id];
}
