/* Start-up resolution of the effective reorder_batch_threshold (mla-dcp-spec §1.1, §1.3, §5):
 * each backend's declared value, raised to 1 + k under speculative decoding when it takes
 * multi-token decodes, forced to 1 under DCP unless it declares multi-token support at the
 * interleave size, then the minimum over the backends in use. */
#ifndef MLA_ATTN_THRESHOLD_H
#define MLA_ATTN_THRESHOLD_H

#include <stddef.h>

#include "attn/attn.h"

/* A backend whose reorder_batch_threshold is <= 0 does not want reordering ("none"). */
#define ATTN_THRESHOLD_NONE 0

/* One backend's effective threshold (ATTN_THRESHOLD_NONE if it wants none). If `why` is not
 * NULL it receives a one-line explanation ("FLASHMLA: 512", or the downgrade reason). */
int attn_threshold_for_backend(const struct attn_backend *be, int dcp_size, int dcp_interleave,
			       int num_spec_tokens, char *why, size_t why_cap);

/* Minimum ignoring ATTN_THRESHOLD_NONE; NONE if n == 0 or all are NONE. */
int attn_threshold_min(const int *values, int n);

/* The runner's value over the backends in use (NULL entries are skipped). Logs one warning
 * per backend forced to 1 by DCP, naming the backend and the reason. `reason` (may be NULL)
 * receives a human-readable summary for the start-up log. */
int attn_threshold_resolve(const struct attn_backend *const *backends, int n, int dcp_size,
			   int dcp_interleave, int num_spec_tokens, char *reason, size_t reason_cap);

#endif
