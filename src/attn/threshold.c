/* reorder_batch_threshold resolution (docs/mla-dcp.md §1.1, §1.3, §5). */
#include "attn/threshold.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"

static bool downgraded_by_dcp(const struct attn_backend *be, int t, int dcp_size, int I)
{
	return t > 1 && dcp_size > 1 && !(be->supports_dcp_multi_token && be->supports_dcp_multi_token(I));
}

/* one backend's threshold from `t`, its declared value or the override */
static int threshold_of(const struct attn_backend *be, int t, int dcp_size, int dcp_interleave, int num_spec_tokens,
			char *why, size_t why_cap)
{
	if (t <= 0) {
		if (why)
			snprintf(why, why_cap, "%s: none (no reordering)", be->name);
		return ATTN_THRESHOLD_NONE;
	}
	if (be->query_len_support == QLEN_SINGLE_ONLY)
		t = 1; /* a SINGLE_ONLY kernel takes q_len 1 only, whatever it declares */
	else if (num_spec_tokens > 0 && t < 1 + num_spec_tokens)
		t = 1 + num_spec_tokens; /* spec-verify steps of 1 + k tokens count as decodes */
	if (downgraded_by_dcp(be, t, dcp_size, dcp_interleave)) {
		if (why)
			snprintf(why, why_cap,
				 "attention backend %s cannot run multi-token decode queries under "
				 "decode context parallelism (interleave %d): reorder_batch_threshold "
				 "%d -> 1",
				 be->name, dcp_interleave, t);
		return 1;
	}
	if (why)
		snprintf(why, why_cap, "%s: %d", be->name, t);
	return t;
}

int attn_threshold_for_backend(const struct attn_backend *be, int dcp_size, int dcp_interleave, int num_spec_tokens,
			       char *why, size_t why_cap)
{
	return threshold_of(be, be->reorder_batch_threshold, dcp_size, dcp_interleave, num_spec_tokens, why, why_cap);
}

int attn_threshold_min(const int *values, int n)
{
	int best = ATTN_THRESHOLD_NONE;
	for (int i = 0; i < n; i++)
		if (values[i] > 0 && (best == ATTN_THRESHOLD_NONE || values[i] < best))
			best = values[i];
	return best;
}

/* attn_threshold_resolve with every backend's declared value replaced by override (> 0) */
static int resolve(const struct attn_backend *const *backends, int n, int override, int dcp_size, int dcp_interleave,
		   int num_spec_tokens, char *reason, size_t reason_cap)
{
	int best = ATTN_THRESHOLD_NONE;
	size_t used = 0;
	char buf[512];
	if (reason && reason_cap)
		reason[0] = 0;
	for (int i = 0; i < n; i++) {
		const struct attn_backend *be = backends[i];
		if (!be)
			continue;
		int declared = override > 0 ? override : be->reorder_batch_threshold;
		int t = threshold_of(be, declared, dcp_size, dcp_interleave, num_spec_tokens, buf, sizeof buf);
		if (t == 1 && declared > 1 && downgraded_by_dcp(be, declared, dcp_size, dcp_interleave))
			LOG_W("attn", "%s", buf);
		if (t > 0 && (best == ATTN_THRESHOLD_NONE || t < best))
			best = t;
		if (reason && used < reason_cap)
			used += (size_t)snprintf(reason + used, reason_cap - used, "%s%s", used ? "; " : "", buf);
	}
	if (reason && used < reason_cap) {
		char head[64];
		if (best == ATTN_THRESHOLD_NONE)
			snprintf(head, sizeof head, "reorder_batch_threshold none");
		else
			snprintf(head, sizeof head, "reorder_batch_threshold %d", best);
		char tmp[1024];
		snprintf(tmp, sizeof tmp, "%s (%s)", head, used ? reason : "no attention backends");
		snprintf(reason, reason_cap, "%s", tmp);
	}
	return best;
}

int attn_threshold_resolve(const struct attn_backend *const *backends, int n, int dcp_size, int dcp_interleave,
			   int num_spec_tokens, char *reason, size_t reason_cap)
{
	return resolve(backends, n, 0, dcp_size, dcp_interleave, num_spec_tokens, reason, reason_cap);
}

int attn_threshold_setup(const struct attn_backend *be, int override, int dcp_size, int dcp_interleave,
			 int num_spec_tokens, struct attn_runner_rule *out, struct err *e)
{
	memset(out, 0, sizeof *out);
	if (override > 1 && be->query_len_support == QLEN_SINGLE_ONLY)
		return err_set(e,
			       "--reorder-batch-threshold %d: attention backend %s runs single-token "
			       "decodes only",
			       override, be->name);
	/* vLLM checks this in its runner ("DCP requires attention impls to return the softmax
	 * lse for decode"); here it is refused before anything loads */
	if (dcp_size > 1 && !be->returns_lse)
		return err_set(e,
			       "attention backend %s does not return the softmax LSE of its decode, "
			       "which decode context parallelism (size %d) merges the ranks' outputs by",
			       be->name, dcp_size);
	const struct attn_backend *bl[1] = {be};
	out->threshold = resolve(bl, 1, override, dcp_size > 0 ? dcp_size : 1, dcp_interleave > 0 ? dcp_interleave : 1,
				 num_spec_tokens, out->why, sizeof out->why);
	out->require_uniform = be->query_len_support != QLEN_VARLEN;
	return 0;
}
