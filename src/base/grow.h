/* Growable arrays: room for `need` elements of `size` bytes, the capacity doubling from 16. */
#ifndef MLA_BASE_GROW_H
#define MLA_BASE_GROW_H

#include <stdint.h>
#include <stdlib.h>

/* Returns the array (p, or its moved copy) with *cap >= need, or NULL when out of memory (p
 * then unchanged and still owned by the caller). Use: `T *n = grow_array(a, &cap, k + 1,
 * sizeof *a); if (!n) fail; a = n;` */
static inline void *grow_array(void *p, int *cap, int need, size_t size)
{
	if (need <= *cap)
		return p;
	int c = *cap ? *cap : 16;
	while (c < need)
		c = c > INT32_MAX / 2 ? need : 2 * c;
	void *q = realloc(p, size * (size_t)c);
	if (q)
		*cap = c;
	return q;
}

#endif
