/* Chat templates: compile once (lexer + parser into a pool the template owns), render per
 * request (values and scopes in a per-render pool, freed at the end). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/chat_template.h"
#include "tok/chat_dsv32.h"
#include "tok/chat_history.h"
#include "tok/chat_dsv4.h"
#include "tok/tokenizer.h"
#include "jinja/jinja.h"

struct chat_template {
	struct jpool pool;
	struct jnode *root;
	const char *native; /* NULL: Jinja (root); else the native encoder's name */
	bool sort_tools;    /* Kimi's tokenizer: the tools' keys sorted, deeply, before rendering */
	enum chat_content_format content_format; /* detected as vLLM does */
};

int chat_template_compile(const char *source, struct chat_template **out, struct err *e)
{
	*out = NULL;
	if (!source)
		return err_set(e, "chat template: no template text");
	struct chat_template *t = calloc(1, sizeof *t);
	if (!t)
		return err_set(e, "chat template: out of memory");
	jpool_init(&t->pool, 0);
	struct jtoken *toks;
	size_t n;
	if (jinja_lex(source, &t->pool, &toks, &n, e) < 0 || jinja_parse(toks, n, &t->pool, &t->root, e) < 0) {
		chat_template_free(t);
		return -1;
	}
	t->content_format = chat_content_format_detect(t->root);
	*out = t;
	return 0;
}

int chat_template_open(const char *source, const char *model_dir, struct chat_template **out, struct err *e)
{
	*out = NULL;
	/* tokenization_kimi.py's apply_chat_template sorts the tools before the template sees them
	 * (deep_sort_dict), and vLLM renders through it */
	bool kimi = model_dir && tok_dir_kind(model_dir) == TOK_DIR_TIKTOKEN;
	if (source) {
		if (chat_template_compile(source, out, e) < 0)
			return -1;
		(*out)->sort_tools = kimi;
		return 0;
	}
	const char *native = !model_dir                        ? NULL
			     : chat_dsv32_for_model(model_dir) ? "deepseek_v32"
			     : chat_dsv4_for_model(model_dir)  ? "deepseek_v4"
							       : NULL;
	if (!native)
		return 0;
	struct chat_template *t = calloc(1, sizeof *t);
	if (!t)
		return err_set(e, "chat template: out of memory");
	jpool_init(&t->pool, 0);
	t->native = native;
	t->content_format = CHAT_CONTENT_STRING; /* vLLM: no Jinja text to detect from */
	*out = t;
	return 0;
}

const char *chat_template_native(const struct chat_template *tpl) { return tpl ? tpl->native : NULL; }

enum chat_content_format chat_template_content_format(const struct chat_template *tpl)
{
	return tpl ? tpl->content_format : CHAT_CONTENT_STRING;
}

void chat_template_free(struct chat_template *tpl)
{
	if (!tpl)
		return;
	jpool_fini(&tpl->pool);
	free(tpl);
}

static int from_json(struct jctx *c, const json_t *j, int depth, struct jval *out)
{
	if (depth > 4 * JINJA_MAX_DEPTH)
		return jerr(c, "input JSON nested too deeply");
	switch (json_typeof(j)) {
	case JSON_NULL: *out = jv_none(); return 0;
	case JSON_TRUE: *out = jv_bool(true); return 0;
	case JSON_FALSE: *out = jv_bool(false); return 0;
	case JSON_INTEGER: *out = jv_int((long long)json_integer_value(j)); return 0;
	case JSON_REAL: *out = jv_float(json_real_value(j)); return 0;
	case JSON_STRING: {
		char *s = jpool_strdup(c->pool, json_string_value(j), json_string_length(j));
		if (!s)
			return jerr(c, "memory limit exceeded");
		*out = jv_str(s, json_string_length(j));
		return 0;
	}
	case JSON_ARRAY: {
		size_t n = json_array_size(j);
		*out = jv_list(c->pool, n);
		if (out->k != JV_LIST)
			return jerr(c, "memory limit exceeded");
		for (size_t i = 0; i < n; i++)
			if (from_json(c, json_array_get(j, i), depth + 1, &out->u.l->v[out->u.l->n++]) < 0)
				return -1;
		return 0;
	}
	case JSON_OBJECT: {
		*out = jv_dict(c->pool, json_object_size(j));
		if (out->k != JV_DICT)
			return jerr(c, "memory limit exceeded");
		const char *k;
		json_t *v;
		json_object_foreach((json_t *)j, k, v)
		{
			struct jval jv;
			size_t kn = strlen(k);
			char *ks = jpool_strdup(c->pool, k, kn);
			if (!ks || from_json(c, v, depth + 1, &jv) < 0)
				return ks ? -1 : jerr(c, "memory limit exceeded");
			/* keys are unique in a JSON object: append without the lookup */
			struct jdict *d = out->u.d;
			d->keys[d->n] = jv_str(ks, kn);
			d->vals[d->n++] = jv;
		}
		return 0;
	}
	}
	return jerr(c, "unsupported JSON value");
}

int jinja_from_json(struct jctx *c, const struct json_t *j, struct jval *out) { return from_json(c, j, 0, out); }

/* messages -> list of dicts; when `flatten`, content given as [{type:"text", text}] parts is
 * joined into one string. */
static int convert_messages(struct jctx *c, const json_t *messages, bool flatten, struct jval *out)
{
	if (!json_is_array(messages))
		return err_set(c->e, "chat template: messages must be an array");
	if (from_json(c, messages, 0, out) < 0)
		return -1;
	for (size_t i = 0; i < out->u.l->n; i++) {
		struct jval *m = &out->u.l->v[i];
		if (m->k != JV_DICT)
			return err_set(c->e, "chat template: messages[%zu] must be an object", i);
		struct jval *content = jdict_get(m->u.d, "content", 7);
		if (!flatten || !content || content->k != JV_LIST)
			continue;
		struct strbuf b = {.limit = JINJA_MAX_OUT};
		for (size_t k = 0; k < content->u.l->n; k++) {
			struct jval *part = &content->u.l->v[k];
			struct jval *type = part->k == JV_DICT ? jdict_get(part->u.d, "type", 4) : NULL;
			struct jval *text = part->k == JV_DICT ? jdict_get(part->u.d, "text", 4) : NULL;
			if (!type || type->k != JV_STR || strcmp(type->u.s.p, "text") || !text || text->k != JV_STR) {
				free(b.p);
				return err_set(c->e,
					       "chat template: messages[%zu].content[%zu]: only {\"type\": \"text\", "
					       "\"text\": ...} parts are supported",
					       i, k);
			}
			if (k)
				strbuf_putc(&b, '\n');
			strbuf_put(&b, text->u.s.p, text->u.s.n);
		}
		if (jinja_pool_str(c, &b, content) < 0)
			return -1;
	}
	return 0;
}

/* kwargs[key] as Python's bool(); absent: dflt */
static int kwarg_truthy(struct jctx *c, const json_t *kwargs, const char *key, bool dflt, bool *out)
{
	const json_t *j = json_object_get(kwargs, key);
	struct jval v;
	if (j && from_json(c, j, 0, &v) < 0)
		return -1;
	*out = j ? jv_truthy(&v) : dflt;
	return 0;
}

/* DeepSeek's encoders with vLLM's switches: the kwargs' `tools`, thinking mode when `thinking`
 * or `enable_thinking` is true (Python's bool()); V4 also reads `reasoning_effort` (a string)
 * and `drop_thinking` */
static int native_render(const char *native, struct jctx *c, struct jval *msgs, const json_t *kwargs)
{
	struct jval tools = jv_none();
	bool thinking, enable_thinking, drop;
	const json_t *j = json_object_get(kwargs, "tools");
	if ((j && from_json(c, j, 0, &tools) < 0) || kwarg_truthy(c, kwargs, "thinking", false, &thinking) < 0 ||
	    kwarg_truthy(c, kwargs, "enable_thinking", false, &enable_thinking) < 0 ||
	    kwarg_truthy(c, kwargs, "drop_thinking", true, &drop) < 0)
		return -1;
	if (!strcmp(native, "deepseek_v32"))
		return chat_dsv32_encode(c, msgs, &tools, thinking || enable_thinking);
	struct chat_dsv4_opts o = {.thinking = thinking || enable_thinking,
				   .keep_thinking = !drop,
				   .reasoning_effort = json_string_value(json_object_get(kwargs, "reasoning_effort"))};
	return chat_dsv4_encode(c, msgs, &tools, &o);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A copy of j with every object's keys in sorted order (Python's sorted() on str keys is
 * code point order, which is UTF-8 byte order), or NULL when out of memory. */
static json_t *deep_sorted(const json_t *j, int depth)
{
	if (depth > 4 * JINJA_MAX_DEPTH)
		return NULL;
	if (json_is_array(j)) {
		json_t *a = json_array();
		for (size_t i = 0; a && i < json_array_size(j); i++)
			if (json_array_append_new(a, deep_sorted(json_array_get(j, i), depth + 1))) {
				json_decref(a);
				a = NULL;
			}
		return a;
	}
	if (!json_is_object(j))
		return json_incref((json_t *)j);
	size_t n = json_object_size(j), k = 0;
	const char **keys = malloc((n ? n : 1) * sizeof *keys);
	json_t *o = keys ? json_object() : NULL;
	const char *key;
	json_t *v;
	if (o) {
		json_object_foreach((json_t *)j, key, v) keys[k++] = key;
		qsort(keys, n, sizeof *keys, cmp_str);
		for (k = 0; k < n && o; k++)
			if (json_object_set_new(o, keys[k], deep_sorted(json_object_get(j, keys[k]), depth + 1))) {
				json_decref(o);
				o = NULL;
			}
	}
	free(keys);
	return o;
}

static int render(const struct chat_template *tpl, const json_t *messages, bool flatten, bool add_generation_prompt,
		  const char *bos_token, const char *eos_token, const json_t *kwargs, char **out_text, struct err *e)
{
	*out_text = NULL;
	if (kwargs && !json_is_object(kwargs))
		return err_set(e, "chat template: kwargs must be an object");
	json_t *sorted_kwargs = NULL;
	if (tpl->sort_tools && json_object_get(kwargs, "tools")) {
		json_t *tools = deep_sorted(json_object_get(kwargs, "tools"), 0);
		sorted_kwargs = tools ? json_copy((json_t *)kwargs) : NULL;
		if (!sorted_kwargs || json_object_set_new(sorted_kwargs, "tools", tools)) {
			json_decref(sorted_kwargs);
			return err_set(e, "chat template: out of memory (or tools nested too deeply)");
		}
		kwargs = sorted_kwargs;
	}
	struct jpool pool;
	jpool_init(&pool, JINJA_MAX_POOL);
	struct strbuf out = {.limit = JINJA_MAX_OUT};
	struct jctx c = {.pool = &pool, .out = &out, .e = e, .line = 0};
	int r = -1;
	struct jval msgs;
	c.root = c.cur = jscope_new(&c, NULL);
	if (!c.root) {
		err_set(e, "chat template: out of memory");
		goto done;
	}
	if (convert_messages(&c, messages, flatten, &msgs) < 0)
		goto done;
	jscope_set(&c, c.root, "messages", msgs);
	jscope_set(&c, c.root, "add_generation_prompt", jv_bool(add_generation_prompt));
	jscope_set(&c, c.root, "tools", jv_none());
	jscope_set(&c, c.root, "documents", jv_none());
	if (bos_token)
		jscope_set(&c, c.root, "bos_token", jv_cstr(bos_token));
	if (eos_token)
		jscope_set(&c, c.root, "eos_token", jv_cstr(eos_token));
	if (kwargs) {
		const char *k;
		json_t *v;
		json_object_foreach((json_t *)kwargs, k, v)
		{
			struct jval jv;
			char *ks = jpool_strdup(&pool, k, strlen(k));
			if (!ks || from_json(&c, v, 0, &jv) < 0) {
				if (!ks)
					err_set(e, "chat template: out of memory");
				goto done;
			}
			jscope_set(&c, c.root, ks, jv);
		}
	}
	if (pool.over) {
		err_set(e, "chat template: out of memory");
		goto done;
	}
	if (tpl->native ? native_render(tpl->native, &c, &msgs, kwargs) < 0 : jinja_exec(&c, tpl->root) < 0)
		goto done;
	if (out.oom) {
		err_set(e, "chat template: output size limit exceeded");
		goto done;
	}
	*out_text = out.p ? out.p : strdup("");
	out.p = NULL;
	r = *out_text ? 0 : err_set(e, "chat template: out of memory");
done:
	free(out.p);
	jpool_fini(&pool);
	json_decref(sorted_kwargs);
	return r;
}

int chat_template_render(const struct chat_template *tpl, const json_t *messages, bool add_generation_prompt,
			 const char *bos_token, const char *eos_token, const json_t *kwargs, char **out_text,
			 struct err *e)
{
	return render(tpl, messages, true, add_generation_prompt, bos_token, eos_token, kwargs, out_text, e);
}

int chat_template_render_vllm(const struct chat_template *tpl, const json_t *messages, enum chat_content_format format,
			      bool add_generation_prompt, const char *bos_token, const char *eos_token,
			      const json_t *kwargs, char **out_text, struct err *e)
{
	*out_text = NULL;
	if (format == CHAT_CONTENT_AUTO)
		format = chat_template_content_format(tpl);
	int r = -1;
	bool decoded = false;
	/* decoded arguments first, as vLLM; a template that then fails (DeepSeek's concatenate
	 * `arguments` as a string: vLLM answers 400) is given them as sent, as transformers does */
	for (int keep = 0; keep < 2 && r < 0; keep++) {
		json_t *history;
		if (chat_history_vllm(messages, format, keep, &history, &decoded, e) < 0) {
			char msg[sizeof e->msg];
			snprintf(msg, sizeof msg, "%s", e->msg);
			return err_set(e, "chat template: %s", msg);
		}
		r = render(tpl, history, false, add_generation_prompt, bos_token, eos_token, kwargs, out_text, e);
		json_decref(history);
		if (!decoded)
			break;
	}
	return r;
}
