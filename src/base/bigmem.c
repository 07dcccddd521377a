#include "base/bigmem.h"

#include "base/env.h"
#include "base/log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

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
	if (bigmem_hugepages())
		madvise(p, len, MADV_HUGEPAGE);
	return p;
}

/* Under AddressSanitizer a slab keeps its buffers checked as malloc's are: a chunk is poisoned
 * until handed out, and each buffer is followed by a poisoned redzone. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLAB_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(SLAB_ASAN)
#include <sanitizer/asan_interface.h>
#define SLAB_REDZONE ((size_t)64)
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define SLAB_REDZONE ((size_t)0)
#endif

void *bigmem_slab_alloc(struct bigmem_slab *s, size_t bytes)
{
	if (bytes >= BIGMEM_MIN)
		return NULL;
	size_t rounded = (bytes + 63) & ~(size_t)63, need = rounded + SLAB_REDZONE;
	if (need > s->left || !s->cur) {
		if (s->n == s->cap) {
			int c = s->cap ? 2 * s->cap : 16;
			char **g = realloc(s->chunks, sizeof *g * (size_t)c);
			if (!g)
				return NULL;
			s->chunks = g;
			s->cap = c;
		}
		char *c = bigmem_alloc(BIGMEM_SLAB_CHUNK);
		if (!c)
			return NULL;
		ASAN_POISON_MEMORY_REGION(c, BIGMEM_SLAB_CHUNK);
		s->chunks[s->n++] = c;
		s->cur = c;
		s->left = BIGMEM_SLAB_CHUNK;
	}
	void *p = s->cur;
	ASAN_UNPOISON_MEMORY_REGION(p, rounded); /* as much as bigmem_alloc's aligned_alloc gave */
	s->cur += need;
	s->left -= need;
	return p;
}

void bigmem_slab_free(struct bigmem_slab *s)
{
	for (int i = 0; i < s->n; i++) {
		ASAN_UNPOISON_MEMORY_REGION(s->chunks[i], BIGMEM_SLAB_CHUNK); /* the next mapping there */
		bigmem_free(s->chunks[i], BIGMEM_SLAB_CHUNK);
	}
	free(s->chunks);
	*s = (struct bigmem_slab){0};
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

void bigmem_populate(void *p, size_t bytes)
{
	if (!p || !bytes)
		return;
	size_t pg = 4096;
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1), b = ((uintptr_t)p + bytes + pg - 1) & ~(uintptr_t)(pg - 1);
	if (madvise((void *)a, b - a, MADV_POPULATE_WRITE) == 0)
		return;
	for (size_t i = 0; i < bytes; i += pg) /* older kernels: EINVAL */
		((volatile unsigned char *)p)[i] = 0;
}

bool bigmem_hugepages_pay(double huge_ms, double small_ms) { return huge_ms <= 2 * small_ms; }

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The first touch of 2 MB, one write per 4 KB, as advised (best of two fresh 2 MB regions):
 * a huge page faults once and zeroes 2 MB, 4 KB pages fault 512 times. */
static double first_touch_ms(int advice)
{
	size_t len = 3 * HUGE;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	char *a = (char *)(((size_t)p + HUGE - 1) & ~(HUGE - 1)); /* 2 MB aligned: 2 whole regions */
	madvise(a, 2 * HUGE, advice);
	double best = -1;
	for (int k = 0; k < 2; k++) {
		volatile char *q = a + (size_t)k * HUGE;
		double t0 = now_ms();
		for (size_t i = 0; i < HUGE; i += 4096)
			q[i] = 1;
		double t = now_ms() - t0;
		if (best < 0 || t < best)
			best = t;
	}
	munmap(p, len);
	return best;
}

static bool hugepages_on, hugepages_measured;
static double huge_ms, small_ms;

static void hugepages_decide(void)
{
	const char *hp = env_get(ENV_HUGEPAGES);
	if (hp && *hp) {
		hugepages_on = strcmp(hp, "0") != 0;
		return;
	}
	huge_ms = first_touch_ms(MADV_HUGEPAGE);
	small_ms = first_touch_ms(MADV_NOHUGEPAGE);
	hugepages_on = huge_ms < 0 || small_ms < 0 || bigmem_hugepages_pay(huge_ms, small_ms);
	hugepages_measured = true;
}

bool bigmem_hugepages(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, hugepages_decide);
	return hugepages_on;
}

static void hugepages_log(void)
{
	bigmem_hugepages();
	if (!hugepages_measured) /* MLASERVE_HUGEPAGES decided */
		return;
	LOG_I("bigmem", "huge pages %s: the first touch of 2 MB took %.2f ms as a huge page, %.2f ms as 4 KB pages%s",
	      hugepages_on ? "on" : "off", huge_ms, small_ms,
	      hugepages_on ? "" : " (a host that backs memory lazily; MLASERVE_HUGEPAGES=1 forces them)");
}

void bigmem_log_hugepages(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, hugepages_log);
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

/* "123", "64K", "512M", "2G" (powers of 1024); 0 when malformed */
static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = *end == 'K' || *end == 'k'   ? 10
		    : *end == 'M' || *end == 'm' ? 20
		    : *end == 'G' || *end == 'g' ? 30
						 : 0;
	if (end == s || (shift && end[1]) || (!shift && *end))
		return 0;
	return (size_t)(v << shift);
}

/* the first unsigned number of file path after prefix (NULL: the file's first), or 0 */
static unsigned long long read_number(const char *path, const char *prefix)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char line[256];
	unsigned long long v = 0;
	size_t pl = prefix ? strlen(prefix) : 0;
	while (fgets(line, sizeof line, f))
		if (!prefix || !strncmp(line, prefix, pl)) {
			v = strtoull(line + pl, NULL, 10); /* "max" reads as 0: no limit */
			break;
		}
	fclose(f);
	return v;
}

/* What is left under this process's cgroup memory limit, page cache counted as free (the
 * kernel reclaims it before it fails an allocation), or 0 without a limit: cgroup v2
 * (memory.max, memory.current, memory.stat "file") or v1 (memory.limit_in_bytes,
 * memory.usage_in_bytes, memory.stat "total_cache"), at the path /proc/self/cgroup names */
static size_t cgroup_left(void)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	if (!f)
		return 0;
	char line[512], dir[600] = "";
	bool v1 = false;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		*b = 0;
		const char *ctrl = a + 1, *path = b + 1;
		if (!strcmp(path, "/"))
			path = "";
		if (strstr(ctrl, "memory") &&
		    (!strcmp(ctrl, "memory") || strstr(ctrl, "memory,") || strstr(ctrl, ",memory"))) {
			snprintf(dir, sizeof dir, "/sys/fs/cgroup/memory%s", path);
			v1 = true;
			break;
		}
		if (!*ctrl && !strncmp(line, "0", 1))
			snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", path);
	}
	fclose(f);
	if (!*dir)
		return 0;
	char p1[700], p2[700], p3[700];
	snprintf(p1, sizeof p1, "%s/%s", dir, v1 ? "memory.limit_in_bytes" : "memory.max");
	snprintf(p2, sizeof p2, "%s/%s", dir, v1 ? "memory.usage_in_bytes" : "memory.current");
	snprintf(p3, sizeof p3, "%s/memory.stat", dir);
	unsigned long long limit = read_number(p1, NULL), used = read_number(p2, NULL);
	unsigned long long cache = read_number(p3, v1 ? "total_cache " : "file ");
	if (limit == 0 || limit >= (1ull << 62)) /* "max", or v1's page-rounded LLONG_MAX: no limit */
		return 0;
	return limit + cache > used ? (size_t)(limit + cache - used) : 1;
}

size_t bigmem_available(void)
{
	const char *env = env_get(ENV_MEM_AVAILABLE);
	size_t forced = env && *env ? parse_size(env) : 0;
	if (forced)
		return forced;
	if (env && *env)
		LOG_W("mem", "MLASERVE_MEM_AVAILABLE=%s is not a size (e.g. 8G): ignored", env);
	size_t avail = (size_t)read_number("/proc/meminfo", "MemAvailable:") * 1024, left = cgroup_left();
	if (left && (!avail || left < avail))
		avail = left;
	return avail ? avail : (size_t)4 << 30;
}
