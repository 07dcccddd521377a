/* Throughput of the vector instructions the AVX2 kernels are made of, alone and in pairs, on
 * one core: 12 independent chains of each, instructions per ns. Two instructions that reach
 * together no more than either alone share the same pipes. On Zen 5 the fp32 FMA, vcvtph2ps
 * (the f16 decode of ops/gemm_fp8_avx2.c), vpmaddubsw, vpmaddwd and vpdpbusd all issue on the
 * same two pipes: what bounds the AVX2 GEMMs (docs/PERFORMANCE.md §10). On AVX512_BF16 CPUs
 * also 512-bit rows: vdpbf16ps (what the avx512_bf16 GEMMs run on) against the fp32 FMA (on the
 * Xeon of docs/PERFORMANCE.md §10.2, a quarter of its rate: half its FLOPs).
 *
 *   vec_pipes            (no options; compare the rows with each other, not across machines)
 */
#include <immintrin.h>
#include <cpuid.h>
#include <stdio.h>
#include <time.h>

#define ROUNDS 20000000L

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* this thread's time: co-tenants do not count */
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define AV __attribute__((target("avx2,fma,f16c,avxvnni"), noinline))
#define FMA(a) \
	_mm256_castps_si256(_mm256_fmadd_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), _mm256_castsi256_ps(b)))
#define CVTPH(a) _mm256_castps_si256(_mm256_cvtph_ps(_mm256_castsi256_si128(a)))
#define MADDUBS(a) _mm256_maddubs_epi16(a, b)
#define MADD(a) _mm256_madd_epi16(a, b)
#define DPBUSD(a) _mm256_dpbusd_avx_epi32(a, b, b)
#define SIGN(a) _mm256_sign_epi8(a, b)
#define ADD(a) _mm256_add_epi32(a, b)
#define SHUF(a) _mm256_shuffle_epi8(a, b)
#define SLL(a) _mm256_slli_epi32(a, 7)
#define AND(a) _mm256_and_si256(a, b)
#define MOVSX(a) _mm256_cvtepi8_epi32(_mm256_castsi256_si128(a))

/* 12 chains: even ones run OP1, odd ones OP2 */
#define PAIR(NAME, OP1, OP2)                                                                                     \
	static AV double NAME(void)                                                                              \
	{                                                                                                        \
		__m256i b = _mm256_set1_epi8(3), a0 = _mm256_set1_epi32(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0,  \
			a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;                         \
		(void)b;                                                                                         \
		double t0 = now_s();                                                                             \
		for (long k = 0; k < ROUNDS; k++) {                                                              \
			a0 = OP1(a0), a1 = OP2(a1), a2 = OP1(a2), a3 = OP2(a3), a4 = OP1(a4), a5 = OP2(a5);      \
			a6 = OP1(a6), a7 = OP2(a7), a8 = OP1(a8), a9 = OP2(a9), a10 = OP1(a10), a11 = OP2(a11);  \
			__asm__ volatile(""                                                                      \
					 : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), \
					   "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));                  \
		}                                                                                                \
		return ROUNDS * 12 / (now_s() - t0) * 1e-9;                                                      \
	}

PAIR(t_fma, FMA, FMA)
PAIR(t_cvtph, CVTPH, CVTPH)
PAIR(t_maddubs, MADDUBS, MADDUBS)
PAIR(t_madd, MADD, MADD)
PAIR(t_dpbusd, DPBUSD, DPBUSD)
PAIR(t_sign, SIGN, SIGN)
PAIR(t_add, ADD, ADD)
PAIR(t_shuf, SHUF, SHUF)
PAIR(t_sll, SLL, SLL)
PAIR(t_movsx, MOVSX, MOVSX)
PAIR(t_fma_cvtph, FMA, CVTPH)
PAIR(t_fma_maddubs, FMA, MADDUBS)
PAIR(t_maddubs_madd, MADDUBS, MADD)
PAIR(t_maddubs_sign, MADDUBS, SIGN)
PAIR(t_maddubs_add, MADDUBS, ADD)
PAIR(t_fma_sll, FMA, SLL)
PAIR(t_fma_and, FMA, AND)
PAIR(t_fma_movsx, FMA, MOVSX)

/* 512-bit: 12 chains, even ones OP1, odd ones OP2 */
#define A5 __attribute__((target("avx512f,avx512bw,avx512bf16"), noinline))
#define DP5(a) _mm512_castps_si512(_mm512_dpbf16_ps(_mm512_castsi512_ps(a), (__m512bh)b, (__m512bh)b))
#define FMA5(a) \
	_mm512_castps_si512(_mm512_fmadd_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), _mm512_castsi512_ps(b)))
#define SLL5(a) _mm512_slli_epi32(a, 7)
#define PAIR5(NAME, OP1, OP2)                                                                                    \
	static A5 double NAME(void)                                                                              \
	{                                                                                                        \
		__m512i b = _mm512_set1_epi32(0x3f803f80), a0 = _mm512_set1_epi32(1), a1 = a0, a2 = a0, a3 = a0, \
			a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;                \
		double t0 = now_s();                                                                             \
		for (long k = 0; k < ROUNDS; k++) {                                                              \
			a0 = OP1(a0), a1 = OP2(a1), a2 = OP1(a2), a3 = OP2(a3), a4 = OP1(a4), a5 = OP2(a5);      \
			a6 = OP1(a6), a7 = OP2(a7), a8 = OP1(a8), a9 = OP2(a9), a10 = OP1(a10), a11 = OP2(a11);  \
			__asm__ volatile(""                                                                      \
					 : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), \
					   "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));                  \
		}                                                                                                \
		return ROUNDS * 12 / (now_s() - t0) * 1e-9;                                                      \
	}
PAIR5(t5_dp, DP5, DP5)
PAIR5(t5_fma, FMA5, FMA5)
PAIR5(t5_dp_fma, DP5, FMA5)
PAIR5(t5_fma_sll, FMA5, SLL5)

int main(void)
{
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) {
		fprintf(stderr, "vec_pipes: needs AVX2, FMA and F16C\n");
		return 2;
	}
	unsigned a, b, c, d;
	int vnni = __builtin_cpu_supports("avxvnni") || (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & 16));
	static const struct {
		const char *name;
		double (*f)(void);
		int vnni;
	} rows[] = {{"vfmadd (fp32 FMA)", t_fma, 0},
		    {"vcvtph2ps", t_cvtph, 0},
		    {"vpmaddubsw", t_maddubs, 0},
		    {"vpmaddwd", t_madd, 0},
		    {"vpdpbusd (AVX-VNNI)", t_dpbusd, 1},
		    {"vpsignb", t_sign, 0},
		    {"vpaddd", t_add, 0},
		    {"vpshufb", t_shuf, 0},
		    {"vpslld", t_sll, 0},
		    {"vpmovsxbd", t_movsx, 0},
		    {"FMA + vcvtph2ps", t_fma_cvtph, 0},
		    {"FMA + vpmaddubsw", t_fma_maddubs, 0},
		    {"vpmaddubsw + vpmaddwd", t_maddubs_madd, 0},
		    {"vpmaddubsw + vpsignb", t_maddubs_sign, 0},
		    {"vpmaddubsw + vpaddd", t_maddubs_add, 0},
		    {"FMA + vpslld", t_fma_sll, 0},
		    {"FMA + vpand", t_fma_and, 0},
		    {"FMA + vpmovsxbd", t_fma_movsx, 0}};
	printf("%-24s %s\n", "instructions (256-bit)", "per ns, one core");
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		if (!rows[i].vnni || vnni)
			printf("%-24s %6.2f\n", rows[i].name, rows[i].f());
	if (!__builtin_cpu_supports("avx512bf16"))
		return 0;
	/* FLOPs per instruction: vdpbf16ps 64 (16 lanes x 2 products), the fp32 FMA 32 */
	double dp = t5_dp(), fma = t5_fma();
	printf("%-24s %s\n", "instructions (512-bit)", "per ns, one core");
	printf("%-24s %6.2f  (%.0f GFLOP/s)\n", "vdpbf16ps", dp, 64 * dp);
	printf("%-24s %6.2f  (%.0f GFLOP/s)\n", "vfmadd (fp32 FMA)", fma, 32 * fma);
	printf("%-24s %6.2f\n", "vdpbf16ps + FMA", t5_dp_fma());
	printf("%-24s %6.2f\n", "FMA + vpslld", t5_fma_sll());
	return 0;
}
