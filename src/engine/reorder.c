/* Batch reordering (docs/mla-dcp.md §1.4) and the decode/prefill split (§1.5). */
#include "engine/reorder.h"

#include <stdlib.h>

#include "base/err.h"

enum reorder_class reorder_classify(int n_sched, int n_computed, int threshold)
{
	if (n_sched <= threshold)
		return REORDER_DECODE;
	return n_computed > 0 ? REORDER_EXTEND : REORDER_PREFILL;
}

/* Bounded stack buffers for the common case, heap beyond (the batch size is max_num_seqs). */
#define REORDER_STACK 256

bool reorder_batch_swaps(int n, const int32_t *n_sched, const int32_t *n_computed, int threshold,
			 void (*swap)(void *ctx, int i, int j), void *ctx)
{
	if (n <= 0)
		return false;
	int8_t rbuf[REORDER_STACK];
	int32_t ibuf[3 * REORDER_STACK];
	int8_t *region = n <= REORDER_STACK ? rbuf : malloc((size_t)n);
	int32_t *mis = n <= REORDER_STACK ? ibuf : malloc(sizeof(int32_t) * 3 * (size_t)n);
	CHECK(region && mis); /* a few KB for thousands of requests */
	int32_t *src = mis + n, *map = mis + 2 * n;
	int cnt[3] = {0, 0, 0};
	for (int i = 0; i < n; i++) {
		region[i] = (int8_t)reorder_classify(n_sched[i], n_computed[i], threshold);
		cnt[region[i]]++;
	}
	/* M: ascending positions whose region differs from the target region */
	int nm = 0;
	for (int i = 0; i < n; i++) {
		int target = i < cnt[0] ? 0 : i < cnt[0] + cnt[1] ? 1 : 2;
		if (region[i] != target)
			mis[nm++] = i;
	}
	bool modified = nm > 0;
	if (modified) {
		/* S = M stably sorted by region; element at S[k] goes to M[k] */
		int ns = 0;
		for (int c = 0; c < 3; c++)
			for (int k = 0; k < nm; k++)
				if (region[mis[k]] == c)
					src[ns++] = mis[k];
		for (int i = 0; i < n; i++)
			map[i] = -1;
		for (int k = 0; k < nm; k++)
			map[src[k]] = mis[k];
		/* cycle-following swaps, sources in map (insertion) order */
		for (int k = 0; k < nm; k++) {
			int s = src[k], d = map[s];
			while (s != d) {
				swap(ctx, s, d);
				int next = map[d] >= 0 ? map[d] : d;
				map[d] = d;
				d = next;
			}
		}
	}
	if (region != rbuf)
		free(region);
	if (mis != ibuf)
		free(mis);
	return modified;
}

static void swap_perm(void *ctx, int i, int j)
{
	int32_t *perm = ctx, t = perm[i];
	perm[i] = perm[j];
	perm[j] = t;
}

bool reorder_batch_to_split_decodes_and_prefills(int n, const int32_t *n_sched, const int32_t *n_computed,
						 int threshold, int32_t *perm)
{
	for (int i = 0; i < n; i++)
		perm[i] = i;
	return reorder_batch_swaps(n, n_sched, n_computed, threshold, swap_perm, perm);
}

struct batch_split split_decodes_and_prefills(const int32_t *query_start, int n, int threshold, bool require_uniform)
{
	struct batch_split r = {0, 0, 0, 0};
	if (n <= 0)
		return r;
	int T = query_start[n] - query_start[0], max_q = 0;
	for (int i = 0; i < n; i++) {
		int q = query_start[i + 1] - query_start[i];
		max_q = q > max_q ? q : max_q;
	}
	/* rule 1: everything fits (a uniform backend with threshold > 1 still checks below) */
	if (max_q <= threshold && (!require_uniform || threshold <= 1))
		return (struct batch_split){n, 0, T, 0};
	int q0 = query_start[1] - query_start[0];
	if (q0 > threshold) /* rule 2 */
		return (struct batch_split){0, n, 0, T};
	int first = n;
	for (int i = 0; i < n && first == n; i++) {
		int q = query_start[i + 1] - query_start[i];
		bool prefill = require_uniform ? q != q0 : (q > threshold || q == 0);
		if (prefill)
			first = i;
	}
	if (first == n) /* rule 4 */
		return (struct batch_split){n, 0, T, 0};
	r.n_decodes = first;
	r.n_prefills = n - first;
	r.n_decode_tokens = query_start[first] - query_start[0];
	r.n_prefill_tokens = T - r.n_decode_tokens;
	return r;
}
