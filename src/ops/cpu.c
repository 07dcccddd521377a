#include "ops/cpu.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/log.h"

#include <cpuid.h>
#include <immintrin.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

/* AMX: the CPU has tiles and bf16 tile products, and Linux lets this process use the 8 KB
 * of tile data (permission is per process, asked once, before any thread uses a tile). */
static bool amx_usable(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24)))
		return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
	enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
	return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
	return false;
#endif
}

/* F16C (CPUID.1:ECX bit 29) and AVX512_BF16 (CPUID.(7,1):EAX bit 5), read directly: not
 * every compiler's __builtin_cpu_supports knows them (clang 14 does not). */
static bool f16c_present(void)
{
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

static bool avx512bf16_present(void)
{
	unsigned a, b, c, d;
	return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}

static atomic_bool vnni_capped; /* MLASERVE_CPU_LEVEL=avx2 or portable: set by the probe */

static enum ops_level probe(void)
{
	__builtin_cpu_init();
	/* the cap first: below amx the process does not even ask for the tile permission (it
	 * enlarges every signal frame of the threads that use tiles) */
	int cap_level = OPS_N_LEVELS - 1;
	const char *cap = env_get(ENV_CPU_LEVEL);
	if (cap && *cap) {
		int i = 0;
		if (!strcmp(cap, "avx2_vnni"))
			i = OPS_AVX2;
		else
			while (i < OPS_N_LEVELS && strcmp(cap, ops_level_name((enum ops_level)i)))
				i++;
		/* an AVX2-only CPU (or none): AVX-VNNI off too */
		vnni_capped = !strcmp(cap, "avx2") || !strcmp(cap, "portable");
		if (i == OPS_N_LEVELS)
			LOG_W("ops",
			      "MLASERVE_CPU_LEVEL=%s is not a level (portable, avx2, avx2_vnni, avx512, avx512_bf16, "
			      "amx): ignored",
			      cap);
		else
			cap_level = i;
	}
	enum ops_level l = OPS_PORTABLE;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c_present()) {
		l = OPS_AVX2;
		if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
			l = OPS_AVX512;
			if (avx512bf16_present()) {
				l = OPS_AVX512_BF16;
				if (cap_level >= OPS_AMX && __builtin_cpu_supports("avx512vbmi") && amx_usable())
					l = OPS_AMX;
			}
		}
	}
	return (int)l < cap_level ? l : (enum ops_level)cap_level;
}

enum ops_level ops_level_best(void)
{
	/* probed once: every thread computes the same value, so a race only repeats the probe;
	 * release / acquire: a reader of the level also sees vnni_capped */
	static atomic_int cached = -1;
	int v = atomic_load_explicit(&cached, memory_order_acquire);
	if (v < 0) {
		v = (int)probe();
		atomic_store_explicit(&cached, v, memory_order_release);
	}
	return (enum ops_level)v;
}

/* AVX-VNNI: CPUID.(7,1):EAX bit 4 */
static bool avx_vnni_present(void)
{
	unsigned a, b, c, d;
	return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}

static atomic_int avx_vnni_on = -1;

int ops_cpu_has_avx_vnni(void)
{
	int v = atomic_load_explicit(&avx_vnni_on, memory_order_relaxed);
	if (v < 0) {
		bool avx2 = ops_level_best() >= OPS_AVX2; /* probes first: vnni_capped */
		v = !vnni_capped && avx2 && avx_vnni_present();
		atomic_store_explicit(&avx_vnni_on, v, memory_order_relaxed);
	}
	return v;
}

void ops_cpu_set_avx_vnni(int on)
{
	atomic_store_explicit(&avx_vnni_on, on && ops_level_best() >= OPS_AVX2 && avx_vnni_present(),
			      memory_order_relaxed);
}

const char *ops_level_name(enum ops_level l)
{
	switch (l) {
	case OPS_AVX2: return "avx2";
	case OPS_AVX512: return "avx512";
	case OPS_AVX512_BF16: return "avx512_bf16";
	case OPS_AMX: return "amx";
	default: return "portable";
	}
}

int ops_cpu_has_vbmi(void)
{
	__builtin_cpu_init(); /* idempotent; the answer is a bit of libgcc's cached CPU model */
	return __builtin_cpu_supports("avx512vbmi") != 0;
}

/* ---- denormal operands ---- */

/* best of 3, seconds: 2048 rounds of 8 independent FMAs on w (x = 2^100: the products are
 * normal whatever w, as in the fp8 kernel) */
static __attribute__((target("avx2,fma"))) double fma_time(float w)
{
	volatile float wv = w, xv = 0x1p100f;
	__m256 a = _mm256_set1_ps(wv), x = _mm256_set1_ps(xv), acc[8];
	double best = 1e9;
	for (int rep = 0; rep < 3; rep++) {
		for (int i = 0; i < 8; i++)
			acc[i] = _mm256_setzero_ps();
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int k = 0; k < 2048; k++) {
#pragma GCC unroll 8
			for (int i = 0; i < 8; i++)
				acc[i] = _mm256_fmadd_ps(a, x, acc[i]);
			__asm__ volatile("" : "+x"(acc[0]), "+x"(acc[7]));
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		volatile float sink = acc[0][0] + acc[7][0];
		(void)sink;
		double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
		best = dt < best ? dt : best;
	}
	return best;
}

/* Denormal operands are kept (no DAZ in MXCSR) and FMAs on them take no more than twice the
 * time of normal ones. Intel's manuals advise DAZ because their cores may take a microcode
 * assist of ~100 cycles per such operation; Zen 5 runs them at full speed. An assist costs
 * 50x or more, so the best of three short runs tells the two apart. */
static int denormals_measure(void)
{
	if (ops_level_best() < OPS_AVX2 || (_mm_getcsr() & 0x40)) /* DAZ: read as zeros */
		return 0;
	return fma_time(0x1p-140f) <= 2 * fma_time(0x1p-10f);
}

static atomic_int denormals_fast = -1;

int ops_cpu_denormals_fast(void)
{
	int v = atomic_load_explicit(&denormals_fast, memory_order_relaxed);
	if (v < 0) {
		v = denormals_measure();
		atomic_store_explicit(&denormals_fast, v, memory_order_relaxed);
	}
	return v;
}

void ops_cpu_set_denormals_fast(int on)
{
	bool usable = ops_level_best() >= OPS_AVX2 && !(_mm_getcsr() & 0x40);
	atomic_store_explicit(&denormals_fast, on < 0 ? denormals_measure() : on && usable, memory_order_relaxed);
}

/* ---- vdpbf16ps against the 512-bit fp32 FMA ---- */

/* best of 3, seconds: 1024 rounds of 12 independent zmm bf16 dot products (dp) or fp32 FMAs;
 * each vdpbf16ps does twice an FMA's multiply-adds */
#define ZMM_OP(a) (dp ? _mm512_dpbf16_ps(a, (__m512bh)b, (__m512bh)b) : _mm512_fmadd_ps(a, b, b))
static __attribute__((target("avx512f,avx512bf16"))) double zmm_time(const int dp)
{
	__m512 b = _mm512_set1_ps(1.0f);
	double best = 1e9;
	for (int rep = 0; rep < 3; rep++) {
		__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
		       a8 = a0, a9 = a0, a10 = a0, a11 = a0;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int k = 0; k < 1024; k++) {
			a0 = ZMM_OP(a0), a1 = ZMM_OP(a1), a2 = ZMM_OP(a2), a3 = ZMM_OP(a3), a4 = ZMM_OP(a4);
			a5 = ZMM_OP(a5), a6 = ZMM_OP(a6), a7 = ZMM_OP(a7), a8 = ZMM_OP(a8), a9 = ZMM_OP(a9);
			a10 = ZMM_OP(a10), a11 = ZMM_OP(a11);
			__asm__ volatile(""
					 : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6),
					   "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
		best = dt < best ? dt : best;
	}
	return best;
}
#undef ZMM_OP

/* vdpbf16ps's multiply-adds per second under 3/4 of the FMA's (Intel's Xeons: half) */
static int dp_slow_measure(void)
{
	if (ops_level_best() < OPS_AVX512_BF16)
		return 0;
	return zmm_time(1) * 0.75 > 2 * zmm_time(0);
}

static atomic_int dp_slow = -1;

int ops_cpu_bf16_dp_slow(void)
{
	int v = atomic_load_explicit(&dp_slow, memory_order_relaxed);
	if (v < 0) {
		v = dp_slow_measure();
		atomic_store_explicit(&dp_slow, v, memory_order_relaxed);
	}
	return v;
}

void ops_cpu_set_bf16_dp_slow(int on)
{
	atomic_store_explicit(&dp_slow, on < 0 ? dp_slow_measure() : on && ops_level_best() >= OPS_AVX512_BF16,
			      memory_order_relaxed);
}
