/* DeepSeek's MTP module (model_mtp_forward) against the golden MTP logits of
 * scripts/mtp_reference.py: a float64 forward written from the spec, which matches the
 * independent oracle's golden logits of the main models to ~1e-5 (it prints that check when
 * it writes them). Fixtures tiny-v3-mtp (bf16 weights) and tiny-r1-mtp (fp8, its own MTP
 * head): whole prompts, chunks through both latent caches, and single-token decodes on
 * every backend, float32; and the chained passes (num_speculative_tokens > 1) after each
 * chunk, against the reference's chained logits. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "fwd_util.h"
#include "harness.h"
#include "model/model.h"
#include "ops/pool.h"

static struct pool *g_pool;

static struct model *load(const char *name, bool mtp, struct err *e)
{
	if (!g_pool && pool_new(2, &g_pool, e))
		return NULL;
	struct model_options o = {.act_dtype = DT_F32,
				  .max_batch_tokens = 128,
				  .max_seqs = 64,
				  .max_model_len = 128,
				  .pool = g_pool,
				  .load_mtp = mtp};
	struct model *m = NULL;
	return model_load(fixture_path(name), &o, &m, e) ? NULL : m;
}

/* A chained pass after fwd_mtp_chunk(): the module at position pos, fed tok[pos + 1] and row `hid`
 * of its own last pass (what the engine does past the first draft, with the draft in place
 * of the prompt's token); out [V]. */
static int chain(struct model *m, struct fwd_seq *s, const struct attn_backend *be, const int32_t *tok, int pos,
		 int hid, float *out, struct err *e)
{
	int32_t p[1] = {pos}, rows[1] = {0}, h[1] = {hid}, qs[2] = {0, 1}, sl[1] = {pos + 1};
	int64_t slots[1] = {(int64_t)s->bt[pos / FWD_BS] * FWD_BS + pos % FWD_BS};
	struct batch b = {.n_tokens = 1,
			  .tokens = tok + pos + 1,
			  .positions = p,
			  .n_logits = 1,
			  .logits_rows = rows,
			  .hidden_rows = h,
			  .hidden_from_mtp = true};
	b.attn = (struct attn_meta){.n_seqs = 1,
				    .n_tokens = 1,
				    .query_start = qs,
				    .seq_lens = sl,
				    .block_table = s->bt,
				    .max_blocks = s->max_blocks,
				    .slots = slots,
				    .n_decodes = be != NULL,
				    .n_decode_tokens = be != NULL,
				    .dcp_size = 1,
				    .local_seq_lens = sl};
	return model_mtp_forward(m, &b, &s->kv, be, out, e);
}

/* first_chunk tokens at once, then `step` at a time (1: decodes on backend be); after each
 * chunk, two chained passes from its last MTP position (num_speculative_tokens 3), whose
 * latent rows the next chunk's first pass overwrites */
static void check(const char *fixture, const char *main_fixture, const char *name, int first_chunk, int step,
		  const struct attn_backend *be)
{
	struct err e;
	struct model *m = load(fixture, true, &e);
	EXPECTF(m != NULL, "%s: %s", fixture, m ? "" : e.msg);
	if (!m)
		return;
	int n, V = model_config(m)->vocab_size;
	int32_t *tok = fwd_prompt(main_fixture, name, &n);
	char rel[256];
	snprintf(rel, sizeof rel, "%s/golden/%s.mtp.f32", fixture, name);
	float *gold = fwd_read_f32(fixture_path(rel), (size_t)(n - 1) * (size_t)V),
	      *out = malloc(sizeof(float) * 128 * (size_t)V);
	float *gold_chain[3] = {NULL, NULL, NULL}; /* [depth][n - 1 - depth, V] */
	for (int d = 1; d <= 2; d++) {
		snprintf(rel, sizeof rel, "%s/golden/%s.chain%d.f32", fixture, name, d);
		gold_chain[d] = fwd_read_f32(fixture_path(rel), (size_t)(n - 1 - d) * (size_t)V);
		EXPECTF(gold_chain[d] != NULL, "%s", rel);
	}
	float chain_worst = 0;
	int n_chained = 0;
	struct fwd_seq s;
	EXPECT(tok && gold && fwd_seq_init_layers(&s, model_config(m), model_kv_layers(m), 128, DT_F32, &e) == 0);
	float worst = 0;
	for (int start = 0, q = first_chunk; tok && gold && start < n; start += q, q = step) {
		if (q > n - start)
			q = n - start;
		int k = fwd_mtp_chunk(m, &s, be, tok, n, start, q, out, &e);
		EXPECTF(k >= 0, "%s %s at %d: %s", fixture, name, start, k < 0 ? e.msg : "");
		if (k < 0)
			break;
		for (int r = 0; r < k; r++) {
			float d = fwd_max_abs_diff(out + (size_t)r * V, gold + (size_t)(start + r) * V, (size_t)V);
			if (d > worst)
				worst = d;
		}
		int last = start + k - 1; /* the first pass's last position */
		for (int d = 1, hid = k - 1; k > 0 && d <= 2 && last + d + 1 < n && gold_chain[d]; d++, hid = 0) {
			int rc = chain(m, &s, be, tok, last + d, hid, out, &e);
			EXPECTF(rc == 0, "%s %s chained at %d: %s", fixture, name, last + d, rc ? e.msg : "");
			if (rc)
				break;
			float diff = fwd_max_abs_diff(out, gold_chain[d] + (size_t)last * V, (size_t)V);
			if (diff > chain_worst)
				chain_worst = diff;
			n_chained++;
		}
	}
	EXPECTF((n_chained > 0 || first_chunk >= n - 2) && chain_worst < 1e-3f,
		"%s %s (first %d, then %d, %s): %d chained MTP logits differ from the reference by %g", fixture, name,
		first_chunk, step, be ? be->name : "prefill path", n_chained, chain_worst);
	for (int d = 1; d <= 2; d++)
		free(gold_chain[d]);
	EXPECTF(worst < 1e-3f, "%s %s (first %d, then %d, %s): MTP logits differ from the reference by %g", fixture,
		name, first_chunk, step, be ? be->name : "prefill path", worst);
	fwd_seq_fini(&s);
	free(tok);
	free(gold);
	free(out);
	model_free(m);
}

static void test_mtp_whole_and_chunked(void)
{
	const char *fx[2][2] = {{"tiny-v3-mtp", "tiny-v3"}, {"tiny-r1-mtp", "tiny-r1"}};
	for (int f = 0; f < 2; f++) {
		check(fx[f][0], fx[f][1], "len17", 17, 17, NULL);
		check(fx[f][0], fx[f][1], "len64", 64, 64, NULL);
		check(fx[f][0], fx[f][1], "len64", 7, 7, NULL);
		check(fx[f][0], fx[f][1], "len17", 5, 3, NULL);
	}
}

/* DeepSeek-V3.2's MTP layer has its own indexer (tiny-v32-mtp: fp8, index_topk 12, so the
 * module's attention selects at 17 and 64 tokens): whole, chunked and token by token */
static void test_mtp_v32(void)
{
	const struct attn_backend *be = &attn_backend_flashmla_sparse;
	check("tiny-v32-mtp", "tiny-v32-mtp", "len17", 17, 17, be);
	check("tiny-v32-mtp", "tiny-v32-mtp", "len64", 64, 64, be);
	check("tiny-v32-mtp", "tiny-v32-mtp", "len64", 7, 7, be);
	check("tiny-v32-mtp", "tiny-v32-mtp", "len17", 5, 1, be);
}

static void test_mtp_decodes_every_backend(void)
{
	for (int b = 0; b < attn_backend_count(); b++) {
		if (attn_backend_kind(attn_backend_at(b)) != ATTN_KIND_MLA) /* dense models */
			continue;
		check("tiny-v3-mtp", "tiny-v3", "len64", 40, 1, attn_backend_at(b));
		check("tiny-r1-mtp", "tiny-r1", "len17", 5, 1, attn_backend_at(b));
	}
}

/* Loading the MTP layer leaves the model's own logits as they were, bit for bit. */
static void test_main_logits_unchanged(void)
{
	struct err e;
	struct model *a = load("tiny-v3", false, &e), *b = load("tiny-v3-mtp", true, &e);
	EXPECT(a && b);
	int n;
	int32_t *tok = fwd_prompt("tiny-v3", "len17", &n);
	float *la = malloc(sizeof(float) * 17 * 1024), *lb = malloc(sizeof(float) * 17 * 1024);
	struct fwd_seq sa, sb;
	if (a && b && tok && fwd_seq_init(&sa, model_config(a), 32, DT_F32, &e) == 0) {
		EXPECT(fwd_step(a, &sa, NULL, tok, 0, n, 0, la, &e) == 0);
		EXPECT(fwd_seq_init_layers(&sb, model_config(b), model_kv_layers(b), 32, DT_F32, &e) == 0);
		int32_t pos[17], rows[17], qs[2] = {0, 17}, sl[1] = {17};
		int64_t slots[17];
		for (int i = 0; i < 17; i++)
			pos[i] = rows[i] = i, slots[i] = (int64_t)sb.bt[i / FWD_BS] * FWD_BS + i % FWD_BS;
		struct batch bt = {
			.n_tokens = 17, .tokens = tok, .positions = pos, .n_logits = 17, .logits_rows = rows};
		bt.attn = (struct attn_meta){.n_seqs = 1,
					     .n_tokens = 17,
					     .query_start = qs,
					     .seq_lens = sl,
					     .block_table = sb.bt,
					     .max_blocks = sb.max_blocks,
					     .slots = slots,
					     .dcp_size = 1,
					     .local_seq_lens = sl};
		EXPECT(model_forward(b, &bt, &sb.kv, NULL, lb, &e) == 0);
		EXPECT(memcmp(la, lb, sizeof(float) * 17 * 1024) == 0);
		EXPECT_EQ_INT(model_kv_layers(a), 3);
		EXPECT_EQ_INT(model_kv_layers(b), 4);
		EXPECT(!model_has_mtp(a) && model_has_mtp(b));
		/* the MTP step refuses what it cannot run */
		int32_t hid[1] = {17}, one[1] = {5};
		struct batch mb = bt;
		mb.n_tokens = 1, mb.tokens = one, mb.n_logits = 0, mb.hidden_rows = hid;
		qs[1] = 1;
		mb.attn.n_tokens = 1;
		EXPECT(model_mtp_forward(b, &mb, &sb.kv, NULL, NULL, &e) < 0);
		EXPECTF(strstr(e.msg, "hidden row 17") != NULL, "message: %s", e.msg);
		EXPECT(model_mtp_forward(a, &mb, &sa.kv, NULL, NULL, &e) < 0);
		EXPECTF(strstr(e.msg, "without its MTP layer") != NULL, "message: %s", e.msg);
		/* a cache without the MTP layer is refused by both steps */
		EXPECT(model_forward(b, &bt, &sa.kv, NULL, lb, &e) < 0);
		fwd_seq_fini(&sb);
		fwd_seq_fini(&sa);
	}
	free(tok);
	free(la);
	free(lb);
	model_free(a);
	model_free(b);
}

static void test_load_errors(void)
{
	struct err e;
	struct model *m = load("tiny-v3", true, &e);
	EXPECT(m == NULL);
	EXPECTF(strstr(e.msg, "num_nextn_predict_layers is 0") != NULL, "message: %s", e.msg);
	model_free(m);
}

int main(int argc, char **argv)
{
	static const struct test_case cases[] = {
		T(test_mtp_whole_and_chunked),
		T(test_mtp_decodes_every_backend),
		T(test_main_logits_unchanged),
		T(test_load_errors),
		T(test_mtp_v32),
	};
	int rc = harness_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
	pool_free(g_pool);
	return rc;
}
