/* The engine's metrics (docs/reference.md C.8): counters and latency histograms, read through
 * engine_stats_get (engine.h) and kept by the engine thread under the engine's lock. */
#ifndef MLA_ENGINE_STATS_H
#define MLA_ENGINE_STATS_H

#include <stdint.h>

#include "engine/spec.h"

#define ENGINE_HIST_MAX_BUCKETS 24
struct engine_hist {
	int n_bounds;
	double bounds[ENGINE_HIST_MAX_BUCKETS];       /* upper bounds (le), ascending */
	uint64_t counts[ENGINE_HIST_MAX_BUCKETS + 1]; /* per bucket (NOT cumulative); last = +Inf */
	double sum;
	uint64_t count;
};

struct engine_stats {
	int n_running, n_waiting;
	double kv_usage; /* 1 - free / total, in [0, 1] */
	int n_blocks, block_size;
	uint64_t prefix_queries, prefix_hits; /* tokens */
	uint64_t preemptions;
	uint64_t prompt_tokens, generation_tokens;
	uint64_t finished[4]; /* indexed by enum engine_finish (STOP, LENGTH, ABORT) */
	uint64_t steps;
	/* speculative decoding (vLLM's spec_decode_* counters): steps of a choice with drafts,
	 * drafts verified, drafts kept, and kept per draft position */
	int spec_k; /* num_speculative_tokens, 0 = off */
	uint64_t spec_drafts, spec_draft_tokens, spec_accepted_tokens;
	uint64_t spec_accepted_per_pos[SPEC_MAX_TOKENS];
	struct engine_hist ttft;  /* seconds: time_to_first_token */
	struct engine_hist itl;   /* seconds: inter_token_latency / time_per_output_token */
	struct engine_hist e2e;   /* seconds: e2e_request_latency */
	struct engine_hist queue; /* seconds: request_queue_time */
};

/* Zeroes s and sets its histograms' buckets (the spec's bucket sets). */
void stats_init(struct engine_stats *s);
/* Counts v (seconds) in h. */
void stats_observe(struct engine_hist *h, double v);

#endif
