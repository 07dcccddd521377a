/* Batch reordering, the decode/prefill split and threshold resolution (docs/mla-dcp.md §1, §5,
 * §6 test_batch_reordering). */
#include <stdlib.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "attn/threshold.h"
#include "engine/reorder.h"
#include "harness.h"

struct rcase {
	const char *name;
	int n;
	int32_t sched[9], comp[9];
	int32_t expect[9];
	bool modified;
	int threshold;
};

static const struct rcase cases[] = {
	{"all_decodes", 3, {1, 1, 1}, {10, 20, 30}, {0, 1, 2}, false, 1},
	{"all_prefills", 3, {100, 200, 300}, {100, 200, 300}, {0, 1, 2}, false, 1},
	{"mixed_interleaved", 4, {100, 1, 200, 1}, {100, 10, 200, 20}, {3, 1, 2, 0}, true, 1},
	{"already_ordered", 4, {1, 1, 100, 200}, {10, 20, 100, 0}, {0, 1, 2, 3}, false, 1},
	{"single_request", 1, {1}, {10}, {0}, false, 1},
	{"higher_threshold", 4, {2, 3, 5, 6}, {10, 20, 30, 40}, {0, 1, 2, 3}, false, 4},
	{"decodes_at_end", 4, {100, 200, 1, 1}, {100, 200, 10, 20}, {2, 3, 0, 1}, true, 1},
	{"decode_extend_prefill", 3, {100, 10, 1}, {0, 50, 10}, {2, 1, 0}, true, 1},
	{"extend_prefill_only", 4, {100, 10, 200, 20}, {0, 50, 0, 75}, {3, 1, 2, 0}, true, 1},
	{"complicated_mixed_interleaved",
	 9,
	 {1, 1, 374, 300, 1, 256, 1, 27, 1},
	 {20, 50, 0, 20, 20, 0, 5, 0, 4},
	 {0, 1, 6, 8, 4, 3, 2, 7, 5},
	 true,
	 1},
};

static void test_batch_reordering(void)
{
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const struct rcase *k = &cases[c];
		int32_t perm[9];
		bool mod = reorder_batch_to_split_decodes_and_prefills(k->n, k->sched, k->comp, k->threshold, perm);
		EXPECTF(mod == k->modified, "%s: modified %d", k->name, mod);
		for (int i = 0; i < k->n; i++)
			EXPECTF(perm[i] == k->expect[i], "%s: perm[%d] = %d, want %d", k->name, i, perm[i],
				k->expect[i]);
	}
}

struct swap_log {
	int n, a[64], b[64];
};
static void log_swap(void *ctx, int i, int j)
{
	struct swap_log *l = ctx;
	l->a[l->n] = i;
	l->b[l->n++] = j;
}

static void test_mixed_interleaved_swaps_once(void)
{
	/* only positions 0 and 3 are swapped */
	int32_t s[] = {100, 1, 200, 1}, c[] = {100, 10, 200, 20};
	struct swap_log l = {0};
	EXPECT(reorder_batch_swaps(4, s, c, 1, log_swap, &l));
	EXPECT_EQ_INT(l.n, 1);
	EXPECT((l.a[0] == 3 && l.b[0] == 0) || (l.a[0] == 0 && l.b[0] == 3));
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) { return test_rand(&rng); }

static void test_reorder_properties(void)
{
	for (int trial = 0; trial < 2000; trial++) {
		int n = 1 + rnd() % 40, th = 1 + rnd() % 8;
		int32_t s[40], c[40], perm[40];
		for (int i = 0; i < n; i++) {
			s[i] = 1 + rnd() % 12;
			c[i] = rnd() % 3 ? (int32_t)(rnd() % 50) : 0;
		}
		bool mod = reorder_batch_to_split_decodes_and_prefills(n, s, c, th, perm);
		int seen[40] = {0}, prev = 0, cnt[3] = {0}, moved = 0;
		for (int i = 0; i < n; i++)
			cnt[reorder_classify(s[i], c[i], th)]++;
		for (int k = 0; k < n; k++) {
			EXPECT(perm[k] >= 0 && perm[k] < n);
			seen[perm[k]]++;
			int cl = reorder_classify(s[perm[k]], c[perm[k]], th);
			EXPECT(cl >= prev); /* decode < extend < prefill */
			prev = cl;
			int target = k < cnt[0] ? 0 : k < cnt[0] + cnt[1] ? 1 : 2;
			int orig = reorder_classify(s[k], c[k], th);
			if (orig == target) /* already in its region: untouched */
				EXPECT_EQ_INT(perm[k], k);
			moved += perm[k] != k;
		}
		for (int i = 0; i < n; i++)
			EXPECT_EQ_INT(seen[i], 1);
		EXPECT(mod == (moved > 0));
		if (harness_failed)
			return;
	}
}

static struct batch_split split(const int32_t *q, int n, int th, bool uniform)
{
	int32_t qs[16] = {0};
	for (int i = 0; i < n; i++)
		qs[i + 1] = qs[i] + q[i];
	return split_decodes_and_prefills(qs, n, th, uniform);
}

#define EXPECT_SPLIT(r, a, b, c, d)                                                                                 \
	do {                                                                                                        \
		struct batch_split _r = (r);                                                                        \
		EXPECTF(_r.n_decodes == (a) && _r.n_prefills == (b) && _r.n_decode_tokens == (c) &&                 \
				_r.n_prefill_tokens == (d),                                                         \
			"split (%d,%d,%d,%d), want (%d,%d,%d,%d)", _r.n_decodes, _r.n_prefills, _r.n_decode_tokens, \
			_r.n_prefill_tokens, a, b, c, d);                                                           \
	} while (0)

static void test_split_decodes_and_prefills(void)
{
	EXPECT_SPLIT(split((int32_t[]){1, 1, 1}, 3, 1, false), 3, 0, 3, 0);
	EXPECT_SPLIT(split((int32_t[]){1, 1, 1}, 3, 1, true), 3, 0, 3, 0);
	EXPECT_SPLIT(split((int32_t[]){1, 1, 5, 5}, 4, 128, true), 2, 2, 2, 10);
	EXPECT_SPLIT(split((int32_t[]){2, 2, 1}, 3, 128, true), 2, 1, 4, 1);
	EXPECT_SPLIT(split((int32_t[]){5, 1}, 2, 4, false), 0, 2, 0, 6);
	EXPECT_SPLIT(split((int32_t[]){5, 1}, 2, 4, true), 0, 2, 0, 6);
	EXPECT_SPLIT(split((int32_t[]){1, 3, 0, 9}, 4, 4, false), 2, 2, 4, 9);
	EXPECT_SPLIT(split((int32_t[]){1, 3, 0}, 3, 4, false), 3, 0, 4, 0);
	EXPECT_SPLIT(split((int32_t[]){2, 4, 3, 1}, 4, 4, false), 4, 0, 10, 0);
	/* uniform: after the first non-uniform request everything is a prefill */
	EXPECT_SPLIT(split((int32_t[]){2, 2, 3, 2}, 4, 128, true), 2, 2, 4, 5);
	EXPECT_SPLIT(split((int32_t[]){4, 4, 4}, 3, 128, true), 3, 0, 12, 0);
	EXPECT_SPLIT(split((int32_t[]){1, 700}, 2, 1, false), 1, 1, 1, 700);
	EXPECT_SPLIT(split(NULL, 0, 1, false), 0, 0, 0, 0);
}

/* ---- threshold resolution ---- */

static bool never(int i)
{
	(void)i;
	return false;
}
static bool iff_one(int i) { return i == 1; }

static const struct attn_backend flashmla_like = {.name = "FLASHMLA_LIKE",
						  .reorder_batch_threshold = 128,
						  .query_len_support = QLEN_UNIFORM,
						  .supports_dcp_multi_token = NULL,
						  .returns_lse = true};
static const struct attn_backend famla_like = {.name = "FAMLA_LIKE",
					       .reorder_batch_threshold = 512,
					       .query_len_support = QLEN_VARLEN,
					       .supports_dcp_multi_token = iff_one,
					       .returns_lse = true};
static const struct attn_backend single_only = {.name = "SINGLE",
						.reorder_batch_threshold = 1,
						.query_len_support = QLEN_SINGLE_ONLY,
						.supports_dcp_multi_token = never,
						.returns_lse = true};
static const struct attn_backend no_reorder = {
	.name = "NONE", .reorder_batch_threshold = ATTN_THRESHOLD_NONE, .query_len_support = QLEN_VARLEN};

static void test_threshold_table(void)
{
	char why[512];
	EXPECT_EQ_INT(attn_threshold_for_backend(&flashmla_like, 1, 1, 0, NULL, 0), 128);
	EXPECT_EQ_INT(attn_threshold_for_backend(&flashmla_like, 2, 1, 0, why, sizeof why), 1);
	EXPECT(strstr(why, "FLASHMLA_LIKE") && strstr(why, "128 -> 1"));
	EXPECT_EQ_INT(attn_threshold_for_backend(&flashmla_like, 1, 1, 3, NULL, 0), 128);
	EXPECT_EQ_INT(attn_threshold_for_backend(&flashmla_like, 2, 1, 3, NULL, 0), 1);
	EXPECT_EQ_INT(attn_threshold_for_backend(&famla_like, 2, 1, 0, NULL, 0), 512);
	EXPECT_EQ_INT(attn_threshold_for_backend(&famla_like, 2, 64, 0, why, sizeof why), 1);
	EXPECT(strstr(why, "FAMLA_LIKE cannot run multi-token decode queries under decode "
			   "context parallelism (interleave 64): reorder_batch_threshold 512 -> 1"));
	EXPECT_EQ_INT(attn_threshold_for_backend(&single_only, 1, 1, 3, NULL, 0), 1);
	EXPECT_EQ_INT(attn_threshold_for_backend(&single_only, 4, 1, 3, NULL, 0), 1);
	EXPECT_EQ_INT(attn_threshold_for_backend(&no_reorder, 2, 1, 0, NULL, 0), ATTN_THRESHOLD_NONE);
	/* spec decode raises a multi-token backend to 1 + k */
	const struct attn_backend small = {
		.name = "SMALL", .reorder_batch_threshold = 2, .query_len_support = QLEN_UNIFORM};
	EXPECT_EQ_INT(attn_threshold_for_backend(&small, 1, 1, 3, NULL, 0), 4);
	/* the real backends */
	EXPECT_EQ_INT(attn_threshold_for_backend(&attn_backend_flashmla, 2, 64, 0, NULL, 0), 128);
	EXPECT_EQ_INT(attn_threshold_for_backend(&attn_backend_flash_attn_mla, 2, 64, 0, NULL, 0), 1);
	EXPECT_EQ_INT(attn_threshold_for_backend(&attn_backend_flash_attn_mla, 2, 1, 0, NULL, 0), 512);
	EXPECT_EQ_INT(attn_threshold_for_backend(&attn_backend_reference_mla, 1, 1, 0, NULL, 0), 1);
}

static void test_threshold_min(void)
{
	EXPECT_EQ_INT(attn_threshold_min((int[]){128, ATTN_THRESHOLD_NONE, 1}, 3), 1);
	EXPECT_EQ_INT(attn_threshold_min((int[]){ATTN_THRESHOLD_NONE}, 1), ATTN_THRESHOLD_NONE);
	EXPECT_EQ_INT(attn_threshold_min(NULL, 0), ATTN_THRESHOLD_NONE);
	EXPECT_EQ_INT(attn_threshold_min((int[]){512, 128}, 2), 128);

	char reason[1024];
	const struct attn_backend *set[] = {&flashmla_like, &no_reorder, &famla_like};
	EXPECT_EQ_INT(attn_threshold_resolve(set, 3, 1, 1, 0, reason, sizeof reason), 128);
	EXPECT(strstr(reason, "reorder_batch_threshold 128") == reason);
	EXPECT_EQ_INT(attn_threshold_resolve(set + 2, 1, 2, 64, 0, reason, sizeof reason), 1);
	EXPECT(strstr(reason, "FAMLA_LIKE cannot run multi-token"));
	EXPECT_EQ_INT(attn_threshold_resolve(set + 1, 1, 1, 1, 0, reason, sizeof reason), ATTN_THRESHOLD_NONE);
	EXPECT(strstr(reason, "reorder_batch_threshold none"));
	EXPECT_EQ_INT(attn_threshold_resolve(NULL, 0, 1, 1, 0, reason, sizeof reason), ATTN_THRESHOLD_NONE);
	char tiny[8];
	EXPECT_EQ_INT(attn_threshold_resolve(set, 3, 2, 1, 0, tiny, sizeof tiny), 1);
	EXPECT(strlen(tiny) < sizeof tiny);
}

/* the start-up rule: the override is an input, DCP without the LSE and a multi-token
 * override on a single-token backend are refused, uniformity comes from query_len_support */
static void test_threshold_setup(void)
{
	struct attn_runner_rule r;
	struct err e;
	EXPECT_EQ_INT(attn_threshold_setup(&flashmla_like, 0, 1, 1, 0, &r, &e), 0);
	EXPECT(r.threshold == 128 && r.require_uniform && strstr(r.why, "reorder_batch_threshold 128"));
	EXPECT_EQ_INT(attn_threshold_setup(&famla_like, 64, 1, 1, 0, &r, &e), 0);
	EXPECT(r.threshold == 64 && !r.require_uniform);
	EXPECT_EQ_INT(attn_threshold_setup(&famla_like, 64, 2, 64, 0, &r, &e), 0);
	EXPECT(r.threshold == 1 && strstr(r.why, "64 -> 1"));
	EXPECT_EQ_INT(attn_threshold_setup(&single_only, 1, 1, 1, 0, &r, &e), 0);
	EXPECT(attn_threshold_setup(&single_only, 2, 1, 1, 0, &r, &e) < 0 &&
	       strstr(e.msg, "--reorder-batch-threshold 2: attention backend SINGLE runs single-token"));
	EXPECT_EQ_INT(attn_threshold_setup(&no_reorder, 0, 1, 1, 0, &r, &e), 0); /* no LSE, no DCP */
	EXPECT(attn_threshold_setup(&no_reorder, 0, 2, 1, 0, &r, &e) < 0 &&
	       strstr(e.msg, "NONE does not return the softmax LSE"));
	for (int i = 0; i < attn_backend_count(); i++)
		EXPECT_EQ_INT(attn_threshold_setup(attn_backend_at(i), 0, 2, 1, 0, &r, &e), 0);
	/* DeepSeek-V4's keeps its threshold under DCP at any interleave (one path, global
	 * positions), and is raised for drafts as any multi-token backend */
	EXPECT_EQ_INT(attn_threshold_setup(&attn_backend_deepseek_v4, 0, 4, 16, 0, &r, &e), 0);
	EXPECT_EQ_INT(r.threshold, 512);
	EXPECT_EQ_INT(attn_threshold_setup(&attn_backend_deepseek_v4, 2, 2, 4, 3, &r, &e), 0);
	EXPECT_EQ_INT(r.threshold, 4);
}

static void test_seed_regression_split(void)
{
	/* FlashMLA-like under DCP 2: threshold 1, the batch [1, 3, 1, 700] reorders and splits
	 * into decodes (q 1) and prefills (3 and 700 tokens) instead of aborting */
	int th = attn_threshold_for_backend(&flashmla_like, 2, 1, 0, NULL, 0);
	int32_t s[] = {1, 3, 1, 700}, c[] = {40, 12, 7, 0}, perm[4];
	EXPECT(reorder_batch_to_split_decodes_and_prefills(4, s, c, th, perm));
	int32_t qs[5] = {0};
	for (int i = 0; i < 4; i++)
		qs[i + 1] = qs[i] + s[perm[i]];
	struct batch_split r = split_decodes_and_prefills(qs, 4, th, true);
	EXPECT_SPLIT(r, 2, 2, 2, 703);
	EXPECT(s[perm[0]] == 1 && s[perm[1]] == 1 && s[perm[2]] == 3 && s[perm[3]] == 700);
}

TESTS(T(test_batch_reordering), T(test_mixed_interleaved_swaps_once), T(test_reorder_properties),
      T(test_split_decodes_and_prefills), T(test_threshold_table), T(test_threshold_min), T(test_threshold_setup),
      T(test_seed_regression_split))
