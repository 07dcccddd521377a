/* tokenizer_config.json + chat_template.jinja + generation_config.json. */
#include "io/hf_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "io/json_util.h"

static void cfg_init(struct hf_config *c)
{
	memset(c, 0, sizeof *c);
	c->bos_token_id = c->eos_token_id = c->pad_token_id = c->unk_token_id = -1;
	c->gen_bos_token_id = c->gen_pad_token_id = -1;
}

/* A malloc'd copy of the JSON string v (its bytes, NULs included); -1 with e set when out of
 * memory. */
static int dup_string(const json_t *v, const char *what, char **out, struct err *e)
{
	size_t n = json_string_length(v);
	char *p = malloc(n + 1);
	if (!p)
		return err_set(e, "%s: out of memory", what);
	memcpy(p, json_string_value(v), n);
	p[n] = 0;
	*out = p;
	return 0;
}

/* A special token: "text", {"content": "text", ...} (AddedToken), or null. */
static int token_str(const json_t *o, const char *what, const char *key, char **out, struct err *e)
{
	const json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (json_is_object(v))
		v = json_object_get(v, "content");
	if (!json_is_string(v))
		return json_util_bad(e, what, key, json_object_get(o, key), "bad",
				     "expected a string or an AddedToken object");
	return dup_string(v, what, out, e);
}

static int id_value(const json_t *v, int32_t *out) { return json_util_id(v, out) ? 0 : -1; }

static int chat_template(const json_t *o, const char *what, struct hf_config *c, struct err *e)
{
	const json_t *v = json_object_get(o, "chat_template");
	if (!v || json_is_null(v))
		return 0;
	if (json_is_string(v)) {
		return dup_string(v, what, &c->chat_template, e);
	}
	if (!json_is_array(v))
		return json_util_bad(e, what, "chat_template", v, "bad",
				     "expected a string or a list of {name, template}");
	size_t i;
	json_t *it;
	json_array_foreach(v, i, it)
	{
		const json_t *name = json_object_get(it, "name"), *tpl = json_object_get(it, "template");
		if (!json_is_string(name) || !json_is_string(tpl))
			return err_set(e,
				       "%s: key \"chat_template\"[%zu]: expected {\"name\": ..., "
				       "\"template\": ...}",
				       what, i);
		char **dst = !strcmp(json_string_value(name), "default")    ? &c->chat_template
			     : !strcmp(json_string_value(name), "tool_use") ? &c->chat_template_tool_use
									    : NULL;
		if (dst && !*dst && dup_string(tpl, what, dst, e) < 0)
			return -1;
	}
	return 0;
}

static int parse_tokenizer_config(const json_t *o, const char *what, struct hf_config *c, struct err *e)
{
	if (!json_is_object(o))
		return err_set(e, "%s: expected a JSON object", what);
	int r;
	if ((r = json_util_bool(o, what, "add_bos_token", false, &c->add_bos_token, e)) < 0)
		return -1;
	c->has_add_bos_token = r == 0;
	if ((r = json_util_bool(o, what, "add_eos_token", false, &c->add_eos_token, e)) < 0)
		return -1;
	c->has_add_eos_token = r == 0;
	if (token_str(o, what, "bos_token", &c->bos_token, e) || token_str(o, what, "eos_token", &c->eos_token, e) ||
	    token_str(o, what, "pad_token", &c->pad_token, e) || token_str(o, what, "unk_token", &c->unk_token, e) ||
	    chat_template(o, what, c, e))
		return -1;
	double mml;
	if ((r = json_util_num(o, what, "model_max_length", 0, &mml, e)) < 0)
		return -1;
	if (r == 0 && mml >= 1 && mml < 1e18) {
		c->has_model_max_length = true;
		c->model_max_length = (long long)mml;
	}
	if (json_util_bool(o, what, "clean_up_tokenization_spaces", false, &c->clean_up_tokenization_spaces, e) < 0)
		return -1;
	const char *cls;
	if (json_util_str(o, what, "tokenizer_class", NULL, &cls, e) < 0)
		return -1;
	if (cls && !(c->tokenizer_class = strdup(cls)))
		return err_set(e, "%s: out of memory", what);
	/* "added_tokens_decoder": {"100000": {"content": "<｜begin▁of▁sentence｜>", ...}} */
	const json_t *atd = json_object_get(o, "added_tokens_decoder");
	const char *k;
	json_t *v;
	if (json_is_object(atd))
		json_object_foreach((json_t *)atd, k, v)
		{
			const json_t *content = json_object_get(v, "content");
			char *end;
			errno = 0;
			long id = strtol(k, &end, 10);
			if (!json_is_string(content) || *end || errno || id < 0 || id >= INT32_MAX)
				continue;
			const char *s = json_string_value(content);
			struct {
				const char *tok;
				int32_t *id;
			} m[4] = {{c->bos_token, &c->bos_token_id},
				  {c->eos_token, &c->eos_token_id},
				  {c->pad_token, &c->pad_token_id},
				  {c->unk_token, &c->unk_token_id}};
			for (int i = 0; i < 4; i++)
				if (m[i].tok && !strcmp(m[i].tok, s))
					*m[i].id = (int32_t)id;
		}
	return 0;
}

static int parse_generation_config(const json_t *o, const char *what, struct hf_config *c, struct err *e)
{
	if (!json_is_object(o))
		return err_set(e, "%s: expected a JSON object", what);
	c->has_generation_config = true;
	const json_t *v = json_object_get(o, "bos_token_id");
	if (v && !json_is_null(v) && id_value(v, &c->gen_bos_token_id))
		return json_util_bad(e, what, "bos_token_id", v, "bad", "expected a token id");
	v = json_object_get(o, "pad_token_id");
	if (v && !json_is_null(v) && id_value(v, &c->gen_pad_token_id))
		return json_util_bad(e, what, "pad_token_id", v, "bad", "expected a token id");
	v = json_object_get(o, "eos_token_id");
	if (json_is_array(v)) {
		if (json_array_size(v) > HF_MAX_EOS)
			return json_util_bad(e, what, "eos_token_id", v, "bad", "at most %d ids", HF_MAX_EOS);
		for (size_t i = 0; i < json_array_size(v); i++)
			if (id_value(json_array_get(v, i), &c->gen_eos_token_ids[c->n_gen_eos++]))
				return json_util_bad(e, what, "eos_token_id", v, "bad", "expected token ids");
	} else if (v && !json_is_null(v)) {
		if (id_value(v, &c->gen_eos_token_ids[0]))
			return json_util_bad(e, what, "eos_token_id", v, "bad", "expected a token id or a list");
		c->n_gen_eos = 1;
	}
	long long iv;
	int r;
	if ((r = json_util_bool(o, what, "do_sample", false, &c->do_sample, e)) < 0)
		return -1;
	c->has_do_sample = r == 0;
	if ((r = json_util_num(o, what, "temperature", 1.0, &c->temperature, e)) < 0)
		return -1;
	c->has_temperature = r == 0;
	if ((r = json_util_num(o, what, "top_p", 1.0, &c->top_p, e)) < 0)
		return -1;
	c->has_top_p = r == 0;
	if ((r = json_util_num(o, what, "min_p", 0.0, &c->min_p, e)) < 0)
		return -1;
	c->has_min_p = r == 0;
	if ((r = json_util_num(o, what, "repetition_penalty", 1.0, &c->repetition_penalty, e)) < 0)
		return -1;
	c->has_repetition_penalty = r == 0;
	if ((r = json_util_int(o, what, "top_k", 0, &iv, e)) < 0)
		return -1;
	if (r == 0 && (iv < -1 || iv > INT32_MAX))
		return json_util_bad(e, what, "top_k", json_object_get(o, "top_k"), "bad", "out of range");
	c->has_top_k = r == 0;
	c->top_k = (int)iv;
	if ((r = json_util_int(o, what, "max_new_tokens", 0, &iv, e)) < 0)
		return -1;
	if (r == 0 && (iv < 0 || iv > INT32_MAX))
		return json_util_bad(e, what, "max_new_tokens", json_object_get(o, "max_new_tokens"), "bad",
				     "out of range");
	c->has_max_new_tokens = r == 0;
	c->max_new_tokens = (int)iv;
	return 0;
}

/* tokenizer_config.json often has "model_max_length": 1000000000000000019884624838656, which
 * jansson refuses as an integer: then read every number as a real (nothing else in this
 * file is an integer we need). */
static int parse_tc_text(const char *text, size_t len, const char *what, json_t **out, struct err *e)
{
	json_error_t je;
	*out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!*out && strstr(je.text, "too big integer"))
		*out = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
	if (!*out)
		return err_set(e, "%s: line %d column %d: %s", what, je.line, je.column, je.text);
	return 0;
}

int hf_config_parse(const char *tokenizer_config_json, const char *generation_config_json, struct hf_config *cfg,
		    struct err *e)
{
	cfg_init(cfg);
	json_t *j = NULL;
	int rc = 0;
	if (tokenizer_config_json) {
		rc = parse_tc_text(tokenizer_config_json, strlen(tokenizer_config_json), "tokenizer_config.json", &j,
				   e);
		if (!rc)
			rc = parse_tokenizer_config(j, "tokenizer_config.json", cfg, e);
		json_decref(j);
	}
	if (!rc && generation_config_json) {
		rc = json_util_parse(generation_config_json, strlen(generation_config_json), "generation_config.json",
				     &j, e);
		if (!rc)
			rc = parse_generation_config(j, "generation_config.json", cfg, e);
		json_decref(j);
	}
	if (rc)
		hf_config_free(cfg);
	return rc;
}

static bool file_exists(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f)
		fclose(f);
	return f != NULL;
}

int hf_config_load(const char *dir, struct hf_config *cfg, struct err *e)
{
	cfg_init(cfg);
	char path[4096];
	json_t *j = NULL;
	snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
	if (file_exists(path)) {
		size_t len;
		char *text;
		if (file_read_all(path, &text, &len, e))
			goto fail;
		int rc = parse_tc_text(text, len, path, &j, e);
		free(text);
		if (rc)
			goto fail;
		rc = parse_tokenizer_config(j, path, cfg, e);
		json_decref(j);
		if (rc)
			goto fail;
	}
	snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
	if (!cfg->chat_template && file_exists(path)) {
		if (file_read_all(path, &cfg->chat_template, NULL, e))
			goto fail;
	}
	snprintf(path, sizeof path, "%s/generation_config.json", dir);
	if (file_exists(path)) {
		if (json_util_load(path, &j, e))
			goto fail;
		int rc = parse_generation_config(j, path, cfg, e);
		json_decref(j);
		if (rc)
			goto fail;
	}
	return 0;
fail:
	hf_config_free(cfg);
	return -1;
}

void hf_config_free(struct hf_config *cfg)
{
	free(cfg->bos_token);
	free(cfg->eos_token);
	free(cfg->pad_token);
	free(cfg->unk_token);
	free(cfg->chat_template);
	free(cfg->chat_template_tool_use);
	free(cfg->tokenizer_class);
	cfg_init(cfg);
}
