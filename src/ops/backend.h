/* The compute seam: the operations a forward step calls on its activations, behind a table
 * (struct ops_backend), and where they run (struct compute_ctx). The CPU implementation
 * (backend_cpu.c) wraps the kernels of ops/ over the thread pool; a device backend would
 * implement the same table on its own memory, carrying its stream and workspace in the
 * context, so that model/forward.c and the attention code name neither.
 *
 * Every buffer argument is memory of the backend (host memory for the CPU); sizes are in
 * elements; d is a row's width, ld a row stride. bf16 rounding is round-to-nearest-even as
 * ops_round_bf16, applied once a value is final. */
#ifndef MLA_OPS_BACKEND_H
#define MLA_OPS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"

struct pool;
struct arena;
struct gemm_job;
struct wmat;
struct rope;
struct route_params;
struct ops_backend;

/* The execution context of a step, handed to every operation and attention call */
struct compute_ctx {
	const struct ops_backend *ops; /* the operations (NULL where only the attention runs) */
	struct pool *pool;             /* the CPU's workers (NULL: inline on the caller) */
	struct arena *scratch;         /* the step's temporaries, reset every step */
};

/* MLA's per-token q / latent step between the projections and attention: the latent norm on
 * kv_c, RoPE on q_pe of every head and on k_pe at the token's position, then both rows
 * rounded to bf16 (round_bf16) */
struct ops_mla_rope {
	const struct rope *rope;
	float *q;            /* [n, H, dn+dr]: each head's rope part is its last dr values */
	float *kv;           /* [n, Lkv+dr]: kv_c then k_pe */
	const float *norm_w; /* [Lkv] the latent norm's weight */
	float eps;
	const int32_t *pos; /* [n] */
	int n, H, dn, dr, Lkv;
	bool round_bf16;
};

struct ops_backend {
	const char *name;
	/* Every job's y = x · Wᵀ (ops/gemm.h's struct gemm_job: any weight format), in one
	 * parallel region; the lm_head's logits are one of them. */
	void (*gemm)(const struct compute_ctx *cx, int n_jobs, const struct gemm_job *jobs);
	/* y[t] = x[t] / rms(x[t]) · w for n rows of d (y may be x), then rounded (round_bf16) */
	void (*rmsnorm)(const struct compute_ctx *cx, float *y, int ldy, const float *x, int ldx, const float *w,
			int n, int d, float eps, bool round_bf16);
	void (*mla_rope)(const struct compute_ctx *cx, const struct ops_mla_rope *a);
	/* out = silu(g) · u over n values (out may be g), then rounded (round_bf16) */
	void (*swiglu)(const struct compute_ctx *cx, float *out, const float *g, const float *u, size_t n,
		       bool round_bf16);
	/* x rounded to bf16 in place */
	void (*round_bf16)(const struct compute_ctx *cx, float *x, size_t n);
	/* h += y over n values, then rounded (round_bf16): the residual adds */
	void (*add)(const struct compute_ctx *cx, float *h, const float *y, size_t n, bool round_bf16);
	/* MoE routing (ops/route.h) of n tokens: logits [n, E] → ids, w [n, top_k] */
	void (*moe_route)(const struct compute_ctx *cx, const struct route_params *p, const float *logits, int n,
			  int *ids, float *w);
	/* grouping by expert: xg[slot_of[t*k + s]] = x[t] for n tokens of d values, k slots each */
	void (*moe_gather)(const struct compute_ctx *cx, float *xg, const float *x, const int *slot_of, int n, int k,
			   int d);
	/* routed[t] = Σ_s tw[j] · dd[j] over the token's slots j = slot_of[t*k + s]; with h (NULL
	 * under tensor parallelism: routed is a partial sum), h[t] += routed[t] as the residual,
	 * both rounded (round_bf16) */
	void (*moe_combine)(const struct compute_ctx *cx, float *routed, float *h, const float *dd, const float *tw,
			    const int *slot_of, int n, int k, int d, bool round_bf16);
	/* The KV cache write: row slots[i] of the table `rows` ([*, row] of dtype, DT_F32 or
	 * DT_BF16) = [a[i] (na values) | b[i] (row - na)], converted; slots < 0 are skipped */
	void (*kv_write)(const struct compute_ctx *cx, void *rows, enum dtype dtype, int row, int na,
			 const int64_t *slots, int n, const float *a, int lda, const float *b, int ldb);
	/* h[t] = row tokens[t] of the embedding as fp32 (its first d values), n rows */
	void (*embed)(const struct compute_ctx *cx, const struct wmat *embed, const int32_t *tokens, int n, int d,
		      float *h);
	/* dst[i] = src[rows ? rows[i] : i] for n rows of d values */
	void (*copy_rows)(const struct compute_ctx *cx, float *dst, int ldd, const float *src, int lds,
			  const int32_t *rows, int n, int d);
	/* x[0..n) = 0 */
	void (*zero)(const struct compute_ctx *cx, float *x, size_t n);
};

/* The CPU implementation: ops/ kernels over cx->pool */
extern const struct ops_backend ops_backend_cpu;

/* The CPU's kv_write, which attn/kv_cache.c shares */
void ops_rows_write(void *rows, enum dtype dtype, int row, int na, const int64_t *slots, int n, const float *a,
		    int lda, const float *b, int ldb);

#endif
