/* Tokenizer: load tokenizer.json (+ tokenizer_config.json), encode, lookups. */
#include "tok/tokenizer.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/utf8.h"
#include "io/json_util.h"
#include "io/hf_config.h"
#include "tok/tok_internal.h"

/* Scratch of one encode call, pooled in the tokenizer. */
struct tok_ctx {
	struct pretok_work pw;
	struct pretok_list *lists; /* one per pre-tokenizer stage */
	struct bpe_scratch bs;
	struct tok_cache words, pieces;
	struct strbuf norm, tmp;
	struct added_piece *seg, *sub;
	size_t n_seg, cap_seg, n_sub, cap_sub;
	struct tiktoken_scratch tks;
};

/* ---- post-processor ---- */

static int special_ids(struct tok *t, const json_t *specials, const char *name, struct tok_ids *out, struct err *e)
{
	const json_t *st = json_object_get(specials, name);
	const json_t *ids = json_object_get(st, "ids");
	if (!json_is_array(ids))
		return err_set(e, "%s: post_processor: special token '%s' is not defined", t->what, name);
	size_t i;
	json_t *v;
	json_array_foreach(ids, i, v)
	{
		int32_t id;
		if (!json_util_id(v, &id))
			return err_set(e, "%s: post_processor: special token '%s': bad id", t->what, name);
		if (tok_ids_push(out, id))
			return tok_oom(e);
	}
	return 0;
}

static int named_id(struct tok *t, const json_t *pair, const char *key, struct tok_ids *out, struct err *e)
{
	/* ["<s>", 0] */
	int32_t id;
	if (!json_is_array(pair) || !json_util_id(json_array_get(pair, 1), &id))
		return err_set(e, "%s: post_processor.%s: expected [token, id]", t->what, key);
	return tok_ids_push(out, id) ? tok_oom(e) : 0;
}

static int post_load(struct tok *t, const json_t *pp, struct err *e)
{
	if (!pp || json_is_null(pp))
		return 0;
	const char *type;
	if (json_util_str(pp, t->what, "post_processor.type", NULL, &type, e) < 0 || !type)
		return err_set(e, "%s: post_processor: expected an object with a \"type\"", t->what);
	if (!strcmp(type, "Sequence")) {
		const json_t *arr = json_object_get(pp, "processors");
		if (!json_is_array(arr))
			return err_set(e, "%s: post_processor.processors: expected an array", t->what);
		for (size_t i = 0; i < json_array_size(arr); i++)
			if (post_load(t, json_array_get(arr, i), e))
				return -1;
		return 0;
	}
	if (!strcmp(type, "ByteLevel"))
		return 0; /* offsets only */
	if (!strcmp(type, "TemplateProcessing")) {
		const json_t *single = json_object_get(pp, "single");
		const json_t *specials = json_object_get(pp, "special_tokens");
		if (!json_is_array(single))
			return err_set(e, "%s: post_processor.single: expected an array", t->what);
		bool after = false;
		for (size_t i = 0; i < json_array_size(single); i++) {
			const json_t *it = json_array_get(single, i);
			const json_t *sp = json_object_get(it, "SpecialToken");
			if (json_object_get(it, "Sequence")) {
				after = true;
				continue;
			}
			const json_t *name = json_object_get(sp, "id");
			if (!json_is_string(name))
				return err_set(e,
					       "%s: post_processor.single[%zu]: expected "
					       "SpecialToken or Sequence",
					       t->what, i);
			if (special_ids(t, specials, json_string_value(name), after ? &t->suffix : &t->prefix, e))
				return -1;
		}
		return 0;
	}
	if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing"))
		return named_id(t, json_object_get(pp, "cls"), "cls", &t->prefix, e) ||
				       named_id(t, json_object_get(pp, "sep"), "sep", &t->suffix, e)
			       ? -1
			       : 0;
	return err_set(e, "%s: post_processor: unsupported type '%s'", t->what, type);
}

/* tokenizer_config.json's add_bos_token / add_eos_token, when present, replace the
 * post-processor (transformers' update_post_processor). */
static int config_override(struct tok *t, const char *dir, struct err *e)
{
	struct hf_config c;
	if (hf_config_load(dir, &c, e))
		return -1;
	int rc = 0;
	if (c.has_add_bos_token || c.has_add_eos_token) {
		t->prefix.n = t->suffix.n = 0;
		const struct {
			bool on;
			const char *tok, *name;
			struct tok_ids *dst;
		} rule[2] = {{c.has_add_bos_token && c.add_bos_token, c.bos_token, "bos", &t->prefix},
			     {c.has_add_eos_token && c.add_eos_token, c.eos_token, "eos", &t->suffix}};
		for (int i = 0; i < 2 && !rc; i++) {
			if (!rule[i].on)
				continue;
			int32_t id = rule[i].tok ? tok_token_to_id(t, rule[i].tok) : -1;
			if (id < 0)
				rc = err_set(e,
					     "%s/tokenizer_config.json: add_%s_token is true but "
					     "%s_token %s%s%s",
					     dir, rule[i].name, rule[i].name, rule[i].tok ? "'" : "",
					     rule[i].tok ? rule[i].tok : "is missing",
					     rule[i].tok ? "' is not in the vocab" : "");
			else if (tok_ids_push(rule[i].dst, id))
				rc = tok_oom(e);
		}
	}
	hf_config_free(&c);
	return rc;
}

/* ---- load ---- */

int tok_build_id_tables(struct tok *t, struct err *e)
{
	int32_t n = t->bpe.n_ids;
	for (size_t i = 0; i < t->added.n; i++)
		if (t->added.tok[i].id >= n)
			n = t->added.tok[i].id + 1;
	if (n > 16 * 1024 * 1024)
		return err_set(e, "%s: added_tokens: id %d is too large", t->what, n - 1);
	t->n_ids = n;
	t->id_str = calloc((size_t)n + 1, sizeof *t->id_str);
	t->flags = calloc((size_t)n + 1, 1);
	if (!t->id_str || !t->flags)
		return tok_oom(e); /* freed with the tokenizer */
	for (int32_t id = 0; id < t->bpe.n_ids; id++)
		if ((t->id_str[id] = bpe_id_to_token(&t->bpe, id, NULL)))
			t->flags[id] = TOKF_VALID;
	for (size_t i = 0; i < t->added.n; i++) {
		const struct added_token *a = &t->added.tok[i];
		t->id_str[a->id] = a->content;
		t->flags[a->id] = TOKF_VALID | TOKF_ADDED | (a->special ? TOKF_SPECIAL : 0);
		if (tok_strmap_put(&t->added_map, a->content, a->len, a->id))
			return tok_oom(e);
	}
	return 0;
}

static int load_json(struct tok *t, const json_t *root, struct err *e)
{
	if (!json_is_object(root))
		return err_set(e, "%s: expected a JSON object", t->what);
	const json_t *model = json_object_get(root, "model");
	if (!json_is_object(model))
		return err_set(e, "%s: \"model\" is missing", t->what);
	const char *type;
	if (json_util_str(model, t->what, "model.type", NULL, &type, e) < 0)
		return -1;
	/* files written by old versions omit model.type for BPE */
	if (type && strcmp(type, "BPE"))
		return err_set(e, "%s: model.type: unsupported model '%s' (only BPE)", t->what, type);
	if (!type && !json_object_get(model, "merges"))
		return err_set(e, "%s: model.type is missing", t->what);
	if (bpe_load(&t->bpe, model, t->what, e))
		return -1;
	if (added_load(&t->added, json_object_get(root, "added_tokens"), t->what, e))
		return -1;
	if (norm_load(&t->norm, json_object_get(root, "normalizer"), t->what, "normalizer", e))
		return -1;
	t->norm_identity = norm_is_identity(&t->norm);
	if (pretok_load(&t->pretok, json_object_get(root, "pre_tokenizer"), t->what, "pre_tokenizer", e) ||
	    pretok_byte_level(&t->pretok, &t->byte_level, t->what, e))
		return -1;
	if (t->byte_level)
		bpe_set_byte_level(&t->bpe);
	if (pretok_flatten(&t->pretok, &t->stages, &t->n_stages))
		return tok_oom(e);
	if (tok_build_id_tables(t, e) || post_load(t, json_object_get(root, "post_processor"), e))
		return -1;
	return tok_decoder_load(t, json_object_get(root, "decoder"), e);
}

static bool has_file(const char *dir, const char *name)
{
	char p[4096];
	struct stat st;
	return (size_t)snprintf(p, sizeof p, "%s/%s", dir, name) < sizeof p && !stat(p, &st) && S_ISREG(st.st_mode);
}

enum tok_dir_kind tok_dir_kind(const char *dir)
{
	if (has_file(dir, "tokenizer.json"))
		return TOK_DIR_JSON;
	return has_file(dir, "tiktoken.model") ? TOK_DIR_TIKTOKEN : TOK_DIR_NONE;
}

int tok_load(const char *path, struct tok **out, struct err *e)
{
	*out = NULL;
	struct stat st;
	if (stat(path, &st))
		return err_set(e, "%s: cannot open: %s", path, strerror(errno));
	bool is_dir = S_ISDIR(st.st_mode);
	struct tok *t = calloc(1, sizeof *t);
	if (!t)
		return err_set(e, "%s: out of memory", path);
	pthread_mutex_init(&t->mu, NULL);
	size_t n = strlen(path) + 32;
	t->what = malloc(n);
	if (!t->what) {
		tok_free(t);
		return err_set(e, "%s: out of memory", path);
	}
	int rc;
	size_t pl = strlen(path), tl = strlen("tiktoken.model");
	bool tiktoken_file = !is_dir && pl >= tl && !strcmp(path + pl - tl, "tiktoken.model") &&
			     (pl == tl || path[pl - tl - 1] == '/');
	if ((is_dir && tok_dir_kind(path) == TOK_DIR_TIKTOKEN) || tiktoken_file) {
		/* the rank file's folder holds the tokenizer_config.json that names the specials */
		char *dir = tiktoken_file ? tok_strndup(path, pl - tl) : NULL;
		if (dir && pl > tl)
			dir[pl - tl - 1] = 0;
		const char *d = tiktoken_file ? (dir && *dir ? dir : ".") : path;
		snprintf(t->what, n, "%s/tiktoken.model", d);
		rc = dir || !tiktoken_file ? tok_tiktoken_load(t, d, e) : tok_oom(e);
		free(dir);
	} else {
		snprintf(t->what, n, is_dir ? "%s/tokenizer.json" : "%s", path);
		json_t *root = NULL;
		rc = json_util_load(t->what, &root, e);
		if (!rc)
			rc = load_json(t, root, e);
		json_decref(root);
		if (!rc && is_dir)
			rc = config_override(t, path, e);
	}
	if (rc) {
		tok_free(t);
		return -1;
	}
	*out = t;
	return 0;
}

static void ctx_free(struct tok_ctx *c)
{
	pretok_work_free(&c->pw);
	if (c->lists)
		for (size_t i = 0; c->lists[i].cap != SIZE_MAX; i++)
			free(c->lists[i].v);
	free(c->lists);
	bpe_scratch_free(&c->bs);
	tok_cache_free(&c->words);
	tok_cache_free(&c->pieces);
	strbuf_fini(&c->norm);
	strbuf_fini(&c->tmp);
	free(c->seg);
	free(c->sub);
	tiktoken_scratch_free(&c->tks);
	free(c);
}

void tok_free(struct tok *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_pool; i++)
		ctx_free(t->pool[i]);
	free(t->pool);
	pthread_mutex_destroy(&t->mu);
	tok_decoder_free(t);
	bpe_free(&t->bpe);
	added_free(&t->added);
	tok_strmap_free(&t->added_map);
	norm_free(&t->norm);
	pretok_free(&t->pretok);
	free(t->stages);
	free(t->id_str);
	free(t->flags);
	free(t->prefix.v);
	free(t->suffix.v);
	free(t->what);
	if (t->tk)
		tiktoken_free(t->tk);
	free(t->tk);
	free(t);
}

/* ---- encode ---- */

/* A pooled or new context, or NULL when out of memory. */
static struct tok_ctx *ctx_get(const struct tok *ct)
{
	struct tok *t = (struct tok *)ct; /* the pool is the one mutable part, under mu */
	struct tok_ctx *c = NULL;
	pthread_mutex_lock(&t->mu);
	if (t->n_pool)
		c = t->pool[--t->n_pool];
	pthread_mutex_unlock(&t->mu);
	if (!c)
		c = calloc(1, sizeof *c);
	return c;
}

/* failed: the call failed, and c may hold a sticky out-of-memory buffer; it is freed. */
static void ctx_put(const struct tok *ct, struct tok_ctx *c, bool failed)
{
	struct tok *t = (struct tok *)ct;
	pthread_mutex_lock(&t->mu);
	if (t->n_pool == t->cap_pool && t->n_pool < 16) {
		size_t cap = t->cap_pool ? t->cap_pool * 2 : 8;
		struct tok_ctx **p = realloc(t->pool, cap * sizeof *p);
		if (p)
			t->pool = p, t->cap_pool = cap;
	}
	/* more idle contexts than 16 are freed, and one that finds no room */
	if (!failed && t->n_pool < 16 && t->n_pool < t->cap_pool) {
		t->pool[t->n_pool++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&t->mu);
	if (c)
		ctx_free(c);
}

/* Pieces up to this length are cached with their ids. */
#define CACHE_MAX_PIECE 64

/* Runs pre-tokenizer stages depth..n_stages on one piece, then BPE. Every stage works on
 * each piece on its own, so the ids of a piece depend only on its bytes (and, for
 * Metaspace's "first" scheme, on whether it starts the text): the first short piece on
 * the way down (often a whole short line) and every final word are looked up in the
 * cache, and stored after a miss. */
static int encode_piece(const struct tok *t, struct tok_ctx *c, size_t depth, struct pretok_piece pc,
			bool cached_above, struct tok_ids *out, struct err *e)
{
	const char *s = c->pw.buf.p + pc.off;
	while (depth < t->n_stages && pretok_passes(t->stages[depth], s, pc.len))
		depth++;
	bool final = depth == t->n_stages;
	bool use_cache = (!cached_above || final) && pc.len <= CACHE_MAX_PIECE;
	/* words and larger pieces (lines) in separate caches: unique lines must not push out
	 * the words */
	struct tok_cache *cache = final ? &c->words : &c->pieces;
	uint32_t tag = (uint32_t)depth * 2 + pc.at_start;
	if (use_cache && tok_cache_get(cache, tag, s, pc.len, out))
		return out->oom ? tok_oom(e) : 0;
	size_t before = out->n;
	if (final) {
		if (bpe_encode_word(&t->bpe, s, pc.len, &c->bs, out))
			return tok_oom(e);
	} else {
		struct pretok_list *l = &c->lists[depth];
		l->n = 0;
		int rc = pretok_apply(t->stages[depth], &c->pw, pc, l, e);
		for (size_t i = 0; i < l->n && !rc; i++)
			rc = encode_piece(t, c, depth + 1, l->v[i], cached_above || use_cache, out, e);
		if (rc)
			return rc;
	}
	if (use_cache && tok_cache_put(cache, tag, c->pw.buf.p + pc.off, pc.len, out->v + before, out->n - before))
		return tok_oom(e);
	return 0;
}

/* Text between added tokens: normalized text → normalized added tokens → pre-tokens → BPE. */
static int encode_text(const struct tok *t, struct tok_ctx *c, const char *s, size_t n, bool at_start,
		       struct tok_ids *out, struct err *e)
{
	if (!c->pw.rx.md && tok_regex_ctx_init(&c->pw.rx))
		return tok_oom(e);
	if (!c->lists) { /* the extra entry marks the end for ctx_free */
		c->lists = calloc(t->n_stages + 1, sizeof *c->lists);
		if (!c->lists)
			return tok_oom(e);
		c->lists[t->n_stages].cap = SIZE_MAX;
	}
	if (!t->norm_identity) {
		c->norm.n = 0;
		if (strbuf_put(&c->norm, s, n))
			return tok_oom(e);
		int rc = norm_apply(&t->norm, &c->norm, &c->tmp, &c->pw.rx, e);
		if (rc)
			return rc;
		s = c->norm.p, n = c->norm.n;
	}
	c->n_sub = 0;
	if (added_split(&t->added, true, s, n, &c->sub, &c->n_sub, &c->cap_sub))
		return tok_oom(e);
	for (size_t i = 0; i < c->n_sub; i++) {
		struct added_piece sp = c->sub[i];
		if (sp.id >= 0) {
			if (tok_ids_push(out, sp.id))
				return tok_oom(e);
			continue;
		}
		c->pw.buf.n = 0;
		if (strbuf_put(&c->pw.buf, s + sp.off, sp.len))
			return tok_oom(e);
		struct pretok_piece pc = {0, sp.len, at_start && sp.off == 0};
		int rc = encode_piece(t, c, 0, pc, false, out, e);
		if (rc)
			return rc;
	}
	return 0;
}

int tok_encode(const struct tok *t, const char *text, size_t len, bool add_special_tokens, int32_t **ids, size_t *n,
	       struct err *e)
{
	*ids = NULL;
	*n = 0;
	size_t bad;
	if (len && !text)
		return err_set(e, "tokenize: text is NULL");
	if (!utf8_valid(text, len, &bad))
		return err_set(e, "invalid utf-8 at byte %zu of the text", bad);
	struct tok_ids out = {0};
	if (add_special_tokens && tok_ids_add(&out, t->prefix.v, t->prefix.n))
		return tok_oom(e);
	struct tok_ctx *c = ctx_get(t);
	if (!c) {
		free(out.v);
		return tok_oom(e);
	}
	int rc = 0;
	if (t->tk) {
		rc = tiktoken_encode(t->tk, &t->added, &c->tks, text, len, &out, e);
		c->n_seg = 0;
	} else {
		c->n_seg = 0;
		rc = added_split(&t->added, false, text, len, &c->seg, &c->n_seg, &c->cap_seg) ? tok_oom(e) : 0;
	}
	for (size_t i = 0; i < c->n_seg && !rc; i++) {
		struct added_piece sg = c->seg[i];
		if (sg.id >= 0)
			rc = tok_ids_push(&out, sg.id) ? tok_oom(e) : 0;
		else
			rc = encode_text(t, c, text + sg.off, sg.len, sg.off == 0, &out, e);
	}
	ctx_put(t, c, rc != 0);
	if (!rc && add_special_tokens && tok_ids_add(&out, t->suffix.v, t->suffix.n))
		rc = tok_oom(e);
	if (rc) {
		free(out.v);
		return rc;
	}
	*ids = out.v;
	*n = out.n;
	return 0;
}

/* ---- lookups ---- */

int32_t tok_vocab_size(const struct tok *t) { return t->n_ids; }

int32_t tok_token_to_id(const struct tok *t, const char *token)
{
	size_t n = strlen(token);
	int32_t id = tok_strmap_get(&t->added_map, token, n);
	return id >= 0 ? id : tok_strmap_get(&t->bpe.vocab, token, n);
}

const char *tok_id_to_token(const struct tok *t, int32_t id)
{
	return (id >= 0 && id < t->n_ids) ? t->id_str[id] : NULL;
}

bool tok_is_special(const struct tok *t, int32_t id)
{
	return id >= 0 && id < t->n_ids && (t->flags[id] & TOKF_SPECIAL);
}

int32_t tok_bos_id(const struct tok *t) { return t->prefix.n ? t->prefix.v[0] : -1; }

int32_t tok_eos_id(const struct tok *t) { return t->suffix.n ? t->suffix.v[t->suffix.n - 1] : -1; }

void tok_resolve_special_ids(const struct tok *t, struct hf_config *cfg)
{
	struct {
		const char *tok;
		int32_t *id;
	} m[4] = {{cfg->bos_token, &cfg->bos_token_id},
		  {cfg->eos_token, &cfg->eos_token_id},
		  {cfg->pad_token, &cfg->pad_token_id},
		  {cfg->unk_token, &cfg->unk_token_id}};
	for (int i = 0; i < 4; i++)
		if (m[i].tok && *m[i].id < 0)
			*m[i].id = tok_token_to_id(t, m[i].tok);
}
