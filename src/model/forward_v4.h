/* DeepSeek-V4's step over the family's state (model/v4_model.h). Per layer, see forward_v4.c. */
#ifndef MLA_MODEL_FORWARD_V4_H
#define MLA_MODEL_FORWARD_V4_H

#include "model/v4_model.h"

/* Lays the pool out for blocks of bs tokens (v->pool; its offset arrays were allocated at load). */
void v4_pool_layout(struct v4_model *v, int bs);

/* The arena bytes of one step (every buffer of forward_v4.c's layout at max_batch_tokens). */
size_t v4_step_scratch_bytes(const struct model *m);
/* model.h's forward: logits [n_logits, vocab] (fp32, act-quant off: DeepSeek's reference with
 * exact activations into the GEMMs, KV / indexer fp8 / fp4 simulations on). */
int v4_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *be,
	       float *logits, struct err *e);
/* model.h's MTP step (the first MTP module; README T of the golden): token t (the token after
 * hidden row hidden_rows[t]'s) at that row's position: x = e_proj(enorm(embed(token))) +
 * h_proj(hnorm(h)) per stream of the row's final streams h, the MTP block over its own state,
 * logits = head(norm(hc_head(x))) with the module's norm and hc_head, the main head. */
int v4_mtp_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *be,
		   float *logits, struct err *e);

#endif
