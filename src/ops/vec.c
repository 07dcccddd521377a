#include "ops/vec.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/dtype.h"
#include "base/err.h"
#include "ops/cpu.h"
#include "ops/bf16_512.h"
#include "ops/vexp.h"

#define AVX2_FN __attribute__((target("avx2,fma")))

/* the lanes of a 16-lane step with `left` values still to go (none if left <= 0) */
static inline __mmask16 tail16(int64_t left)
{
	return left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
}

static AVX2_FN float dot_avx2(const float *a, const float *b, int n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
	}
	for (; i + 8 <= n; i += 8)
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
	s0 = _mm256_add_ps(s0, s1);
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	float r = _mm_cvtss_f32(s);
	for (; i < n; i++)
		r += a[i] * b[i];
	return r;
}

static AVX2_FN void axpy_avx2(float *y, float a, const float *x, int n)
{
	__m256 av = _mm256_set1_ps(a);
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] += a * x[i];
}

float ops_dot(const float *a, const float *b, int n)
{
	if (ops_level_best() >= OPS_AVX2)
		return dot_avx2(a, b, n);
	float s = 0;
	for (int i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

void ops_axpy(float *y, float a, const float *x, int n)
{
	if (ops_level_best() >= OPS_AVX2) {
		axpy_avx2(y, a, x, n);
		return;
	}
	for (int i = 0; i < n; i++)
		y[i] += a * x[i];
}

void ops_rmsnorm(float *y, int ldy, const float *x, int ldx, const float *w, int n, int d, float eps)
{
	for (int t = 0; t < n; t++) {
		const float *xr = x + (size_t)t * (size_t)ldx;
		float *yr = y + (size_t)t * (size_t)ldy;
		double ss = 0;
		for (int i = 0; i < d; i++)
			ss += (double)xr[i] * xr[i];
		float r = (float)(1.0 / sqrt(ss / d + eps));
		for (int i = 0; i < d; i++)
			yr[i] = xr[i] * r * w[i];
	}
}

#define AVX512_FN __attribute__((target("avx512f,avx512dq,fma")))

/* 16 lanes at a time with the polynomial exp (about 1 ulp from expf): the scalar expf showed
 * in decode steps (it runs on every MoE intermediate value). */
static AVX512_FN void silu_mul_avx512(float *out, const float *g, const float *u, int n)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tail16(n - i);
		__m512 gv = _mm512_maskz_loadu_ps(k, g + i);
		__m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
		__m512 r = _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(k, u + i));
		_mm512_mask_storeu_ps(out + i, k, r);
	}
}

/* silu_mul_avx512's 8-lane twin (the same bits: vexp.h): the scalar expf showed in prefills
 * at the AVX2 level. The tail goes through a buffer: vmaskmovps stores are slow on AMD. */
static AVX2_FN __m256 silu_mul8(__m256 g, __m256 u)
{
	__m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
	return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

static AVX2_FN void silu_mul_avx2(float *out, const float *g, const float *u, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, silu_mul8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
	if (i < n) {
		float gb[8] = {0}, ub[8] = {0}, ob[8];
		memcpy(gb, g + i, sizeof(float) * (size_t)(n - i));
		memcpy(ub, u + i, sizeof(float) * (size_t)(n - i));
		_mm256_storeu_ps(ob, silu_mul8(_mm256_loadu_ps(gb), _mm256_loadu_ps(ub)));
		memcpy(out + i, ob, sizeof(float) * (size_t)(n - i));
	}
}

/* exp(x - m) in place and its sum in double, 8 lanes at a time (the tail through a buffer) */
static AVX2_FN double exp_sum_avx2(float *x, int n, float m)
{
	const __m256 vm = _mm256_set1_ps(m);
	__m256d s0 = _mm256_setzero_pd(), s1 = s0;
	for (int i = 0; i < n; i += 8) {
		int k = n - i < 8 ? n - i : 8;
		float b[8];
		const float *src = x + i;
		if (k < 8) {
			for (int j = 0; j < 8; j++)
				b[j] = j < k ? x[i + j] : m; /* exp(0) = 1 there, masked out below */
			src = b;
		}
		__m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(src), vm));
		if (k < 8) {
			e = _mm256_and_ps(e, _mm256_castsi256_ps(_mm256_cmpgt_epi32(
						     _mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))));
			_mm256_storeu_ps(b, e);
			memcpy(x + i, b, sizeof(float) * (size_t)k);
		} else {
			_mm256_storeu_ps(x + i, e);
		}
		s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
		s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
	}
	__m256d s = _mm256_add_pd(s0, s1);
	__m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
	return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

void ops_silu_mul(float *out, const float *g, const float *u, int n)
{
	if (ops_level_best() >= OPS_AVX512) {
		silu_mul_avx512(out, g, u, n);
		return;
	}
	if (ops_level_best() >= OPS_AVX2) {
		silu_mul_avx2(out, g, u, n);
		return;
	}
	for (int i = 0; i < n; i++)
		out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* exp(x - m) in place and its sum (in double, like the scalar loop), 16 lanes at a time */
static AVX512_FN double exp_sum_avx512(float *x, int n, float m)
{
	const __m512 vm = _mm512_set1_ps(m);
	__m512d s0 = _mm512_setzero_pd(), s1 = s0;
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tail16(n - i);
		__m512 e = _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm)));
		_mm512_mask_storeu_ps(x + i, k, e);
		s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
		s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
	}
	return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

/* x *= scale and the maximum of the results, 16 lanes at a time (NaN never wins, as in the
 * scalar loop: vmaxps returns its second operand when either is NaN) */
static AVX512_FN float scale_max_avx512(float *x, int n, float scale)
{
	const __m512 vs = _mm512_set1_ps(scale);
	__m512 m = _mm512_set1_ps(-INFINITY);
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tail16(n - i);
		__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs);
		_mm512_mask_storeu_ps(x + i, k, v);
		m = _mm512_mask_max_ps(m, k, v, m);
	}
	return _mm512_reduce_max_ps(m);
}

/* x *= inv, then rounded to bf16 if rnd */
static AVX512_FN void scale_round_avx512(float *x, int n, float inv, bool rnd)
{
	const __m512 vi = _mm512_set1_ps(inv);
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tail16(n - i);
		__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vi);
		_mm512_mask_storeu_ps(x + i, k, rnd ? round_bf16_512(v) : v);
	}
}

float ops_softmax_scaled(float *x, int n, float scale, bool round_bf16)
{
	if (n <= 0 || ops_level_best() < OPS_AVX512) {
		for (int i = 0; i < n; i++)
			x[i] *= scale;
		float lse = ops_softmax(x, n);
		if (round_bf16)
			ops_round_bf16(x, n);
		return lse;
	}
	float m = scale_max_avx512(x, n, scale);
	if (m == -INFINITY) { /* every value -inf: uniform zeros, as ops_softmax */
		for (int i = 0; i < n; i++)
			x[i] = 0;
		return -INFINITY;
	}
	double s = exp_sum_avx512(x, n, m);
	scale_round_avx512(x, n, (float)(1.0 / s), round_bf16);
	return m + (float)log(s);
}

/* out[i] = bf16(x[i] * inv) for i < n, 0 up to n_out, 32 at a time */
static __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx512bf16"))) void scale_to_bf16_avx512(
	const float *x, int n, float inv, uint16_t *out, int n_out)
{
	const __m512 vi = _mm512_set1_ps(inv);
	for (int i = 0; i < n_out; i += 32) {
		__mmask16 k0 = tail16(n - i);
		__mmask16 k1 = tail16(n - i - 16);
		__m512 lo = _mm512_mul_ps(_mm512_maskz_loadu_ps(k0, x + i), vi);
		__m512 hi = _mm512_mul_ps(_mm512_maskz_loadu_ps(k1, x + i + 16), vi);
		/* round to nearest even, denormals to 0: what ops_round_bf16 then the GEMM's
		 * conversion (the same instruction, exact on rounded values) give */
		__m512i w = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
		__mmask32 kw = n_out - i >= 32 ? 0xffffffffu : (__mmask32)((1ull << (n_out - i)) - 1);
		_mm512_mask_storeu_epi16(out + i, kw, w);
	}
}

float ops_softmax_scaled_to_bf16(float *x, int n, float scale, uint16_t *out, int n_out)
{
	CHECK(ops_level_best() >= OPS_AVX512_BF16 && n_out >= n);
	if (n <= 0) {
		memset(out, 0, sizeof(uint16_t) * (size_t)n_out);
		return -INFINITY;
	}
	float m = scale_max_avx512(x, n, scale);
	if (m == -INFINITY) {
		memset(out, 0, sizeof(uint16_t) * (size_t)n_out);
		return -INFINITY;
	}
	double s = exp_sum_avx512(x, n, m);
	scale_to_bf16_avx512(x, n, (float)(1.0 / s), out, n_out);
	return m + (float)log(s);
}

float ops_softmax(float *x, int n)
{
	if (n <= 0)
		return -INFINITY;
	float m = -INFINITY;
	for (int i = 0; i < n; i++)
		if (x[i] > m)
			m = x[i];
	if (m == -INFINITY) { /* every value -inf: define the result as uniform zeros */
		for (int i = 0; i < n; i++)
			x[i] = 0;
		return -INFINITY;
	}
	double s = 0;
	if (ops_level_best() >= OPS_AVX512) { /* the prefill attention's rows */
		s = exp_sum_avx512(x, n, m);
	} else if (ops_level_best() >= OPS_AVX2) {
		s = exp_sum_avx2(x, n, m);
	} else {
		for (int i = 0; i < n; i++) {
			x[i] = expf(x[i] - m);
			s += x[i];
		}
	}
	float inv = (float)(1.0 / s);
	for (int i = 0; i < n; i++)
		x[i] *= inv;
	return m + (float)log(s);
}

void ops_topk(const float *x, int n, int k, int *idx)
{
	/* selection by repeated scans; k and n are small (experts, groups) */
	for (int j = 0; j < k; j++) {
		int best = -1;
		for (int i = 0; i < n; i++) {
			int taken = 0;
			for (int q = 0; q < j; q++)
				if (idx[q] == i) {
					taken = 1;
					break;
				}
			if (taken)
				continue;
			/* NaN ranks below every number (and never leaves a slot unfilled) */
			if (best < 0 || (!isnan(x[i]) && (isnan(x[best]) || x[i] > x[best])))
				best = i;
		}
		idx[j] = best;
	}
}

/* f32_to_bf16 on 8 lanes: round to nearest even, NaN kept quiet */
static AVX2_FN void round_bf16_avx2(float *x, int64_t n)
{
	const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
	const __m256i half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
	const __m256i hi = _mm256_set1_epi32((int)0xffff0000u), quiet = _mm256_set1_epi32(0x400000);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
		__m256i r = _mm256_add_epi32(u,
					     _mm256_add_epi32(half, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
		__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
		r = _mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan);
		_mm256_storeu_si256((__m256i *)(x + i), _mm256_and_si256(r, hi));
	}
	for (; i < n; i++)
		x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

static __attribute__((target("avx512f"))) void round_bf16_avx512(float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i += 16) {
		__mmask16 k = tail16(n - i);
		_mm512_mask_storeu_ps(x + i, k, round_bf16_512(_mm512_maskz_loadu_ps(k, x + i)));
	}
}

void ops_round_bf16(float *x, int64_t n)
{
	if (ops_level_best() >= OPS_AVX512) {
		round_bf16_avx512(x, n);
		return;
	}
	if (ops_level_best() >= OPS_AVX2) {
		round_bf16_avx2(x, n);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

void ops_hadamard(float *x, int n)
{
	for (int h = 1; h < n; h *= 2)
		for (int i = 0; i < n; i += 2 * h)
			for (int j = i; j < i + h; j++) {
				float a = x[j], b = x[j + h];
				x[j] = a + b;
				x[j + h] = a - b;
			}
	float s = 1.0f / sqrtf((float)n);
	for (int i = 0; i < n; i++)
		x[i] *= s;
}
