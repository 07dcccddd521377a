/* int4 at load (model/weights.c, tensors_deepseek.c's WQ_EXPERT rows): --quantization int4
 * puts the routed experts in int4 and the other linear layers in int8 (or --quantization-rest's
 * format, or as the checkpoint has them); a tensor-parallel cut inside a group of 32 is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwd_util.h"
#include "harness.h"
#include "model/model.h"
#include "model/tensors_deepseek.h"
#include "ops/pool.h"
#include "ops/quant_int4.h"
#include "ops/quant_int8.h"
#include "ops/wformat.h"

static struct pool *g_pool;

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* FIXTURE loaded with o (its pool and sizes filled in); NULL, failed */
static struct model *load_with(const char *fixture, struct model_options o)
{
	struct err e = {0};
	if (!g_pool && pool_new(2, &g_pool, &e))
		return NULL;
	o.pool = g_pool;
	o.max_batch_tokens = o.max_model_len = 64;
	o.max_seqs = 4;
	struct model *m = NULL;
	if (model_load(fixture_path(fixture), &o, &m, &e))
		harness_fail(__FILE__, __LINE__, "%s: %s", fixture, e.msg);
	return m;
}

/* FIXTURE under -q quant [--quantization-rest rest (rest_set)] [--quantize-lm-head] */
static struct model *load_q(const char *fixture, const char *quant, const char *rest, bool rest_set, bool head)
{
	return load_with(fixture, (struct model_options){.act_dtype = DT_F32,
							 .quant = quant ? wformat_by_name(quant) : NULL,
							 .quant_rest = rest ? wformat_by_name(rest) : NULL,
							 .quant_rest_set = rest_set,
							 .quantize_lm_head = head});
}

/* what each class of tiny-v3's layer 1 (MoE with a shared expert) and its head became */
static void expect_dtypes(const char *what, const struct model *m, enum dtype expert, enum dtype rest, enum dtype kv_b,
			  enum dtype head)
{
	const struct layer_weights *l = &m->layers[1];
	EXPECTF(l->e_gate[0].dtype == expert && l->e_up[7].dtype == expert && l->e_down[3].dtype == expert,
		"%s: routed experts %s, expected %s", what, dtype_name(l->e_gate[0].dtype), dtype_name(expert));
	EXPECTF(l->q_a.dtype == rest && l->o_proj.dtype == rest && l->gate.dtype == rest && l->down.dtype == rest &&
			m->layers[0].up.dtype == rest,
		"%s: attention / shared experts / dense MLP %s %s %s, expected %s", what, dtype_name(l->q_a.dtype),
		dtype_name(l->gate.dtype), dtype_name(m->layers[0].up.dtype), dtype_name(rest));
	EXPECTF(l->kv_b.dtype == kv_b, "%s: kv_b_proj %s, expected %s", what, dtype_name(l->kv_b.dtype),
		dtype_name(kv_b));
	EXPECTF(l->router.dtype == DT_BF16 && m->embed.dtype == DT_BF16, "%s: router %s, embedding %s", what,
		dtype_name(l->router.dtype), dtype_name(m->embed.dtype));
	EXPECTF(m->lm_head.dtype == head, "%s: lm_head %s, expected %s", what, dtype_name(m->lm_head.dtype),
		dtype_name(head));
}

static void test_policy(void)
{
	static const struct {
		const char *what, *quant, *rest;
		bool rest_set, head;
		enum dtype expert, others, kv_b, lm_head;
	} cases[] = {
		{"-q int4", "int4", NULL, false, false, DT_I4, DT_I8, DT_BF16, DT_BF16},
		{"-q int4 --quantize-lm-head", "int4", NULL, false, true, DT_I4, DT_I8, DT_BF16, DT_I8},
		{"-q int4 --quantization-rest fp8", "int4", "fp8", true, false, DT_I4, DT_F8_E4M3, DT_F8_E4M3,
		 DT_BF16},
		{"-q int4 --quantization-rest bf16", "int4", NULL, true, false, DT_I4, DT_BF16, DT_BF16, DT_BF16},
		{"-q int4 --quantization-rest int4", "int4", "int4", true, false, DT_I4, DT_I4, DT_BF16, DT_BF16},
		{"-q int8 (as before)", "int8", NULL, false, false, DT_I8, DT_I8, DT_BF16, DT_BF16},
		{"-q fp8 --quantization-rest int8", "fp8", "int8", true, false, DT_F8_E4M3, DT_I8, DT_BF16, DT_BF16},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct model *m = load_q("tiny-v3", cases[i].quant, cases[i].rest, cases[i].rest_set, cases[i].head);
		if (m)
			expect_dtypes(cases[i].what, m, cases[i].expert, cases[i].others, cases[i].kv_b,
				      cases[i].lm_head);
		model_free(m);
	}
}

/* Fewer bytes than -q int8: the experts at 4.5 bits a weight (4 + a bf16 scale per 32) */
static void test_bytes(void)
{
	EXPECT_EQ_INT((long long)int4_data_bytes(64, 256) * 8, 64 * 256 * 9 / 2);
	struct model *q8 = load_q("tiny-v3", "int8", NULL, false, false),
		     *q4 = load_q("tiny-v3", "int4", NULL, false, false);
	if (q8 && q4) {
		const struct model_config *c = model_config(q4);
		int moe_layers = 0;
		for (int i = 0; i < c->num_hidden_layers; i++)
			moe_layers += config_layer_is_moe(c, i);
		size_t D = (size_t)c->hidden_size, I = (size_t)c->moe_intermediate_size,
		       E = (size_t)c->n_routed_experts;
		size_t expert8 = 2 * int8_data_bytes((int)I, (int)D) + int8_data_bytes((int)D, (int)I);
		size_t expert4 = 2 * int4_data_bytes((int)I, (int)D) + int4_data_bytes((int)D, (int)I);
		EXPECTF(model_weight_bytes(q8) - model_weight_bytes(q4) == moe_layers * E * (expert8 - expert4),
			"%zu bytes under int8, %zu under int4", model_weight_bytes(q8), model_weight_bytes(q4));
	}
	model_free(q8), model_free(q4);
}

/* A rank's part of a routed expert's K dim (down_proj's columns) must start on a group of 32:
 * tiny-v3's 64 intermediate columns cut in 4 start rank 1 at 16, refused naming the tensor */
static void test_tp_cut(void)
{
	struct model *m = calloc(1, sizeof *m);
	struct err e = {0};
	if (!m || config_load(fixture_path("tiny-v3"), &m->cfg, &e))
		harness_fail(__FILE__, __LINE__, "tiny-v3: %s", e.msg);
	m->opt.load_dummy = true;
	m->opt.quant = wformat_by_name("int4");
	m->tp_size = 4;
	m->tp_rank = 1;
	struct wmat w;
	const char *name = "model.layers.1.mlp.experts.0.down_proj.weight";
	int D = m->cfg.hidden_size, I = m->cfg.moe_intermediate_size;
	EXPECT(model_mat_part(m, name, D, I, WQ_EXPERT, SPLIT_COLS, 16, 16, &w, &e) == -1);
	EXPECTF(strstr(e.msg, name) && strstr(e.msg, "at 16") && strstr(e.msg, "groups of 32"), "%s", e.msg);
	/* at 32 (two ranks): the rank's part is its own whole groups */
	m->tp_size = 2;
	EXPECTF(model_mat_part(m, name, D, I, WQ_EXPERT, SPLIT_COLS, 32, 32, &w, &e) == 0, "%s", e.msg);
	EXPECT(w.dtype == DT_I4 && w.rows == D && w.cols == 32 && w.col0 == 32);
	/* rows (gate_proj's output dim) may be cut anywhere */
	EXPECTF(model_mat_part(m, "model.layers.1.mlp.experts.0.gate_proj.weight", I, D, WQ_EXPERT, SPLIT_ROWS, 16, 16,
			       &w, &e) == 0,
		"%s", e.msg);
	model_free(m);
}

/* m's logits of prompt `name` on every backend and chunking within 1e-3 of the golden
 * fixture/golden/NAME.SUFFIX.f32, but one position in 16 that may part at an activation's half
 * step (the W4A8 kernels quantize x per 128 columns, as test_int8's goldens) */
static void check_golden(struct model *m, const char *fixture, const char *name, const char *suffix)
{
	int n, V = model_config(m)->vocab_size;
	int32_t *tok;
	float *gold = fwd_golden(fixture, name, suffix, V, &tok, &n);
	char what[128];
	snprintf(what, sizeof what, "%s %s.%s", fixture, name, suffix);
	if (tok && gold)
		fwd_check_golden_runs(m, what, tok, n, gold, V, n / 16 > 1 ? n / 16 : 1);
	free(gold);
	free(tok);
}

/* -q int4 on tiny-v3 (bf16) against scripts/mtp_reference.py --quantize-int4: the routed experts
 * quantized as quant_int4.h says, the other linear layers as -q int8's (or int4), both multiplied
 * as the kernels do with float32 activations */
static void test_golden_quantized(void)
{
	struct model *m = load_q("tiny-v3", "int4", NULL, false, false);
	if (m)
		check_golden(m, "tiny-v3", "len17", "int4q");
	model_free(m);
	/* everything in int4 (--quantization-rest int4 --quantize-lm-head; kv_b_proj as it is): against
	 * mtp_reference.py --quantize-int4-rest --quantize-lm-head */
	m = load_q("tiny-v3", "int4", "int4", true, true);
	if (m) {
		expect_dtypes("-q int4 --quantization-rest int4 --quantize-lm-head", m, DT_I4, DT_I4, DT_BF16, DT_I4);
		check_golden(m, "tiny-v3", "len17", "int4rqh");
	}
	size_t all4 = m ? model_weight_bytes(m) : 0;
	model_free(m);
	/* and the embedding (--quantize-embedding: the lm_head's format): its rows looked up through
	 * the format, 4.5 bits a value instead of bf16's 16; against --quantize-embedding's reference */
	m = load_with("tiny-v3", (struct model_options){.act_dtype = DT_F32,
							.quant = wformat_by_name("int4"),
							.quant_rest = wformat_by_name("int4"),
							.quant_rest_set = true,
							.quantize_lm_head = true,
							.quantize_embedding = true});
	if (m) {
		const struct model_config *c = model_config(m);
		EXPECT(m->embed.dtype == DT_I4 && m->lm_head.dtype == DT_I4);
		EXPECT_EQ_INT((long long)(all4 - model_weight_bytes(m)),
			      (long long)((size_t)c->vocab_size * (size_t)c->hidden_size * 2 -
					  int4_data_bytes(c->vocab_size, c->hidden_size)));
		check_golden(m, "tiny-v3", "len17", "int4rqhe");
	}
	model_free(m);
}

/* A compressed-tensors pack-quantized checkpoint (tests/fixtures/tiny-v3-int4, made by
 * scripts/make_int4_fixture.py): the routed experts repacked into the int4 row exactly (bf16
 * scales on layer 1, f32 on layer 2), the modules its ignore list names as they are; against
 * the float64 reference that reads the same int4 values */
static void test_ct_golden(void)
{
	struct model *m = load_q("tiny-v3-int4", NULL, NULL, false, false);
	if (m) {
		expect_dtypes("tiny-v3-int4", m, DT_I4, DT_BF16, DT_BF16, DT_BF16);
		EXPECT(m->layers[2].e_down[5].dtype == DT_I4 && m->layers[0].gate.dtype == DT_BF16);
		check_golden(m, "tiny-v3-int4", "len17", "logits");
	}
	model_free(m);
	/* bf16 activations (W4A16 from the AVX512_BF16 level on): within bf16's tolerance of the
	 * float32 golden on the median position (a routing choice near a tie may move one), finite */
	m = load_with("tiny-v3-int4", (struct model_options){.act_dtype = DT_BF16});
	int n, V = 1024;
	int32_t *tok;
	float *gold = fwd_golden("tiny-v3-int4", "len17", "logits", V, &tok, &n),
	      *out = malloc(sizeof(float) * (size_t)V * 17);
	struct fwd_seq sq;
	struct err e;
	if (m && tok && gold && out && n == 17 && !fwd_seq_init(&sq, model_config(m), n, DT_BF16, &e)) {
		EXPECT_EQ_INT(fwd_step(m, &sq, attn_backend_by_name("FLASHMLA"), tok, 0, n, 0, out, &e), 0);
		float pos[17];
		for (int t = 0; t < n; t++)
			pos[t] = fwd_max_abs_diff(out + (size_t)t * V, gold + (size_t)t * V, (size_t)V);
		qsort(pos, (size_t)n, sizeof(float), cmp_float);
		EXPECTF(pos[n / 2] < 0.5f && pos[n - 1] == pos[n - 1], "bf16 activations: median position %g, max %g",
			pos[n / 2], pos[n - 1]);
		fwd_seq_fini(&sq);
	}
	free(gold), free(tok), free(out);
	model_free(m);
	/* -q int4 leaves the checkpoint's int4 as it is and puts the rest in int8 */
	m = load_q("tiny-v3-int4", "int4", NULL, false, false);
	if (m)
		expect_dtypes("tiny-v3-int4 -q int4", m, DT_I4, DT_I8, DT_BF16, DT_BF16);
	model_free(m);
}

/* tiny-v3-int4's routed experts under tensor parallelism: a rank's part of down_proj's K dim
 * repacked from the checkpoint holds the whole matrix's values there (whole groups: at 32);
 * a cut inside a group (at 16) is refused naming the module. Dummy weights of such a config
 * make the same modules int4. */
static void test_ct_parts(void)
{
	struct model *m = calloc(1, sizeof *m);
	struct err e = {0};
	const char *dir = fixture_path("tiny-v3-int4");
	if (!m || config_load(dir, &m->cfg, &e) || st_open(dir, -1, &m->st, &e))
		harness_fail(__FILE__, __LINE__, "tiny-v3-int4: %s", e.msg);
	m->tp_size = 2;
	const char *name = "model.layers.2.mlp.experts.3.down_proj.weight"; /* f32 scales */
	int D = m->cfg.hidden_size, I = m->cfg.moe_intermediate_size;
	struct wmat whole, part;
	EXPECTF(model_mat(m, name, D, I, WQ_EXPERT, &whole, &e) == 0, "%s", e.msg);
	EXPECTF(model_mat_part(m, name, D, I, WQ_EXPERT, SPLIT_COLS, 32, 32, &part, &e) == 0, "%s", e.msg);
	int same = whole.dtype == DT_I4 && part.dtype == DT_I4 && part.cols == 32;
	for (int r = 0; same && r < D; r++)
		for (int c = 0; c < 32; c++)
			same &= quant_int4_get(&part, r, c) == quant_int4_get(&whole, r, 32 + c);
	EXPECT(same);
	m->tp_size = 4;
	EXPECT(model_mat_part(m, name, D, I, WQ_EXPERT, SPLIT_COLS, 16, 16, &part, &e) == -1);
	EXPECTF(strstr(e.msg, "model.layers.2.mlp.experts.3.down_proj: tensor parallelism cuts its 64 columns at 16"),
		"%s", e.msg);
	model_free(m);
}

/* --load-format dummy on a compressed-tensors config: the int4 modules are the checkpoint's
 * layout (random nibbles q+8 and bf16 scales) repacked, not bf16 dummies quantized at load
 * (whose fp32 scales amax / 7.5 are seldom bf16 values, and whose q crowd near 0): every value
 * is q x its group's scale, the scale a bf16 value > 0, each q of [-8, 7] ~1/16 of them */
static void test_ct_dummy(void)
{
	struct model *m = load_with("tiny-v3-int4", (struct model_options){.act_dtype = DT_F32, .load_dummy = true});
	if (!m)
		return;
	expect_dtypes("tiny-v3-int4, dummy weights", m, DT_I4, DT_BF16, DT_BF16, DT_BF16);
	const struct wmat *w = &m->layers[1].e_down[2];
	int seen[16] = {0}, bad = 0;
	for (int r = 0; r < w->rows; r++)
		for (int c = 0; c < w->cols; c++) {
			float s = int4_scale(int4_group(w, r / INT4_ROWS, c / INT4_GROUP), r % INT4_ROWS);
			float q = quant_int4_get(w, r, c) / s;
			bool ok = s > 0 && bf16_to_f32(f32_to_bf16(s)) == s && q == rintf(q) && q >= -8 && q <= 7;
			bad += !ok;
			if (ok)
				seen[(int)q + 8]++;
		}
	int rarest = w->rows * w->cols;
	for (int k = 0; k < 16; k++)
		rarest = seen[k] < rarest ? seen[k] : rarest;
	EXPECTF(!bad && rarest * 32 >= w->rows * w->cols, "%d values off the int4 grid; the rarest q %d of %d", bad,
		rarest, w->rows * w->cols);
	model_free(m);
}

int main(int argc, char **argv)
{
	static const struct test_case cases[] = {T(test_policy),           T(test_bytes),     T(test_tp_cut),
						 T(test_golden_quantized), T(test_ct_golden), T(test_ct_parts),
						 T(test_ct_dummy)};
	int rc = harness_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
	pool_free(g_pool);
	return rc;
}
