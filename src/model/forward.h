/* The DeepSeek family's step (forward.c): model.h's model_forward and model_mtp_forward
 * contracts, which model.c reaches through the family (family_deepseek.c). */
#ifndef MLA_MODEL_FORWARD_H
#define MLA_MODEL_FORWARD_H

#include "model/model.h"
#include "model/model_internal.h"

int deepseek_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *backend,
		     float *logits, struct err *e);
int deepseek_mtp_forward(struct model *m, const struct batch *b, struct kv_cache *kv,
			 const struct attn_backend *backend, float *logits, struct err *e);

#endif
