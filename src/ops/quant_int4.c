/* int4 weights (ops/quant_int4.h): quantized at load or repacked from a pack-quantized
 * checkpoint into 32-row blocks of 32-column groups; an element; the activations of W4A8 and
 * W4A16. */
#include "ops/quant_int4.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "ops/gemm_internal.h"
#include "ops/pool.h"
#include "ops/quant_int8.h"

#define QSTEP 7.5f /* (qmax - qmin) / 2 of [-8, 7]: compressed-tensors' symmetric scale */

/* group of block rb holding column c, in a buffer of blocks with `cols` columns */
static char *group_at(char *data, int cols, int rb, int c)
{
	return data + (size_t)rb * int4_block_bytes(cols) + (size_t)(c / INT4_GROUP) * INT4_GROUP_BYTES;
}

/* u = q + 8 of (r % 32, c % 32) into its group */
static void put_u(char *grp, int r, int c, int u)
{
	uint8_t *b = (uint8_t *)grp + int4_byte(r, c);
	*b = int4_high(c) ? (uint8_t)((*b & 0x0f) | u << 4) : (uint8_t)((*b & 0xf0) | u);
}

/* a block of blocks with every value q = 0 (u = 8) and every scale 0: the pad */
static void clear_block(char *blk, int cols)
{
	for (int g = 0; g < int4_groups(cols); g++) {
		memset(blk + (size_t)g * INT4_GROUP_BYTES, 0, INT4_HDR);
		memset(blk + (size_t)g * INT4_GROUP_BYTES + INT4_HDR, 0x88, INT4_GROUP_BYTES - INT4_HDR);
	}
}

struct wctx {
	const struct wmat *src;
	const int32_t *packed; /* quant_int4_from_packed's */
	const uint16_t *scale;
	int64_t ldp, lds;
	int r0, nr, c0, nc;
	char *data;
	atomic_int oom;
	atomic_llong first_bad; /* r * nc + c of the region's first weight (scale) not finite; LLONG_MAX: none */
};

/* the threads' blocks end in any order: keep the first */
static void note_bad(struct wctx *c, int r, int k)
{
	long long at = (long long)r * c->nc + k, cur = atomic_load(&c->first_bad);
	while (at < cur && !atomic_compare_exchange_weak(&c->first_bad, &cur, at))
		;
}

/* the caller's answer: 0, or -1 with the first bad (r, c) in the source ((-1, -1): out of memory) */
static int result(struct wctx *c, int *bad_r, int *bad_c)
{
	long long at = atomic_load(&c->first_bad);
	*bad_r = *bad_c = -1;
	if (atomic_load(&c->oom))
		return -1;
	if (at == LLONG_MAX)
		return 0;
	*bad_r = c->r0 + (int)(at / c->nc);
	*bad_c = c->c0 + (int)(at % c->nc);
	return -1;
}

/* n weights of src's row r from column c as floats (fp8: times their block scale) */
static void load_row(const struct wmat *src, int r, int c, int n, float *out)
{
	const char *p = (const char *)src->data + ((size_t)r * (size_t)src->ld + (size_t)c) * dtype_size(src->dtype);
	if (src->dtype == DT_F32)
		memcpy(out, p, sizeof(float) * (size_t)n);
	else if (src->dtype == DT_BF16)
		for (int j = 0; j < n; j++)
			out[j] = gemm_elem(DT_BF16, p, (size_t)j);
	else
		for (int j = 0; j < n; j++)
			out[j] = wmat_get(src, r, c + j);
}

/* one row's group of values v[n] (n <= 32) → its bf16 scale and nibbles against it (row i of
 * the block); *bad: the first value not finite (or -1) */
static uint16_t quant_group(const float *v, int n, char *grp, int i, int *bad)
{
	float amax = 0;
	for (int k = 0; k < n; k++) {
		float a = fabsf(v[k]);
		if (!(a <= FLT_MAX) && *bad < 0)
			*bad = k;
		amax = a > amax ? a : amax;
	}
	float s = amax / QSTEP;
	uint16_t sb = f32_to_bf16(s > FLT_EPSILON ? s : FLT_EPSILON); /* finite x: amax / 7.5 < bf16's max */
	s = bf16_to_f32(sb);
	for (int k = 0; k < n; k++) {
		float q = rintf(v[k] / s);
		q = q < -8.0f ? -8.0f : q > 7.0f ? 7.0f : q;
		put_u(grp, i, k, q == q ? (int)q + 8 : 8);
	}
	return sb;
}

static void quant_blocks(void *arg, int begin, int end, int tid)
{
	(void)tid;
	struct wctx *c = arg;
	float *row = malloc(sizeof(float) * (size_t)(c->nc > 0 ? c->nc : 1));
	if (!row) {
		atomic_store(&c->oom, 1);
		return;
	}
	for (int rb = begin; rb < end; rb++) {
		char *blk = c->data + (size_t)rb * int4_block_bytes(c->nc);
		clear_block(blk, c->nc);
		for (int i = 0; i < INT4_ROWS && rb * INT4_ROWS + i < c->nr; i++) {
			load_row(c->src, c->r0 + rb * INT4_ROWS + i, c->c0, c->nc, row);
			for (int a = 0; a < c->nc; a += INT4_GROUP) {
				char *grp = group_at(c->data, c->nc, rb, a);
				int n = c->nc - a < INT4_GROUP ? c->nc - a : INT4_GROUP, bad = -1;
				uint16_t s = quant_group(row + a, n, grp, i, &bad);
				memcpy(grp + 2 * (size_t)i, &s, 2);
				if (bad >= 0)
					note_bad(c, rb * INT4_ROWS + i, a + bad);
			}
		}
	}
	free(row);
}

int quant_int4_weights(struct pool *p, const struct wmat *src, int r0, int nr, int c0, int nc, char *data,
		       struct wmat *out, int *bad_r, int *bad_c)
{
	struct wctx c = {.src = src, .r0 = r0, .nr = nr, .c0 = c0, .nc = nc, .data = data};
	atomic_init(&c.oom, 0);
	atomic_init(&c.first_bad, LLONG_MAX);
	pool_for(p, int4_row_blocks(nr), 1, quant_blocks, &c);
	*out = (struct wmat){.dtype = DT_I4, .data = data, .rows = nr, .cols = nc, .ld = int4_x_ld(nc)};
	return result(&c, bad_r, bad_c);
}

/* ---- from a compressed-tensors checkpoint: the nibbles and bf16 scales moved, nothing rounded ---- */
static void repack_blocks(void *arg, int begin, int end, int tid)
{
	(void)tid;
	struct wctx *c = arg;
	for (int rb = begin; rb < end; rb++) {
		clear_block(c->data + (size_t)rb * int4_block_bytes(c->nc), c->nc);
		for (int i = 0; i < INT4_ROWS && rb * INT4_ROWS + i < c->nr; i++) {
			int r = c->r0 + rb * INT4_ROWS + i;
			for (int a = 0; a < c->nc; a += INT4_GROUP) {
				char *grp = group_at(c->data, c->nc, rb, a);
				uint16_t sb = c->scale[(size_t)r * (size_t)c->lds + (size_t)((c->c0 + a) / INT4_GROUP)];
				float s = bf16_to_f32(sb);
				if (!(s >= 0.0f && s <= FLT_MAX))
					note_bad(c, rb * INT4_ROWS + i, a);
				memcpy(grp + 2 * (size_t)i, &sb, 2);
				for (int k = a; k < c->nc && k < a + INT4_GROUP; k++) {
					int cc = c->c0 + k;
					uint32_t wd = (uint32_t)
							      c->packed[(size_t)r * (size_t)c->ldp + (size_t)(cc / 8)];
					put_u(grp, i, k, (int)(wd >> 4 * (cc % 8) & 15));
				}
			}
		}
	}
}

int quant_int4_from_packed(struct pool *p, const int32_t *packed, int64_t ldp, const uint16_t *scale, int64_t lds,
			   int r0, int nr, int c0, int nc, char *data, struct wmat *out, int *bad_r, int *bad_c)
{
	CHECK(c0 % INT4_GROUP == 0);
	struct wctx c = {.packed = packed,
			 .scale = scale,
			 .ldp = ldp,
			 .lds = lds,
			 .r0 = r0,
			 .nr = nr,
			 .c0 = c0,
			 .nc = nc,
			 .data = data};
	atomic_init(&c.oom, 0);
	atomic_init(&c.first_bad, LLONG_MAX);
	pool_for(p, int4_row_blocks(nr), 1, repack_blocks, &c);
	*out = (struct wmat){
		.dtype = DT_I4, .data = data, .rows = nr, .cols = nc, .ld = int4_x_ld(nc), .row0 = r0, .col0 = c0};
	return result(&c, bad_r, bad_c);
}

int quant_int4_q(const struct wmat *w, int r, int c)
{
	const uint8_t b = (const uint8_t)int4_group(w, r / INT4_ROWS, c / INT4_GROUP)[int4_byte(r, c)];
	return (int4_high(c) ? b >> 4 : b & 15) - 8;
}

float quant_int4_get(const struct wmat *w, int r, int c)
{
	return (float)quant_int4_q(w, r, c) * int4_scale(int4_group(w, r / INT4_ROWS, c / INT4_GROUP), r % INT4_ROWS);
}

/* ---- activations ---- */
void quant_int4_x(const float *x, int cols, int8_t *qx, float *sx, int32_t *sums)
{
	/* the int8 row's quantizer (offset by 128) in place, then signed */
	uint8_t *qu = (uint8_t *)qx;
	quant_int8_row(x, cols, qu, sx);
	int ld = int4_x_ld(cols);
	for (int k = 0; k < ld; k++)
		qx[k] = k < cols ? (int8_t)(qu[k] - 128) : 0;
	for (int g = 0; g < int4_groups(cols); g++) {
		int32_t s = 0;
		for (int k = 0; k < INT4_GROUP; k++)
			s += qx[g * INT4_GROUP + k];
		sums[g] = -8 * s;
	}
}

void quant_int4_x_bf16(const float *x, int cols, uint16_t *xb)
{
	static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7}; /* the chunk's decoded pairs (gemm_int4.c) */
	int ld = int4_x_ld(cols);
	for (int k = 0; k < ld; k++) {
		int c = k / 8 * 8 + order[k % 8];
		xb[k] = c < cols ? f32_to_bf16(x[c]) : 0;
	}
}
