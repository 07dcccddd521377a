/* v4_kernels.h: each kernel's body is an always-inline function over GCC vector types,
 * instantiated once per level with that level's target; products and sums are contracted to
 * FMAs where the level has them. */
#include "model_v4/v4_kernels.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model_v4/fp4.h"

#if defined(__clang__)
#pragma clang fp contract(fast)
#else
#pragma GCC optimize("fp-contract=fast")
#endif

/* the helpers pass 64-byte vectors but are always inlined into a level's function */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef int v16i __attribute__((vector_size(64)));

#define INLINE static inline __attribute__((always_inline))
#define AVX2_FN __attribute__((target("avx2,fma")))
#define AVX512_FN __attribute__((target("avx512f,avx512dq,fma")))

INLINE v16f ld16(const float *p)
{
	v16f v;
	memcpy(&v, p, sizeof v);
	return v;
}

INLINE float lanes_sum(v16f a)
{
	float s = 0;
#pragma GCC unroll 16
	for (int l = 0; l < 16; l++)
		s += a[l];
	return s;
}

/* q . k over n dims: four 16-lane float32 partials, then the lanes */
INLINE float dot_f32(const float *q, const float *k, int n)
{
	v16f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
	int i = 0;
	for (; i + 64 <= n; i += 64) {
		a0 += ld16(q + i) * ld16(k + i);
		a1 += ld16(q + i + 16) * ld16(k + i + 16);
		a2 += ld16(q + i + 32) * ld16(k + i + 32);
		a3 += ld16(q + i + 48) * ld16(k + i + 48);
	}
	for (; i + 16 <= n; i += 16)
		a0 += ld16(q + i) * ld16(k + i);
	float s = lanes_sum((a0 + a1) + (a2 + a3));
	for (; i < n; i++)
		s += q[i] * k[i];
	return s;
}

#define PV_CHUNK 128 /* dims of o held in registers while the keys stream past */

INLINE void attn_heads_body(int h0, int h1, int hd, float scale, const float *q, const float *const *kv, int n_kv,
			    const float *sink, float *o, float *lse, float *s)
{
	for (int h = h0; h < h1; h++) {
		const float *qh = q + (size_t)h * (size_t)hd;
		float *oh = o + (size_t)h * (size_t)hd;
		float m = sink ? sink[h] : -INFINITY;
		for (int j = 0; j < n_kv; j++) {
			s[j] = dot_f32(qh, kv[j], hd) * scale;
			m = fmaxf(m, s[j]);
		}
		if (m == -INFINITY) { /* no keys, no sink: nothing to attend */
			memset(oh, 0, sizeof(float) * (size_t)hd);
			lse[h] = -INFINITY;
			continue;
		}
		double z = sink ? exp((double)sink[h] - m) : 0;
		for (int j = 0; j < n_kv; j++) {
			s[j] = expf(s[j] - m);
			z += s[j];
		}
		float inv = (float)(1 / z);
		int c = 0;
		for (; c + PV_CHUNK <= hd; c += PV_CHUNK) {
			v16f a[PV_CHUNK / 16] = {{0}};
			for (int j = 0; j < n_kv; j++) {
				const float *kj = kv[j] + c;
#pragma GCC unroll 8
				for (int u = 0; u < PV_CHUNK / 16; u++)
					a[u] += s[j] * ld16(kj + 16 * u);
			}
#pragma GCC unroll 8
			for (int u = 0; u < PV_CHUNK / 16; u++) {
				v16f r = a[u] * inv;
				memcpy(oh + c + 16 * u, &r, sizeof r);
			}
		}
		for (; c < hd; c++) {
			float a = 0;
			for (int j = 0; j < n_kv; j++)
				a += s[j] * kv[j][c];
			oh[c] = a * inv;
		}
		lse[h] = (float)(m + log(z));
	}
}

AVX512_FN static void attn_heads_avx512(int h0, int h1, int hd, float scale, const float *q, const float *const *kv,
					int n_kv, const float *sink, float *o, float *lse, float *s)
{
	attn_heads_body(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, s);
}

AVX2_FN static void attn_heads_avx2(int h0, int h1, int hd, float scale, const float *q, const float *const *kv,
				    int n_kv, const float *sink, float *o, float *lse, float *s)
{
	attn_heads_body(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, s);
}

static void attn_heads_portable(int h0, int h1, int hd, float scale, const float *q, const float *const *kv, int n_kv,
				const float *sink, float *o, float *lse, float *s)
{
	attn_heads_body(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, s);
}

void v4k_attn_heads(enum ops_level lv, int h0, int h1, int hd, float scale, const float *q, const float *const *kv,
		    int n_kv, const float *sink, float *o, float *lse, float *scratch)
{
	if (lv >= OPS_AVX512)
		attn_heads_avx512(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, scratch);
	else if (lv >= OPS_AVX2)
		attn_heads_avx2(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, scratch);
	else
		attn_heads_portable(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, scratch);
}

/* ---- indexer ---- */

/* keys e0 .. e0 + n - 1 (n <= V4K_KB) into kt [di][V4K_KB], key j in lane j; lanes past n 0 */
static void ix_tile(const struct v4k_keys *k, int di, long e0, int n, float *kt)
{
	if (n < V4K_KB)
		memset(kt, 0, sizeof(float) * (size_t)di * V4K_KB);
	if (!k->packed) {
		for (int j = 0; j < n; j++)
			for (int d = 0; d < di; d++)
				kt[(size_t)d * V4K_KB + (size_t)j] = k->rows[e0 + j][d];
		return;
	}
	float lut[16];
	for (int c = 0; c < 16; c++)
		lut[c] = fp4_e2m1_to_f32((uint8_t)c);
	for (int j = 0; j < n; j++) {
		const uint8_t *codes = (const uint8_t *)k->rows[e0 + j], *exps = codes + di / 2;
		for (int b = 0; b < di; b += 32) {
			float sc = fp4_e8m0_to_f32(exps[b / 32]);
			for (int i = b; i < b + 32; i += 2) {
				uint8_t c = codes[i / 2];
				kt[(size_t)i * V4K_KB + (size_t)j] = lut[c & 0xF] * sc;
				kt[(size_t)(i + 1) * V4K_KB + (size_t)j] = lut[c >> 4] * sc;
			}
		}
	}
}

/* G heads from h: (sd0 | sd1)[lane] += w_h relu(q_h . k_lane), the heads in order */
INLINE void ix_heads(int G, int h, int di, const float *q, const float *w, const float *kt, v8d *sd0, v8d *sd1)
{
	v16f a[8] = {{0}};
	const float *qh = q + (size_t)h * (size_t)di;
	for (int d = 0; d < di; d++) {
		v16f kd = ld16(kt + (size_t)d * V4K_KB);
#pragma GCC unroll 8
		for (int u = 0; u < G; u++)
			a[u] += qh[(size_t)u * (size_t)di + (size_t)d] * kd;
	}
	const v16f zero = {0};
#pragma GCC unroll 8
	for (int u = 0; u < G; u++) {
		v16f r = (v16f)((v16i)a[u] & (a[u] > zero)); /* relu */
		v8f lo = __builtin_shufflevector(r, r, 0, 1, 2, 3, 4, 5, 6, 7);
		v8f hi = __builtin_shufflevector(r, r, 8, 9, 10, 11, 12, 13, 14, 15);
		double wu = w[h + u];
		*sd0 += wu * __builtin_convertvector(lo, v8d);
		*sd1 += wu * __builtin_convertvector(hi, v8d);
	}
}

INLINE void ix_scores_body(int H, int di, const float *q, const float *w, const struct v4k_keys *k, long e0, long e1,
			   double *s)
{
	float kt[V4K_MAX_DI * V4K_KB] __attribute__((aligned(64)));
	for (long e = e0; e < e1; e += V4K_KB) {
		int n = e1 - e < V4K_KB ? (int)(e1 - e) : V4K_KB;
		ix_tile(k, di, e, n, kt);
		v8d sd[2] = {{0}, {0}};
		int h = 0;
		for (; h + 8 <= H; h += 8)
			ix_heads(8, h, di, q, w, kt, &sd[0], &sd[1]);
		for (; h < H; h++)
			ix_heads(1, h, di, q, w, kt, &sd[0], &sd[1]);
		memcpy(s + (e - e0), sd, sizeof(double) * (size_t)n);
	}
}

AVX512_FN static void ix_scores_avx512(int H, int di, const float *q, const float *w, const struct v4k_keys *k,
				       long e0, long e1, double *s)
{
	ix_scores_body(H, di, q, w, k, e0, e1, s);
}

AVX2_FN static void ix_scores_avx2(int H, int di, const float *q, const float *w, const struct v4k_keys *k, long e0,
				   long e1, double *s)
{
	ix_scores_body(H, di, q, w, k, e0, e1, s);
}

static void ix_scores_portable(int H, int di, const float *q, const float *w, const struct v4k_keys *k, long e0,
			       long e1, double *s)
{
	ix_scores_body(H, di, q, w, k, e0, e1, s);
}

void v4k_index_scores(enum ops_level lv, int H, int di, const float *q, const float *w, const struct v4k_keys *k,
		      long e0, long e1, double *s)
{
	if (lv >= OPS_AVX512)
		ix_scores_avx512(H, di, q, w, k, e0, e1, s);
	else if (lv >= OPS_AVX2)
		ix_scores_avx2(H, di, q, w, k, e0, e1, s);
	else
		ix_scores_portable(H, di, q, w, k, e0, e1, s);
}
