/* One step's model input as a plain struct of arrays (no request pointers): what the
 * runner builds on rank 0 and, in distributed runs, broadcasts to the other ranks. Sequences
 * are in reordered order (decodes first); arrays are described in attn/attn.h. */
#ifndef MLA_ENGINE_PLAN_H
#define MLA_ENGINE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct batch;
struct arena;

struct step_plan {
	int32_t n_tokens, n_seqs, max_blocks, n_decodes, n_decode_tokens, n_logits;
	int32_t block_size;
	int32_t flags;              /* STEP_PLAN_* */
	const int32_t *tokens;      /* [n_tokens] */
	const int32_t *positions;   /* [n_tokens] */
	const int32_t *query_start; /* [n_seqs + 1] */
	const int32_t *seq_lens;    /* [n_seqs] */
	const int32_t *block_table; /* [n_seqs][max_blocks], global block ids */
	const int64_t *slots;       /* [n_tokens] slot = block_table[p / bs] * bs + p % bs */
	const int32_t *logits_rows; /* [n_logits] */
	const int32_t *hidden_rows; /* [n_tokens] with STEP_PLAN_MTP (batch.hidden_rows), else NULL */
};

enum {
	STEP_PLAN_SHUTDOWN = 1,  /* the engine stops: other ranks leave their loop */
	STEP_PLAN_MTP = 2,       /* the MTP module's step (model_mtp_forward) after the model's */
	STEP_PLAN_MTP_CHAIN = 4, /* with STEP_PLAN_MTP: a chained pass, fed the last MTP pass's
				  * output rows (batch.hidden_from_mtp) */
};

/* Optional replacement of the local forward (engine_options.hook; distributed runs: rank 0
 * broadcasts the pointer-free plan and every rank runs model_forward on its shard). Must
 * fill logits[plan->n_logits, vocab] (fp32) with the full vocabulary. */
struct engine_forward_hook {
	int (*forward)(void *ctx, const struct step_plan *plan, float *logits, struct err *e);
	void *ctx;
};

/* Byte size of the packed form (a fixed header then the arrays, 8-byte aligned). */
size_t step_plan_packed_size(const struct step_plan *p);
/* Writes the packed form into buf[step_plan_packed_size(p)]. */
void step_plan_pack(const struct step_plan *p, void *buf);
/* Points p's arrays into buf (which must outlive p); validates counts against n. */
int step_plan_unpack(const void *buf, size_t n, struct step_plan *p, struct err *e);

/* The model input for a run without DCP: dcp_size 1, local_seq_lens = seq_lens. */
void step_plan_to_batch(const struct step_plan *p, struct batch *b);

#endif
