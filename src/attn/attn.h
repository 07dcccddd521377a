/* MLA attention: the paged latent KV cache, per-step attention metadata, and the backend
 * interface. Backends declare capabilities; code never compares backend names
 * (../docs/DESIGN.md §3, mla-dcp-spec §1-4). */
#ifndef MLA_ATTN_ATTN_H
#define MLA_ATTN_ATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/dtype.h"
#include "base/err.h"

struct pool;

/* Paged latent cache: one row [kv_c (kv_lora_rank) | k_pe (rope_dim)] per token per layer.
 * Block 0 is the null block; slot = block * block_size + offset. */
struct kv_cache {
	int n_layers, n_blocks, block_size;
	int kv_lora_rank, rope_dim, row; /* row = kv_lora_rank + rope_dim (576 for real models) */
	enum dtype dtype;		 /* DT_F32 or DT_BF16 */
	void *data;			 /* [n_layers][n_blocks * block_size][row] */
};

int kv_cache_init(struct kv_cache *kv, int n_layers, int n_blocks, int block_size,
		  int kv_lora_rank, int rope_dim, enum dtype dtype, struct err *e);
void kv_cache_fini(struct kv_cache *kv);
size_t kv_cache_bytes_per_block(int n_layers, int block_size, int row, enum dtype dtype);

/* Per-step metadata, built once by the runner and read by every layer. Sequences are in
 * reordered order: the first n_decodes run the backend's decode path, the rest the shared
 * prefill path. Token rows of sequence i are [query_start[i], query_start[i+1]). */
struct attn_meta {
	int n_seqs, n_tokens;
	const int32_t *query_start;   /* [n_seqs + 1] */
	const int32_t *seq_lens;      /* [n_seqs] global context length including this step */
	const int32_t *block_table;   /* [n_seqs][max_blocks] */
	int max_blocks;
	const int64_t *slots;	      /* [n_tokens]; -1 = not written (padding, other DCP rank) */
	int n_decodes, n_decode_tokens;
	/* decode context parallelism; dcp_size 1 = off */
	int dcp_size, dcp_rank, dcp_interleave;
	const int32_t *local_seq_lens; /* [n_seqs] tokens stored on this rank (= seq_lens if off) */
	void *plan;		       /* the backend's per-step plan (see attn_backend.plan) */
};

enum query_len_support { QLEN_SINGLE_ONLY, QLEN_UNIFORM, QLEN_VARLEN };

/* Decode attention over the latent cache (MQA, one shared KV head), mla-dcp-spec §2.6.
 * Query t of decode sequence i with q_len q sees global positions g <= L - q + t. */
struct attn_decode_args {
	const struct attn_meta *meta;
	const struct kv_cache *kv;
	int layer;
	int n_heads;	  /* heads attended here (W*H under DCP after the q all-gather) */
	float scale;	  /* the model's qk softmax scale */
	const float *q;	  /* [n_decode_tokens, n_heads, row] absorbed query [q_abs | q_pe] */
	float *out;	  /* [n_decode_tokens, n_heads, kv_lora_rank] */
	float *lse;	  /* [n_decode_tokens, n_heads], natural log; -inf for an empty shard */
	struct pool *pool;
	struct arena *scratch; /* per-step arena for temporaries */
	bool q_bf16;	       /* every q value is a bf16 (bf16 activations): see mqa_job */
	bool p_bf16;	       /* P·V may run in bf16: see mqa_job */
};

struct attn_backend {
	const char *name;
	int reorder_batch_threshold;	   /* largest q_len that is still a "decode" */
	enum query_len_support query_len_support;
	/* Can run decode queries with q_len > 1 when the KV is sharded (DCP > 1) at this
	 * interleave size (needs a global-position causal mask). NULL = never. */
	bool (*supports_dcp_multi_token)(int dcp_interleave);
	bool returns_lse;
	int block_size_multiple;	   /* required divisor of the block size (1 = any) */
	/* Per-step plan computed once from the metadata and reused by every layer; NULL if
	 * the backend needs none. Allocates from `scratch`; sets meta->plan. */
	int (*plan)(struct attn_meta *meta, int n_heads, struct arena *scratch, struct err *e);
	void (*decode)(const struct attn_decode_args *a);
};

/* Registry: every backend compiled in, in preference order. */
int attn_backend_count(void);
const struct attn_backend *attn_backend_at(int i);
const struct attn_backend *attn_backend_by_name(const char *name); /* NULL if unknown */

#endif
