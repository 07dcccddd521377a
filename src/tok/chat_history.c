/* vLLM's chat history for templates (chat_history.h): content format detection on our AST, and
 * the messages' conversion. */
#include <stdlib.h>
#include <string.h>

#include "tok/chat_history.h"
#include "base/strbuf.h"
#include "jinja/jinja.h"

int chat_content_format_parse(const char *s, enum chat_content_format *out, struct err *e)
{
	static const char *const names[] = {"auto", "string", "openai"};
	for (int i = 0; i < 3; i++)
		if (s && !strcmp(s, names[i])) {
			*out = (enum chat_content_format)i;
			return 0;
		}
	return err_set(e, "chat template content format '%s': expected auto, string or openai", s ? s : "");
}

const char *chat_content_format_name(enum chat_content_format f)
{
	return f == CHAT_CONTENT_OPENAI ? "openai" : f == CHAT_CONTENT_STRING ? "string" : "auto";
}

/* ---- detection ---- */

#define MAX_NAMES 256

struct detect {
	const struct jnode *stmts[4096]; /* N_SET / N_SET_ATTR / N_FOR, in tree order */
	int n;
	bool overflow;
};

static void collect(struct detect *d, const struct jnode *x, int depth)
{
	if (!x || depth > 4 * JINJA_MAX_DEPTH)
		return;
	if (x->kind == N_SET || x->kind == N_SET_ATTR || x->kind == N_FOR) {
		if (d->n == (int)(sizeof d->stmts / sizeof d->stmts[0]))
			d->overflow = true;
		else
			d->stmts[d->n++] = x;
	}
	const struct jnode *kids[] = {x->a, x->b, x->c, x->d};
	for (int i = 0; i < 4; i++)
		collect(d, kids[i], depth + 1);
	for (int i = 0; i < x->n && x->list; i++)
		collect(d, x->list[i], depth + 1);
	for (int i = 0; i < x->n2 && x->list2; i++)
		collect(d, x->list2[i], depth + 1);
}

static bool is_var(const struct jnode *x, const char *name)
{
	return x && x->kind == E_NAME && !strcmp(x->name, name);
}

/* name['key'] or name.key */
static bool is_attr(const struct jnode *x, const char *name, const char *key)
{
	if (x && x->kind == E_GETITEM && x->b && x->b->kind == E_CONST && x->b->val.k == JV_STR)
		return is_var(x->a, name) && !strcmp(x->b->val.u.s.p, key);
	return x && x->kind == E_GETATTR && is_var(x->a, name) && !strcmp(x->name, key);
}

/* the variable (or its key), maybe under filters, tests and slices */
static bool is_var_or_elems(const struct jnode *x, const char *name, const char *key)
{
	if (x && (x->kind == E_FILTER || x->kind == E_TEST || x->kind == E_SLICE))
		return is_var_or_elems(x->a, name, key);
	return key ? is_attr(x, name, key) : is_var(x, name);
}

static bool in_names(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], s))
			return true;
	return false;
}

/* vLLM asserts single-name targets; a failed assertion falls back to "string" (*bad) */
static const char *target(const struct jnode *s, bool *bad)
{
	if (s->kind == N_SET_ATTR || s->nnames != 1) {
		*bad = true;
		return NULL;
	}
	return s->names[0];
}

enum chat_content_format chat_content_format_detect(const struct jnode *root)
{
	struct detect *d = calloc(1, sizeof *d);
	if (!d)
		return CHAT_CONTENT_STRING;
	collect(d, root, 0);
	const char *msgs[MAX_NAMES], *items[MAX_NAMES];
	int n_msgs = 1, n_items = 0;
	bool bad = d->overflow, found = false;
	msgs[0] = "messages";
	/* variables set from messages, transitively (vLLM's breadth-first walk) */
	for (int q = 0; q < n_msgs && !bad; q++)
		for (int i = 0; i < d->n && !bad; i++) {
			const struct jnode *s = d->stmts[i];
			if (s->kind == N_FOR || !is_var_or_elems(s->a, msgs[q], NULL))
				continue;
			const char *t = target(s, &bad);
			if (t && !in_names(msgs, n_msgs, t) && n_msgs < MAX_NAMES)
				msgs[n_msgs++] = t;
		}
	/* loops over them: their targets are messages */
	for (int i = 0; i < d->n && !bad; i++) {
		const struct jnode *s = d->stmts[i];
		for (int k = 0; s->kind == N_FOR && k < n_msgs; k++)
			if (is_var_or_elems(s->a, msgs[k], NULL)) {
				const char *t = target(s, &bad);
				if (t && n_items < MAX_NAMES)
					items[n_items++] = t;
				break;
			}
	}
	/* a loop over a message's content */
	for (int i = 0; i < d->n && !bad && !found; i++) {
		const struct jnode *s = d->stmts[i];
		for (int k = 0; s->kind == N_FOR && k < n_items && !found; k++)
			if (is_var_or_elems(s->a, items[k], "content")) {
				found = target(s, &bad) != NULL;
				break;
			}
	}
	free(d);
	return found && !bad ? CHAT_CONTENT_OPENAI : CHAT_CONTENT_STRING;
}

/* ---- conversion ---- */

/* the text of a content part, NULL for a text part without text (vLLM skips those); *other
 * when it is not a text part */
static const char *part_text(const json_t *part, bool *other)
{
	*other = false;
	if (json_is_string(part))
		return json_string_value(part);
	const char *type = json_string_value(json_object_get(part, "type"));
	if (!type || strcmp(type, "text")) {
		*other = true;
		return NULL;
	}
	return json_string_value(json_object_get(part, "text"));
}

static json_t *text_part(const char *s) { return json_pack("{s:s,s:s}", "type", "text", "text", s); }

/* msg's content in format fmt: a new reference, NULL with e set */
static json_t *content_as(const json_t *msg, size_t i, enum chat_content_format fmt, bool tool, struct err *e)
{
	const json_t *c = json_object_get(msg, "content");
	json_t *parts = json_array();
	if (!parts)
		goto oom;
	if (json_is_string(c)) {
		if (json_array_append_new(parts, text_part(json_string_value(c))) < 0)
			goto oom;
	} else if (json_is_array(c)) {
		size_t k;
		const json_t *part;
		json_array_foreach(c, k, part)
		{
			bool other;
			const char *t = part_text(part, &other);
			if (other) {
				json_decref(parts);
				err_set(e, "messages[%zu].content[%zu]: only text content parts are supported", i, k);
				return NULL;
			}
			if (t && json_array_append_new(parts, text_part(t)) < 0)
				goto oom;
		}
	} else if (c && !json_is_null(c)) {
		json_decref(parts);
		err_set(e, "messages[%zu].content: expected a string or a list of content parts", i);
		return NULL;
	}
	if (fmt == CHAT_CONTENT_OPENAI && !tool)
		return parts;
	/* "string", and a tool message's text parts in either format: joined with "\n" */
	struct strbuf b = {0};
	size_t k;
	const json_t *part;
	json_array_foreach(parts, k, part)
	{
		if (k)
			strbuf_putc(&b, '\n');
		strbuf_put(&b, json_string_value(json_object_get(part, "text")),
			   json_string_length(json_object_get(part, "text")));
	}
	json_decref(parts);
	json_t *s = b.oom ? NULL : json_stringn(b.p ? b.p : "", b.n);
	free(b.p);
	if (s)
		return s;
	parts = NULL;
oom:
	json_decref(parts);
	err_set(e, "chat history: out of memory");
	return NULL;
}

/* vLLM's _postprocess_messages on one tool call: function.arguments decoded */
static int decode_arguments(json_t *call, struct err *e)
{
	json_t *fn = json_object_get(call, "function");
	if (!json_is_object(fn))
		return 0;
	json_t *args = json_object_get(fn, "arguments"), *v;
	if (json_is_object(args) || json_is_array(args))
		return 0;
	v = json_is_string(args) ? json_loadb(json_string_value(args), json_string_length(args),
					      JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL)
				 : NULL;
	if (!v)
		v = json_object(); /* not JSON, or null / a number: vLLM's {} */
	if (!v || json_object_set_new(fn, "arguments", v) < 0)
		return err_set(e, "chat history: out of memory");
	return 0;
}

int chat_history_vllm(const json_t *messages, enum chat_content_format fmt, bool keep_arguments, json_t **out,
		      bool *decoded, struct err *e)
{
	*out = NULL;
	if (decoded)
		*decoded = false;
	if (!json_is_array(messages))
		return err_set(e, "messages must be an array");
	json_t *all = json_deep_copy(messages);
	if (!all)
		return err_set(e, "chat history: out of memory");
	size_t i;
	json_t *msg;
	json_array_foreach(all, i, msg)
	{
		if (!json_is_object(msg)) {
			json_decref(all);
			return err_set(e, "messages[%zu] must be an object", i);
		}
		const char *role = json_string_value(json_object_get(msg, "role"));
		json_t *c = content_as(msg, i, fmt, role && !strcmp(role, "tool"), e);
		if (!c || json_object_set_new(msg, "content", c) < 0) {
			json_decref(all);
			return c ? err_set(e, "chat history: out of memory") : -1;
		}
		json_t *calls = json_object_get(msg, "tool_calls");
		if (!role || strcmp(role, "assistant") || !json_is_array(calls))
			continue;
		if (json_array_size(calls) == 0) { /* keeps templates on the plain assistant path */
			json_object_del(msg, "tool_calls");
			continue;
		}
		if (keep_arguments)
			continue;
		if (decoded)
			*decoded = true;
		size_t k;
		json_t *call;
		json_array_foreach(calls, k, call)
		{
			if (decode_arguments(call, e) < 0) {
				json_decref(all);
				return -1;
			}
		}
	}
	*out = all;
	return 0;
}
