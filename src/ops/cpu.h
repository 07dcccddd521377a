/* Runtime CPU dispatch levels for the kernels in ops/ and attn/, ordered: a level includes
 * every level below it. The best level is probed once; MLASERVE_CPU_LEVEL (portable, avx2,
 * avx2_vnni, avx512, avx512_bf16 or amx) caps it, for A/B benchmarks and for testing the lower
 * paths on a newer CPU. amx needs CPUID's AMX-TILE and AMX-BF16 and Linux's per-process
 * permission for the tile data (arch_prctl(ARCH_REQ_XCOMP_PERM)), which the probe asks for.
 * Every kernel test runs every level the CPU has against the portable one; levels above the
 * CPU's are clamped (ops_gemm_multi_at), not reached. */
#ifndef MLA_OPS_CPU_H
#define MLA_OPS_CPU_H

enum ops_level {
	OPS_PORTABLE = 0,
	OPS_AVX2 = 1,        /* AVX2 + FMA + F16C */
	OPS_AVX512 = 2,      /* + AVX-512 F/BW/VL/DQ */
	OPS_AVX512_BF16 = 3, /* + AVX512_BF16 (vdpbf16ps: bf16 products, fp32 sums) */
	OPS_AMX = 4,         /* + AMX-TILE/AMX-BF16 (tdpbf16ps: 16x16 fp32 tiles), granted by the OS */
};
#define OPS_N_LEVELS 5

enum ops_level ops_level_best(void);
const char *ops_level_name(enum ops_level l);

/* AVX512_VBMI (byte permutes; the fp8 decoders of ops/fp8_512.h). Every CPU at
 * the amx level has it; at avx512_bf16 all but Cooper Lake do. */
int ops_cpu_has_vbmi(void);

/* AVX-VNNI (256-bit vpdpbusd: Intel cores from Alder Lake and Sapphire Rapids, Zen 5), for the
 * int8 kernels at the avx2 level; not a level of its own, as AVX-512 CPUs before them lack it.
 * MLASERVE_CPU_LEVEL=avx2 stands for an AVX2-only CPU and turns it off; avx2_vnni caps the
 * level at avx2 and keeps it. */
int ops_cpu_has_avx_vnni(void);
/* tests and benchmarks: AVX-VNNI on (where the CPU has it) or off, for the whole process */
void ops_cpu_set_avx_vnni(int on);

/* Whether FP operations on denormal operands run at full speed here (measured once, at first
 * use: an Intel core may take a microcode assist on each; Zen 5 does not) and MXCSR keeps them
 * (no DAZ). The AVX2 fp8 decode then uses integer operations that make e4m3's subnormals fp32
 * denormals (ops/gemm_fp8_avx2.c), else vcvtph2ps. */
int ops_cpu_denormals_fast(void);
/* tests and benchmarks: 1 on (where usable: AVX2, no DAZ), 0 off, -1 measure again */
void ops_cpu_set_denormals_fast(int on);

/* Whether vdpbf16ps does fewer multiply-adds a second than the 512-bit fp32 FMA (measured once,
 * at first use: on Intel's Xeons half as many, on Zen 4/5 twice as many). The AVX512_BF16
 * GEMM on packed weights then runs fp32 FMAs on the widened pairs from 8 tokens on
 * (ops/gemm_prepacked512.c). */
int ops_cpu_bf16_dp_slow(void);
/* tests and benchmarks: 1 on (where the CPU has AVX512_BF16), 0 off, -1 measure again */
void ops_cpu_set_bf16_dp_slow(int on);

#endif
