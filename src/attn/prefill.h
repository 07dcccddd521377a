/* The shared prefill path of MLA (docs/mla-dcp.md §2.5): up-project the step's latents with
 * kv_b_proj, causal MHA of each sequence's new tokens among themselves, and the cached
 * context (positions < seq_len - q_len) gathered from the paged cache in chunks of at most
 * ws_rows rows, up-projected, attended non-causally and merged by log-sum-exp. Runs every
 * sequence in [meta->n_decodes, meta->n_seqs). */
#ifndef MLA_ATTN_PREFILL_H
#define MLA_ATTN_PREFILL_H

#include <stddef.h>

#include "attn/attn.h"
#include "ops/gemm.h"

struct attn_prefill_args {
	const struct attn_meta *meta;
	const struct kv_cache *kv;
	int layer;
	int n_heads, nope_dim, rope_dim, v_dim, kv_lora_rank;
	float scale;
	const struct wmat *kv_b; /* [n_heads*(nope_dim+v_dim), kv_lora_rank] */
	const float *q;          /* [n_tokens, n_heads, nope_dim+rope_dim] (rope part rotated) */
	const float *kv_c;       /* [n_tokens, ld_kv] normed latent at column 0 */
	const float *k_pe;       /* [n_tokens, ld_kv] rotated k_pe */
	int ld_kv;
	float *out;  /* [n_tokens, n_heads, v_dim]: the prefill rows are written */
	int ws_rows; /* context rows per chunk (the bounded workspace); under DCP a
				   * multiple of dcp_size x dcp_interleave */
	/* where it runs: the pool, the per-step arena (ops/backend.h) */
	const struct compute_ctx *cx;
	/* DCP (meta->dcp_size > 1): the cached context is sharded (docs/mla-dcp.md §4.6). Gathers
	 * send [n] of every rank of the DCP group into recv [dcp_size, n], rank-major. Every
	 * rank of the group calls it the same number of times with the same n. */
	int (*dcp_allgather)(void *ctx, const float *send, size_t n, float *recv, struct err *e);
	void *dcp_ctx;
	/* bf16 activations: q, kv_c, k_pe (and cached rows) are bf16-exact; the up-projected
	 * K/V are rounded too, and on an AVX512_BF16 CPU the attention core runs bf16 dot
	 * products with the probabilities rounded to bf16 (P·V as bf16 engines do) */
	bool bf16;
};

int attn_prefill(const struct attn_prefill_args *a, struct err *e);
/* Arena bytes attn_prefill needs at most for n_tokens prefill tokens. */
size_t attn_prefill_scratch_bytes(int n_tokens, int n_heads, int nope_dim, int rope_dim, int v_dim, int kv_lora_rank,
				  int ws_rows, int n_threads);
/* Additional arena bytes of the DCP context gather (0 when dcp_size <= 1). */
size_t attn_prefill_dcp_scratch_bytes(int ws_rows, int dcp_size, int kv_lora_rank, int rope_dim);

#endif
