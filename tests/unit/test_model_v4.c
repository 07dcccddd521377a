/* DeepSeek-V4 through model.h (model/family_v4.c): tiny-v4's golden logits (act-quant off,
 * golden/README.md) on every row of every prompt within 1e-3, in one prefill, in chunks of 5
 * and token by token (the compressor state, window ring and entries across steps), two
 * sequences in one step; the paged pool at several block sizes with scattered blocks; a
 * sequence continuing from a cached block's snapshot; the MTP module's logits (one prefill, chunked); what this version
 * refuses; and one error per kind of bad checkpoint
 * tensor (missing, misshapen, mistyped), each one line naming the file and the tensor. */
#include <dirent.h>
#include <unistd.h>

#include "attn/kv_cache.h"
#include "model/family.h"
#include "ops/pool.h"
#include "unit/fwd_util.h"

#define TOL 1e-3

static struct pool *the_pool;
static struct pool *pool(void)
{
	if (!the_pool) {
		struct err e = {{0}};
		CHECK(pool_new(2, &the_pool, &e) == 0);
	}
	return the_pool;
}

static struct model *load_v4(const char *dir, enum dtype act, int max_len, struct err *e)
{
	struct model_options o = {
		.act_dtype = act, .max_batch_tokens = max_len, .max_seqs = 4, .max_model_len = max_len, .pool = pool()};
	struct model *m = NULL;
	return model_load(dir, &o, &m, e) ? NULL : m;
}

static double max_diff(const float *a, const float *b, size_t n)
{
	double w = 0;
	for (size_t i = 0; i < n; i++)
		w = fmax(w, fabs((double)a[i] - b[i]));
	return w;
}

struct prompt {
	char name[16];
	int32_t *tok;
	int n;
	float *gold; /* [n, V] */
};

static int load_prompts(struct prompt *p, int cap, int V)
{
	json_t *j = json_load_file(fixture_path("tiny-v4/golden/prompts.json"), 0, NULL);
	CHECK(j);
	size_t i;
	json_t *pr;
	int n = 0;
	json_array_foreach(json_object_get(j, "prompts"), i, pr)
	{
		CHECK(n < cap);
		struct prompt *q = &p[n++];
		snprintf(q->name, sizeof q->name, "%s", json_string_value(json_object_get(pr, "name")));
		json_t *t = json_object_get(pr, "tokens");
		q->n = (int)json_array_size(t);
		q->tok = malloc(sizeof(int32_t) * (size_t)q->n);
		for (int k = 0; k < q->n; k++)
			q->tok[k] = (int32_t)json_integer_value(json_array_get(t, (size_t)k));
		char rel[128];
		snprintf(rel, sizeof rel, "tiny-v4/golden/%s", json_string_value(json_object_get(pr, "logits_file")));
		q->gold = fwd_read_f32(fixture_path(rel), (size_t)q->n * (size_t)V);
		CHECK(q->gold);
	}
	json_decref(j);
	return n;
}

/* the prompt of n tokens, or NULL */
static struct prompt *prompt_of_len(struct prompt *p, int np, int n)
{
	for (int k = 0; k < np; k++)
		if (p[k].n == n)
			return &p[k];
	return NULL;
}

static void free_prompts(struct prompt *p, int np)
{
	for (int k = 0; k < np; k++)
		free(p[k].tok), free(p[k].gold);
}

/* tiny-v4 for float32 forwards of up to 320 tokens; NULL (a failed check) where it does not load */
static struct model *open_tiny_v4(struct err *e)
{
	struct model *m = load_v4(fixture_path("tiny-v4"), DT_F32, 320, e);
	EXPECTF(m, "%s", e->msg);
	return m;
}

/* every prompt in one prefill, in chunks of 5, token by token */
static void test_golden(void)
{
	struct err e = {{0}};
	struct model *m = open_tiny_v4(&e);
	if (!m)
		return;
	EXPECT(!strcmp(model_config(m)->model_type, "deepseek_v4"));
	int V = model_config(m)->vocab_size;
	struct prompt p[8];
	int np = load_prompts(p, 8, V);
	static const int chunks[] = {0, 5, 1};
	for (int c = 0; c < 3; c++)
		for (int k = 0; k < np; k++) {
			float *out = malloc(sizeof(float) * (size_t)p[k].n * (size_t)V);
			int rc = fwd_run_chunks(m, "REFERENCE_MLA", p[k].tok, p[k].n, chunks[c], 0, out, &e);
			EXPECTF(rc == 0, "%s chunk %d: %s", p[k].name, chunks[c], e.msg);
			double d = rc ? INFINITY : max_diff(out, p[k].gold, (size_t)p[k].n * (size_t)V);
			printf("# %s, %s: max |diff| %.3g over %d rows\n", p[k].name,
			       chunks[c] ? (chunks[c] == 1 ? "token by token" : "chunks of 5") : "one prefill", d,
			       p[k].n);
			EXPECTF(d < TOL, "%s chunk %d: max |diff| %g", p[k].name, chunks[c], d);
			free(out);
		}
	free_prompts(p, np);
	model_free(m);
}

/* two sequences in each step, each in two chunks: their states kept apart (slots by first
 * block); then a sequence that continues without its state is refused */
static void test_two_sequences(void)
{
	struct err e = {{0}};
	struct model *m = open_tiny_v4(&e);
	if (!m)
		return;
	int V = model_config(m)->vocab_size;
	struct prompt p[8];
	int np = load_prompts(p, 8, V);
	CHECK(np >= 4);
	struct prompt *a = &p[3], *b2 = &p[2]; /* len64, len17 */
	struct kv_cache kv = {0};
	CHECK(model_kv_cache_init(m, &kv, 64, FWD_BS, DT_F32, &e) == 0);
	float *out = malloc(sizeof(float) * (size_t)(a->n + b2->n) * (size_t)V);
	int32_t bt[2][8] = {{20, 21, 22, 23, 24, 25, 26, 27}, {3, 4, 5, 6, 7, 8, 9, 10}}; /* len17's, len64's */
	double worst = 0;
	for (int step = 0; step < 2; step++) {
		int a0 = step ? 30 : 0, a1 = step ? a->n : 30, b0 = step ? 7 : 0, b1 = step ? b2->n : 7;
		int n = (a1 - a0) + (b1 - b0);
		int32_t tok[128], pos[128], rows[128], qs[3] = {0, b1 - b0, n}, sl[2] = {b1, a1};
		int64_t slots[128];
		for (int t = 0; t < n; t++) {
			bool first = t < b1 - b0; /* sequence 0 is len17, then len64 */
			int p0 = first ? b0 + t : a0 + t - (b1 - b0);
			tok[t] = first ? b2->tok[p0] : a->tok[p0];
			pos[t] = p0;
			rows[t] = t;
			slots[t] = kv_cache_slot(bt[first ? 0 : 1], FWD_BS, p0);
		}
		struct batch b = {.n_tokens = n, .tokens = tok, .positions = pos, .n_logits = n, .logits_rows = rows};
		b.attn = (struct attn_meta){.n_seqs = 2,
					    .n_tokens = n,
					    .query_start = qs,
					    .seq_lens = sl,
					    .block_table = &bt[0][0],
					    .max_blocks = 8,
					    .slots = slots,
					    .dcp_size = 1,
					    .local_seq_lens = sl};
		int rc = model_forward(m, &b, &kv, attn_backend_by_name("REFERENCE_MLA"), out, &e);
		EXPECTF(rc == 0, "step %d: %s", step, e.msg);
		if (rc)
			break;
		for (int t = 0; t < n; t++) {
			bool first = t < b1 - b0;
			const float *g = (first ? b2->gold : a->gold) + (size_t)pos[t] * (size_t)V;
			worst = fmax(worst, max_diff(out + (size_t)t * (size_t)V, g, (size_t)V));
		}
	}
	printf("# len17 + len64 in the same steps (two chunks each): max |diff| %.3g\n", worst);
	EXPECTF(worst < TOL, "max |diff| %g", worst);
	/* a sequence that the model never saw at position 0 */
	int32_t t1[1] = {5}, p1[1] = {12}, r1[1] = {0}, q1[2] = {0, 1}, s1[1] = {13}, bt1[8] = {40, 41};
	int64_t sl1[1] = {kv_cache_slot(bt1, FWD_BS, 12)};
	struct batch b = {.n_tokens = 1, .tokens = t1, .positions = p1, .n_logits = 1, .logits_rows = r1};
	b.attn = (struct attn_meta){.n_seqs = 1,
				    .n_tokens = 1,
				    .query_start = q1,
				    .seq_lens = s1,
				    .block_table = bt1,
				    .max_blocks = 8,
				    .slots = sl1,
				    .dcp_size = 1,
				    .local_seq_lens = s1};
	EXPECT(model_forward(m, &b, &kv, attn_backend_by_name("REFERENCE_MLA"), out, &e) != 0);
	printf("# refused: %s\n", e.msg);
	EXPECT(strstr(e.msg, "neither kept nor a snapshot") != NULL);
	free(out);
	kv_cache_fini(&kv);
	free_prompts(p, np);
	model_free(m);
}

/* The paged pool at block sizes that divide no ratio, one, and all of them (5, 16, 128), with
 * the blocks scattered in reverse order: len300 in chunks of 37 stays within TOL of its
 * golden (an entry in the wrong block, or overwritten by its neighbour, would not) */
static void test_paged_layouts(void)
{
	struct err e = {{0}};
	struct model *m = open_tiny_v4(&e);
	if (!m)
		return;
	int V = model_config(m)->vocab_size;
	struct prompt p[8];
	int np = load_prompts(p, 8, V);
	struct prompt *a = prompt_of_len(p, np, 300);
	CHECK(a);
	float *out = malloc(sizeof(float) * 37 * (size_t)V);
	static const int sizes[3] = {5, 16, 128};
	for (int si = 0; si < 3; si++) {
		int bs = sizes[si], nb = (a->n + bs - 1) / bs;
		struct kv_cache kv = {0};
		CHECK(model_kv_cache_init(m, &kv, 2 * nb + 2, bs, DT_F32, &e) == 0);
		int32_t bt[64];
		for (int i = 0; i < nb; i++)
			bt[i] = 2 * (nb - i); /* every other block, last first */
		double worst = 0;
		int rc = 0;
		for (int s0 = 0; s0 < a->n && !rc; s0 += 37) {
			int n = a->n - s0 < 37 ? a->n - s0 : 37;
			int32_t pos[37], rows[37], qs[2] = {0, n}, sl[1] = {s0 + n};
			int64_t slots[37];
			for (int t = 0; t < n; t++) {
				pos[t] = s0 + t;
				rows[t] = t;
				slots[t] = kv_cache_slot(bt, bs, s0 + t);
			}
			struct batch b = {.n_tokens = n,
					  .tokens = a->tok + s0,
					  .positions = pos,
					  .n_logits = n,
					  .logits_rows = rows};
			b.attn = (struct attn_meta){.n_seqs = 1,
						    .n_tokens = n,
						    .query_start = qs,
						    .seq_lens = sl,
						    .block_table = bt,
						    .max_blocks = nb,
						    .slots = slots,
						    .dcp_size = 1,
						    .local_seq_lens = sl};
			rc = model_forward(m, &b, &kv, attn_backend_by_name("REFERENCE_MLA"), out, &e);
			EXPECTF(rc == 0, "block size %d, chunk at %d: %s", bs, s0, e.msg);
			for (int t = 0; t < n && !rc; t++)
				worst = fmax(worst, max_diff(out + (size_t)t * (size_t)V,
							     a->gold + (size_t)(s0 + t) * (size_t)V, (size_t)V));
		}
		printf("# len300, block size %d, scattered blocks, chunks of 37: max |diff| %.3g\n", bs, worst);
		EXPECTF(worst < TOL, "block size %d: max |diff| %g", bs, worst);
		kv_cache_fini(&kv);
	}
	free(out);
	free_prompts(p, np);
	model_free(m);
}

/* Prefix caching at the model: len300 in chunks of 37 (blocks 1..19 of 16 tokens) keeps a
 * snapshot of each completed block; a second sequence that shares blocks 1..12 continues at 192
 * from block 12's snapshot into its own blocks and gives len300's golden rows 192..299; a
 * block never completed has none */
static void test_prefix_resume(void)
{
	struct err e = {{0}};
	struct model *m = open_tiny_v4(&e);
	if (!m)
		return;
	int V = model_config(m)->vocab_size;
	struct prompt p[8];
	int np = load_prompts(p, 8, V);
	struct prompt *a = prompt_of_len(p, np, 300);
	CHECK(a);
	struct kv_cache kv = {0};
	CHECK(model_kv_cache_init(m, &kv, 64, FWD_BS, DT_F32, &e) == 0);
	float *out = malloc(sizeof(float) * 128 * (size_t)V);
	int32_t bt[2][19];
	for (int i = 0; i < 19; i++) {
		bt[0][i] = 1 + i;
		bt[1][i] = i < 12 ? 1 + i : 30 + i; /* the first 12 shared */
	}
	double worst = 0;
	for (int seq = 0; seq < 2; seq++) {
		int step = seq ? 108 : 37;
		for (int s0 = seq ? 192 : 0; s0 < a->n; s0 += step) {
			int n = a->n - s0 < step ? a->n - s0 : step;
			int32_t pos[128], rows[128], qs[2] = {0, n}, sl[1] = {s0 + n};
			int64_t slots[128];
			for (int t = 0; t < n; t++) {
				pos[t] = s0 + t;
				rows[t] = t;
				slots[t] = kv_cache_slot(bt[seq], FWD_BS, s0 + t);
			}
			struct batch b = {.n_tokens = n,
					  .tokens = a->tok + s0,
					  .positions = pos,
					  .n_logits = n,
					  .logits_rows = rows};
			b.attn = (struct attn_meta){.n_seqs = 1,
						    .n_tokens = n,
						    .query_start = qs,
						    .seq_lens = sl,
						    .block_table = bt[seq],
						    .max_blocks = 19,
						    .slots = slots,
						    .dcp_size = 1,
						    .local_seq_lens = sl};
			int rc = model_forward(m, &b, &kv, attn_backend_by_name("REFERENCE_MLA"), out, &e);
			EXPECTF(rc == 0, "sequence %d at %d: %s", seq, s0, e.msg);
			if (rc)
				break;
			for (int t = 0; seq && t < n; t++)
				worst = fmax(worst, max_diff(out + (size_t)t * (size_t)V,
							     a->gold + (size_t)(s0 + t) * (size_t)V, (size_t)V));
		}
		if (!seq) {
			EXPECT(model_prefix_resumable(m, 12));  /* block 12 ends at 192 */
			EXPECT(!model_prefix_resumable(m, 19)); /* 288 .. 299: never full */
		}
	}
	printf("# a second sequence from block 12's snapshot (positions 192..299): max |diff| %.3g\n", worst);
	EXPECTF(worst < TOL, "max |diff| %g", worst);
	free(out);
	kv_cache_fini(&kv);
	free_prompts(p, np);
	model_free(m);
}

/* One step of two sequences that share their first 12 blocks: one computes them from position
 * 0 (the same tokens: a request that found nothing cached), the other starts at 192 from block
 * 12's snapshot (it hit those blocks as the first registered them); then both go on in chunks of
 * 37, each from its own state: every row as the golden's */
static void test_prefix_same_step(void)
{
	struct err e = {{0}};
	struct model *m = open_tiny_v4(&e);
	if (!m)
		return;
	int V = model_config(m)->vocab_size;
	struct prompt p[8];
	int np = load_prompts(p, 8, V);
	struct prompt *a = prompt_of_len(p, np, 300);
	CHECK(a);
	struct kv_cache kv = {0};
	CHECK(model_kv_cache_init(m, &kv, 64, FWD_BS, DT_F32, &e) == 0);
	float *out = malloc(sizeof(float) * 80 * (size_t)V);
	int32_t bt[3][19];
	for (int i = 0; i < 19; i++) {
		bt[0][i] = 1 + i;                   /* the first sequence: its snapshot of block 12 */
		bt[1][i] = i < 12 ? 1 + i : 40 + i; /* from 0 over the first's blocks, then its own */
		bt[2][i] = i < 12 ? 1 + i : 20 + i; /* from 192 */
	}
	double worst = 0;
	int rc = 0;
	/* the first sequence, whole: block 12's snapshot */
	for (int s0 = 0; s0 < 192 && !rc; s0 += 64) {
		int32_t pos[64], rows[64], qs[2] = {0, 64}, sl[1] = {s0 + 64};
		int64_t slots[64];
		for (int t = 0; t < 64; t++)
			pos[t] = s0 + t, rows[t] = t, slots[t] = kv_cache_slot(bt[0], FWD_BS, s0 + t);
		struct batch b = {
			.n_tokens = 64, .tokens = a->tok + s0, .positions = pos, .n_logits = 1, .logits_rows = rows};
		b.attn = (struct attn_meta){.n_seqs = 1,
					    .n_tokens = 64,
					    .query_start = qs,
					    .seq_lens = sl,
					    .block_table = bt[0],
					    .max_blocks = 19,
					    .slots = slots,
					    .dcp_size = 1,
					    .local_seq_lens = sl};
		rc = model_forward(m, &b, &kv, attn_backend_by_name("REFERENCE_MLA"), out, &e);
	}
	EXPECTF(rc == 0, "%s", e.msg);
	/* then the two together, chunks of 37: the one from 0 and the one from 192 */
	int at[2] = {0, 192};
	while (!rc && (at[0] < 100 || at[1] < a->n)) {
		int32_t tok[80], pos[80], rows[80], qs[3] = {0}, sl[2], bts[2][19];
		int64_t slots[80];
		int ns = 0, n = 0;
		for (int q = 0; q < 2; q++) {
			int end = q ? a->n : 100, c = end - at[q] < 37 ? end - at[q] : 37;
			if (c <= 0)
				continue;
			for (int t = 0; t < c; t++, n++) {
				tok[n] = a->tok[at[q] + t];
				pos[n] = at[q] + t;
				rows[n] = n;
				slots[n] = kv_cache_slot(bt[1 + q], FWD_BS, at[q] + t);
			}
			memcpy(bts[ns], bt[1 + q], sizeof bts[ns]);
			sl[ns] = at[q] + c;
			qs[++ns] = n;
		}
		struct batch b = {.n_tokens = n, .tokens = tok, .positions = pos, .n_logits = n, .logits_rows = rows};
		b.attn = (struct attn_meta){.n_seqs = ns,
					    .n_tokens = n,
					    .query_start = qs,
					    .seq_lens = sl,
					    .block_table = &bts[0][0],
					    .max_blocks = 19,
					    .slots = slots,
					    .dcp_size = 1,
					    .local_seq_lens = sl};
		rc = model_forward(m, &b, &kv, attn_backend_by_name("REFERENCE_MLA"), out, &e);
		EXPECTF(rc == 0, "at %d / %d: %s", at[0], at[1], e.msg);
		for (int t = 0; t < n && !rc; t++)
			worst = fmax(worst, max_diff(out + (size_t)t * (size_t)V, a->gold + (size_t)pos[t] * (size_t)V,
						     (size_t)V));
		for (int q = 0, i = 0; q < 2; q++) {
			int end = q ? a->n : 100, c = end - at[q] < 37 ? end - at[q] : 37;
			if (c > 0)
				at[q] += c, i++;
		}
	}
	printf("# one from 0 and one from block 12's snapshot over the same first blocks, in the same steps: "
	       "max |diff| %.3g\n",
	       worst);
	EXPECTF(worst < TOL, "max |diff| %g", worst);
	free(out);
	kv_cache_fini(&kv);
	free_prompts(p, np);
	model_free(m);
}

/* The same with the MTP module: len300 through the main and MTP steps in chunks of 37, then a
 * second sequence sharing blocks 1..12 continues at 192 from block 12's snapshot (the MTP
 * module's window rows with it): its MTP logits rows 192..298 are the golden ones */
static void test_prefix_resume_mtp(void)
{
	struct err e = {{0}};
	struct model_options o = {.act_dtype = DT_F32,
				  .max_batch_tokens = 320,
				  .max_seqs = 4,
				  .max_model_len = 320,
				  .pool = pool(),
				  .load_mtp = true};
	struct model *m = NULL;
	EXPECTF(model_load(fixture_path("tiny-v4"), &o, &m, &e) == 0, "%s", e.msg);
	if (!m)
		return;
	int V = model_config(m)->vocab_size;
	struct prompt p[8];
	int np = load_prompts(p, 8, V), k300 = -1;
	for (int k = 0; k < np; k++)
		if (p[k].n == 300)
			k300 = k;
	CHECK(k300 >= 0);
	json_t *j = json_load_file(fixture_path("tiny-v4/golden/prompts.json"), 0, NULL);
	char rel[128];
	snprintf(rel, sizeof rel, "tiny-v4/golden/%s",
		 json_string_value(json_object_get(json_array_get(json_object_get(j, "prompts"), (size_t)k300),
						   "mtp_logits_file")));
	json_decref(j);
	int n = 300;
	float *gold = fwd_read_f32(fixture_path(rel), (size_t)(n - 1) * (size_t)V);
	float *out = malloc(sizeof(float) * (size_t)n * (size_t)V);
	CHECK(gold && out);
	struct fwd_seq a, b;
	CHECK(fwd_seq_init_layers(&a, model_config(m), model_kv_layers(m), 2 * n, DT_F32, &e) == 0);
	b = a;
	int32_t bt[64];
	for (int i = 0; i < a.max_blocks; i++)
		bt[i] = i < 12 ? a.bt[i] : a.bt[i] + 20; /* the first 12 shared, then blocks of its own */
	b.bt = bt;
	b.max_blocks = 19;
	a.max_blocks = 19;
	int rc = 0;
	for (int s = 0; s < n && rc >= 0; s += 37)
		rc = fwd_mtp_chunk(m, &a, attn_backend_by_name("REFERENCE_MLA"), p[k300].tok, n, s,
				   s + 37 <= n ? 37 : n - s, out + (size_t)s * (size_t)V, &e);
	EXPECTF(rc >= 0, "the first sequence: %s", e.msg);
	EXPECT(model_prefix_resumable(m, a.bt[11]));
	for (int s = 192; s < n && rc >= 0; s += 37)
		rc = fwd_mtp_chunk(m, &b, attn_backend_by_name("REFERENCE_MLA"), p[k300].tok, n, s,
				   s + 37 <= n ? 37 : n - s, out + (size_t)s * (size_t)V, &e);
	EXPECTF(rc >= 0, "the second sequence: %s", e.msg);
	double d = 0;
	for (int r = 192; r < n - 1 && rc >= 0; r++)
		d = fmax(d, max_diff(out + (size_t)r * (size_t)V, gold + (size_t)r * (size_t)V, (size_t)V));
	printf("# MTP logits of a second sequence from block 12's snapshot (rows 192..298): max |diff| %.3g\n", d);
	EXPECTF(rc >= 0 && d < TOL, "max |diff| %g", d);
	a.max_blocks = (2 * n + FWD_BS - 1) / FWD_BS;
	fwd_seq_fini(&a);
	free(gold), free(out);
	free_prompts(p, np);
	model_free(m);
}

/* what this version refuses, one line each */
static void test_refusals(void)
{
	struct err e = {{0}};
	const struct model_family *const *f;
	int nf = model_families(&f);
	EXPECT(nf >= 2 && f[0] == &model_family_v4);
	EXPECT(model_family_find(fixture_path("tiny-v4")) == &model_family_v4);
	EXPECT(model_family_find(fixture_path("tiny-v3")) == &model_family_deepseek);
	EXPECT(load_v4(fixture_path("tiny-v4"), DT_BF16, 16, &e) == NULL);
	EXPECTF(strstr(e.msg, "float32") && !strchr(e.msg, '\n'), "%s", e.msg);
}

/* The MTP module's logits (golden mtp_logits_file: row i = the module fed token i's final
 * streams and token i + 1) after one prefill, chunks of 5, token by token */
static void test_mtp(void)
{
	struct err e = {{0}};
	struct model_options o = {.act_dtype = DT_F32,
				  .max_batch_tokens = 320,
				  .max_seqs = 4,
				  .max_model_len = 320,
				  .pool = pool(),
				  .load_mtp = true};
	struct model *m = NULL;
	EXPECTF(model_load(fixture_path("tiny-v4"), &o, &m, &e) == 0, "%s", e.msg);
	if (!m)
		return;
	EXPECT(model_has_mtp(m));
	int V = model_config(m)->vocab_size;
	struct prompt p[8];
	int np = load_prompts(p, 8, V);
	json_t *j = json_load_file(fixture_path("tiny-v4/golden/prompts.json"), 0, NULL);
	static const int chunks[] = {0, 5, 1};
	for (int c = 0; c < 3; c++)
		for (int k = 0; k < np; k++) {
			int n = p[k].n;
			if (n < 2)
				continue;
			char rel[128];
			json_t *pr = json_array_get(json_object_get(j, "prompts"), (size_t)k);
			snprintf(rel, sizeof rel, "tiny-v4/golden/%s",
				 json_string_value(json_object_get(pr, "mtp_logits_file")));
			float *gold = fwd_read_f32(fixture_path(rel), (size_t)(n - 1) * (size_t)V);
			float *out = malloc(sizeof(float) * (size_t)n * (size_t)V);
			CHECK(gold && out);
			struct fwd_seq sq;
			CHECK(fwd_seq_init_layers(&sq, model_config(m), model_kv_layers(m), n, DT_F32, &e) == 0);
			int q = chunks[c] ? chunks[c] : n, rc = 0, done = 0;
			for (int s = 0; s < n && rc >= 0; s += q) {
				rc = fwd_mtp_chunk(m, &sq, attn_backend_by_name("REFERENCE_MLA"), p[k].tok, n, s,
						   s + q <= n ? q : n - s, out + (size_t)s * (size_t)V, &e);
				done += rc > 0 ? rc : 0;
			}
			rc = rc < 0 ? rc : 0;
			EXPECTF(rc == 0 && done == n - 1, "%s chunk %d: %s", p[k].name, chunks[c], e.msg);
			double d = 0;
			int bad = 0, first = -1, last = -1;
			for (int r = 0; r < n - 1 && !rc; r++) {
				double dr = max_diff(out + (size_t)r * (size_t)V, gold + (size_t)r * (size_t)V,
						     (size_t)V);
				d = fmax(d, dr);
				if (dr >= TOL) {
					first = bad++ ? first : r;
					last = r;
				}
			}
			printf("# MTP %s, %s: max |diff| %.3g over %d rows (%d rows >= 1e-3, the first %d)\n",
			       p[k].name,
			       chunks[c] ? (chunks[c] == 1 ? "token by token" : "chunks of 5") : "one prefill", d,
			       n - 1, bad, first);
			/* the oracle's own f32 run is 0.0179 off its f64 golden on len300's MTP rows (meta.json
			 * selfcheck f32_vs_f64_noaq: an fp8 code of a window kv at a rounding midpoint): such a
			 * flip moves the rows of one window (sliding_window 16), there within that */
			bool fragile = n >= 300 && last - first < 16 && d < 0.02;
			EXPECTF(!rc && (d < TOL || fragile), "MTP %s chunk %d: max |diff| %g", p[k].name, chunks[c],
				d);
			fwd_seq_fini(&sq);
			free(gold), free(out);
		}
	json_decref(j);
	free_prompts(p, np);
	model_free(m);
}

/* ---- bad checkpoints: a copy of tiny-v4 with one header entry changed in place ---- */
static char tmp[64];

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	CHECK(f);
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc(*n + 1);
	CHECK(fread(b, 1, *n, f) == *n);
	b[*n] = 0;
	fclose(f);
	return b;
}

/* every occurrence of `from` by `to` (the same length) in the first `limit` bytes */
static int patch(char *b, size_t limit, const char *from, const char *to)
{
	size_t lf = strlen(from);
	int k = 0;
	CHECK(lf == strlen(to));
	for (size_t i = 0; i + lf <= limit; i++)
		if (!memcmp(b + i, from, lf))
			memcpy(b + i, to, lf), k++;
	return k;
}

static const char *const files[] = {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
				    "model-00002-of-00002.safetensors"};

/* the copy with `from` -> `to` in the shards' headers (and the index when `index`); the error
 * of loading it */
static void bad_checkpoint(const char *from, const char *to, bool index, const char *want_name)
{
	snprintf(tmp, sizeof tmp, "/tmp/mlaserve-v4-XXXXXX");
	CHECK(mkdtemp(tmp));
	int hits = 0;
	for (int i = 0; i < 4; i++) {
		char src[512], dst[512];
		snprintf(src, sizeof src, "%s/%s", fixture_path("tiny-v4"), files[i]);
		snprintf(dst, sizeof dst, "%s/%s", tmp, files[i]);
		size_t n;
		char *b = slurp(src, &n);
		if (i >= 2) {
			uint64_t hl;
			memcpy(&hl, b, 8);
			hits += patch(b + 8, (size_t)hl, from, to);
		} else if (i == 1 && index) {
			patch(b, n, from, to);
		}
		FILE *f = fopen(dst, "wb");
		CHECK(f && fwrite(b, 1, n, f) == n);
		fclose(f);
		free(b);
	}
	EXPECTF(hits == 1, "%s: %d hits", from, hits);
	struct err e = {{0}};
	struct model *m = load_v4(tmp, DT_F32, 16, &e);
	EXPECT(m == NULL);
	model_free(m);
	printf("# %s\n", e.msg);
	EXPECTF(strstr(e.msg, want_name) && !strchr(e.msg, '\n'), "%s", e.msg);
	EXPECTF(strstr(e.msg, tmp), "no file or directory named: %s", e.msg);
	for (int i = 0; i < 4; i++) {
		char p[512];
		snprintf(p, sizeof p, "%s/%s", tmp, files[i]);
		unlink(p);
	}
	rmdir(tmp);
}

static void test_bad_checkpoints(void)
{
	/* missing: renamed in the shard and the index */
	bad_checkpoint("\"layers.2.attn.wkv.weight\"", "\"layers.2.attn.wkX.weight\"", true,
		       "layers.2.attn.wkv.weight");
	/* misshapen: [96, 256] -> [256, 96] (the same bytes) */
	bad_checkpoint("\"layers.2.attn.wkv.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[96,256]",
		       "\"layers.2.attn.wkv.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[256,96]", false,
		       "layers.2.attn.wkv.weight");
	/* mistyped: an fp8 weight as e8m0 bytes, an expert's e8m0 scales as fp8 */
	bad_checkpoint("\"layers.2.attn.wkv.weight\":{\"dtype\":\"F8_E4M3\"",
		       "\"layers.2.attn.wkv.weight\":{\"dtype\":\"F8_E8M0\"", false, "layers.2.attn.wkv.weight");
	bad_checkpoint("\"layers.1.ffn.experts.3.w2.scale\":{\"dtype\":\"F8_E8M0\"",
		       "\"layers.1.ffn.experts.3.w2.scale\":{\"dtype\":\"F8_E4M3\"", false,
		       "layers.1.ffn.experts.3.w2.scale");
}

static void cleanup(void) { pool_free(the_pool); }

TESTS(T(test_golden), T(test_two_sequences), T(test_paged_layouts), T(test_prefix_resume), T(test_prefix_same_step),
      T(test_prefix_resume_mtp), T(test_refusals), T(test_mtp), T(test_bad_checkpoints), T(cleanup))
