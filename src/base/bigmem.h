/* The model's large buffers (packed, quantized or dummy weights) as anonymous mappings with
 * transparent huge pages advised: fewer TLB misses while the GEMMs stream them, where they
 * pay: on a VM whose host backs memory lazily (Firecracker with free page reporting) a fresh
 * huge page's first touch takes milliseconds and loads were several times slower
 * (docs/PERFORMANCE.md). So the first large allocation measures it
 * (bigmem_hugepages); MLASERVE_HUGEPAGES=0 or 1 decides instead. */
#ifndef MLA_BASE_BIGMEM_H
#define MLA_BASE_BIGMEM_H

#include <stdbool.h>
#include <stddef.h>

#define BIGMEM_MIN ((size_t)4 << 20) /* smaller requests: aligned_alloc */

/* bytes, 64-byte aligned and zero-filled (a mapping's pages are zero until first written);
 * NULL if out of memory. Free with bigmem_free and the same size. */
void *bigmem_alloc(size_t bytes);
void bigmem_free(void *p, size_t bytes);
/* Small buffers (under BIGMEM_MIN) that live as long as their owner, carved out of shared
 * chunks of bigmem (huge pages where they pay) instead of 4 KB pages each: small packed weights
 * such as V2-Lite's fp8 experts (2.9 MB each) on 4 KB pages slowed its decode with TLB misses
 * (docs/PERFORMANCE.md §2.5). A zero-initialized slab is empty; its buffers are freed together. */
struct bigmem_slab {
	char **chunks;
	int n, cap;
	char *cur; /* the free part of the last chunk */
	size_t left;
};
#define BIGMEM_SLAB_CHUNK ((size_t)32 << 20)
/* bytes (< BIGMEM_MIN), 64-byte aligned and zero-filled; NULL if out of memory or too large */
void *bigmem_slab_alloc(struct bigmem_slab *s, size_t bytes);
void bigmem_slab_free(struct bigmem_slab *s);

/* Writes the pages of [p, p + bytes) in, contents unchanged: MADV_POPULATE_WRITE where Linux has
 * it (5.14; much faster than a write per 4 KB page), else a zero written per page of
 * a buffer still all zero (bigmem_alloc's). */
void bigmem_populate(void *p, size_t bytes);

/* Whether large buffers get MADV_HUGEPAGE: MLASERVE_HUGEPAGES=0/1 when set, else decided once
 * per process by timing the first touch of 2 MB as one huge page and as 4 KB pages (~1-50 ms;
 * bigmem_log_hugepages logs it), with bigmem_hugepages_pay. */
bool bigmem_hugepages(void);
/* Logs that measurement once (deciding first if nothing has yet), for a start-up summary:
 * logged as it happened, it broke a bad checkpoint's one-line error. */
void bigmem_log_hugepages(void);
/* The rule: huge pages unless their first touch costs more than twice that of 4 KB pages
 * (a fresh huge page normally costs less: one fault instead of 512). */
bool bigmem_hugepages_pay(double huge_ms, double small_ms);

/* Memory this process may still take: /proc/meminfo's MemAvailable, or less under a cgroup
 * limit (a container: v2 memory.max - memory.current, or v1 memory.limit_in_bytes -
 * memory.usage_in_bytes, page cache counted free), or MLASERVE_MEM_AVAILABLE (bytes, or with
 * a K/M/G suffix: powers of 1024) when set. 4 GiB when none can be read. */
size_t bigmem_available(void);

#endif
