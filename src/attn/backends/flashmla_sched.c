/* FlashMLA tile scheduler (docs/mla-dcp.md §3.1), the same greedy fill as get_mla_metadata. */
#include "attn/backends/flashmla_sched.h"

#include <string.h>

int flashmla_sched_compute(const int32_t *seq_lens, int n_reqs, int n_parts, struct flashmla_part *parts,
			   int32_t *num_splits)
{
	const int ov = FLASHMLA_FIXED_OVERHEAD;
	int64_t total = 0;
	for (int i = 0; i < n_reqs; i++)
		total += (seq_lens[i] + FLASHMLA_BLOCK_N - 1) / FLASHMLA_BLOCK_N + ov;
	int64_t payload = (total + n_parts - 1) / n_parts + ov;
	int req = 0, block = 0, split = 0;
	num_splits[0] = 0;
	for (int p = 0; p < n_parts; p++) {
		struct flashmla_part *row = &parts[p];
		memset(row, 0, sizeof *row);
		row->begin_req = req;
		row->begin_tok = block * FLASHMLA_BLOCK_N;
		row->begin_split = split;
		int64_t budget = payload;
		while (req < n_reqs) {
			int nb = (seq_lens[req] + FLASHMLA_BLOCK_N - 1) / FLASHMLA_BLOCK_N;
			int64_t rem = nb - block;
			if (budget >= rem + ov) {
				num_splits[req + 1] = num_splits[req] + split + 1;
				budget -= rem + ov;
				req++;
				block = split = 0;
			} else {
				if (budget - ov > 0) {
					block += (int)(budget - ov);
					split++;
				}
				break;
			}
		}
		row->end_req = block > 0 ? req : req - 1;
		row->end_tok = block > 0 ? block * FLASHMLA_BLOCK_N : (req > 0 ? seq_lens[req - 1] : 0);
	}
	return req;
}
