/* The engine side of decode context parallelism without MPI: under dcp_size W the scheduler
 * works in virtual blocks of block_size x W tokens while the KV cache keeps block_size, the
 * step plans' per-rank slot mapping stores every token on exactly one rank inside that rank's
 * cache, local lengths add up, the threshold is downgraded for a backend without a DCP
 * multi-token mask (and kept for one with it), and greedy outputs equal a run without DCP.
 * The hook stands in for the distributed forward: it checks the plan and runs the whole
 * model on a private cache addressed with the virtual block size. MPI runs: e2e/dist_model.sh. */
#include <stdlib.h>
#include <string.h>

#include "attn/dcp.h"
#include "base/log.h"
#include "engine/engine.h"
#include "engine/plan.h"
#include "harness.h"
#include "model/model.h"
#include "ops/pool.h"

#define N_NEW 6
#define N_PROMPTS 4

static struct pool *g_pool;
static struct model *g_model;

struct hook_ctx {
	struct kv_cache kv; /* block size = the plan's (virtual) block size */
	const struct attn_backend *be;
	int W, I, kv_block_size, n_blocks;
	int n_plans, n_multi_token_decodes, bad;
	int64_t *seen; /* [n_tokens] owner count, per plan */
};

static int hook_forward(void *ctx, const struct step_plan *p, float *logits, struct err *e)
{
	struct hook_ctx *h = ctx;
	h->n_plans++;
	if (p->block_size != h->kv_block_size * h->W)
		h->bad++;
	for (int k = 0; k < p->n_decodes; k++)
		if (p->query_start[k + 1] - p->query_start[k] > 1)
			h->n_multi_token_decodes++;
	/* every token is stored by exactly one DCP rank, at a distinct in-range local slot */
	int32_t *local = calloc((size_t)p->n_seqs, sizeof *local);
	int64_t *slots = calloc((size_t)p->n_tokens * (size_t)h->W, sizeof *slots);
	for (int t = 0; t < p->n_tokens; t++)
		h->seen[t] = 0;
	for (int r = 0; r < h->W; r++) {
		dcp_local_seq_lens(p->seq_lens, p->n_seqs, h->W, r, h->I, local);
		for (int k = 0; k < p->n_seqs; k++) {
			int32_t sum = 0;
			for (int rr = 0; rr < h->W; rr++)
				sum += dcp_local_seq_len(p->seq_lens[k], h->W, rr, h->I);
			if (sum != p->seq_lens[k] || local[k] > p->seq_lens[k])
				h->bad++;
			const int32_t *bt = p->block_table + (size_t)k * (size_t)p->max_blocks;
			for (int t = p->query_start[k]; t < p->query_start[k + 1]; t++) {
				int64_t s = dcp_slot(bt, h->kv_block_size, h->W, r, h->I, p->positions[t]);
				slots[(size_t)r * (size_t)p->n_tokens + (size_t)t] = s;
				if (s < 0)
					continue;
				h->seen[t]++;
				if (s >= (int64_t)h->n_blocks * h->kv_block_size || s < h->kv_block_size)
					h->bad++; /* outside the cache, or in the null block */
			}
		}
	}
	for (int t = 0; t < p->n_tokens; t++)
		if (h->seen[t] != 1)
			h->bad++;
	for (int r = 0; r < h->W; r++) /* distinct slots on one rank */
		for (int a = 0; a < p->n_tokens; a++)
			for (int b = a + 1; b < p->n_tokens; b++) {
				int64_t sa = slots[(size_t)r * (size_t)p->n_tokens + (size_t)a];
				if (sa >= 0 && sa == slots[(size_t)r * (size_t)p->n_tokens + (size_t)b])
					h->bad++;
			}
	free(local);
	free(slots);
	struct batch b;
	step_plan_to_batch(p, &b);
	return model_forward(g_model, &b, &h->kv, h->be, logits, e);
}

static const int32_t g_prompts[N_PROMPTS][40] = {
	{0},
	{0, 5, 9},
	{0, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36},
	{0,  11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
	 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42}};
static const int g_lens[N_PROMPTS] = {1, 3, 27, 33};

/* Runs the prompts greedily; W > 1 goes through the checking hook. */
static int run(const struct attn_backend *be, int W, int I, int32_t out[N_PROMPTS][N_NEW], struct hook_ctx *h)
{
	struct engine_options o;
	engine_options_init(&o);
	o.model = g_model;
	o.backend = be;
	o.block_size = 4;
	o.kv_dtype = DT_F32;
	o.max_num_seqs = 8;
	o.max_num_batched_tokens = 9; /* steps mix decodes, chunks and prefix-cache extends */
	o.max_model_len = 128;
	o.dcp_size = W;
	o.dcp_interleave = I;
	if (W > 1)
		o.hook = (struct engine_forward_hook){hook_forward, h};
	struct engine *eng;
	struct err e;
	if (engine_new(&o, &eng, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "engine_new: %s", e.msg);
		return -1;
	}
	if (W > 1) {
		/* the hook's cache is addressed like one process with the virtual block size */
		const struct kv_cache *kv = engine_kv_cache(eng);
		EXPECT_EQ_INT(kv->block_size, 4);
		EXPECT_EQ_INT(engine_block_size(eng), 4 * W);
		h->kv_block_size = kv->block_size;
		h->n_blocks = kv->n_blocks;
		h->W = W;
		h->I = I;
		h->be = be;
		h->seen = calloc(64, sizeof *h->seen);
		const struct model_config *c = model_config(g_model);
		if (kv_cache_init(&h->kv, c->num_hidden_layers, kv->n_blocks, 4 * W, c->kv_lora_rank,
				  c->qk_rope_head_dim, DT_F32, &e) < 0) {
			harness_fail(__FILE__, __LINE__, "kv: %s", e.msg);
			engine_free(eng);
			return -1;
		}
	}
	struct engine_req *r[N_PROMPTS];
	for (int i = 0; i < N_PROMPTS; i++) {
		struct sampling_params p;
		sampling_params_init(&p, NULL);
		p.temperature = 0;
		p.max_tokens = N_NEW;
		p.ignore_eos = true;
		EXPECT_EQ_INT(engine_submit(eng, g_prompts[i], g_lens[i], &p, &r[i], &e), 0);
	}
	for (int i = 0; i < N_PROMPTS; i++) {
		struct engine_event ev;
		int got = 0;
		while (engine_next_event(r[i], &ev, 60000) == ENGINE_EV_OK)
			for (int t = 0; t < ev.n_tokens && got < N_NEW; t++)
				out[i][got++] = ev.token_ids[t];
		EXPECT_EQ_INT(got, N_NEW);
		engine_release(r[i]);
	}
	engine_free(eng);
	if (W > 1) {
		kv_cache_fini(&h->kv);
		free(h->seen);
	}
	return 0;
}

static int setup(void)
{
	struct err e;
	log_level = LOG_ERROR;
	if (!g_pool && pool_new(2, &g_pool, &e) < 0)
		return -1;
	if (g_model)
		return 0;
	struct model_options mo = {
		.act_dtype = DT_F32, .max_batch_tokens = 64, .max_seqs = 8, .max_model_len = 128, .pool = g_pool};
	if (model_load(fixture_path("tiny-v3"), &mo, &g_model, &e) < 0) {
		harness_fail(__FILE__, __LINE__, "model_load: %s", e.msg);
		return -1;
	}
	return 0;
}

/* Every backend, W in {2, 4}, I in {1, 4}: the plans are consistent and the tokens equal a
 * run without DCP. */
static void test_virtual_blocks_and_slots(void)
{
	if (setup() < 0)
		return;
	for (int b = 0; b < attn_backend_count(); b++) {
		const struct attn_backend *be = attn_backend_at(b);
		if (attn_backend_kind(be) != ATTN_KIND_MLA) /* a dense model */
			continue;
		int32_t want[N_PROMPTS][N_NEW], got[N_PROMPTS][N_NEW];
		if (run(be, 1, 1, want, NULL) < 0)
			return;
		static const int Ws[] = {2, 4}, Is[] = {1, 4};
		int n_multi = 0;
		for (int wi = 0; wi < 2; wi++)
			for (int ii = 0; ii < 2; ii++) {
				struct hook_ctx h = {0};
				if (run(be, Ws[wi], Is[ii], got, &h) < 0)
					return;
				EXPECTF(h.n_plans > 0 && h.bad == 0, "%s W=%d I=%d: %d plans, %d inconsistencies",
					be->name, Ws[wi], Is[ii], h.n_plans, h.bad);
				EXPECTF(!memcmp(want, got, sizeof want), "%s W=%d I=%d: tokens differ from W=1",
					be->name, Ws[wi], Is[ii]);
				/* the threshold rule: multi-token decodes only with a DCP mask */
				bool capable = be->supports_dcp_multi_token && be->supports_dcp_multi_token(Is[ii]);
				if (!capable)
					EXPECTF(h.n_multi_token_decodes == 0,
						"%s W=%d I=%d: %d multi-token decodes without a mask", be->name,
						Ws[wi], Is[ii], h.n_multi_token_decodes);
				else
					n_multi += h.n_multi_token_decodes;
			}
		/* a varlen backend with the mask keeps its threshold: some extends ran as decodes
		 * (a uniform one only takes them when every decode of the step has the same
		 * length; e2e/dist_model.sh runs FLASHMLA's multi-token decodes) */
		if (be->reorder_batch_threshold > 1 && be->supports_dcp_multi_token &&
		    be->query_len_support == QLEN_VARLEN)
			EXPECTF(n_multi > 0, "%s: no multi-token decode under DCP (threshold lost)", be->name);
	}
}

static void test_interleave_must_divide_block(void)
{
	if (setup() < 0)
		return;
	struct engine_options o;
	engine_options_init(&o);
	o.model = g_model;
	o.block_size = 4;
	o.max_model_len = 128;
	o.max_num_seqs = 4;
	o.dcp_size = 2;
	o.dcp_interleave = 3;
	struct engine *eng = NULL;
	struct err e;
	EXPECT(engine_new(&o, &eng, &e) < 0);
	EXPECT(strstr(e.msg, "interleave") != NULL);
}

static void test_teardown(void)
{
	model_free(g_model);
	pool_free(g_pool);
	g_model = NULL;
	g_pool = NULL;
}

TESTS(T(test_virtual_blocks_and_slots), T(test_interleave_must_divide_block), T(test_teardown))
