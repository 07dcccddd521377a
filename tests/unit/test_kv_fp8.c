/* --kv-cache-dtype fp8: the row codec (attn/kernels/kv_fp8.h) and the model against the float64
 * references run with --kv-fp8 (tests/fixtures/tiny-v3, tiny-v32: golden/lenN.kvfp8.f32). The
 * suite runs this binary at the CPU's best level; tests/e2e/kv_fp8.sh runs it again at each
 * lower level (avx512_bf16 to portable). The goldens: `python3 scripts/mtp_reference.py --kv-fp8
 * tests/fixtures/tiny-v3 tests/fixtures/tiny-v3/golden/prompts.json lenN OUT`,
 * `scripts/v32_reference.py ... --kv-fp8`. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/kernels/kv_fp8.h"
#include "attn/kernels/mqa.h"
#include "attn/kv_cache.h"
#include "fwd_util.h"
#include "harness.h"
#include "model/model.h"
#include "ops/cpu.h"
#include "ops/pool.h"

static uint64_t g_rng = 12345;
static float urand(void) /* [-1, 1) */
{
	g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((g_rng >> 40) / (double)(1ull << 24)) * 2 - 1;
}

/* the scale of a group as the rule gives it */
static float rule_scale(const float *x, int n)
{
	float a = 0;
	for (int i = 0; i < n; i++)
		a = fmaxf(a, fabsf(x[i]));
	return fmaxf(a / 448.0f, FLT_MIN);
}

/* |decoded - x| within half an e4m3 step: 2^-4 |x| for normal codes, 2^-10 s below them, plus
 * the fp32 product's rounding */
static int within(float d, float x, float s)
{
	float bound = fmaxf(ldexpf(fabsf(x), -4), ldexpf(s, -10)) * (1 + 1e-6f) + fabsf(x) * 1e-7f;
	return fabsf(d - x) <= bound;
}

/* encodes a row of nope + rope values and checks every level's decode against the bound and
 * against the portable decode (bit for bit), fp32 and bf16 */
static void check_row(int nope, int rope, bool ds, const float *c, const float *pe)
{
	struct kv_fp8_layout l;
	struct err e;
	CHECK(kv_fp8_layout_init(&l, nope, rope, ds, &e) == 0);
	uint8_t *row = calloc((size_t)l.row_bytes, 1);
	float *ref = malloc(sizeof(float) * (size_t)(nope + rope)),
	      *got = malloc(sizeof(float) * (size_t)(nope + rope));
	uint16_t *rb = malloc(2 * (size_t)(nope + rope)), *gb = malloc(2 * (size_t)(nope + rope));
	kv_fp8_encode(&l, c, pe, row);
	kv_fp8_decode_f32(&l, row, ref, OPS_PORTABLE);
	kv_fp8_decode_bf16(&l, row, rb, OPS_PORTABLE);
	int bad = 0;
	for (int g = 0; g < nope; g += l.group) {
		float s = rule_scale(c + g, l.group);
		for (int i = g; i < g + l.group; i++)
			bad += !within(ref[i], c[i], s);
	}
	float sr = rope ? rule_scale(pe, rope) : 0;
	for (int i = 0; i < rope; i++)
		bad += ds ? ref[nope + i] != bf16_to_f32(f32_to_bf16(pe[i])) : !within(ref[nope + i], pe[i], sr);
	for (int i = 0; i < nope + rope; i++)
		bad += kv_fp8_value(&l, row, i) != ref[i] || rb[i] != f32_to_bf16(ref[i]);
	EXPECTF(bad == 0, "%d of %d values off (nope %d, rope %d, ds %d)", bad, nope + rope, nope, rope, ds);
	for (int lv = OPS_AVX2; lv <= (int)ops_level_best(); lv++) {
		kv_fp8_decode_f32(&l, row, got, (enum ops_level)lv);
		kv_fp8_decode_bf16(&l, row, gb, (enum ops_level)lv);
		int diff = memcmp(got, ref, sizeof(float) * (size_t)(nope + rope)) != 0;
		for (int i = 0; i < nope + rope; i++) /* a denormal value may go to a zero of its sign */
			diff += gb[i] != rb[i] && !(fpclassify(ref[i]) == FP_SUBNORMAL && (gb[i] & 0x7fff) == 0);
		EXPECTF(!diff, "level %s decodes otherwise", ops_level_name((enum ops_level)lv));
	}
	free(row);
	free(ref);
	free(got);
	free(rb);
	free(gb);
}

static void test_layouts(void)
{
	struct kv_fp8_layout l;
	struct err e;
	/* FlashMLA's fp8_ds_mla: 512 e4m3, 4 fp32 scales, 64 bf16 = 656 bytes; the dense row 596 */
	EXPECT(kv_fp8_layout_init(&l, 512, 64, true, &e) == 0 && l.row_bytes == 656 && l.scale_off == 512 &&
	       l.rope_off == 528 && l.n_scales == 4);
	EXPECT(kv_fp8_layout_init(&l, 512, 64, false, &e) == 0 && l.row_bytes == 596 && l.rope_off == 512 &&
	       l.scale_off == 576 && l.n_scales == 5);
	EXPECT(kv_fp8_layout_init(&l, 64, 16, false, &e) == 0 && l.group == 64 && l.row_bytes == 64 + 16 + 8);
	EXPECT(kv_fp8_layout_init(&l, 200, 64, false, &e) < 0);
	EXPECT_EQ_INT(kv_cache_row_bytes(512, 64, DT_F8_E4M3, true), 656);
	EXPECT_EQ_INT(kv_cache_row_bytes(512, 64, DT_F8_E4M3, false), 596);
	EXPECT_EQ_INT(kv_cache_row_bytes(512, 64, DT_BF16, false), 1152);
}

/* the capacity in tokens of one byte budget: fp8 at least 1.9x bf16 for the dense V2/V3 row;
 * V3.2's fp8_ds_mla row (656) with its indexer keys (132 either way) gives 1.63x */
static void test_capacity(void)
{
	size_t budget = (size_t)64 << 30;
	size_t bf16 = budget / kv_cache_row_bytes(512, 64, DT_BF16, false);
	size_t fp8 = budget / kv_cache_row_bytes(512, 64, DT_F8_E4M3, false);
	EXPECTF(fp8 * 10 >= bf16 * 19, "dense: %zu fp8 tokens against %zu bf16", fp8, bf16);
	size_t idx = kv_cache_index_bytes_per_block(1, 1, 128);
	EXPECT_EQ_INT(idx, 132);
	size_t s16 = budget / (kv_cache_row_bytes(512, 64, DT_BF16, true) + idx);
	size_t s8 = budget / (kv_cache_row_bytes(512, 64, DT_F8_E4M3, true) + idx);
	EXPECT(s8 * 100 >= s16 * 162 && s8 * 100 < s16 * 164);
}

static void test_round_trip(void)
{
	float c[512], pe[64];
	for (int trial = 0; trial < 20; trial++) {
		float mag = ldexpf(1, trial * 6 - 60); /* 2^-60 .. 2^54 */
		for (int i = 0; i < 512; i++)
			c[i] = urand() * mag * (i % 97 == 0 ? 30 : 1);
		for (int i = 0; i < 64; i++)
			pe[i] = urand() * mag * 4;
		check_row(512, 64, true, c, pe);
		check_row(512, 64, false, c, pe);
		check_row(64, 16, false, c, pe);
		check_row(96, 24, true, c, pe);
	}
}

static void test_zero_and_extreme_rows(void)
{
	float c[512] = {0}, pe[64] = {0};
	struct kv_fp8_layout l;
	struct err e;
	CHECK(kv_fp8_layout_init(&l, 512, 64, false, &e) == 0);
	uint8_t row[596];
	float d[576];
	kv_fp8_encode(&l, c, pe, row);
	kv_fp8_decode_f32(&l, row, d, ops_level_best());
	int nz = 0;
	for (int i = 0; i < 576; i++)
		nz += d[i] != 0;
	float s;
	memcpy(&s, row + l.scale_off, 4);
	EXPECT(nz == 0 && s == FLT_MIN);
	check_row(512, 64, false, c, pe);
	/* the largest finite floats (amax / 448 stays finite), and denormals (the scale floors at
	 * FLT_MIN: they decode within 2^-10 FLT_MIN) */
	for (int i = 0; i < 512; i++)
		c[i] = (i & 1 ? -FLT_MAX : FLT_MAX) * (1 - i / 1024.0f);
	for (int i = 0; i < 64; i++)
		pe[i] = (i & 1 ? 1e-42f : -3e-40f);
	check_row(512, 64, false, c, pe);
	check_row(512, 64, true, c, pe);
	/* one huge value among tiny ones: the tiny ones fall to 0 or subnormal codes, within bound */
	for (int i = 0; i < 512; i++)
		c[i] = i == 7 ? 1e6f : 1e-3f * urand();
	check_row(512, 64, false, c, pe);
}

/* every code (but the NaNs, never written) under scales at and around the ends of the table
 * decode's range (2^-116 .. 2^100) and between: each level's bf16 decode gives the portable bits */
static void test_all_codes(void)
{
	static const float scales[] = {FLT_MIN,  0x1p-117f, 0x1.fffffep-117f, 0x1p-116f, 0x1.8p-116f, 3.7e-20f,
				       0.0123f,  1.0f,      0.7734375f,       5.3e17f,   0x1p100f,    0x1.000002p100f,
				       0x1p110f, 7.9e35f};
	struct kv_fp8_layout l;
	struct err e;
	CHECK(kv_fp8_layout_init(&l, 512, 64, false, &e) == 0);
	uint8_t row[596];
	uint16_t ref[576], got[576];
	for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
		for (int i = 0; i < 576; i++) {
			int c = (i * 37 + (int)si) & 0xff;
			row[i] = (uint8_t)((c & 0x7f) == 0x7f ? c - 1 : c);
		}
		for (int g = 0; g < l.n_scales; g++)
			memcpy(row + l.scale_off + 4 * g,
			       &scales[(si + (size_t)g) % (sizeof scales / sizeof scales[0])], 4);
		kv_fp8_decode_bf16(&l, row, ref, OPS_PORTABLE);
		for (int lv = OPS_AVX2; lv <= (int)ops_level_best(); lv++) {
			kv_fp8_decode_bf16(&l, row, got, (enum ops_level)lv);
			int diff = 0;
			for (int i = 0; i < 576; i++)
				diff += got[i] != ref[i] && !(fpclassify(kv_fp8_value(&l, row, i)) == FP_SUBNORMAL &&
							      (got[i] & 0x7fff) == 0);
			EXPECTF(!diff, "level %s, scale %g: %d values differ", ops_level_name((enum ops_level)lv),
				(double)scales[si], diff);
		}
	}
}

/* The paged MQA over an fp8 cache against the same kernels over a bf16 cache holding the fp8
 * rows' bf16 decodes: bit for bit at every bf16-product level (the AMX kernels decode each block
 * while the previous block's tiles run), for 16 and 128 heads (64- and 256-key blocks), several
 * blocks and a part one, pages in a scattered order, two query tokens seeing different keys. */
static void test_mqa_over_decoded_rows(void)
{
	enum { CTX = 700, BS = 64, NB = (CTX + BS - 1) / BS };
	struct kv_cache kv[2]; /* fp8, bf16 */
	struct err e;
	CHECK(kv_cache_init(&kv[0], 1, NB + 1, BS, 512, 64, DT_F8_E4M3, &e) == 0);
	CHECK(kv_cache_init(&kv[1], 1, NB + 1, BS, 512, 64, DT_BF16, &e) == 0);
	int32_t bt[NB];
	for (int b = 0; b < NB; b++)
		bt[b] = 1 + (b * 5) % NB; /* NB = 11: a permutation */
	float c[576], d[576];
	uint16_t h[576];
	for (int p = 0; p < CTX; p++) {
		for (int i = 0; i < 576; i++)
			c[i] = urand() * (i < 512 ? 1.0f : 3.0f) * (i % 61 == 0 ? 40.0f : 1.0f);
		int64_t slot = kv_cache_slot(bt, BS, p);
		kv_cache_write(&kv[0], 0, &slot, c, c + 512, 1);
		kv_fp8_decode_bf16(&kv[0].fp8, kv_cache_row_ptr(&kv[0], 0, slot), h, OPS_PORTABLE);
		for (int i = 0; i < 576; i++)
			d[i] = bf16_to_f32(h[i]);
		kv_cache_write(&kv[1], 0, &slot, d, d + 512, 1);
	}
	static const int heads[] = {16, 128};
	for (int hi = 0; hi < 2; hi++) {
		int H = heads[hi], nr = 2 * H;
		float *q = malloc(sizeof(float) * (size_t)nr * 576);
		for (int i = 0; i < nr * 576; i++)
			q[i] = bf16_to_f32(f32_to_bf16(urand()));
		void *ws = aligned_alloc(64, (mqa_scratch_bytes(nr, 576) + 63) & ~(size_t)63);
		float *out[2], *lse[2];
		for (int lv = OPS_AVX512_BF16; lv <= (int)ops_level_best(); lv++) {
			for (int k = 0; k < 2; k++) {
				out[k] = malloc(sizeof(float) * (size_t)nr * 512);
				lse[k] = malloc(sizeof(float) * (size_t)nr);
				int32_t vis[2] = {CTX - 37, CTX};
				struct mqa_job j = {.kv = &kv[k],
						    .bt = bt,
						    .scale = 0.05f,
						    .q = q,
						    .n_tok = 2,
						    .n_heads = H,
						    .vis = vis,
						    .k_begin = 0,
						    .k_end = CTX,
						    .out = out[k],
						    .lse = lse[k],
						    .q_bf16 = true,
						    .p_bf16 = true};
				mqa_run_at(&j, ws, (enum ops_level)lv);
			}
			EXPECTF(!memcmp(out[0], out[1], sizeof(float) * (size_t)nr * 512) &&
					!memcmp(lse[0], lse[1], sizeof(float) * (size_t)nr),
				"level %s, %d heads: fp8 and its decoded bf16 rows differ",
				ops_level_name((enum ops_level)lv), H);
			for (int k = 0; k < 2; k++)
				free(out[k]), free(lse[k]);
		}
		free(q);
		free(ws);
	}
	kv_cache_fini(&kv[0]);
	kv_cache_fini(&kv[1]);
}

/* ---- the model against the --kv-fp8 references ---- */

static struct pool *g_pool;

static struct model *load(const char *name, struct err *e)
{
	if (!g_pool && pool_new(2, &g_pool, e))
		return NULL;
	struct model_options o = {
		.act_dtype = DT_F32, .max_batch_tokens = 128, .max_seqs = 4, .max_model_len = 128, .pool = g_pool};
	struct model *m = NULL;
	return model_load(fixture_path(name), &o, &m, e) ? NULL : m;
}

/* tokens through backend in chunks of `chunk` (0: all), decodes or prefills, over an fp8 cache */
static int run_fp8(struct model *m, const char *backend, const int32_t *tok, int n, int chunk, int decode, float *out,
		   struct err *e)
{
	struct fwd_seq s;
	int V = model_config(m)->vocab_size, q = chunk ? chunk : n;
	int rc = fwd_seq_init(&s, model_config(m), n, DT_F8_E4M3, e);
	for (int st = 0; st < n && !rc; st += q)
		rc = fwd_step(m, &s, attn_backend_by_name(backend), tok, st, st + q <= n ? q : n - st, decode,
			      out + (size_t)st * V, e);
	fwd_seq_fini(&s);
	return rc;
}

struct fp8_run {
	const char *backend;
	int chunk, decode;
};

/* Tolerance 1e-3 on every logit (float32 against float64; the unrounded goldens hold the same);
 * the rounding itself moves logits by far more (checked: else the test could not fail) */
static void check_fixture(const char *fixture, const char *prompt, const struct fp8_run *runs, int n_runs)
{
	struct err e;
	struct model *m = load(fixture, &e);
	EXPECTF(m, "%s: %s", fixture, m ? "" : e.msg);
	if (!m)
		return;
	int V = model_config(m)->vocab_size, n;
	int32_t *tok;
	float *gold = fwd_golden(fixture, prompt, "kvfp8", V, &tok, &n);
	int32_t *t2;
	int n2;
	float *plain = fwd_golden(fixture, prompt, "logits", V, &t2, &n2);
	float *out = malloc(sizeof(float) * (size_t)n * V);
	if (gold && plain && out) {
		float moved = fwd_max_abs_diff(gold, plain, (size_t)n * V);
		EXPECTF(moved > 1e-2f, "%s: the fp8 reference moves logits by only %g", fixture, moved);
		for (int r = 0; r < n_runs; r++) {
			EXPECTF(run_fp8(m, runs[r].backend, tok, n, runs[r].chunk, runs[r].decode, out, &e) == 0, "%s",
				e.msg);
			float d = fwd_max_abs_diff(out, gold, (size_t)n * V);
			EXPECTF(d <= 1e-3f,
				"%s %s, chunks of %d (%s): max |logit - kvfp8 reference| %g (fp8 moved %g)", fixture,
				prompt, runs[r].chunk, runs[r].backend, d, moved);
		}
	}
	free(out);
	free(gold);
	free(plain);
	free(tok);
	free(t2);
	model_free(m);
}

/* dense models: decodes read every row (their own too) from the cache; a prefill attends its
 * fresh rows rounded as the cache holds them, and its context (an earlier chunk, a prefix-cache
 * hit) from the cache: every way of running a prompt gives the same logits */
static void test_golden_v3_kv_fp8(void)
{
	static const struct fp8_run runs[] = {
		{"FLASHMLA", 1, 1},       {"FLASH_ATTN_MLA", 1, 1}, {"REFERENCE_MLA", 1, 1}, {"FLASHMLA", 7, 1},
		{"FLASH_ATTN_MLA", 7, 1}, {"FLASHMLA", 0, 0},       {"REFERENCE_MLA", 7, 0}, {"FLASHMLA", 5, 0}};
	check_fixture("tiny-v3", "len17", runs, 8);
	check_fixture("tiny-v3", "len64", runs, 8);
}

/* V3.2: every token, prefill or decode, attends through the sparse path over the cache */
static void test_golden_v32_kv_fp8(void)
{
	static const struct fp8_run runs[] = {{"FLASHMLA_SPARSE", 0, 0}, {"FLASHMLA_SPARSE", 1, 1}};
	check_fixture("tiny-v32", "len17", runs, 2);
}

TESTS(T(test_layouts), T(test_capacity), T(test_round_trip), T(test_zero_and_extreme_rows), T(test_all_codes),
      T(test_mqa_over_decoded_rows), T(test_golden_v3_kv_fp8), T(test_golden_v32_kv_fp8))
