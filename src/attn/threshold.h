/* Start-up resolution of the effective reorder_batch_threshold (docs/mla-dcp.md §1.1, §1.3, §5):
 * each backend's declared value (or the --reorder-batch-threshold override), raised to 1 + k
 * under speculative decoding when it takes multi-token decodes, forced to 1 under DCP unless
 * it declares multi-token support at the interleave size, then the minimum over the backends
 * in use. The one place that reads a backend's decode capabilities for the runner
 * (attn_threshold_setup): the threshold, whether decodes must be uniform, and the refusals. */
#ifndef MLA_ATTN_THRESHOLD_H
#define MLA_ATTN_THRESHOLD_H

#include <stdbool.h>
#include <stddef.h>

#include "attn/attn.h"
#include "base/err.h"

/* A backend whose reorder_batch_threshold is <= 0 does not want reordering ("none"). */
#define ATTN_THRESHOLD_NONE 0

/* One backend's effective threshold (ATTN_THRESHOLD_NONE if it wants none). If `why` is not
 * NULL it receives a one-line explanation ("FLASHMLA: 128", or the downgrade reason). */
int attn_threshold_for_backend(const struct attn_backend *be, int dcp_size, int dcp_interleave, int num_spec_tokens,
			       char *why, size_t why_cap);

/* Minimum ignoring ATTN_THRESHOLD_NONE; NONE if n == 0 or all are NONE. */
int attn_threshold_min(const int *values, int n);

/* The runner's value over the backends in use (NULL entries are skipped). Logs one warning
 * per backend forced to 1 by DCP, naming the backend and the reason. `reason` (may be NULL)
 * receives a human-readable summary for the start-up log. */
int attn_threshold_resolve(const struct attn_backend *const *backends, int n, int dcp_size, int dcp_interleave,
			   int num_spec_tokens, char *reason, size_t reason_cap);

/* What the runner needs of its backend, resolved once at start-up. */
struct attn_runner_rule {
	int threshold;        /* effective reorder_batch_threshold (ATTN_THRESHOLD_NONE: none) */
	bool require_uniform; /* a step's decodes must share one q_len (query_len_support is not
			       * VARLEN): the split and the draft padding follow it */
	char why[512];        /* for the start-up log */
};

/* The rule for backend `be` under DCP of dcp_size (1: off) with num_spec_tokens drafts.
 * override > 0 (--reorder-batch-threshold) replaces the declared threshold before the rule,
 * so DCP still lowers it to 1 where the backend cannot run multi-token decodes there.
 * Refuses an override > 1 on a SINGLE_ONLY backend, and a backend that does not return the
 * LSE under DCP > 1 (the ranks' partial outputs are merged by it, docs/mla-dcp.md §4.5). */
int attn_threshold_setup(const struct attn_backend *be, int override, int dcp_size, int dcp_interleave,
			 int num_spec_tokens, struct attn_runner_rule *out, struct err *e);

#endif
