/* Loading a DeepSeek V2/V3/R1 checkpoint (or random weights from config.json alone): every
 * expected tensor is checked for presence, shape and dtype; weights stay in the checkpoint's
 * compact dtype inside the mapping (bf16 stays bf16, fp8 stays fp8 + block scales). */
#include "model/model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/backends/backends.h"
#include "attn/prefill.h"
#include "base/bigmem.h"
#include "base/log.h"
#include "base/mono.h"
#include "ops/cpu.h"
#include "ops/pool.h"
#include "ops/route.h"
#include "ops/wformat.h"

#define BLK 128


/* a buffer in the list *o of *n (capacity *cap) */
static void *own_in(struct owned **o, int *n, int *cap, size_t bytes)
{
	if (*n == *cap) {
		int c = *cap ? 2 * *cap : 256;
		struct owned *g = realloc(*o, sizeof *g * (size_t)c);
		if (!g)
			return NULL;
		*o = g;
		*cap = c;
	}
	void *p = bigmem_alloc(bytes);
	if (p)
		(*o)[(*n)++] = (struct owned){p, bytes};
	return p;
}

/* small buffers from the model's slab (huge pages: bigmem.h), large ones mapped each */
void *model_own(struct model *m, size_t bytes)
{
	return bytes < BIGMEM_MIN ? bigmem_slab_alloc(&m->small, bytes)
				  : own_in(&m->owned, &m->n_owned, &m->cap_owned, bytes);
}

/* ---- deterministic dummy weights ---- */
static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s, uint64_t seed)
{
	uint64_t h = 1469598103934665603ull ^ seed;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

#define DUMMY_CHUNK 65536
struct dummy_ctx {
	uint16_t *dst;
	size_t n;
	uint64_t seed;
	float amp;
};

/* Random bf16 bit patterns: random sign and mantissa, exponent spread over the 4 binades
 * below amp (|w| in [amp/16, amp)), so weights have a sensible scale whatever the width.
 * Chunk k uses its own stream, so the thread count does not change the values. */
static void dummy_fill(void *arg, int begin, int end, int tid)
{
	const struct dummy_ctx *c = arg;
	int e_top = 0;
	frexpf(c->amp, &e_top); /* amp in [2^(e_top-1), 2^e_top) */
	uint16_t ebase = (uint16_t)(e_top - 1 + 127);
	for (int k = begin; k < end; k++) {
		uint64_t s = c->seed ^ ((uint64_t)k * 0xd1342543de82ef95ull);
		size_t i0 = (size_t)k * DUMMY_CHUNK, i1 = i0 + DUMMY_CHUNK < c->n ? i0 + DUMMY_CHUNK : c->n;
		for (size_t i = i0; i < i1; i += 4) {
			uint64_t r = splitmix(&s);
			for (size_t j = 0; j < 4 && i + j < i1; j++) {
				uint16_t b = (uint16_t)(r >> (16 * j));
				uint16_t e = (uint16_t)(ebase - ((b >> 8) & 3));
				c->dst[i + j] = (uint16_t)((b & 0x8000) | (uint16_t)(e << 7) | (b & 0x7f));
			}
		}
	}
}

static void dummy_bf16(struct model *m, const char *name, uint16_t *d, size_t n, float amp)
{
	struct dummy_ctx c = {d, n, name_hash(name, m->opt.dummy_seed), amp};
	pool_for(m->opt.pool, (int)((n + DUMMY_CHUNK - 1) / DUMMY_CHUNK), 1, dummy_fill, &c);
}

/* Random e4m3 bytes for fp8 checkpoints: random sign and mantissa, exponent field 4-7
 * (|v| in [1/8, 2)), never NaN; the caller's block scale of amp / 2 gives |w| in
 * [amp/16, amp) as the bf16 dummies. Per-chunk streams, as dummy_fill. */
static void dummy_fill_fp8(void *arg, int begin, int end, int tid)
{
	(void)tid;
	const struct dummy_ctx *c = arg;
	uint8_t *d = (uint8_t *)c->dst;
	for (int k = begin; k < end; k++) {
		uint64_t s = c->seed ^ ((uint64_t)k * 0xd1342543de82ef95ull);
		size_t i0 = (size_t)k * DUMMY_CHUNK, i1 = i0 + DUMMY_CHUNK < c->n ? i0 + DUMMY_CHUNK : c->n;
		for (size_t i = i0; i < i1; i += 8) {
			uint64_t r = splitmix(&s);
			for (size_t j = 0; j < 8 && i + j < i1; j++) {
				uint8_t b = (uint8_t)(r >> (8 * j));
				d[i + j] = (uint8_t)((b & 0x80) | (uint8_t)((4 + ((b >> 3) & 3)) << 3) | (b & 7));
			}
		}
	}
}

/* A dummy fp8 matrix with its block-scale grid (--load-format dummy on an fp8 config, so
 * that benchmarks read the bytes a real checkpoint would). */
static int dummy_fp8(struct model *m, const char *name, int rows, int cols, struct wmat *w, struct err *e)
{
	size_t n = (size_t)rows * (size_t)cols;
	int br = m->cfg.fp8_block_rows, bc = m->cfg.fp8_block_cols, sr = (rows + br - 1) / br,
	    sc = (cols + bc - 1) / bc;
	uint8_t *d = model_own(m, n);
	float *scale = model_own(m, sizeof(float) * (size_t)sr * (size_t)sc);
	if (!d || !scale)
		return err_set(e, "%s: out of memory for dummy tensor (%zu bytes)", name, n);
	struct dummy_ctx c = {(uint16_t *)(void *)d, n, name_hash(name, m->opt.dummy_seed), 0};
	pool_for(m->opt.pool, (int)((n + DUMMY_CHUNK - 1) / DUMMY_CHUNK), 1, dummy_fill_fp8, &c);
	float s = 0.85f / sqrtf((float)cols); /* amp / 2 of the bf16 dummies */
	if (m->cfg.fp8_scale_ue8m0) {         /* powers of two, as such checkpoints store */
		int ex;
		frexpf(s, &ex);
		s = ldexpf(1.0f, ex - 1);
	}
	for (int i = 0; i < sr * sc; i++)
		scale[i] = s;
	w->dtype = DT_F8_E4M3;
	w->data = d;
	w->scale = scale;
	w->scale_ld = sc;
	w->blk_r = br;
	w->blk_c = bc;
	m->weight_bytes += n + sizeof(float) * (size_t)sr * (size_t)sc;
	return 0;
}

/* ---- tensors from the checkpoint ---- */

/* memory for a quantized matrix (ops/wformat.h: struct walloc): counted as weights; the
 * bytes a packed copy replaces in their own list (m->qbufs), freed once packed */
static void *quant_alloc(void *ctx, size_t bytes, bool drop_when_packed)
{
	struct model *m = ctx;
	void *p = drop_when_packed ? own_in(&m->qbufs, &m->n_qbufs, &m->cap_qbufs, bytes) : model_own(m, bytes);
	if (p)
		m->weight_bytes += bytes;
	return p;
}

/* rows [r0, r0 + nr) x cols [c0, c0 + nc) of src (a checkpoint tensor in the mapping, or
 * dummy weights) quantized to format f into owned memory; *w's (row0, col0) is where it starts
 * in src (the format may widen the region to whole scale blocks: mat_part's view is relative) */
static int quantize_mat(struct model *m, const struct wformat *f, const char *file, const char *name,
			const struct wmat *src, int r0, int nr, int c0, int nc, const char *flag, struct wmat *w,
			struct err *e)
{
	double t0 = mono_now_s();
	struct walloc a = {quant_alloc, m};
	int br = -1, bc = -1, rc = f->quantize(m->opt.pool, src, r0, nr, c0, nc, &a, w, &br, &bc);
	if (rc == -2)
		return err_set(e, "%s: tensor %s: out of memory quantizing it to %s", file, name, f->name);
	if (rc)
		return err_set(e, "%s: tensor %s: weight [%d, %d] is not finite (%g); %s cannot scale its %s", file,
			       name, br, bc, wmat_get(src, br, bc), flag, f->scale_unit);
	m->quant_src_bytes += (size_t)w->rows * (size_t)w->cols * dtype_size(src->dtype);
	m->quant_s += mono_now_s() - t0;
	return 0;
}

/* The format a matrix of kind q is quantized to at load (NULL: kept as the checkpoint has it):
 * the linear layers take --quantization's, kv_b_proj too when its scales suit the transpose,
 * the lm_head (--quantize-lm-head) --quantization's or else fp8. */
static const struct wformat *quant_format(const struct model *m, enum wq q)
{
	const struct wformat *f = m->opt.quant;
	if (q == WQ_LINEAR || (q == WQ_ABSORBED && f && f->transposable))
		return f;
	if (q == WQ_HEAD && m->opt.quantize_lm_head)
		return f ? f : wformat_by_name("fp8");
	return NULL;
}

/* A [rows, cols] matrix, or (quantized at load) the part of it that covers rows
 * [r0, r0 + nr) x cols [c0, c0 + nc): *w's (row0, col0) is where it starts */
static int mat_region(struct model *m, const char *name, int rows, int cols, enum wq q, int r0, int nr, int c0, int nc,
		      struct wmat *w, struct err *e)
{
	memset(w, 0, sizeof *w);
	w->rows = rows;
	w->cols = cols;
	w->ld = cols;
	w->blk_r = w->blk_c = BLK;
	bool lin = q == WQ_LINEAR || q == WQ_ABSORBED;
	const struct wformat *qf = quant_format(m, q);
	char flag[64];
	if (q == WQ_HEAD)
		snprintf(flag, sizeof flag, "--quantize-lm-head");
	else
		snprintf(flag, sizeof flag, "--quantization %s", qf ? qf->name : "");
	if (m->opt.load_dummy && lin && m->cfg.fp8) {
		if (dummy_fp8(m, name, rows, cols, w, e))
			return -1;
		if (!qf || qf->dtype == w->dtype)
			return 0;
		struct wmat src = *w;
		m->weight_bytes -= wmat_bytes(&src); /* the fp8 bytes stay allocated, unused */
		return quantize_mat(m, qf, "dummy", name, &src, r0, nr, c0, nc, flag, w, e);
	}
	if (m->opt.load_dummy) {
		size_t n = (size_t)rows * (size_t)cols;
		uint16_t *d = qf ? malloc(n * 2) : model_own(m, n * 2);
		if (!d)
			return err_set(e, "%s: out of memory for dummy tensor (%zu bytes)", name, n * 2);
		dummy_bf16(m, name, d, n, 1.7f / sqrtf((float)cols));
		w->dtype = DT_BF16;
		w->data = d;
		if (!qf) {
			m->weight_bytes += n * 2;
			return 0;
		}
		struct wmat src = *w;
		int rc = quantize_mat(m, qf, "dummy", name, &src, r0, nr, c0, nc, flag, w, e);
		free(d);
		return rc;
	}
	unsigned mask = ST_FLOATS | (lin && m->cfg.fp8 ? ST_DT(DT_F8_E4M3) : 0);
	const struct st_tensor *t;
	if (st_expect(m->st, name, mask, rows, cols, &t, e))
		return -1;
	w->dtype = t->dtype;
	w->data = t->data;
	size_t esz = dtype_size(t->dtype);
	if ((uintptr_t)t->data % esz) { /* unaligned inside the file: one aligned copy */
		void *c = model_own(m, t->nbytes);
		if (!c)
			return err_set(e, "%s: tensor %s: out of memory", t->file, name);
		memcpy(c, t->data, t->nbytes);
		w->data = c;
	}
	if (qf && t->dtype != DT_F8_E4M3 && qf->dtype != t->dtype) {
		struct wmat src = *w;
		return quantize_mat(m, qf, t->file, name, &src, r0, nr, c0, nc, flag, w, e);
	}
	if (t->dtype == DT_F8_E4M3) {
		char sname[512];
		snprintf(sname, sizeof sname, "%s_scale_inv", name);
		int br = m->cfg.fp8_block_rows > 0 ? m->cfg.fp8_block_rows : BLK;
		int bc = m->cfg.fp8_block_cols > 0 ? m->cfg.fp8_block_cols : BLK;
		int sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
		const struct st_tensor *s;
		if (st_expect(m->st, sname, ST_DT(DT_F32), sr, sc, &s, e))
			return -1;
		float *sc_copy = model_own(m, s->nbytes);
		if (!sc_copy)
			return err_set(e, "%s: tensor %s: out of memory", s->file, sname);
		memcpy(sc_copy, s->data, s->nbytes);
		w->scale = sc_copy;
		w->scale_ld = sc;
		w->blk_r = br;
		w->blk_c = bc;
		if (qf && qf->dtype != DT_F8_E4M3) { /* requantized from the fp8 values times their block scales */
			struct wmat src = *w;
			return quantize_mat(m, qf, t->file, name, &src, r0, nr, c0, nc, flag, w, e);
		}
		m->weight_bytes += s->nbytes;
	}
	m->weight_bytes += t->nbytes;
	return 0;
}

int model_mat(struct model *m, const char *name, int rows, int cols, enum wq q, struct wmat *w, struct err *e)
{
	return mat_region(m, name, rows, cols, q, 0, rows, 0, cols, w, e);
}

/* A 1-D (cols == 0) or small 2-D float tensor as an owned fp32 array. */
int model_vec_f32(struct model *m, const char *name, int n, float dummy_value, float **out, struct err *e)
{
	float *v = model_own(m, sizeof(float) * (size_t)n);
	if (!v)
		return err_set(e, "%s: out of memory", name);
	if (m->opt.load_dummy) {
		for (int i = 0; i < n; i++)
			v[i] = dummy_value;
	} else {
		const struct st_tensor *t;
		if (st_expect(m->st, name, ST_FLOATS, n, 0, &t, e))
			return -1;
		for (int i = 0; i < n; i++) {
			if (t->dtype == DT_F32) {
				memcpy(&v[i], (const char *)t->data + 4 * (size_t)i, 4);
			} else {
				uint16_t h;
				memcpy(&h, (const char *)t->data + 2 * (size_t)i, 2);
				v[i] = t->dtype == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
			}
		}
		m->weight_bytes += t->nbytes;
	}
	*out = v;
	return 0;
}

/* Tensor parallelism: this rank's part [lo, lo + n) of n_total (heads, intermediate
 * columns, vocabulary rows); uneven totals give the first ranks one more. */
static void tp_part(const struct model *m, int n_total, int *lo, int *n)
{
	int T = m->tp_size, r = m->tp_rank;
	*lo = (int)((int64_t)n_total * r / T);
	*n = (int)((int64_t)n_total * (r + 1) / T) - *lo;
}

enum split { SPLIT_NONE, SPLIT_ROWS, SPLIT_COLS };

/* A checkpoint matrix and this rank's view of it: rows [lo, lo + n) or columns [lo, lo + n),
 * addressed in place inside the mapping (fp8 views keep the full scale grid and their
 * offset, so a cut inside a 128x128 scale block is fine). Counts only the view's bytes. */
static int mat_part(struct model *m, const char *name, int rows, int cols, enum wq q, enum split how, int lo, int n,
		    struct wmat *w, struct err *e)
{
	size_t before = m->weight_bytes;
	bool split = how != SPLIT_NONE && m->tp_size > 1;
	bool by_rows = how == SPLIT_ROWS;
	struct wmat full; /* the whole matrix, or (quantized) the blocks that cover the view */
	if (mat_region(m, name, rows, cols, q, split && by_rows ? lo : 0, split && by_rows ? n : rows,
		       split && !by_rows ? lo : 0, split && !by_rows ? n : cols, &full, e))
		return -1;
	if (!split) {
		*w = full;
		return 0;
	}
	*w = by_rows ? wmat_view(&full, lo - full.row0, n, 0, full.cols)
		     : wmat_view(&full, 0, full.rows, lo - full.col0, n);
	m->weight_bytes = before + wmat_bytes(w);
	return 0;
}

/* Column-parallel in (rows of gate/up), row-parallel out (columns of down) over the
 * intermediate dimension I. */
static int mlp_part(struct model *m, const char *gate, const char *up, const char *down, int I, struct wmat *g,
		    struct wmat *u, struct wmat *d, struct err *e)
{
	int D = m->cfg.hidden_size, lo, n;
	tp_part(m, I, &lo, &n);
	return mat_part(m, gate, I, D, WQ_LINEAR, SPLIT_ROWS, lo, n, g, e) ||
			       mat_part(m, up, I, D, WQ_LINEAR, SPLIT_ROWS, lo, n, u, e) ||
			       mat_part(m, down, D, I, WQ_LINEAR, SPLIT_COLS, lo, n, d, e)
		       ? -1
		       : 0;
}

/* W_UKᵀ of every head, built once at load in the weight's own dtype: uk_t[h] is [Lkv, dn]
 * (contiguous per head, so the absorbed query q_abs = W_UK[h]ᵀ q_nope streams it), element
 * (l, p) = kv_b[h*(dn+dv) + p, l]. For fp8 the scale grid is transposed once and each head's
 * matrix addresses it through (row0, col0) = (0, h*(dn+dv)). */
static int build_uk_t(struct model *m, struct layer_weights *l, const struct wmat *w, int h0, int H, int dn, int dv,
		      struct err *e)
{
	int L = w->cols;
	size_t esz = dtype_size(w->dtype);
	char *d = model_own(m, (size_t)H * (size_t)L * (size_t)dn * esz);
	l->uk_t = model_own(m, sizeof(struct wmat) * (size_t)H);
	if (!d || !l->uk_t)
		return err_set(e, "kv_b_proj: out of memory for W_UK transposed");
	for (int h = 0; h < H; h++)
		for (int p = 0; p < dn; p++)
			for (int c = 0; c < L; c++)
				memcpy(d + (((size_t)h * L + (size_t)c) * (size_t)dn + (size_t)p) * esz,
				       (const char *)w->data +
					       ((size_t)((h0 + h) * (dn + dv) + p) * (size_t)w->ld + (size_t)c) * esz,
				       esz);
	m->weight_bytes += (size_t)H * (size_t)L * (size_t)dn * esz;
	float *st = NULL;
	int sr = 0;
	if (w->scale) { /* block scales (fp8) */
		sr = (w->rows + w->blk_r - 1) / w->blk_r;
		int sc = w->scale_ld;
		st = model_own(m, sizeof(float) * (size_t)sr * (size_t)sc);
		if (!st)
			return err_set(e, "kv_b_proj: out of memory for W_UK transposed");
		for (int i = 0; i < sr; i++)
			for (int j = 0; j < sc; j++)
				st[(size_t)j * (size_t)sr + (size_t)i] = w->scale[(size_t)i * (size_t)sc + (size_t)j];
	}
	for (int h = 0; h < H; h++)
		l->uk_t[h] = (struct wmat){.dtype = w->dtype,
					   .data = d + (size_t)h * L * (size_t)dn * esz,
					   .rows = L,
					   .cols = dn,
					   .ld = dn,
					   .scale = st,
					   .scale_ld = sr,
					   .row0 = 0,
					   .col0 = (h0 + h) * (dn + dv),
					   .blk_r = w->blk_c,
					   .blk_c = w->blk_r};
	return 0;
}

static int load_layer(struct model *m, int i, struct err *e)
{
	const struct model_config *c = &m->cfg;
	struct layer_weights *l = &m->layers[i];
	int D = c->hidden_size, H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim;
	int dv = c->v_head_dim, Lq = c->q_lora_rank, Lkv = c->kv_lora_rank;
	char n[256], n2[256], n3[256];
#define NAME(fmt, ...) (snprintf(n, sizeof n, "model.layers.%d." fmt, i, ##__VA_ARGS__), n)
#define NAME2(fmt, ...) (snprintf(n2, sizeof n2, "model.layers.%d." fmt, i, ##__VA_ARGS__), n2)
#define NAME3(fmt, ...) (snprintf(n3, sizeof n3, "model.layers.%d." fmt, i, ##__VA_ARGS__), n3)
	/* this rank's heads [h0, h0 + Hl) */
	int h0 = m->head0, Hl = m->n_heads_local;
	struct wmat kv_b_full;
	size_t before_kvb;
	if (model_vec_f32(m, NAME("input_layernorm.weight"), D, 1.0f, &l->attn_norm, e) ||
	    model_vec_f32(m, NAME("post_attention_layernorm.weight"), D, 1.0f, &l->ffn_norm, e) ||
	    model_vec_f32(m, NAME("self_attn.kv_a_layernorm.weight"), Lkv, 1.0f, &l->kv_a_norm, e) ||
	    model_mat(m, NAME("self_attn.kv_a_proj_with_mqa.weight"), Lkv + dr, D, WQ_LINEAR, &l->kv_a, e) ||
	    mat_part(m, NAME("self_attn.o_proj.weight"), D, H * dv, WQ_LINEAR, SPLIT_COLS, h0 * dv, Hl * dv,
		     &l->o_proj, e))
		return -1;
	before_kvb = m->weight_bytes;
	if (model_mat(m, NAME("self_attn.kv_b_proj.weight"), H * (dn + dv), Lkv, WQ_ABSORBED, &kv_b_full, e))
		return -1;
	l->kv_b = m->tp_size > 1 ? wmat_view(&kv_b_full, h0 * (dn + dv), Hl * (dn + dv), 0, Lkv) : kv_b_full;
	m->weight_bytes = before_kvb + wmat_bytes(&l->kv_b);
	if (Lq > 0) {
		if (model_mat(m, NAME("self_attn.q_a_proj.weight"), Lq, D, WQ_LINEAR, &l->q_a, e) ||
		    model_vec_f32(m, NAME("self_attn.q_a_layernorm.weight"), Lq, 1.0f, &l->q_a_norm, e) ||
		    mat_part(m, NAME("self_attn.q_b_proj.weight"), H * (dn + dr), Lq, WQ_LINEAR, SPLIT_ROWS,
			     h0 * (dn + dr), Hl * (dn + dr), &l->q_b, e))
			return -1;
	} else if (mat_part(m, NAME("self_attn.q_proj.weight"), H * (dn + dr), D, WQ_LINEAR, SPLIT_ROWS,
			    h0 * (dn + dr), Hl * (dn + dr), &l->q_proj, e)) {
		return -1;
	}
	if (build_uk_t(m, l, &kv_b_full, h0, Hl, dn, dv, e) || (config_is_sparse(c) && model_load_indexer(m, i, l, e)))
		return -1;
	l->moe = config_layer_is_moe(c, i);
	if (!l->moe)
		return mlp_part(m, NAME("mlp.gate_proj.weight"), NAME2("mlp.up_proj.weight"),
				NAME3("mlp.down_proj.weight"), c->intermediate_size, &l->gate, &l->up, &l->down, e);
	int E = c->n_routed_experts, Im = c->moe_intermediate_size;
	if (model_mat(m, NAME("mlp.gate.weight"), E, D, WQ_NONE, &l->router, e))
		return -1;
	if (c->topk_method == TOPK_NOAUX_TC &&
	    model_vec_f32(m, NAME("mlp.gate.e_score_correction_bias"), E, 0.0f, &l->bias, e))
		return -1;
	l->e_gate = model_own(m, sizeof(struct wmat) * (size_t)E);
	l->e_up = model_own(m, sizeof(struct wmat) * (size_t)E);
	l->e_down = model_own(m, sizeof(struct wmat) * (size_t)E);
	if (!l->e_gate || !l->e_up || !l->e_down)
		return err_set(e, "layer %d: out of memory", i);
	for (int x = 0; x < E; x++)
		if (mlp_part(m, NAME("mlp.experts.%d.gate_proj.weight", x), NAME2("mlp.experts.%d.up_proj.weight", x),
			     NAME3("mlp.experts.%d.down_proj.weight", x), Im, &l->e_gate[x], &l->e_up[x],
			     &l->e_down[x], e))
			return -1;
	l->has_shared = c->n_shared_experts > 0;
	if (l->has_shared &&
	    mlp_part(m, NAME("mlp.shared_experts.gate_proj.weight"), NAME2("mlp.shared_experts.up_proj.weight"),
		     NAME3("mlp.shared_experts.down_proj.weight"), c->n_shared_experts * Im, &l->gate, &l->up,
		     &l->down, e))
		return -1;
#undef NAME3
#undef NAME2
#undef NAME
	return 0;
}

/* The MTP module's embedding or head: its own tensor, unless the checkpoint has none or a
 * byte-equal copy of the model's (DeepSeek's V3/R1 carry copies: 1.9 GB each). A head is
 * split by vocabulary under TP, and fp8 under --quantize-lm-head, as the model's. */
static int mtp_shared_mat(struct model *m, const char *name, const char *model_name, bool head,
			  const struct wmat *model_w, struct wmat *w, bool *own, struct err *e)
{
	const struct model_config *c = &m->cfg;
	*own = false;
	*w = *model_w;
	if (m->opt.load_dummy)
		return 0;
	const struct st_tensor *t = st_find(m->st, name), *mt = st_find(m->st, model_name);
	if (!t || (mt && t->dtype == mt->dtype && t->nbytes == mt->nbytes && !memcmp(t->data, mt->data, t->nbytes)))
		return 0;
	*own = true;
	if (head)
		return mat_part(m, name, c->vocab_size, c->hidden_size, WQ_HEAD, SPLIT_ROWS, m->vocab0,
				m->vocab_cols[m->tp_rank], w, e);
	return model_mat(m, name, c->vocab_size, c->hidden_size, WQ_NONE, w, e);
}

static int load_mtp(struct model *m, struct err *e)
{
	const struct model_config *c = &m->cfg;
	int L = c->num_hidden_layers, D = c->hidden_size;
	struct mtp_weights *t = &m->mtp;
	char n[256];
#define MNAME(s) (snprintf(n, sizeof n, "model.layers.%d.%s", L, s), n)
	if (model_vec_f32(m, MNAME("enorm.weight"), D, 1.0f, &t->enorm, e) ||
	    model_vec_f32(m, MNAME("hnorm.weight"), D, 1.0f, &t->hnorm, e) ||
	    model_vec_f32(m, MNAME("shared_head.norm.weight"), D, 1.0f, &t->head_norm, e) ||
	    model_mat(m, MNAME("eh_proj.weight"), D, 2 * D, WQ_LINEAR, &t->eh_proj, e) ||
	    mtp_shared_mat(m, MNAME("embed_tokens.weight"), "model.embed_tokens.weight", false, &m->embed, &t->embed,
			   &t->own_embed, e) ||
	    mtp_shared_mat(m, MNAME("shared_head.head.weight"),
			   c->tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", true, &m->lm_head,
			   &t->head, &t->own_head, e) ||
	    load_layer(m, L, e))
		return -1;
#undef MNAME
	m->n_layers = L + 1;
	m->hidden = model_own(m, sizeof(float) * (size_t)m->opt.max_batch_tokens * (size_t)D);
	m->mtp_hidden = model_own(m, sizeof(float) * (size_t)m->opt.max_seqs * (size_t)D);
	if (!m->hidden || !m->mtp_hidden)
		return err_set(e, "model: out of memory for the MTP hidden states");
	return 0;
}

static size_t max_z(size_t a, size_t b) { return a > b ? a : b; }

/* Upper bound of one forward's scratch: mirrors the ALLOC calls of forward.c. */
static size_t scratch_bytes(const struct model *m)
{
	const struct model_config *c = &m->cfg;
	size_t n = (size_t)m->opt.max_batch_tokens, D = (size_t)c->hidden_size, H = (size_t)c->num_attention_heads;
	size_t dn = (size_t)c->qk_nope_head_dim, dr = (size_t)c->qk_rope_head_dim, dv = (size_t)c->v_head_dim;
	size_t Lq = (size_t)c->q_lora_rank, Lkv = (size_t)c->kv_lora_rank, row = Lkv + dr;
	size_t k = (size_t)(c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 0), E = (size_t)c->n_routed_experts;
	size_t Im = (size_t)c->moe_intermediate_size, Is = (size_t)c->n_shared_experts * Im, nk = n * k;
	size_t dec = attn_decode_scratch_bytes(m->n_threads, m->opt.max_seqs, (int)n, (int)H, (int)Lkv, (int)dr);
	size_t pre = attn_prefill_scratch_bytes((int)n, (int)H, (int)dn, (int)dr, (int)dv, (int)Lkv, m->ws_rows,
						m->n_threads);
	/* h, xn, the backend plan; MTP: its [n, 2D] input */
	size_t persistent = (m->opt.load_mtp ? 4 : 2) * n * D * 4 + dec;
	size_t attn = 4 * (n * H * (dn + dr) + n * row + n * Lq + n * H * dv + n * H * row + n * H * Lkv + n * H) +
		      H * (sizeof(struct wmat) + sizeof(struct gemm_job) + 128) + pre + dec;
	size_t dense = 4 * 2 * n * (size_t)c->intermediate_size;
	size_t moe = 4 * (n * E + 2 * nk + 3 * (E + 1) + 2 * nk + nk * D + 2 * nk * Im + 2 * n * Is + nk * D + n * D) +
		     (2 * E + 2) * sizeof(struct gemm_job);
	if (config_is_sparse(c)) /* the indexer, then the absorbed path in chunks of 256 tokens */
		attn += model_indexer_scratch_bytes(m) + 4 * (n + 1) + 64 +
			attn_sparse_scratch_bytes(m->n_threads, n < 256 ? (int)n : 256, (int)H, c->index_topk,
						  (int)Lkv, (int)dr);
	size_t logits = n * D * 4;
	/* TP / DCP: the all-reduce temporaries [2, n, D], lm_head's column slice [n, V/T], the
	 * decode q all-gather [n, W*H, row], partial outputs and LSEs [W, n, W*H], the local
	 * head outputs, and the prefill context gather */
	size_t W = (size_t)(m->opt.comm ? m->opt.comm->dcp_size : 1), dist = 0;
	if (m->tp_size > 1)
		dist = 4 * (2 * n * D + n * (size_t)c->vocab_size + n * H * row + n * H * Lkv + (W + 2) * n * H) +
		       attn_prefill_dcp_scratch_bytes(m->ws_rows, (int)W, (int)Lkv, (int)dr) + 16 * 64;
	return persistent + dist + max_z(max_z(attn, dense), max_z(moe, logits)) + 64 * 64;
}

static int check_config(const struct model_config *c, struct err *e)
{
	if (c->qk_rope_head_dim % 2 || c->qk_rope_head_dim / 2 > ROPE_MAX_PAIRS)
		return err_set(e, "config: qk_rope_head_dim %d unsupported (even, <= %d)", c->qk_rope_head_dim,
			       2 * ROPE_MAX_PAIRS);
	if (c->n_routed_experts > ROUTE_MAX_EXPERTS)
		return err_set(e, "config: n_routed_experts %d unsupported (<= %d)", c->n_routed_experts,
			       ROUTE_MAX_EXPERTS);
	if (c->n_routed_experts > 0 && (c->num_experts_per_tok <= 0 || c->num_experts_per_tok > c->n_routed_experts ||
					c->num_experts_per_tok > ROUTE_MAX_TOPK))
		return err_set(e, "config: num_experts_per_tok %d unsupported", c->num_experts_per_tok);
	if (c->n_group > 1 && c->n_routed_experts % c->n_group)
		return err_set(e, "config: n_routed_experts %d is not a multiple of n_group %d", c->n_routed_experts,
			       c->n_group);
	return 0;
}

int model_load(const char *dir, const struct model_options *opt, struct model **out, struct err *e)
{
	struct model *m = calloc(1, sizeof *m);
	if (!m)
		return err_set(e, "model: out of memory");
	m->opt = *opt;
	if (m->opt.max_batch_tokens <= 0)
		m->opt.max_batch_tokens = 2048;
	if (m->opt.max_seqs <= 0)
		m->opt.max_seqs = 256;
	if (m->opt.max_model_len <= 0)
		m->opt.max_model_len = 4096;
	m->tp_size = m->opt.comm ? m->opt.comm->tp_size : m->opt.tp_size > 1 ? m->opt.tp_size : 1;
	m->tp_rank = m->opt.comm ? m->opt.comm->tp_rank : m->tp_size > 1 ? m->opt.tp_rank : 0;
	if (m->tp_size > 1 && (!m->opt.comm || m->tp_rank < 0 || m->tp_rank >= m->tp_size)) {
		err_set(e, "model: tensor parallelism (tp_size %d) needs a communicator", m->tp_size);
		goto fail;
	}
	if (config_load(dir, &m->cfg, e) || check_config(&m->cfg, e))
		goto fail;
	const struct model_config *c = &m->cfg;
	if (c->num_attention_heads % m->tp_size) {
		err_set(e, "model: tensor-parallel-size %d must divide num_attention_heads %d", m->tp_size,
			c->num_attention_heads);
		goto fail;
	}
	m->n_heads_local = c->num_attention_heads / m->tp_size;
	m->head0 = m->tp_rank * m->n_heads_local;
	m->vocab_cols = calloc((size_t)m->tp_size, sizeof *m->vocab_cols);
	if (!m->vocab_cols) {
		err_set(e, "model: out of memory");
		goto fail;
	}
	for (int k = 0; k < m->tp_size; k++)
		m->vocab_cols[k] = (int)((int64_t)c->vocab_size * (k + 1) / m->tp_size -
					 (int64_t)c->vocab_size * k / m->tp_size);
	m->vocab0 = (int)((int64_t)c->vocab_size * m->tp_rank / m->tp_size);
	if (m->opt.act_dtype_auto)
		m->opt.act_dtype = !strcmp(c->torch_dtype, "float32") ? DT_F32 : DT_BF16;
	if (m->opt.act_dtype != DT_F32 && m->opt.act_dtype != DT_BF16) {
		err_set(e, "model: activation dtype %s unsupported (float32 or bfloat16)",
			dtype_name(m->opt.act_dtype));
		goto fail;
	}
	m->n_threads = m->opt.pool ? pool_size(m->opt.pool) : 1;
	m->ws_rows = m->opt.max_model_len < 1024 ? m->opt.max_model_len : 1024;
	int W = m->opt.comm ? m->opt.comm->dcp_size : 1;
	if (W > 1) { /* DCP context chunks: whole multiples of W x I (mla-dcp-spec §4.6) */
		int wi = W * (m->opt.dcp_interleave > 0 ? m->opt.dcp_interleave : 1);
		m->ws_rows = (m->ws_rows + wi - 1) / wi * wi;
	}
	struct rope_params rp = {.dim = c->qk_rope_head_dim,
				 .theta = c->rope_theta,
				 .yarn = c->rope_yarn,
				 .factor = c->yarn_factor,
				 .original_max_position = c->yarn_original_max_position,
				 .beta_fast = c->yarn_beta_fast,
				 .beta_slow = c->yarn_beta_slow,
				 .mscale = c->yarn_mscale,
				 .mscale_all_dim = c->yarn_mscale_all_dim};
	ops_rope_init(&m->rope, &rp);
	m->scale = ops_mla_softmax_scale(c->qk_nope_head_dim + c->qk_rope_head_dim, &rp);
	if (m->opt.load_mtp && c->num_nextn_predict_layers < 1) {
		err_set(e,
			"%s/config.json: speculative method deepseek_mtp needs the checkpoint's MTP layer, and "
			"num_nextn_predict_layers is 0",
			dir);
		goto fail;
	}
	if (!m->opt.load_dummy && st_open(dir, c->num_hidden_layers + (m->opt.load_mtp ? 1 : 0), &m->st, e))
		goto fail;
	m->n_layers = c->num_hidden_layers;
	m->layers = calloc((size_t)c->num_hidden_layers + 1, sizeof *m->layers);
	if (!m->layers) {
		err_set(e, "model: out of memory");
		goto fail;
	}
	int tty = isatty(2);
	if (model_mat(m, "model.embed_tokens.weight", c->vocab_size, c->hidden_size, WQ_NONE, &m->embed, e) ||
	    model_vec_f32(m, "model.norm.weight", c->hidden_size, 1.0f, &m->final_norm, e))
		goto fail;
	/* tied embeddings share the bytes, unless the head is to be fp8: then it is a copy */
	if (c->tie_word_embeddings && !m->opt.quantize_lm_head) {
		m->lm_head = m->tp_size > 1
				     ? wmat_view(&m->embed, m->vocab0, m->vocab_cols[m->tp_rank], 0, c->hidden_size)
				     : m->embed;
	} else if (mat_part(m, c->tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", c->vocab_size,
			    c->hidden_size, WQ_HEAD, SPLIT_ROWS, m->vocab0, m->vocab_cols[m->tp_rank], &m->lm_head,
			    e)) {
		goto fail;
	}
	for (int i = 0; i < c->num_hidden_layers; i++) {
		if (load_layer(m, i, e))
			goto fail;
		if (tty)
			fprintf(stderr, "\rloading %s: layer %d/%d, %.2f GB",
				m->opt.load_dummy ? "dummy weights" : dir, i + 1, c->num_hidden_layers,
				m->weight_bytes / 1e9);
	}
	if (m->opt.load_mtp && load_mtp(m, e))
		goto fail;
	if (tty)
		fprintf(stderr, "\n");
	if (model_prepack_all(m, e))
		goto fail;
	if (arena_init(&m->arena, scratch_bytes(m))) {
		err_set(e, "model: out of memory for the %zu-byte step scratch", scratch_bytes(m));
		goto fail;
	}
	bigmem_log_hugepages();
	/* the kernels this CPU gets: bf16 activations on avx512_bf16 run bf16 dot products */
	enum ops_level lvl = ops_level_best();
	const struct wformat *qf = m->opt.quant, *hf = quant_format(m, WQ_HEAD);
	if (m->quant_src_bytes) {
		const struct wformat *f = qf ? qf : hf;
		char what[128] = "--quantize-lm-head";
		if (qf)
			snprintf(what, sizeof what, "--quantization %s%s", qf->name,
				 hf ? " --quantize-lm-head" : " (the linear layers)");
		LOG_I("model", "%s: %.2f GB of weights quantized to %s in %.1f s%s%s%s", what,
		      m->quant_src_bytes / 1e9, f->quant_desc, m->quant_s, f->kernels ? " (" : "",
		      f->kernels ? f->kernels(lvl) : "", f->kernels ? " kernels)" : "");
	} else if (qf) {
		LOG_I("model", "--quantization %s: the checkpoint's linear layers are %s already", qf->name, qf->name);
	}
	if (model_has_mtp(m))
		LOG_I("model", "MTP module: layer %d%s%s", c->num_hidden_layers,
		      m->mtp.own_embed ? ", its own embedding" : ", the model's embedding",
		      m->mtp.own_head ? ", its own head" : ", the model's lm_head");
	LOG_I("model", "%s: %d layers, %.2f GB of weights, %s activations, scratch %.1f MB, %s kernels%s",
	      m->opt.load_dummy ? "dummy" : dir, c->num_hidden_layers, m->weight_bytes / 1e9,
	      m->opt.act_dtype == DT_F32 ? "float32" : "bfloat16", m->arena.cap / 1e6, ops_level_name(lvl),
	      lvl >= OPS_AVX512_BF16 && m->opt.act_dtype == DT_BF16 ? " (bf16 dot products)" : "");
	*out = m;
	return 0;
fail:
	model_free(m);
	return -1;
}

void model_free(struct model *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n_owned; i++)
		bigmem_free(m->owned[i].p, m->owned[i].bytes);
	for (int i = 0; i < m->n_qbufs; i++)
		if (m->qbufs[i].bytes)
			bigmem_free(m->qbufs[i].p, m->qbufs[i].bytes);
	free(m->owned);
	bigmem_slab_free(&m->small);
	free(m->qbufs);
	free(m->layers);
	free(m->vocab_cols);
	arena_fini(&m->arena);
	st_close(m->st);
	free(m);
}

const struct model_config *model_config(const struct model *m) { return &m->cfg; }
size_t model_weight_bytes(const struct model *m) { return m->weight_bytes; }
enum dtype model_act_dtype(const struct model *m) { return m->opt.act_dtype; }
size_t model_step_weight_bytes(const struct model *m) { return m->step_weight_bytes; }
double model_step_index_seconds(const struct model *m) { return m->step_index_s; }

int model_kv_layers(const struct model *m) { return m->n_layers; }
bool model_has_mtp(const struct model *m) { return m->n_layers > m->cfg.num_hidden_layers; }

void model_set_prefill_chunk(struct model *m, int ws_rows)
{
	int w = ws_rows < 1 ? 1 : ws_rows;
	m->ws_rows = w < m->ws_rows ? w : m->ws_rows; /* never above what the arena was sized for */
}
