/* v4_kernels.h: each kernel's body is an always-inline function over GCC vector types,
 * instantiated once per level with that level's target; products and sums are contracted to
 * FMAs where the level has them. */
#include "model_v4/v4_kernels.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model_v4/fp4.h"
#include "model_v4/v4_ix_amx.h"

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

INLINE v8d ld8d(const float *p) /* 8 floats widened to double */
{
	v8f v;
	memcpy(&v, p, sizeof v);
	return __builtin_convertvector(v, v8d);
}

INLINE double lanes_sum8(const v8d *a) /* by address: GCC notes a 64-byte vector argument */
{
	double s = 0;
#pragma GCC unroll 8
	for (int l = 0; l < 8; l++)
		s += (*a)[l];
	return s;
}

/* G heads' q (doubles, rows of n) . k (floats) over n dims: per head two 8-lane double partials
 * (even and odd blocks of 8), then the lanes; k widened once for the G heads */
INLINE void dots_f64(int G, const double *q, const float *k, int n, double *out)
{
	v8d a[4][2] = {{{0}}}, qv;
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		v8d k0 = ld8d(k + i), k1 = ld8d(k + i + 8);
#pragma GCC unroll 4
		for (int u = 0; u < G; u++) {
			memcpy(&qv, q + (size_t)u * (size_t)n + (size_t)i, sizeof qv);
			a[u][0] += qv * k0;
			memcpy(&qv, q + (size_t)u * (size_t)n + (size_t)i + 8, sizeof qv);
			a[u][1] += qv * k1;
		}
	}
#pragma GCC unroll 4
	for (int u = 0; u < G; u++) {
		v8d pair = a[u][0] + a[u][1];
		double s = lanes_sum8(&pair);
		for (int t = i; t < n; t++)
			s += q[(size_t)u * (size_t)n + (size_t)t] * k[t];
		out[u] = s;
	}
}

#define PV_CHUNK 32 /* dims of o held in registers (doubles, 4 heads) while the keys stream past */

/* G heads from h: s [G][n_kv] and qd [G][hd] doubles of scratch */
INLINE void attn_group(int G, int h, int hd, float scale, const float *q, const float *const *kv, int n_kv,
		       const float *sink, float *o, float *lse, double *s, double *qd)
{
	for (int u = 0; u < G; u++)
		for (int i = 0; i < hd; i++)
			qd[(size_t)u * (size_t)hd + (size_t)i] = q[(size_t)(h + u) * (size_t)hd + (size_t)i];
	double m[4], z[4], d[4];
	for (int u = 0; u < G; u++)
		m[u] = sink ? sink[h + u] : -INFINITY;
	for (int j = 0; j < n_kv; j++) {
		dots_f64(G, qd, kv[j], hd, d);
		for (int u = 0; u < G; u++) {
			s[(size_t)u * (size_t)n_kv + (size_t)j] = d[u] * scale;
			m[u] = fmax(m[u], d[u] * scale);
		}
	}
	for (int u = 0; u < G; u++) {
		double *su = s + (size_t)u * (size_t)n_kv;
		z[u] = 0;
		if (m[u] == -INFINITY) /* no keys, no sink: nothing to attend (o = 0 below) */
			continue;
		z[u] = sink ? exp(sink[h + u] - m[u]) : 0;
		for (int j = 0; j < n_kv; j++) {
			su[j] = exp(su[j] - m[u]);
			z[u] += su[j];
		}
	}
	int c = 0;
	for (; c + PV_CHUNK <= hd; c += PV_CHUNK) {
		v8d a[4][PV_CHUNK / 8] = {{{0}}};
		for (int j = 0; j < n_kv; j++) {
			const float *kj = kv[j] + c;
			v8d kc[PV_CHUNK / 8];
#pragma GCC unroll 4
			for (int v = 0; v < PV_CHUNK / 8; v++)
				kc[v] = ld8d(kj + 8 * v);
#pragma GCC unroll 4
			for (int u = 0; u < G; u++) {
				double p = s[(size_t)u * (size_t)n_kv + (size_t)j];
#pragma GCC unroll 4
				for (int v = 0; v < PV_CHUNK / 8; v++)
					a[u][v] += p * kc[v];
			}
		}
		for (int u = 0; u < G; u++)
			for (int v = 0; v < PV_CHUNK / 8; v++)
				for (int l = 0; l < 8; l++)
					o[(size_t)(h + u) * (size_t)hd + (size_t)(c + 8 * v + l)] =
						m[u] == -INFINITY ? 0 : (float)(a[u][v][l] / z[u]);
	}
	for (; c < hd; c++)
		for (int u = 0; u < G; u++) {
			double a = 0;
			for (int j = 0; j < n_kv; j++)
				a += s[(size_t)u * (size_t)n_kv + (size_t)j] * kv[j][c];
			o[(size_t)(h + u) * (size_t)hd + (size_t)c] = m[u] == -INFINITY ? 0 : (float)(a / z[u]);
		}
	for (int u = 0; u < G; u++)
		lse[h + u] = m[u] == -INFINITY ? -INFINITY : (float)(m[u] + log(z[u]));
}

/* s: [4 n_kv] doubles, qd: [4 hd] doubles */
INLINE void attn_heads_body(int h0, int h1, int hd, float scale, const float *q, const float *const *kv, int n_kv,
			    const float *sink, float *o, float *lse, double *s, double *qd)
{
	int h = h0;
	for (; h + 4 <= h1; h += 4)
		attn_group(4, h, hd, scale, q, kv, n_kv, sink, o, lse, s, qd);
	for (; h < h1; h++)
		attn_group(1, h, hd, scale, q, kv, n_kv, sink, o, lse, s, qd);
}

AVX512_FN static void attn_heads_avx512(int h0, int h1, int hd, float scale, const float *q, const float *const *kv,
					int n_kv, const float *sink, float *o, float *lse, double *s, double *qd)
{
	attn_heads_body(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, s, qd);
}

AVX2_FN static void attn_heads_avx2(int h0, int h1, int hd, float scale, const float *q, const float *const *kv,
				    int n_kv, const float *sink, float *o, float *lse, double *s, double *qd)
{
	attn_heads_body(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, s, qd);
}

static void attn_heads_portable(int h0, int h1, int hd, float scale, const float *q, const float *const *kv, int n_kv,
				const float *sink, float *o, float *lse, double *s, double *qd)
{
	attn_heads_body(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, s, qd);
}

void v4k_attn_heads(enum ops_level lv, int h0, int h1, int hd, float scale, const float *q, const float *const *kv,
		    int n_kv, const float *sink, float *o, float *lse, double *scratch)
{
	double *qd = scratch + 4 * (size_t)n_kv;
	if (lv >= OPS_AVX512)
		attn_heads_avx512(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, scratch, qd);
	else if (lv >= OPS_AVX2)
		attn_heads_avx2(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, scratch, qd);
	else
		attn_heads_portable(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, scratch, qd);
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
	if (lv >= OPS_AMX && k->packed && v4k_ix_amx_scores(H, di, q, w, k, e0, e1, s) == 0)
		return;
	if (lv >= OPS_AVX512)
		ix_scores_avx512(H, di, q, w, k, e0, e1, s);
	else if (lv >= OPS_AVX2)
		ix_scores_avx2(H, di, q, w, k, e0, e1, s);
	else
		ix_scores_portable(H, di, q, w, k, e0, e1, s);
}
