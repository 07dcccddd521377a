

/* The two MLA attention paths and the LSE merge (docs/mla-dcp.md §2.5, §2.6): absorbed
 * (decode) vs up-projected (prefill) attention, chunked prefill vs one forward, context
 * workspace chunk sizes, merge of disjoint key sets, LSE edge cases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/backends/backends.h"
#include "attn/kv_cache.h"
#include "attn/merge.h"
#include "attn/prefill.h"
#include "fwd_util.h"
#include "harness.h"
#include "model/model.h"
#include "model/model_internal.h"
#include "ops/pool.h"
#include "ops/vec.h"

static struct pool *g_pool;
static uint64_t rs = 99;
static float frand(void)
{
	rs = rs * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rs >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

/* ---- merge ---- */

/* Attention of one query over keys [k0, k1) (1-D scores, values dv wide). */
static void attend(const float *scores, const float *v, int dv, int k0, int k1, float *o, float *lse)
{
	float s[64];
	for (int k = k0; k < k1; k++)
		s[k - k0] = scores[k];
	*lse = ops_softmax(s, k1 - k0);
	for (int d = 0; d < dv; d++)
		o[d] = 0;
	for (int k = k0; k < k1; k++)
		for (int d = 0; d < dv; d++)
			o[d] += s[k - k0] * v[k * dv + d];
}

static void test_merge_disjoint_equals_union(void)
{
	enum { N = 40, DV = 8 };
	float sc[N], v[N * DV];
	for (int i = 0; i < N; i++)
		sc[i] = 3 * frand();
	for (int i = 0; i < N * DV; i++)
		v[i] = frand();
	float o_all[DV], l_all, o_a[DV], l_a, o_b[DV], l_b, o_m[DV], l_m;
	attend(sc, v, DV, 0, N, o_all, &l_all);
	int splits[] = {1, 13, 39};
	for (int si = 0; si < 3; si++) {
		attend(sc, v, DV, 0, splits[si], o_a, &l_a);
		attend(sc, v, DV, splits[si], N, o_b, &l_b);
		attn_merge_states(1, 1, DV, o_a, &l_a, o_b, &l_b, o_m, &l_m);
		EXPECT_NEAR(l_m, l_all, 1e-5);
		for (int d = 0; d < DV; d++)
			EXPECT_NEAR(o_m[d], o_all[d], 1e-5);
		/* order does not matter, in place works */
		attn_merge_states(1, 1, DV, o_b, &l_b, o_a, &l_a, o_b, &l_b);
		EXPECT_NEAR(l_b, l_all, 1e-5);
		for (int d = 0; d < DV; d++)
			EXPECT_NEAR(o_b[d], o_all[d], 1e-5);
	}
}

static void test_merge_lse_edge_cases(void)
{
	float op[2] = {1, 2}, os[2] = {5, 6}, out[2];
	float lp = -INFINITY, ls = 0.5f, lo;
	/* an empty prefix: the suffix unchanged */
	attn_merge_states(1, 1, 2, op, &lp, os, &ls, out, &lo);
	EXPECT(out[0] == 5 && out[1] == 6 && lo == 0.5f);
	/* +inf (FA2's empty set) is read as -inf */
	lp = INFINITY;
	attn_merge_states(1, 1, 2, op, &lp, os, &ls, out, &lo);
	EXPECT(out[0] == 5 && out[1] == 6 && lo == 0.5f);
	/* both empty: output 0, lse -inf, never NaN */
	lp = -INFINITY;
	ls = INFINITY;
	attn_merge_states(1, 1, 2, op, &lp, os, &ls, out, &lo);
	EXPECT(out[0] == 0 && out[1] == 0 && lo == -INFINITY);
	/* equal LSEs: the average, lse + ln 2 */
	lp = ls = 1.0f;
	attn_merge_states(1, 1, 2, op, &lp, os, &ls, out, &lo);
	EXPECT_NEAR(out[0], 3, 1e-6);
	EXPECT_NEAR(lo, 1 + log(2), 1e-6);
	/* huge LSE gap: no overflow */
	lp = 1000;
	ls = -1000;
	attn_merge_states(1, 1, 2, op, &lp, os, &ls, out, &lo);
	EXPECT(out[0] == 1 && out[1] == 2 && lo == 1000);
}

/* ---- absorbed vs up-projected attention on random data ---- */

/* Random bf16 kv_b [H*(dn+dv), L] and a cache holding nk random latent rows; queries of one
 * sequence: q [nq, H, dn+dr]. Compares attn_prefill (up-projected MHA, all nk keys as context
 * except the last nq which are the new tokens) with the absorbed path through REFERENCE_MLA. */
static void test_absorbed_equals_upprojected_random(void)
{
	enum { H = 3, DN = 16, DR = 8, DV = 12, L = 24, ROW = L + DR, NK = 37, NQ = 5, BS = 8 };
	float scale = 0.3f;
	struct err e;
	struct kv_cache kv;
	EXPECT_EQ_INT(kv_cache_init(&kv, 1, 8, BS, L, DR, DT_F32, &e), 0);
	int32_t bt[6] = {3, 1, 7, 2, 5, 4};
	float *rows = malloc(sizeof(float) * NK * ROW);
	int64_t slots[NK];
	for (int i = 0; i < NK * ROW; i++)
		rows[i] = frand();
	for (int p = 0; p < NK; p++)
		slots[p] = kv_cache_slot(bt, BS, p);
	kv_cache_write_strided(&kv, 0, slots, rows, ROW, rows + L, ROW, NK);
	float *wkv = malloc(sizeof(float) * H * (DN + DV) * L);
	for (int i = 0; i < H * (DN + DV) * L; i++)
		wkv[i] = frand() * 0.3f;
	struct wmat kvb = {.dtype = DT_F32, .data = wkv, .rows = H * (DN + DV), .cols = L, .ld = L};
	float q[NQ * H * (DN + DR)];
	for (int i = 0; i < NQ * H * (DN + DR); i++)
		q[i] = frand();

	/* prefill path: one sequence, NQ new tokens at the end, NK - NQ context rows */
	int32_t qs[2] = {0, NQ}, sl[1] = {NK};
	struct attn_meta meta = {.n_seqs = 1,
				 .n_tokens = NQ,
				 .query_start = qs,
				 .seq_lens = sl,
				 .block_table = bt,
				 .max_blocks = 6,
				 .slots = slots + NK - NQ,
				 .n_decodes = 0,
				 .n_decode_tokens = 0,
				 .dcp_size = 1,
				 .local_seq_lens = sl};
	struct arena ar;
	arena_init(&ar, 1 << 22);
	float out_pre[NQ * H * DV];
	int chunks[] = {1, 4, 32, 64};
	float first[NQ * H * DV];
	for (int ci = 0; ci < 4; ci++) {
		arena_reset(&ar);
		struct attn_prefill_args pa = {.meta = &meta,
					       .kv = &kv,
					       .layer = 0,
					       .n_heads = H,
					       .nope_dim = DN,
					       .rope_dim = DR,
					       .v_dim = DV,
					       .kv_lora_rank = L,
					       .scale = scale,
					       .kv_b = &kvb,
					       .q = q,
					       .kv_c = rows + (NK - NQ) * ROW,
					       .k_pe = rows + (NK - NQ) * ROW + L,
					       .ld_kv = ROW,
					       .out = out_pre,
					       .ws_rows = chunks[ci],
					       .cx = &(struct compute_ctx){.pool = g_pool, .scratch = &ar}};
		EXPECTF(attn_prefill(&pa, &e) == 0, "%s", e.msg);
		if (ci == 0)
			memcpy(first, out_pre, sizeof first);
		else /* workspace chunk size does not change the result */
			EXPECTF(fwd_max_abs_diff(first, out_pre, NQ * H * DV) < 1e-5f, "chunk %d: %g", chunks[ci],
				fwd_max_abs_diff(first, out_pre, NQ * H * DV));
	}

	/* absorbed path: q_abs = W_UKᵀ q_nope, MQA over the latent rows, then W_UV */
	const struct attn_backend *be = attn_backend_by_name("REFERENCE_MLA");
	EXPECT(be != NULL);
	float qd[NQ * H * ROW], olat[NQ * H * L], lse[NQ * H], out_dec[NQ * H * DV];
	for (int t = 0; t < NQ; t++)
		for (int h = 0; h < H; h++) {
			const float *qn = q + (t * H + h) * (DN + DR);
			float *d = qd + (t * H + h) * ROW;
			for (int l = 0; l < L; l++) {
				double s = 0;
				for (int p = 0; p < DN; p++)
					s += (double)qn[p] * wkv[(h * (DN + DV) + p) * L + l];
				d[l] = (float)s;
			}
			memcpy(d + L, qn + DN, sizeof(float) * DR);
		}
	/* each query as its own decode sequence of length NK - NQ + t + 1 (same visibility) */
	int32_t dqs[NQ + 1], dsl[NQ], dbt[NQ * 6];
	for (int t = 0; t <= NQ; t++)
		dqs[t] = t;
	for (int t = 0; t < NQ; t++) {
		dsl[t] = NK - NQ + t + 1;
		memcpy(dbt + t * 6, bt, sizeof bt);
	}
	struct attn_meta dm = {.n_seqs = NQ,
			       .n_tokens = NQ,
			       .query_start = dqs,
			       .seq_lens = dsl,
			       .block_table = dbt,
			       .max_blocks = 6,
			       .slots = slots,
			       .n_decodes = NQ,
			       .n_decode_tokens = NQ,
			       .dcp_size = 1,
			       .local_seq_lens = dsl};
	arena_reset(&ar);
	if (be->plan)
		EXPECT_EQ_INT(be->plan(&dm, H, &(struct compute_ctx){.scratch = &ar}, &e), 0);
	struct attn_decode_args da = {.meta = &dm,
				      .kv = &kv,
				      .layer = 0,
				      .n_heads = H,
				      .scale = scale,
				      .q = qd,
				      .out = olat,
				      .lse = lse,
				      .cx = &(struct compute_ctx){.pool = g_pool, .scratch = &ar}};
	be->decode(&da);
	for (int t = 0; t < NQ; t++)
		for (int h = 0; h < H; h++)
			for (int v = 0; v < DV; v++) {
				double s = 0;
				for (int l = 0; l < L; l++)
					s += (double)olat[(t * H + h) * L + l] * wkv[(h * (DN + DV) + DN + v) * L + l];
				out_dec[(t * H + h) * DV + v] = (float)s;
			}
	float d = fwd_max_abs_diff(out_pre, out_dec, NQ * H * DV);
	EXPECTF(d < 1e-4f, "absorbed vs up-projected: %g", d);
	arena_fini(&ar);
	kv_cache_fini(&kv);
	free(rows);
	free(wkv);
}

static float bf(float x) { return bf16_to_f32(f32_to_bf16(x)); }

/* attn_prefill under bf16 (real head sizes, two causal query blocks, context in chunks)
 * against a double-precision reference on the same bf16-rounded up-projected K/V: only the
 * probabilities' rounding to bf16 (each within 2^-9) separates them, so every output is
 * within max|V| / 512 (measured ~10x inside). */
static void test_prefill_bf16_core(void)
{
	enum { H = 2, DN = 128, DR = 64, DV = 128, L = 64, ROW = L + DR, NK = 150, NQ = 70, BS = 16, HD = DN + DV };
	struct err e;
	struct kv_cache kv;
	EXPECT_EQ_INT(kv_cache_init(&kv, 1, 16, BS, L, DR, DT_BF16, &e), 0);
	int32_t bt[10] = {9, 3, 1, 7, 2, 5, 4, 8, 6, 10};
	float *rows = malloc(sizeof(float) * NK * ROW), *q = malloc(sizeof(float) * NQ * H * (DN + DR));
	int64_t slots[NK];
	for (int i = 0; i < NK * ROW; i++)
		rows[i] = bf(frand());
	for (int i = 0; i < NQ * H * (DN + DR); i++)
		q[i] = bf(frand());
	for (int p = 0; p < NK; p++)
		slots[p] = kv_cache_slot(bt, BS, p);
	kv_cache_write_strided(&kv, 0, slots, rows, ROW, rows + L, ROW, NK);
	uint16_t *wkv = malloc(sizeof(uint16_t) * H * HD * L);
	for (int i = 0; i < H * HD * L; i++)
		wkv[i] = f32_to_bf16(frand() * 0.3f);
	struct wmat kvb = {.dtype = DT_BF16, .data = wkv, .rows = H * HD, .cols = L, .ld = L};
	/* reference K/V: the up-projection in double, rounded to bf16 as the bf16 path does */
	float *kvr = malloc(sizeof(float) * NK * H * HD);
	for (int b = 0; b < NK; b++)
		for (int o = 0; o < H * HD; o++) {
			double acc = 0;
			for (int l = 0; l < L; l++)
				acc += (double)rows[b * ROW + l] * bf16_to_f32(wkv[o * L + l]);
			kvr[(size_t)b * H * HD + o] = bf((float)acc);
		}
	float scale = 0.07f, vmax = 0;
	for (int i = 0; i < NK * H * HD; i++)
		vmax = fabsf(kvr[i]) > vmax ? fabsf(kvr[i]) : vmax;
	int32_t qs[2] = {0, NQ}, sl[1] = {NK};
	struct attn_meta meta = {.n_seqs = 1,
				 .n_tokens = NQ,
				 .query_start = qs,
				 .seq_lens = sl,
				 .block_table = bt,
				 .max_blocks = 10,
				 .slots = slots + NK - NQ,
				 .dcp_size = 1,
				 .local_seq_lens = sl};
	struct arena ar;
	arena_init(&ar, attn_prefill_scratch_bytes(NQ, H, DN, DR, DV, L, 1024, 2) + (1 << 20));
	float *out = malloc(sizeof(float) * NQ * H * DV);
	int chunks[] = {32, 1024};
	for (int ci = 0; ci < 2; ci++) {
		arena_reset(&ar);
		struct attn_prefill_args pa = {.meta = &meta,
					       .kv = &kv,
					       .layer = 0,
					       .n_heads = H,
					       .nope_dim = DN,
					       .rope_dim = DR,
					       .v_dim = DV,
					       .kv_lora_rank = L,
					       .scale = scale,
					       .kv_b = &kvb,
					       .q = q,
					       .kv_c = rows + (NK - NQ) * ROW,
					       .k_pe = rows + (NK - NQ) * ROW + L,
					       .ld_kv = ROW,
					       .out = out,
					       .ws_rows = chunks[ci],
					       .cx = &(struct compute_ctx){.pool = g_pool, .scratch = &ar},
					       .bf16 = true};
		EXPECTF(attn_prefill(&pa, &e) == 0, "%s", e.msg);
		double worst = 0;
		for (int t = 0; t < NQ; t++)
			for (int h = 0; h < H; h++) {
				int vis = NK - NQ + t + 1;
				double s[NK], mx = -1e300, sum = 0;
				const float *qt = q + (t * H + h) * (DN + DR);
				for (int b = 0; b < vis; b++) {
					const float *k = kvr + (size_t)b * H * HD + h * HD;
					double d = 0;
					for (int c = 0; c < DN; c++)
						d += (double)qt[c] * k[c];
					for (int c = 0; c < DR; c++)
						d += (double)qt[DN + c] * rows[b * ROW + L + c];
					s[b] = d * scale;
					mx = s[b] > mx ? s[b] : mx;
				}
				for (int b = 0; b < vis; b++)
					sum += s[b] = exp(s[b] - mx);
				for (int v = 0; v < DV; v++) {
					double o = 0;
					for (int b = 0; b < vis; b++)
						o += s[b] / sum * kvr[(size_t)b * H * HD + h * HD + DN + v];
					double d = fabs(o - out[(t * H + h) * DV + v]);
					worst = d > worst ? d : worst;
				}
			}
		EXPECTF(worst <= vmax / 512, "chunk %d: max |diff| %g, max |V| %g", chunks[ci], worst, vmax);
	}
	arena_fini(&ar);
	kv_cache_fini(&kv);
	free(rows), free(q), free(wkv), free(kvr), free(out);
}

/* ---- on the model ---- */

static struct model *load(const char *name, struct err *e)
{
	struct model_options o = {
		.act_dtype = DT_F32, .max_batch_tokens = 96, .max_seqs = 4, .max_model_len = 96, .pool = g_pool};
	struct model *m = NULL;
	return model_load(fixture_path(name), &o, &m, e) ? NULL : m;
}

static void tokens(int32_t *t, int n)
{
	for (int i = 0; i < n; i++)
		t[i] = i ? (int32_t)(rs = rs * 6364136223846793005ull + 1, (rs >> 33) % 1024) : 0;
}

/* Decode one token at a time (absorbed path) == prefill forward (up-projected path). */
static void test_model_decode_equals_prefill(void)
{
	struct err e;
	struct model *m = load("tiny-v3", &e);
	EXPECTF(m, "%s", e.msg);
	if (!m)
		return;
	enum { N = 40, V = 1024 };
	int32_t tok[N];
	tokens(tok, N);
	float *full = malloc(sizeof(float) * N * V), *inc = malloc(sizeof(float) * N * V);
	struct fwd_seq a, b;
	fwd_seq_init(&a, model_config(m), N, DT_F32, &e);
	fwd_seq_init(&b, model_config(m), N, DT_F32, &e);
	EXPECT_EQ_INT(fwd_step(m, &a, NULL, tok, 0, N, 0, full, &e), 0);
	const struct attn_backend *be = attn_backend_by_name("REFERENCE_MLA");
	for (int i = 0; i < N; i++)
		EXPECTF(fwd_step(m, &b, be, tok, i, 1, 1, inc + (size_t)i * V, &e) == 0, "%s", e.msg);
	float d = fwd_max_abs_diff(full, inc, (size_t)N * V);
	EXPECTF(d < 1e-4f, "decode vs prefill logits: %g", d);
	fwd_seq_fini(&a);
	fwd_seq_fini(&b);
	free(full);
	free(inc);
	model_free(m);
}

/* A prefix, then the rest through the KV cache (context path) == the full forward, for
 * several split points and prefill workspace chunk sizes. */
static void test_model_chunked_prefill(void)
{
	struct err e;
	struct model *m = load("tiny-r1", &e);
	EXPECTF(m, "%s", e.msg);
	if (!m)
		return;
	enum { N = 70, V = 1024 };
	int32_t tok[N];
	tokens(tok, N);
	float *full = malloc(sizeof(float) * N * V), *part = malloc(sizeof(float) * N * V);
	struct fwd_seq a;
	fwd_seq_init(&a, model_config(m), N, DT_F32, &e);
	EXPECT_EQ_INT(fwd_step(m, &a, NULL, tok, 0, N, 0, full, &e), 0);
	fwd_seq_fini(&a);
	int splits[] = {1, 17, 50};
	int ws[] = {96, 7, 1};
	for (int si = 0; si < 3; si++) {
		model_set_prefill_chunk(m, ws[si]);
		struct fwd_seq b;
		fwd_seq_init(&b, model_config(m), N, DT_F32, &e);
		int p = splits[si];
		EXPECT_EQ_INT(fwd_step(m, &b, NULL, tok, 0, p, 0, part, &e), 0);
		/* the rest in two pieces through the cached context */
		int mid = p + (N - p) / 2;
		EXPECT_EQ_INT(fwd_step(m, &b, NULL, tok, p, mid - p, 0, part + (size_t)p * V, &e), 0);
		EXPECT_EQ_INT(fwd_step(m, &b, NULL, tok, mid, N - mid, 0, part + (size_t)mid * V, &e), 0);
		float d = fwd_max_abs_diff(full, part, (size_t)N * V);
		EXPECTF(d < 1e-4f, "split %d ws %d: %g", p, ws[si], d);
		fwd_seq_fini(&b);
	}
	free(full);
	free(part);
	model_free(m);
}

/* A mixed batch: two decodes and two prefills (one with context) in one step, equal to
 * running the sequences alone. */
static void test_model_mixed_batch(void)
{
	struct err e;
	struct model *m = load("tiny-v2", &e);
	EXPECTF(m, "%s", e.msg);
	if (!m)
		return;
	enum { V = 1024, S = 4, BS = FWD_BS, MB = 4 };
	const struct model_config *c = model_config(m);
	/* sequence lengths before this step, and query lengths */
	int ctx[S] = {10, 20, 0, 33}, ql[S] = {1, 1, 9, 6};
	int32_t tok[S][64];
	for (int i = 0; i < S; i++)
		tokens(tok[i], 64);
	struct kv_cache kv;
	EXPECT_EQ_INT(kv_cache_init(&kv, c->num_hidden_layers, 1 + S * MB, BS, c->kv_lora_rank, c->qk_rope_head_dim,
				    DT_F32, &e),
		      0);
	int32_t bt[S * MB];
	for (int i = 0; i < S * MB; i++)
		bt[i] = 1 + (i * 7) % (S * MB); /* scattered, distinct */
	const struct attn_backend *be = attn_backend_by_name("REFERENCE_MLA");
	/* fill each context with a prefill of the sequence alone */
	float *ref = malloc(sizeof(float) * 64 * V);
	static float want[32][1024];
	int nrow = 0;
	for (int i = 0; i < S; i++) {
		int n = ctx[i] + ql[i];
		int32_t pos[64], rows[64], qs[2] = {0, n}, sl[1] = {n};
		int64_t slots[64];
		for (int p = 0; p < n; p++) {
			pos[p] = p;
			rows[p] = p;
			slots[p] = (int64_t)bt[i * MB + p / BS] * BS + p % BS;
		}
		struct batch b = {
			.n_tokens = n, .tokens = tok[i], .positions = pos, .n_logits = n, .logits_rows = rows};
		b.attn = (struct attn_meta){.n_seqs = 1,
					    .n_tokens = n,
					    .query_start = qs,
					    .seq_lens = sl,
					    .block_table = bt + i * MB,
					    .max_blocks = MB,
					    .slots = slots,
					    .dcp_size = 1,
					    .local_seq_lens = sl};
		EXPECT_EQ_INT(model_forward(m, &b, &kv, be, ref, &e), 0);
		for (int r = ctx[i]; r < n; r++)
			memcpy(want[nrow++], ref + (size_t)r * V, sizeof(float) * V);
	}
	/* now the mixed step: the new tokens of all four at once (rewriting the same rows) */
	int32_t btok[32], pos[32], qs[S + 1], sl[S], rows[32];
	int64_t slots[32];
	int n = 0;
	qs[0] = 0;
	for (int i = 0; i < S; i++) {
		for (int p = ctx[i]; p < ctx[i] + ql[i]; p++) {
			btok[n] = tok[i][p];
			pos[n] = p;
			slots[n] = (int64_t)bt[i * MB + p / BS] * BS + p % BS;
			rows[n] = n;
			n++;
		}
		qs[i + 1] = n;
		sl[i] = ctx[i] + ql[i];
	}
	struct batch b = {.n_tokens = n, .tokens = btok, .positions = pos, .n_logits = n, .logits_rows = rows};
	b.attn = (struct attn_meta){.n_seqs = S,
				    .n_tokens = n,
				    .query_start = qs,
				    .seq_lens = sl,
				    .block_table = bt,
				    .max_blocks = MB,
				    .slots = slots,
				    .n_decodes = 2,
				    .n_decode_tokens = 2,
				    .dcp_size = 1,
				    .local_seq_lens = sl};
	EXPECTF(model_forward(m, &b, &kv, be, ref, &e) == 0, "%s", e.msg);
	float d = fwd_max_abs_diff(&want[0][0], ref, (size_t)n * V);
	EXPECTF(d < 1e-4f, "mixed batch vs alone: %g", d);
	free(ref);
	kv_cache_fini(&kv);
	model_free(m);
}

int main(int argc, char **argv)
{
	struct err e;
	if (pool_new(2, &g_pool, &e))
		return 1;
	static const struct test_case cases[] = {
		T(test_merge_disjoint_equals_union),
		T(test_merge_lse_edge_cases),
		T(test_absorbed_equals_upprojected_random),
		T(test_prefill_bf16_core),
		T(test_model_decode_equals_prefill),
		T(test_model_chunked_prefill),
		T(test_model_mixed_batch),
	};
	int rc = harness_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
	pool_free(g_pool);
	return rc;
}
