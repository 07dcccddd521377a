/* The model object behind model.h: its memory (the buffers it owns, freed together), its
 * accessors, and the calls that its family answers (family.h: the forward, the KV cache, the
 * attention backends). Loading is load.c's; nothing here calls into the rest of model/. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "base/bigmem.h"
#include "model/family.h"
#include "model/model_internal.h"


void *model_own_in(struct owned **o, int *n, int *cap, size_t bytes)
{
	if (*n == *cap) {
		int c = *cap ? 2 * *cap : 256;
		struct owned *g = realloc(*o, sizeof *g * (size_t)c);
		if (!g)
			return NULL;
		*o = g;
		*cap = c;
	}
	void *p = bigmem_alloc(bytes);
	if (p)
		(*o)[(*n)++] = (struct owned){p, bytes};
	return p;
}

/* small buffers from the model's slab (huge pages: bigmem.h), large ones mapped each */
void *model_own(struct model *m, size_t bytes)
{
	return bytes < BIGMEM_MIN ? bigmem_slab_alloc(&m->small, bytes)
				  : model_own_in(&m->owned, &m->n_owned, &m->cap_owned, bytes);
}

void model_free(struct model *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n_owned; i++)
		bigmem_free(m->owned[i].p, m->owned[i].bytes);
	for (int i = 0; i < m->n_qbufs; i++)
		if (m->qbufs[i].bytes)
			bigmem_free(m->qbufs[i].p, m->qbufs[i].bytes);
	free(m->owned);
	bigmem_slab_free(&m->small);
	free(m->qbufs);
	free(m->layers);
	free(m->vocab_cols);
	arena_fini(&m->arena);
	st_close(m->st);
	free(m);
}

/* the family's configure on rank 0 of a model that loads nothing: its checks and m->cfg */
int model_probe_config(const char *dir, int tp_size, struct model_probe *p, struct err *e)
{
	memset(p, 0, sizeof *p);
	struct model *m = calloc(1, sizeof *m);
	if (!m)
		return err_set(e, "model: out of memory");
	const struct model_family *f = model_family_find(dir);
	m->fam = f;
	m->tp_size = tp_size > 1 ? tp_size : 1;
	int rc = f->configure(m, dir, e);
	if (!rc)
		*p = (struct model_probe){.family = f->name,
					  .cfg = m->cfg,
					  .no_prefix_caching = f->no_prefix_caching,
					  .no_parallel = f->no_parallel,
					  .no_dcp = f->no_dcp,
					  .no_spec = f->no_spec,
					  .auto_float32 = f->auto_float32,
					  .attn_kind = attn_backend_kind(f->default_backend(m))};
	model_free(m);
	return rc ? -1 : 0;
}

const struct model_config *model_config(const struct model *m) { return &m->cfg; }
size_t model_weight_bytes(const struct model *m) { return m->weight_bytes; }
enum dtype model_act_dtype(const struct model *m) { return m->opt.act_dtype; }
size_t model_step_weight_bytes(const struct model *m) { return m->step_weight_bytes; }
double model_step_index_seconds(const struct model *m) { return m->step_index_s; }

int model_kv_layers(const struct model *m) { return m->n_layers; }
bool model_has_mtp(const struct model *m) { return m->n_layers > m->cfg.num_hidden_layers; }

void model_set_prefill_chunk(struct model *m, int ws_rows)
{
	int w = ws_rows < 1 ? 1 : ws_rows;
	m->ws_rows = w < m->ws_rows ? w : m->ws_rows; /* never above what the arena was sized for */
}

int model_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *backend,
		  float *logits, struct err *e)
{
	return m->fam->forward(m, b, kv, backend, logits, e);
}

int model_mtp_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *backend,
		      float *logits, struct err *e)
{
	return m->fam->mtp_forward(m, b, kv, backend, logits, e);
}

size_t model_kv_bytes_per_block(const struct model *m, int block_size, enum dtype kv_dtype)
{
	return m->fam->kv_bytes_per_block(m, block_size, kv_dtype);
}

int model_kv_cache_init(const struct model *m, struct kv_cache *kv, int n_blocks, int block_size, enum dtype kv_dtype,
			struct err *e)
{
	return m->fam->kv_cache_init(m, kv, n_blocks, block_size, kv_dtype, e);
}

bool model_prefix_resumable(const struct model *m, int32_t block)
{
	return !m->fam->prefix_resumable || m->fam->prefix_resumable(m, block);
}

const struct attn_backend *model_default_backend(const struct model *m) { return m->fam->default_backend(m); }

int model_check_backend(const struct model *m, const struct attn_backend *b, struct err *e)
{
	return m->fam->check_backend(m, b, e);
}
