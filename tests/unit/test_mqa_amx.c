/* The AMX-BF16 MQA kernels (attn/kernels/mqa_amx.c) through mqa_run_at: level amx against
 * avx512_bf16 (the vdpbf16ps kernels) and the portable fp32 level on random bf16 caches with
 * scattered pages, many head counts and tokens, partial key blocks and ranges, P·V in bf16
 * or not. Skipped, with a note, on a CPU without AMX (or under MLASERVE_CPU_LEVEL below amx). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/kv_cache.h"
#include "attn/kernels/mqa.h"
#include "attn/kernels/mqa_amx.h"
#include "base/dtype.h"
#include "harness.h"
#include "ops/cpu.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { return test_rand(&rng); }
static float frand(void) { return test_frand(&rng); }

enum bt_mode { BT_RANDOM, BT_IDENTITY, BT_SWAP_PAIRS };

/* One sequence of L keys in a bf16 cache of pages of bs rows (layer 1; layer 0 stays zero). */
struct fx {
	struct kv_cache kv;
	int32_t *bt;
	int row, dv;
};

static void fx_make(struct fx *f, int L, int bs, enum bt_mode mode)
{
	int nb = (L + bs - 1) / bs, pool = 2 * nb + 2; /* spare pages: the sequence's are spread */
	struct err e;
	CHECK(kv_cache_init(&f->kv, 2, pool + 1, bs, 512, 64, DT_BF16, &e) == 0);
	f->row = 576, f->dv = 512;
	f->bt = malloc(sizeof(int32_t) * (size_t)(nb + 1));
	int *perm = malloc(sizeof(int) * (size_t)pool);
	for (int k = 0; k < pool; k++)
		perm[k] = k + 1;
	if (mode == BT_RANDOM)
		for (int k = pool - 1; k > 0; k--) {
			int j = (int)(rnd() % (unsigned)(k + 1)), t = perm[k];
			perm[k] = perm[j], perm[j] = t;
		}
	for (int b = 0; b < nb; b++) /* swap pairs: 1 3 2 4 5 7 6 8 ..., a 16-key group's ends still 15 rows apart */
		f->bt[b] = mode == BT_SWAP_PAIRS && b % 4 == 1 && b + 1 < nb ? perm[b + 1]
			   : mode == BT_SWAP_PAIRS && b % 4 == 2             ? perm[b - 1]
									     : perm[b];
	free(perm);
	float r[576];
	for (int p = 0; p < L; p++) {
		for (int d = 0; d < 576; d++)
			r[d] = frand();
		int64_t slot = kv_cache_slot(f->bt, bs, p);
		kv_cache_write(&f->kv, 1, &slot, r, r + 512, 1);
	}
}

static void fx_free(struct fx *f)
{
	kv_cache_fini(&f->kv);
	free(f->bt);
}

#define GUARD_ROWS 16 /* after out: a 16-row tile of the last row group must not reach them */

/* One job at `lv`; scratch exactly mqa_scratch_bytes, filled with NaNs, with a guard after
 * it; out with guard rows. */
static void run(const struct fx *f, const float *q, int H, int nt, const int32_t *vis, int kb, int ke, bool pb,
		enum ops_level lv, float *out, float *lse)
{
	int nr = nt * H;
	size_t sb = (mqa_scratch_bytes(nr, f->row) + 63) & ~(size_t)63;
	unsigned char *ws = aligned_alloc(64, sb + 64);
	memset(ws, 0xFF, sb); /* NaN as bf16 and as fp32: no kernel may let it through */
	memset(ws + sb, 0xA5, 64);
	for (int d = 0; d < GUARD_ROWS * f->dv; d++)
		out[(size_t)nr * f->dv + d] = 12345.0f;
	struct mqa_job j = {.kv = &f->kv,
			    .layer = 1,
			    .bt = f->bt,
			    .scale = 2.0f / sqrtf((float)f->row),
			    .q = q,
			    .n_tok = nt,
			    .n_heads = H,
			    .vis = vis,
			    .k_begin = kb,
			    .k_end = ke,
			    .out = out,
			    .lse = lse,
			    .q_bf16 = true,
			    .p_bf16 = pb};
	mqa_run_at(&j, ws, lv);
	int guard = 1;
	for (int i = 0; i < 64; i++)
		guard &= ws[sb + i] == 0xA5;
	for (int d = 0; d < GUARD_ROWS * f->dv; d++)
		guard &= out[(size_t)nr * f->dv + d] == 12345.0f;
	EXPECTF(guard, "%s: wrote past the scratch or the output", ops_level_name(lv));
	free(ws);
}

/* mean |a - b| of finite pairs */
static double mean_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m += isfinite(a[i]) && isfinite(b[i]) ? fabs((double)a[i] - b[i]) : 0;
	return n ? m / (double)n : 0;
}

/* max |a - b|; equal infinities count 0, others inf */
static double max_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++) {
		if (isinf(a[i]) || isinf(b[i])) {
			if (a[i] != b[i])
				return INFINITY;
			continue;
		}
		double d = fabs((double)a[i] - b[i]);
		m = d > m || isnan(d) ? d : m;
	}
	return m;
}

struct tcase {
	int H, nt, bs, L, kb, ke;
	enum bt_mode mode;
	int vis[4]; /* 0: causal decode, token t sees L - nt + t + 1 */
};

static void check_case(const struct tcase *c)
{
	struct fx f;
	fx_make(&f, c->L, c->bs, c->mode);
	int nr = c->nt * c->H;
	int32_t vis[4];
	for (int t = 0; t < c->nt; t++)
		vis[t] = c->vis[0] || c->vis[1] ? c->vis[t] : c->L - c->nt + t + 1;
	float *q = malloc(sizeof(float) * (size_t)nr * f.row);
	for (size_t k = 0; k < (size_t)nr * f.row; k++)
		q[k] = bf16_to_f32(f32_to_bf16(2.0f * frand()));
	size_t no = (size_t)nr * f.dv;
	size_t oc = no + (size_t)GUARD_ROWS * f.dv;
	float *o0 = malloc(4 * oc), *od = malloc(4 * oc), *oa = malloc(4 * oc);
	float *l0 = malloc(4 * (size_t)nr), *ld = malloc(4 * (size_t)nr), *la = malloc(4 * (size_t)nr);
	bool empty = true;
	for (int t = 0; t < c->nt; t++)
		empty &= (vis[t] < c->ke ? vis[t] : c->ke) <= c->kb;
	const double vmax = 1.0; /* the cache's values lie in [-1, 1) */
	run(&f, q, c->H, c->nt, vis, c->kb, c->ke, false, OPS_PORTABLE, o0, l0);
	for (int pb = 0; pb < 2; pb++) {
		run(&f, q, c->H, c->nt, vis, c->kb, c->ke, pb, OPS_AVX512_BF16, od, ld);
		run(&f, q, c->H, c->nt, vis, c->kb, c->ke, pb, OPS_AMX, oa, la);
		/* P·V in bf16: each probability within 2^-9 relative of the fp32 one, so each output
		 * within 2^-9 max|V| of it; P rounded from slightly different scores may land one
		 * bf16 step apart, so amx and avx512_bf16 agree within 2^-8 max|V| */
		double tp = pb ? vmax / 512 + 1e-5 : 1e-5, td = pb ? vmax / 256 : 1e-5;
		double d0 = max_diff(o0, oa, no), dd = max_diff(od, oa, no);
		double dl0 = max_diff(l0, la, nr), dld = max_diff(ld, la, nr), md = mean_diff(od, oa, no);
		EXPECTF(d0 <= tp && dl0 <= 1e-4, "H %d nt %d bs %d L %d [%d,%d) p_bf16 %d vs portable: out %g lse %g",
			c->H, c->nt, c->bs, c->L, c->kb, c->ke, pb, d0, dl0);
		EXPECTF(dd <= td && dld <= 1e-4,
			"H %d nt %d bs %d L %d [%d,%d) p_bf16 %d vs avx512_bf16: out %g lse %g", c->H, c->nt, c->bs,
			c->L, c->kb, c->ke, pb, dd, dld);
		/* the same products and roundings as avx512_bf16, only summed in another order: the
		 * outputs agree far closer on average (a lost key or column would not). Past 32 heads
		 * AMX's key blocks are 256 wide (mqa_run_at), avx512_bf16's 64, so P rounds at other
		 * scales: there AMX is held to avx512_bf16's mean error against fp32 (a lost key or
		 * column would add ~1e-3) */
		if (pb && c->H > 32) {
			double ma = mean_diff(o0, oa, no), mb = mean_diff(o0, od, no);
			EXPECTF(ma <= 1.25 * mb + 1e-7, "H %d nt %d L %d: mean |diff| to fp32 %g, avx512_bf16's %g",
				c->H, c->nt, c->L, ma, mb);
		} else {
			EXPECTF(md <= 1e-6, "H %d nt %d bs %d L %d [%d,%d) p_bf16 %d vs avx512_bf16: mean |diff| %g",
				c->H, c->nt, c->bs, c->L, c->kb, c->ke, pb, md);
		}
		/* the tiles ran: their fp32 sums go in another order than the vdpbf16ps ones */
		EXPECTF(empty || memcmp(od, oa, 4 * no), "H %d nt %d L %d p_bf16 %d: bit-identical to avx512_bf16",
			c->H, c->nt, c->L, pb);
		/* rows that see no key of the range: lse -inf and a zero output */
		for (int i = 0; i < nr; i++) {
			int t = i / c->H, nv = (vis[t] < c->ke ? vis[t] : c->ke) - c->kb;
			if (nv > 0)
				continue;
			int zero = isinf(la[i]) && la[i] < 0;
			for (int d = 0; d < f.dv; d++)
				zero &= oa[(size_t)i * f.dv + d] == 0.0f;
			EXPECTF(zero, "H %d nt %d row %d sees no key: lse %g", c->H, c->nt, i, la[i]);
		}
	}
	free(q), free(o0), free(od), free(oa), free(l0), free(ld), free(la);
	fx_free(&f);
}

static bool have_amx(void)
{
	if (ops_level_best() >= OPS_AMX)
		return true;
	printf("  AMX not available (level %s): skipped\n", ops_level_name(ops_level_best()));
	return false;
}

static void test_amx_decode_shapes(void)
{
	if (!have_amx())
		return;
	/* one decode token per job: 16 heads (one row group), 128 (8 groups), an odd count
	 * (a group of 3 rows); pages of 16 and 64, ranges that end inside a key group */
	static const struct tcase cs[] = {
		{16, 1, 16, 512, 0, 512, BT_RANDOM, {0}},   {16, 1, 64, 203, 0, 203, BT_RANDOM, {0}},
		{128, 1, 64, 700, 64, 637, BT_RANDOM, {0}}, {128, 1, 16, 129, 0, 129, BT_RANDOM, {0}},
		{3, 1, 16, 77, 0, 77, BT_RANDOM, {0}},
	};
	for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
		check_case(&cs[i]);
}

static void test_amx_multi_token(void)
{
	if (!have_amx())
		return;
	/* n_tok 2..4 with causal visibility (each token one more key), rows not a multiple of
	 * 16 (a last group of 4, 12, 9 or 4 rows) for both value kernels (up to 2 row groups
	 * and more), k_begin > 0 and off the 16-key grid (copied key groups) */
	static const struct tcase cs[] = {
		{16, 3, 16, 260, 0, 260, BT_RANDOM, {0}}, {5, 4, 64, 150, 37, 150, BT_RANDOM, {0}},
		{3, 4, 16, 100, 6, 100, BT_RANDOM, {0}},  {128, 2, 16, 300, 6, 300, BT_RANDOM, {0}},
		{3, 3, 64, 65, 1, 65, BT_RANDOM, {0}},    {9, 4, 16, 180, 6, 180, BT_RANDOM, {0}},
	};
	for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
		check_case(&cs[i]);
}

static void test_amx_pages(void)
{
	if (!have_amx())
		return;
	/* key groups across pages: pages of 8 in order (contiguous across pages, read in
	 * place), pages of 4 with neighbours swapped (a group's first and last rows are 15 rows
	 * apart, its middle rows are not: must be copied), pages of 5 */
	static const struct tcase cs[] = {
		{16, 2, 8, 333, 6, 333, BT_IDENTITY, {0}},
		{16, 1, 4, 200, 0, 200, BT_SWAP_PAIRS, {0}},
		{16, 1, 5, 211, 3, 211, BT_RANDOM, {0}},
	};
	for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
		check_case(&cs[i]);
}

static void test_amx_empty_rows(void)
{
	if (!have_amx())
		return;
	/* a token that sees no key of the range next to ones that do (a whole row group without
	 * keys, then rows with nvis <= 0 inside a group), and empty ranges (lse -inf) */
	static const struct tcase cs[] = {
		{16, 3, 16, 260, 64, 260, BT_RANDOM, {40, 130, 259}},
		{3, 4, 16, 260, 64, 260, BT_RANDOM, {259, 64, 100, 2}},
		{16, 2, 16, 200, 128, 128, BT_RANDOM, {0}},
		{16, 1, 64, 200, 64, 200, BT_RANDOM, {50, 0}},
	};
	for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
		check_case(&cs[i]);
}

static void test_amx_q_pack(void)
{
	if (!have_amx())
		return;
	/* the packed B tiles: dword (g, s, p, c) = bf16 pair (q[2p], q[2p+1]) at k-step s of row
	 * 16 g + c, zero for rows past nr */
	int nr = 19, row = 64;
	float q[19 * 64];
	for (int k = 0; k < nr * row; k++)
		q[k] = bf16_to_f32(f32_to_bf16(frand()));
	size_t nw = mqa_amx_q_words(nr, row);
	EXPECT_EQ_INT(nw, 32 * 32);
	uint32_t *qv = aligned_alloc(64, nw * 4);
	mqa_amx_pack_q(qv, q, nr, row);
	int bad = 0;
	for (int g = 0; g < 2; g++)
		for (int s = 0; s < 2; s++)
			for (int p = 0; p < 16; p++)
				for (int c = 0; c < 16; c++) {
					int i = 16 * g + c;
					uint32_t w = qv[((g * 2 + s) * 16 + p) * 16 + c], want = 0;
					if (i < nr)
						want = f32_to_bf16(q[i * row + 32 * s + 2 * p]) |
						       (uint32_t)f32_to_bf16(q[i * row + 32 * s + 2 * p + 1]) << 16;
					bad += w != want;
				}
	EXPECT_EQ_INT(bad, 0);
	free(qv);
}

TESTS(T(test_amx_q_pack), T(test_amx_decode_shapes), T(test_amx_multi_token), T(test_amx_pages),
      T(test_amx_empty_rows))
