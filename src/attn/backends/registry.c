/* The backends compiled in, in preference order (best first). */
#include <stdio.h>
#include <string.h>

#include "attn/backends/backends.h"

static const struct attn_backend *const backends[] = {
	&attn_backend_flashmla,        &attn_backend_flash_attn_mla, &attn_backend_reference_mla,
	&attn_backend_flashmla_sparse, &attn_backend_deepseek_v4,
};

int attn_backend_count(void) { return (int)(sizeof backends / sizeof backends[0]); }

const struct attn_backend *attn_backend_at(int i) { return i >= 0 && i < attn_backend_count() ? backends[i] : NULL; }

const struct attn_backend *attn_backend_by_name(const char *name)
{
	for (int i = 0; name && i < attn_backend_count(); i++)
		if (strcmp(backends[i]->name, name) == 0)
			return backends[i];
	return NULL;
}

enum attn_kind attn_backend_kind(const struct attn_backend *b)
{
	return b->v4 ? ATTN_KIND_V4 : b->sparse ? ATTN_KIND_MLA_SPARSE : ATTN_KIND_MLA;
}

const struct attn_backend *attn_backend_default_kind(enum attn_kind k)
{
	for (int i = 0; i < attn_backend_count(); i++)
		if (attn_backend_kind(backends[i]) == k)
			return backends[i];
	return NULL;
}

const struct attn_backend *attn_backend_default(bool sparse)
{
	return attn_backend_default_kind(sparse ? ATTN_KIND_MLA_SPARSE : ATTN_KIND_MLA);
}

int attn_backend_block_multiple(const struct attn_backend *b)
{
	return b->block_size_multiple > 0 ? b->block_size_multiple : 1;
}

int attn_backend_default_block_size(const struct attn_backend *b)
{
	int mult = attn_backend_block_multiple(b);
	return ((16 + mult - 1) / mult) * mult;
}

int attn_backend_check_kind(const struct attn_backend *b, enum attn_kind k, struct err *e)
{
	if (b && attn_backend_kind(b) == k)
		return 0;
	char names[256] = "";
	for (int i = 0; i < attn_backend_count(); i++)
		if (attn_backend_kind(backends[i]) == k) {
			if (*names)
				strncat(names, ", ", sizeof names - strlen(names) - 1);
			strncat(names, backends[i]->name, sizeof names - strlen(names) - 1);
		}
	const char *kind[3] = {"dense MLA", "sparse (DeepSeek Sparse Attention)", "DeepSeek-V4"};
	if (!b)
		return err_set(e, "no attention backend for %s attention", kind[k]);
	return err_set(e, "attention backend %s serves %s attention and the model needs %s: use %s", b->name,
		       kind[attn_backend_kind(b)], kind[k], *names ? names : "(none compiled in)");
}

int attn_backend_check(const struct attn_backend *b, bool sparse, struct err *e)
{
	return attn_backend_check_kind(b, sparse ? ATTN_KIND_MLA_SPARSE : ATTN_KIND_MLA, e);
}

void *attn_decode_plan_get(const struct attn_decode_args *a, int (*plan)(struct attn_meta *meta, int n_heads,
									 const struct compute_ctx *cx, struct err *e))
{
	if (a->meta->plan)
		return a->meta->plan;
	struct attn_meta tmp = *a->meta;
	CHECK(plan(&tmp, a->n_heads, a->cx, NULL) == 0);
	return tmp.plan;
}
