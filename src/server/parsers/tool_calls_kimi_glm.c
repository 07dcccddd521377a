/* Kimi K2's and GLM-4.7/5's tool-call formats (tool_calls.h), read as vLLM's KimiK2ToolParser
 * and Glm47MoeModelToolParser read them (their regular expressions written out as scans). */
#include "server/parsers/tool_calls_kimi_glm.h"

#include <stdlib.h>
#include <string.h>

#include "base/pyjson.h"
#include "base/strbuf.h"
#include "base/utf8.h"
#include "server/parsers/jstr.h"
#include "server/parsers/pyliteral.h"

#define LEN(s) (sizeof(s) - 1)

static const char *find(const char *p, const char *end, const char *s, size_t n)
{
	return end > p ? memmem(p, (size_t)(end - p), s, n) : NULL;
}

static bool starts(const char *p, const char *end, const char *s, size_t n)
{
	return (size_t)(end - p) >= n && !memcmp(p, s, n);
}

/* Python's \s on the ASCII range (the model's whitespace) */
static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static const char *skip_space(const char *p, const char *end)
{
	while (p < end && is_space(*p))
		p++;
	return p;
}

static const char *trim_end(const char *p, const char *end)
{
	while (end > p && is_space(end[-1]))
		end--;
	return end;
}

static int append_call(json_t *calls, json_t *id, const char *name, size_t name_len, json_t *args)
{
	json_t *call = id && args ? json_pack("{s:o, s:s, s:{s:o, s:o}}", "id", id, "type", "function", "function",
					      "name", jstr_new(name, name_len), "arguments", args)
				  : NULL;
	if (!call) {
		json_decref(id);
		json_decref(args);
		return -1;
	}
	return json_array_append_new(calls, call);
}

/* ---- kimi_k2 ---- */

static const char K_BEGIN[] = "<|tool_call_begin|>", K_ARGS[] = "<|tool_call_argument_begin|>",
		  K_END[] = "<|tool_call_end|>";

/* the id "functions.NAME:IDX" in [p, end): it ends in ":" and digits after something */
static bool kimi_id(const char *p, const char *end)
{
	const char *d = end;
	while (d > p && d[-1] >= '0' && d[-1] <= '9')
		d--;
	return d < end && d > p + 1 && d[-1] == ':';
}

/* vLLM's pattern: <|tool_call_begin|>\s*(ID: [^<]+:\d+)\s*<|tool_call_argument_begin|>\s*
 * (ARGS, lazily, without <|tool_call_begin|>)\s*<|tool_call_end|>, found left to right */
int kimi_k2_calls(const char *p, const char *end, json_t *calls)
{
	for (const char *at; (at = find(p, end, K_BEGIN, LEN(K_BEGIN)));) {
		p = at + 1; /* where the search goes on when this one does not match */
		const char *id = skip_space(at + LEN(K_BEGIN), end), *lt = memchr(id, '<', (size_t)(end - id));
		if (!lt || !starts(lt, end, K_ARGS, LEN(K_ARGS)))
			continue;
		const char *id_end = trim_end(id, lt);
		if (!kimi_id(id, id_end))
			continue;
		const char *args = skip_space(lt + LEN(K_ARGS), end), *close = find(args, end, K_END, LEN(K_END));
		if (!close) /* nor can a later one end */
			break;
		if (find(args, close, K_BEGIN, LEN(K_BEGIN)))
			continue;
		p = close + LEN(K_END);
		/* the name: id.split(":")[0].split(".")[-1] */
		const char *colon = memchr(id, ':', (size_t)(id_end - id)), *name = colon;
		while (name > id && name[-1] != '.')
			name--;
		if (append_call(calls, jstr_new(id, (size_t)(id_end - id)), name, (size_t)(colon - name),
				jstr_new(args, (size_t)(trim_end(args, close) - args))) < 0)
			return -1;
	}
	return 0;
}

/* ---- glm47 ---- */

static const char G_BEGIN[] = GLM_CALL_BEGIN, G_END[] = "</tool_call>", G_KEY[] = "<arg_key>",
		  G_KEY_END[] = "</arg_key>", G_VAL[] = "<arg_value>", G_VAL_END[] = "</arg_value>";

/* Whether the request's tools type parameter `key` of tool `name` as "string" (vLLM's
 * _is_string_type: the first tool of that name decides). */
static bool is_string_param(const json_t *tools, const char *name, size_t name_len, const char *key)
{
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t)
	{
		const json_t *f = json_object_get(t, "function"), *n = json_object_get(f, "name");
		if (!json_is_string(n) || json_string_length(n) != name_len ||
		    memcmp(json_string_value(n), name, name_len))
			continue;
		const json_t *props = json_object_get(json_object_get(f, "parameters"), "properties");
		const char *type = json_string_value(json_object_get(json_object_get(props, key), "type"));
		return type && !strcmp(type, "string");
	}
	return false;
}

/* vLLM's _deserialize: json.loads, then ast.literal_eval, else the text */
static json_t *glm_value(const char *v, size_t n, bool *oom)
{
	json_t *j = json_loadb(v, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	if (!j && !*oom)
		j = py_literal_json(v, n, oom);
	if (!j && !*oom && !(j = jstr_new(v, n)))
		*oom = true;
	return j;
}

/* <arg_key>(K)</arg_key>\s*<arg_value>(V)</arg_value> pairs, found left to right, in [p, end)
 * into args: K stripped; V as written for a string parameter, else glm_value(V stripped). */
static int glm_args(const char *p, const char *end, const json_t *tools, const char *name, size_t name_len,
		    json_t *args)
{
	for (const char *at; (at = find(p, end, G_KEY, LEN(G_KEY)));) {
		p = at + 1;
		const char *k = at + LEN(G_KEY), *v = NULL, *kend;
		/* the key ends at the first "</arg_key>" that an "<arg_value>" follows (the
		 * expression's lazy group grows over the ones that do not) */
		for (const char *q = k; (kend = find(q, end, G_KEY_END, LEN(G_KEY_END))); q = kend + 1) {
			const char *after = skip_space(kend + LEN(G_KEY_END), end);
			if (starts(after, end, G_VAL, LEN(G_VAL))) {
				v = after + LEN(G_VAL);
				break;
			}
		}
		const char *vend = v ? find(v, end, G_VAL_END, LEN(G_VAL_END)) : NULL;
		if (!vend)
			continue;
		p = vend + LEN(G_VAL_END);
		const char *ks = skip_space(k, kend), *ke = trim_end(ks, kend);
		if (!utf8_valid(ks, (size_t)(ke - ks), NULL)) /* not a key JSON can hold: dropped */
			continue;
		char *key = strndup(ks, (size_t)(ke - ks));
		if (!key)
			return -1;
		bool oom = false;
		json_t *val;
		if (is_string_param(tools, name, name_len, key)) {
			val = jstr_new(v, (size_t)(vend - v));
		} else {
			const char *vs = skip_space(v, vend);
			val = glm_value(vs, (size_t)(trim_end(vs, vend) - vs), &oom);
		}
		int rc = val && !oom ? json_object_set_new(args, key, val) : -1;
		free(key);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* one <tool_call>INNER</tool_call> from `at` (at its tag) to `close`: vLLM's
 * <tool_call>\s*(\S+?)\s*(<arg_key>.*)?</tool_call>; *name / *args_at set, false when no match */
static bool glm_detail(const char *at, const char *close, const char **name, size_t *name_len, const char **args_at)
{
	const char *s = skip_space(at + LEN(G_BEGIN), close), *q = s;
	for (; q < close && !is_space(*q); q++)
		if (q > s && starts(q, close, G_KEY, LEN(G_KEY))) /* the shortest name that an <arg_key> follows */
			break;
	if (q == s)
		return false;
	const char *rest = q < close && !is_space(*q) ? q : skip_space(q, close);
	if (rest != close && !starts(rest, close, G_KEY, LEN(G_KEY)))
		return false;
	*name = s;
	*name_len = (size_t)(q - s);
	*args_at = rest;
	return true;
}

int glm47_calls(const char *p, const char *end, const json_t *tools, json_t *calls)
{
	for (const char *at; (at = find(p, end, G_BEGIN, LEN(G_BEGIN)));) {
		const char *close = find(at + LEN(G_BEGIN), end, G_END, LEN(G_END));
		if (!close)
			break;
		p = close + LEN(G_END);
		const char *name, *args_at;
		size_t name_len;
		bool found = false; /* the detail's search: from each "<tool_call>" in the match */
		for (const char *b = at; b && !(found = glm_detail(b, close, &name, &name_len, &args_at));)
			b = find(b + 1, close, G_BEGIN, LEN(G_BEGIN));
		if (!found)
			continue;
		json_t *args = json_object();
		struct strbuf text = {0};
		char id[64];
		jstr_random_id(id, sizeof id, "chatcmpl-tool-");
		int rc = !args || glm_args(args_at, close, tools, name, name_len, args) < 0 ||
					 pyjson_dump(args, &text) < 0
				 ? -1
				 : append_call(calls, json_string(id), name, name_len,
					       jstr_new(text.p ? text.p : "", text.n));
		json_decref(args);
		strbuf_fini(&text);
		if (rc < 0)
			return -1;
	}
	return 0;
}
