/* safetensors: the fixtures, a hand-built sharded checkpoint, dropped tensors, and one clear
 * error per kind of corrupted file (files written into a mkdtemp() directory). */
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "io/safetensors.h"

/* ---- temp files ---- */

static char tmp[64];

static const char *tmp_new(void)
{
	snprintf(tmp, sizeof tmp, "/tmp/mlaserve-st-XXXXXX");
	return mkdtemp(tmp) ? tmp : NULL;
}

static void tmp_remove(void)
{
	DIR *d = opendir(tmp);
	struct dirent *de;
	char p[512];
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof p, "%s/%s", tmp, de->d_name);
		if (unlink(p))
			rmdir(p);
	}
	if (d)
		closedir(d);
	rmdir(tmp);
}

static const char *tmp_path(const char *name)
{
	static char p[256];
	snprintf(p, sizeof p, "%s/%s", tmp, name);
	return p;
}

static void write_bytes(const char *name, const void *a, size_t na, const void *b, size_t nb)
{
	FILE *f = fopen(tmp_path(name), "wb");
	if (!f)
		return;
	fwrite(a, 1, na, f);
	fwrite(b, 1, nb, f);
	fclose(f);
}

static unsigned char *read_all(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc(*n);
	if (b && fread(b, 1, *n, f) != *n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

/* Writes NAME as: 8-byte length (hlen, or strlen(header) when hlen is 0), header, data. */
static void write_st(const char *name, const char *header, uint64_t hlen, const void *data, size_t n)
{
	size_t hl = strlen(header);
	unsigned char *buf = malloc(8 + hl);
	if (!hlen)
		hlen = hl;
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)(hlen >> (8 * i));
	memcpy(buf + 8, header, hl);
	write_bytes(name, buf, 8 + hl, data, n);
	free(buf);
}

/* The tiny-v3 fixture as parsed header + data section. */
struct fixture {
	unsigned char *bytes;
	size_t size;
	json_t *header;
	const unsigned char *data;
	size_t data_len;
};

static int fixture_read(struct fixture *f)
{
	f->bytes = read_all(fixture_path("tiny-v3/model.safetensors"), &f->size);
	if (!f->bytes || f->size < 8)
		return -1;
	uint64_t hl = 0;
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | f->bytes[i];
	f->header = json_loadb((const char *)f->bytes + 8, hl, 0, NULL);
	f->data = f->bytes + 8 + hl;
	f->data_len = f->size - 8 - hl;
	return f->header ? 0 : -1;
}

static void fixture_free(struct fixture *f)
{
	json_decref(f->header);
	free(f->bytes);
}

/* A copy of tiny-v3 into tmp/model.safetensors with header[tensor][field] = value (JSON),
 * or header[tensor] = value when field is NULL. */
static void write_mutated(const char *tensor, const char *field, const char *value)
{
	struct fixture f;
	if (fixture_read(&f))
		return;
	json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
	if (field)
		json_object_set_new(json_object_get(f.header, tensor), field, v);
	else
		json_object_set_new(f.header, tensor, v);
	char *h = json_dumps(f.header, JSON_COMPACT);
	write_st("model.safetensors", h, 0, f.data, f.data_len);
	free(h);
	fixture_free(&f);
}

/* st_open(tmp) must fail with a message containing each of the given substrings. */
static void expect_open_fails(const char *what, int keep, const char *s1, const char *s2, const char *s3)
{
	struct st_set *s = (struct st_set *)1;
	struct err e = {{0}};
	int rc = st_open(tmp, keep, &s, &e);
	EXPECTF(rc == -1 && s == NULL, "%s: st_open returned %d", what, rc);
	const char *subs[] = {s1, s2, s3};
	for (int i = 0; i < 3; i++)
		EXPECTF(!subs[i] || strstr(e.msg, subs[i]), "%s: message \"%s\" lacks \"%s\"", what, e.msg, subs[i]);
	if (rc == 0)
		st_close(s);
}

/* ---- fixtures ---- */

static void check_embed(const struct st_set *s)
{
	const struct st_tensor *t = st_find(s, "model.embed_tokens.weight");
	EXPECT(t != NULL);
	if (!t)
		return;
	EXPECT(t->dtype == DT_BF16 && t->ndim == 2 && t->shape[0] == 1024 && t->shape[1] == 128);
	EXPECT_EQ_INT(t->nbytes, 1024 * 128 * 2);
	/* random-init weights: finite, small, not all zero */
	int nonzero = 0, sane = 1;
	for (int i = 0; i < 1024 * 128; i += 97) {
		uint16_t h;
		memcpy(&h, (const char *)t->data + 2 * i, 2);
		float x = bf16_to_f32(h);
		nonzero += x != 0;
		sane &= isfinite(x) && fabsf(x) < 10;
	}
	EXPECT(sane && nonzero > 100);
}

static void test_open_fixtures(void)
{
	static const struct {
		const char *dir;
		int n;
	} fx[] = {{"tiny-v3", 91}, {"tiny-v2", 83}, {"tiny-v3-fp8", 163}, {"tiny-r1", 259}};
	for (int k = 0; k < 4; k++) {
		struct st_set *s = NULL;
		struct err e = {{0}};
		EXPECTF(st_open(fixture_path(fx[k].dir), -1, &s, &e) == 0, "%s", e.msg);
		if (!s)
			continue;
		EXPECT_EQ_INT(st_count(s), fx[k].n);
		for (int i = 1; i < st_count(s); i++) /* sorted, unique */
			EXPECT(strcmp(st_at(s, i - 1)->name, st_at(s, i)->name) < 0);
		EXPECT(st_at(s, -1) == NULL && st_at(s, st_count(s)) == NULL);
		EXPECT(strstr(st_at(s, 0)->file, "model.safetensors") != NULL);
		check_embed(s);
		const struct st_tensor *lm = st_find(s, "lm_head.weight");
		EXPECT(lm && lm->dtype == DT_BF16 && lm->shape[0] == 1024);
		EXPECT(st_find(s, "model.layers.2.input_layernorm.weight") != NULL);
		EXPECT(st_find(s, "model.layers.3.input_layernorm.weight") == NULL);
		EXPECT(st_find(s, "nope") == NULL);
		st_close(s);
	}
	/* the V3 router bias is fp32 */
	struct st_set *s = NULL;
	struct err e;
	if (st_open(fixture_path("tiny-v3"), -1, &s, &e) == 0) {
		const struct st_tensor *b = st_find(s, "model.layers.1.mlp.gate.e_score_correction_bias");
		EXPECT(b && b->dtype == DT_F32 && b->ndim == 1 && b->shape[0] == 8 && b->nbytes == 32);
		st_close(s);
	}
}

/* Every fp8 weight [out, in] has an fp32 weight_scale_inv [ceil(out/128), ceil(in/128)]. */
static void test_fp8_scales(void)
{
	const char *dirs[] = {"tiny-v3-fp8", "tiny-r1"};
	for (int k = 0; k < 2; k++) {
		struct st_set *s = NULL;
		struct err e = {{0}};
		EXPECTF(st_open(fixture_path(dirs[k]), -1, &s, &e) == 0, "%s", e.msg);
		if (!s)
			continue;
		int n_fp8 = 0;
		for (int i = 0; i < st_count(s); i++) {
			const struct st_tensor *t = st_at(s, i);
			if (t->dtype != DT_F8_E4M3)
				continue;
			n_fp8++;
			char name[256];
			snprintf(name, sizeof name, "%s_scale_inv", t->name);
			const struct st_tensor *sc;
			int64_t rows = (t->shape[0] + 127) / 128, cols = (t->shape[1] + 127) / 128;
			int rc = st_expect(s, name, ST_DT(DT_F32), rows, cols, &sc, &e);
			EXPECTF(rc == 0, "%s", e.msg);
			EXPECT(t->ndim == 2 && t->nbytes == (size_t)(t->shape[0] * t->shape[1]));
			if (rc == 0)
				for (int j = 0; j < rows * cols; j++) {
					float x;
					memcpy(&x, (const char *)sc->data + 4 * j, 4);
					EXPECTF(isfinite(x) && x > 0, "%s[%d] = %g", name, j, x);
				}
			int nan = 0;
			for (size_t j = 0; j < t->nbytes; j++)
				nan += isnan(fp8_e4m3_to_f32(((const uint8_t *)t->data)[j]));
			EXPECTF(nan == 0, "%s has %d NaN bytes", t->name, nan);
		}
		EXPECT(n_fp8 > 20);
		EXPECT(st_find(s, "model.embed_tokens.weight")->dtype == DT_BF16);
		EXPECT(st_find(s, "model.layers.1.mlp.gate.weight")->dtype == DT_BF16);
		st_close(s);
	}
}

/* DeepSeek-V4's dtypes: its FP4 experts as I8 [out, in/2] with F8_E8M0 scales [out, in/32]
 * (5 layers with the MTP one, 8 experts, w1 w2 w3), its fp8 weights with F8_E8M0 scales per
 * 128x128; a wmat-only dtype is no checkpoint's */
static void test_v4_dtypes(void)
{
	struct st_set *s = NULL;
	struct err e = {{0}};
	EXPECTF(st_open(fixture_path("tiny-v4"), -1, &s, &e) == 0, "%s", e.msg);
	if (!s)
		return;
	int n_i8 = 0, n_e8m0 = 0;
	for (int i = 0; i < st_count(s); i++) {
		n_i8 += st_at(s, i)->dtype == DT_I8;
		n_e8m0 += st_at(s, i)->dtype == DT_F8_E8M0;
	}
	EXPECTF(n_i8 == 5 * 8 * 3 && n_e8m0 > n_i8, "%d I8, %d F8_E8M0 tensors", n_i8, n_e8m0);
	const struct st_tensor *w, *sc;
	EXPECTF(st_expect(s, "layers.2.ffn.experts.1.w1.weight", ST_DT(DT_I8), 128, 128, &w, &e) == 0, "%s", e.msg);
	EXPECTF(st_expect(s, "layers.2.ffn.experts.1.w1.scale", ST_DT(DT_F8_E8M0), 128, 8, &sc, &e) == 0, "%s", e.msg);
	EXPECT(st_expect(s, "layers.2.ffn.experts.1.w1.scale", ST_DT(DT_F32), 128, 8, &sc, &e) < 0 &&
	       strstr(e.msg, "dtype F8_E8M0, expected F32"));
	enum dtype dt;
	EXPECT(dtype_from_name("F8_E8M0", &dt) == 0 && dt == DT_F8_E8M0 && dtype_size(dt) == 1);
	EXPECT(dtype_from_name("U8", &dt) == 0 && dt == DT_U8 && dtype_size(dt) == 1);
	EXPECT(dtype_from_name("F4_E2M1", &dt) < 0);
	st_close(s);
}

static void test_expect(void)
{
	struct st_set *s = NULL;
	struct err e = {{0}};
	const char *dir = fixture_path("tiny-v3");
	const struct st_tensor *t;
	if (st_open(dir, -1, &s, &e)) {
		harness_fail(__FILE__, __LINE__, "%s", e.msg);
		return;
	}
	const char *q = "model.layers.0.self_attn.q_a_proj.weight";
	EXPECT_EQ_INT(st_expect(s, q, ST_FLOATS, 96, 128, &t, &e), 0);
	EXPECT(t && t->dtype == DT_BF16);
	EXPECT_EQ_INT(st_expect(s, "model.layers.0.self_attn.q_a_layernorm.weight", ST_FLOATS, 96, 0, &t, &e), 0);
	char want[512];
	EXPECT_EQ_INT(st_expect(s, q, ST_FLOATS, 128, 96, &t, &e), -1);
	snprintf(want, sizeof want,
		 "%s/model.safetensors: tensor %s: shape [96, 128], expected "
		 "[128, 96]",
		 dir, q);
	EXPECTF(strcmp(e.msg, want) == 0, "%s", e.msg);
	EXPECT_EQ_INT(st_expect(s, q, ST_FLOATS, 96, 0, &t, &e), -1);
	EXPECTF(strstr(e.msg, "shape [96, 128], expected [96]"), "%s", e.msg);
	EXPECT_EQ_INT(st_expect(s, q, ST_DT(DT_F8_E4M3), 96, 128, &t, &e), -1);
	snprintf(want, sizeof want, "%s/model.safetensors: tensor %s: dtype BF16, expected F8_E4M3", dir, q);
	EXPECTF(strcmp(e.msg, want) == 0, "%s", e.msg);
	EXPECT_EQ_INT(st_expect(s, q, ST_DT(DT_F32) | ST_DT(DT_F16) | ST_DT(DT_I64), 96, 128, &t, &e), -1);
	EXPECTF(strstr(e.msg, "dtype BF16, expected F32, F16 or I64"), "%s", e.msg);
	EXPECT_EQ_INT(st_expect(s, "model.layers.0.mlp.gate.weight", ST_FLOATS, 8, 128, &t, &e), -1);
	snprintf(want, sizeof want, "%s: missing tensor model.layers.0.mlp.gate.weight", dir);
	EXPECTF(strcmp(e.msg, want) == 0 && t == NULL, "%s", e.msg);
	st_close(s);
}

static void test_drop_layers(void)
{
	struct st_set *all = NULL, *s = NULL;
	struct err e = {{0}};
	if (st_open(fixture_path("tiny-v3"), -1, &all, &e) || st_open(fixture_path("tiny-v3"), 2, &s, &e)) {
		harness_fail(__FILE__, __LINE__, "%s", e.msg);
		return;
	}
	int layer2 = 0;
	for (int i = 0; i < st_count(all); i++)
		layer2 += strncmp(st_at(all, i)->name, "model.layers.2.", 15) == 0;
	EXPECT(layer2 > 10);
	EXPECT_EQ_INT(st_count(s), st_count(all) - layer2);
	EXPECT(st_find(s, "model.layers.2.input_layernorm.weight") == NULL);
	EXPECT(st_find(s, "model.layers.1.input_layernorm.weight") != NULL);
	EXPECT(st_find(s, "lm_head.weight") != NULL);
	st_close(all);
	st_close(s);
}

/* Hand-built file: MTP layer and inv_freq dropped, numeric layer compare, all dtypes. */
static void test_hand_built_and_dropped(void)
{
	if (!tmp_new()) {
		harness_fail(__FILE__, __LINE__, "mkdtemp failed");
		return;
	}
	float f[4] = {1, -2, 3.5f, 0.25f};
	int64_t i64 = -7;
	unsigned char data[64] = {0};
	memcpy(data, f, 16);
	memcpy(data + 16, &i64, 8);
	const char *hdr =
		"{\"__metadata__\": {\"format\": \"pt\"},"
		"\"model.layers.0.w\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 16]},"
		"\"model.layers.0.i\": {\"dtype\": \"I64\", \"shape\": [], \"data_offsets\": [16, 24]},"
		"\"model.layers.1.h\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [24, 28]},"
		"\"model.layers.1.n\": {\"dtype\": \"I32\", \"shape\": [0, 4], \"data_offsets\": [28, 28]},"
		"\"model.layers.1.e\": {\"dtype\": \"BF16\", \"shape\": [0], \"data_offsets\": [28, 28]},"
		"\"model.layers.3.eh_proj.weight\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [28, 32]},"
		"\"model.layers.10.x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [32, 36]},"
		"\"model.layers.0.self_attn.rotary_emb.inv_freq\": {\"dtype\": \"F32\", \"shape\": [2], "
		"\"data_offsets\": [36, 44]},"
		"\"model.layersX.5\": {\"dtype\": \"F8_E4M3\", \"shape\": [4], \"data_offsets\": [44, 48]}}  ";
	write_st("weights.safetensors", hdr, 0, data, 48); /* not model.safetensors: the only one */
	struct st_set *s = NULL;
	struct err e = {{0}};
	EXPECTF(st_open(tmp, 3, &s, &e) == 0, "%s", e.msg);
	if (s) {
		EXPECT_EQ_INT(st_count(s), 6);
		EXPECT(!st_find(s, "model.layers.3.eh_proj.weight") && !st_find(s, "model.layers.10.x"));
		EXPECT(!st_find(s, "model.layers.0.self_attn.rotary_emb.inv_freq"));
		EXPECT(st_find(s, "model.layersX.5") != NULL);
		const struct st_tensor *t = st_find(s, "model.layers.0.w");
		EXPECT(t && t->dtype == DT_F32 && t->ndim == 2 && !memcmp(t->data, f, 16));
		EXPECT(strstr(t->file, "/weights.safetensors") != NULL);
		t = st_find(s, "model.layers.0.i");
		int64_t iv = 0;
		if (t)
			memcpy(&iv, t->data, 8); /* tensor data need not be aligned */
		EXPECT(t && t->ndim == 0 && t->nbytes == 8 && iv == -7);
		t = st_find(s, "model.layers.1.n");
		EXPECT(t && t->dtype == DT_I32 && t->nbytes == 0 && t->shape[0] == 0 && t->shape[1] == 4);
		st_close(s);
	}
	EXPECTF(st_open(tmp, -1, &s, &e) == 0, "%s", e.msg); /* keep everything but inv_freq */
	if (s) {
		EXPECT_EQ_INT(st_count(s), 8);
		st_close(s);
	}
	tmp_remove();
}

/* Two shards + index: lookups across shards, dropped MTP tensors, every index error. */
static const char *shard1 =
	"{\"model.embed_tokens.weight\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 16]},"
	" \"model.layers.0.w\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [16, 22]}}";
static const char *shard2 = "{\"lm_head.weight\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]},"
			    " \"model.layers.1.mtp\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}";
#define S1 "model-00001-of-00002.safetensors"
#define S2 "model-00002-of-00002.safetensors"
#define INDEX_HEAD "{\"metadata\": {\"total_size\": 30}, \"weight_map\": {"
#define INDEX_MAP                                                                       \
	"\"model.embed_tokens.weight\": \"" S1 "\", \"model.layers.0.w\": \"" S1 "\", " \
	"\"lm_head.weight\": \"" S2 "\", \"model.layers.1.mtp\": \"" S2 "\""

static void write_shards(const char *index)
{
	float f[4] = {1, 2, 3, 4};
	unsigned char d1[22] = {0}, d2[8] = {0};
	memcpy(d1, f, 16);
	d1[16] = 0x80, d1[17] = 0x3f; /* bf16 1.0 */
	d2[0] = 0x00, d2[1] = 0x3c;   /* f16 1.0 */
	write_st(S1, shard1, 0, d1, sizeof d1);
	write_st(S2, shard2, 0, d2, sizeof d2);
	write_bytes("model.safetensors.index.json", index, strlen(index), "", 0);
}

static void test_sharded(void)
{
	if (!tmp_new()) {
		harness_fail(__FILE__, __LINE__, "mkdtemp failed");
		return;
	}
	write_shards(INDEX_HEAD INDEX_MAP "}}");
	write_bytes("stray.safetensors", "junk", 4, "", 0); /* not in the index: never opened */
	struct st_set *s = NULL;
	struct err e = {{0}};
	EXPECTF(st_open(tmp, 1, &s, &e) == 0, "%s", e.msg);
	if (s) {
		EXPECT_EQ_INT(st_count(s), 3);
		const struct st_tensor *a = st_find(s, "model.embed_tokens.weight");
		const struct st_tensor *b = st_find(s, "lm_head.weight");
		const struct st_tensor *c = st_find(s, "model.layers.0.w");
		float x = 0;
		uint16_t h = 0, h2 = 0;
		if (a && b && c) {
			memcpy(&x, (const char *)a->data + 12, 4);
			memcpy(&h, b->data, 2);
			memcpy(&h2, c->data, 2);
		}
		EXPECT(a && strstr(a->file, S1) && x == 4.0f);
		EXPECT(b && strstr(b->file, S2) && f16_to_f32(h) == 1.0f);
		EXPECT(c && c->dtype == DT_BF16 && bf16_to_f32(h2) == 1.0f);
		EXPECT(st_find(s, "model.layers.1.mtp") == NULL);
		EXPECT_EQ_INT(st_expect(s, "lm_head.weight", ST_FLOATS, 2, 0, NULL, &e), 0);
		st_close(s);
	}

	write_shards(INDEX_HEAD INDEX_MAP ", \"ghost.weight\": \"model-00003-of-00003.safetensors\"}}");
	expect_open_fails("missing shard", -1, "model.safetensors.index.json: tensor ghost.weight: ",
			  "/model-00003-of-00003.safetensors: cannot open: No such file or directory", NULL);
	write_shards(INDEX_HEAD INDEX_MAP ", \"ghost.weight\": \"" S2 "\"}}");
	expect_open_fails("tensor not in shard", -1,
			  "model.safetensors.index.json: tensor ghost.weight: not found in its shard ", S2, NULL);
	write_shards(INDEX_HEAD "\"lm_head.weight\": \"../" S2 "\"}}");
	expect_open_fails("shard path", -1,
			  "index.json: tensor lm_head.weight: shard \"../" S2 "\" is not a file name", NULL, NULL);
	write_shards("{\"weight_map\": [1]}");
	expect_open_fails("weight_map type", -1, "index.json: weight_map [1] is not", NULL, NULL);
	write_shards("{\"weight_map\": ");
	expect_open_fails("index json", -1, "model.safetensors.index.json: line 1", NULL, NULL);
	/* the same tensor in both shards */
	write_shards(INDEX_HEAD INDEX_MAP "}}");
	unsigned char d[22] = {0};
	write_st(S2,
		 "{\"lm_head.weight\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]},"
		 " \"model.layers.0.w\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [4, 10]},"
		 " \"model.layers.1.mtp\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [10, 14]}}",
		 0, d, 14);
	expect_open_fails("duplicate across shards", -1, "tensor model.layers.0.w: also in ", S1, S2);
	/* a shard with a broken header is reported with its own name */
	write_shards(INDEX_HEAD INDEX_MAP "}}");
	write_st(S2, "{\"lm_head.weight\": {\"dtype\": \"F16\", \"shape\": [3], \"data_offsets\": [0, 4]}}", 0, d, 8);
	expect_open_fails("bad shard", -1,
			  S2 ": tensor lm_head.weight: data_offsets [0, 4] span 4 "
			     "bytes, but shape [3] of F16 needs 6",
			  NULL, NULL);
	tmp_remove();
}

static void test_file_choice(void)
{
	if (!tmp_new()) {
		harness_fail(__FILE__, __LINE__, "mkdtemp failed");
		return;
	}
	expect_open_fails("empty dir", -1, tmp, ": no model.safetensors, ", NULL);
	write_st("a.safetensors", "{}", 0, "", 0);
	write_st("b.safetensors", "{}", 0, "", 0);
	expect_open_fails("two files", -1, ": 2 *.safetensors files but no", NULL, NULL);
	mkdir(tmp_path("model.safetensors"), 0700);
	expect_open_fails("directory", -1, "/model.safetensors: cannot open: not a regular file", NULL, NULL);
	rmdir(tmp_path("model.safetensors"));
	write_st("model.safetensors", "{}", 0, "", 0); /* preferred over the others; empty is fine */
	struct st_set *s = NULL;
	struct err e = {{0}};
	EXPECTF(st_open(tmp, -1, &s, &e) == 0, "%s", e.msg);
	if (s) {
		EXPECT_EQ_INT(st_count(s), 0);
		EXPECT(st_find(s, "x") == NULL);
		st_close(s);
	}
	EXPECT_EQ_INT(st_open("/nonexistent-mlaserve", -1, &s, &e), -1);
	EXPECTF(strcmp(e.msg, "/nonexistent-mlaserve: cannot open directory: No such file or "
			      "directory") == 0,
		"%s", e.msg);
	tmp_remove();
}

/* Corrupted copies of tiny-v3: each gives its own message naming the file and tensor. */
static void test_corrupt_raw(void)
{
	struct fixture f;
	if (!tmp_new() || fixture_read(&f)) {
		harness_fail(__FILE__, __LINE__, "setup failed");
		return;
	}
	size_t hl = f.size - 8 - f.data_len;
	write_bytes("model.safetensors", f.bytes, 5, "", 0);
	expect_open_fails("truncated to 5 bytes", -1, "/model.safetensors: header: file is 5 bytes, too short", NULL,
			  NULL);
	write_bytes("model.safetensors", "", 0, "", 0);
	expect_open_fails("empty file", -1, "/model.safetensors: header: file is 0 bytes", NULL, NULL);
	write_bytes("model.safetensors", f.bytes, 8 + hl / 2, "", 0);
	expect_open_fails("truncated header", -1,
			  "/model.safetensors: header: length 10152 runs past "
			  "the end of the file",
			  NULL, NULL);
	write_bytes("model.safetensors", f.bytes, 8 + hl + 20000, "", 0);
	expect_open_fails("truncated data", -1, "/model.safetensors: tensor model.",
			  "run past the data section (20000 bytes)", NULL);
	write_st("model.safetensors", "", (uint64_t)1 << 40, "", 0);
	expect_open_fails("huge header length", -1,
			  "/model.safetensors: header: length 1099511627776"
			  " exceeds the 100 MB limit",
			  NULL, NULL);
	write_st("model.safetensors", "{\"a\": {\"dtype\": \"F32\"", 0, "", 0);
	expect_open_fails("cut JSON", -1, "/model.safetensors: header: invalid JSON: ", NULL, NULL);
	write_st("model.safetensors", "\x01\x02garbage\xff", 0, f.data, f.data_len);
	expect_open_fails("garbage header", -1, "/model.safetensors: header: invalid JSON", NULL, NULL);
	write_st("model.safetensors", "[1, 2]", 0, "", 0);
	expect_open_fails("array header", -1, "/model.safetensors: header: not a JSON object", NULL, NULL);
	write_st("model.safetensors", "{\"a\": {}, \"a\": {}}", 0, "", 0);
	expect_open_fails("duplicate key", -1, "/model.safetensors: header: invalid JSON: duplicate", NULL, NULL);
	fixture_free(&f);
	tmp_remove();
}

static void test_corrupt_entries(void)
{
	static const struct {
		const char *what, *tensor, *field, *value, *msg;
	} cases[] = {
		{"entry", "lm_head.weight", NULL, "5", "tensor lm_head.weight: entry is not an object: 5"},
		{"dtype", "lm_head.weight", "dtype", "\"F8_E5M2\"",
		 "tensor lm_head.weight: unknown dtype \"F8_E5M2\""},
		{"dtype type", "lm_head.weight", "dtype", "7", "tensor lm_head.weight: unknown dtype 7"},
		{"no dtype", "lm_head.weight", "dtype", "null", "tensor lm_head.weight: unknown dtype null"},
		{"size mismatch", "lm_head.weight", "dtype", "\"F32\"",
		 "tensor lm_head.weight: data_offsets [1841920, 2104064] span 262144 bytes, but shape "
		 "[1024, 128] of F32 needs 524288"},
		{"shape size", "lm_head.weight", "shape", "[1024, 127]",
		 "tensor lm_head.weight: data_offsets [1841920, 2104064] span 262144 bytes, but shape "
		 "[1024, 127] of BF16 needs 260096"},
		{"shape negative", "lm_head.weight", "shape", "[-1, 128]",
		 "tensor lm_head.weight: shape [-1,128] is not a list of non-negative integers"},
		{"shape float", "lm_head.weight", "shape", "[1024.0, 128]",
		 "tensor lm_head.weight: shape [1024.0,128] is not a list of non-negative integers"},
		{"shape type", "lm_head.weight", "shape", "\"1024x128\"",
		 "tensor lm_head.weight: shape \"1024x128\" is not a list"},
		{"shape dims", "lm_head.weight", "shape", "[1, 1, 1, 1, 1024, 128]",
		 "tensor lm_head.weight: shape [1,1,1,1,1024,128] has more than 4 dimensions"},
		{"shape overflow", "lm_head.weight", "shape", "[4294967296, 4294967296]",
		 "tensor lm_head.weight: shape [4294967296,4294967296] overflows"},
		{"offsets type", "lm_head.weight", "data_offsets", "[0]",
		 "tensor lm_head.weight: data_offsets [0] is not [begin, end]"},
		{"offsets negative", "lm_head.weight", "data_offsets", "[-2, 262142]",
		 "tensor lm_head.weight: data_offsets [-2,262142] is not [begin, end]"},
		{"begin > end", "lm_head.weight", "data_offsets", "[2104064, 1841920]",
		 "tensor lm_head.weight: data_offsets [2104064, 1841920]: begin > end"},
		{"out of range", "lm_head.weight", "data_offsets", "[1842000, 2104144]",
		 "tensor lm_head.weight: data_offsets [1842000, 2104144] run past the data section "
		 "(2104064 bytes)"},
		{"overlap", "lm_head.weight", "data_offsets", "[192, 262336]",
		 "tensor lm_head.weight: data_offsets [192, 262336] overlap tensor "
		 "model.embed_tokens.weight [64, 262208]"},
		{"overlap inside", "model.layers.1.mlp.gate.e_score_correction_bias", "data_offsets", "[100, 132]",
		 "tensor model.layers.1.mlp.gate.e_score_correction_bias: data_offsets "
		 "[100, 132] overlap tensor model.embed_tokens.weight [64, 262208]"},
	};
	if (!tmp_new()) {
		harness_fail(__FILE__, __LINE__, "mkdtemp failed");
		return;
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		write_mutated(cases[i].tensor, cases[i].field, cases[i].value);
		expect_open_fails(cases[i].what, -1, "/model.safetensors: ", cases[i].msg, NULL);
	}
	/* a broken entry is reported even when its layer would be dropped */
	write_mutated("model.layers.2.input_layernorm.weight", "dtype", "\"F64\"");
	expect_open_fails("dropped layer", 2, "tensor model.layers.2.input_layernorm.weight: unknown dtype \"F64\"",
			  NULL, NULL);
	/* __metadata__ is ignored whatever it holds */
	write_mutated("__metadata__", NULL, "[1, {\"x\": 2}]");
	struct st_set *s = NULL;
	struct err e = {{0}};
	EXPECTF(st_open(tmp, -1, &s, &e) == 0, "%s", e.msg);
	st_close(s);
	tmp_remove();
}

TESTS(T(test_open_fixtures), T(test_fp8_scales), T(test_v4_dtypes), T(test_expect), T(test_drop_layers),
      T(test_hand_built_and_dropped), T(test_sharded), T(test_file_choice), T(test_corrupt_raw),
      T(test_corrupt_entries))
