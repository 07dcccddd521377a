/* The model families and the DeepSeek tensor table (model/family.h, model/tensors.h): the
 * registry finds the family of each fixture; the table is the whole list of a layer's weights
 * (what a load fills is exactly what the table's rows name), its rows' shapes are the
 * checkpoint's, and its TP parts tile every split dimension on any number of ranks. */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fwd_util.h"
#include "harness.h"
#include "model/family.h"
#include "model/model.h"
#include "model/tensors_deepseek.h"
#include "ops/pool.h"

static const char *const fixtures[] = {"tiny-v2", "tiny-v3", "tiny-r1", "tiny-v3-fp8", "tiny-v32", "tiny-v3-mtp"};
#define N_FIX (int)(sizeof fixtures / sizeof fixtures[0])

static struct pool *pool;

/* DIR's checkpoint (MTP module, dummy weights, --quantize-lm-head as asked); NULL, failed */
static struct model *load_dir(const char *dir, bool mtp, bool dummy, bool head)
{
	struct err e = {0};
	if (!pool && pool_new(2, &pool, &e))
		return NULL;
	struct model_options o = {.act_dtype = DT_F32,
				  .max_batch_tokens = 16,
				  .max_seqs = 4,
				  .max_model_len = 64,
				  .pool = pool,
				  .load_mtp = mtp,
				  .load_dummy = dummy,
				  .quantize_lm_head = head};
	struct model *m = NULL;
	if (model_load(dir, &o, &m, &e))
		harness_fail(__FILE__, __LINE__, "%s: %s", dir, e.msg);
	return m;
}

static struct model *load(const char *name, bool mtp, bool dummy)
{
	return load_dir(fixture_path(name), mtp, dummy, false);
}

static void test_registry(void)
{
	const struct model_family *const *f;
	int n = model_families(&f);
	EXPECT(n >= 1);
	EXPECT(f[n - 1] == &model_family_deepseek); /* the last: it takes what no other family does */
	for (int i = 0; i < n; i++)
		EXPECTF(f[i]->name && f[i]->matches && f[i]->configure && f[i]->load && f[i]->each_weight &&
				f[i]->scratch_bytes && f[i]->forward && f[i]->mtp_forward &&
				f[i]->kv_bytes_per_block && f[i]->kv_cache_init && f[i]->default_backend &&
				f[i]->check_backend && f[i]->tensors,
			"family %s lacks an entry point", f[i]->name);
	for (int k = 0; k < N_FIX; k++)
		EXPECTF(model_family_find(fixture_path(fixtures[k])) == &model_family_deepseek, "%s", fixtures[k]);
}

static size_t base_size(enum tensor_base b)
{
	return b == TB_MODEL ? sizeof(struct model)
	       : b == TB_MTP ? sizeof(struct mtp_weights)
			     : sizeof(struct layer_weights);
}

/* Every row's pattern names a tensor of its base (a layer's: %d the layer, then the array
 * index), its field fits its struct, and only matrices are split or arrays */
static void test_rows_well_formed(void)
{
	const struct tensor_table *t = &tensors_deepseek;
	EXPECT(t->n > 0 && !strcmp(t->family, "deepseek"));
	for (int k = 0; k < t->n; k++) {
		const struct tensor_spec *s = &t->rows[k];
		size_t sz = s->kind == TK_VEC || s->count ? sizeof(void *) : sizeof(struct wmat);
		EXPECTF(s->off + sz <= base_size(s->base), "row %d: %s: offset", k, s->name);
		EXPECTF((s->split == SPLIT_NONE) == (s->tp_over == 0), "row %d: %s: split without tp_over", k,
			s->name);
		if (s->kind == TK_DERIVED) {
			EXPECTF(!s->name && s->split == SPLIT_NONE, "row %d: a derived row is built, not read", k);
			continue;
		}
		EXPECTF(s->kind == TK_MAT || (s->split == SPLIT_NONE && !s->count), "row %d: %s", k, s->name);
		if (s->base == TB_MODEL) {
			EXPECTF(s->name && !strchr(s->name, '%') && !s->count, "row %d: %s", k, s->name);
			continue;
		}
		EXPECTF(s->name && !strncmp(s->name, "model.layers.%d.", 16), "row %d: %s", k, s->name);
		EXPECTF((strstr(s->name, "%d.") != strrchr(s->name, '%')) == (s->count != 0), "row %d: %s", k,
			s->name);
	}
}

/* The rows present on layer i (TENSORS_MODEL: the model's own) are loaded with their shapes
 * (this rank's whole: no TP here); a copy of the layer built from them alone (and the layer's
 * flags) equals the layer byte for byte, so that no weight is loaded outside the table. */
static void check_layer(struct model *m, const char *name, int i)
{
	const struct tensor_table *t = &tensors_deepseek;
	struct layer_weights copy;
	struct mtp_weights mcopy;
	memset(&copy, 0, sizeof copy);
	memset(&mcopy, 0, sizeof mcopy);
	int n_head = 0;
	for (int k = 0; k < t->n; k++) {
		const struct tensor_spec *s = &t->rows[k];
		if (!tensors_on(m, s, i))
			continue;
		char *base = s->base == TB_MODEL ? (char *)m
			     : s->base == TB_MTP ? (char *)&m->mtp
						 : (char *)&m->layers[i];
		size_t sz = s->kind == TK_VEC || s->count ? sizeof(void *) : sizeof(struct wmat);
		if (s->base != TB_MODEL)
			memcpy((s->base == TB_MTP ? (char *)&mcopy : (char *)&copy) + s->off, base + s->off, sz);
		n_head += s->base == TB_MODEL && s->off == offsetof(struct model, lm_head);
		if (s->kind == TK_VEC || s->count) {
			EXPECTF(*(void **)(base + s->off), "%s layer %d: row %d (%s) not loaded", name, i, k, s->name);
			continue;
		}
		const struct wmat *w = (const struct wmat *)(base + s->off);
		EXPECTF((w->data || w->packed) && w->rows == t->dim(m, s->rows) && w->cols == t->dim(m, s->cols),
			"%s layer %d: %s [%d, %d]", name, i, s->name, w->rows, w->cols);
	}
	if (i == TENSORS_MODEL) {
		EXPECTF(n_head == 1, "%s: %d rows give the lm_head", name, n_head);
		return;
	}
	copy.moe = m->layers[i].moe;
	copy.has_shared = m->layers[i].has_shared;
	EXPECTF(!memcmp(&copy, &m->layers[i], sizeof copy), "%s: layer %d holds a weight no row names", name, i);
	if (i == m->cfg.num_hidden_layers) { /* the MTP module: its embedding and head are not rows */
		mcopy.embed = m->mtp.embed;
		mcopy.head = m->mtp.head;
		mcopy.own_embed = m->mtp.own_embed;
		mcopy.own_head = m->mtp.own_head;
		EXPECTF(!memcmp(&mcopy, &m->mtp, sizeof mcopy), "%s: the MTP module holds a weight no row names",
			name);
	}
}

static void check_covered(struct model *m, const char *name)
{
	for (int i = TENSORS_MODEL; i < m->n_layers; i++)
		check_layer(m, name, i);
}

static void test_table_covers_layers(void)
{
	for (int k = 0; k < N_FIX; k++) {
		bool mtp = strstr(fixtures[k], "mtp") != NULL;
		struct model *m = load(fixtures[k], mtp, false);
		if (!m)
			continue;
		EXPECT(m->fam == &model_family_deepseek);
		EXPECT(m->n_layers == m->cfg.num_hidden_layers + (mtp ? 1 : 0));
		check_covered(m, fixtures[k]);
		model_free(m);
	}
	/* dummy weights, and weights quantized at load (then packed under bf16 activations), take the
	 * same rows */
	struct {
		const char *name;
		bool fp8, int8, head, dummy;
		enum dtype act;
	} q[] = {{"tiny-v32", false, false, false, true, DT_F32},
		 {"tiny-v3", true, false, true, true, DT_BF16},
		 {"tiny-v32", false, true, true, false, DT_BF16},
		 {"tiny-r1", false, true, false, false, DT_F32}};
	for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
		struct err e = {0};
		struct model *m = fwd_load_quant(q[k].name, pool, q[k].fp8, q[k].int8, q[k].head, q[k].dummy, q[k].act,
						 &e);
		EXPECTF(m, "%s: %s", q[k].name, e.msg);
		if (m)
			check_covered(m, q[k].name);
		model_free(m);
	}
}

/* Tied embeddings (no fixture has them: tiny-v3 with tie_word_embeddings true): the lm_head is
 * the embedding's bytes, or under --quantize-lm-head an fp8 copy of them; dummy weights too */
static void test_tied_head(void)
{
	char dir[] = "/tmp/mlaserve-tied-XXXXXX", path[4096];
	EXPECT(mkdtemp(dir) != NULL);
	json_error_t je;
	json_t *cfg = json_load_file(fixture_path("tiny-v3/config.json"), 0, &je);
	EXPECT(cfg != NULL);
	if (!cfg)
		return;
	json_object_set_new(cfg, "tie_word_embeddings", json_true());
	snprintf(path, sizeof path, "%s/config.json", dir);
	EXPECT(json_dump_file(cfg, path, 0) == 0);
	json_decref(cfg);
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	char src[4096];
	EXPECT(realpath(fixture_path("tiny-v3/model.safetensors"), src) != NULL);
	EXPECT(symlink(src, path) == 0);
	for (int k = 0; k < 4; k++) {
		bool head = k & 1, dummy = k & 2;
		struct model *m = load_dir(dir, false, dummy, head);
		if (!m)
			continue;
		EXPECT(m->lm_head.rows == m->cfg.vocab_size && m->lm_head.cols == m->cfg.hidden_size);
		if (head)
			EXPECTF(m->lm_head.dtype == DT_F8_E4M3 && m->embed.dtype != DT_F8_E4M3, "dummy %d", dummy);
		else
			EXPECTF(m->lm_head.data == m->embed.data, "dummy %d: the lm_head is not the embedding", dummy);
		model_free(m);
	}
	unlink(path);
	snprintf(path, sizeof path, "%s/config.json", dir);
	unlink(path);
	rmdir(dir);
}

/* The parts of every split row over T ranks tile [0, total) in rank order */
static void test_tp_parts_tile(void)
{
	for (int k = 0; k < N_FIX; k++) {
		struct model m;
		memset(&m, 0, sizeof m);
		struct err e = {0};
		if (config_load(fixture_path(fixtures[k]), &m.cfg, &e)) {
			harness_fail(__FILE__, __LINE__, "%s", e.msg);
			continue;
		}
		const struct tensor_table *t = &tensors_deepseek;
		for (int T = 1; T <= 4; T++) {
			if (m.cfg.num_attention_heads % T)
				continue;
			m.tp_size = T;
			m.n_heads_local = m.cfg.num_attention_heads / T;
			for (int r = 0; r < t->n; r++) {
				const struct tensor_spec *s = &t->rows[r];
				if (s->kind != TK_MAT)
					continue;
				int next = 0, total = 0;
				for (int rank = 0; rank < T; rank++) {
					int lo, n;
					m.tp_rank = rank;
					tensors_tp_part(&m, t, s, &lo, &n, &total);
					bool whole = s->split == SPLIT_NONE || T == 1;
					EXPECTF(whole ? lo == 0 && n == total : lo == next && n >= 0,
						"%s T=%d rank %d: %s [%d, +%d)", fixtures[k], T, rank, s->name, lo, n);
					next = whole ? total : lo + n;
				}
				EXPECTF(next == total, "%s T=%d: %s: parts end at %d of %d", fixtures[k], T, s->name,
					next, total);
			}
		}
	}
}

TESTS(T(test_registry), T(test_rows_well_formed), T(test_table_covers_layers), T(test_tied_head),
      T(test_tp_parts_tile))
