/* Kernels: GEMM per weight dtype and dispatch level against a naive reference, RoPE / YaRN
 * numbers from the spec (A.6), MoE routing (A.7), small vector ops. */
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/cpu.h"
#include "ops/fp8_512.h"
#include "ops/gemm.h"
#include "ops/pool.h"
#include "ops/rope.h"
#include "ops/route.h"
#include "ops/vec.h"
#include "ops/vexp.h"

static uint64_t rng_state = 12345;
static float frand(void) /* uniform [-1, 1) */
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng_state >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

/* A random full weight of dtype dt [rows, cols] with its fp8 scale grid. */
struct wbuf {
	struct wmat w;
	void *data;
	float *scale;
};

static void wbuf_make(struct wbuf *b, enum dtype dt, int rows, int cols)
{
	size_t n = (size_t)rows * (size_t)cols;
	b->data = malloc(n * dtype_size(dt));
	b->scale = NULL;
	for (size_t i = 0; i < n; i++) {
		float v = frand();
		switch (dt) {
		case DT_F32: ((float *)b->data)[i] = v; break;
		case DT_BF16: ((uint16_t *)b->data)[i] = f32_to_bf16(v); break;
		case DT_F16: { /* exact small values: k/1024 */
			int k = (int)(v * 1024);
			float f = (float)k / 1024;
			/* f16 encode of a value with <= 11 significant bits */
			uint16_t h = 0;
			if (f != 0) {
				int ex;
				float mnt = frexpf(fabsf(f), &ex); /* [0.5,1) */
				int e16 = ex - 1 + 15;
				uint16_t m = (uint16_t)((mnt * 2 - 1) * 1024 + 0.5f);
				h = (uint16_t)((f < 0 ? 0x8000 : 0) | (e16 << 10) | m);
			}
			((uint16_t *)b->data)[i] = h;
			break;
		}
		default: { /* any byte but NaN */
			uint8_t q = (uint8_t)(rng_state >> 33);
			if ((q & 0x7f) == 0x7f)
				q = 0x10;
			((uint8_t *)b->data)[i] = q;
		}
		}
	}
	b->w = (struct wmat){
		.dtype = dt, .data = b->data, .rows = rows, .cols = cols, .ld = cols, .blk_r = 128, .blk_c = 128};
	if (dt == DT_F8_E4M3) {
		int sr = (rows + 127) / 128, sc = (cols + 127) / 128;
		b->scale = malloc(sizeof(float) * (size_t)sr * (size_t)sc);
		for (int i = 0; i < sr * sc; i++)
			b->scale[i] = 0.001f * (1.5f + frand());
		b->w.scale = b->scale;
		b->w.scale_ld = sc;
	}
}

static void wbuf_free(struct wbuf *b)
{
	free(b->data);
	free(b->scale);
}

/* y = x·Wᵀ with double accumulation through wmat_get (the definition of the element). */
static void gemm_naive(const struct wmat *w, const float *x, int ldx, int n, float *y, int ldy)
{
	for (int t = 0; t < n; t++)
		for (int r = 0; r < w->rows; r++) {
			double s = 0;
			for (int c = 0; c < w->cols; c++)
				s += (double)wmat_get(w, r, c) * x[(size_t)t * ldx + c];
			y[(size_t)t * ldy + r] = (float)s;
		}
}

static double rel_err(const float *a, const float *b, int n, int lda, int ncols)
{
	double num = 0, den = 1e-30;
	for (int t = 0; t < n; t++)
		for (int c = 0; c < ncols; c++) {
			double d = a[(size_t)t * lda + c] - b[(size_t)t * lda + c];
			num = fmax(num, fabs(d));
			den = fmax(den, fabs(b[(size_t)t * lda + c]));
		}
	return num / den;
}

static struct pool *g_pool;

/* xbf: x rounded to bf16 and declared so (x_bf16), which lets the AVX512_BF16 level run bf16
 * dot products; the reference is the same double sum over the same (rounded) x. */
static void check_gemm_x(enum dtype dt, int rows, int cols, int r0, int nr, int c0, int nc, int xbf)
{
	struct wbuf b;
	wbuf_make(&b, dt, rows, cols);
	struct wmat v = wmat_view(&b.w, r0, nr, c0, nc);
	int ns[] = {1, 2, 3, 4, 7, 13, 47, 48, 61};
	for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
		int n = ns[ni], ldx = nc + 5, ldy = nr + 3;
		float *x = malloc(sizeof(float) * (size_t)n * ldx), *ref = calloc((size_t)n * ldy, sizeof(float));
		float *y = calloc((size_t)n * ldy, sizeof(float));
		for (int i = 0; i < n * ldx; i++)
			x[i] = frand();
		if (xbf)
			ops_round_bf16(x, (int64_t)n * ldx);
		gemm_naive(&v, x, ldx, n, ref, ldy);
		for (int lvl = OPS_PORTABLE; lvl <= (int)ops_level_best(); lvl++) {
			memset(y, 0, sizeof(float) * (size_t)n * ldy);
			struct gemm_job j = {.w = &v, .x = x, .ldx = ldx, .y = y, .ldy = ldy, .n = n, .x_bf16 = xbf};
			ops_gemm_multi_at((enum ops_level)lvl, g_pool, 1, &j);
			double err = rel_err(y, ref, n, ldy, nr);
			EXPECTF(err < 2e-6, "%s %dx%d view (%d+%d, %d+%d) n=%d x_bf16 %d level %s: rel err %g",
				dtype_name(dt), rows, cols, r0, nr, c0, nc, n, xbf,
				ops_level_name((enum ops_level)lvl), err);
			/* accumulate adds onto y */
			j.accumulate = 1;
			ops_gemm_multi_at((enum ops_level)lvl, NULL, 1, &j);
			for (int i = 0; i < n * ldy; i++)
				ref[i] *= 2;
			err = rel_err(y, ref, n, ldy, nr);
			for (int i = 0; i < n * ldy; i++)
				ref[i] /= 2;
			EXPECTF(err < 2e-6, "%s accumulate level %s: rel err %g", dtype_name(dt),
				ops_level_name((enum ops_level)lvl), err);
		}
		free(x);
		free(ref);
		free(y);
	}
	wbuf_free(&b);
}

static void check_gemm(enum dtype dt, int rows, int cols, int r0, int nr, int c0, int nc)
{
	check_gemm_x(dt, rows, cols, r0, nr, c0, nc, 0);
	check_gemm_x(dt, rows, cols, r0, nr, c0, nc, 1);
}

static void test_gemm_f32(void) { check_gemm(DT_F32, 70, 45, 0, 70, 0, 45); }
static void test_gemm_bf16(void) { check_gemm(DT_BF16, 130, 77, 0, 130, 0, 77); }
static void test_gemm_f16(void) { check_gemm(DT_F16, 67, 96, 0, 67, 0, 96); }
/* fp8 with partial edge blocks (200 = 128 + 72 rows, 300 = 2*128 + 44 cols) */
static void test_gemm_fp8_edge_blocks(void) { check_gemm(DT_F8_E4M3, 200, 300, 0, 200, 0, 300); }
/* tensor-parallel style slices starting inside a scale block, in place */
static void test_gemm_fp8_tp_slices(void)
{
	check_gemm(DT_F8_E4M3, 300, 400, 37, 150, 101, 190);
	check_gemm(DT_F8_E4M3, 300, 400, 128, 100, 256, 144);
	check_gemm(DT_F8_E4M3, 300, 400, 0, 300, 130, 1); /* one column */
}
static void test_gemm_bf16_slices(void) { check_gemm(DT_BF16, 90, 260, 13, 40, 7, 200); }

/* Several jobs in one parallel region, including empty ones. */
static void test_gemm_multi(void)
{
	struct wbuf a, b;
	wbuf_make(&a, DT_BF16, 100, 64);
	wbuf_make(&b, DT_F8_E4M3, 33, 64);
	float x[5 * 64], y1[5 * 100], y2[5 * 33], r1[5 * 100], r2[5 * 33];
	for (int i = 0; i < 5 * 64; i++)
		x[i] = frand();
	struct gemm_job j[3] = {{.w = &a.w, .x = x, .ldx = 64, .y = y1, .ldy = 100, .n = 5},
				{.w = &b.w, .x = x, .ldx = 64, .y = y2, .ldy = 33, .n = 0},
				{.w = &b.w, .x = x, .ldx = 64, .y = y2, .ldy = 33, .n = 5}};
	ops_gemm_multi(g_pool, 3, j);
	gemm_naive(&a.w, x, 64, 5, r1, 100);
	gemm_naive(&b.w, x, 64, 5, r2, 33);
	EXPECT(rel_err(y1, r1, 5, 100, 100) < 2e-6);
	EXPECT(rel_err(y2, r2, 5, 33, 33) < 2e-6);
	wbuf_free(&a);
	wbuf_free(&b);
}

/* Every token count 1..64 (the register-blocked tiles, the packed path from PACK_MIN_TOKENS
 * and the switch between them) on odd shapes: rows not a multiple of any row block or panel,
 * columns not a multiple of 8 or of the packed k block, strided x and y, every dtype, both
 * dispatch levels, plain and accumulate. */
static void check_gemm_every_n_x(enum dtype dt, int rows, int cols, int r0, int nr, int c0, int nc, int xbf)
{
	struct wbuf b;
	wbuf_make(&b, dt, rows, cols);
	struct wmat v = wmat_view(&b.w, r0, nr, c0, nc);
	int ldx = nc + 3, ldy = nr + 1;
	float *x = malloc(sizeof(float) * 64 * (size_t)ldx), *ref = malloc(sizeof(float) * 64 * (size_t)ldy);
	float *y = malloc(sizeof(float) * 64 * (size_t)ldy);
	for (int i = 0; i < 64 * ldx; i++)
		x[i] = frand();
	if (xbf)
		ops_round_bf16(x, (int64_t)64 * ldx);
	gemm_naive(&v, x, ldx, 64, ref, ldy); /* row t of the result does not depend on n */
	for (int n = 1; n <= 64; n++)
		for (int lvl = OPS_PORTABLE; lvl <= (int)ops_level_best(); lvl++) {
			for (int i = 0; i < 64 * ldy; i++)
				y[i] = 0.5f;
			struct gemm_job j = {.w = &v,
					     .x = x,
					     .ldx = ldx,
					     .y = y,
					     .ldy = ldy,
					     .n = n,
					     .accumulate = n & 1,
					     .x_bf16 = xbf};
			ops_gemm_multi_at((enum ops_level)lvl, g_pool, 1, &j);
			double num = 0, den = 1e-30;
			int untouched = 1;
			for (int t = 0; t < 64; t++)
				for (int r = 0; r < ldy; r++) {
					float got = y[(size_t)t * ldy + r];
					if (t >= n || r >= nr) { /* outside the job: never written */
						untouched &= got == 0.5f;
						continue;
					}
					double want = ref[(size_t)t * ldy + r] + (j.accumulate ? 0.5 : 0);
					num = fmax(num, fabs(got - want));
					den = fmax(den, fabs(want));
				}
			EXPECTF(num / den < 2e-6, "%s %dx%d view (%d+%d, %d+%d) n=%d x_bf16 %d level %s: rel err %g",
				dtype_name(dt), rows, cols, r0, nr, c0, nc, n, xbf,
				ops_level_name((enum ops_level)lvl), num / den);
			EXPECTF(untouched, "%s n=%d level %s: wrote outside the job", dtype_name(dt), n,
				ops_level_name((enum ops_level)lvl));
		}
	free(x);
	free(ref);
	free(y);
	wbuf_free(&b);
}

static void check_gemm_every_n(enum dtype dt, int rows, int cols, int r0, int nr, int c0, int nc)
{
	check_gemm_every_n_x(dt, rows, cols, r0, nr, c0, nc, 0);
	check_gemm_every_n_x(dt, rows, cols, r0, nr, c0, nc, 1);
}

static void test_gemm_every_n(void)
{
	check_gemm_every_n(DT_BF16, 83, 1043, 0, 83, 0, 1043); /* 1043 = 2 x 512 + 19 */
	check_gemm_every_n(DT_BF16, 150, 300, 9, 131, 5, 290);
	check_gemm_every_n(DT_F8_E4M3, 140, 300, 3, 133, 37, 250);
	check_gemm_every_n(DT_F16, 37, 45, 0, 37, 0, 45);
	check_gemm_every_n(DT_F32, 21, 530, 0, 21, 0, 530);
}

/* Many jobs of mixed token counts in one call, as a MoE layer issues them (experts with 1-3
 * tokens, a shared expert with all of them): the threads take panels from both ends of the
 * list and must still compute every panel exactly once. */
static void test_gemm_multi_mixed(void)
{
	enum { NJ = 40, ROWS = 130, COLS = 2000 }; /* enough work per call that both threads take items */
	struct wbuf b;
	wbuf_make(&b, DT_BF16, ROWS, COLS);
	float *x = malloc(sizeof(float) * 64 * COLS), *ref = malloc(sizeof(float) * 64 * ROWS);
	float *y = malloc(sizeof(float) * (size_t)NJ * 64 * ROWS);
	for (int i = 0; i < 64 * COLS; i++)
		x[i] = frand();
	gemm_naive(&b.w, x, COLS, 64, ref, ROWS);
	struct gemm_job j[NJ];
	for (int i = 0; i < NJ; i++)
		j[i] = (struct gemm_job){.w = &b.w,
					 .x = x,
					 .ldx = COLS,
					 .y = y + (size_t)i * 64 * ROWS,
					 .ldy = ROWS,
					 .n = i == NJ - 1  ? 64
					      : i % 7 == 3 ? 0
							   : 1 + i % 3,
					 .accumulate = i & 1};
	for (int rep = 0; rep < 8; rep++) {
		for (size_t i = 0; i < (size_t)NJ * 64 * ROWS; i++)
			y[i] = 1.0f;
		ops_gemm_multi(g_pool, NJ, j);
		double worst = 0;
		for (int i = 0; i < NJ; i++)
			for (int t = 0; t < j[i].n; t++)
				for (int r = 0; r < ROWS; r++) {
					double want = ref[(size_t)t * ROWS + r] + (j[i].accumulate ? 1.0 : 0.0);
					worst = fmax(worst, fabs(j[i].y[(size_t)t * ROWS + r] - want));
				}
		EXPECTF(worst < 1e-4, "mixed jobs, repeat %d: max abs err %g", rep, worst);
	}
	free(x);
	free(ref);
	free(y);
	wbuf_free(&b);
}

/* The AVX2 fp8 decode (f16 trick) is exact for every byte but NaN. */
static void test_fp8_all_bytes(void)
{
	uint8_t wq[256];
	float sc = 1.0f, x[256], y[OPS_N_LEVELS];
	for (int i = 0; i < 256; i++) {
		wq[i] = (i & 0x7f) == 0x7f ? 0 : (uint8_t)i; /* NaN bytes would poison the sum */
		x[i] = 0;
	}
	struct wmat w = {.dtype = DT_F8_E4M3,
			 .data = wq,
			 .rows = 1,
			 .cols = 256,
			 .ld = 256,
			 .scale = &sc,
			 .scale_ld = 1,
			 .blk_r = 256,
			 .blk_c = 256};
	for (int i = 0; i < 256; i++) {
		if ((i & 0x7f) == 0x7f)
			continue;
		x[i] = 1;
		for (int lvl = OPS_PORTABLE; lvl <= (int)ops_level_best(); lvl++) {
			/* x = 1 is a bf16: the AVX512_BF16 level decodes through its bf16 table */
			struct gemm_job j = {.w = &w, .x = x, .ldx = 256, .y = &y[lvl], .ldy = 1, .n = 1, .x_bf16 = 1};
			ops_gemm_multi_at((enum ops_level)lvl, NULL, 1, &j);
			EXPECTF(y[lvl] == fp8_e4m3_to_f32((uint8_t)i), "byte 0x%02x level %d: %g", i, lvl, y[lvl]);
		}
		x[i] = 0;
	}
}

/* The two fp8 step decoders of ops/fp8_512.h decode a packed step as its layout says
 * (ops/prepack.h: byte 2q is word q of rows 0-15, byte 2q + 1 word q of rows 16-31): every
 * byte value at every one of a step's 64 positions, the other positions random (a wrong
 * lane or byte order shows up as a wrong word). Returns a bitmask: 1 the arithmetic
 * decoder wrong, 2 the lookups wrong. */
static __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi"))) int fp8_decoders_differ(
	const uint8_t raw[64])
{
	_Alignas(64) uint16_t want[2][32], got[2][2][32];
	for (int q = 0; q < 32; q++)
		for (int h = 0; h < 2; h++) {
			uint8_t v = raw[2 * q + h];
			want[h][q] = (uint16_t)(fp8_e4m3_bf16_bits[v & 0x7f] | (v & 0x80) << 8);
		}
	__m512i sub = fp8_512_table(), r = _mm512_loadu_si512(raw), w0, w1;
	fp8_512_decode_step(r, sub, &w0, &w1);
	_mm512_store_si512(got[0][0], w0);
	_mm512_store_si512(got[0][1], w1);
	struct fp8_vbmi t;
	fp8_vbmi_load(&t);
	fp8_vbmi_decode(r, &t, &w0, &w1);
	_mm512_store_si512(got[1][0], w0);
	_mm512_store_si512(got[1][1], w1);
	return (memcmp(got[0], want, sizeof want) ? 1 : 0) | (memcmp(got[1], want, sizeof want) ? 2 : 0);
}

static void test_fp8_vbmi_decode(void)
{
	/* the shared table: bf16 of byte v is the e4m3 value (NaN bytes: +-480 in both decoders) */
	for (int v = 0; v < 256; v++)
		if ((v & 0x7f) != 0x7f)
			EXPECTF(bf16_to_f32(fp8_e4m3_bf16_bits[v & 0x7f]) == fabsf(fp8_e4m3_to_f32((uint8_t)v)),
				"magnitude of 0x%02x", v);
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx512bf16") || !ops_cpu_has_vbmi()) {
		printf("  (no AVX512_BF16 + AVX512_VBMI: skipped)\n");
		return;
	}
	int bad[2] = {0, 0};
	uint8_t raw[64];
	for (int pos = 0; pos < 64; pos++)
		for (int v = 0; v < 256; v++) {
			for (int i = 0; i < 64; i++)
				raw[i] = (uint8_t)(test_rand(&rng_state) & 0xff);
			raw[pos] = (uint8_t)v;
			int d = fp8_decoders_differ(raw);
			bad[0] += d & 1, bad[1] += d >> 1;
		}
	EXPECTF(bad[0] == 0 && bad[1] == 0, "of 16384 steps %d (arithmetic) and %d (lookups) decode wrong", bad[0],
		bad[1]);
}

/* Kernels keep their big scratch per thread on the heap (ops/scratch.h), not in static TLS:
 * a thread with a small stack (the bench's request waiters use 512 KB, static TLS included)
 * must start, and every GEMM path must run in it. */
struct small_stack_run {
	double err;
};

static void *gemm_small_stack(void *arg)
{
	struct small_stack_run *r = arg;
	struct wbuf b;
	wbuf_make(&b, DT_BF16, 70, 600);
	float *x = malloc(sizeof(float) * 64 * 600), *y = malloc(sizeof(float) * 64 * 70),
	      *ref = malloc(sizeof(float) * 64 * 70);
	for (int i = 0; i < 64 * 600; i++)
		x[i] = frand();
	ops_round_bf16(x, 64 * 600);
	gemm_naive(&b.w, x, 600, 64, ref, 70);
	r->err = 0;
	int ns[] = {1, 5, 16, 64}; /* single tile, row blocks, packed */
	for (int xbf = 0; xbf < 2; xbf++)
		for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
			struct gemm_job j = {
				.w = &b.w, .x = x, .ldx = 600, .y = y, .ldy = 70, .n = ns[i], .x_bf16 = xbf};
			ops_gemm_multi(NULL, 1, &j);
			r->err = fmax(r->err, rel_err(y, ref, ns[i], 70, 70));
		}
	free(x), free(y), free(ref);
	wbuf_free(&b);
	return NULL;
}

static void test_gemm_in_small_stack_thread(void)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_t th;
	struct small_stack_run r = {.err = 1};
	int rc = pthread_create(&th, &attr, gemm_small_stack, &r);
	pthread_attr_destroy(&attr);
	EXPECTF(rc == 0, "pthread_create with a 256 KB stack failed: %d", rc);
	if (rc)
		return;
	pthread_join(th, NULL);
	EXPECTF(r.err < 2e-6, "GEMM in a small-stack thread: rel err %g", r.err);
}

static void test_dispatch_level(void)
{
	/* the dispatcher finds what the CPU has (unless MLASERVE_CPU_LEVEL caps it) */
	__builtin_cpu_init();
	bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
	bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
	bool bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
	unsigned a, b, c, d;
	/* AMX also needs the OS's permission, which only the probe asks for */
	bool amx = bf16 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)) && (d & (1u << 24));
	if (!getenv("MLASERVE_CPU_LEVEL")) {
		if (amx && ops_level_best() == OPS_AMX)
			EXPECT_EQ_INT(ops_level_best(), OPS_AMX);
		else
			EXPECT_EQ_INT(ops_level_best(), bf16     ? OPS_AVX512_BF16
							: avx512 ? OPS_AVX512
							: avx2   ? OPS_AVX2
								 : OPS_PORTABLE);
	}
	printf("  dispatch level on this CPU: %s\n", ops_level_name(ops_level_best()));
	EXPECT(ops_level_name(OPS_PORTABLE) != NULL);
	/* AVX-VNNI (CPUID.(7,1):EAX bit 4): on where the CPU has it, unless the level is capped at
	 * avx2 (an AVX2-only CPU) or below; settable for tests */
	bool vnni = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) && ops_level_best() >= OPS_AVX2;
	const char *cap = getenv("MLASERVE_CPU_LEVEL");
	bool off = cap && (!strcmp(cap, "avx2") || !strcmp(cap, "portable"));
	int was = ops_cpu_has_avx_vnni();
	EXPECT_EQ_INT(was, vnni && !off);
	ops_cpu_set_avx_vnni(1);
	EXPECT_EQ_INT(ops_cpu_has_avx_vnni(), vnni);
	ops_cpu_set_avx_vnni(0);
	EXPECT_EQ_INT(ops_cpu_has_avx_vnni(), 0);
	ops_cpu_set_avx_vnni(was);
	printf("  AVX-VNNI: %s\n", vnni ? (was ? "on" : "present, off") : "absent");
}

/* The denormal probe (the AVX2 fp8 decode's choice): never on below AVX2 or with DAZ set (it
 * would read e4m3's subnormals as zeros), settable otherwise; whether this CPU's FMAs take
 * denormals at full speed is only printed (a measurement, not a CPU bit) */
static void test_denormal_probe(void)
{
	int was = ops_cpu_denormals_fast();
	bool avx2 = ops_level_best() >= OPS_AVX2;
	printf("  denormal operands at full speed: %s\n", was ? "yes" : "no");
	EXPECT(!was || avx2);
	ops_cpu_set_denormals_fast(1);
	EXPECT_EQ_INT(ops_cpu_denormals_fast(), avx2);
	ops_cpu_set_denormals_fast(0);
	EXPECT_EQ_INT(ops_cpu_denormals_fast(), 0);
	unsigned csr = _mm_getcsr();
	_mm_setcsr(csr | 0x40); /* DAZ */
	ops_cpu_set_denormals_fast(-1);
	EXPECT_EQ_INT(ops_cpu_denormals_fast(), 0);
	ops_cpu_set_denormals_fast(1);
	EXPECT_EQ_INT(ops_cpu_denormals_fast(), 0);
	_mm_setcsr(csr);
	ops_cpu_set_denormals_fast(was);
}

static struct rope_params yarn(float mscale_all_dim)
{
	return (struct rope_params){.dim = 64,
				    .theta = 10000,
				    .yarn = true,
				    .factor = 40,
				    .original_max_position = 4096,
				    .beta_fast = 32,
				    .beta_slow = 1,
				    .mscale = mscale_all_dim,
				    .mscale_all_dim = mscale_all_dim};
}

static void test_yarn_frequencies(void)
{
	struct rope r;
	struct rope_params p = yarn(1.0f);
	EXPECT_EQ_INT(ops_rope_init(&r, &p), 0);
	EXPECT_NEAR(r.inv_freq[0], 1.0, 1e-7);
	EXPECT_NEAR(r.inv_freq[10], 0.0562341325, 1e-6 * 0.0562341325);
	EXPECT_NEAR(r.inv_freq[11], 0.0390069266, 1e-6 * 0.0390069266);
	EXPECT_NEAR(r.inv_freq[16], 0.0055, 1e-6 * 0.0055);
	EXPECT_NEAR(r.inv_freq[22], 1.77827941e-4, 1e-6 * 1.77827941e-4);
	EXPECT_NEAR(r.inv_freq[23], 3.33380358e-5, 1e-6 * 3.33380358e-5);
	EXPECT_NEAR(r.inv_freq[31], 3.33380358e-6, 1e-6 * 3.33380358e-6);
	EXPECT_NEAR(r.mscale, 1.0, 0);
	/* plain RoPE: f_i = theta^(-2i/d) */
	struct rope_params q = p;
	q.yarn = false;
	EXPECT_EQ_INT(ops_rope_init(&r, &q), 0);
	EXPECT_NEAR(r.inv_freq[23], pow(10000, -46.0 / 64), 1e-10);
	q.dim = 63;
	EXPECT(ops_rope_init(&r, &q) < 0);
}

static void test_yarn_low_equals_high(void)
{
	/* dim 4, L = 2.4e8: low = floor(3.06) = 3, high = min(ceil(3.8), 3) = 3 → high = 3.001;
	 * every pair i < 2 is below the ramp: f' = f, all finite */
	struct rope_params p = yarn(1.0f);
	p.dim = 4;
	p.original_max_position = 240000000;
	struct rope r;
	EXPECT_EQ_INT(ops_rope_init(&r, &p), 0);
	EXPECT_NEAR(r.inv_freq[0], 1.0, 1e-7);
	EXPECT_NEAR(r.inv_freq[1], 0.01, 1e-9);
	/* a low == high at 0 (L tiny): pair 0 sits on the ramp start: (0 - 0) / 0.001 = 0 */
	p.original_max_position = 1;
	EXPECT_EQ_INT(ops_rope_init(&r, &p), 0);
	EXPECT(isfinite(r.inv_freq[0]) && isfinite(r.inv_freq[1]));
	EXPECT_NEAR(r.inv_freq[0], 1.0, 1e-7); /* ramp 0 → extrapolation weight 1 */
}

/* ops_softmax_scaled gives the bits of the scale loop, ops_softmax and ops_round_bf16 in turn
 * (the prefill attention's rows), tails and all -inf rows included */
static void test_softmax_scaled_bits(void)
{
	enum { NMAX = 1000 };
	float *a = malloc(sizeof(float) * NMAX), *b = malloc(sizeof(float) * NMAX);
	int ns[] = {1, 5, 16, 17, 100, 1000};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
		for (int v = 0; v < 6; v++) {
			int n = ns[i], rnd = v & 1;
			for (int k = 0; k < n; k++)
				a[k] = b[k] = v >= 4 ? -INFINITY : frand() * (v >= 2 ? 300.0f : 7.0f);
			float s = 0.0883883f;
			for (int k = 0; k < n; k++)
				a[k] *= s;
			float la = ops_softmax(a, n);
			if (rnd)
				ops_round_bf16(a, n);
			float lb = ops_softmax_scaled(b, n, s, rnd);
			EXPECTF(!memcmp(a, b, sizeof(float) * (size_t)n) && (la == lb || (isinf(la) && isinf(lb))),
				"n=%d variant %d: lse %g vs %g", n, v, la, lb);
		}
	free(a), free(b);
}

/* ops_softmax_scaled_to_bf16: the words of ops_softmax_scaled(.., true) converted as the GEMM
 * converts x (vcvtne2ps2bf16: exact on bf16 values, denormals to 0), zeros to the row's end */
static void test_softmax_to_bf16(void)
{
	if (ops_level_best() < OPS_AVX512_BF16) {
		printf("  (no AVX512_BF16: skipped)\n");
		return;
	}
	enum { NMAX = 1000, LD = 1056 };
	float *a = malloc(sizeof(float) * NMAX), *b = malloc(sizeof(float) * NMAX);
	uint16_t *w = malloc(sizeof(uint16_t) * LD);
	int ns[] = {1, 5, 16, 17, 100, 1000};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
		for (int v = 0; v < 3; v++) {
			int n = ns[i], bad = 0;
			for (int k = 0; k < n; k++) /* v 1: a wide range, so that some probabilities are denormal */
				a[k] = b[k] = v == 2 ? -INFINITY : frand() * (v ? 1500.0f : 7.0f);
			for (int k = 0; k < LD; k++)
				w[k] = 0xdead;
			float la = ops_softmax_scaled(a, n, 0.0883883f, true);
			float lb = ops_softmax_scaled_to_bf16(b, n, 0.0883883f, w, LD);
			for (int k = 0; k < LD; k++) {
				uint32_t u;
				memcpy(&u, &a[k < n ? k : 0], 4);
				uint16_t want = k >= n || (u & 0x7f800000u) == 0 ? 0 : (uint16_t)(u >> 16);
				bad += w[k] != want;
			}
			EXPECTF(!bad && (la == lb || (isinf(la) && isinf(lb))),
				"n=%d variant %d: %d words differ, lse %g vs %g", n, v, bad, la, lb);
		}
	free(a), free(b), free(w);
}

static void test_softmax_scales(void)
{
	struct rope_params v3 = yarn(1.0f), v2 = yarn(0.707f), plain = yarn(1.0f);
	plain.yarn = false;
	EXPECT_NEAR(ops_mla_softmax_scale(192, &v3), 0.13523378, 2e-7);
	EXPECT_NEAR(ops_mla_softmax_scale(192, &v2), 0.11472139, 2e-7);
	EXPECT_NEAR(ops_mla_softmax_scale(192, &plain), 0.07216878, 2e-7);
	struct rope_params none = v3;
	none.mscale_all_dim = 0; /* absent: no mscale factor */
	EXPECT_NEAR(ops_mla_softmax_scale(192, &none), 0.07216878, 2e-7);
	/* cos/sin multiplier = mscale(f, mscale) / mscale(f, mscale_all_dim) */
	struct rope r;
	struct rope_params odd = v3;
	odd.mscale = 0.707f;
	ops_rope_init(&r, &odd);
	EXPECT_NEAR(r.mscale, (0.1 * 0.707 * log(40) + 1) / (0.1 * log(40) + 1), 1e-6);
}

static void test_rope_interleaved(void)
{
	struct rope r;
	struct rope_params p = yarn(1.0f);
	ops_rope_init(&r, &p);
	float x[2][64], orig[64];
	for (int i = 0; i < 64; i++)
		orig[i] = x[0][i] = x[1][i] = frand();
	ops_rope_apply(&r, &x[0][0], 2, 64, 300);
	for (int i = 0; i < 32; i++) {
		double a = 300.0 * r.inv_freq[i];
		double e0 = orig[2 * i] * cos(a) - orig[2 * i + 1] * sin(a);
		double e1 = orig[2 * i + 1] * cos(a) + orig[2 * i] * sin(a);
		EXPECT_NEAR(x[0][2 * i], e0, 1e-5);
		EXPECT_NEAR(x[1][2 * i + 1], e1, 1e-5);
	}
	/* position 0 is the identity */
	memcpy(x[0], orig, sizeof orig);
	ops_rope_apply(&r, x[0], 1, 64, 0);
	EXPECT(memcmp(x[0], orig, sizeof orig) == 0);
}

static void test_route_ties_lower_index(void)
{
	float logits[8] = {0.5f, 1.0f, 1.0f, 0.2f, 1.0f, -1, -2, 0.9f};
	int ids[3];
	float w[3];
	struct route_params p = {.n_experts = 8,
				 .top_k = 3,
				 .n_group = 1,
				 .topk_group = 1,
				 .sigmoid = false,
				 .norm_topk_prob = false,
				 .routed_scaling_factor = 1.0f};
	ops_moe_route(&p, logits, ids, w);
	EXPECT_EQ_INT(ids[0], 1);
	EXPECT_EQ_INT(ids[1], 2);
	EXPECT_EQ_INT(ids[2], 4);
	/* softmax weights, not renormalised */
	double z = 0;
	for (int i = 0; i < 8; i++)
		z += exp(logits[i]);
	EXPECT_NEAR(w[0], exp(1.0) / z, 1e-6);
}

static void test_route_groups_bias_and_masking(void)
{
	/* 4 groups of 2. Group 0 holds the single best biased expert (0) but the lowest top-2
	 * sum; groups 1 and 2 win with top-2 sums. Biases are negative enough that biased
	 * scores go below 0: dropped groups must be masked with -inf, not 0. */
	float logits[8] = {3.0f, -3.0f, 1.0f, 1.0f, 0.5f, 0.5f, -4.0f, -4.0f};
	float bias[8] = {0, 0, -0.6f, -0.6f, -0.5f, -0.5f, -0.3f, -0.3f};
	int ids[3];
	float w[3];
	struct route_params p = {.n_experts = 8,
				 .top_k = 3,
				 .n_group = 4,
				 .topk_group = 2,
				 .sigmoid = true,
				 .norm_topk_prob = true,
				 .routed_scaling_factor = 2.5f,
				 .bias = bias};
	ops_moe_route(&p, logits, ids, w);
	/* biased: e0 .953, e1 .047 (g0 sum 1.0); e2,e3 .131 (g1 .262); e4,e5 .122 (g2 .245);
	 * e6,e7 -.282 (g3 -.564). Kept groups: 0 and 1 → experts 0, 2, 3 */
	EXPECT_EQ_INT(ids[0], 0);
	EXPECT_EQ_INT(ids[1], 2);
	EXPECT_EQ_INT(ids[2], 3);
	/* weights: original sigmoid scores (no bias), renormalised, × 2.5 */
	double s0 = 1 / (1 + exp(-3.0)), s2 = 1 / (1 + exp(-1.0));
	double sum = s0 + 2 * s2;
	EXPECT_NEAR(w[0], 2.5 * s0 / sum, 1e-6);
	EXPECT_NEAR(w[1], 2.5 * s2 / sum, 1e-6);
	EXPECT_NEAR(w[0] + w[1] + w[2], 2.5, 1e-5);

	/* all biased scores negative in every kept group: -inf masking still keeps the choice
	 * inside the kept groups (0.0 masking would pick a dropped expert) */
	float l2[8] = {-5, -5, -5, -5, -6, -6, -6, -6};
	float b2[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
	p.top_k = 4;
	p.topk_group = 1;
	p.bias = b2;
	int ids2[4];
	float w2[4];
	ops_moe_route(&p, l2, ids2, w2);
	/* group 0 wins (ties between groups 0,1 → lower index), then only experts 0 and 1
	 * are finite; the other two picks are -inf entries of dropped groups */
	EXPECT(ids2[0] == 0 && ids2[1] == 1);
}

static void test_route_group_max_softmax(void)
{
	/* group_limited_greedy: softmax, group score = max, no bias */
	float logits[6] = {1.0f, 0.0f, 0.0f, 2.0f, 0.5f, 0.9f};
	int ids[2];
	float w[2];
	struct route_params p = {.n_experts = 6,
				 .top_k = 2,
				 .n_group = 3,
				 .topk_group = 1,
				 .sigmoid = false,
				 .norm_topk_prob = false,
				 .routed_scaling_factor = 16.0f};
	ops_moe_route(&p, logits, ids, w);
	/* group maxes: 1.0, 2.0, 0.9 → only group 1 (experts 2, 3) */
	EXPECT_EQ_INT(ids[0], 3);
	EXPECT_EQ_INT(ids[1], 2);
	double z = exp(1.0) + 2 + exp(2.0) + exp(0.5) + exp(0.9);
	EXPECT_NEAR(w[0], 16 * exp(2.0) / z, 1e-5);
}

static void test_vec_ops(void)
{
	float x[37], y[37], w[37];
	double ss = 0;
	for (int i = 0; i < 37; i++) {
		x[i] = frand();
		w[i] = frand();
		ss += (double)x[i] * x[i];
	}
	ops_rmsnorm(y, 37, x, 37, w, 1, 37, 1e-6f);
	double r = 1 / sqrt(ss / 37 + 1e-6);
	for (int i = 0; i < 37; i++)
		EXPECT_NEAR(y[i], x[i] * r * w[i], 1e-5);
	double d = 0;
	for (int i = 0; i < 37; i++)
		d += (double)x[i] * w[i];
	EXPECT_NEAR(ops_dot(x, w, 37), d, 1e-5);
	float s[4] = {1, 2, 3, -INFINITY};
	float lse = ops_softmax(s, 4);
	EXPECT_NEAR(lse, log(exp(1) + exp(2) + exp(3)), 1e-6);
	EXPECT_NEAR(s[2], exp(3) / (exp(1) + exp(2) + exp(3)), 1e-6);
	EXPECT(s[3] == 0);
	float e[2] = {-INFINITY, -INFINITY};
	EXPECT(ops_softmax(e, 2) == -INFINITY && e[0] == 0);
	int idx[3];
	float t[5] = {1, 3, 3, NAN, 2};
	ops_topk(t, 5, 3, idx);
	EXPECT(idx[0] == 1 && idx[1] == 2 && idx[2] == 4);
	float allnan[3] = {NAN, NAN, NAN};
	ops_topk(allnan, 3, 2, idx);
	EXPECT(idx[0] == 0 && idx[1] == 1); /* every slot filled, never -1 */
	float g = 0.7f, u = 2.0f, o;
	ops_silu_mul(&o, &g, &u, 1);
	EXPECT_NEAR(o, 0.7 / (1 + exp(-0.7)) * 2, 1e-6);
}

/* ops_silu_mul (vectorized where the CPU allows) within a few ulp of the exact value, over
 * the range activations take, the extremes where exp over/underflows, NaN, and tails. */
static void test_silu_mul_range(void)
{
	enum { N = 1000 };
	float g[N], u[N], o[N];
	for (int i = 0; i < N; i++) {
		g[i] = (float)(i - N / 2) * 0.05f; /* [-25, 25) */
		u[i] = 1.0f + (float)(i % 7) * 0.25f;
	}
	g[0] = -200.0f, g[1] = 200.0f, g[2] = -88.0f, g[3] = 89.0f, g[4] = 1e-30f, g[5] = -0.0f;
	for (int n = 1; n <= N; n += n < 40 ? 1 : 97) {
		for (int i = 0; i < N; i++)
			o[i] = 12345.0f;
		ops_silu_mul(o, g, u, n);
		for (int i = 0; i < N; i++) {
			if (i >= n) {
				EXPECTF(o[i] == 12345.0f, "n=%d: wrote past the end at %d", n, i);
				continue;
			}
			double want = (double)g[i] / (1.0 + exp(-(double)g[i])) * (double)u[i];
			EXPECTF(fabs(o[i] - want) <= 4e-7 * fabs(want) + 1e-35,
				/* past -88: ~1e-37, not 0 */ "n=%d silu(%g)*%g = %.9g, want %.9g", n, g[i], u[i],
				o[i], want);
		}
	}
	float nan = NAN, one = 1.0f, r;
	ops_silu_mul(&r, &nan, &one, 1);
	EXPECT(isnan(r));
}

/* ops_round_bf16 (vectorized where the CPU allows) equals f32_to_bf16 bit for bit: ties to
 * even both ways, the largest finite values rounding to infinity, infinities, NaNs kept
 * quiet, denormals, and a tail shorter than a vector. */
static void test_round_bf16_specials(void)
{
	uint32_t bits[] = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u, 0x7f7fffffu,
			   0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffa00001u, 0x00000001u,
			   0x807fffffu, 0x00008000u, 0x00018000u, 0x4b7fffffu, 0xc0490fdbu, 0x3eaaaaabu, 0x7f7f8000u};
	enum { N = sizeof bits / sizeof bits[0] };
	float x[N + 40], want[N + 40];
	for (int i = 0; i < N + 40; i++) {
		uint32_t u = i < N ? bits[i] : (uint32_t)(frand() * 2147483647.0f) ^ (uint32_t)i << 20;
		memcpy(&x[i], &u, 4);
		want[i] = bf16_to_f32(f32_to_bf16(x[i]));
	}
	for (int n = 1; n <= N + 40; n += 7) {
		float y[N + 40];
		memcpy(y, x, sizeof y);
		ops_round_bf16(y, n);
		for (int i = 0; i < N + 40; i++) {
			uint32_t a, b;
			memcpy(&a, &y[i], 4);
			memcpy(&b, i < n ? &want[i] : &x[i], 4);
			uint32_t in;
			memcpy(&in, &x[i], 4);
			EXPECTF(a == b, "n=%d i=%d: %08x -> %08x, want %08x", n, i, in, a, b);
		}
	}
}

static __attribute__((target("avx2,fma"))) void exp8(const float *x, float *y)
{
	_mm256_storeu_ps(y, exp256(_mm256_loadu_ps(x)));
}
static __attribute__((target("avx512f,fma"))) void exp16(const float *x, float *y)
{
	_mm512_storeu_ps(y, exp512(_mm512_loadu_ps(x)));
}

/* exp256 (vexp.h, AVX2) gives exp512's bits (where the CPU has AVX-512) and is within 2 ulp of
 * exp, over [-104, 89] (its gradual underflow included: 2^n applied in two steps must round
 * once, as scalef does), clamped past it, NaN kept */
static void test_vexp_bits(void)
{
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
		printf("  (no AVX2: skipped)\n");
		return;
	}
	int has512 = __builtin_cpu_supports("avx512f");
	enum { N = 16 * 4096 };
	float *x = malloc(sizeof(float) * N), *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
	for (int i = 0; i < N; i++)
		x[i] = -104.5f + 194.0f * (float)i / N; /* past both clamps */
	x[0] = NAN, x[1] = -INFINITY, x[2] = INFINITY, x[3] = 0.0f, x[4] = -87.5f, x[5] = -103.97f, x[6] = 88.72f;
	for (int i = 0; i < N; i += 8)
		exp8(x + i, a + i);
	int bad = 0, bad512 = 0;
	if (has512)
		for (int i = 0; i < N; i += 16) {
			exp16(x + i, b + i);
			for (int k = i; k < i + 16; k++)
				bad512 += memcmp(&a[k], &b[k], 4) != 0 && bad512 < 1000;
		}
	for (int i = 0; i < N; i++) {
		if (isnan(x[i])) {
			bad += !isnan(a[i]);
			continue;
		}
		double xc = x[i] > 88.72f ? 88.72f : x[i] < -104.0f ? -104.0f : x[i];
		double want = exp(xc), tol = 2.0 * (want < 1.2e-38 ? 1.4e-45 : ldexp(1.0, ilogb(want) - 23));
		if (fabs(a[i] - want) > tol && bad++ < 3)
			printf("  exp256(%.9g) = %.9g, want %.9g\n", x[i], a[i], want);
	}
	EXPECTF(bad == 0, "%d values off by more than 2 ulp", bad);
	EXPECTF(bad512 == 0, "%d values differ from exp512", bad512);
	free(x), free(a), free(b);
}

int main(int argc, char **argv)
{
	struct err e;
	if (pool_new(2, &g_pool, &e))
		return 1;
	static const struct test_case cases[] = {
		T(test_denormal_probe),
		T(test_gemm_f32),
		T(test_gemm_bf16),
		T(test_gemm_f16),
		T(test_gemm_fp8_edge_blocks),
		T(test_gemm_fp8_tp_slices),
		T(test_gemm_bf16_slices),
		T(test_gemm_multi),
		T(test_gemm_every_n),
		T(test_gemm_multi_mixed),
		T(test_fp8_all_bytes),
		T(test_fp8_vbmi_decode),
		T(test_gemm_in_small_stack_thread),
		T(test_dispatch_level),
		T(test_yarn_frequencies),
		T(test_yarn_low_equals_high),
		T(test_softmax_scales),
		T(test_softmax_scaled_bits),
		T(test_softmax_to_bf16),
		T(test_rope_interleaved),
		T(test_route_ties_lower_index),
		T(test_route_groups_bias_and_masking),
		T(test_route_group_max_softmax),
		T(test_vec_ops),
		T(test_round_bf16_specials),
		T(test_silu_mul_range),
		T(test_vexp_bits),
	};
	int rc = harness_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
	pool_free(g_pool);
	return rc;
}
