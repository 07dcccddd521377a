#include "base/bigmem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE ((size_t)2 << 20)

static size_t mapped_len(size_t bytes) { return (bytes + HUGE - 1) & ~(HUGE - 1); }

void *bigmem_alloc(size_t bytes)
{
	if (bytes < BIGMEM_MIN) {
		void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
		if (p)
			memset(p, 0, bytes);
		return p;
	}
	size_t len = mapped_len(bytes);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	const char *hp = getenv("MLASERVE_HUGEPAGES");
	if (!hp || strcmp(hp, "0"))
		madvise(p, len, MADV_HUGEPAGE);
	return p;
}

void bigmem_free(void *p, size_t bytes)
{
	if (!p)
		return;
	if (bytes < BIGMEM_MIN)
		free(p);
	else
		munmap(p, mapped_len(bytes));
}
