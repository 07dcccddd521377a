/* Test helpers for driving model_forward over one sequence (header-only, static). */
#ifndef MLA_TESTS_FWD_UTIL_H
#define MLA_TESTS_FWD_UTIL_H

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/backends/backends.h"
#include "harness.h"
#include "model/model.h"
#include "ops/wformat.h"

#define FWD_BS 16

struct fwd_seq {
	struct kv_cache kv;
	int32_t *bt; /* [max_blocks] */
	int max_blocks;
};

/* n_layers: the cache's latent layers (model_kv_layers: with an MTP module, one more) */
static inline int fwd_seq_init_layers(struct fwd_seq *s, const struct model_config *c, int n_layers, int max_len,
				      enum dtype kvd, struct err *e)
{
	memset(s, 0, sizeof *s);
	s->max_blocks = (max_len + FWD_BS - 1) / FWD_BS;
	s->bt = malloc(sizeof(int32_t) * (size_t)s->max_blocks);
	/* scatter the blocks so that the paged lookup is really exercised */
	for (int i = 0; i < s->max_blocks; i++)
		s->bt[i] = s->max_blocks - i;
	return kv_cache_init_indexed(&s->kv, n_layers, s->max_blocks + 1, FWD_BS, c->kv_lora_rank, c->qk_rope_head_dim,
				     kvd, config_is_sparse(c) ? c->index_head_dim : 0, e);
}

static inline int fwd_seq_init(struct fwd_seq *s, const struct model_config *c, int max_len, enum dtype kvd,
			       struct err *e)
{
	return fwd_seq_init_layers(s, c, c->num_hidden_layers, max_len, kvd, e);
}

static inline void fwd_seq_fini(struct fwd_seq *s)
{
	kv_cache_fini(&s->kv);
	free(s->bt);
}

/* Runs tokens[start, start+q) of the sequence (positions start..), either as a decode
 * (backend path) or as a prefill; logits of every row go to out[q, vocab]. */
static inline int fwd_step(struct model *m, struct fwd_seq *s, const struct attn_backend *be, const int32_t *tokens,
			   int start, int q, int decode, float *out, struct err *e)
{
	int32_t *pos = malloc(sizeof(int32_t) * (size_t)q), *rows = malloc(sizeof(int32_t) * (size_t)q);
	int64_t *slots = malloc(sizeof(int64_t) * (size_t)q);
	for (int i = 0; i < q; i++) {
		pos[i] = start + i;
		rows[i] = i;
		slots[i] = (int64_t)s->bt[(start + i) / FWD_BS] * FWD_BS + (start + i) % FWD_BS;
	}
	int32_t qs[2] = {0, q}, sl[1] = {start + q};
	struct batch b = {.n_tokens = q,
			  .tokens = tokens + start,
			  .positions = pos,
			  .n_logits = out ? q : 0,
			  .logits_rows = rows};
	b.attn = (struct attn_meta){.n_seqs = 1,
				    .n_tokens = q,
				    .query_start = qs,
				    .seq_lens = sl,
				    .block_table = s->bt,
				    .max_blocks = s->max_blocks,
				    .slots = slots,
				    .n_decodes = decode ? 1 : 0,
				    .n_decode_tokens = decode ? q : 0,
				    .dcp_size = 1,
				    .local_seq_lens = sl};
	int rc = model_forward(m, &b, &s->kv, be, out, e);
	free(pos);
	free(rows);
	free(slots);
	return rc;
}

/* A fixture loaded for the quantization tests: fp8 / int8 (--quantization), head
 * (--quantize-lm-head), dummy weights, activations act; NULL with e set on failure */
static inline struct model *fwd_load_quant(const char *fixture, struct pool *pool, bool fp8, bool int8, bool head,
					   bool dummy, enum dtype act, struct err *e)
{
	const struct wformat *q = int8 ? wformat_by_name("int8") : NULL; /* --quantization int8 wins */
	if (!q && fp8)
		q = wformat_by_name("fp8");
	struct model_options o = {.act_dtype = act,
				  .max_batch_tokens = 64,
				  .max_seqs = 4,
				  .max_model_len = 64,
				  .pool = pool,
				  .quant = q,
				  .quantize_lm_head = head,
				  .load_dummy = dummy,
				  .dummy_seed = 3};
	struct model *m = NULL;
	return model_load(fixture_path(fixture), &o, &m, e) ? NULL : m;
}

/* The runs of a quantized model's golden tests: the whole prompt (prefill path), chunks of 7
 * (FLASHMLA's multi-token decode, FLASH_ATTN_MLA's), one token at a time (every backend's decode) */
struct fwd_golden_run {
	const char *backend;
	int chunk, decode;
};
static inline const struct fwd_golden_run *fwd_golden_runs(int *n)
{
	static const struct fwd_golden_run runs[] = {{"REFERENCE_MLA", 0, 0}, {"FLASHMLA", 7, 1},
						     {"FLASH_ATTN_MLA", 7, 1}, {"REFERENCE_MLA", 1, 1},
						     {"FLASHMLA", 1, 1},      {"FLASH_ATTN_MLA", 1, 1}};
	*n = (int)(sizeof runs / sizeof *runs);
	return runs;
}

/* A fresh float32 sequence of tokens[0, n) through backend `backend` in chunks of `chunk` tokens
 * (0: the whole prompt at once) as decodes or prefills: logits of every position in out[n, vocab] */
static inline int fwd_run_chunks(struct model *m, const char *backend, const int32_t *tokens, int n, int chunk,
				 int decode, float *out, struct err *e)
{
	struct fwd_seq s;
	int vocab = model_config(m)->vocab_size, q = chunk ? chunk : n;
	int rc = fwd_seq_init(&s, model_config(m), n, DT_F32, e);
	for (int st = 0; st < n && !rc; st += q)
		rc = fwd_step(m, &s, attn_backend_by_name(backend), tokens, st, st + q <= n ? q : n - st, decode,
			      out + (size_t)st * (size_t)vocab, e);
	fwd_seq_fini(&s);
	return rc;
}

/* n floats from a raw little-endian file, or NULL */
static inline float *fwd_read_f32(const char *path, size_t n)
{
	FILE *f = fopen(path, "rb");
	float *b = f ? malloc(n * sizeof(float)) : NULL;
	if (b && fread(b, sizeof(float), n, f) != n) {
		free(b);
		b = NULL;
	}
	if (f)
		fclose(f);
	return b;
}

static inline float fwd_max_abs_diff(const float *a, const float *b, size_t n)
{
	float d = 0;
	for (size_t i = 0; i < n; i++) {
		float x = fabsf(a[i] - b[i]);
		if (isnan(x))
			return INFINITY;
		if (x > d)
			d = x;
	}
	return d;
}

static inline int fwd_argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

/* The tokens of prompt NAME in FIXTURE/golden/prompts.json (malloc'd; *n its length), or
 * NULL */
static inline int32_t *fwd_prompt(const char *fixture, const char *name, int *n)
{
	char rel[256];
	snprintf(rel, sizeof rel, "%s/golden/prompts.json", fixture);
	json_t *root = json_load_file(fixture_path(rel), 0, NULL), *p;
	size_t i;
	int32_t *t = NULL;
	*n = 0;
	json_array_foreach(json_object_get(root, "prompts"), i, p)
	{
		if (strcmp(json_string_value(json_object_get(p, "name")), name))
			continue;
		json_t *a = json_object_get(p, "tokens");
		*n = (int)json_array_size(a);
		t = malloc(sizeof(int32_t) * (size_t)*n);
		for (int k = 0; t && k < *n; k++)
			t[k] = (int32_t)json_integer_value(json_array_get(a, (size_t)k));
	}
	json_decref(root);
	return t;
}

/* Prompt NAME of FIXTURE (*tok, *n tokens) and its golden logits FIXTURE/golden/NAME.SUFFIX.f32
 * [n, vocab] (returned; NULL when either is missing, the test then fails) */
static inline float *fwd_golden(const char *fixture, const char *name, const char *suffix, int vocab, int32_t **tok,
				int *n)
{
	char rel[256];
	*n = 0;
	*tok = fwd_prompt(fixture, name, n);
	snprintf(rel, sizeof rel, "%s/golden/%s.%s.f32", fixture, name, suffix);
	float *gold = *tok ? fwd_read_f32(fixture_path(rel), (size_t)*n * (size_t)vocab) : NULL;
	EXPECTF(*tok && gold, "%s: %s", fixture, rel);
	return gold;
}

/* m on every golden run (backend x chunking) of tok [n] against gold [n, vocab]: at most
 * `allowed` positions past 1e-3 of the reference (a NaN counts as past) */
static inline void fwd_check_golden_runs(struct model *m, const char *what, const int32_t *tok, int n,
					 const float *gold, int vocab, int allowed)
{
	struct err e;
	float *out = malloc(sizeof(float) * (size_t)n * (size_t)vocab);
	int n_runs;
	const struct fwd_golden_run *runs = fwd_golden_runs(&n_runs);
	for (int r = 0; out && r < n_runs; r++) {
		int q = runs[r].chunk ? runs[r].chunk : n;
		EXPECTF(fwd_run_chunks(m, runs[r].backend, tok, n, runs[r].chunk, runs[r].decode, out, &e) == 0, "%s: %s",
			runs[r].backend, e.msg);
		int off = 0;
		for (int t = 0; t < n; t++)
			off += fwd_max_abs_diff(out + (size_t)t * vocab, gold + (size_t)t * vocab, (size_t)vocab) > 1e-3f;
		EXPECTF(off <= allowed, "%s, %s chunks of %d: %d of %d positions past 1e-3 of the reference (max %g)",
			what, runs[r].backend, q, off, n, fwd_max_abs_diff(out, gold, (size_t)n * (size_t)vocab));
	}
	EXPECT(out != NULL);
	free(out);
}

/* tokens [start, start + q) through the model, then the MTP module over the positions of
 * the chunk whose next token is known; mtp [k, V] gets its logits. Returns k, or -1. */
static inline int fwd_mtp_chunk(struct model *m, struct fwd_seq *s, const struct attn_backend *be, const int32_t *tok,
				int n, int start, int q, float *mtp, struct err *e)
{
	int32_t *buf = malloc(sizeof(int32_t) * 4 * (size_t)q), qs[2] = {0, q}, sl[1] = {start + q};
	int32_t *pos = buf, *rows = buf + q, *next = buf + 2 * q, *hid = buf + 3 * q;
	int64_t *slots = malloc(sizeof(int64_t) * (size_t)q);
	int rc = -1;
	for (int i = 0; i < q; i++) {
		pos[i] = start + i;
		rows[i] = i;
		hid[i] = i;
		next[i] = start + i + 1 < n ? tok[start + i + 1] : 0;
		slots[i] = (int64_t)s->bt[(start + i) / FWD_BS] * FWD_BS + (start + i) % FWD_BS;
	}
	bool decode = be && q == 1;
	struct batch b = {.n_tokens = q, .tokens = tok + start, .positions = pos};
	b.attn = (struct attn_meta){.n_seqs = 1,
				    .n_tokens = q,
				    .query_start = qs,
				    .seq_lens = sl,
				    .block_table = s->bt,
				    .max_blocks = s->max_blocks,
				    .slots = slots,
				    .n_decodes = decode,
				    .n_decode_tokens = decode ? q : 0,
				    .dcp_size = 1,
				    .local_seq_lens = sl};
	if (model_forward(m, &b, &s->kv, be, NULL, e))
		goto out;
	int k = start + q < n ? q : n - 1 - start; /* the last position has no next token */
	rc = 0;
	if (k <= 0)
		goto out;
	qs[1] = k;
	sl[0] = start + k;
	decode = be && k == 1;
	b = (struct batch){.n_tokens = k,
			   .tokens = next,
			   .positions = pos,
			   .n_logits = k,
			   .logits_rows = rows,
			   .hidden_rows = hid};
	b.attn = (struct attn_meta){.n_seqs = 1,
				    .n_tokens = k,
				    .query_start = qs,
				    .seq_lens = sl,
				    .block_table = s->bt,
				    .max_blocks = s->max_blocks,
				    .slots = slots,
				    .n_decodes = decode,
				    .n_decode_tokens = decode ? k : 0,
				    .dcp_size = 1,
				    .local_seq_lens = sl};
	rc = model_mtp_forward(m, &b, &s->kv, be, mtp, e) ? -1 : k;
out:
	free(buf);
	free(slots);
	return rc;
}

#endif
