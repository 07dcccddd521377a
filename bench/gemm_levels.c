/* GEMM throughput per dispatch level and token count: ops_gemm_multi_at on one weight dtype,
 * y[n, rows] = x[n, cols] · Wᵀ, at AVX2, AVX-512 (fp32 x) and, for bf16/fp8 weights on an
 * AVX512_BF16 CPU, AVX-512 bf16 dot products (x rounded to bf16) on the weights as loaded and
 * on their prepacked copy (ops/prepack.h: what the model runs). It cycles over enough copies
 * of the weight to exceed the L3, so the weights come from DRAM as in a model. The levels
 * alternate within each repetition; it prints the best GFLOP/s of each and the median
 * per-repetition speedup over the first variant run, AVX2 unless --prepacked-only (the
 * machine is shared: compare ratios). --prepacked-only runs only the prepacked variants (the
 * model's kernels), which is much quicker at hundreds of tokens. fp8 under MLASERVE_CPU_LEVEL=avx2
 * where the kernel picks its integer decode (ops_cpu_denormals_fast): also
 * "prepacked f16", the same kernel with its f16 decode.
 *
 * "prepacked fma": the packed bf16 weights widened to fp32 FMAs from 8 tokens (what the
 * avx512_bf16 level runs where vdpbf16ps is the slower, ops_cpu_bf16_dp_slow), against
 * "prepacked dp" (vdpbf16ps); the fp8 rows run the same kernel in both.
 * int4 (ops/quant_int4.h): W4A8 at avx2 / AVX-VNNI / avx512 (fp32 x) and W4A16 (bf16 x: AVX512_BF16, AMX).
 * --bytes: after each row, each variant's best time per matrix (us) and the weight bytes it read
 * per second (GB/s: wmat_bytes, int4 4.5 bits a weight with its bf16 scales).
 * fp4 (ops/wf_fp4.h, DeepSeek-V4's MXFP4 experts: random codes, an e8m0 scale per 32 of each
 * copy, 4.25 bits a weight): its kernels at avx2 / avx512 (fp32 x) and vdpbf16ps (bf16 x). V4's
 * expert GEMV against the same shape in fp8 and bf16, one token:
 *   gemm_levels --dtype fp4|fp8|bf16 --rows 2048 --cols 4096 --n 1 --bytes
 *
 *   gemm_levels [--dtype bf16|fp8|fp4|int8|int4|f16|f32] [--rows 2048] [--cols 2048] [--n 8,16,32,64,512]
 *                [--reps 9] [--threads 2] [--prepacked-only] [--jobs 1] [--bytes]
 * --jobs J: J matrices per call, each with its own x and y columns (as the model's per-head
 * W_UK / W_UV: 128 jobs of 512x128 or 128x512 in V3).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/err.h"
#include "ops/cpu.h"
#include "ops/gemm.h"
#include "ops/pool.h"
#include "ops/prepack.h"
#include "ops/quant_int4.h"
#include "ops/quant_int8.h"
#include "ops/wf_fp4.h"

#include "bench_util.h"

#define MAX_N 32
#define MAX_REPS 64
#define COPY_BYTES (64u << 20) /* weight copies cycled over: more than the L3 (MLASERVE_BENCH_COPY_MB) */

static uint64_t rng = 88172645463325252ull;
static uint32_t next_rand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

int main(int argc, char **argv)
{
	int n_jobs = 1;
	const char *dtn = "bf16";
	int rows = 2048, cols = 2048, reps = 9, threads = 2, ns[MAX_N], nn = 0, prepacked_only = 0, show_bytes = 0;
	const char *nlist = "8,16,24,32,48,64,128,512";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--prepacked-only")) {
			prepacked_only = 1;
			continue;
		}
		if (!strcmp(a, "--bytes")) {
			show_bytes = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "%s: missing value\n", a);
			return 2;
		}
		if (!strcmp(a, "--dtype"))
			dtn = v;
		else if (!strcmp(a, "--rows"))
			rows = atoi(v);
		else if (!strcmp(a, "--cols"))
			cols = atoi(v);
		else if (!strcmp(a, "--n"))
			nlist = v;
		else if (!strcmp(a, "--reps"))
			reps = atoi(v);
		else if (!strcmp(a, "--threads"))
			threads = atoi(v);
		else if (!strcmp(a, "--jobs"))
			n_jobs = atoi(v);
		else {
			fprintf(stderr, "unknown option %s\n", a);
			return 2;
		}
		i++;
	}
	enum dtype dt = !strcmp(dtn, "fp8")    ? DT_F8_E4M3
			: !strcmp(dtn, "int8") ? DT_I8
			: !strcmp(dtn, "int4") ? DT_I4
			: !strcmp(dtn, "fp4")  ? DT_F4_E2M1
			: !strcmp(dtn, "f16")  ? DT_F16
			: !strcmp(dtn, "f32")  ? DT_F32
					       : DT_BF16;
	if (rows < 1 || cols < 1 || reps < 1 || reps > MAX_REPS || threads < 1 || n_jobs < 1 || n_jobs > 512 ||
	    bench_list_parse(nlist, ns, &nn, MAX_N, 1 << 16)) {
		fprintf(stderr, "bad arguments\n");
		return 2;
	}
	struct err e = {0};
	struct pool *pool = NULL;
	if (threads > 1 && pool_new(threads, &pool, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return 1;
	}

	/* weights: random bytes, exponents kept small (fp8: no NaN); fp8 scales per 128x128 */
	size_t wb = (size_t)rows * (size_t)cols * dtype_size(dt) / (dt == DT_F4_E2M1 ? 2 : 1);
	/* a VM may report its host's L3 (480 MB seen): MLASERVE_BENCH_COPY_MB sets the total */
	size_t copy_bytes = getenv("MLASERVE_BENCH_COPY_MB") ? (size_t)atol(getenv("MLASERVE_BENCH_COPY_MB")) << 20
							     : COPY_BYTES;
	int ncopy = (int)(copy_bytes / wb) + 1;
	if (ncopy > 16384) /* small matrices (--jobs): still more than the L3 in all */
		ncopy = 16384;
	int sr = (rows + 127) / 128, sc = (cols + 127) / 128;
	float *scale = malloc(sizeof(float) * (size_t)sr * (size_t)sc);
	for (int i = 0; i < sr * sc; i++)
		scale[i] = 1e-3f;
	struct wmat *w = malloc(sizeof *w * (size_t)ncopy), *wp = malloc(sizeof *wp * (size_t)ncopy);
	for (int m = 0; m < ncopy; m++) {
		uint8_t *d = malloc(wb);
		for (size_t i = 0; i < wb; i++)
			d[i] = (uint8_t)(next_rand() & 0x3f);
		w[m] = (struct wmat){.dtype = dt,
				     .data = d,
				     .rows = rows,
				     .cols = cols,
				     .ld = cols,
				     .scale = scale,
				     .scale_ld = sc,
				     .blk_r = 128,
				     .blk_c = 128};
		if (dt == DT_F4_E2M1) { /* any byte holds two codes; scales 2^-9 .. 2^-2 */
			size_t nsc = (size_t)rows * (size_t)((cols + 31) / 32);
			uint8_t *e8 = malloc(nsc);
			for (size_t i = 0; i < nsc; i++)
				e8[i] = (uint8_t)(118 + next_rand() % 8);
			w[m] = wf_fp4_wmat(d, e8, rows, cols);
		}
		if (dt == DT_I8 || dt == DT_I4) { /* W8A8 / int4: quantized from random bf16 values */
			struct wmat src = w[m];
			src.dtype = DT_BF16;
			uint16_t *h = malloc(2 * wb);
			for (size_t i = 0; i < wb; i++)
				h[i] = f32_to_bf16((float)(next_rand() % 2001) / 1000.0f - 1.0f);
			src.data = h;
			size_t qb = dt == DT_I8 ? int8_data_bytes(rows, cols) : int4_data_bytes(rows, cols);
			char *q = aligned_alloc(64, (qb + 63) / 64 * 64);
			int br, bc;
			if (!q || (dt == DT_I8 ? quant_int8_weights : quant_int4_weights)(pool, &src, 0, rows, 0, cols,
											  q, &w[m], &br, &bc))
				return 1;
			free(h);
			free(d);
		}
		wp[m] = w[m];
		if (prepack_wanted(&wp[m], true))
			prepack_weights(&wp[m], aligned_alloc(64, (prepack_bytes(&wp[m]) + 63) / 64 * 64), pool);
	}
	int nmax = 0;
	for (int i = 0; i < nn; i++)
		nmax = ns[i] > nmax ? ns[i] : nmax;
	float *x = malloc(sizeof(float) * (size_t)nmax * (size_t)cols * (size_t)n_jobs);
	float *y = malloc(sizeof(float) * (size_t)nmax * (size_t)rows * (size_t)n_jobs);
	struct gemm_job *jobs = malloc(sizeof *jobs * (size_t)n_jobs);
	for (size_t i = 0; i < (size_t)nmax * (size_t)cols * (size_t)n_jobs; i++) /* bf16-exact, for the dp variant */
		x[i] = bf16_to_f32(f32_to_bf16((float)(next_rand() % 2001) / 1000.0f - 1.0f));

	/* variants: level, x_bf16 */
	enum ops_level best = ops_level_best();
	struct {
		enum ops_level lvl;
		int xb, packed;
		const char *name;
		int vnni; /* AVX-VNNI on (the int8 kernels at the avx2 level) */
		int f16;  /* the AVX2 fp8 kernel's f16 decode instead of the one the CPU picked */
		int fma;  /* ops_cpu_set_bf16_dp_slow: 0 vdpbf16ps, 1 fp32 FMAs (bf16 from 8 tokens), -1 as measured */
	} var[6] = {{OPS_AVX2, 0, 0, "avx2", 0, 0, -1},
		    {OPS_AVX512, 0, 0, "avx512", 0, 0, -1},
		    {OPS_AVX512_BF16, 1, 0, "avx512 bf16-dp", 0, 0, -1},
		    {OPS_AVX512_BF16, 1, 1, "prepacked dp", 0, 0, 0},
		    {OPS_AVX512_BF16, 1, 1, "prepacked fma", 0, 0, 1},
		    {OPS_AMX, 1, 1, "prepacked amx", 0, 0, -1}};
	int nv = best >= OPS_AVX512_BF16 && (dt == DT_BF16 || dt == DT_F8_E4M3 || dt == DT_F4_E2M1)
			 ? (wp[0].packed ? (best >= OPS_AMX ? 6 : 5) : 3)
		 : best >= OPS_AVX512 ? 2
				      : 1;
	int dnz = ops_cpu_denormals_fast();
	if (best == OPS_AVX2 && wp[0].packed) { /* fp8 in the AVX2 layout (MLASERVE_CPU_LEVEL=avx2) */
		var[1].lvl = OPS_AVX2, var[1].packed = 1, var[1].name = "prepacked avx2";
		nv = 2;
		if (dt == DT_F8_E4M3 && dnz) /* and its f16 decode, beside the integer one */
			var[2] = var[1], var[2].name = "prepacked f16", var[2].f16 = 1, nv = 3;
	}
	int v0 = prepacked_only && nv > 3 ? 3 : 0; /* the first variant run: the ratios' baseline */
	if (dt == DT_I8 || dt == DT_I4) { /* the int8 kernels: AVX2, AVX-VNNI and AVX-512 VNNI where the CPU has
					  * them; int4's W4A8 as well, and its W4A16 on bf16 x */
		int vnni0 = ops_cpu_has_avx_vnni();
		ops_cpu_set_avx_vnni(1);
		int has_vnni = ops_cpu_has_avx_vnni();
		ops_cpu_set_avx_vnni(vnni0);
		int i4 = dt == DT_I4;
		nv = 0;
		var[nv].lvl = OPS_AVX2, var[nv].name = i4 ? "w4a8 avx2" : "int8 avx2", var[nv++].vnni = 0;
		if (has_vnni)
			var[nv].lvl = OPS_AVX2, var[nv].name = i4 ? "w4a8 avx-vnni" : "int8 avx-vnni",
			var[nv++].vnni = 1;
		if (best >= OPS_AVX512)
			var[nv].lvl = OPS_AVX512, var[nv].name = i4 ? "w4a8 avx512" : "int8 avx512",
			var[nv++].vnni = 0;
		if (i4 && best >= OPS_AVX512_BF16)
			var[nv].lvl = OPS_AVX512_BF16, var[nv].xb = 1, var[nv].name = "w4a16 bf16-dp",
			var[nv++].vnni = 0;
		if (i4 && best >= OPS_AMX) /* AMX tiles from 2 tokens */
			var[nv].lvl = OPS_AMX, var[nv].xb = 1, var[nv].name = "w4a16 amx", var[nv++].vnni = 0;
		v0 = prepacked_only ? nv - 1 : 0;
	}
	printf("%s %dx%d%s, %d threads, %d weight copies, best of %d (GFLOP/s) and median speedup over %s\n",
	       dtype_name(dt), rows, cols, n_jobs > 1 ? " in calls of several jobs" : "", threads, ncopy, reps,
	       var[v0].name);
	if (n_jobs > 1)
		printf("%d jobs per call\n", n_jobs);
	printf("%6s", "n");
	for (int v = v0; v < nv; v++)
		printf(" %16s", var[v].name);
	printf("\n");
	for (int ni = 0; ni < nn; ni++) {
		int n = ns[ni];
		double t[6][MAX_REPS];
		for (int r = 0; r < reps; r++)
			for (int v = v0; v < nv; v++) {
				ops_cpu_set_avx_vnni(var[v].vnni);
				ops_cpu_set_denormals_fast(var[v].f16 ? 0 : dnz);
				ops_cpu_set_bf16_dp_slow(var[v].fma);
				double t0 = mono_now_s();
				int done = 0;
				for (int m = 0; m < ncopy || done < n_jobs; m += n_jobs) {
					for (int k = 0; k < n_jobs; k++) {
						int c = (m + k) % ncopy;
						jobs[k] = (struct gemm_job){.w = var[v].packed ? &wp[c] : &w[c],
									    .x = x + (size_t)k * cols,
									    .ldx = cols * n_jobs,
									    .y = y + (size_t)k * rows,
									    .ldy = rows * n_jobs,
									    .n = n,
									    .x_bf16 = var[v].xb};
					}
					ops_gemm_multi_at(var[v].lvl, pool, n_jobs, jobs);
					done += n_jobs;
				}
				t[v][r] = (mono_now_s() - t0) / done;
			}
		printf("%6d", n);
		for (int v = v0; v < nv; v++) {
			double ratio[MAX_REPS];
			for (int r = 0; r < reps; r++)
				ratio[r] = t[v0][r] / t[v][r];
			qsort(ratio, (size_t)reps, sizeof(double), bench_cmp_double);
			qsort(t[v], (size_t)reps, sizeof(double), bench_cmp_double);
			printf(" %8.1f (%4.2fx)", 2.0 * rows * cols * n / t[v][0] * 1e-9, ratio[reps / 2]);
		}
		printf("\n");
		if (show_bytes) { /* t[v] sorted: t[v][0] the best */
			printf("%6s", "us,GB/s");
			for (int v = v0; v < nv; v++)
				printf(" %7.1f %8.1f", t[v][0] * 1e6,
				       (double)wmat_bytes(var[v].packed ? &wp[0] : &w[0]) / t[v][0] * 1e-9);
			printf("\n");
		}
	}
	for (int m = 0; m < ncopy; m++) {
		free((void *)w[m].data);
		if (dt == DT_F4_E2M1)
			free((void *)w[m].scale_e8m0);
		free((void *)wp[m].packed);
	}
	free(w);
	free(wp);
	free(scale);
	free(x);
	free(y);
	free(jobs);
	pool_free(pool);
	return 0;
}
