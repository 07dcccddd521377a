#include "ops/cpu.h"

enum ops_level ops_level_best(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
	    __builtin_cpu_supports("f16c"))
		return OPS_AVX2;
	return OPS_PORTABLE;
}

const char *ops_level_name(enum ops_level l)
{
	return l == OPS_AVX2 ? "avx2" : "portable";
}
