/* --quantization fp8 (ops/quant_fp8.h): the e4m3 rounding against a brute-force nearest
 * search, the block quantizer's properties (scales, error bound, regions that quantize as
 * the whole matrix, non-finite weights), and the quantized models against golden logits of
 * scripts/mtp_reference.py --quantize-fp8 (a float64 forward that quantizes by its own
 * search; tests/fixtures/tiny-v3/golden/README.md) on every backend, float32. */
#include <float.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "base/dtype.h"
#include "fwd_util.h"
#include "harness.h"
#include "model/model.h"
#include "ops/pool.h"
#include "ops/quant_fp8.h"

static struct pool *g_pool;

/* The nearest of the 127 finite e4m3 magnitudes by search (ties: the even code), saturating
 * at 448; NaN -> 0x7f. Distances in double, exact for these operands. */
static uint8_t nearest_e4m3(float f)
{
	if (isnan(f))
		return (signbit(f) ? 0x80 : 0) | 0x7f;
	double a = fabs((double)f);
	int best = 0;
	double bd = INFINITY;
	for (int b = 0; b <= 126; b++) {
		double d = fabs(a - (double)fp8_e4m3_table[b]);
		if (d < bd || (d == bd && b % 2 == 0)) {
			bd = d;
			best = b;
		}
	}
	return (uint8_t)((signbit(f) ? 0x80 : 0) | best);
}

static int check_encode(float f, int *bad)
{
	uint8_t got = f32_to_fp8_e4m3(f), want = nearest_e4m3(f);
	if (got != want && (*bad)++ < 5)
		EXPECTF(0, "%a (%g): 0x%02x, nearest 0x%02x", f, f, got, want);
	return got == want;
}

static void test_encode_is_nearest_even(void)
{
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) /* every bf16 value, infinities and NaNs too */
		check_encode(bf16_to_f32((uint16_t)h), &bad);
	for (int b = 0; b < 126; b++) { /* every midpoint and its neighbours, both signs */
		float lo = fp8_e4m3_table[b], hi = fp8_e4m3_table[b + 1], mid = (lo + hi) / 2;
		float around[] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), lo, hi};
		for (int k = 0; k < 5; k++) {
			check_encode(around[k], &bad);
			check_encode(-around[k], &bad);
		}
	}
	float edges[] = {448,
			 464,
			 nextafterf(464, 0),
			 nextafterf(464, INFINITY),
			 1e30f,
			 INFINITY,
			 0x1p-6f,
			 nextafterf(0x1p-6f, 0),
			 0x1p-10f,
			 0x1.8p-10f,
			 FLT_MIN,
			 0};
	for (size_t k = 0; k < sizeof edges / sizeof *edges; k++) {
		check_encode(edges[k], &bad);
		check_encode(-edges[k], &bad);
	}
	uint64_t s = 0x51ed;
	for (int i = 0; i < 1000000; i++) { /* random bit patterns, and values around the range */
		uint32_t u = test_rand(&s);
		float f;
		memcpy(&f, &u, 4);
		check_encode(f, &bad);
		check_encode(test_frand(&s) * 500.0f, &bad);
		check_encode(test_frand(&s) * 0x1p-5f, &bad);
	}
	EXPECT_EQ_INT(bad, 0);
}

/* The block quantizer's own rounding (8 lanes at a time at the avx2 level and up) on
 * every bf16 value up to 448: blocks whose amax is 448 have scale 1, so each byte must be the
 * nearest e4m3 of the weight itself */
static void test_blocks_every_bf16(void)
{
	int n = 0, cols = 128 * 144; /* one row of blocks: 128 x 18432, 2 x 9216 values per row */
	uint16_t *w = calloc((size_t)128 * (size_t)cols, sizeof(uint16_t));
	for (uint32_t h = 0; h < 0x8000; h++) {
		float f = bf16_to_f32((uint16_t)h);
		if (f <= 448.0f && n < 128 * cols / 2) {
			w[2 * n] = (uint16_t)h;
			w[2 * n + 1] = (uint16_t)(h | 0x8000);
			n++;
		}
	}
	for (int b = 0; b < cols / 128; b++) /* each block's amax: 448 */
		w[b * 128] = f32_to_bf16(448.0f);
	struct wmat src = {.dtype = DT_BF16, .data = w, .rows = 128, .cols = cols, .ld = cols};
	uint8_t *q = malloc((size_t)128 * (size_t)cols);
	float *scale = malloc(sizeof(float) * (size_t)(cols / 128));
	int br, bc, bad = 0;
	EXPECT_EQ_INT(quant_fp8_blocks(g_pool, &src, 0, 128, 0, cols, 128, q, scale, &br, &bc), 0);
	for (int b = 0; b < cols / 128; b++)
		bad += scale[b] != 1.0f;
	for (int i = 0; i < 128 * cols; i++) {
		/* element i sits in row i / cols: the matrix is filled row-major */
		uint8_t want = nearest_e4m3(bf16_to_f32(w[i]));
		if (q[i] != want && bad++ < 5)
			EXPECTF(0, "bf16 0x%04x: 0x%02x, nearest 0x%02x", w[i], q[i], want);
	}
	EXPECTF(n > 16000, "%d values", n);
	EXPECT_EQ_INT(bad, 0);
	free(scale);
	free(q);
	free(w);
}

#define R 300
#define C 200 /* 3 x 2 blocks, the last ones partial */

static void fill(uint16_t *w, uint64_t seed)
{
	uint64_t s = seed;
	for (int i = 0; i < R * C; i++)
		w[i] = f32_to_bf16(test_frand(&s) * (i % 97 == 0 ? 3.0f : 0.05f)); /* a few outliers */
}

static void test_blocks(void)
{
	uint16_t *w = malloc(sizeof(uint16_t) * R * C);
	fill(w, 7);
	for (int c = 0; c < 128; c++) /* one all-zero block: rows [128, 256) x cols [0, 128) */
		for (int r = 128; r < 256; r++)
			w[r * C + c] = 0;
	struct wmat src = {.dtype = DT_BF16, .data = w, .rows = R, .cols = C, .ld = C};
	uint8_t *q = malloc(R * C);
	float scale[3 * 2];
	int br = -1, bc = -1;
	EXPECT_EQ_INT(quant_fp8_blocks(g_pool, &src, 0, R, 0, C, 128, q, scale, &br, &bc), 0);
	EXPECT_NEAR(scale[1 * 2 + 0], 1.0, 0);
	for (int b = 0; b < 6; b++) {
		int r0 = b / 2 * 128, c0 = b % 2 * 128, r1 = r0 + 128 < R ? r0 + 128 : R,
		    c1 = c0 + 128 < C ? c0 + 128 : C;
		float amax = 0;
		int at_max = 0, worst_ok = 1;
		for (int r = r0; r < r1; r++)
			for (int c = c0; c < c1; c++)
				amax = fmaxf(amax, fabsf(bf16_to_f32(w[r * C + c])));
		if (amax > 0)
			EXPECTF(scale[b] == amax / 448.0f, "block %d: scale %g, amax / 448 %g", b, scale[b],
				amax / 448.0f);
		for (int r = r0; r < r1; r++)
			for (int c = c0; c < c1; c++) {
				float x = bf16_to_f32(w[r * C + c]), d = fp8_e4m3_to_f32(q[r * C + c]) * scale[b];
				at_max += fabsf(d) == 448.0f * scale[b] && amax > 0;
				/* half a step of 3 mantissa bits, or of the subnormal spacing 2^-9 */
				worst_ok &= fabsf(d - x) <= fmaxf(fabsf(x) / 16.0f, 0x1p-10f * scale[b]) * 1.0001f;
			}
		EXPECTF(worst_ok, "block %d: a weight off by more than half a step", b);
		EXPECTF(amax == 0 || at_max >= 1, "block %d: no weight at the block's amax", b);
	}
	/* a region (a tensor-parallel slice, widened to its blocks) gives the whole's bytes */
	uint8_t *qr = malloc(R * C);
	float sr[6] = {0};
	EXPECT_EQ_INT(quant_fp8_blocks(g_pool, &src, 128, 172, 128, 72, 128, qr, sr, &br, &bc), 0);
	int same = 1;
	for (int r = 128; r < R; r++)
		same &= !memcmp(qr + (r - 128) * 72, q + r * C + 128, 72);
	EXPECT(same);
	EXPECT(sr[3] == scale[3] && sr[5] == scale[5] && sr[0] == 0 && sr[2] == 0);
	/* float32 and float16 sources holding the same values give the same bytes */
	float *wf = malloc(sizeof(float) * R * C);
	for (int i = 0; i < R * C; i++)
		wf[i] = bf16_to_f32(w[i]);
	struct wmat srcf = {.dtype = DT_F32, .data = wf, .rows = R, .cols = C, .ld = C};
	EXPECT_EQ_INT(quant_fp8_blocks(NULL, &srcf, 0, R, 0, C, 128, qr, sr, &br, &bc), 0);
	EXPECT(!memcmp(qr, q, R * C) && !memcmp(sr, scale, sizeof sr));
	/* a NaN or an infinity is reported at its place */
	wf[250 * C + 130] = NAN;
	EXPECT_EQ_INT(quant_fp8_blocks(g_pool, &srcf, 0, R, 0, C, 128, qr, sr, &br, &bc), -1);
	EXPECT(br == 250 && bc == 130);
	wf[250 * C + 130] = 1;
	wf[3 * C + 5] = -INFINITY;
	EXPECT_EQ_INT(quant_fp8_blocks(g_pool, &srcf, 0, R, 0, C, 128, qr, sr, &br, &bc), -1);
	EXPECT(br == 3 && bc == 5);
	free(wf);
	free(qr);
	free(q);
	free(w);
}

static struct model *load_opts(const char *name, bool quantize, bool head, bool dummy, enum dtype act, struct err *e)
{
	return fwd_load_quant(name, g_pool, quantize, false, head, dummy, act, e);
}

static struct model *load_act(const char *name, bool quantize, bool dummy, enum dtype act, struct err *e)
{
	return load_opts(name, quantize, false, dummy, act, e);
}

static struct model *load(const char *name, bool quantize, bool dummy, struct err *e)
{
	return load_act(name, quantize, dummy, DT_F32, e);
}

/* The quantized model's logits within 1e-3 of the reference: the whole prompt (prefill
 * path), chunks of 7 (FLASHMLA's multi-token decode, FLASH_ATTN_MLA's), one token at a time
 * (every backend's decode). head: --quantize-lm-head too (golden NAME.fp8qh.f32), against the
 * model without it. */
static void check_golden(const char *fixture, const char *name, bool head)
{
	struct err e;
	struct model *m = load_opts(fixture, true, head, false, DT_F32, &e),
		     *plain = head ? load(fixture, true, false, &e) : load(fixture, false, false, &e);
	EXPECTF(m && plain, "%s: %s", fixture, e.msg);
	if (!m || !plain) {
		model_free(m);
		model_free(plain);
		return;
	}
	int n, V = model_config(m)->vocab_size, D = model_config(m)->hidden_size;
	/* the linear layers in fp8: about half the bytes of the bf16 checkpoint's; the head: one
	 * byte a weight plus a float per 128x128 block, for two */
	size_t head_saves = (size_t)V * D - (size_t)((V + 127) / 128) * ((D + 127) / 128) * sizeof(float);
	if (head)
		EXPECTF(model_weight_bytes(plain) - model_weight_bytes(m) == head_saves,
			"%zu bytes with the head quantized, %zu without", model_weight_bytes(m),
			model_weight_bytes(plain));
	else
		EXPECTF(model_weight_bytes(m) < model_weight_bytes(plain), "%zu bytes quantized, %zu bf16",
			model_weight_bytes(m), model_weight_bytes(plain));
	model_free(plain);
	int32_t *tok;
	float *gold = fwd_golden(fixture, name, head ? "fp8qh" : "fp8q", V, &tok, &n);
	char what[128];
	snprintf(what, sizeof what, "%s %s", fixture, name);
	if (tok && gold)
		fwd_check_golden_runs(m, what, tok, n, gold, V, 0); /* every position within 1e-3 */
	free(gold);
	free(tok);
	model_free(m);
}

static void test_golden_v3(void) { check_golden("tiny-v3", "len64", false); }     /* q_lora, sigmoid routing */
static void test_golden_v2(void) { check_golden("tiny-v2", "len17", false); }     /* q_proj, softmax routing */
static void test_golden_lm_head(void) { check_golden("tiny-v3", "len17", true); } /* --quantize-lm-head */

/* An fp8 checkpoint is read as it is; dummy weights are quantized as a checkpoint's */
static void test_fp8_checkpoint_and_dummy(void)
{
	struct err e;
	struct model *a = load("tiny-v3-fp8", true, false, &e), *b = load("tiny-v3-fp8", false, false, &e);
	EXPECTF(a && b, "%s", e.msg);
	if (a && b)
		EXPECT_EQ_INT(model_weight_bytes(a), model_weight_bytes(b));
	model_free(a);
	model_free(b);
	a = load("tiny-v3", true, true, &e);
	b = load("tiny-v3", false, true, &e);
	EXPECTF(a && b, "%s", e.msg);
	if (a && b) {
		EXPECTF(model_weight_bytes(a) < model_weight_bytes(b) * 3 / 4, "%zu vs %zu", model_weight_bytes(a),
			model_weight_bytes(b));
		int32_t tok[5] = {0, 5, 9, 100, 1000};
		float *out = malloc(sizeof(float) * 5 * 1024);
		struct fwd_seq s;
		EXPECT_EQ_INT(fwd_seq_init(&s, model_config(a), 5, DT_F32, &e), 0);
		EXPECT_EQ_INT(fwd_step(a, &s, NULL, tok, 0, 5, 0, out, &e), 0);
		int finite = 1;
		for (int i = 0; i < 5 * 1024; i++)
			finite &= isfinite(out[i]) != 0;
		EXPECT(finite);
		fwd_seq_fini(&s);
		free(out);
	}
	model_free(a);
	model_free(b);
}

/* bf16 activations: the quantized weights are packed for the tile kernels and their own
 * bytes dropped (on avx512_bf16 and up); the logits equal those of the unpacked weights (kept
 * when MLASERVE_MEM_AVAILABLE says the packed copy does not fit) to the summation order,
 * under tensor parallelism's cut blocks too (dist_model.sh) */
static void test_packed_drops_its_source(void)
{
	struct err e;
	int n, V = 1024;
	int32_t *tok = fwd_prompt("tiny-v3", "len17", &n);
	float *out[2] = {malloc(sizeof(float) * (size_t)n * V), malloc(sizeof(float) * (size_t)n * V)};
	for (int k = 0; k < 2; k++) {
		if (k)
			setenv("MLASERVE_MEM_AVAILABLE", "100K", 1);
		struct model *m = load_act("tiny-v3", true, false, DT_BF16, &e);
		unsetenv("MLASERVE_MEM_AVAILABLE");
		EXPECTF(m, "%s", e.msg);
		if (!m)
			continue;
		for (int r = 0; r < 2; r++) { /* whole, then one token at a time (decode GEMMs) */
			struct fwd_seq s;
			EXPECT_EQ_INT(fwd_seq_init(&s, model_config(m), n, DT_BF16, &e), 0);
			int q = r ? 1 : n, rc = 0;
			for (int st = 0; st < n && !rc; st += q)
				rc = fwd_step(m, &s, attn_backend_by_name("FLASHMLA"), tok, st, q, r,
					      out[k] + (size_t)st * V, &e);
			EXPECTF(rc == 0, "%s", e.msg);
			fwd_seq_fini(&s);
		}
		model_free(m);
	}
	EXPECTF(fwd_max_abs_diff(out[0], out[1], (size_t)n * V) < 1e-3f, "%g",
		fwd_max_abs_diff(out[0], out[1], (size_t)n * V));
	free(out[0]);
	free(out[1]);
	free(tok);
}

int main(int argc, char **argv)
{
	struct err e;
	if (pool_new(2, &g_pool, &e))
		return 1;
	static const struct test_case cases[] = {
		T(test_encode_is_nearest_even),
		T(test_blocks_every_bf16),
		T(test_blocks),
		T(test_golden_v3),
		T(test_golden_v2),
		T(test_golden_lm_head),
		T(test_fp8_checkpoint_and_dummy),
		T(test_packed_drops_its_source),
	};
	int rc = harness_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
	pool_free(g_pool);
	return rc;
}
