/* The attention backends compiled in (see attn.h for the interface; registry.c orders them). */
#ifndef MLA_ATTN_BACKENDS_BACKENDS_H
#define MLA_ATTN_BACKENDS_BACKENDS_H

#include "attn/attn.h"

/* REFERENCE_MLA: plain fp32 softmax per (token, head), SINGLE_ONLY, threshold 1. It
 * implements the general visibility rule (bottom-right causal, global positions under DCP)
 * so tests use it as the oracle for every other backend. */
extern const struct attn_backend attn_backend_reference_mla;
/* FLASHMLA: UNIFORM q_len, threshold 128 (tuned on the CPU, see backend_flashmla.c),
 * split-KV schedule planned once per step, any DCP interleave for q_len > 1
 * (global-position mask). */
extern const struct attn_backend attn_backend_flashmla;
/* FLASH_ATTN_MLA: VARLEN q_len, threshold 512, q_len > 1 under DCP only at interleave 1. */
extern const struct attn_backend attn_backend_flash_attn_mla;

/* FLASHMLA_SPARSE: DeepSeek Sparse Attention (V3.2): every token attends the keys its
 * indexer selected through the shared MQA kernel, one job per (token, head group); VARLEN,
 * any DCP interleave (the selection is of local keys). Dense models cannot use it. */
extern const struct attn_backend attn_backend_flashmla_sparse;
/* DEEPSEEK_V4: DeepSeek-V4's attention (model_v4/v4_block.h, run by the family's forward):
 * VARLEN (one path for every query length: each token attends its window, entries and
 * selection by global position), any DCP interleave for q_len > 1 (keys owned by global
 * position and entry index), partial results with their LSE. Only V4 models use it. */
extern const struct attn_backend attn_backend_deepseek_v4;
/* Bytes of the step arena one call of the sparse backend takes at most. */
size_t attn_sparse_scratch_bytes(int n_threads, int n_tok, int n_heads, int topk, int kv_lora_rank, int rope_dim);

/* The split-KV plan of a decode call: the runner's (a->meta->plan), or one made by plan for
 * this call only (a caller that runs a backend without planning, as tests do). */
void *attn_decode_plan_get(const struct attn_decode_args *a, int (*plan)(struct attn_meta *meta, int n_heads,
									 const struct compute_ctx *cx, struct err *e));

/* Upper bound of the bytes the decode path of any backend takes from the per-step scratch
 * arena in one step (plan + per-thread work buffers + split-KV partials), for arena sizing:
 * n_threads of the pool, max_seqs / max_decode_tokens per step, n_heads attended (W*H under
 * DCP). The plan and the buffers are allocated once per step and reused by every layer. */
size_t attn_decode_scratch_bytes(int n_threads, int max_seqs, int max_decode_tokens, int n_heads, int kv_lora_rank,
				 int rope_dim);

#endif
