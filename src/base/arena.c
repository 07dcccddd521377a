#include "base/arena.h"

#include "base/bigmem.h"
#include "base/err.h"

static size_t alloc_bytes(size_t cap) { return (cap + 63) & ~(size_t)63; }

/* The step path writes the arena's pages on the first step that reaches them: as page faults
 * in the middle of the first request's GEMMs, which slowed its prefill. So they are populated
 * here, once, at start-up; huge pages where they pay (bigmem.h) also spare the TLB. */
int arena_init(struct arena *a, size_t cap)
{
	size_t bytes = alloc_bytes(cap);
	a->base = bigmem_alloc(bytes);
	a->cap = a->base ? cap : 0;
	a->used = a->high_water = 0;
	if (!a->base)
		return -1;
	if (bytes >= BIGMEM_MIN) /* smaller ones came zeroed by memset */
		bigmem_populate(a->base, bytes);
	return 0;
}

void arena_fini(struct arena *a)
{
	bigmem_free(a->base, alloc_bytes(a->cap));
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
