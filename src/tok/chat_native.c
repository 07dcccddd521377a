/* The pieces DeepSeek's native prompt encoders share (chat_native.h). */
#include "tok/chat_native.h"

#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jinja/jinja.h"

#define DSML NATIVE_DSML
static const char FORMAT_HEAD[] =
	"## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

struct jval *native_field(const struct jval *d, const char *k)
{
	return d && d->k == JV_DICT ? jdict_get(d->u.d, k, strlen(k)) : NULL;
}

bool native_has(const struct jval *d, const char *k)
{
	const struct jval *v = native_field(d, k);
	return v && jv_truthy(v);
}

bool native_role_is(const struct jval *msg, const char *role)
{
	const struct jval *r = native_field(msg, "role");
	return r && r->k == JV_STR && !strcmp(r->u.s.p, role);
}

const struct jval *native_reasoning(const struct jval *msg)
{
	return native_has(msg, "reasoning")           ? native_field(msg, "reasoning")
	       : native_has(msg, "reasoning_content") ? native_field(msg, "reasoning_content")
						      : NULL;
}

int native_err(struct native_enc *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(x->c->e, fmt, ap);
	va_end(ap);
	return err_prefix(x->c->e, "%s prompt", x->name);
}

int native_put(struct native_enc *x, const char *s) { return strbuf_puts(x->c->out, s) < 0 ? -1 : 0; }

int native_put_text(struct native_enc *x, const struct jval *v)
{
	if (!v || v->k == JV_NONE || v->k == JV_UNDEF)
		return 0;
	return jv_to_str(x->c, v, x->c->out);
}

int native_put_json(struct native_enc *x, const struct jval *v)
{
	return jv_to_json(x->c, v, x->c->out, NULL, ", ", ": ", false, 0);
}

/* The arguments of tool_calls[k] of messages[mi] as a dict (see native_put_invoke). */
static int call_arguments(struct native_enc *x, size_t mi, size_t k, const struct jval *args, bool lenient,
			  struct jval *out)
{
	if (args && args->k == JV_DICT) {
		*out = *args;
		return 0;
	}
	if (!args || args->k != JV_STR)
		return native_err(x, "messages[%zu].tool_calls[%zu].function.arguments must be a JSON string", mi, k);
	json_error_t je;
	json_t *j = json_loadb(args->u.s.p, args->u.s.n, JSON_ALLOW_NUL, &je);
	if (!j && lenient) { /* encoding_dsv4.py: {"arguments": the text} */
		*out = jv_dict(x->c->pool, 1);
		if (out->k != JV_DICT || jdict_set(x->c->pool, out->u.d, jv_cstr("arguments"), *args) < 0)
			return native_err(x, "out of memory");
		return 0;
	}
	if (!j)
		return native_err(x, "messages[%zu].tool_calls[%zu].function.arguments: %s", mi, k, je.text);
	int r = json_is_object(j)
			? jinja_from_json(x->c, j, out)
			: native_err(x, "messages[%zu].tool_calls[%zu].function.arguments must be a JSON object", mi,
				     k);
	json_decref(j);
	return r;
}

/* one <｜DSML｜invoke>: tool_calls[k] of messages[mi] */
static int put_invoke(struct native_enc *x, size_t mi, size_t k, const struct jval *call, bool lenient)
{
	const struct jval *fn = native_field(call, "function"), *name = native_field(fn, "name");
	if (!name)
		return native_err(x, "messages[%zu].tool_calls[%zu] has no function.name", mi, k);
	struct jval args;
	if (call_arguments(x, mi, k, native_field(fn, "arguments"), lenient, &args) < 0)
		return -1;
	if (native_put(x, "<" DSML "invoke name=\"") < 0 || jv_to_str(x->c, name, x->c->out) < 0 ||
	    native_put(x, "\">\n") < 0)
		return -1;
	const struct jdict *d = args.u.d;
	for (size_t a = 0; a < d->n; a++) {
		const struct jval *v = &d->vals[a];
		if ((a && native_put(x, "\n") < 0) || native_put(x, "<" DSML "parameter name=\"") < 0 ||
		    jv_to_str(x->c, &d->keys[a], x->c->out) < 0 ||
		    native_put(x, v->k == JV_STR ? "\" string=\"true\">" : "\" string=\"false\">") < 0)
			return -1;
		if ((v->k == JV_STR ? jv_to_str(x->c, v, x->c->out) : native_put_json(x, v)) < 0 ||
		    native_put(x, "</" DSML "parameter>") < 0)
			return -1;
	}
	return native_put(x, "\n</" DSML "invoke>");
}

int native_put_calls(struct native_enc *x, size_t mi, const struct jval *calls, const char *block, bool lenient)
{
	if (calls->k != JV_LIST)
		return native_err(x, "messages[%zu].tool_calls must be a list", mi);
	if (native_put(x, "\n\n<" DSML) < 0 || native_put(x, block) < 0 || native_put(x, ">\n") < 0)
		return -1;
	for (size_t k = 0; k < calls->u.l->n; k++)
		if ((k && native_put(x, "\n") < 0) || put_invoke(x, mi, k, &calls->u.l->v[k], lenient) < 0)
			return -1;
	if (native_put(x, "\n</" DSML) < 0 || native_put(x, block) < 0)
		return -1;
	return native_put(x, ">");
}

/* render_tools: the template around the JSON of each tool's "function", one a line */
static int put_tools(struct native_enc *x, size_t mi, const struct jval *tools, const char *head, const char *tail)
{
	if (tools->k != JV_LIST)
		return native_err(x, "messages[%zu].tools must be a list", mi);
	if (native_put(x, head) < 0)
		return -1;
	for (size_t t = 0; t < tools->u.l->n; t++) {
		const struct jval *fn = native_field(&tools->u.l->v[t], "function");
		if (!fn)
			return native_err(x, "messages[%zu].tools[%zu] has no \"function\"", mi, t);
		if ((t && native_put(x, "\n") < 0) || native_put_json(x, fn) < 0)
			return -1;
	}
	return native_put(x, tail);
}

int native_put_extras(struct native_enc *x, size_t mi, const struct jval *msg, const char *tools_head,
		      const char *tools_tail)
{
	if (native_has(msg, "tools") &&
	    (native_put(x, "\n\n") < 0 || put_tools(x, mi, native_field(msg, "tools"), tools_head, tools_tail) < 0))
		return -1;
	if (native_has(msg, "response_format") && (native_put(x, "\n\n") < 0 || native_put(x, FORMAT_HEAD) < 0 ||
						   native_put_json(x, native_field(msg, "response_format")) < 0))
		return -1;
	return 0;
}

/* a copy of dict d with k set to v */
static int dict_with(struct native_enc *x, const struct jval *d, const char *k, struct jval v, struct jval *out)
{
	*out = jv_dict(x->c->pool, d->u.d->n + 1);
	if (out->k != JV_DICT)
		return native_err(x, "out of memory");
	for (size_t i = 0; i < d->u.d->n; i++)
		if (jdict_set(x->c->pool, out->u.d, d->u.d->keys[i], d->u.d->vals[i]) < 0)
			return native_err(x, "out of memory");
	return jdict_set(x->c->pool, out->u.d, jv_cstr(k), v) < 0 ? native_err(x, "out of memory") : 0;
}

int native_attach_tools(struct native_enc *x, struct jval *messages, const struct jval *tools, bool developer_too,
			size_t *shift)
{
	*shift = 0;
	if (!tools || tools->k == JV_NONE || tools->k == JV_UNDEF)
		return 0;
	if (tools->k != JV_LIST)
		return native_err(x, "tools must be a list");
	for (size_t t = 0; t < tools->u.l->n; t++)
		if (!native_field(&tools->u.l->v[t], "function"))
			return native_err(x, "tools[%zu] has no \"function\"", t);
	const struct jlist *l = messages->u.l;
	if (!tools->u.l->n)
		return 0;
	bool on_first = l->n && (native_role_is(&l->v[0], "system") ||
				 (developer_too && native_role_is(&l->v[0], "developer")));
	struct jval copy = jv_list(x->c->pool, l->n + !on_first);
	if (copy.k != JV_LIST)
		return native_err(x, "out of memory");
	if (l->n)
		memcpy(copy.u.l->v + !on_first, l->v, l->n * sizeof *l->v);
	copy.u.l->n = l->n + !on_first;
	if (on_first) {
		if (dict_with(x, &l->v[0], "tools", *tools, &copy.u.l->v[0]) < 0)
			return -1;
	} else {
		struct jval sys = jv_dict(x->c->pool, 1), role = jv_cstr("system");
		if (sys.k != JV_DICT || jdict_set(x->c->pool, sys.u.d, jv_cstr("role"), role) < 0 ||
		    dict_with(x, &sys, "tools", *tools, &copy.u.l->v[0]) < 0)
			return native_err(x, "out of memory");
		*shift = 1;
	}
	*messages = copy;
	return 0;
}

bool native_config_is(const char *model_dir, const char *model_type, const char *architecture)
{
	char path[PATH_MAX];
	if (!model_dir || snprintf(path, sizeof path, "%s/config.json", model_dir) >= (int)sizeof path)
		return false;
	json_t *cfg = json_load_file(path, 0, NULL);
	const char *type = json_string_value(json_object_get(cfg, "model_type"));
	bool yes = type && !strcmp(type, model_type);
	const json_t *arch = json_object_get(cfg, "architectures");
	for (size_t i = 0; !yes && i < json_array_size(arch); i++) {
		const char *a = json_string_value(json_array_get(arch, i));
		yes = a && !strcmp(a, architecture);
	}
	json_decref(cfg);
	return yes;
}
