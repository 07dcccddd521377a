/* v4_kernels.h: each kernel's body is an always-inline function over GCC vector types,
 * instantiated once per level with that level's target; products and sums are contracted to
 * FMAs where the level has them. */
#include "model_v4/v4_kernels.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model_v4/fp4.h"
#include "model_v4/v4_ix_amx.h"
#include "model_v4/v4_ix_int.h"

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

/* dots_f64 for two keys at once (each q block loaded once for both): the same sums. AVX-512
 * only: its 16 accumulators spill from AVX2's registers. */
INLINE void dots2_f64(int G, const double *q, const float *ka, const float *kb, int n, double *oa, double *ob)
{
	v8d a[4][2] = {{{0}}}, b[4][2] = {{{0}}}, qv;
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		v8d a0 = ld8d(ka + i), a1 = ld8d(ka + i + 8), b0 = ld8d(kb + i), b1 = ld8d(kb + i + 8);
#pragma GCC unroll 4
		for (int u = 0; u < G; u++) {
			memcpy(&qv, q + (size_t)u * (size_t)n + (size_t)i, sizeof qv);
			a[u][0] += qv * a0;
			b[u][0] += qv * b0;
			memcpy(&qv, q + (size_t)u * (size_t)n + (size_t)i + 8, sizeof qv);
			a[u][1] += qv * a1;
			b[u][1] += qv * b1;
		}
	}
#pragma GCC unroll 4
	for (int u = 0; u < G; u++) {
		v8d pa = a[u][0] + a[u][1], pb = b[u][0] + b[u][1];
		double sa = lanes_sum8(&pa), sb = lanes_sum8(&pb);
		for (int t = i; t < n; t++)
			sa += q[(size_t)u * (size_t)n + (size_t)t] * ka[t];
		for (int t = i; t < n; t++)
			sb += q[(size_t)u * (size_t)n + (size_t)t] * kb[t];
		oa[u] = sa;
		ob[u] = sb;
	}
}

#define PV_CHUNK 32  /* dims of o held in registers (doubles, 4 heads) while the keys stream past */
#define KEY_CHUNK 64 /* keys (128 KB at hd 512) a pass of every head group reads while in L2 */

/* The heads' scores s [nh][n_kv] (scaled dots) for keys [j0, j1), G heads from head u0 of the
 * range (qd [nh][hd] doubles) */
INLINE void qk_chunk(int G, int u0, int hd, float scale, const double *qd, const float *const *kv, int n_kv, int j0,
		     int j1, int pairs, double *s)
{
	double d[4], e[4];
	int j = j0;
	for (; pairs && j + 2 <= j1; j += 2) {
		dots2_f64(G, qd + (size_t)u0 * (size_t)hd, kv[j], kv[j + 1], hd, d, e);
		for (int u = 0; u < G; u++) {
			s[(size_t)(u0 + u) * (size_t)n_kv + (size_t)j] = d[u] * scale;
			s[(size_t)(u0 + u) * (size_t)n_kv + (size_t)j + 1] = e[u] * scale;
		}
	}
	for (; j < j1; j++) {
		dots_f64(G, qd + (size_t)u0 * (size_t)hd, kv[j], hd, d);
		for (int u = 0; u < G; u++)
			s[(size_t)(u0 + u) * (size_t)n_kv + (size_t)j] = d[u] * scale;
	}
}

/* acc [nh][hd] += sum_j p_j kv_j over keys [j0, j1) in order, G heads from u0: each 32 dims of
 * four heads in registers over the chunk's keys, from and back to acc (doubles: exact) */
INLINE void pv_chunk(int G, int u0, int hd, const double *s, const float *const *kv, int n_kv, int j0, int j1,
		     double *acc)
{
	int c = 0;
	for (; c + PV_CHUNK <= hd; c += PV_CHUNK) {
		v8d a[4][PV_CHUNK / 8];
		for (int u = 0; u < G; u++)
			memcpy(a[u], acc + (size_t)(u0 + u) * (size_t)hd + (size_t)c, sizeof a[u]);
		for (int j = j0; j < j1; j++) {
			const float *kj = kv[j] + c;
			v8d kc[PV_CHUNK / 8];
#pragma GCC unroll 4
			for (int v = 0; v < PV_CHUNK / 8; v++)
				kc[v] = ld8d(kj + 8 * v);
#pragma GCC unroll 4
			for (int u = 0; u < G; u++) {
				double p = s[(size_t)(u0 + u) * (size_t)n_kv + (size_t)j];
#pragma GCC unroll 4
				for (int v = 0; v < PV_CHUNK / 8; v++)
					a[u][v] += p * kc[v];
			}
		}
		for (int u = 0; u < G; u++)
			memcpy(acc + (size_t)(u0 + u) * (size_t)hd + (size_t)c, a[u], sizeof a[u]);
	}
	for (; c < hd; c++)
		for (int u = 0; u < G; u++) {
			double *a = acc + (size_t)(u0 + u) * (size_t)hd + (size_t)c;
			for (int j = j0; j < j1; j++)
				*a += s[(size_t)(u0 + u) * (size_t)n_kv + (size_t)j] * kv[j][c];
		}
}

/* Heads [h0, h1) (nh of them), scratch as v4k_attn_heads': the keys in chunks that stay in
 * cache while every head reads them (each head's arithmetic is that of one pass over all keys:
 * its dots, max, exps and ordered sums do not depend on the chunks) */
INLINE void attn_heads_body(int h0, int h1, int hd, float scale, const float *q, const float *const *kv, int n_kv,
			    const float *sink, float *o, float *lse, int pairs, double *scratch)
{
	int nh = h1 - h0;
	double *qd = scratch, *acc = qd + (size_t)nh * (size_t)hd, *s = acc + (size_t)nh * (size_t)hd;
	for (size_t i = 0; i < (size_t)nh * (size_t)hd; i++) {
		qd[i] = q[(size_t)h0 * (size_t)hd + i];
		acc[i] = 0;
	}
	for (int j0 = 0; j0 < n_kv; j0 += KEY_CHUNK) {
		int j1 = n_kv - j0 < KEY_CHUNK ? n_kv : j0 + KEY_CHUNK, u = 0;
		for (; u + 4 <= nh; u += 4)
			qk_chunk(4, u, hd, scale, qd, kv, n_kv, j0, j1, pairs, s);
		for (; u < nh; u++)
			qk_chunk(1, u, hd, scale, qd, kv, n_kv, j0, j1, pairs, s);
	}
	double m[V4K_MAX_ATTN_HEADS], z[V4K_MAX_ATTN_HEADS];
	for (int u = 0; u < nh; u++) {
		double *su = s + (size_t)u * (size_t)n_kv;
		m[u] = sink ? sink[h0 + u] : -INFINITY;
		for (int j = 0; j < n_kv; j++)
			m[u] = fmax(m[u], su[j]);
		z[u] = 0;
		if (m[u] == -INFINITY) /* no keys, no sink: nothing to attend (o = 0 below) */
			continue;
		z[u] = sink ? exp(sink[h0 + u] - m[u]) : 0;
		for (int j = 0; j < n_kv; j++) {
			su[j] = exp(su[j] - m[u]);
			z[u] += su[j];
		}
	}
	for (int j0 = 0; j0 < n_kv; j0 += KEY_CHUNK) {
		int j1 = n_kv - j0 < KEY_CHUNK ? n_kv : j0 + KEY_CHUNK, u = 0;
		for (; u + 4 <= nh; u += 4)
			pv_chunk(4, u, hd, s, kv, n_kv, j0, j1, acc);
		for (; u < nh; u++)
			pv_chunk(1, u, hd, s, kv, n_kv, j0, j1, acc);
	}
	for (int u = 0; u < nh; u++) {
		for (int i = 0; i < hd; i++)
			o[(size_t)(h0 + u) * (size_t)hd + (size_t)i] =
				m[u] == -INFINITY ? 0 : (float)(acc[(size_t)u * (size_t)hd + (size_t)i] / z[u]);
		lse[h0 + u] = m[u] == -INFINITY ? -INFINITY : (float)(m[u] + log(z[u]));
	}
}

AVX512_FN static void attn_heads_avx512(int h0, int h1, int hd, float scale, const float *q, const float *const *kv,
					int n_kv, const float *sink, float *o, float *lse, double *scratch)
{
	attn_heads_body(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, 1, scratch);
}

AVX2_FN static void attn_heads_avx2(int h0, int h1, int hd, float scale, const float *q, const float *const *kv,
				    int n_kv, const float *sink, float *o, float *lse, double *scratch)
{
	attn_heads_body(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, 0, scratch);
}

static void attn_heads_portable(int h0, int h1, int hd, float scale, const float *q, const float *const *kv, int n_kv,
				const float *sink, float *o, float *lse, double *scratch)
{
	attn_heads_body(h0, h1, hd, scale, q, kv, n_kv, sink, o, lse, 0, scratch);
}

void v4k_attn_heads(enum ops_level lv, int h0, int h1, int hd, float scale, const float *q, const float *const *kv,
		    int n_kv, const float *sink, float *o, float *lse, double *scratch)
{
	for (; h0 < h1; h0 += V4K_MAX_ATTN_HEADS) { /* the heads' maxima and sums on the stack */
		int he = h1 - h0 < V4K_MAX_ATTN_HEADS ? h1 : h0 + V4K_MAX_ATTN_HEADS;
		if (lv >= OPS_AVX512)
			attn_heads_avx512(h0, he, hd, scale, q, kv, n_kv, sink, o, lse, scratch);
		else if (lv >= OPS_AVX2)
			attn_heads_avx2(h0, he, hd, scale, q, kv, n_kv, sink, o, lse, scratch);
		else
			attn_heads_portable(h0, he, hd, scale, q, kv, n_kv, sink, o, lse, scratch);
	}
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

/* G heads from h: (sd0 | sd1)[lane] += w_h relu(q_h . k_lane), the heads in order; each dot
 * summed per 32-dim block from 0, the blocks' sums then added in order (with fp4 keys and query
 * a block's sum is exact, so v4_ix_int.h's integer block dots give the same floats) */
INLINE void ix_heads(int G, int h, int di, const float *q, const float *w, const float *kt, v8d *sd0, v8d *sd1)
{
	v16f a[8] = {{0}};
	const float *qh = q + (size_t)h * (size_t)di;
	for (int b = 0; b < di; b += 32) {
		int be = di - b < 32 ? di : b + 32;
		v16f p[8] = {{0}};
		for (int d = b; d < be; d++) {
			v16f kd = ld16(kt + (size_t)d * V4K_KB);
#pragma GCC unroll 8
			for (int u = 0; u < G; u++)
				p[u] += qh[(size_t)u * (size_t)di + (size_t)d] * kd;
		}
#pragma GCC unroll 8
		for (int u = 0; u < G; u++)
			a[u] += p[u];
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

/* G heads a pass: 8, or 4 where 16 registers hold a pass's partial sums */
INLINE void ix_scores_body(int G, int H, int di, const float *q, const float *w, const struct v4k_keys *k, long e0,
			   long e1, double *s)
{
	float kt[V4K_MAX_DI * V4K_KB] __attribute__((aligned(64)));
	for (long e = e0; e < e1; e += V4K_KB) {
		int n = e1 - e < V4K_KB ? (int)(e1 - e) : V4K_KB;
		ix_tile(k, di, e, n, kt);
		v8d sd[2] = {{0}, {0}};
		int h = 0;
		for (; G == 8 && h + 8 <= H; h += 8)
			ix_heads(8, h, di, q, w, kt, &sd[0], &sd[1]);
		for (; h + 4 <= H; h += 4)
			ix_heads(4, h, di, q, w, kt, &sd[0], &sd[1]);
		for (; h < H; h++)
			ix_heads(1, h, di, q, w, kt, &sd[0], &sd[1]);
		memcpy(s + (e - e0), sd, sizeof(double) * (size_t)n);
	}
}

AVX512_FN static void ix_scores_avx512(int H, int di, const float *q, const float *w, const struct v4k_keys *k,
				       long e0, long e1, double *s)
{
	ix_scores_body(8, H, di, q, w, k, e0, e1, s);
}

AVX2_FN static void ix_scores_avx2(int H, int di, const float *q, const float *w, const struct v4k_keys *k, long e0,
				   long e1, double *s)
{
	ix_scores_body(4, H, di, q, w, k, e0, e1, s);
}

static void ix_scores_portable(int H, int di, const float *q, const float *w, const struct v4k_keys *k, long e0,
			       long e1, double *s)
{
	ix_scores_body(8, H, di, q, w, k, e0, e1, s);
}

static void ix_scores_float(enum ops_level lv, int H, int di, const float *q, const float *w, const struct v4k_keys *k,
			    long e0, long e1, double *s)
{
	if (lv >= OPS_AVX512)
		ix_scores_avx512(H, di, q, w, k, e0, e1, s);
	else if (lv >= OPS_AVX2)
		ix_scores_avx2(H, di, q, w, k, e0, e1, s);
	else
		ix_scores_portable(H, di, q, w, k, e0, e1, s);
}

void v4k_index_scores(enum ops_level lv, int H, int di, const float *q, const float *w, const struct v4k_keys *k,
		      long e0, long e1, double *s)
{
	if (lv >= OPS_AMX && k->packed && v4k_ix_amx_scores(H, di, q, w, k, e0, e1, s) == 0)
		return;
	if (lv >= OPS_AVX2 && k->packed) { /* integer block dots; a tile they cannot do exactly: floats */
		long done;
		while (e0 < e1 && (done = v4k_ix_int_scores(lv >= OPS_AVX512, H, di, q, w, k, e0, e1, s)) >= 0) {
			e0 += done, s += done;
			if (e0 < e1) {
				long t = e1 - e0 < V4_IX_INT_KB ? e1 : e0 + V4_IX_INT_KB;
				ix_scores_float(lv, H, di, q, w, k, e0, t, s);
				s += t - e0, e0 = t;
			}
		}
		if (e0 >= e1)
			return;
	}
	ix_scores_float(lv, H, di, q, w, k, e0, e1, s);
}
