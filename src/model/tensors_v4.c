/* DeepSeek-V4's tensor table and its walker (tensors_v4.h). */
#include "model/tensors_v4.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/weights.h"
#include "ops/wformat.h"
#include "model_v4/fp4.h"
#include "ops/wf_fp4.h"

enum v4_kind {
	VK_FP8, /* F8_E4M3 + F8_E8M0 `.scale` per block -> fp8 wmat, fp32 scales */
	VK_MAT, /* a float matrix (BF16 / F16 / F32) as the checkpoint has it */
	VK_FP4, /* routed experts: I8 [rows, cols/2] + F8_E8M0 [rows, cols/32] -> bf16 wmat (exact);
		  * as VK_FP8 under expert_dtype fp8 (V4-Flash-Base) */
	VK_F32, /* any float tensor [rows] or [rows, cols] -> owned f32 */
	VK_I64, /* I64 [rows, cols] -> owned int64 */
};

/* whose struct a row's offset is into */
enum v4_base { VB_MODEL, VB_LAYER, VB_MTP };

/* shape symbols */
enum {
	D = 1,
	HC_D,
	HC,
	HC_MIX,
	THREE,
	ONE,
	Q,
	HHD,
	HD,
	HD2,
	GO,
	HDG,
	RATIO,
	CW,
	HIDI,
	HI,
	DI,
	DI2,
	FOUR,
	E,
	IM,
	TOPK,
	V,
	H,
	OG,
	OLR,
};

struct v4_tensor_spec {
	const char *name;
	enum v4_kind kind;
	enum v4_base base;
	size_t off;
	int rows, cols; /* cols 0: 1-D */
	bool count;     /* one per routed expert (%d after the prefix) */
	bool (*on)(const struct v4_config *c, int idx);
	/* tensor parallelism: this rank's rows or columns, dim(tp_over) units (heads, groups,
	 * intermediate columns, vocabulary rows) of dim(tp_per) each (0: 1); SPLIT_NONE: whole */
	enum split split;
	int tp_over, tp_per;
	/* o_groups under T a multiple of them: each group shared by T / o_groups ranks, wo_a's
	 * columns (the group's heads) cut among them too (dim(tp_sub) columns) */
	int tp_sub;
};

static int dim(const struct v4_config *c, int idx, int sym)
{
	int r = idx >= 0 ? v4_layer_ratio(c, idx) : 0;
	switch (sym) {
	case D: return c->hidden_size;
	case HC_D: return c->hc_mult * c->hidden_size;
	case HC: return c->hc_mult;
	case HC_MIX: return (2 + c->hc_mult) * c->hc_mult;
	case THREE: return 3;
	case ONE: return 1;
	case Q: return c->q_lora_rank;
	case HHD: return c->num_attention_heads * c->head_dim;
	case HD: return c->head_dim;
	case HD2: return 2 * c->head_dim;
	case GO: return c->o_groups * c->o_lora_rank;
	case HDG: return c->num_attention_heads * c->head_dim / c->o_groups;
	case RATIO: return r;
	case CW: return r == 4 ? 2 * c->head_dim : c->head_dim;
	case HIDI: return c->index_n_heads * c->index_head_dim;
	case HI: return c->index_n_heads;
	case DI: return c->index_head_dim;
	case DI2: return 2 * c->index_head_dim;
	case FOUR: return 4;
	case E: return c->n_routed_experts;
	case IM: return c->moe_intermediate_size;
	case TOPK: return c->num_experts_per_tok;
	case V: return c->vocab_size;
	case H: return c->num_attention_heads;
	case OG: return c->o_groups;
	case OLR: return c->o_lora_rank;
	}
	return 0;
}

static bool compressed(const struct v4_config *c, int i) { return v4_layer_ratio(c, i) > 0; }
static bool csa(const struct v4_config *c, int i) { return v4_layer_ratio(c, i) == 4; }
static bool hash(const struct v4_config *c, int i) { return v4_layer_is_hash(c, i); }
static bool scored(const struct v4_config *c, int i) { return !v4_layer_is_hash(c, i); }

#define G(f) VB_MODEL, offsetof(struct v4_weights, f)
#define L(f) VB_LAYER, offsetof(struct v4_layer, f)
#define M(f) VB_MTP, offsetof(struct v4_mtp, f)

static const struct v4_tensor_spec rows[] = {
	{"embed.weight", VK_MAT, G(embed), V, D, .count = false},
	{"norm.weight", VK_F32, G(norm), D, 0, .count = false},
	{"head.weight", VK_MAT, G(head), V, D, .split = SPLIT_ROWS, .tp_over = V}, /* vocab-parallel */
	{"hc_head_fn", VK_F32, G(hc_head_fn), HC, HC_D, .count = false},
	{"hc_head_base", VK_F32, G(hc_head_base), HC, 0, .count = false},
	{"hc_head_scale", VK_F32, G(hc_head_scale), ONE, 0, .count = false},
	/* a block: hyper-connections, norms */
	{"%shc_attn_fn", VK_F32, L(hca_fn), HC_MIX, HC_D, .count = false},
	{"%shc_attn_base", VK_F32, L(hca_base), HC_MIX, 0, .count = false},
	{"%shc_attn_scale", VK_F32, L(hca_scale), THREE, 0, .count = false},
	{"%shc_ffn_fn", VK_F32, L(hcf_fn), HC_MIX, HC_D, .count = false},
	{"%shc_ffn_base", VK_F32, L(hcf_base), HC_MIX, 0, .count = false},
	{"%shc_ffn_scale", VK_F32, L(hcf_scale), THREE, 0, .count = false},
	{"%sattn_norm.weight", VK_F32, L(attn_norm), D, 0, .count = false},
	{"%sffn_norm.weight", VK_F32, L(ffn_norm), D, 0, .count = false},
	/* attention: the q latent, one kv, the grouped low-rank output, the sink; under TP a
	 * rank's heads (wq_b's rows, their sinks) and whole wo_a groups (wo_b's columns of them) */
	{"%sattn.wq_a.weight", VK_FP8, L(wq_a), Q, D, .count = false},
	{"%sattn.q_norm.weight", VK_F32, L(q_norm), Q, 0, .count = false},
	{"%sattn.wq_b.weight", VK_FP8, L(wq_b), HHD, Q, .split = SPLIT_ROWS, .tp_over = H, .tp_per = HD},
	{"%sattn.wkv.weight", VK_FP8, L(wkv), HD, D, .count = false},
	{"%sattn.kv_norm.weight", VK_F32, L(kv_norm), HD, 0, .count = false},
	{"%sattn.wo_a.weight", VK_FP8, L(wo_a), GO, HDG, .split = SPLIT_ROWS, .tp_over = OG, .tp_per = OLR,
	 .tp_sub = HDG},
	{"%sattn.wo_b.weight", VK_FP8, L(wo_b), D, GO, .split = SPLIT_COLS, .tp_over = OG, .tp_per = OLR},
	{"%sattn.attn_sink", VK_F32, L(sink), H, 0, .split = SPLIT_ROWS, .tp_over = H},
	/* the compressor (ratio > 0) */
	{"%sattn.compressor.wkv.weight", VK_MAT, L(c_wkv), CW, D, .on = compressed},
	{"%sattn.compressor.wgate.weight", VK_MAT, L(c_wgate), CW, D, .on = compressed},
	{"%sattn.compressor.ape", VK_F32, L(c_ape), RATIO, CW, .on = compressed},
	{"%sattn.compressor.norm.weight", VK_F32, L(c_norm), HD, 0, .on = compressed},
	/* the indexer (ratio 4) */
	{"%sattn.indexer.wq_b.weight", VK_FP8, L(ix_wq_b), HIDI, Q, .on = csa},
	{"%sattn.indexer.weights_proj.weight", VK_MAT, L(ix_wproj), HI, D, .on = csa},
	{"%sattn.indexer.compressor.wkv.weight", VK_MAT, L(ic_wkv), DI2, D, .on = csa},
	{"%sattn.indexer.compressor.wgate.weight", VK_MAT, L(ic_wgate), DI2, D, .on = csa},
	{"%sattn.indexer.compressor.ape", VK_F32, L(ic_ape), FOUR, DI2, .on = csa},
	{"%sattn.indexer.compressor.norm.weight", VK_F32, L(ic_norm), DI, 0, .on = csa},
	/* MoE: the router, hash or scored; the routed experts; the shared one; under TP each
	 * expert's intermediate columns (w1 / w3 rows, w2 columns) */
	{"%sffn.gate.weight", VK_MAT, L(gate), E, D, .count = false},
	{"%sffn.gate.tid2eid", VK_I64, L(tid2eid), V, TOPK, .on = hash},
	{"%sffn.gate.bias", VK_F32, L(gate_bias), E, 0, .on = scored},
	{"%sffn.experts.%d.w1.weight", VK_FP4, L(w1), IM, D, .count = true, .split = SPLIT_ROWS, .tp_over = IM},
	{"%sffn.experts.%d.w3.weight", VK_FP4, L(w3), IM, D, .count = true, .split = SPLIT_ROWS, .tp_over = IM},
	{"%sffn.experts.%d.w2.weight", VK_FP4, L(w2), D, IM, .count = true, .split = SPLIT_COLS, .tp_over = IM},
	{"%sffn.shared_experts.w1.weight", VK_FP8, L(s1), IM, D, .split = SPLIT_ROWS, .tp_over = IM},
	{"%sffn.shared_experts.w3.weight", VK_FP8, L(s3), IM, D, .split = SPLIT_ROWS, .tp_over = IM},
	{"%sffn.shared_experts.w2.weight", VK_FP8, L(s2), D, IM, .split = SPLIT_COLS, .tp_over = IM},
	/* an MTP module's own (mtp.K.*; model.py shares the main embedding and head) */
	{"%se_proj.weight", VK_FP8, M(e_proj), D, D, .count = false},
	{"%sh_proj.weight", VK_FP8, M(h_proj), D, D, .count = false},
	{"%senorm.weight", VK_F32, M(enorm), D, 0, .count = false},
	{"%shnorm.weight", VK_F32, M(hnorm), D, 0, .count = false},
	{"%snorm.weight", VK_F32, M(norm), D, 0, .count = false},
	{"%shc_head_fn", VK_F32, M(hc_fn), HC, HC_D, .count = false},
	{"%shc_head_base", VK_F32, M(hc_base), HC, 0, .count = false},
	{"%shc_head_scale", VK_F32, M(hc_scale), ONE, 0, .count = false},
};

const struct v4_tensor_spec *const v4_tensor_rows = rows;
const int v4_tensor_n_rows = (int)(sizeof rows / sizeof rows[0]);
const char *v4_tensor_name(int k) { return rows[k].name; }

struct ctx {
	struct model *m;
	const struct v4_config *c;
	struct v4_weights *w;
	int idx; /* the block's compress_ratios entry (-1: the model's rows) */
};

/* a tensor's bytes in owned, aligned memory */
static const void *aligned(struct ctx *x, const struct st_tensor *t, struct err *e)
{
	size_t a = dtype_size(t->dtype);
	if (!((uintptr_t)t->data % (a ? a : 1)))
		return t->data;
	void *p = model_own(x->m, t->nbytes);
	if (!p) {
		err_set(e, "%s: tensor %s: out of memory", t->file, t->name);
		return NULL;
	}
	return memcpy(p, t->data, t->nbytes);
}

/* `NAME.weight`'s `NAME.scale`: F8_E8M0 [sr, sc] -> fp32 powers of two */
static float *e8m0_scales(struct ctx *x, const char *wname, int sr, int sc, struct err *e)
{
	char sname[320];
	size_t n = strlen(wname) - strlen("weight");
	snprintf(sname, sizeof sname, "%.*sscale", (int)n, wname);
	const struct st_tensor *t;
	if (st_expect(x->m->st, sname, ST_DT(DT_F8_E8M0), sr, sc, &t, e))
		return NULL;
	float *s = model_own(x->m, sizeof(float) * (size_t)sr * (size_t)sc);
	if (!s) {
		err_set(e, "%s: tensor %s: out of memory", t->file, sname);
		return NULL;
	}
	const uint8_t *b = t->data;
	for (size_t i = 0; i < (size_t)sr * (size_t)sc; i++) {
		if (b[i] == 0xff) {
			err_set(e, "%s: tensor %s: scale %zu is NaN (0xff)", t->file, sname, i);
			return NULL;
		}
		s[i] = fp4_e8m0_to_f32(b[i]);
	}
	x->m->weight_bytes += t->nbytes;
	return s;
}

static int load_fp8(struct ctx *x, const char *name, int rows, int cols, struct wmat *w, struct err *e)
{
	const struct st_tensor *t;
	if (st_expect(x->m->st, name, ST_DT(DT_F8_E4M3), rows, cols, &t, e))
		return -1;
	int br = x->c->fp8_block_rows > 0 ? x->c->fp8_block_rows : 128;
	int bc = x->c->fp8_block_cols > 0 ? x->c->fp8_block_cols : 128;
	int sc = (cols + bc - 1) / bc;
	float *s = e8m0_scales(x, name, (rows + br - 1) / br, sc, e);
	if (!s)
		return -1;
	*w = (struct wmat){.dtype = DT_F8_E4M3,
			   .data = t->data,
			   .rows = rows,
			   .cols = cols,
			   .ld = cols,
			   .scale_ld = sc,
			   .blk_r = br,
			   .blk_c = bc};
	w->scale = s;
	x->m->weight_bytes += t->nbytes;
	return 0;
}

/* MXFP4 read in place through the fp4 weight row (ops/wf_fp4.h): the packed codes and the
 * e8m0 scale bytes as the checkpoint stores them */
static int load_fp4(struct ctx *x, const char *name, int rows, int cols, struct wmat *w, struct err *e)
{
	const struct st_tensor *t, *s;
	char sname[320];
	snprintf(sname, sizeof sname, "%.*sscale", (int)(strlen(name) - strlen("weight")), name);
	int ng = (cols + FP4_GROUP - 1) / FP4_GROUP;
	if (st_expect(x->m->st, name, ST_DT(DT_I8) | ST_DT(DT_U8), rows, cols / 2, &t, e) ||
	    st_expect(x->m->st, sname, ST_DT(DT_F8_E8M0), rows, ng, &s, e))
		return -1;
	const uint8_t *sc = s->data;
	for (size_t i = 0; i < (size_t)rows * (size_t)ng; i++)
		if (sc[i] == 0xff)
			return err_set(e, "%s: tensor %s: scale [%zu, %zu] is NaN (0xff)", s->file, sname,
				       i / (size_t)ng, i % (size_t)ng);
	*w = wf_fp4_wmat(t->data, sc, rows, cols);
	x->m->weight_bytes += t->nbytes + s->nbytes;
	return 0;
}

static int load_mat(struct ctx *x, const char *name, int rows, int cols, struct wmat *w, struct err *e)
{
	const struct st_tensor *t;
	if (st_expect(x->m->st, name, ST_FLOATS, rows, cols, &t, e))
		return -1;
	const void *p = aligned(x, t, e);
	if (!p)
		return -1;
	*w = (struct wmat){.dtype = t->dtype, .data = p, .rows = rows, .cols = cols, .ld = cols};
	x->m->weight_bytes += t->nbytes;
	return 0;
}

static int load_i64(struct ctx *x, const char *name, int rows, int cols, int64_t **out, struct err *e)
{
	const struct st_tensor *t;
	if (st_expect(x->m->st, name, ST_DT(DT_I64), rows, cols, &t, e))
		return -1;
	int64_t *v = model_own(x->m, t->nbytes);
	if (!v)
		return err_set(e, "%s: tensor %s: out of memory", t->file, name);
	memcpy(v, t->data, t->nbytes);
	x->m->weight_bytes += t->nbytes;
	*out = v;
	return 0;
}

/* any float tensor [rows] or [rows, cols] as f32 */
static int load_f32(struct ctx *x, const char *name, int rows, int cols, float **out, struct err *e)
{
	const struct st_tensor *t;
	if (st_expect(x->m->st, name, ST_FLOATS, rows, cols, &t, e))
		return -1;
	size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
	float *v = model_own(x->m, sizeof(float) * n);
	if (!v)
		return err_set(e, "%s: tensor %s: out of memory", t->file, name);
	for (size_t i = 0; i < n; i++) {
		if (t->dtype == DT_F32) {
			memcpy(&v[i], (const char *)t->data + 4 * i, 4);
		} else {
			uint16_t h;
			memcpy(&h, (const char *)t->data + 2 * i, 2);
			v[i] = t->dtype == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
		}
	}
	x->m->weight_bytes += t->nbytes;
	*out = v;
	return 0;
}

/* ---- --load-format dummy: random weights in the formats a checkpoint of this config holds ---- */

/* what a matrix row becomes without a checkpoint: the published formats (fp8 e4m3 with
 * ue8m0 128x128 scales; MXFP4 routed experts, FP8 ones for expert_dtype fp8 as V4-Flash-Base),
 * or bf16 where the config has no quantization_config */
static enum dtype dummy_dtype(const struct v4_config *c, enum v4_kind k)
{
	if (k == VK_MAT)
		return DT_BF16;
	if (k == VK_FP4 && c->expert_dtype == V4_EXPERT_FP4)
		return DT_F4_E2M1;
	if (!c->fp8)
		return DT_BF16;
	return k == VK_FP4 && c->expert_dtype != V4_EXPERT_FP8 ? DT_F4_E2M1 : DT_F8_E4M3;
}

/* 2^floor(log2(v)): a ue8m0 scale */
static float pow2_floor(float v)
{
	int ex;
	frexpf(v, &ex);
	return ldexpf(1.0f, ex - 1);
}

/* A [rows, cols] matrix of random values whose RMS is ~0.8 / sqrt(cols) in every format (the
 * bf16 dummies' |w| in [a/16, a), a = 1.7 / sqrt(cols)). */
static int dummy_mat(struct ctx *x, const char *name, enum dtype dt, int rows, int cols, struct wmat *w, struct err *e)
{
	struct model *m = x->m;
	size_t n = (size_t)rows * (size_t)cols, bytes = dt == DT_F4_E2M1 ? n / 2 : n * dtype_size(dt);
	void *d = model_own(m, bytes);
	if (!d)
		return err_set(e, "dummy: tensor %s: out of memory (%zu bytes)", name, bytes);
	float amp = 1.7f / sqrtf((float)cols);
	if (dt == DT_BF16) {
		model_dummy_fill(m, name, DT_BF16, d, n, amp);
		*w = (struct wmat){.dtype = DT_BF16, .data = d, .rows = rows, .cols = cols, .ld = cols};
		m->weight_bytes += bytes;
		return 0;
	}
	if (dt == DT_F4_E2M1) { /* e2m1 codes: RMS ~2.9, scaled down by one power of two per 32 */
		int ng = (cols + FP4_GROUP - 1) / FP4_GROUP;
		uint8_t *sc = model_own(m, (size_t)rows * (size_t)ng);
		if (!sc)
			return err_set(e, "dummy: tensor %s: out of memory", name);
		model_dummy_fill(m, name, DT_U8, d, bytes, 0);
		int ex;
		frexpf(pow2_floor(0.8f / sqrtf((float)cols) / 2.9f), &ex);
		memset(sc, 127 + ex - 1, (size_t)rows * (size_t)ng);
		*w = wf_fp4_wmat(d, sc, rows, cols);
		m->weight_bytes += bytes + (size_t)rows * (size_t)ng;
		return 0;
	}
	/* fp8: e4m3 |v| in [1/8, 2) times a ue8m0 block scale of ~amp / 2 */
	int br = x->c->fp8_block_rows > 0 ? x->c->fp8_block_rows : 128;
	int bc = x->c->fp8_block_cols > 0 ? x->c->fp8_block_cols : 128;
	int sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
	float *scale = model_own(m, sizeof(float) * (size_t)sr * (size_t)sc);
	if (!scale)
		return err_set(e, "dummy: tensor %s: out of memory", name);
	model_dummy_fill(m, name, DT_F8_E4M3, d, n, 0);
	float s = pow2_floor(amp / 2);
	for (size_t i = 0; i < (size_t)sr * (size_t)sc; i++)
		scale[i] = s;
	*w = (struct wmat){.dtype = DT_F8_E4M3,
			   .data = d,
			   .rows = rows,
			   .cols = cols,
			   .ld = cols,
			   .scale = scale,
			   .scale_ld = sc,
			   .blk_r = br,
			   .blk_c = bc};
	m->weight_bytes += n + (size_t)sr * (size_t)sc; /* the e8m0 bytes a checkpoint holds */
	return 0;
}

static bool ends_with(const char *s, const char *t)
{
	size_t a = strlen(s), b = strlen(t);
	return a >= b && !strcmp(s + a - b, t);
}

/* a float vector or small matrix: norms 1, the router's bias and the sinks 0, the rest
 * (hyper-connection mixes, the compressors' position biases) random, RMS ~0.8 / sqrt(cols) */
static int dummy_f32(struct ctx *x, const char *name, int rows, int cols, float **out, struct err *e)
{
	size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
	float *v = model_own(x->m, sizeof(float) * n);
	if (!v)
		return err_set(e, "dummy: tensor %s: out of memory", name);
	if (ends_with(name, "norm.weight") || ends_with(name, "gate.bias") || ends_with(name, "attn_sink")) {
		float f = ends_with(name, "norm.weight") ? 1.0f : 0.0f;
		for (size_t i = 0; i < n; i++)
			v[i] = f;
	} else { /* bf16 values widened */
		uint16_t *h = malloc(sizeof(uint16_t) * n);
		if (!h)
			return err_set(e, "dummy: tensor %s: out of memory", name);
		model_dummy_fill(x->m, name, DT_BF16, h, n, 1.7f / sqrtf((float)(cols ? cols : 64)));
		for (size_t i = 0; i < n; i++)
			v[i] = bf16_to_f32(h[i]);
		free(h);
	}
	x->m->weight_bytes += sizeof(float) * n;
	*out = v;
	return 0;
}

/* tid2eid [vocab, k]: k distinct experts per token */
static int dummy_tid2eid(struct ctx *x, const char *name, int rows, int cols, int64_t **out, struct err *e)
{
	int E = x->c->n_routed_experts;
	int64_t *v = model_own(x->m, sizeof(int64_t) * (size_t)rows * (size_t)cols);
	if (!v)
		return err_set(e, "dummy: tensor %s: out of memory", name);
	uint64_t r = 0x2545f4914f6cdd1dull ^ x->m->opt.dummy_seed;
	for (int t = 0; t < rows; t++)
		for (int j = 0; j < cols; j++) {
			bool dup;
			do {
				r ^= r << 13, r ^= r >> 7, r ^= r << 17;
				v[(size_t)t * cols + j] = (int64_t)(r % (uint64_t)E);
				dup = false;
				for (int i = 0; i < j; i++)
					dup |= v[(size_t)t * cols + i] == v[(size_t)t * cols + j];
			} while (dup);
		}
	x->m->weight_bytes += sizeof(int64_t) * (size_t)rows * (size_t)cols;
	*out = v;
	return 0;
}

/* the lm_head's format under --quantize-lm-head (NULL: bf16 as the checkpoint has it): fp8, or
 * --quantization-rest's / int8 under -q, as for V3 */
static const struct wformat *head_quant(const struct ctx *x, const struct v4_tensor_spec *s)
{
	bool head = s->off == offsetof(struct v4_weights, head) && s->base == VB_MODEL;
	return head && x->m->opt.quantize_lm_head ? model_quant_format(x->m, WQ_HEAD) : NULL;
}

/* dummy weights of a head made fp8 directly (no bf16 copy to quantize) */
static bool head_fp8(const struct ctx *x, const struct v4_tensor_spec *s)
{
	const struct wformat *f = head_quant(x, s);
	return f && f->dtype == DT_F8_E4M3;
}

static int dummy_row(struct ctx *x, const struct v4_tensor_spec *s, const char *name, int rows, int cols, void *p,
		     struct err *e)
{
	switch (s->kind) {
	case VK_F32: return dummy_f32(x, name, rows, cols, p, e);
	case VK_I64: return dummy_tid2eid(x, name, rows, cols, p, e);
	default: return dummy_mat(x, name, head_fp8(x, s) ? DT_F8_E4M3 : dummy_dtype(x->c, s->kind), rows, cols, p, e);
	}
}

/* --quantize-lm-head: this rank's rows [lo, lo + n) of the head (bf16: in the mapping, or
 * dummy) quantized to its format, the bf16 bytes no longer counted */
static int quantize_head(struct ctx *x, const char *name, struct wmat *w, int lo, int n, size_t before, struct err *e)
{
	struct wmat src = *w, full;
	x->m->weight_bytes = before;
	if (model_quantize_mat(x->m, model_quant_format(x->m, WQ_HEAD), x->m->opt.load_dummy ? "dummy" : "checkpoint",
			       name, &src, lo, n, 0, src.cols, "--quantize-lm-head", &full, e))
		return -1;
	full.fixed_order = src.fixed_order;
	*w = wmat_view(&full, lo - full.row0, n, 0, full.cols);
	if (x->m->tp_size > 1)
		x->m->weight_bytes = before + wmat_bytes(w);
	return 0;
}

/* this rank's [lo, lo + n) of a split row's rows or columns (configure checked that the
 * units divide, but for the vocabulary, cut as load.c's vocab_cols) */
static void tp_part(const struct ctx *x, const struct v4_tensor_spec *s, int *lo, int *n)
{
	int T = x->m->tp_size, r = x->m->tp_rank, over = dim(x->c, x->idx, s->tp_over);
	int per = s->tp_per ? dim(x->c, x->idx, s->tp_per) : 1;
	int u0 = (int)((int64_t)over * r / T), u1 = (int)((int64_t)over * (r + 1) / T);
	if (s->tp_over == OG && T > over) /* T / o_groups ranks share group r / (T / o_groups) */
		u0 = r / (T / over), u1 = u0 + 1;
	*lo = u0 * per;
	*n = (u1 - u0) * per;
}

/* the load report's bytes per format: what a row's matrix (or vector) is held as */
static void count_format(struct ctx *x, const struct v4_tensor_spec *s, const void *p, size_t bytes)
{
	enum dtype dt = s->kind == VK_F32 ? DT_F32 : s->kind == VK_I64 ? DT_I64 : ((const struct wmat *)p)->dtype;
	x->w->format_bytes[dt] += bytes;
}

/* -q: a row's format at load (NULL: as the checkpoint has it): the routed experts
 * --quantization's, the other fp8 linear rows --quantization-rest's (int8 under int4); the
 * bf16 rows (router, compressors, indexer weights) and the f32 ones stay */
static const struct wformat *row_quant(const struct ctx *x, const struct v4_tensor_spec *s)
{
	return s->kind == VK_FP4   ? model_quant_format(x->m, WQ_EXPERT)
	       : s->kind == VK_FP8 ? model_quant_format(x->m, WQ_LINEAR)
				   : NULL;
}

/* w (this rank's rows or columns [lo, lo + n) of it by s->split) quantized to f at load: the
 * region only, then this rank's view; the source bytes no longer counted */
static int quantize_row(struct ctx *x, const struct v4_tensor_spec *s, const struct wformat *f, const char *name,
			struct wmat *w, size_t before, struct err *e)
{
	int lo = 0, n = s->split == SPLIT_COLS ? w->cols : w->rows;
	bool cut = s->split != SPLIT_NONE && x->m->tp_size > 1;
	if (cut)
		tp_part(x, s, &lo, &n);
	bool rows = s->split != SPLIT_COLS;
	char flag[64];
	snprintf(flag, sizeof flag, "--quantization %s", x->m->opt.quant ? x->m->opt.quant->name : f->name);
	if (f->dtype == DT_I4 && !rows && lo % f->blk_k)
		return err_set(e, "%s: tensor parallelism cuts it at column %d, inside one of %s's groups of %d", name,
			       lo, f->name, f->blk_k);
	struct wmat src = *w, full;
	x->m->weight_bytes = before;
	if (model_quantize_mat(x->m, f, x->m->opt.load_dummy ? "dummy" : "checkpoint", name, &src, rows ? lo : 0,
			       rows ? n : src.rows, rows ? 0 : lo, rows ? src.cols : n, flag, &full, e))
		return -1;
	full.fixed_order = src.fixed_order;
	*w = rows ? wmat_view(&full, lo - full.row0, n, 0, full.cols)
		  : wmat_view(&full, 0, full.rows, lo - full.col0, n);
	if (cut)
		x->m->weight_bytes = before + wmat_bytes(w);
	return 0;
}

static bool expert_fp8(const struct ctx *x, const char *name)
{
	if (x->c->expert_dtype != V4_EXPERT_UNSPECIFIED)
		return x->c->expert_dtype == V4_EXPERT_FP8;
	const struct st_tensor *t = st_find(x->m->st, name);
	return t && t->dtype == DT_F8_E4M3;
}

static int load_row(struct ctx *x, const struct v4_tensor_spec *s, const char *name, void *p, struct err *e)
{
	const struct v4_config *c = x->c;
	int rows = dim(c, x->idx, s->rows), cols = s->cols ? dim(c, x->idx, s->cols) : 0, rc = 0;
	size_t before = x->m->weight_bytes;
	if (x->m->opt.load_dummy) {
		rc = dummy_row(x, s, name, rows, cols, p, e);
	} else {
		/* a config without quantization_config holds its fp8 / fp4 rows in bf16 (as the dummy
		 * weights of one do): e.g. bench/make_random_hf.py's checkpoints */
		bool plain = dummy_dtype(c, s->kind) == DT_BF16;
		switch (s->kind) {
		case VK_FP8:
			rc = plain ? load_mat(x, name, rows, cols, p, e) : load_fp8(x, name, rows, cols, p, e);
			break;
		case VK_MAT: rc = load_mat(x, name, rows, cols, p, e); break;
		case VK_FP4: /* V4-Flash-Base's routed experts are fp8 as the dense weights; without
			      * expert_dtype the tensor's dtype says which */
			rc = plain                 ? load_mat(x, name, rows, cols, p, e)
			     : expert_fp8(x, name) ? load_fp8(x, name, rows, cols, p, e)
						   : load_fp4(x, name, rows, cols, p, e);
			break;
		case VK_F32: rc = load_f32(x, name, rows, cols, p, e); break;
		case VK_I64: rc = load_i64(x, name, rows, cols, p, e); break;
		}
	}
	if (rc)
		goto done;
	/* every matrix sums in one order whatever the tokens of a GEMM call (ops/gemm.h), so
	 * that a prompt's values do not depend on its chunking: prefix caching's warm = cold,
	 * where a last-bit difference can flip an fp8 code of the kv cache */
	if (s->kind != VK_F32 && s->kind != VK_I64)
		((struct wmat *)p)->fixed_order = true;
	const struct wformat *qf = row_quant(x, s), *hq = head_quant(x, s);
	if (qf && qf->dtype != ((struct wmat *)p)->dtype) { /* -q: quantized, then cut */
		rc = quantize_row(x, s, qf, name, p, before, e);
		goto done;
	}
	if (hq && hq->dtype != ((struct wmat *)p)->dtype) {
		int lo = 0, n = rows;
		if (x->m->tp_size > 1)
			tp_part(x, s, &lo, &n);
		rc = quantize_head(x, name, p, lo, n, before, e);
		goto done;
	}
	if (s->split != SPLIT_NONE && x->m->tp_size > 1) {
		int lo, n;
		tp_part(x, s, &lo, &n);
		if (s->kind == VK_F32) { /* a vector's slice (the sinks of this rank's heads) */
			*(float **)p += lo;
		} else {
			struct wmat *w = p;
			*w = s->split == SPLIT_ROWS ? wmat_view(w, lo, n, 0, cols) : wmat_view(w, 0, rows, lo, n);
			int share = x->m->tp_size / x->c->o_groups; /* ranks a group is cut among */
			if (s->tp_sub && share > 1) {
				int sub = dim(x->c, x->idx, s->tp_sub) / share;
				*w = wmat_view(w, 0, n, x->m->tp_rank % share * sub, sub);
			}
			x->m->weight_bytes = before + wmat_bytes(w); /* this rank's part */
		}
	}
done:
	if (rc)
		return -1;
	count_format(x, s, p, x->m->weight_bytes - before);
	return 0;
}

/* the rows of one base: the model's (prefix ""), a block's or an MTP module's own */
static int load_base(struct ctx *x, enum v4_base base, char *obj, const char *prefix, struct err *e)
{
	char name[320];
	for (int k = 0; k < v4_tensor_n_rows; k++) {
		const struct v4_tensor_spec *s = &rows[k];
		if (s->base != base || (s->on && !s->on(x->c, x->idx)))
			continue;
		if (!s->count) {
			snprintf(name, sizeof name, s->name, prefix);
			if (load_row(x, s, name, obj + s->off, e))
				return -1;
			continue;
		}
		int n = x->c->n_routed_experts;
		struct wmat *arr = model_own(x->m, sizeof(struct wmat) * (size_t)n);
		if (!arr)
			return err_set(e, "%s: out of memory", prefix);
		*(struct wmat **)(void *)(obj + s->off) = arr;
		for (int i = 0; i < n; i++) {
			snprintf(name, sizeof name, s->name, prefix, i);
			if (load_row(x, s, name, &arr[i], e))
				return -1;
		}
	}
	return 0;
}

/* the bytes one row's dummy tensor(s) will hold, by format: whole matrices (a TP rank makes
 * them whole and keeps its view) */
static void row_bytes(const struct ctx *x, const struct v4_tensor_spec *s, size_t out[DT_COUNT])
{
	const struct v4_config *c = x->c;
	double rows = dim(c, x->idx, s->rows), cols = s->cols ? dim(c, x->idx, s->cols) : 1;
	double n = rows * cols * (s->count ? c->n_routed_experts : 1);
	enum dtype dt = s->kind == VK_F32   ? DT_F32
			: s->kind == VK_I64 ? DT_I64
			: head_fp8(x, s)    ? DT_F8_E4M3
					    : dummy_dtype(c, s->kind);
	double per = s->count ? c->n_routed_experts : 1; /* matrices */
	double b = dt == DT_F4_E2M1   ? n / 2 + per * rows * ceil(cols / FP4_GROUP)
		   : dt == DT_F8_E4M3 ? n + per * ceil(rows / 128) * ceil(cols / 128)
				      : n * (double)dtype_size(dt);
	out[dt] += (size_t)b;
	const struct wformat *qf = head_fp8(x, s) ? NULL : head_quant(x, s) ? head_quant(x, s) : row_quant(x, s);
	if (qf && qf->dtype != dt) /* the copy -q makes (the dummy bytes stay): its bits and a scale per group */
		out[qf->dtype] += (size_t)(n * qf->bits / 8 + n / (qf->blk_k > 0 ? qf->blk_k : 128) * 4);
}

size_t v4_tensors_dummy_bytes(struct model *m, const struct v4_config *c, int n_mtp, size_t out[DT_COUNT])
{
	struct ctx x = {m, c, NULL, -1};
	memset(out, 0, sizeof(size_t) * DT_COUNT);
	for (int idx = -1; idx < c->num_hidden_layers + n_mtp; idx++) {
		x.idx = idx;
		for (int k = 0; k < v4_tensor_n_rows; k++) {
			const struct v4_tensor_spec *s = &rows[k];
			bool want = idx < 0 ? s->base == VB_MODEL
					    : s->base == VB_LAYER ||
						      (s->base == VB_MTP && idx >= c->num_hidden_layers);
			if (want && (!s->on || s->on(c, idx)))
				row_bytes(&x, s, out);
		}
	}
	size_t total = 0;
	for (int d = 0; d < DT_COUNT; d++)
		total += out[d];
	return total;
}

int v4_tensors_load(struct model *m, const struct v4_config *c, struct v4_weights *w, int n_mtp, struct err *e)
{
	struct ctx x = {m, c, w, -1};
	char prefix[64];
	if (load_base(&x, VB_MODEL, (char *)w, "", e))
		return -1;
	for (int i = 0; i < c->num_hidden_layers; i++) {
		x.idx = w->layers[i].idx = i;
		snprintf(prefix, sizeof prefix, "layers.%d.", i);
		if (load_base(&x, VB_LAYER, (char *)&w->layers[i], prefix, e))
			return -1;
	}
	for (int k = 0; k < n_mtp; k++) {
		x.idx = w->mtp[k].blk.idx = c->num_hidden_layers + k;
		snprintf(prefix, sizeof prefix, "mtp.%d.", k);
		if (load_base(&x, VB_LAYER, (char *)&w->mtp[k].blk, prefix, e) ||
		    load_base(&x, VB_MTP, (char *)&w->mtp[k], prefix, e))
			return -1;
	}
	return 0;
}
