#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/arena.h"
#include "base/bigmem.h"
#include "base/dtype.h"
#include "base/err.h"
#include "harness.h"
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif
#include "ops/pool.h"

static void test_err_prefix(void)
{
	struct err e;
	EXPECT_EQ_INT(err_set(&e, "bad value %d", 7), -1);
	err_prefix(&e, "config.json");
	EXPECT(strcmp(e.msg, "config.json: bad value 7") == 0);
}

static void test_bf16_round_trip(void)
{
	EXPECT_EQ_INT(f32_to_bf16(1.0f), 0x3f80);
	EXPECT(bf16_to_f32(0x3f80) == 1.0f);
	/* round to nearest even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> 1 */
	EXPECT_EQ_INT(f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
	EXPECT_EQ_INT(f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
	EXPECT(isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

static void test_fp8_table(void)
{
	EXPECT(fp8_e4m3_to_f32(0x00) == 0.0f);
	EXPECT(fp8_e4m3_to_f32(0x38) == 1.0f);   /* e=7, m=0 */
	EXPECT(fp8_e4m3_to_f32(0x7e) == 448.0f); /* max finite */
	EXPECT(fp8_e4m3_to_f32(0xfe) == -448.0f);
	EXPECT(fp8_e4m3_to_f32(0x01) == 1.0f / 512); /* smallest subnormal: 1/8 * 2^-6 */
	EXPECT(isnan(fp8_e4m3_to_f32(0x7f)) && isnan(fp8_e4m3_to_f32(0xff)));
	EXPECT(fp8_e4m3_to_f32(0x3c) == 1.5f);
}

static void test_dtype_flag(void)
{
	struct err e;
	enum dtype dt = DT_I32;
	bool au = true;
	EXPECT(dtype_parse_flag("--dtype", "bfloat16", &dt, &au, &e) == 0 && dt == DT_BF16 && !au);
	EXPECT(dtype_parse_flag("--dtype", "float32", &dt, &au, &e) == 0 && dt == DT_F32 && !au);
	EXPECT(dtype_parse_flag("--dtype", "auto", &dt, &au, &e) == 0 && dt == DT_F32 && au);
	EXPECT(dtype_parse_flag("--kv-cache-dtype", "bf16", &dt, &au, &e) < 0);
	EXPECT(!strcmp(e.msg, "--kv-cache-dtype: invalid value 'bf16' (auto, float32 or bfloat16)"));
}

static void test_f16(void)
{
	EXPECT(f16_to_f32(0x3c00) == 1.0f);
	EXPECT(f16_to_f32(0xc000) == -2.0f);
	EXPECT(f16_to_f32(0x0001) == ldexpf(1, -24));
}

static void test_arena(void)
{
	struct arena a;
	EXPECT_EQ_INT(arena_init(&a, 1024), 0);
	char *p = arena_alloc(&a, 10), *q = arena_alloc(&a, 10);
	EXPECT(((uintptr_t)p % 64) == 0 && ((uintptr_t)q % 64) == 0 && q > p);
	arena_reset(&a);
	EXPECT(arena_alloc(&a, 10) == p);
	arena_fini(&a);
	/* a large arena's pages are resident after init: the first step faults none of them */
	size_t big = BIGMEM_MIN * 2 + 12345;
	EXPECT_EQ_INT(arena_init(&a, big), 0);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t p0 = (uintptr_t)a.base / pg * pg, p1 = ((uintptr_t)a.base + big + pg - 1) / pg * pg;
	size_t npg = (p1 - p0) / pg;
	unsigned char *vec = malloc(npg);
	EXPECT(vec && mincore((void *)p0, p1 - p0, vec) == 0);
	size_t resident = 0;
	for (size_t i = 0; vec && i < npg; i++)
		resident += vec[i] & 1;
	EXPECT(resident == npg);
	free(vec);
	EXPECT(((uintptr_t)arena_alloc(&a, big - 64) % 64) == 0);
	arena_fini(&a);
}

struct sum_ctx {
	long long part[64];
	int calls;
};

static void sum_range(void *ctx, int b, int e, int tid)
{
	struct sum_ctx *s = ctx;
	for (int i = b; i < e; i++)
		s->part[tid] += i;
	__atomic_add_fetch(&s->calls, 1, __ATOMIC_RELAXED);
}

static void test_pool_covers_range_once(void)
{
	struct pool *p;
	struct err e;
	EXPECT_EQ_INT(pool_new(3, &p, &e), 0);
	for (int n = 1; n < 200; n += 37) {
		struct sum_ctx s = {0};
		pool_for(p, n, 1, sum_range, &s);
		long long tot = 0;
		for (int i = 0; i < 64; i++)
			tot += s.part[i];
		EXPECT_EQ_INT(tot, (long long)n * (n - 1) / 2);
	}
	pool_free(p);
}

/* A range may run on another thread than its tid's (the caller takes the ranges of workers
 * that have not started), but every range runs once, with the tid of its index, and never
 * beside another run of the same tid (per-tid buffers stay private): checked over jobs whose
 * ranges sleep at random after idle gaps, so that the caller takes some. */
struct steal_ctx {
	int chunk;
	int runs[8], busy[8], clash, wrong_tid;
	pthread_t ran_on[8];
	unsigned seed;
};

static void steal_range(void *ctx, int b, int e, int tid)
{
	struct steal_ctx *s = ctx;
	if (b != tid * s->chunk)
		__atomic_store_n(&s->wrong_tid, 1, __ATOMIC_RELAXED);
	if (__atomic_fetch_add(&s->busy[tid], 1, __ATOMIC_ACQ_REL))
		__atomic_store_n(&s->clash, 1, __ATOMIC_RELAXED);
	unsigned r = __atomic_add_fetch(&s->seed, 2654435761u, __ATOMIC_RELAXED);
	struct timespec ts = {0, (long)(r >> 20) % 300 * 1000}; /* 0-300 us, none for range 0 */
	if (tid)
		nanosleep(&ts, NULL);
	__atomic_fetch_add(&s->runs[tid], 1, __ATOMIC_RELAXED);
	s->ran_on[tid] = pthread_self();
	__atomic_fetch_sub(&s->busy[tid], 1, __ATOMIC_ACQ_REL);
	(void)e;
}

static void test_pool_ranges_taken_once(void)
{
	struct pool *p;
	struct err e;
	EXPECT_EQ_INT(pool_new(4, &p, &e), 0);
	int once = 1, stolen = 0;
	struct steal_ctx s;
	for (int job = 0; job < 300; job++) {
		memset(&s, 0, sizeof s);
		s.chunk = 4;
		s.seed = (unsigned)job * 7919u;
		if (job % 2) { /* let the workers fall asleep: the caller then finds ranges not started */
			struct timespec idle = {0, 1000 * 1000};
			nanosleep(&idle, NULL);
		}
		pool_for(p, 16, 4, steal_range, &s);
		for (int t = 0; t < 4; t++) {
			once &= s.runs[t] == 1;
			stolen += t > 0 && pthread_equal(s.ran_on[t], pthread_self());
		}
		EXPECT(!s.clash && !s.wrong_tid);
	}
	EXPECT(once);
	/* whether the caller took any depends on the scheduler: printed, not asserted */
	printf("# ranges of workers run by the caller: %d of 900\n", stolen);
	pool_free(p);
}

/* bigmem: zeroed buffers on both sides of the mapping threshold; the memory left, as read or
 * as MLASERVE_MEM_AVAILABLE says */
static void test_bigmem(void)
{
	size_t sizes[] = {100, BIGMEM_MIN - 1, BIGMEM_MIN + 12345};
	for (int k = 0; k < 3; k++) {
		unsigned char *p = bigmem_alloc(sizes[k]);
		EXPECT(p != NULL && (uintptr_t)p % 64 == 0);
		int zero = 1;
		for (size_t i = 0; p && i < sizes[k]; i += 4093)
			zero &= p[i] == 0;
		EXPECT(zero);
		if (p)
			p[sizes[k] - 1] = 1;
		bigmem_free(p, sizes[k]);
	}
	/* the huge-page rule, on the first touches measured on a lazily backed VM (6-25 ms for a
	 * huge page, 0.7-1.0 ms for 2 MB of 4 KB pages) and on VMs and hosts where huge pages pay */
	EXPECT(!bigmem_hugepages_pay(6.0, 1.0) && !bigmem_hugepages_pay(25.0, 0.7));
	EXPECT(bigmem_hugepages_pay(0.11, 5.5) && bigmem_hugepages_pay(0.2, 0.4) && bigmem_hugepages_pay(0.5, 0.3));
	EXPECT(bigmem_hugepages() == bigmem_hugepages()); /* decided once */
	size_t real = bigmem_available();
	EXPECT(real > 0);
	setenv("MLASERVE_MEM_AVAILABLE", "3G", 1);
	EXPECT(bigmem_available() == (size_t)3 << 30);
	setenv("MLASERVE_MEM_AVAILABLE", "512k", 1);
	EXPECT(bigmem_available() == (size_t)512 << 10);
	setenv("MLASERVE_MEM_AVAILABLE", "12GB", 1); /* not a size: ignored */
	EXPECT(bigmem_available() != (size_t)12 << 30);
	unsetenv("MLASERVE_MEM_AVAILABLE");
}

/* whether p lies in a mapping advised MADV_HUGEPAGE ("hg" in /proc/self/smaps' VmFlags) */
static int in_hugepage_mapping(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return -1;
	char line[512];
	int inside = 0, hg = 0;
	uintptr_t a = (uintptr_t)p;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) /* a mapping's first line; fields start "Name:" */
			inside = a >= lo && a < hi;
		else if (inside && !strncmp(line, "VmFlags:", 8)) {
			hg = strstr(line, " hg") != NULL;
			break;
		}
	}
	fclose(f);
	return hg;
}

/* small buffers from a slab: aligned, zeroed, apart, over several chunks, in huge-page
 * mappings where those pay, and the large ones refused (they get their own mapping) */
static void test_bigmem_slab(void)
{
	struct bigmem_slab s = {0};
	EXPECT(bigmem_slab_alloc(&s, BIGMEM_MIN) == NULL);
	size_t sizes[] = {1, 100, 3 << 20, 64, 0, (3 << 20) + 7, BIGMEM_MIN - 1};
	enum { N = 56 };
	unsigned char *p[N];
	size_t n[N], total = 0;
	for (int i = 0; i < N; i++) {
		n[i] = sizes[i % 7];
		p[i] = bigmem_slab_alloc(&s, n[i]);
		EXPECT(p[i] != NULL && (uintptr_t)p[i] % 64 == 0);
		if (!p[i])
			return;
		int zero = 1;
		for (size_t k = 0; k < n[i]; k += 4093)
			zero &= p[i][k] == 0;
		EXPECT(zero);
		memset(p[i], i + 1, n[i]); /* each buffer holds its own mark */
		total += n[i];
	}
	EXPECT(total > 2 * BIGMEM_SLAB_CHUNK && s.n >= 3);
	int kept = 1;
	for (int i = 0; i < N; i++)
		for (size_t k = 0; k < n[i]; k += 997)
			kept &= p[i][k] == (unsigned char)(i + 1) && p[i][n[i] - 1] == (unsigned char)(i + 1);
	EXPECT(kept);
#ifdef __SANITIZE_ADDRESS__
	for (int i = 0; i < N; i++) /* each buffer's end is checked, as malloc's */
		EXPECT(__asan_address_is_poisoned(p[i] + ((n[i] + 63) & ~(size_t)63)));
#endif
	if (bigmem_hugepages())
		for (int i = 0; i < N; i += 5)
			EXPECT(in_hugepage_mapping(p[i]) == 1);
	bigmem_slab_free(&s);
	EXPECT(s.n == 0 && s.chunks == NULL && s.left == 0);
}

TESTS(T(test_err_prefix), T(test_dtype_flag), T(test_bf16_round_trip), T(test_fp8_table), T(test_f16), T(test_arena),
      T(test_pool_covers_range_once), T(test_pool_ranges_taken_once), T(test_bigmem), T(test_bigmem_slab))
