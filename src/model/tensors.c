/* The walkers of a family's tensor table (tensors.h): loading with its checks, the TP parts,
 * and every GEMM weight for packing. */
#include "model/tensors.h"

#include <stdio.h>

/* the struct row s's offset is into, on the layer */
static char *base_of(struct model *m, const struct tensor_spec *s, int layer)
{
	return s->base == TB_MODEL ? (char *)m : s->base == TB_MTP ? (char *)&m->mtp : (char *)&m->layers[layer];
}

bool tensors_on(const struct model *m, const struct tensor_spec *s, int layer)
{
	bool here = s->base == TB_MODEL ? layer == TENSORS_MODEL
		    : s->base == TB_MTP ? layer >= m->cfg.num_hidden_layers
					: layer >= 0;
	return here && (!s->on || s->on(m, layer));
}

static int dim1(const struct model *m, const struct tensor_table *t, int sym) { return sym ? t->dim(m, sym) : 1; }

void tensors_tp_part(const struct model *m, const struct tensor_table *t, const struct tensor_spec *s, int *lo, int *n,
		     int *total)
{
	*total = t->dim(m, s->split == SPLIT_COLS ? s->cols : s->rows);
	*lo = 0;
	*n = *total;
	if (s->split == SPLIT_NONE || m->tp_size <= 1)
		return;
	int per = dim1(m, t, s->tp_per);
	model_tp_part(m, t->dim(m, s->tp_over), lo, n);
	*lo *= per;
	*n *= per;
}

/* One matrix of row s into *w (name formatted): this rank's part, or the whole matrix viewed */
static int load_mat(struct model *m, const struct tensor_table *t, const struct tensor_spec *s, int layer,
		    const char *name, struct wmat *w, struct err *e)
{
	int rows = t->dim(m, s->rows), cols = t->dim(m, s->cols), lo, n, total;
	tensors_tp_part(m, t, s, &lo, &n, &total);
	if (!s->tp_whole)
		return model_mat_part(m, name, rows, cols, s->q, s->split, lo, n, w, e);
	/* whole (for `after`), then counted as this rank's view only */
	size_t before = m->weight_bytes;
	struct wmat whole;
	if (model_mat(m, name, rows, cols, s->q, &whole, e))
		return -1;
	bool cut = m->tp_size > 1 && s->split != SPLIT_NONE;
	*w = !cut                     ? whole
	     : s->split == SPLIT_ROWS ? wmat_view(&whole, lo, n, 0, cols)
				      : wmat_view(&whole, 0, rows, lo, n);
	m->weight_bytes = before + wmat_bytes(w);
	return s->after ? s->after(m, layer, &whole, e) : 0;
}

/* Row s's tensor (index x of an array) on the layer */
static int load_one(struct model *m, const struct tensor_table *t, const struct tensor_spec *s, int layer, int x,
		    struct err *e)
{
	char name[256];
	snprintf(name, sizeof name, s->name, layer, x);
	char *p = base_of(m, s, layer) + s->off;
	if (s->kind == TK_VEC)
		return model_vec_f32(m, name, t->dim(m, s->rows), s->fill, (float **)(void *)p, e) ||
				       (s->after && s->after(m, layer, NULL, e))
			       ? -1
			       : 0;
	struct wmat *w = s->count ? &(*(struct wmat **)(void *)p)[x] : (struct wmat *)(void *)p;
	if (load_mat(m, t, s, layer, name, w, e))
		return -1;
	return s->after && !s->tp_whole ? s->after(m, layer, w, e) : 0;
}

int tensors_load(struct model *m, const struct tensor_table *t, int layer, struct err *e)
{
	for (int k = 0; k < t->n;) {
		const struct tensor_spec *s = &t->rows[k];
		if (s->kind == TK_DERIVED || !tensors_on(m, s, layer)) {
			k++;
			continue;
		}
		if (!s->count) {
			if (load_one(m, t, s, layer, 0, e))
				return -1;
			k++;
			continue;
		}
		/* the run of array rows of the same count, index by index */
		int end = k, n = t->dim(m, s->count);
		while (end < t->n && t->rows[end].count == s->count && t->rows[end].kind == TK_MAT &&
		       tensors_on(m, &t->rows[end], layer))
			end++;
		for (int j = k; j < end; j++) {
			struct wmat **arr = (struct wmat **)(void *)(base_of(m, &t->rows[j], layer) + t->rows[j].off);
			*arr = model_own(m, sizeof(struct wmat) * (size_t)n);
			if (!*arr)
				return err_set(e, "layer %d: out of memory", layer);
		}
		for (int x = 0; x < n; x++)
			for (int j = k; j < end; j++)
				if (load_one(m, t, &t->rows[j], layer, x, e))
					return -1;
		k = end;
	}
	return 0;
}

int tensors_each_mat(struct model *m, const struct tensor_table *t, int layer, tensors_mat_fn fn, void *ctx,
		     struct err *e)
{
	for (int k = 0; k < t->n; k++) {
		const struct tensor_spec *s = &t->rows[k];
		if (s->kind == TK_VEC || (s->flags & TF_NO_PACK) || !tensors_on(m, s, layer))
			continue;
		char *p = base_of(m, s, layer) + s->off;
		if (!s->count) {
			if (fn(m, (struct wmat *)(void *)p, s->flags, ctx, e))
				return -1;
			continue;
		}
		struct wmat *arr = *(struct wmat **)(void *)p;
		for (int x = 0, n = t->dim(m, s->count); arr && x < n; x++)
			if (fn(m, &arr[x], s->flags, ctx, e))
				return -1;
	}
	return 0;
}

void tensors_dummy_bytes(const struct model *m, const struct tensor_table *t, int layer, size_t by[DT_COUNT])
{
	char name[256];
	for (int k = 0; k < t->n; k++) {
		const struct tensor_spec *s = &t->rows[k];
		if (s->kind == TK_DERIVED || !tensors_on(m, s, layer))
			continue;
		int rows = t->dim(m, s->rows), count = s->count ? t->dim(m, s->count) : 1;
		if (s->kind == TK_VEC) {
			by[DT_F32] += 4 * (size_t)rows * (size_t)count;
			continue;
		}
		int cols = t->dim(m, s->cols), lo, n, total;
		tensors_tp_part(m, t, s, &lo, &n, &total);
		for (int x = 0; x < count; x++) {
			snprintf(name, sizeof name, s->name, layer, x);
			model_mat_dummy_bytes(m, name, rows, cols, s->q, s->tp_whole ? SPLIT_NONE : s->split, lo, n,
					      by);
		}
	}
}
