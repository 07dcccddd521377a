/* DCP math (docs/mla-dcp.md §4): the combine, the causal mask, context chunks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/dcp.h"
#include "harness.h"

static void test_local_seq_lens_naive(void)
{
	int Ws[] = {1, 2, 4, 8}, Is[] = {1, 2, 4, 16, 64};
	for (int wi = 0; wi < 4; wi++)
		for (int ii = 0; ii < 5; ii++) {
			int W = Ws[wi], I = Is[ii];
			for (int L = 0; L <= 600; L++) {
				int sum = 0;
				for (int r = 0; r < W; r++) {
					int naive = 0;
					for (int p = 0; p < L; p++)
						naive += (p / I) % W == r;
					int got = dcp_local_seq_len(L, W, r, I);
					EXPECTF(got == naive, "L %d W %d r %d I %d: %d, naive %d", L, W, r, I, got,
						naive);
					sum += got;
				}
				EXPECT_EQ_INT(sum, L);
				if (harness_failed)
					return;
			}
		}
}

static void test_local_seq_lens_vectors(void)
{
	int32_t L[] = {1, 2, 128, 129, 256, 257}, out[6];
	int32_t w2i1[6][2] = {{1, 0}, {1, 1}, {64, 64}, {65, 64}, {128, 128}, {129, 128}};
	int32_t w2i128[6][2] = {{1, 0}, {2, 0}, {128, 0}, {128, 1}, {128, 128}, {129, 128}};
	int32_t w4i128[6][4] = {{1, 0, 0, 0},   {2, 0, 0, 0},     {128, 0, 0, 0},
				{128, 1, 0, 0}, {128, 128, 0, 0}, {128, 128, 1, 0}};
	for (int r = 0; r < 2; r++) {
		dcp_local_seq_lens(L, 6, 2, r, 1, out);
		for (int i = 0; i < 6; i++)
			EXPECT_EQ_INT(out[i], w2i1[i][r]);
		dcp_local_seq_lens(L, 6, 2, r, 128, out);
		for (int i = 0; i < 6; i++)
			EXPECT_EQ_INT(out[i], w2i128[i][r]);
	}
	for (int r = 0; r < 4; r++) {
		dcp_local_seq_lens(L, 6, 4, r, 128, out);
		for (int i = 0; i < 6; i++)
			EXPECT_EQ_INT(out[i], w4i128[i][r]);
	}
}

static void test_slot_mapping(void)
{
	int Ws[] = {1, 2, 4}, Is[] = {1, 2, 8, 16}, bs = 16;
	int32_t bt[] = {7, 3, 11, 5, 9, 2, 4, 6}; /* virtual blocks of bs * W tokens */
	for (int wi = 0; wi < 3; wi++)
		for (int ii = 0; ii < 4; ii++) {
			int W = Ws[wi], I = Is[ii], L = 100;
			int next[8] = {0};
			for (int p = 0; p < L; p++) {
				int owners = 0;
				for (int r = 0; r < W; r++) {
					int64_t s = dcp_slot(bt, bs, W, r, I, p);
					if (s < 0)
						continue;
					owners++;
					EXPECT_EQ_INT(r, (p / I) % W);
					/* the k-th owned position sits at local index k */
					int k = next[r]++;
					EXPECT_EQ_INT(s, (int64_t)bt[k / bs] * bs + k % bs);
					EXPECT_EQ_INT(dcp_global_pos(k, W, r, I), p);
				}
				EXPECT_EQ_INT(owners, 1);
			}
			for (int r = 0; r < W; r++)
				EXPECT_EQ_INT(next[r], dcp_local_seq_len(L, W, r, I));
		}
}

static void test_config_check(void)
{
	struct err e;
	EXPECT(dcp_config_check(8, 2, 1, 16, &e) == 0);
	EXPECT(dcp_config_check(8, 8, 16, 16, &e) == 0);
	EXPECT(dcp_config_check(6, 4, 1, 16, &e) < 0);
	EXPECT(strstr(e.msg, "4") && strstr(e.msg, "6"));
	EXPECT(dcp_config_check(4, 2, 32, 16, &e) < 0); /* I > bs */
	EXPECT(dcp_config_check(4, 2, 3, 16, &e) < 0);  /* bs % I != 0 */
	EXPECT(dcp_config_check(4, 2, 0, 16, &e) < 0);
	EXPECT(dcp_config_check(4, 0, 1, 16, &e) < 0);
}

static void test_mask_worked_example(void)
{
	/* flash-attention #93: L = 6, q = 4 (queries at positions 2..5), W = 2, I = 1 */
	int want[2][4][3] = {
		{{0, 2, -1}, {0, 2, -1}, {0, 2, 4}, {0, 2, 4}},   /* rank 0 holds {0, 2, 4} */
		{{1, -1, -1}, {1, 3, -1}, {1, 3, -1}, {1, 3, 5}}, /* rank 1 holds {1, 3, 5} */
	};
	for (int r = 0; r < 2; r++) {
		int local = dcp_local_seq_len(6, 2, r, 1);
		EXPECT_EQ_INT(local, 3);
		for (int t = 0; t < 4; t++) {
			int n = dcp_visible_keys(6, 4, t, 2, r, 1, local);
			int cnt = 0;
			for (int k = 0; k < 3; k++)
				if (want[r][t][k] >= 0) {
					EXPECT_EQ_INT(dcp_global_pos(k, 2, r, 1), want[r][t][k]);
					cnt++;
				}
			EXPECTF(n == cnt, "rank %d query %d: %d visible, want %d", r, t, n, cnt);
		}
	}
	/* the naive local bottom-right mask (j <= local_len - q + t) gives query 0 of rank 0
	 * no key at all, where the truth is two */
	EXPECT(3 - 4 + 0 + 1 <= 0);
	EXPECT_EQ_INT(dcp_visible_keys(6, 4, 0, 2, 0, 1, 3), 2);
	/* brute force over interleaves: the prefix count equals the per-key rule */
	int Is[] = {1, 2, 4, 16};
	for (int ii = 0; ii < 4; ii++)
		for (int L = 1; L < 90; L++)
			for (int q = 1; q <= L && q <= 9; q++)
				for (int W = 1; W <= 4; W++)
					for (int r = 0; r < W; r++)
						for (int t = 0; t < q; t++) {
							int I = Is[ii], local = dcp_local_seq_len(L, W, r, I);
							int n = 0;
							for (int j = 0; j < local; j++)
								n += dcp_global_pos(j, W, r, I) <= L - q + t;
							EXPECT_EQ_INT(dcp_visible_keys(L, q, t, W, r, I, local), n);
						}
}

/* Attention of one query over `n` scalar-valued keys (score s[j], value v[j]). */
static void attend(const double *s, const double *v, int n, float *o, float *lse)
{
	if (n == 0) {
		*o = 0;
		*lse = -INFINITY;
		return;
	}
	double m = -1e300, l = 0, acc = 0;
	for (int j = 0; j < n; j++)
		m = fmax(m, s[j]);
	for (int j = 0; j < n; j++) {
		l += exp(s[j] - m);
		acc += exp(s[j] - m) * v[j];
	}
	*o = (float)(acc / l);
	*lse = (float)(m + log(l));
}

static void test_lse_correct_combine(void)
{
	/* W shards of a random key set (some empty): correction + sum over ranks equals the
	 * attention over the union; B = 3 rows, Hg = 2 heads, D = 1 */
	srand(7);
	for (int W = 1; W <= 8; W *= 2)
		for (int trial = 0; trial < 20; trial++) {
			int B = 3, Hg = 2, n = rand() % 12;
			double s[12], v[12];
			float lses[8][6], outs[8][6], want_o[6], want_l[6], lg[6];
			for (int bh = 0; bh < B * Hg; bh++) {
				for (int j = 0; j < n; j++) {
					s[j] = (rand() % 2000) / 100.0 - 10;
					v[j] = (rand() % 2000) / 1000.0 - 1;
				}
				attend(s, v, n, &want_o[bh], &want_l[bh]);
				for (int r = 0; r < W; r++) { /* round-robin shard of the keys */
					double ss[12], vv[12];
					int m = 0;
					for (int j = r; j < n; j += W)
						ss[m] = s[j], vv[m++] = v[j];
					attend(ss, vv, m, &outs[r][bh], &lses[r][bh]);
					if (m == 0 && (trial & 1))
						lses[r][bh] = INFINITY; /* FA2 reports +inf for empty */
				}
			}
			float sum[6] = {0};
			for (int r = 0; r < W; r++) {
				dcp_lse_correct(&lses[0][0], W, B, Hg, r, outs[r], 1, lg);
				for (int bh = 0; bh < 6; bh++) {
					EXPECT(!isnan(outs[r][bh]));
					sum[bh] += outs[r][bh];
				}
			}
			for (int bh = 0; bh < 6; bh++) {
				EXPECT_NEAR(sum[bh], want_o[bh], 1e-5);
				if (n == 0)
					EXPECT(lg[bh] == -INFINITY && sum[bh] == 0);
				else
					EXPECT_NEAR(lg[bh], want_l[bh], 1e-4);
			}
		}
	/* NaN partial output of an empty shard never leaks: the factor is 0, the row zeroed */
	float lses[2] = {NAN, 0.5f}, o[2] = {NAN, 3.0f}, lg;
	dcp_lse_correct(lses, 2, 1, 1, 0, o, 1, &lg);
	EXPECT(o[0] == 0.0f);
	EXPECT_NEAR(lg, 0.5, 1e-6);
}

static void test_context_chunks(void)
{
	/* the local chunk is a multiple of I and W * C_loc is a multiple of W * I covering the
	 * requested chunk; the chunks of all ranks reassemble exactly the global chunk positions */
	int Ws[] = {1, 2, 4}, Is[] = {1, 4, 16};
	int chunks[] = {1, 16, 48, 100, 256};
	for (int wi = 0; wi < 3; wi++)
		for (int ii = 0; ii < 3; ii++)
			for (int ci = 0; ci < 5; ci++) {
				int W = Ws[wi], I = Is[ii];
				int Cl = dcp_context_chunk_local(chunks[ci], W, I), Cg = Cl * W;
				EXPECT(Cl % I == 0 && Cg >= chunks[ci] && Cg - chunks[ci] < W * I);
				for (int ctx = 0; ctx < 300; ctx += 37) {
					int n_chunks = (ctx + Cg - 1) / Cg;
					for (int c = 0; c < n_chunks; c++) {
						int lo = c * Cg, hi = ctx < lo + Cg ? ctx : lo + Cg;
						char seen[300] = {0};
						int total = 0;
						for (int k = 0; k < W; k++) {
							int loc = dcp_local_seq_len(ctx, W, k, I);
							int rows = dcp_context_chunk_rows(loc, c, Cl);
							total += rows;
							for (int j = c * Cl; j < c * Cl + rows; j++) {
								int64_t g = dcp_global_pos(j, W, k, I);
								EXPECT(g >= lo && g < hi && !seen[g]);
								if (g >= lo && g < hi)
									seen[g] = 1;
							}
						}
						EXPECT_EQ_INT(total, hi - lo);
					}
				}
				if (harness_failed)
					return;
			}
}

TESTS(T(test_local_seq_lens_naive), T(test_local_seq_lens_vectors), T(test_slot_mapping), T(test_config_check),
      T(test_mask_worked_example), T(test_lse_correct_combine), T(test_context_chunks))
