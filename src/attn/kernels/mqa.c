/* Paged MQA over the latent cache (docs/mla-dcp.md §2.6): scores = scale * q576 . row,
 * online softmax, out = sum p * kv_c. AMX (mqa_amx.c), AVX-512 (mqa_avx512.c) and AVX2+FMA
 * inner loops with a portable fallback. */
#include "attn/kernels/mqa.h"

#include <immintrin.h>
#include <sched.h>
#include <math.h>
#include <string.h>

#include "attn/kv_cache.h"
#include "attn/kernels/kv_fp8.h"
#include "attn/kernels/mqa_amx.h"
#include "attn/kernels/mqa_avx512.h"

int mqa_tile_tokens(int n_heads)
{
	int t = MQA_TILE_ROWS / (n_heads > 0 ? n_heads : 1);
	return t > 0 ? t : 1;
}

int mqa_cpu_count(void)
{
	cpu_set_t set;
	return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* q as bf16 rows, or packed for the AMX scores (rows padded to 16) */
static size_t q_bf16_bytes(int max_rows, int row)
{
	size_t rows = (size_t)max_rows * row * sizeof(uint16_t), amx = mqa_amx_q_words(max_rows, row) * 4;
	return rows > amx ? rows : amx;
}

size_t mqa_scratch_bytes(int max_rows, int row)
{
	/* blocks of up to MQA_KEY_BLOCK_WIDE keys (AMX), converted keys for MQA_KEY_BLOCK (the
	 * other levels) */
	return align64((size_t)MQA_KEY_BLOCK * row * sizeof(float)) +                  /* converted keys */
	       align64((size_t)max_rows * MQA_KEY_BLOCK_WIDE * sizeof(float)) +        /* scores */
	       3 * align64((size_t)MQA_KEY_BLOCK_WIDE * sizeof(float *)) +             /* key row pointers */
	       4 * align64((size_t)max_rows * sizeof(float)) +                         /* m, l, alpha, n */
	       align64(q_bf16_bytes(max_rows, row)) +                                  /* q as bf16 */
	       align64((size_t)max_rows * MQA_KEY_BLOCK_WIDE / 2 * sizeof(uint32_t)) + /* bf16 P pairs */
	       align64(mqa_amx_work_bytes(row)) +                                 /* AMX key copies, value tiles */
	       2 * align64((size_t)MQA_KEY_BLOCK_WIDE * row * sizeof(uint16_t)) + /* fp8 rows decoded to bf16 */
	       align64((size_t)MQA_KEY_BLOCK_WIDE * sizeof(void *));              /* their pointers */
}

void mqa_workspace_reserve(struct mqa_workspace *w, struct arena *a, int n_threads, size_t per_thread)
{
	per_thread = align64(per_thread);
	if (w->mem && w->n_threads >= n_threads && w->per_thread >= per_thread)
		return;
	w->mem = arena_alloc(a, (size_t)n_threads * per_thread);
	w->n_threads = n_threads;
	w->per_thread = per_thread;
}

/* ---- portable kernels ---- */

/* s[i * KB + j] = scale * q_i . k_j for i < nr, j < nk */
static void scores_portable(const float *q, int nr, int row, const float *const *kp, int nk, float scale, float *s)
{
	for (int i = 0; i < nr; i++)
		for (int j = 0; j < nk; j++) {
			const float *a = q + (size_t)i * row, *b = kp[j];
			float acc = 0;
			for (int d = 0; d < row; d++)
				acc += a[d] * b[d];
			s[i * MQA_KEY_BLOCK + j] = acc * scale;
		}
}

/* o = o * alpha + sum_j p[j] * v_j[0:dv] */
static void accum_portable(float *o, float alpha, const float *p, const float *const *kp, int nk, int dv)
{
	for (int d = 0; d < dv; d++)
		o[d] *= alpha;
	for (int j = 0; j < nk; j++) {
		const float *v = kp[j];
		float pj = p[j];
		for (int d = 0; d < dv; d++)
			o[d] += pj * v[d];
	}
}

static void bf16_row_portable(float *dst, const uint16_t *src, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] = bf16_to_f32(src[i]);
}

/* ---- AVX2 + FMA kernels ---- */

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline float hsum8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

AVX2 static float dot_avx2(const float *a, const float *b, int n)
{
	__m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
	int d = 0;
	for (; d + 16 <= n; d += 16) {
		acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc0);
		acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + 8), _mm256_loadu_ps(b + d + 8), acc1);
	}
	for (; d + 8 <= n; d += 8)
		acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc0);
	float s = hsum8(_mm256_add_ps(acc0, acc1));
	for (; d < n; d++)
		s += a[d] * b[d];
	return s;
}

/* 2 query rows x 4 keys per pass: 8 independent FMA chains, each q / k load used 4 / 2 times */
AVX2 static void scores_avx2(const float *q, int nr, int row, const float *const *kp, int nk, float scale, float *s)
{
	int n8 = row & ~7;
	int i = 0;
	for (; i + 2 <= nr; i += 2) {
		const float *q0 = q + (size_t)i * row, *q1 = q0 + row;
		int j = 0;
		for (; j + 4 <= nk; j += 4) {
			const float *k0 = kp[j], *k1 = kp[j + 1], *k2 = kp[j + 2], *k3 = kp[j + 3];
			__m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
			__m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
			for (int d = 0; d < n8; d += 8) {
				__m256 x0 = _mm256_loadu_ps(q0 + d), x1 = _mm256_loadu_ps(q1 + d);
				__m256 y = _mm256_loadu_ps(k0 + d);
				a00 = _mm256_fmadd_ps(x0, y, a00);
				a10 = _mm256_fmadd_ps(x1, y, a10);
				y = _mm256_loadu_ps(k1 + d);
				a01 = _mm256_fmadd_ps(x0, y, a01);
				a11 = _mm256_fmadd_ps(x1, y, a11);
				y = _mm256_loadu_ps(k2 + d);
				a02 = _mm256_fmadd_ps(x0, y, a02);
				a12 = _mm256_fmadd_ps(x1, y, a12);
				y = _mm256_loadu_ps(k3 + d);
				a03 = _mm256_fmadd_ps(x0, y, a03);
				a13 = _mm256_fmadd_ps(x1, y, a13);
			}
			float r[8] = {hsum8(a00), hsum8(a01), hsum8(a02), hsum8(a03),
				      hsum8(a10), hsum8(a11), hsum8(a12), hsum8(a13)};
			for (int d = n8; d < row; d++)
				for (int c = 0; c < 4; c++) {
					r[c] += q0[d] * kp[j + c][d];
					r[4 + c] += q1[d] * kp[j + c][d];
				}
			for (int c = 0; c < 4; c++) {
				s[i * MQA_KEY_BLOCK + j + c] = r[c] * scale;
				s[(i + 1) * MQA_KEY_BLOCK + j + c] = r[4 + c] * scale;
			}
		}
		for (; j < nk; j++) {
			s[i * MQA_KEY_BLOCK + j] = dot_avx2(q0, kp[j], row) * scale;
			s[(i + 1) * MQA_KEY_BLOCK + j] = dot_avx2(q1, kp[j], row) * scale;
		}
	}
	for (; i < nr; i++)
		for (int j = 0; j < nk; j++)
			s[i * MQA_KEY_BLOCK + j] = dot_avx2(q + (size_t)i * row, kp[j], row) * scale;
}

/* o = o * alpha + sum_j p[j] v_j: 64 outputs held in 8 named registers across all keys
 * (an array here would live on the stack) */
AVX2 static void accum_avx2(float *o, float alpha, const float *p, const float *const *kp, int nk, int dv)
{
	__m256 al = _mm256_set1_ps(alpha);
	int d = 0;
	for (; d + 64 <= dv; d += 64) {
		__m256 r0 = _mm256_mul_ps(_mm256_loadu_ps(o + d), al);
		__m256 r1 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 8), al);
		__m256 r2 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 16), al);
		__m256 r3 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 24), al);
		__m256 r4 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 32), al);
		__m256 r5 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 40), al);
		__m256 r6 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 48), al);
		__m256 r7 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 56), al);
		for (int j = 0; j < nk; j++) {
			__m256 pj = _mm256_broadcast_ss(p + j);
			const float *v = kp[j] + d;
			r0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v), r0);
			r1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8), r1);
			r2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 16), r2);
			r3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 24), r3);
			r4 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 32), r4);
			r5 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 40), r5);
			r6 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 48), r6);
			r7 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 56), r7);
		}
		_mm256_storeu_ps(o + d, r0);
		_mm256_storeu_ps(o + d + 8, r1);
		_mm256_storeu_ps(o + d + 16, r2);
		_mm256_storeu_ps(o + d + 24, r3);
		_mm256_storeu_ps(o + d + 32, r4);
		_mm256_storeu_ps(o + d + 40, r5);
		_mm256_storeu_ps(o + d + 48, r6);
		_mm256_storeu_ps(o + d + 56, r7);
	}
	for (; d + 8 <= dv; d += 8) {
		__m256 r = _mm256_mul_ps(_mm256_loadu_ps(o + d), al);
		for (int j = 0; j < nk; j++)
			r = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(kp[j] + d), r);
		_mm256_storeu_ps(o + d, r);
	}
	for (; d < dv; d++) {
		float r = o[d] * alpha;
		for (int j = 0; j < nk; j++)
			r += p[j] * kp[j][d];
		o[d] = r;
	}
}

/* Two rows at once: every value load feeds two FMAs. 32 outputs per row per pass. */
AVX2 static void accum2_avx2(float *oa, float *ob, float aa, float ab, const float *pa, const float *pb,
			     const float *const *kp, int nk, int dv)
{
	if (dv % 32) {
		accum_avx2(oa, aa, pa, kp, nk, dv);
		accum_avx2(ob, ab, pb, kp, nk, dv);
		return;
	}
	__m256 va = _mm256_set1_ps(aa), vb = _mm256_set1_ps(ab);
	for (int d = 0; d < dv; d += 32) {
		__m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(oa + d), va);
		__m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(oa + d + 8), va);
		__m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(oa + d + 16), va);
		__m256 a3 = _mm256_mul_ps(_mm256_loadu_ps(oa + d + 24), va);
		__m256 b0 = _mm256_mul_ps(_mm256_loadu_ps(ob + d), vb);
		__m256 b1 = _mm256_mul_ps(_mm256_loadu_ps(ob + d + 8), vb);
		__m256 b2 = _mm256_mul_ps(_mm256_loadu_ps(ob + d + 16), vb);
		__m256 b3 = _mm256_mul_ps(_mm256_loadu_ps(ob + d + 24), vb);
		for (int j = 0; j < nk; j++) {
			__m256 x = _mm256_broadcast_ss(pa + j), y = _mm256_broadcast_ss(pb + j);
			const float *v = kp[j] + d;
			__m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
			a0 = _mm256_fmadd_ps(x, v0, a0);
			b0 = _mm256_fmadd_ps(y, v0, b0);
			a1 = _mm256_fmadd_ps(x, v1, a1);
			b1 = _mm256_fmadd_ps(y, v1, b1);
			v0 = _mm256_loadu_ps(v + 16);
			v1 = _mm256_loadu_ps(v + 24);
			a2 = _mm256_fmadd_ps(x, v0, a2);
			b2 = _mm256_fmadd_ps(y, v0, b2);
			a3 = _mm256_fmadd_ps(x, v1, a3);
			b3 = _mm256_fmadd_ps(y, v1, b3);
		}
		_mm256_storeu_ps(oa + d, a0);
		_mm256_storeu_ps(oa + d + 8, a1);
		_mm256_storeu_ps(oa + d + 16, a2);
		_mm256_storeu_ps(oa + d + 24, a3);
		_mm256_storeu_ps(ob + d, b0);
		_mm256_storeu_ps(ob + d + 8, b1);
		_mm256_storeu_ps(ob + d + 16, b2);
		_mm256_storeu_ps(ob + d + 24, b3);
	}
}

AVX2 static void bf16_row_avx2(float *dst, const uint16_t *src, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(src + i));
		__m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
		_mm256_storeu_ps(dst + i, _mm256_castsi256_ps(w));
	}
	for (; i < n; i++)
		dst[i] = bf16_to_f32(src[i]);
}

/* ---- the tile loop ---- */

void mqa_run(const struct mqa_job *jb, void *scratch) { mqa_run_at(jb, scratch, ops_level_best()); }

/* dst[j] = row of local key k0 + j of the job's sequence for j < n (`base`: row 0 of the
 * layer, rows rb bytes apart) */
static void key_rows(const struct mqa_job *jb, const unsigned char *base, size_t rb, int k0, int n, const void **dst)
{
	int bs = jb->kv->block_size, b = k0 / bs, o = k0 % bs;
	int64_t n_slots = kv_cache_n_slots(jb->kv);
	if (jb->slots) {
		for (int j = 0; j < n; j++) {
			int64_t slot = jb->slots[k0 + j];
			CHECK(slot >= 0 && slot < n_slots);
			dst[j] = base + (size_t)slot * rb;
		}
		return;
	}
	for (int j = 0; j < n; j++) {
		int64_t slot = (int64_t)jb->bt[b] * bs + o;
		CHECK(slot >= 0 && slot < n_slots);
		dst[j] = base + (size_t)slot * rb;
		if (++o == bs)
			o = 0, b++;
	}
}

/* Online-softmax update of a block, scalar: the portable and AVX2 paths. */
static void softmax_scalar(float *s, int nr, const int *nvis, float *m, float *l, float *alpha)
{
	for (int i = 0; i < nr; i++) {
		int nv = nvis[i];
		if (nv <= 0)
			continue;
		float *si = s + i * MQA_KEY_BLOCK;
		float bm = si[0];
		for (int j = 1; j < nv; j++)
			bm = si[j] > bm ? si[j] : bm;
		float mn = bm > m[i] ? bm : m[i];
		alpha[i] = m[i] == -INFINITY ? 0.0f : expf(m[i] - mn);
		float sum = 0;
		for (int j = 0; j < nv; j++) {
			si[j] = expf(si[j] - mn);
			sum += si[j];
		}
		l[i] = l[i] * alpha[i] + sum;
		m[i] = mn;
	}
}

/* fp8 parts of the next block's nn rows to decode per prefetch step of the AMX kernels, so that
 * the decode ends about with this block's (nk keys) tile products: the steps are about one per
 * pair of products, ceil(keys / 32) x row / 32 for each 16 query rows in the scores and
 * ceil(keys / 16) x dv / 32 in the values. */
static int fp8_parts_per_step(const struct kv_fp8_layout *l, int nr, int row, int dv, int nk, int nn)
{
	long groups = (nr + 15) / 16, steps = groups * ((nk + 31) / 32 * (row / 32) + (nk + 15) / 16 * (dv / 32));
	long parts = (long)nn * kv_fp8_parts(l);
	return steps > 0 ? (int)((parts + steps - 1) / steps) : 1;
}

void mqa_run_at(const struct mqa_job *jb, void *scratch, enum ops_level level)
{
	const struct kv_cache *kv = jb->kv;
	int row = kv->row, dv = kv->kv_lora_rank;
	int nr = jb->n_tok * jb->n_heads;
	bool avx2 = level >= OPS_AVX2, avx512 = level >= OPS_AVX512;
	unsigned char *p = scratch;
	float *kbuf = (float *)p;
	p += align64((size_t)MQA_KEY_BLOCK * row * sizeof(float));
	float *s = (float *)p;
	p += align64((size_t)nr * MQA_KEY_BLOCK_WIDE * sizeof(float));
	const float **kp = (const float **)p;
	p += align64((size_t)MQA_KEY_BLOCK_WIDE * sizeof(float *));
	const void **cur = (const void **)p; /* source rows of this block and the next */
	p += align64((size_t)MQA_KEY_BLOCK_WIDE * sizeof(void *));
	const void **nx = (const void **)p;
	p += align64((size_t)MQA_KEY_BLOCK_WIDE * sizeof(void *));
	float *m = (float *)p;
	p += align64((size_t)nr * sizeof(float));
	float *l = (float *)p;
	p += align64((size_t)nr * sizeof(float));
	float *alpha = (float *)p;
	p += align64((size_t)nr * sizeof(float));
	int *nvis = (int *)p;
	p += align64((size_t)nr * sizeof(float));
	uint16_t *qb = (uint16_t *)p;
	p += align64(q_bf16_bytes(nr, row));
	uint32_t *pp = (uint32_t *)p;
	p += align64((size_t)nr * MQA_KEY_BLOCK_WIDE / 2 * sizeof(uint32_t));
	void *work = p;
	p += align64(mqa_amx_work_bytes(row));
	uint16_t *kb16 = (uint16_t *)p; /* an fp8 block decoded to bf16 for the dp / AMX kernels */
	p += align64((size_t)MQA_KEY_BLOCK_WIDE * row * sizeof(uint16_t));
	uint16_t *kb16_next = (uint16_t *)p; /* the next block's, decoded during this one's tiles */
	p += align64((size_t)MQA_KEY_BLOCK_WIDE * row * sizeof(uint16_t));
	const void **kr16 = (const void **)p;
	bool fp8 = kv->dtype == DT_F8_E4M3;
	/* bf16 q and bf16 keys: the scores run bf16 dot products straight off the cache rows,
	 * and with p_bf16 the value pass too (no fp32 copy of the block then). An fp8 block is
	 * decoded to bf16 first (its values rounded to bf16, as a bf16 engine would hold them). */
	bool dp = level >= OPS_AVX512_BF16 && jb->q_bf16 && (kv->dtype == DT_BF16 || fp8);
	bool dpv = dp && jb->p_bf16;
	/* AMX tiles for the same products where the dims fit (576 / 512 do) */
	bool amx_s = dp && level >= OPS_AMX && mqa_amx_scores_ok(row);
	bool amx_v = dpv && level >= OPS_AMX && mqa_amx_values_ok(dv);
	if (amx_s)
		mqa_amx_pack_q((uint32_t *)qb, jb->q, nr, row);
	else if (dp)
		mqa512_to_bf16(qb, jb->q, nr * row);
	if (amx_s || amx_v)
		mqa_amx_begin(nr);
	/* keys per block (score rows `block` apart): past 32 heads the AMX kernels take 256, so
	 * that their C tiles go through memory 4x less often (a gain at 128 heads); with 16 heads
	 * the wide block lost. Chosen by the heads, not
	 * the tile's rows, so that a token's result does not depend on how many tokens of its
	 * sequence share the tile. */
	const int block = amx_s && amx_v && jb->n_heads > 32 ? MQA_KEY_BLOCK_WIDE : MQA_KEY_BLOCK;
	/* fp8 under AMX tiles: each block's rows are decoded while the previous block's tile
	 * products run (the vector ports idle then), through the kernels' prefetch steps */
	bool fp8_ahead = fp8 && amx_s;

	int kmax = 0;
	for (int t = 0; t < jb->n_tok; t++)
		if (jb->vis[t] > kmax)
			kmax = jb->vis[t];
	if (kmax > jb->k_end)
		kmax = jb->k_end;
	memset(jb->out, 0, (size_t)nr * dv * sizeof(float));
	for (int i = 0; i < nr; i++) {
		m[i] = -INFINITY;
		l[i] = 0;
	}
	const unsigned char *base = kv_cache_row_ptr(kv, jb->layer, 0);
	size_t rb = (size_t)kv->row_bytes;
	int n0 = kmax - jb->k_begin < block ? kmax - jb->k_begin : block;
	key_rows(jb, base, rb, jb->k_begin, n0, cur);
	for (int j = 0; j < n0 && fp8_ahead; j++)
		kv_fp8_decode_bf16(&kv->fp8, cur[j], kb16 + (size_t)j * row, level);
	for (int kb = jb->k_begin; kb < kmax; kb += block) {
		int nk = kmax - kb < block ? kmax - kb : block;
		int nn = kmax - kb - nk < block ? kmax - kb - nk : block;
		key_rows(jb, base, rb, kb + nk, nn, nx);
		/* the next block's rows sit on scattered pages the hardware prefetcher does not
		 * follow: fetch them while this block computes. The AVX-512 scores spread the
		 * prefetches over their steps (better with a cold cache); a burst here stalls on
		 * the miss queue and gains less, but the AVX2 kernels take it. */
		if (!avx512)
			for (int j = 0; j < nn; j++)
				for (size_t o = 0; o < rb; o += 64)
					_mm_prefetch((const char *)nx[j] + o, _MM_HINT_T0);
		for (int j = 0; j < nk && fp8 && dp; j++) {
			uint16_t *dst = kb16 + (size_t)j * row;
			kr16[j] = dst;
			if (!fp8_ahead)
				kv_fp8_decode_bf16(&kv->fp8, cur[j], dst, level);
		}
		for (int j = 0; j < nk && !dpv; j++) {
			float *dst = kbuf + (size_t)j * row;
			kp[j] = dst;
			if (fp8)
				kv_fp8_decode_f32(&kv->fp8, cur[j], dst, level);
			else if (kv->dtype == DT_F32) /* a sequential copy beats scattered reads */
				memcpy(dst, cur[j], rb);
			else if (avx512)
				mqa512_bf16_row(dst, cur[j], row);
			else if (avx2)
				bf16_row_avx2(dst, cur[j], row);
			else
				bf16_row_portable(dst, cur[j], row);
		}
		/* this block now sits in kbuf: cur takes the next block's rows */
		const void **t = cur;
		cur = nx, nx = t;
		/* the bf16 rows of this block: the cache's, or the fp8 rows decoded */
		const uint16_t *const *kr = (const uint16_t *const *)(fp8 ? kr16 : nx);
		for (int i = 0; i < nr; i++) {
			int nv = jb->vis[i / jb->n_heads] - kb; /* visible keys of this block */
			nvis[i] = nv > nk ? nk : nv;
		}
		if (avx512) {
			struct mqa_amx_pf pf = {cur, nn, (int)rb, 0, 0, NULL, NULL, 0, 0, 0, 0};
			if (fp8_ahead) {
				pf.fp8 = &kv->fp8, pf.dst = kb16_next, pf.width = row, pf.level = (int)level;
				pf.per = fp8_parts_per_step(&kv->fp8, nr, row, dv, nk, nn);
			}
			if (amx_s) /* after the swap nx holds this block's cache rows */
				mqa_amx_scores((const uint32_t *)qb, nr, row, kr, nk, jb->scale, s, block, work, &pf);
			else if (dp)
				mqa512_scores_dp(qb, nr, row, kr, nk, jb->scale, s, cur, nn, (int)rb);
			else
				mqa512_scores(jb->q, nr, row, kp, nk, jb->scale, s, cur, nn, (int)rb);
			mqa512_softmax(s, block, nr, nk, nvis, m, l, alpha);
			if (amx_v)
				mqa_amx_accum(jb->out, nr, dv, alpha, s, block, nvis, kr, row, nk, pp, work, &pf);
			else if (dpv)
				mqa512_accum_dp(jb->out, nr, dv, alpha, s, nvis, kr, nk, pp);
			else
				mqa512_accum(jb->out, nr, dv, alpha, s, nvis, kp, nk);
			if (fp8_ahead) {
				mqa_amx_pf_finish(&pf);
				uint16_t *t16 = kb16;
				kb16 = kb16_next, kb16_next = t16;
			}
			continue;
		}
		if (avx2)
			scores_avx2(jb->q, nr, row, kp, nk, jb->scale, s);
		else
			scores_portable(jb->q, nr, row, kp, nk, jb->scale, s);
		softmax_scalar(s, nr, nvis, m, l, alpha);
		/* the value pass pairs rows that share a mask */
		for (int i = 0; i < nr; i++) {
			if (nvis[i] <= 0)
				continue;
			float *o = jb->out + (size_t)i * dv, *si = s + i * MQA_KEY_BLOCK;
			if (avx2 && i + 1 < nr && nvis[i + 1] == nvis[i]) {
				accum2_avx2(o, o + dv, alpha[i], alpha[i + 1], si, si + MQA_KEY_BLOCK, kp, nvis[i],
					    dv);
				i++;
			} else if (avx2) {
				accum_avx2(o, alpha[i], si, kp, nvis[i], dv);
			} else {
				accum_portable(o, alpha[i], si, kp, nvis[i], dv);
			}
		}
	}
	if (amx_s || amx_v)
		mqa_amx_end();
	if (amx_v)
		mqa_amx_unsplit(jb->out, nr, dv);
	for (int i = 0; i < nr; i++) {
		if (l[i] == 0) {
			jb->lse[i] = -INFINITY;
			continue;
		}
		float inv = 1.0f / l[i], *o = jb->out + (size_t)i * dv;
		for (int d = 0; d < dv; d++)
			o[d] *= inv;
		jb->lse[i] = m[i] + logf(l[i]);
	}
}

size_t attn_decode_scratch_bytes(int n_threads, int max_seqs, int max_decode_tokens, int n_heads, int kv_lora_rank,
				 int rope_dim)
{
	/* plans: a few small arrays per sequence and per partition (partitions <= CPUs) */
	size_t plan = 4096 + (size_t)max_seqs * 64 + (size_t)max_decode_tokens * 16 +
		      (size_t)(n_threads + mqa_cpu_count() + 64) * 64;
	int tt = mqa_tile_tokens(n_heads);
	size_t per_thread = align64(mqa_scratch_bytes(tt * n_heads, kv_lora_rank + rope_dim) +
				    (size_t)tt * sizeof(int32_t));
	/* split-KV partials: at most 2 pieces per partition belong to split requests */
	int q = max_decode_tokens > 0 ? max_decode_tokens : 1;
	int cpus = mqa_cpu_count();
	size_t parts = (size_t)(n_threads > cpus ? n_threads : cpus) * 2 + 2;
	size_t acc = parts * (size_t)(q < tt ? q : tt) * n_heads * (kv_lora_rank + 1) * sizeof(float);
	return plan + (size_t)n_threads * per_thread + acc + 4 * 4096;
}
