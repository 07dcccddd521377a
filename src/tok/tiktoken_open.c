/* A checkpoint with Kimi's tokenizer (tiktoken.model + tokenizer_config.json, no
 * tokenizer.json) as a struct tok: the rank file's byte-level vocab, the 256 reserved
 * special ids after the ranks as added tokens, a ByteLevel decoder. Only encoding takes its
 * own path (tiktoken.c); lookups, decoding and the detokenizer are the tokenizer.json ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "tok/tok_internal.h"

/* tokenization_kimi.py's num_reserved_special_tokens */
#define KIMI_RESERVED_SPECIALS 256

/* The added_tokens array (tokenizer.json's shape) of the reserved ids [base, base + 256):
 * tokenizer_config.json's added_tokens_decoder names them, the rest are
 * "<|reserved_token_ID|>" as in tokenization_kimi.py. "special" is the entry's own flag (what
 * skip_special_tokens drops); every one of them is recognised in the text. */
static int specials_json(const char *cfg_path, int32_t base, json_t **out, struct err *e)
{
	*out = NULL;
	json_t *cfg = NULL;
	struct stat st;
	if (!stat(cfg_path, &st)) {
		char *text;
		size_t len;
		if (file_read_all(cfg_path, &text, &len, e))
			return -1;
		/* HF's "model_max_length": 1000000000000000019884624838656 is too big for jansson's
		 * integers; the ids here are object keys, so numbers may all be reals */
		json_error_t je;
		cfg = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
		free(text);
		if (!cfg)
			return err_set(e, "%s: line %d column %d: %s", cfg_path, je.line, je.column, je.text);
	}
	const json_t *atd = json_object_get(cfg, "added_tokens_decoder");
	if (atd && !json_is_object(atd)) {
		json_decref(cfg);
		return err_set(e, "%s: added_tokens_decoder: expected an object of id → token", cfg_path);
	}
	const json_t *entry[KIMI_RESERVED_SPECIALS] = {0};
	const char *k;
	json_t *v;
	int rc = 0;
	json_object_foreach((json_t *)atd, k, v)
	{
		char *end;
		long id = strtol(k, &end, 10);
		if (!*k || *end || id < base || id >= (long)base + KIMI_RESERVED_SPECIALS) {
			rc = err_set(
				e,
				"%s: added_tokens_decoder[\"%s\"]: not a special id of tiktoken.model (its %d ranks "
				"are followed by ids %d..%d)",
				cfg_path, k, base, base, base + KIMI_RESERVED_SPECIALS - 1);
			break;
		}
		if (!json_is_object(v) || !json_is_string(json_object_get(v, "content")) ||
		    !json_string_length(json_object_get(v, "content"))) {
			rc = err_set(e, "%s: added_tokens_decoder[\"%s\"]: expected {\"content\": \"...\", ...}",
				     cfg_path, k);
			break;
		}
		entry[id - base] = v;
	}
	json_t *arr = rc ? NULL : json_array();
	for (int i = 0; arr && i < KIMI_RESERVED_SPECIALS; i++) {
		char name[48];
		snprintf(name, sizeof name, "<|reserved_token_%d|>", base + i);
		const json_t *sp = entry[i] ? json_object_get(entry[i], "special") : NULL;
		json_t *o = json_pack("{s:i, s:s, s:b, s:b}", "id", base + i, "content",
				      entry[i] ? json_string_value(json_object_get(entry[i], "content")) : name,
				      "special", json_is_true(sp), "normalized", 0);
		if (!o || json_array_append_new(arr, o)) {
			json_decref(arr);
			arr = NULL;
		}
	}
	json_decref(cfg);
	if (rc)
		return rc;
	if (!arr)
		return tok_oom(e);
	*out = arr;
	return 0;
}

int tok_tiktoken_load(struct tok *t, const char *dir, struct err *e)
{
	char *text = NULL;
	size_t n = 0;
	if (file_read_all(t->what, &text, &n, e))
		return -1;
	t->tk = calloc(1, sizeof *t->tk);
	if (!t->tk) {
		free(text);
		return tok_oom(e);
	}
	int rc = tiktoken_parse(t->tk, text, n, t->what, e);
	free(text);
	if (rc) {
		free(t->tk);
		t->tk = NULL;
		return -1;
	}
	if (t->tk->max_rank >= t->tk->n_ranks)
		return err_set(e,
			       "%s: the ranks are not 0..%d (rank %d): Kimi's special ids follow the ranks and "
			       "would take ranked ids",
			       t->what, t->tk->n_ranks - 1, t->tk->max_rank);
	if (tiktoken_vocab(t->tk, &t->bpe, e))
		return -1;
	t->byte_level = true;
	t->norm_identity = true;
	size_t cl = strlen(dir) + 32;
	char *cfg_path = malloc(cl);
	if (!cfg_path)
		return tok_oom(e);
	snprintf(cfg_path, cl, "%s/tokenizer_config.json", dir);
	json_t *specials;
	rc = specials_json(cfg_path, t->tk->n_ranks, &specials, e);
	if (!rc)
		rc = added_load(&t->added, specials, cfg_path, e);
	free(cfg_path);
	json_decref(specials);
	if (rc || tok_build_id_tables(t, e))
		return -1;
	json_t *dec = json_pack("{s:s}", "type", "ByteLevel");
	if (!dec)
		return tok_oom(e);
	rc = tok_decoder_load(t, dec, e);
	json_decref(dec);
	return rc;
}
