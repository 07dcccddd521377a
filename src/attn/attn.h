/* MLA attention: the paged latent KV cache, per-step attention metadata, and the backend
 * interface. Backends declare capabilities; code never compares backend names
 * (docs/DESIGN.md §3, docs/mla-dcp.md §1-4). Each backend is one file of backends/ built on
 * the shared paged-MQA kernel (kernels/mqa.c); prefill.c is the shared prefill path, merge.c
 * the (out, lse) merge, dcp.c the DCP math, threshold.c the one threshold rule, indexer.c the
 * V3.2 top-k; the batch reordering and decode/prefill split are engine/reorder.c's.
 *
 * The short names of the attention code (src/attn/, its kernels and backends), as vLLM's
 * MLA common.py lists them. Model dimensions (DeepSeek-V2/V3 values in brackets):
 *     D      hidden_size [7168]
 *     H      attention heads of this rank (n_heads_local: all of them without tensor
 *            parallelism) [128]
 *     Lq     q_lora_rank: the query's compressed width [1536]
 *     Lkv    kv_lora_rank: the latent width, kv_c's [512]
 *     dn     qk_nope_head_dim: a head's query/key part without rope [128]
 *     dr     qk_rope_head_dim = rope_dim: the rope part, k_pe's width, shared by the heads [64]
 *     dv     the value width that the code at hand attends: v_head_dim [128] where keys and
 *            values are up-projected (prefill.c), but Lkv in the absorbed paths (the decode
 *            backends, mqa kernels, merge), whose values are the latents themselves
 *     dk     dn + dr: a key head of the prefill path; hd = dn + dv, a head of kv_b's output
 *     row    Lkv + dr: one cached token [576], kv_c then k_pe (struct kv_cache)
 *     qw     H * (dn + dr): a token's query row before absorption
 *     L      a sequence's global context length (seq_lens) in the decode paths and dcp.c,
 *            but kv_lora_rank (= Lkv) in prefill.c
 * Tensors:
 *     kv_c   the compressed latent of a token [Lkv]; k_pe its rotated rope key [dr]
 *     q_nope, q_pe   a head's query parts [dn], [dr]; q_abs = W_UKᵀ q_nope, the query
 *            absorbed into latent space [Lkv], so that decode attends [q_abs | q_pe] to
 *            cached rows directly (MQA: one shared KV head)
 *     lse    log-sum-exp of a row's scores (natural log), by which partial outputs merge
 * Decode context parallelism (docs/mla-dcp.md; dcp.h):
 *     W      dcp_size: ranks that shard the KV cache (1: off)
 *     r      dcp_rank: this rank in [0, W)
 *     I      dcp_interleave: consecutive tokens a rank stores before the next rank's
 *     Hg     W * H: heads attended by a decode, after the query all-gather
 * A step's queries and keys:
 *     q      a decode sequence's query length (q_len) where it is an int; else the query
 *     t      a query token: its index in the step, or in its sequence (t, tq of the
 *            decode backends, tl of indexer.c)
 *     tok0, nt   a work item's first query token and its token count (t0, nt in forward.c)
 *     nr     rows of one mqa job: n_tok * n_heads
 *     nk, nv     keys of the block or sequence at hand, and those of them a row sees
 *     kb, ke     a key range [kb, ke) (k_begin, k_end of struct mqa_job)
 *     vis    per query token, the keys it may see (its causal and DCP limit)
 *     K      topk: keys the sparse indexer selects per token
 *     S      splits of a sparse work item (backend_flashmla_sparse.c); in mqa_amx.c the
 *            32-column slices of a row
 *     G, ng  groups of 16 rows, of 16 keys (AMX tiles)
 *     QB, KB     query and key block sizes of the prefill and indexer loops
 *     rb     bytes of one cached row */
#ifndef MLA_ATTN_ATTN_H
#define MLA_ATTN_ATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/dtype.h"
#include "attn/kernels/kv_fp8.h"
#include "base/err.h"
#include "ops/backend.h"

struct attn_prefill_args; /* attn/prefill.h */

/* Paged latent cache: one row [kv_c (kv_lora_rank) | k_pe (rope_dim)] per token per layer.
 * Block 0 is the null block; slot = block * block_size + offset. A DeepSeek Sparse Attention
 * model (V3.2) also keeps its indexer's key of every token at the same slot: index_dim e4m3
 * codes and one fp32 scale per group of min(128, index_dim), so a block holds both caches of
 * its tokens and both are allocated, prefix-shared, preempted and freed as one.
 * DT_F8_E4M3 (--kv-cache-dtype fp8) keeps a row as e4m3 codes with fp32 scales (kv_fp8.h):
 * FlashMLA's fp8_ds_mla layout for the sparse models (those with the indexer cache), the dense
 * one for the others. */
struct kv_cache {
	int n_layers, n_blocks, block_size;
	int kv_lora_rank, rope_dim, row; /* row = kv_lora_rank + rope_dim (576 for real models) */
	enum dtype dtype;                /* DT_F32, DT_BF16 or DT_F8_E4M3 */
	int row_bytes;                   /* bytes of one cached row */
	struct kv_fp8_layout fp8;        /* the row's layout for DT_F8_E4M3 */
	void *data;                      /* [n_layers][n_blocks * block_size][row_bytes] */
	int index_dim, index_groups;     /* 0: no indexer cache */
	uint8_t *index_codes;            /* [n_layers][n_blocks * block_size][index_dim] e4m3 */
	float *index_scales;             /* [n_layers][n_blocks * block_size][index_groups] */
};

/* index_dim 0: the latent cache alone (V2/V3); else with the indexer cache (V3.2). */
int kv_cache_init(struct kv_cache *kv, int n_layers, int n_blocks, int block_size, int kv_lora_rank, int rope_dim,
		  enum dtype dtype, struct err *e);
int kv_cache_init_indexed(struct kv_cache *kv, int n_layers, int n_blocks, int block_size, int kv_lora_rank,
			  int rope_dim, enum dtype dtype, int index_dim, struct err *e);
void kv_cache_fini(struct kv_cache *kv);
size_t kv_cache_bytes_per_block(int n_layers, int block_size, int row, enum dtype dtype);
/* Bytes of one cached latent row: row values of F32 / BF16, or an fp8 row (kv_fp8.h: fp8_ds_mla
 * with `sparse`, 656 bytes at 512 + 64; else 596); 0 for a geometry the dtype cannot hold. */
size_t kv_cache_row_bytes(int kv_lora_rank, int rope_dim, enum dtype dtype, bool sparse);
/* The indexer cache's bytes of one block (0 for index_dim 0). */
size_t kv_cache_index_bytes_per_block(int n_layers, int block_size, int index_dim);
/* Elements of one fp8 scale group of the indexer key (DeepSeek's act_quant block, 128). */
static inline int kv_cache_index_group(int index_dim) { return index_dim < 128 ? index_dim : 128; }

/* Per-step metadata, built once by the runner and read by every layer. Sequences are in
 * reordered order: the first n_decodes run the backend's decode path, the rest the shared
 * prefill path. Token rows of sequence i are [query_start[i], query_start[i+1]). */
struct attn_meta {
	int n_seqs, n_tokens;
	const int32_t *query_start; /* [n_seqs + 1] */
	const int32_t *seq_lens;    /* [n_seqs] global context length including this step */
	const int32_t *block_table; /* [n_seqs][max_blocks] */
	int max_blocks;
	const int64_t *slots; /* [n_tokens]; -1 = not written (padding, other DCP rank) */
	int n_decodes, n_decode_tokens;
	/* decode context parallelism; dcp_size 1 = off */
	int dcp_size, dcp_rank, dcp_interleave;
	const int32_t *local_seq_lens; /* [n_seqs] tokens stored on this rank (= seq_lens if off) */
	void *plan;                    /* the backend's per-step plan (see attn_backend.plan) */
};

enum query_len_support { QLEN_SINGLE_ONLY, QLEN_UNIFORM, QLEN_VARLEN };

/* The attention a backend serves (a model needs one kind): DeepSeek's dense MLA, MLA with
 * DeepSeek Sparse Attention (V3.2), or DeepSeek-V4's (compressed entries, indexer, sliding
 * window and sink: model_v4/v4_block.h). */
enum attn_kind { ATTN_KIND_MLA, ATTN_KIND_MLA_SPARSE, ATTN_KIND_V4 };

/* Decode attention over the latent cache (MQA, one shared KV head), docs/mla-dcp.md §2.6.
 * Query t of decode sequence i with q_len q sees global positions g <= L - q + t. */
struct attn_decode_args {
	const struct attn_meta *meta;
	const struct kv_cache *kv;
	int layer;
	int n_heads;    /* heads attended here (W*H under DCP after the q all-gather) */
	float scale;    /* the model's qk softmax scale */
	const float *q; /* [n_decode_tokens, n_heads, row] absorbed query [q_abs | q_pe] */
	float *out;     /* [n_decode_tokens, n_heads, kv_lora_rank] */
	float *lse;     /* [n_decode_tokens, n_heads], natural log; -inf for an empty shard */
	/* where it runs: the CPU's pool, the per-step arena for temporaries (ops/backend.h) */
	const struct compute_ctx *cx;
	bool q_bf16; /* every q value is a bf16 (bf16 activations): see mqa_job */
	bool p_bf16; /* P·V may run in bf16: see mqa_job */
};

/* Sparse attention (DeepSeek Sparse Attention, V3.2) over the latent cache: every token of
 * the step, prefill or decode, attends through the absorbed queries to the keys the indexer
 * selected for it (attn/indexer.h), the same set for all its heads; causality is in the
 * selection. Tokens [tok0, tok0 + n_tok) of the step run in one call. */
struct attn_sparse_args {
	const struct attn_meta *meta;
	const struct kv_cache *kv;
	int layer;
	int n_heads; /* heads attended here (W*H under DCP after the q all-gather) */
	float scale;
	int tok0, n_tok;
	const int32_t *sel_start; /* [n_tokens + 1] of the step: token t attends this rank's local */
	const int32_t *sel;       /* keys sel[sel_start[t] .. sel_start[t + 1]) (ascending) */
	const float *q;           /* [n_tok, n_heads, row] absorbed query [q_abs | q_pe] */
	float *out;               /* [n_tok, n_heads, kv_lora_rank] */
	float *lse;               /* [n_tok, n_heads]; -inf, output 0 where no key is selected here */
	const struct compute_ctx *cx;
	bool q_bf16, p_bf16; /* as attn_decode_args */
};

struct attn_backend {
	const char *name;
	int reorder_batch_threshold; /* largest q_len that is still a "decode" */
	enum query_len_support query_len_support;
	/* Can run decode queries with q_len > 1 when the KV is sharded (DCP > 1) at this
	 * interleave size (needs a global-position causal mask). NULL = never. */
	bool (*supports_dcp_multi_token)(int dcp_interleave);
	/* Returns the decode LSE: DCP merges the ranks' partial outputs by it (docs/mla-dcp.md
	 * §4.5), so attn_threshold_setup refuses a backend without it under DCP > 1. */
	bool returns_lse;
	int block_size_multiple; /* required divisor of the block size (0 or 1 = any):
					    * read through attn_backend_block_multiple */
	/* Per-step plan computed once from the metadata and reused by every layer; NULL if
	 * the backend needs none. Allocates from cx->scratch; sets meta->plan. */
	int (*plan)(struct attn_meta *meta, int n_heads, const struct compute_ctx *cx, struct err *e);
	void (*decode)(const struct attn_decode_args *a);
	/* The prefill sequences of a dense step (those after the first n_decodes): every dense
	 * CPU backend points at the shared attn_prefill (attn/prefill.h); a device backend
	 * would run its own. NULL on a sparse backend, whose `sparse` serves prefill tokens. */
	int (*prefill)(const struct attn_prefill_args *a, struct err *e);
	/* Sparse backends (V3.2's models need one, other models a dense one): NULL when dense */
	void (*sparse)(const struct attn_sparse_args *a);
	/* A DeepSeek-V4 backend: no entry above; the family's forward runs its attention
	 * (model_v4/v4_block.h, which attn/ cannot call: the layering), under what it declares */
	bool v4;
};

/* Registry: every backend compiled in, in preference order. */
int attn_backend_count(void);
const struct attn_backend *attn_backend_at(int i);
const struct attn_backend *attn_backend_by_name(const char *name); /* NULL if unknown */
/* The first backend of the kind a model needs: sparse (DeepSeek Sparse Attention) or dense. */
const struct attn_backend *attn_backend_default(bool sparse);
/* What b serves, and the first backend of a kind (NULL: none compiled in). */
enum attn_kind attn_backend_kind(const struct attn_backend *b);
const struct attn_backend *attn_backend_default_kind(enum attn_kind k);
/* The divisor backend b needs of the block size (1 when its table says 0: any). */
int attn_backend_block_multiple(const struct attn_backend *b);
/* The default block size for b: the smallest multiple of that divisor of at least 16 tokens. */
int attn_backend_default_block_size(const struct attn_backend *b);
/* Whether backend b can serve a model of that kind; else fills e naming the backends that can. */
int attn_backend_check(const struct attn_backend *b, bool sparse, struct err *e);
/* Same for a model that needs kind k. */
int attn_backend_check_kind(const struct attn_backend *b, enum attn_kind k, struct err *e);

#endif
