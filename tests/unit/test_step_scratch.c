/* The step arena's layout (model/step_scratch.h) bounds what the forwards take: every fixture
 * runs its largest steps (max_batch_tokens rows: a prefill, a prefill over cached context,
 * max_seqs multi-token decodes through each decode backend, a mixed step, the MTP step) and
 * the arena's high-water mark stays within the computed total. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "harness.h"
#include "model/model.h"
#include "model/model_internal.h"
#include "model/step_scratch.h"
#include "ops/pool.h"

#define N 48   /* max_batch_tokens */
#define SEQS 4 /* max_seqs */
#define BPS 6  /* blocks of 16 per sequence: 2N tokens */

static struct pool *g_pool;

/* One step of n_seqs sequences: sequence i runs q[i] tokens after ctx[i] cached ones, the
 * first n_dec of them as decodes; every row's logits. */
static int step(struct model *m, struct kv_cache *kv, const struct attn_backend *be, int n_seqs, const int *q,
		const int *ctx, int n_dec, float *logits, struct err *e)
{
	int32_t tok[N], pos[N], rows[N], qs[SEQS + 1], sl[SEQS], bt[SEQS * BPS];
	int64_t slots[N];
	int n = 0;
	qs[0] = 0;
	for (int i = 0; i < n_seqs; i++) {
		for (int b = 0; b < BPS; b++)
			bt[i * BPS + b] = 1 + i * BPS + b;
		for (int t = 0; t < q[i]; t++, n++) {
			int p = ctx[i] + t;
			tok[n] = (int32_t)((n * 37 + i * 11) % 200 + 2);
			pos[n] = p;
			rows[n] = n;
			slots[n] = (int64_t)bt[i * BPS + p / 16] * 16 + p % 16;
		}
		qs[i + 1] = n;
		sl[i] = ctx[i] + q[i];
	}
	struct batch b = {.n_tokens = n, .tokens = tok, .positions = pos, .n_logits = n, .logits_rows = rows};
	b.attn = (struct attn_meta){.n_seqs = n_seqs,
				    .n_tokens = n,
				    .query_start = qs,
				    .seq_lens = sl,
				    .block_table = bt,
				    .max_blocks = BPS,
				    .slots = slots,
				    .n_decodes = n_dec,
				    .n_decode_tokens = qs[n_dec],
				    .dcp_size = 1,
				    .local_seq_lens = sl};
	return model_forward(m, &b, kv, be, logits, e);
}

static int mtp_step(struct model *m, struct kv_cache *kv, const struct attn_backend *be, float *logits, struct err *e)
{
	int32_t tok[N], pos[N], rows[N], qs[2] = {0, N}, sl[1] = {N}, bt[BPS];
	int64_t slots[N];
	for (int b = 0; b < BPS; b++)
		bt[b] = 1 + b;
	for (int t = 0; t < N; t++)
		tok[t] = (int32_t)(t % 100 + 3), pos[t] = rows[t] = t, slots[t] = (int64_t)bt[t / 16] * 16 + t % 16;
	struct batch b = {.n_tokens = N,
			  .tokens = tok,
			  .positions = pos,
			  .n_logits = N,
			  .logits_rows = rows,
			  .hidden_rows = rows};
	b.attn = (struct attn_meta){.n_seqs = 1,
				    .n_tokens = N,
				    .query_start = qs,
				    .seq_lens = sl,
				    .block_table = bt,
				    .max_blocks = BPS,
				    .slots = slots,
				    .dcp_size = 1,
				    .local_seq_lens = sl};
	return model_mtp_forward(m, &b, kv, be, logits, e);
}

static void check_fixture(const char *name, bool mtp, enum dtype act)
{
	struct err e;
	struct model_options o = {.act_dtype = act,
				  .max_batch_tokens = N,
				  .max_seqs = SEQS,
				  .max_model_len = 2 * N,
				  .pool = g_pool,
				  .load_mtp = mtp};
	struct model *m = NULL;
	if (model_load(fixture_path(name), &o, &m, &e)) {
		EXPECTF(0, "%s: %s", name, e.msg);
		return;
	}
	const struct model_config *c = model_config(m);
	bool sparse = config_is_sparse(c);
	struct kv_cache kv;
	CHECK(kv_cache_init_indexed(&kv, model_kv_layers(m), SEQS * BPS + 1, 16, c->kv_lora_rank, c->qk_rope_head_dim,
				    DT_F32, sparse ? c->index_head_dim : 0, &e) == 0);
	float *logits = malloc(sizeof(float) * N * (size_t)c->vocab_size);
	struct step_shapes sh;
	struct step_scratch l;
	step_shapes_of(m, &sh);
	step_scratch_layout(&sh, &l);
	/* the arena is sized by the layout (the family's scratch_bytes) */
	EXPECTF(deepseek_step_scratch_bytes(m) == l.total && m->arena.cap == l.total, "%s", name);
	const char *dense_be[] = {"FLASHMLA", "FLASH_ATTN_MLA"};
	for (int bi = 0; bi < (sparse ? 1 : 2); bi++) {
		const struct attn_backend *be = sparse ? model_default_backend(m) : attn_backend_by_name(dense_be[bi]);
		int one[1] = {N}, zero[1] = {0}, ctxN[1] = {N};
		int q4[SEQS] = {N / 4, N / 4, N / 4, N / 4}, c4[SEQS] = {40, 30, 20, 2 * N - N / 4};
		int qm[SEQS] = {1, 1, (N - 2) / 2, (N - 2) / 2}, cm[SEQS] = {70, 9, 40, 2 * N - (N - 2) / 2};
		/* a whole-batch prefill, one over cached context, max_seqs multi-token decodes, a mix */
		EXPECTF(step(m, &kv, be, 1, one, zero, 0, logits, &e) == 0, "%s: %s", name, e.msg);
		EXPECTF(step(m, &kv, be, 1, one, ctxN, 0, logits, &e) == 0, "%s: %s", name, e.msg);
		EXPECTF(step(m, &kv, be, SEQS, q4, c4, SEQS, logits, &e) == 0, "%s: %s", name, e.msg);
		EXPECTF(step(m, &kv, be, SEQS, qm, cm, 2, logits, &e) == 0, "%s: %s", name, e.msg);
		if (mtp) {
			EXPECTF(step(m, &kv, be, 1, one, zero, 0, logits, &e) == 0, "%s: %s", name, e.msg);
			EXPECTF(mtp_step(m, &kv, be, logits, &e) == 0, "%s: %s", name, e.msg);
		}
	}
	const struct arena *a = &m->arena;
	EXPECTF(a->high_water <= l.total, "%s: high water %zu above the layout's %zu", name, a->high_water, l.total);
	printf("# %s%s %s: high water %zu of %zu bytes (%.0f%%; plan %zu, resident %zu, attn %zu, ffn %zu, "
	       "head %zu; arena %zu)\n",
	       name, mtp ? " +mtp" : "", act == DT_BF16 ? "bf16" : "f32", a->high_water, l.total,
	       100.0 * (double)a->high_water / (double)l.total, l.plan, l.resident, l.attn, l.ffn, l.head, a->cap);
	free(logits);
	kv_cache_fini(&kv);
	model_free(m);
}

static void test_high_water_within_layout(void)
{
	struct err e;
	CHECK(pool_new(2, &g_pool, &e) == 0);
	const char *fx[] = {"tiny-v2", "tiny-v3", "tiny-r1", "tiny-v3-fp8", "tiny-v32", "tiny-v32-topk8"};
	for (size_t i = 0; i < sizeof fx / sizeof *fx; i++)
		for (int bf = 0; bf < 2; bf++)
			check_fixture(fx[i], false, bf ? DT_BF16 : DT_F32);
	check_fixture("tiny-v3-mtp", true, DT_F32);
	check_fixture("tiny-v32-mtp", true, DT_BF16);
	pool_free(g_pool);
}

TESTS(T(test_high_water_within_layout))
