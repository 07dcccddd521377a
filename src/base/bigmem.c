#include "base/bigmem.h"

#include "base/log.h"

#include <stdbool.h>
#include <stdio.h>
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
	const char *env = getenv("MLASERVE_MEM_AVAILABLE");
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
