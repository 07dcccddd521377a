/* One tensor of a checkpoint as the model holds it (weights.c): found, checked (presence,
 * shape, dtype: errors name the file and the tensor), kept in the mapping in its compact dtype
 * (bf16 stays bf16, fp8 stays fp8 + block scales) or quantized at load (--quantization), and cut
 * to this rank's part under tensor parallelism; or deterministic random values under
 * --load-format dummy. The tensor tables (tensors.h) load every weight through these.
 * Weights kept in the mapping are views (struct wmat with row / column offsets), so a
 * tensor-parallel slice at any boundary, inside fp8 scale blocks too, costs no copy. Weights
 * quantized at load cover the rank's slice with the format's whole scale blocks (fp8: the
 * 128x128 blocks around it; int8: exactly the slice) and the wmat's (row0, col0) says where
 * that cover starts, so every rank holds the bytes and scales of the whole matrix quantized at
 * once. Compressed-tensors int4 checkpoints' modules: weights_ct.c. */
#include "model/weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mono.h"
#include "model/weights_ct.h"
#include "ops/pool.h"
#include "ops/quant_int4.h"
#include "ops/wformat.h"

#define BLK 128

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
	model_dummy_fill(m, name, DT_F8_E4M3, d, n, 0);
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
	void *p = drop_when_packed ? model_own_in(&m->qbufs, &m->n_qbufs, &m->cap_qbufs, bytes) : model_own(m, bytes);
	if (p)
		m->weight_bytes += bytes;
	return p;
}

/* rows [r0, r0 + nr) x cols [c0, c0 + nc) of src (a checkpoint tensor in the mapping, or
 * dummy weights) quantized to format f into owned memory; *w's (row0, col0) is where it starts
 * in src (the format may widen the region to whole scale blocks: mat_part's view is relative) */
int model_quantize_mat(struct model *m, const struct wformat *f, const char *file, const char *name,
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

/* the format of the linear layers other than the routed experts: --quantization-rest's (NULL:
 * kept), else --quantization's, int8 under int4 (routed experts are most of a DeepSeek MoE's
 * bytes and take 4 bits well; attention and the shared experts, read by every token, keep 8) */
static const struct wformat *rest_format(const struct model *m)
{
	const struct wformat *f = m->opt.quant;
	if (m->opt.quant_rest_set)
		return m->opt.quant_rest;
	return f && f->dtype == DT_I4 ? wformat_by_name("int8") : f;
}

const struct wformat *model_quant_format(const struct model *m, enum wq q)
{
	const struct wformat *r = rest_format(m);
	switch (q) {
	case WQ_EXPERT: return m->opt.quant;
	case WQ_LINEAR: return r;
	case WQ_ABSORBED: return r && r->transposable ? r : NULL;
	case WQ_HEAD: return !m->opt.quantize_lm_head ? NULL : r ? r : wformat_by_name("fp8");
	case WQ_EMBED: return !m->opt.quantize_embedding ? NULL : r ? r : wformat_by_name("fp8");
	case WQ_NONE: break;
	}
	return NULL;
}

/* int4 cut by tensor parallelism inside a group of 32 columns: its groups would not be the
 * checkpoint's nor the single-rank run's (int8's exactly-the-slice groups of 128 may be) */
static int tp_cut_error(const char *name, const struct wformat *f, int cols, int c0, struct err *e)
{
	return err_set(e,
		       "%s: tensor parallelism cuts its %d columns at %d, inside one of %s's groups of %d: use a "
		       "--tensor-parallel-size whose part of the %d columns is a multiple of %d",
		       name, cols, c0, f->name, f->blk_k, cols, f->blk_k);
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
	bool lin = q == WQ_LINEAR || q == WQ_EXPERT || q == WQ_ABSORBED;
	/* a compressed-tensors int4 module stays int4 whatever -q says (dummy weights: random
	 * packed nibbles and scales through the same repack) */
	if (model_ct_packed(m, name, q != WQ_NONE))
		return model_ct_load(m, name, rows, cols, q == WQ_ABSORBED, r0, nr, c0, nc, w, e);
	const struct wformat *qf = model_quant_format(m, q);
	char flag[64];
	if (q == WQ_HEAD || q == WQ_EMBED)
		snprintf(flag, sizeof flag, q == WQ_HEAD ? "--quantize-lm-head" : "--quantize-embedding");
	else
		snprintf(flag, sizeof flag, "--quantization%s %s",
			 q != WQ_EXPERT && m->opt.quant_rest_set ? "-rest" : "", qf ? qf->name : "");
	if (qf && qf->dtype == DT_I4 && c0 % qf->blk_k)
		return tp_cut_error(name, qf, cols, c0, e);
	if (m->opt.load_dummy && lin && m->cfg.fp8) {
		if (dummy_fp8(m, name, rows, cols, w, e))
			return -1;
		if (!qf || qf->dtype == w->dtype)
			return 0;
		struct wmat src = *w;
		m->weight_bytes -= wmat_bytes(&src); /* the fp8 bytes stay allocated, unused */
		return model_quantize_mat(m, qf, "dummy", name, &src, r0, nr, c0, nc, flag, w, e);
	}
	if (m->opt.load_dummy) {
		size_t n = (size_t)rows * (size_t)cols;
		uint16_t *d = qf ? malloc(n * 2) : model_own(m, n * 2);
		if (!d)
			return err_set(e, "%s: out of memory for dummy tensor (%zu bytes)", name, n * 2);
		model_dummy_fill(m, name, DT_BF16, d, n, 1.7f / sqrtf((float)cols));
		w->dtype = DT_BF16;
		w->data = d;
		if (!qf) {
			m->weight_bytes += n * 2;
			return 0;
		}
		struct wmat src = *w;
		int rc = model_quantize_mat(m, qf, "dummy", name, &src, r0, nr, c0, nc, flag, w, e);
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
		return model_quantize_mat(m, qf, t->file, name, &src, r0, nr, c0, nc, flag, w, e);
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
			return model_quantize_mat(m, qf, t->file, name, &src, r0, nr, c0, nc, flag, w, e);
		}
		m->weight_bytes += s->nbytes;
	}
	m->weight_bytes += t->nbytes;
	return 0;
}

void model_mat_dummy_bytes(const struct model *m, const char *name, int rows, int cols, enum wq q, enum split how,
			   int lo, int n, size_t by[DT_COUNT])
{
	bool split = how != SPLIT_NONE && m->tp_size > 1;
	int nr = split && how == SPLIT_ROWS ? n : rows, nc = split && how == SPLIT_COLS ? n : cols;
	bool lin = q == WQ_LINEAR || q == WQ_EXPERT || q == WQ_ABSORBED;
	size_t whole = (size_t)rows * (size_t)cols;
	if (model_ct_packed(m, name, q != WQ_NONE)) {
		by[DT_I4] += int4_data_bytes(nr, nc);
		return;
	}
	const struct wformat *qf = model_quant_format(m, q);
	if (lin && m->cfg.fp8) { /* made whole in fp8 (and kept) before any requantizing */
		int br = m->cfg.fp8_block_rows > 0 ? m->cfg.fp8_block_rows : BLK;
		int bc = m->cfg.fp8_block_cols > 0 ? m->cfg.fp8_block_cols : BLK;
		by[DT_F8_E4M3] += whole + 4 * (size_t)((rows + br - 1) / br) * (size_t)((cols + bc - 1) / bc);
		if (!qf || qf->dtype == DT_F8_E4M3)
			return;
	}
	if (!qf) {
		by[DT_BF16] += whole * 2;
		return;
	}
	struct wmat w = {.dtype = qf->dtype, .rows = nr, .cols = nc, .ld = nc, .blk_r = qf->blk_n, .blk_c = qf->blk_k};
	by[qf->dtype] += wmat_bytes(&w);
}

int model_mat(struct model *m, const char *name, int rows, int cols, enum wq q, struct wmat *w, struct err *e)
{
	return mat_region(m, name, rows, cols, q, 0, rows, 0, cols, w, e);
}

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

void model_tp_part(const struct model *m, int n_total, int *lo, int *n)
{
	int T = m->tp_size, r = m->tp_rank;
	*lo = (int)((int64_t)n_total * r / T);
	*n = (int)((int64_t)n_total * (r + 1) / T) - *lo;
}

int model_mat_part(struct model *m, const char *name, int rows, int cols, enum wq q, enum split how, int lo, int n,
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
