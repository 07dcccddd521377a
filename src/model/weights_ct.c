/* compressed-tensors pack-quantized int4 checkpoints (weights_ct.h; Kimi K2-Thinking's and
 * llm-compressor's W4A16): which Linear modules the config's ignore list leaves as they are,
 * and the others' weight_packed / weight_scale / weight_shape repacked into the int4 row
 * (ops/quant_int4.h) for this rank's part. Nothing is rounded but f16 / f32 scales (to bf16):
 * the nibbles and bf16 scales move. */
#include <float.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/dummy.h"
#include "model/weights_ct.h"
#include "ops/quant_int4.h"
#include "ops/wformat.h"

struct ct_ignore {
	int n;
	char **names; /* [n] as config.json writes them: a module name, or "re:REGEX" */
	regex_t *re;  /* [n]: the "re:" ones compiled (is_re) */
	bool *is_re;
};

/* "re:P" as compressed-tensors matches it (Python's re.match: from the name's start) in POSIX
 * ERE: ^(P), with the Python spellings of the published lists translated ((?: and \d) */
static char *ere_of(const char *p)
{
	char *out = malloc(3 * strlen(p) + 8), *o = out;
	if (!out)
		return NULL;
	o += sprintf(o, "^(");
	for (; *p; p++) {
		if (!strncmp(p, "(?:", 3)) {
			*o++ = '(';
			p += 2;
		} else if (!strncmp(p, "\\d", 2)) {
			o += sprintf(o, "[0-9]");
			p++;
		} else if (*p == '\\' && p[1]) {
			*o++ = *p++;
			*o++ = *p;
		} else {
			*o++ = *p;
		}
	}
	sprintf(o, ")");
	return out;
}

void model_ct_end(struct model *m)
{
	struct ct_ignore *c = m->ct;
	if (!c)
		return;
	for (int i = 0; i < c->n; i++) {
		if (c->is_re && c->is_re[i])
			regfree(&c->re[i]);
		free(c->names[i]);
	}
	free(c->names);
	free(c->re);
	free(c->is_re);
	free(c);
	m->ct = NULL;
}

int model_ct_begin(struct model *m, const char *dir, struct err *e)
{
	if (!m->cfg.ct_int4)
		return 0;
	struct ct_ignore *c = calloc(1, sizeof *c);
	if (!c)
		return err_set(e, "%s: out of memory", dir);
	if (config_ct_ignore(dir, &c->names, &c->n, e)) {
		free(c);
		return -1;
	}
	m->ct = c;
	c->re = calloc((size_t)c->n + 1, sizeof *c->re);
	c->is_re = calloc((size_t)c->n + 1, sizeof *c->is_re);
	if (!c->re || !c->is_re)
		return err_set(e, "%s: out of memory", dir);
	for (int i = 0; i < c->n; i++) {
		if (strncmp(c->names[i], "re:", 3))
			continue;
		char *ere = ere_of(c->names[i] + 3);
		int rc = ere ? regcomp(&c->re[i], ere, REG_EXTENDED | REG_NOSUB) : REG_ESPACE;
		free(ere);
		if (rc) {
			char why[128];
			regerror(rc, ere ? &c->re[i] : NULL, why, sizeof why);
			return err_set(e, "%s/config.json: quantization_config.ignore[%d] \"%s\": %s", dir, i,
				       c->names[i], why);
		}
		c->is_re[i] = true;
	}
	return 0;
}

/* the module of a weight: its name without ".weight" (into buf [n]) */
static const char *module_of(const char *name, char *buf, size_t n)
{
	size_t len = strlen(name);
	if (len > 7 && !strcmp(name + len - 7, ".weight"))
		len -= 7;
	snprintf(buf, n, "%.*s", (int)len, name);
	return buf;
}

bool model_ct_packed(const struct model *m, const char *name, bool linear)
{
	/* compressed-tensors quantizes nn.Linear modules: not the embeddings (the tied head's copy
	 * is read from it), nor DeepSeek's router (MoEGate), nor the norms */
	if (!m->cfg.ct_int4 || !linear || strstr(name, "embed_tokens."))
		return false;
	/* an ignore list names a module as the checkpoint's model does: in full (Kimi K2.5's
	 * wrapper: "language_model.…") or as the text model alone; either matches */
	char full[320], mods[2][320];
	snprintf(full, sizeof full, "%s%s", m->cfg.weight_prefix, name);
	module_of(full, mods[0], sizeof mods[0]);
	module_of(name, mods[1], sizeof mods[1]);
	const struct ct_ignore *c = m->ct;
	for (int k = 0; k < (m->cfg.weight_prefix[0] ? 2 : 1); k++)
		for (int i = 0; c && i < c->n; i++)
			if (c->is_re[i] ? !regexec(&c->re[i], mods[k], 0, NULL, 0) : !strcmp(c->names[i], mods[k]))
				return false;
	return true;
}

/* scale (r, g) of the checkpoint's weight_scale as fp32 (bf16, f16: exactly) */
static float scale_at(enum dtype dt, const void *data, int64_t lds, int r, int g)
{
	size_t i = (size_t)r * (size_t)lds + (size_t)g;
	if (dt == DT_F32) {
		float f;
		memcpy(&f, (const char *)data + 4 * i, 4);
		return f;
	}
	uint16_t h;
	memcpy(&h, (const char *)data + 2 * i, 2);
	return dt == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

/* a tensor's bytes aligned to `align` for the repack: in place, or a malloc'd copy (*tmp) */
static const void *aligned(const struct st_tensor *t, size_t align, void **tmp)
{
	*tmp = NULL;
	if ((uintptr_t)t->data % align == 0)
		return t->data;
	if ((*tmp = malloc(t->nbytes)))
		memcpy(*tmp, t->data, t->nbytes);
	return *tmp;
}

/* weight_packed and weight_scale found and checked against weight_shape; no zero points, no
 * g_idx (the config said so: a tensor saying otherwise is refused too) */
static int find_parts(struct model *m, const char *mod, int rows, int cols, const struct st_tensor **pk,
		      const struct st_tensor **sc, struct err *e)
{
	char n[400];
	static const char *const refused[][2] = {{"weight_zero_point", "zero points (asymmetric int4)"},
						 {"weight_g_idx", "activation order (g_idx)"}};
	for (int i = 0; i < 2; i++) {
		snprintf(n, sizeof n, "%s.%s", mod, refused[i][0]);
		const struct st_tensor *t = st_find(m->st, n);
		if (t)
			return err_set(e, "%s: tensor %s%s: %s is not supported (symmetric groups of 32 in order)",
				       t->file, m->cfg.weight_prefix, n, refused[i][1]);
	}
	const struct st_tensor *sh;
	snprintf(n, sizeof n, "%s.weight_shape", mod);
	if (st_expect(m->st, n, ST_DT(DT_I64) | ST_DT(DT_I32), 2, 0, &sh, e)) /* torch.tensor(shape): I64 */
		return -1;
	int64_t shape[2];
	for (int i = 0; i < 2; i++) {
		int32_t s32;
		if (sh->dtype == DT_I64) {
			memcpy(&shape[i], (const char *)sh->data + 8 * i, 8);
		} else {
			memcpy(&s32, (const char *)sh->data + 4 * i, 4);
			shape[i] = s32;
		}
	}
	if (shape[0] != rows || shape[1] != cols)
		return err_set(e, "%s: tensor %s: [%lld, %lld], expected [%d, %d] (the module's weight)", sh->file, n,
			       (long long)shape[0], (long long)shape[1], rows, cols);
	snprintf(n, sizeof n, "%s.weight_packed", mod);
	if (st_expect(m->st, n, ST_DT(DT_I32), rows, (cols + 7) / 8, pk, e))
		return -1;
	snprintf(n, sizeof n, "%s.weight_scale", mod);
	return st_expect(m->st, n, ST_FLOATS, rows, int4_groups(cols), sc, e);
}

/* --load-format dummy: the module's weight_packed [rows, cols/8] int32 as random bytes (every
 * nibble q+8 uniform over 0..15) and weight_scale [rows, cols/32] bf16 > 0, as a checkpoint
 * holds them (scales up to 1.7/sqrt(cols)/8: |q x scale| as wide as the bf16 dummies) */
static int dummy_parts(struct model *m, const char *full, int rows, int cols, int32_t **pk, uint16_t **sc,
		       struct err *e)
{
	size_t np = (size_t)rows * (size_t)((cols + 7) / 8), ns = (size_t)rows * (size_t)int4_groups(cols);
	*pk = malloc(np * 4);
	*sc = malloc(ns * 2);
	if (!*pk || !*sc)
		return err_set(e, "%s: out of memory for dummy int4 weights (%zu bytes)", full, np * 4 + ns * 2);
	char n[400];
	snprintf(n, sizeof n, "%s.weight_packed", full);
	model_dummy_fill(m, n, DT_U8, *pk, np * 4, 0);
	snprintf(n, sizeof n, "%s.weight_scale", full);
	model_dummy_fill(m, n, DT_BF16, *sc, ns, 1.7f / sqrtf((float)cols) / 8);
	for (size_t i = 0; i < ns; i++)
		(*sc)[i] &= 0x7fff;
	return 0;
}

int model_ct_load(struct model *m, const char *name, int rows, int cols, bool absorbed, int r0, int nr, int c0, int nc,
		  struct wmat *w, struct err *e)
{
	char mod[320], full[352]; /* full: as the checkpoint names it (Kimi K2.5: language_model.…) */
	module_of(name, mod, sizeof mod);
	snprintf(full, sizeof full, "%s%s", m->cfg.weight_prefix, mod);
	if (absorbed)
		return err_set(e,
			       "%s: pack-quantized int4 is not supported for it (the absorbed attention multiplies "
			       "its transpose): config.json's quantization_config.ignore must list it",
			       full);
	if (c0 % INT4_GROUP)
		return err_set(e,
			       "%s: tensor parallelism cuts its %d columns at %d, inside one of the checkpoint's int4 "
			       "groups of 32: use a --tensor-parallel-size whose part of them is a multiple of 32",
			       full, cols, c0);
	/* the parts: the checkpoint's tensors, or dummy ones in their layout (bf16 scales) */
	const struct st_tensor *pk = NULL, *sc = NULL;
	int32_t *dpk = NULL;
	uint16_t *dsc = NULL;
	if (m->opt.load_dummy ? dummy_parts(m, full, rows, cols, &dpk, &dsc, e)
			      : find_parts(m, mod, rows, cols, &pk, &sc, e)) {
		free(dpk), free(dsc);
		return -1;
	}
	enum dtype sdt = sc ? sc->dtype : DT_BF16;
	char pname[400], sname[400];
	snprintf(pname, sizeof pname, "%s.weight_packed", full);
	snprintf(sname, sizeof sname, "%s.weight_scale", full);
	const char *pfile = pk ? pk->file : "dummy", *sfile = sc ? sc->file : "dummy";
	void *tp = NULL, *ts = NULL, *tb = NULL;
	const int32_t *packed = pk ? aligned(pk, 4, &tp) : dpk;
	const void *scale = sc ? aligned(sc, dtype_size(sdt), &ts) : dsc;
	int64_t lds = int4_groups(cols);
	/* the int4 row holds bf16 scales: f16 / f32 ones rounded to them (nearest even) */
	const uint16_t *sb = sdt == DT_BF16 ? scale : NULL; /* NULL: out of memory */
	if (sdt != DT_BF16 && scale && (tb = malloc((size_t)rows * (size_t)lds * 2))) {
		for (int r = 0; r < rows; r++)
			for (int g = 0; g < lds; g++)
				((uint16_t *)tb)[(size_t)r * (size_t)lds + (size_t)g] = f32_to_bf16(
					scale_at(sdt, scale, lds, r, g));
		sb = tb;
	}
	size_t bytes = int4_data_bytes(nr, nc);
	char *d = model_own(m, bytes);
	int br = -1, bc = -1, rc = -1;
	if (packed && scale && sb && d)
		rc = quant_int4_from_packed(m->opt.pool, packed, (cols + 7) / 8, sb, lds, r0, nr, c0, nc, d, w, &br,
					    &bc);
	bool oom = rc && br < 0;
	float bad = rc && !oom ? scale_at(sdt, scale, lds, br, bc / INT4_GROUP) : 0;
	free(tp), free(ts), free(tb), free(dpk), free(dsc);
	if (oom)
		return err_set(e, "%s: tensor %s: out of memory repacking it", pfile, pk ? pk->name : pname);
	if (rc)
		return err_set(e, "%s: tensor %s: scale [%d, %d] is %g: int4 groups need scales >= 0, finite in bf16",
			       sfile, sc ? sc->name : sname, br, bc / INT4_GROUP, bad);
	m->weight_bytes += bytes;
	m->ct_bytes += bytes;
	return 0;
}
