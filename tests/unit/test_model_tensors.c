/* The model families and the DeepSeek tensor table (model/family.h, model/tensors.h): the
 * registry finds the family of each fixture; the table is the whole list of a layer's weights
 * (what a load fills is exactly what the table's rows name), its rows' shapes are the
 * checkpoint's, and its TP parts tile every split dimension on any number of ranks. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fwd_util.h"
#include "harness.h"
#include "model/family.h"
#include "model/model.h"
#include "model/tensors_deepseek.h"
#include "ops/pool.h"

static const char *const fixtures[] = {"tiny-v2", "tiny-v3", "tiny-r1", "tiny-v3-fp8", "tiny-v32", "tiny-v3-mtp"};
#define N_FIX (int)(sizeof fixtures / sizeof fixtures[0])

static struct pool *pool;

static struct model *load(const char *name, bool mtp, bool dummy)
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
				  .load_dummy = dummy};
	struct model *m = NULL;
	if (model_load(fixture_path(name), &o, &m, &e))
		harness_fail(__FILE__, __LINE__, "%s: %s", name, e.msg);
	return m;
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

/* Every row's pattern names a layer tensor, and a row's symbols have values on the fixtures */
static void test_rows_well_formed(void)
{
	const struct tensor_table *t = &tensors_deepseek;
	EXPECT(t->n > 0 && !strcmp(t->family, "deepseek"));
	for (int k = 0; k < t->n; k++) {
		const struct tensor_spec *s = &t->rows[k];
		if (s->kind == TK_DERIVED) {
			EXPECTF(!s->name && s->count, "row %d: a derived row is an unnamed array", k);
			continue;
		}
		EXPECTF(s->name && !strncmp(s->name, "model.layers.%d.", 16), "row %d: %s", k, s->name);
		EXPECTF((strstr(s->name, "%d.") != strrchr(s->name, '%')) == (s->count != 0), "row %d: %s", k,
			s->name);
		EXPECTF(s->kind == TK_MAT || (s->split == SPLIT_NONE && !s->count), "row %d: %s", k, s->name);
		EXPECTF((s->split == SPLIT_NONE) == (s->tp_over == 0), "row %d: %s: split without tp_over", k,
			s->name);
		EXPECTF(s->off + (s->kind == TK_VEC || s->count ? sizeof(void *) : sizeof(struct wmat)) <=
				(s->base == TB_MTP ? sizeof(struct mtp_weights) : sizeof(struct layer_weights)),
			"row %d: %s: offset", k, s->name);
	}
}

/* A load fills exactly the fields that the rows present on the layer name: the copy of a loaded
 * layer made from the table's rows alone (plus the layer's flags) equals it byte for byte. */
static void check_covered(struct model *m, const char *name)
{
	const struct tensor_table *t = &tensors_deepseek;
	for (int i = 0; i < m->n_layers; i++) {
		struct layer_weights copy;
		struct mtp_weights mcopy;
		memset(&copy, 0, sizeof copy);
		memset(&mcopy, 0, sizeof mcopy);
		copy.moe = m->layers[i].moe;
		copy.has_shared = m->layers[i].has_shared;
		for (int k = 0; k < t->n; k++) {
			const struct tensor_spec *s = &t->rows[k];
			if (!tensors_on(m, s, i))
				continue;
			size_t sz = s->kind == TK_VEC || s->count ? sizeof(void *) : sizeof(struct wmat);
			if (s->base == TB_MTP)
				memcpy((char *)&mcopy + s->off, (const char *)&m->mtp + s->off, sz);
			else
				memcpy((char *)&copy + s->off, (const char *)&m->layers[i] + s->off, sz);
			const void *p = (const char *)(s->base == TB_MTP ? (void *)&m->mtp : (void *)&m->layers[i]) +
					s->off;
			if (s->kind == TK_VEC || s->count) {
				EXPECTF(*(void *const *)p, "%s layer %d: row %d (%s) not loaded", name, i, k, s->name);
				continue;
			}
			const struct wmat *w = p;
			EXPECTF((w->data || w->packed) && w->rows == t->dim(m, s->rows) &&
					w->cols == t->dim(m, s->cols),
				"%s layer %d: %s [%d, %d]", name, i, s->name, w->rows, w->cols);
		}
		EXPECTF(!memcmp(&copy, &m->layers[i], sizeof copy), "%s: layer %d holds a weight no row names", name,
			i);
		if (i == m->cfg.num_hidden_layers) { /* the MTP module: its embedding and head are not rows */
			mcopy.embed = m->mtp.embed;
			mcopy.head = m->mtp.head;
			mcopy.own_embed = m->mtp.own_embed;
			mcopy.own_head = m->mtp.own_head;
			EXPECTF(!memcmp(&mcopy, &m->mtp, sizeof mcopy),
				"%s: the MTP module holds a weight no row names", name);
		}
	}
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

TESTS(T(test_registry), T(test_rows_well_formed), T(test_table_covers_layers), T(test_tp_parts_tile))
