#include "base/arena.h"

#include "base/bigmem.h"
#include "base/err.h"

static size_t alloc_bytes(size_t cap) { return (cap + 63) & ~(size_t)63; }

/* The step path writes the arena's pages on the first step that reaches them: as page faults
 * in the middle of the first request's GEMMs (0.3-0.4 s of a 512-token prefill, 1.25x, on a
 * 2-vCPU VM). So they are populated here, once, at start-up (2.3 GB, V3 attention at 2048
 * tokens: 0.1-0.4 s); huge pages where they pay (bigmem.h) also spare the TLB. */
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
