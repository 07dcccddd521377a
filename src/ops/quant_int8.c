#include "ops/quant_int8.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "ops/cpu.h"
#include "ops/gemm_internal.h"
#include "ops/pool.h"

#define QMAX 127.0f

/* the scale of a group with max |v| amax (finite: no NaN or infinity in it) */
static float group_scale(float amax, int finite) { return finite ? amax / QMAX : NAN; }

/* rint(v / s) clamped to ±127; 0 when s is 0 (an all-zero group) or not finite */
static int quant_one(float v, float s)
{
	if (!(s > 0.0f) || !(s <= FLT_MAX))
		return 0;
	float q = rintf(v / s);
	if (q != q) /* a NaN v (its group's scale is NaN: not reached) */
		return 0;
	return q < -QMAX ? -127 : q > QMAX ? 127 : (int)q;
}

struct wctx {
	const struct wmat *src;
	int r0, nr, c0, nc;
	char *data;
	int failed; /* some block had a non-finite weight (its scales are NaN) */
};

/* n weights of src's row r from column c as floats (fp8: times their block scale) */
static void load_row(const struct wmat *src, int r, int c, int n, float *out)
{
	const char *p = (const char *)src->data + ((size_t)r * (size_t)src->ld + (size_t)c) * dtype_size(src->dtype);
	switch (src->dtype) {
	case DT_F32: memcpy(out, p, sizeof(float) * (size_t)n); break;
	case DT_BF16:
	case DT_F16:
		for (int j = 0; j < n; j++) {
			uint16_t h;
			memcpy(&h, p + 2 * (size_t)j, 2);
			out[j] = src->dtype == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
		}
		break;
	default:
		for (int j = 0; j < n; j++)
			out[j] = wmat_get(src, r, c + j);
	}
}

/* row blocks [begin, end) of the region: each row as floats, quantized as an activation row
 * is (the same definition), its bytes then moved into the block's steps */
static void quant_blocks(void *arg, int begin, int end, int tid)
{
	(void)tid;
	struct wctx *c = arg;
	int G = int8_groups(c->nc);
	float *row = malloc(sizeof(float) * (size_t)c->nc + sizeof(float) * (size_t)G);
	uint8_t *qu = malloc((size_t)int8_cols_pad(c->nc));
	if (!row || !qu) { /* the caller reports it as out of memory */
		free(row), free(qu);
		c->failed = 2;
		return;
	}
	float *rs = row + c->nc;
	for (int rb = begin; rb < end; rb++) {
		char *blk = c->data + (size_t)rb * int8_block_bytes(c->nc);
		memset(blk, 0, int8_block_bytes(c->nc)); /* pad rows: zero weights, scales and sums */
		for (int i = 0; i < INT8_ROWS && rb * INT8_ROWS + i < c->nr; i++) {
			load_row(c->src, c->r0 + rb * INT8_ROWS + i, c->c0, c->nc, row);
			quant_int8_row(row, c->nc, qu, rs);
			for (int g = 0; g < G; g++) {
				int a = g * INT8_GROUP, b = a + INT8_GROUP < c->nc ? a + INT8_GROUP : c->nc;
				char *grp = blk + (size_t)g * INT8_GROUP_BYTES;
				if (isnan(rs[g]))
					c->failed = 1;
				int32_t sum = 0;
				for (int k = a; k < b; k++) {
					int q = (int)qu[k] - 128;
					grp[INT8_HDR + (size_t)(k % INT8_GROUP / 4) * INT8_STEP + (size_t)(4 * i + k % 4)] =
						(char)(int8_t)q;
					sum += q;
				}
				int32_t qs = 128 * sum;
				memcpy(grp + 4 * (size_t)i, &rs[g], 4);
				memcpy(grp + 128 + 4 * (size_t)i, &qs, 4);
			}
		}
	}
	free(row);
	free(qu);
}

int quant_int8_weights(struct pool *p, const struct wmat *src, int r0, int nr, int c0, int nc, char *data,
		       struct wmat *out, int *bad_r, int *bad_c)
{
	struct wctx c = {src, r0, nr, c0, nc, data, 0};
	pool_for(p, int8_row_blocks(nr), 1, quant_blocks, &c);
	*out = (struct wmat){.dtype = DT_I8, .data = data, .rows = nr, .cols = nc, .ld = nc};
	*bad_r = *bad_c = -1;
	if (c.failed == 1) /* name the first bad weight */
		for (int r = r0; r < r0 + nr; r++)
			for (int k = c0; k < c0 + nc; k++)
				if (!(fabsf(wmat_get(src, r, k)) <= FLT_MAX)) {
					*bad_r = r;
					*bad_c = k;
					return -1;
				}
	return c.failed ? -1 : 0;
}

float quant_int8_get(const struct wmat *w, int r, int c)
{
	int8_t q = ((const int8_t *)w->data)[int8_index(w->cols, r, c)];
	return (float)q * int8_scales(int8_group(w, r / INT8_ROWS, c / INT8_GROUP))[r % INT8_ROWS];
}

/* ---- activations ---- */

/* max(amax, |x[a, b)|); *finite cleared by a NaN or infinity */
static float amax_from(const float *x, int a, int b, float amax, int *finite)
{
	for (int k = a; k < b; k++) {
		float v = fabsf(x[k]);
		*finite &= v <= FLT_MAX;
		amax = v > amax ? v : amax;
	}
	return amax;
}

static void row_portable(const float *x, int cols, uint8_t *qxu, float *sx)
{
	for (int a = 0, g = 0; a < cols; a += INT8_GROUP, g++) {
		int b = a + INT8_GROUP < cols ? a + INT8_GROUP : cols, finite = 1;
		float amax = amax_from(x, a, b, 0.0f, &finite);
		float s = group_scale(amax, finite);
		sx[g] = s;
		for (int k = a; k < b; k++)
			qxu[k] = (uint8_t)(quant_one(x[k], s) + 128);
	}
}

#define A2 __attribute__((target("avx2,fma")))

/* the same, 8 lanes at a time: vdivps and round-to-nearest-even are the scalar operations */
static A2 void row_avx2(const float *x, int cols, uint8_t *qxu, float *sx)
{
	const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), big = _mm256_set1_ps(FLT_MAX);
	for (int a = 0, g = 0; a < cols; a += INT8_GROUP, g++) {
		int b = a + INT8_GROUP < cols ? a + INT8_GROUP : cols, bv = a + (b - a) / 8 * 8;
		__m256 m = _mm256_setzero_ps();
		int finite = 1;
		for (int k = a; k < bv; k += 8) {
			__m256 v = _mm256_and_ps(_mm256_loadu_ps(x + k), absm);
			finite &= _mm256_movemask_ps(_mm256_cmp_ps(v, big, _CMP_LE_OQ)) == 0xff;
			m = _mm256_max_ps(m, v);
		}
		__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
		h = _mm_max_ps(h, _mm_movehl_ps(h, h));
		h = _mm_max_ss(h, _mm_movehdup_ps(h));
		float amax = amax_from(x, bv, b, _mm_cvtss_f32(h), &finite);
		float s = group_scale(amax, finite);
		sx[g] = s;
		if (!(s > 0.0f) || !(s <= FLT_MAX)) {
			memset(qxu + a, 128, (size_t)(b - a));
			continue;
		}
		const __m256 sv = _mm256_set1_ps(s), lo = _mm256_set1_ps(-QMAX), hi = _mm256_set1_ps(QMAX);
		for (int k = a; k < bv; k += 8) {
			__m256 q = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + k), sv),
						   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
			__m256i qi = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(q, lo), hi)),
						      _mm256_set1_epi32(128));
			__m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
			_mm_storel_epi64((__m128i *)(void *)(qxu + k), _mm_packus_epi16(w16, w16));
		}
		for (int k = bv; k < b; k++)
			qxu[k] = (uint8_t)(quant_one(x[k], s) + 128);
	}
}

void quant_int8_row(const float *x, int cols, uint8_t *qxu, float *sx)
{
	if (ops_level_best() >= OPS_AVX2)
		row_avx2(x, cols, qxu, sx);
	else
		row_portable(x, cols, qxu, sx);
	for (int k = cols; k < int8_cols_pad(cols); k++)
		qxu[k] = 128;
}
