/* DeepSeek-V4 MoE routing and expert activation (model.py Gate / Expert):
 *   scores = sqrt(softplus(logits)), logits = gate.weight x (fp32)          [n_experts]
 *   hash layers (layer < num_hash_layers): experts = tid2eid[token]        (its order)
 *   other layers: the top-k of scores + gate.bias (ties to the lower index) (ascending ids)
 *   w_i = scores[e_i] / sum_i scores[e_i] * routed_scaling_factor (the bias only selects)
 * and the SwiGLU of an expert with swiglu_limit:
 *   h = w * silu(min(g, limit)) * clamp(u, -limit, limit),  g = w1 x, u = w3 x;  out = w2 h
 * (the routing weight applied BEFORE w2; the shared expert the same with w = 1; limit 0 =
 * no clamp). */
#ifndef MLA_MODEL_V4_V4_MOE_ROUTE_H
#define MLA_MODEL_V4_V4_MOE_ROUTE_H

#include <stdint.h>

#include "base/err.h"

struct v4_route {
	int n_experts, k;       /* n_routed_experts, num_experts_per_tok */
	float route_scale;      /* routed_scaling_factor */
	const float *bias;      /* [n_experts] gate.bias of a score layer, else NULL */
	const int64_t *tid2eid; /* [vocab, k] gate.tid2eid of a hash layer, else NULL */
	int vocab;              /* rows of tid2eid */
};

/* torch's softplus (threshold 20) under a square root, in double. */
float v4_sqrtsoftplus(float z);

/* One token: logits [n_experts], its token id (hash layers) -> ids [k], weights [k]. Errors: a
 * token outside tid2eid, an expert id out of range or repeated in its row. */
int v4_route_one(const struct v4_route *r, const float *logits, int32_t token, int32_t *ids, float *w, struct err *e);

/* h [n] = w * silu(min(g, limit)) * clamp(u, -limit, limit) for g, u [n] (limit 0: no clamp);
 * h may alias g or u. */
void v4_swiglu_clamped(int n, const float *g, const float *u, float w, float limit, float *h);

#endif
