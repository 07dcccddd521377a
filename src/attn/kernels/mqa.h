/* The shared paged-MQA kernel of the fast decode backends: a tile of query rows (all heads of
 * a few query tokens) against one key range of one sequence's latent cache, each key block
 * read (and converted from bf16) once for the whole tile. Online softmax in fp32; writes the
 * normalised partial output and its natural-log LSE (-inf, output 0 if no key is visible). */
#ifndef MLA_ATTN_KERNELS_MQA_H
#define MLA_ATTN_KERNELS_MQA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/attn.h"
#include "ops/cpu.h"

#define MQA_KEY_BLOCK 64 /* keys scored per pass */
/* keys per pass of the AMX kernels past two row groups of 16 (many heads): their C tiles then
 * go through memory once per 256 keys, not per 64 (mqa_run_at) */
#define MQA_KEY_BLOCK_WIDE 256
#define MQA_TILE_ROWS 128 /* target query rows (token x head) per tile */

struct mqa_job {
	const struct kv_cache *kv;
	int layer;
	const int32_t *bt;    /* block table row of the sequence */
	const int64_t *slots; /* NULL, or sparse attention: key k is row slots[k] (bt unused) */
	float scale;
	const float *q; /* [n_tok, n_heads, row] */
	int n_tok, n_heads;
	const int32_t *vis; /* [n_tok] token t sees local keys [0, vis[t]) */
	int k_begin, k_end; /* key range of this piece (local indices) */
	float *out;         /* [n_tok, n_heads, kv_lora_rank] */
	float *lse;         /* [n_tok, n_heads] */
	bool q_bf16;        /* every q value is a bf16: with a bf16 cache the scores may run
				* bf16 dot products (exact products, fp32 sums) */
	bool p_bf16;        /* with q_bf16: the value pass may round the probabilities to bf16
				* and run bf16 dot products on the cached values, as bf16 engines
				* do (P·V in bf16); the softmax and its LSE stay fp32; an
				* output moves by at most max|V| 2^-9 (tested) */
};

/* CPUs this process may run on (sizes the split-KV partitions). */
int mqa_cpu_count(void);
/* Tokens per tile for n_heads heads: max(1, MQA_TILE_ROWS / n_heads). */
int mqa_tile_tokens(int n_heads);
/* Bytes of per-thread scratch for tiles of up to max_rows rows with cache rows `row` wide. */
size_t mqa_scratch_bytes(int max_rows, int row);
/* Runs one job; `scratch` is mqa_scratch_bytes(n_tok * n_heads, kv->row) bytes, 64-aligned. */
void mqa_run(const struct mqa_job *j, void *scratch);
/* The same at an explicit kernel level (tests compare every level with the portable one). */
void mqa_run_at(const struct mqa_job *j, void *scratch, enum ops_level level);

/* Per-thread scratch taken from the step arena on a step's first decode call and reused by
 * every later layer of the step (the arena is reset per step, the plan with it). */
struct mqa_workspace {
	unsigned char *mem;
	int n_threads;
	size_t per_thread;
};
/* Thread tid's block of at least `per_thread` bytes, (re)allocating from `a` if needed.
 * Call once before pool_for with tid 0 .. n_threads-1 valid afterwards. */
void mqa_workspace_reserve(struct mqa_workspace *w, struct arena *a, int n_threads, size_t per_thread);
static inline void *mqa_workspace_at(const struct mqa_workspace *w, int tid)
{
	return w->mem + (size_t)tid * w->per_thread;
}

#endif
