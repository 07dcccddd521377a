/* The model's large buffers (packed, quantized or dummy weights) as anonymous mappings with
 * transparent huge pages advised: fewer TLB misses while the GEMMs stream them (fp8 decode
 * 1.04-1.06x at batch 1 on bench-v3fp8-2L). MLASERVE_HUGEPAGES=0 leaves the advice out: on a
 * VM whose host backs memory lazily (Firecracker with free page reporting) a fresh huge
 * page's first touch took 6-25 ms, and loads were 4-16x slower (docs/PERFORMANCE.md). */
#ifndef MLA_BASE_BIGMEM_H
#define MLA_BASE_BIGMEM_H

#include <stddef.h>

#define BIGMEM_MIN ((size_t)4 << 20) /* smaller requests: aligned_alloc */

/* bytes, 64-byte aligned and zero-filled (a mapping's pages are zero until first written);
 * NULL if out of memory. Free with bigmem_free and the same size. */
void *bigmem_alloc(size_t bytes);
void bigmem_free(void *p, size_t bytes);

/* Memory this process may still take: /proc/meminfo's MemAvailable, or less under a cgroup
 * limit (a container: v2 memory.max - memory.current, or v1 memory.limit_in_bytes -
 * memory.usage_in_bytes, page cache counted free), or MLASERVE_MEM_AVAILABLE (bytes, or with
 * a K/M/G suffix: powers of 1024) when set. 4 GiB when none can be read. */
size_t bigmem_available(void);

#endif
