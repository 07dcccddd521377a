/* DeepSeek-V4 --load-format dummy (tensors_v4.c): random weights from config.json alone, in
 * the formats the config's checkpoint holds (fp8 e4m3 + ue8m0 blocks, MXFP4 routed experts;
 * FP8 experts for expert_dtype fp8; bf16 without quantization_config), counted per format as
 * the precheck predicted; the same seed gives the same logits, another seed others; every
 * logit finite through prefill and decode; a config too large for the memory available is
 * refused in one line before anything is allocated (the published V4-Flash and V4-Pro). */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/kv_cache.h"
#include "model/forward_v4.h"
#include "ops/pool.h"
#include "unit/fwd_util.h"
#include "unit/v4_configs.h"

static struct pool *the_pool;
static struct pool *pool(void)
{
	if (!the_pool) {
		struct err e = {{0}};
		CHECK(pool_new(2, &the_pool, &e) == 0);
	}
	return the_pool;
}

static char tmp_root[64];

/* tiny-v4's config.json with edits (a key set to JSON text, or removed with NULL value),
 * written to a fresh directory under tmp_root */
static const char *config_dir(const char *name, const char *const *kv, int n)
{
	static char dirs[8][128];
	static int nd;
	CHECK(nd < 8);
	char *dir = dirs[nd++];
	if (!tmp_root[0]) {
		snprintf(tmp_root, sizeof tmp_root, "/tmp/test_v4_dummy.XXXXXX");
		CHECK(mkdtemp(tmp_root));
	}
	snprintf(dir, 128, "%s/%s", tmp_root, name);
	CHECK(mkdir(dir, 0755) == 0);
	json_t *j = json_load_file(fixture_path("tiny-v4/config.json"), 0, NULL);
	CHECK(j);
	for (int i = 0; i < n; i++) {
		if (!kv[2 * i + 1]) {
			json_object_del(j, kv[2 * i]);
			continue;
		}
		json_t *v = json_loads(kv[2 * i + 1], JSON_DECODE_ANY, NULL);
		CHECK(v);
		json_object_set_new(j, kv[2 * i], v);
	}
	char path[160];
	snprintf(path, sizeof path, "%s/config.json", dir);
	CHECK(json_dump_file(j, path, JSON_INDENT(2)) == 0);
	json_decref(j);
	return dir;
}

static const char *text_dir(const char *name, const char *json)
{
	const char *dir = config_dir(name, NULL, 0);
	char path[160];
	snprintf(path, sizeof path, "%s/config.json", dir);
	FILE *f = fopen(path, "w");
	CHECK(f && fputs(json, f) >= 0 && fclose(f) == 0);
	return dir;
}

static struct model *load(const char *dir, uint64_t seed, struct err *e)
{
	struct model_options o = {.act_dtype = DT_F32,
				  .load_dummy = true,
				  .dummy_seed = seed,
				  .max_batch_tokens = 64,
				  .max_seqs = 2,
				  .max_model_len = 64,
				  .pool = pool()};
	struct model *m = NULL;
	return model_load(dir, &o, &m, e) ? NULL : m;
}

static const struct v4_model *v4(const struct model *m) { return m->fam_state; }

/* a prefill of 40 tokens, then 3 decodes: every logit finite; the last row's logits out */
static void run_seq(struct model *m, float *last)
{
	struct err e = {{0}};
	int V = model_config(m)->vocab_size, n = 43;
	int32_t tok[43];
	for (int i = 0; i < n; i++)
		tok[i] = (int32_t)((i * 131 + 7) % V);
	struct fwd_seq s;
	CHECK(fwd_seq_init(&s, model_config(m), 64, DT_F32, &e) == 0);
	kv_cache_fini(&s.kv); /* V4's own pool layout */
	CHECK(model_kv_cache_init(m, &s.kv, s.max_blocks + 1, FWD_BS, DT_F32, &e) == 0);
	float *out = malloc(sizeof(float) * 40 * (size_t)V);
	const struct attn_backend *be = model_default_backend(m);
	EXPECTF(fwd_step(m, &s, be, tok, 0, 40, 0, out, &e) == 0, "%s", e.msg);
	for (int k = 40; k < n; k++)
		EXPECTF(fwd_step(m, &s, be, tok, k, 1, 1, out, &e) == 0, "%s", e.msg);
	int bad = 0;
	for (int i = 0; i < V; i++)
		bad += !isfinite(out[i]);
	EXPECTF(bad == 0, "%d non-finite logits", bad);
	memcpy(last, out, sizeof(float) * (size_t)V);
	free(out);
	fwd_seq_fini(&s);
}

/* the formats tiny-v4's checkpoint has, the precheck's count equal to what the load holds */
static void test_formats(void)
{
	struct err e = {{0}};
	struct model *m = load(fixture_path("tiny-v4"), 1, &e);
	EXPECTF(m, "%s", e.msg);
	if (!m)
		return;
	const struct v4_model *v = v4(m);
	const struct v4_layer *L = &v->w.layers[1];
	EXPECT(L->wq_a.dtype == DT_F8_E4M3 && L->wq_b.dtype == DT_F8_E4M3 && L->s1.dtype == DT_F8_E4M3);
	EXPECT(L->w1[0].dtype == DT_F4_E2M1 && L->w2[3].dtype == DT_F4_E2M1);
	EXPECT(L->wo_a.dtype == DT_F8_E4M3 && L->gate.dtype == DT_BF16 && L->c_wkv.dtype == DT_BF16);
	/* every matrix sums alike for any chunking of a prompt (ops/gemm.h) */
	EXPECT(L->wo_a.fixed_order && L->wq_a.fixed_order && L->gate.fixed_order && L->w1[0].fixed_order);
	/* ue8m0: every block scale a power of two */
	int ex;
	EXPECT(frexpf(L->wq_b.scale[0], &ex) == 0.5f);
	/* tid2eid: k distinct experts per token in [0, E) */
	int k = v->c.num_experts_per_tok, E = v->c.n_routed_experts, bad = 0;
	for (int t = 0; t < v->c.vocab_size; t++)
		for (int i = 0; i < k; i++) {
			int64_t a = v->w.layers[0].tid2eid[t * k + i];
			bad += a < 0 || a >= E;
			for (int j = 0; j < i; j++)
				bad += a == v->w.layers[0].tid2eid[t * k + j];
		}
	EXPECT(bad == 0);
	size_t by[DT_COUNT], total = 0;
	size_t want = v4_tensors_dummy_bytes(m, &v->c, v->w.n_mtp, by);
	for (int d = 0; d < DT_COUNT; d++) {
		EXPECTF(by[d] == v->w.format_bytes[d], "%s: predicted %zu, held %zu", dtype_name((enum dtype)d), by[d],
			v->w.format_bytes[d]);
		total += v->w.format_bytes[d];
	}
	EXPECT(by[DT_F8_E4M3] > 0 && by[DT_F4_E2M1] > 0 && by[DT_BF16] > 0 && by[DT_F32] > 0);
	EXPECTF(want == total && total == model_weight_bytes(m), "predicted %zu, held %zu, weight bytes %zu", want,
		total, model_weight_bytes(m));
	model_free(m);
}

/* the same seed the same logits, another seed others; all finite */
static void test_seeds(void)
{
	struct err e = {{0}};
	int V = 1024;
	float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V), *c = malloc(sizeof(float) * V);
	struct model *m = load(fixture_path("tiny-v4"), 1, &e);
	EXPECTF(m, "%s", e.msg);
	if (!m)
		return;
	CHECK(model_config(m)->vocab_size == V);
	run_seq(m, a);
	model_free(m);
	m = load(fixture_path("tiny-v4"), 1, &e);
	run_seq(m, b);
	model_free(m);
	m = load(fixture_path("tiny-v4"), 2, &e);
	run_seq(m, c);
	model_free(m);
	EXPECT(!memcmp(a, b, sizeof(float) * V));
	EXPECT(memcmp(a, c, sizeof(float) * V));
	free(a), free(b), free(c);
}

/* V4-Flash-Base's FP8 experts; bf16 everywhere without quantization_config */
static void test_other_formats(void)
{
	struct err e = {{0}};
	const char *fp8e[] = {"expert_dtype", "\"fp8\""};
	struct model *m = load(config_dir("fp8-experts", fp8e, 1), 1, &e);
	EXPECTF(m, "%s", e.msg);
	float *out = malloc(sizeof(float) * 1024);
	if (m) {
		const struct v4_layer *L = &v4(m)->w.layers[2];
		EXPECT(L->w1[0].dtype == DT_F8_E4M3 && L->w2[0].dtype == DT_F8_E4M3);
		EXPECT(v4(m)->w.format_bytes[DT_F4_E2M1] == 0);
		run_seq(m, out);
		model_free(m);
	}
	const char *bf16[] = {"quantization_config", NULL, "expert_dtype", NULL};
	m = load(config_dir("bf16", bf16, 2), 1, &e);
	EXPECTF(m, "%s", e.msg);
	if (m) {
		const struct v4_layer *L = &v4(m)->w.layers[2];
		EXPECT(L->w1[0].dtype == DT_BF16 && L->wq_b.dtype == DT_BF16 && L->wo_a.dtype == DT_BF16);
		EXPECT(v4(m)->w.format_bytes[DT_F4_E2M1] == 0 && v4(m)->w.format_bytes[DT_F8_E4M3] == 0);
		run_seq(m, out);
		model_free(m);
	}
	free(out); /* a real checkpoint of fp8 experts: test_model_v4_base.c */
}

/* --quantize-lm-head: the head in fp8 (checkpoint or dummy), logits near the bf16 head's
 * (the same hidden states; each weight within 2^-4 of its value: e4m3 keeps 3 mantissa bits);
 * --quantization refused in one line */
static void test_quantize_lm_head(void)
{
	struct err e = {{0}};
	struct model_options o = {
		.act_dtype = DT_F32, .max_batch_tokens = 64, .max_seqs = 2, .max_model_len = 64, .pool = pool()};
	struct model *a = NULL, *b = NULL;
	EXPECTF(model_load(fixture_path("tiny-v4"), &o, &a, &e) == 0, "%s", e.msg);
	o.quantize_lm_head = true;
	EXPECTF(model_load(fixture_path("tiny-v4"), &o, &b, &e) == 0, "%s", e.msg);
	if (!a || !b)
		return;
	const struct wmat *ha = &v4(a)->w.head, *hb = &v4(b)->w.head;
	EXPECT(ha->dtype == DT_BF16 && hb->dtype == DT_F8_E4M3);
	EXPECT(v4(b)->w.format_bytes[DT_F8_E4M3] > v4(a)->w.format_bytes[DT_F8_E4M3]);
	/* e4m3 under a block scale amax / 448: normals within 2^-4 relative, subnormals within half
	 * their step, 2^-10 of the scale (every block's amax <= the matrix's) */
	float amax_w = 0;
	for (int r = 0; r < ha->rows; r++)
		for (int c = 0; c < ha->cols; c++)
			amax_w = fmaxf(amax_w, fabsf(wmat_get(ha, r, c)));
	int bad = 0;
	for (int r = 0; r < ha->rows; r += 7)
		for (int c = 0; c < ha->cols; c++) {
			float x = wmat_get(ha, r, c), y = wmat_get(hb, r, c);
			bad += fabsf(x - y) > fabsf(x) * 0x1p-4f + amax_w / 448 * 0x1p-10f;
		}
	EXPECTF(bad == 0, "%d head weights off by more than e4m3's rounding", bad);
	int V = 1024;
	float *la = malloc(sizeof(float) * V), *lb = malloc(sizeof(float) * V);
	run_seq(a, la);
	run_seq(b, lb);
	double d = 0, amax = 0;
	for (int i = 0; i < V; i++)
		d = fmax(d, fabs((double)la[i] - lb[i])), amax = fmax(amax, fabs((double)la[i]));
	printf("# quantize-lm-head: last row's logits within %.3g (largest %.3g)\n", d, amax);
	EXPECTF(d < 0.1 * amax, "%g of %g", d, amax);
	free(la), free(lb);
	model_free(a), model_free(b);
	/* dummy weights: the head made fp8, the precheck counting it so */
	o.load_dummy = true;
	o.dummy_seed = 1;
	EXPECTF(model_load(fixture_path("tiny-v4"), &o, &b, &e) == 0, "%s", e.msg);
	if (b) {
		size_t by[DT_COUNT];
		EXPECT(v4(b)->w.head.dtype == DT_F8_E4M3);
		EXPECT(v4_tensors_dummy_bytes(b, &v4(b)->c, v4(b)->w.n_mtp, by) == model_weight_bytes(b));
		model_free(b);
	}
}

/* the largest |value| of row r's columns [c0, c0 + n) of w */
static float group_amax(const struct wmat *w, int r, int c0, int n)
{
	float a = 0;
	for (int c = c0; c < c0 + n && c < w->cols; c++)
		a = fmaxf(a, fabsf(wmat_get(w, r, c)));
	return a;
}

/* q within its format's rounding of src: groups of g columns of a row, levels amax / qmax */
static int off_rounding(const struct wmat *src, const struct wmat *q, int g, float qmax)
{
	int bad = 0;
	for (int r = 0; r < src->rows; r += 5)
		for (int c0 = 0; c0 < src->cols; c0 += g) {
			float step = group_amax(src, r, c0, g) / qmax;
			for (int c = c0; c < c0 + g && c < src->cols; c++)
				bad += fabsf(wmat_get(src, r, c) - wmat_get(q, r, c)) > step * 0.5001f + 1e-30f;
		}
	return bad;
}

/* -q int8 / int4: the fp8 linear layers int8 (a scale per row and 128 columns), the MXFP4
 * experts int4 under int4 (a scale per row and 32), each weight within its rounding of the
 * checkpoint's; the bf16 rows kept; finite logits; -q fp8 refused in one line */
static void test_quantization(void)
{
	struct err e = {{0}};
	struct model_options o = {
		.act_dtype = DT_F32, .max_batch_tokens = 64, .max_seqs = 2, .max_model_len = 64, .pool = pool()};
	struct model *a = NULL, *b = NULL;
	EXPECTF(model_load(fixture_path("tiny-v4"), &o, &a, &e) == 0, "%s", e.msg);
	float *out = malloc(sizeof(float) * 1024);
	const char *fmts[2] = {"int8", "int4"};
	for (int k = 0; k < 2 && a; k++) {
		o.quant = wformat_by_name(fmts[k]);
		EXPECTF(model_load(fixture_path("tiny-v4"), &o, &b, &e) == 0, "%s", e.msg);
		if (!b)
			continue;
		const struct v4_layer *La = &v4(a)->w.layers[1], *Lb = &v4(b)->w.layers[1];
		EXPECT(Lb->wq_b.dtype == DT_I8 && Lb->wo_a.dtype == DT_I8 && Lb->s2.dtype == DT_I8);
		EXPECT(Lb->w1[0].dtype == (k ? DT_I4 : DT_I8) && Lb->w2[5].dtype == (k ? DT_I4 : DT_I8));
		EXPECT(Lb->gate.dtype == DT_BF16 && Lb->c_wkv.dtype == DT_BF16);
		int bad = off_rounding(&La->wq_b, &Lb->wq_b, 128, 127) + off_rounding(&La->wo_b, &Lb->wo_b, 128, 127);
		bad += k ? off_rounding(&La->w1[0], &Lb->w1[0], 32, 7) + off_rounding(&La->w2[5], &Lb->w2[5], 32, 7)
			 : off_rounding(&La->w1[0], &Lb->w1[0], 128, 127);
		EXPECTF(bad == 0, "-q %s: %d weights off their rounding", fmts[k], bad);
		run_seq(b, out);
		model_free(b);
	}
	model_free(a);
	free(out);
	o.quant = wformat_by_name("fp8");
	EXPECT(model_load(fixture_path("tiny-v4"), &o, &b, &e) != 0);
	EXPECTF(strstr(e.msg, "--quantization fp8 is not supported") && !strchr(e.msg, '\n'), "%s", e.msg);
	/* dummy weights: the precheck covers the dummy bytes and the quantized copies */
	o.quant = wformat_by_name("int4");
	o.load_dummy = true;
	EXPECTF(model_load(fixture_path("tiny-v4"), &o, &b, &e) == 0, "%s", e.msg);
	if (b) {
		size_t by[DT_COUNT];
		EXPECT(v4_tensors_dummy_bytes(b, &v4(b)->c, v4(b)->w.n_mtp, by) >= model_weight_bytes(b));
		EXPECT(by[DT_I4] > 0 && by[DT_I8] > 0);
		model_free(b);
	}
}

/* too large for the memory available: one line with the bytes per format, before any
 * allocation (MLASERVE_MEM_AVAILABLE fixes the memory whatever the machine has) */
static void test_too_large(void)
{
	struct err e = {{0}};
	setenv("MLASERVE_MEM_AVAILABLE", "16G", 1);
	const char *dirs[2] = {text_dir("v4-flash", v4_flash_config_json), text_dir("v4-pro", v4_pro_config_json)};
	/* the published sizes (~160 GB, ~865 GB) */
	const double lo[2] = {150, 800}, hi[2] = {180, 950};
	for (int i = 0; i < 2; i++) {
		EXPECT(load(dirs[i], 1, &e) == NULL);
		EXPECTF(strstr(e.msg, "dummy weights need") && strstr(e.msg, "MXFP4") &&
				strstr(e.msg, "17.2 GB available") && !strchr(e.msg, '\n'),
			"%s", e.msg);
		const char *p = strstr(e.msg, "need ");
		double gb = p ? atof(p + 5) : 0;
		EXPECTF(gb > lo[i] && gb < hi[i], "%s", e.msg);
	}
	setenv("MLASERVE_MEM_AVAILABLE", "1M", 1);
	EXPECT(load(fixture_path("tiny-v4"), 1, &e) == NULL);
	EXPECTF(strstr(e.msg, "tiny-v4: DeepSeek-V4 dummy weights need"), "%s", e.msg);
	unsetenv("MLASERVE_MEM_AVAILABLE");
}

static void cleanup(void)
{
	if (tmp_root[0]) {
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
		EXPECT(system(cmd) == 0);
	}
	pool_free(the_pool);
}

TESTS(T(test_formats), T(test_seeds), T(test_other_formats), T(test_quantize_lm_head), T(test_quantization),
      T(test_too_large), T(cleanup))
