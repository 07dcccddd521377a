/* Bump arena for per-step scratch: the step path never mallocs; reset every step. Its pages
 * are written at init, so no step pays their first touch. */
#ifndef MLA_BASE_ARENA_H
#define MLA_BASE_ARENA_H

#include <stddef.h>

struct arena {
	unsigned char *base;
	size_t cap, used, high_water;
};

int arena_init(struct arena *a, size_t cap); /* 0 ok, -1 out of memory */
void arena_fini(struct arena *a);
/* 64-byte aligned; aborts (CHECK) if the arena was sized too small: that is a sizing bug. */
void *arena_alloc(struct arena *a, size_t n);
static inline void arena_reset(struct arena *a) { a->used = 0; }

#endif
