#include "ops/cpu.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static enum ops_level probe(void)
{
	__builtin_cpu_init();
	enum ops_level l = OPS_PORTABLE;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
		l = OPS_AVX2;
		if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
			l = OPS_AVX512;
			if (__builtin_cpu_supports("avx512bf16"))
				l = OPS_AVX512_BF16;
		}
	}
	const char *cap = getenv("MLASERVE_CPU_LEVEL");
	if (cap && *cap) {
		int i = 0;
		while (i < OPS_N_LEVELS && strcmp(cap, ops_level_name((enum ops_level)i)))
			i++;
		if (i == OPS_N_LEVELS)
			LOG_W("ops", "MLASERVE_CPU_LEVEL=%s is not a level (portable, avx2, avx512, avx512_bf16): "
				     "ignored, using %s", cap, ops_level_name(l));
		else if (i < (int)l)
			l = (enum ops_level)i;
	}
	return l;
}

enum ops_level ops_level_best(void)
{
	/* probed once: every thread computes the same value, so a race only repeats the probe */
	static atomic_int cached = -1;
	int v = atomic_load_explicit(&cached, memory_order_relaxed);
	if (v < 0) {
		v = (int)probe();
		atomic_store_explicit(&cached, v, memory_order_relaxed);
	}
	return (enum ops_level)v;
}

const char *ops_level_name(enum ops_level l)
{
	switch (l) {
	case OPS_AVX2: return "avx2";
	case OPS_AVX512: return "avx512";
	case OPS_AVX512_BF16: return "avx512_bf16";
	default: return "portable";
	}
}
