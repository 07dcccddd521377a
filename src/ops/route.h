/* MoE gate routing (docs/reference.md A.7): softmax or sigmoid scores, correction bias for selection only,
 * group-limited selection (group score = max, or top-2 sum with a bias), -inf masking of the
 * dropped groups, top-k with the lower index winning ties, optional renormalisation, and the
 * routed scaling factor folded into the weights (same math as scaling the routed sum). */
#ifndef MLA_OPS_ROUTE_H
#define MLA_OPS_ROUTE_H

#include <stdbool.h>

#define ROUTE_MAX_EXPERTS 1024
#define ROUTE_MAX_TOPK 64

struct route_params {
	int n_experts, top_k, n_group, topk_group;
	bool sigmoid; /* else softmax */
	bool norm_topk_prob;
	float routed_scaling_factor;
	const float *bias; /* [n_experts] e_score_correction_bias, or NULL */
};

/* logits [n_experts] → ids [top_k] (descending choice score), w [top_k]. */
void ops_moe_route(const struct route_params *p, const float *logits, int *ids, float *w);

#endif
