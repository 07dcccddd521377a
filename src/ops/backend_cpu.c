/* The CPU ops backend (ops/backend.h): the kernels of ops/ spread over the thread pool. The
 * elementwise work is the step's serial fraction, so it runs in chunks over the pool too. */
#include <string.h>

#include "ops/backend.h"
#include "ops/gemm.h"
#include "ops/pool.h"
#include "ops/rope.h"
#include "ops/route.h"
#include "ops/vec.h"

/* One pool_for's arguments, whichever operation it runs */
struct ew_ctx {
	float *out, *y;
	const float *a, *b, *w;
	size_t n; /* values of the elementwise ones */
	int d, lda, ldy, k;
	float eps;
	bool round;
	const int *slot_of;
	const float *tw;
	const struct ops_mla_rope *qk;
};

#define EW_CHUNK 8192

/* the values [i0, i1) of chunks [begin, end) */
static void chunk_span(const struct ew_ctx *c, int begin, int end, size_t *i0, size_t *i1)
{
	*i0 = (size_t)begin * EW_CHUNK;
	*i1 = (size_t)end * EW_CHUNK;
	if (*i1 > c->n)
		*i1 = c->n;
}

static int n_chunks(size_t n) { return (int)((n + EW_CHUNK - 1) / EW_CHUNK); }

static void cpu_gemm(const struct compute_ctx *cx, int n_jobs, const struct gemm_job *jobs)
{
	ops_gemm_multi(cx->pool, n_jobs, jobs);
}

static void norm_range(void *arg, int begin, int end, int tid)
{
	const struct ew_ctx *c = arg;
	ops_rmsnorm(c->y + (size_t)begin * c->ldy, c->ldy, c->a + (size_t)begin * c->lda, c->lda, c->w, end - begin,
		    c->d, c->eps);
	if (c->round)
		for (int t = begin; t < end; t++)
			ops_round_bf16(c->y + (size_t)t * c->ldy, c->d);
}

static void cpu_rmsnorm(const struct compute_ctx *cx, float *y, int ldy, const float *x, int ldx, const float *w,
			int n, int d, float eps, bool round_bf16)
{
	struct ew_ctx c = {.y = y, .ldy = ldy, .a = x, .lda = ldx, .w = w, .d = d, .eps = eps, .round = round_bf16};
	pool_for(cx->pool, n, 16, norm_range, &c);
}

static void qk_range(void *arg, int begin, int end, int tid)
{
	const struct ops_mla_rope *a = ((const struct ew_ctx *)arg)->qk;
	int qw = a->H * (a->dn + a->dr), row = a->Lkv + a->dr;
	for (int t = begin; t < end; t++) {
		float *q = a->q + (size_t)t * qw, *kv = a->kv + (size_t)t * row;
		ops_rmsnorm(kv, row, kv, row, a->norm_w, 1, a->Lkv, a->eps);
		ops_rope_apply(a->rope, q + a->dn, a->H, a->dn + a->dr, a->pos[t]);
		ops_rope_apply(a->rope, kv + a->Lkv, 1, row, a->pos[t]);
		if (a->round_bf16) {
			ops_round_bf16(q, qw);
			ops_round_bf16(kv, row);
		}
	}
}

static void cpu_mla_rope(const struct compute_ctx *cx, const struct ops_mla_rope *a)
{
	struct ew_ctx c = {.qk = a};
	pool_for(cx->pool, a->n, 4, qk_range, &c);
}

static void silu_range(void *arg, int begin, int end, int tid)
{
	const struct ew_ctx *c = arg;
	size_t i0, i1;
	chunk_span(c, begin, end, &i0, &i1);
	ops_silu_mul(c->out + i0, c->a + i0, c->b + i0, (int)(i1 - i0));
	if (c->round)
		ops_round_bf16(c->out + i0, (int64_t)(i1 - i0));
}

static void cpu_swiglu(const struct compute_ctx *cx, float *out, const float *g, const float *u, size_t n,
		       bool round_bf16)
{
	struct ew_ctx c = {.out = out, .a = g, .b = u, .n = n, .round = round_bf16};
	pool_for(cx->pool, n_chunks(n), 1, silu_range, &c);
}

static void round_range(void *arg, int begin, int end, int tid)
{
	const struct ew_ctx *c = arg;
	size_t i0, i1;
	chunk_span(c, begin, end, &i0, &i1);
	ops_round_bf16(c->out + i0, (int64_t)(i1 - i0));
}

static void cpu_round_bf16(const struct compute_ctx *cx, float *x, size_t n)
{
	if (n <= EW_CHUNK) { /* not worth waking the pool */
		ops_round_bf16(x, (int64_t)n);
		return;
	}
	struct ew_ctx c = {.out = x, .n = n};
	pool_for(cx->pool, n_chunks(n), 1, round_range, &c);
}

static void add_range(void *arg, int begin, int end, int tid)
{
	const struct ew_ctx *c = arg;
	size_t i0, i1;
	chunk_span(c, begin, end, &i0, &i1);
	for (size_t i = i0; i < i1; i++)
		c->out[i] += c->a[i];
	if (c->round)
		ops_round_bf16(c->out + i0, (int64_t)(i1 - i0));
}

static void cpu_add(const struct compute_ctx *cx, float *h, const float *y, size_t n, bool round_bf16)
{
	struct ew_ctx c = {.out = h, .a = y, .n = n, .round = round_bf16};
	if (n <= EW_CHUNK)
		add_range(&c, 0, n_chunks(n), 0);
	else
		pool_for(cx->pool, n_chunks(n), 1, add_range, &c);
}

/* serial: a token's routing is short, and the host reads the choices next anyway */
static void cpu_moe_route(const struct compute_ctx *cx, const struct route_params *p, const float *logits, int n,
			  int *ids, float *w)
{
	int E = p->n_experts, k = p->top_k;
	for (int t = 0; t < n; t++)
		ops_moe_route(p, logits + (size_t)t * E, ids + (size_t)t * k, w + (size_t)t * k);
}

static void gather_range(void *arg, int begin, int end, int tid)
{
	const struct ew_ctx *c = arg;
	for (int t = begin; t < end; t++)
		for (int s = 0; s < c->k; s++)
			memcpy(c->out + (size_t)c->slot_of[t * c->k + s] * c->d, c->a + (size_t)t * c->d,
			       sizeof(float) * (size_t)c->d);
}

static void cpu_moe_gather(const struct compute_ctx *cx, float *xg, const float *x, const int *slot_of, int n, int k,
			   int d)
{
	struct ew_ctx c = {.out = xg, .a = x, .d = d, .k = k, .slot_of = slot_of};
	pool_for(cx->pool, n, 4, gather_range, &c);
}

static void combine_range(void *arg, int begin, int end, int tid)
{
	const struct ew_ctx *c = arg;
	int D = c->d;
	for (int t = begin; t < end; t++) {
		float *r = c->out + (size_t)t * D, *h = c->y ? c->y + (size_t)t * D : NULL;
		memset(r, 0, sizeof(float) * (size_t)D);
		for (int s = 0; s < c->k; s++) {
			int j = c->slot_of[t * c->k + s];
			ops_axpy(r, c->tw[j], c->b + (size_t)j * D, D);
		}
		if (!h) /* tensor parallel: a partial sum, rounded after the all-reduce */
			continue;
		if (c->round)
			ops_round_bf16(r, D);
		for (int i = 0; i < D; i++)
			h[i] += r[i];
		if (c->round)
			ops_round_bf16(h, D);
	}
}

static void cpu_moe_combine(const struct compute_ctx *cx, float *routed, float *h, const float *dd, const float *tw,
			    const int *slot_of, int n, int k, int d, bool round_bf16)
{
	struct ew_ctx c = {
		.out = routed, .y = h, .b = dd, .d = d, .k = k, .slot_of = slot_of, .tw = tw, .round = round_bf16};
	pool_for(cx->pool, n, 4, combine_range, &c);
}

static void put(void *dst, enum dtype dtype, int off, const float *src, int n)
{
	if (dtype == DT_F32) {
		memcpy((float *)dst + off, src, (size_t)n * sizeof(float));
		return;
	}
	uint16_t *h = (uint16_t *)dst + off;
	for (int i = 0; i < n; i++)
		h[i] = f32_to_bf16(src[i]);
}

void ops_rows_write(void *rows, enum dtype dtype, int row, int na, const int64_t *slots, int n, const float *a,
		    int lda, const float *b, int ldb)
{
	size_t rb = (size_t)row * dtype_size(dtype);
	for (int i = 0; i < n; i++) {
		if (slots[i] < 0)
			continue;
		void *r = (unsigned char *)rows + (size_t)slots[i] * rb;
		put(r, dtype, 0, a + (size_t)i * lda, na);
		put(r, dtype, na, b + (size_t)i * ldb, row - na);
	}
}

static void cpu_kv_write(const struct compute_ctx *cx, void *rows, enum dtype dtype, int row, int na,
			 const int64_t *slots, int n, const float *a, int lda, const float *b, int ldb)
{
	ops_rows_write(rows, dtype, row, na, slots, n, a, lda, b, ldb);
}

static void cpu_embed(const struct compute_ctx *cx, const struct wmat *embed, const int32_t *tokens, int n, int D,
		      float *h)
{
	for (int t = 0; t < n; t++)
		for (int i = 0; i < D; i++)
			h[(size_t)t * D + i] = wmat_get(embed, tokens[t], i);
}

static void cpu_copy_rows(const struct compute_ctx *cx, float *dst, int ldd, const float *src, int lds,
			  const int32_t *rows, int n, int d)
{
	for (int i = 0; i < n; i++)
		memcpy(dst + (size_t)i * ldd, src + (size_t)(rows ? rows[i] : i) * lds, sizeof(float) * (size_t)d);
}

static void cpu_zero(const struct compute_ctx *cx, float *x, size_t n) { memset(x, 0, sizeof(float) * n); }

const struct ops_backend ops_backend_cpu = {
	.name = "cpu",
	.gemm = cpu_gemm,
	.rmsnorm = cpu_rmsnorm,
	.mla_rope = cpu_mla_rope,
	.swiglu = cpu_swiglu,
	.round_bf16 = cpu_round_bf16,
	.add = cpu_add,
	.moe_route = cpu_moe_route,
	.moe_gather = cpu_moe_gather,
	.moe_combine = cpu_moe_combine,
	.kv_write = cpu_kv_write,
	.embed = cpu_embed,
	.copy_rows = cpu_copy_rows,
	.zero = cpu_zero,
};
