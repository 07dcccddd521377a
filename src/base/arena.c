#include "base/arena.h"

#include <stdlib.h>

#include "base/err.h"

int arena_init(struct arena *a, size_t cap)
{
	a->base = aligned_alloc(64, (cap + 63) & ~(size_t)63);
	a->cap = a->base ? cap : 0;
	a->used = a->high_water = 0;
	return a->base ? 0 : -1;
}

void arena_fini(struct arena *a)
{
	free(a->base);
	a->base = NULL;
	a->cap = a->used = 0;
}

void *arena_alloc(struct arena *a, size_t n)
{
	size_t off = (a->used + 63) & ~(size_t)63;
	CHECK(off + n <= a->cap);
	a->used = off + n;
	if (a->used > a->high_water)
		a->high_water = a->used;
	return a->base + off;
}
