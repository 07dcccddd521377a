/* DeepSeek-V3.2's prompt encoder (chat_dsv32.h): encoding_dsv32.py's encode_messages, message
 * by message, on the Jinja interpreter's values (jinja/jinja.h) so that str() and json.dumps come
 * out as Python writes them. */
#include "tok/chat_dsv32.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "jinja/jinja.h"

#define DSML "｜DSML｜"
static const char BOS[] = "<｜begin▁of▁sentence｜>", EOS[] = "<｜end▁of▁sentence｜>", THINK[] = "<think>",
		  UNTHINK[] = "</think>", USER[] = "<｜User｜>", ASSISTANT[] = "<｜Assistant｜>";

/* TOOLS_SYSTEM_TEMPLATE, its tokens filled in; the schemas go between HEAD and TAIL */
static const char TOOLS_HEAD[] =
	"## Tools\n\n"
	"You have access to a set of tools you can use to answer the user's question.\n"
	"You can invoke functions by writing a \"<" DSML "function_calls>\" block like the following as part of "
	"your reply to the user:\n"
	"<" DSML "function_calls>\n"
	"<" DSML "invoke name=\"$FUNCTION_NAME\">\n"
	"<" DSML "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" DSML "parameter>\n"
	"...\n"
	"</" DSML "invoke>\n"
	"<" DSML "invoke name=\"$FUNCTION_NAME2\">\n"
	"...\n"
	"</" DSML "invoke>\n"
	"</" DSML "function_calls>\n\n"
	"String and scalar parameters should be specified as is without any escaping or quotes, while lists and "
	"objects should use JSON format. The \"string\" attribute should be set to \"true\" for string type "
	"parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n\n"
	"If the thinking_mode is enabled, then after function results you should strongly consider outputting a "
	"thinking block. Here is an example:\n\n"
	"<" DSML "function_calls>\n"
	"...\n"
	"</" DSML "function_calls>\n\n"
	"<function_results>\n"
	"...\n"
	"</function_results>\n\n"
	"<think>...thinking about results</think>\n\n"
	"Here are the functions available in JSONSchema format:\n"
	"<functions>\n";
static const char TOOLS_TAIL[] = "\n</functions>\n";
static const char FORMAT_HEAD[] =
	"## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

#define PFX "deepseek_v32 prompt: "

struct enc {
	struct jctx *c;
	const struct jlist *m; /* the messages */
	long last_user;        /* index of the last user or developer message, -1 */
	size_t shift;          /* 1 when a system message for the request's tools was put in front */
	bool thinking;
};

/* the index of messages[i] in the caller's list, for errors */
static size_t ix(const struct enc *x, size_t i) { return i - x->shift; }

static struct jval *field(const struct jval *d, const char *k)
{
	return d->k == JV_DICT ? jdict_get(d->u.d, k, strlen(k)) : NULL;
}

static bool has(const struct jval *d, const char *k)
{
	const struct jval *v = field(d, k);
	return v && jv_truthy(v);
}

static bool role_is(const struct jval *msg, const char *role)
{
	const struct jval *r = field(msg, "role");
	return r && r->k == JV_STR && !strcmp(r->u.s.p, role);
}

static int put(struct enc *x, const char *s) { return strbuf_puts(x->c->out, s) < 0 ? -1 : 0; }

/* str(v) into the prompt; None (and absent) is "" (Python would write "None") */
static int put_text(struct enc *x, const struct jval *v)
{
	if (!v || v->k == JV_NONE || v->k == JV_UNDEF)
		return 0;
	return jv_to_str(x->c, v, x->c->out);
}

static int put_json(struct enc *x, const struct jval *v)
{
	return jv_to_json(x->c, v, x->c->out, NULL, ", ", ": ", false, 0);
}

static int oom(struct enc *x) { return err_set(x->c->e, PFX "out of memory"); }

/* The arguments of tool_calls[k] of messages[i] as a dict: a JSON text (OpenAI's form, what
 * the encoder json.loads) or already an object. */
static int call_arguments(struct enc *x, size_t i, size_t k, const struct jval *args, struct jval *out)
{
	if (args && args->k == JV_DICT) {
		*out = *args;
		return 0;
	}
	if (!args || args->k != JV_STR)
		return err_set(x->c->e, PFX "messages[%zu].tool_calls[%zu].function.arguments must be a JSON string",
			       ix(x, i), k);
	json_error_t je;
	json_t *j = json_loadb(args->u.s.p, args->u.s.n, JSON_ALLOW_NUL, &je);
	if (!j)
		return err_set(x->c->e, PFX "messages[%zu].tool_calls[%zu].function.arguments: %s", ix(x, i), k,
			       je.text);
	int r = json_is_object(j) ? jinja_from_json(x->c, j, out)
				  : err_set(x->c->e,
					    PFX "messages[%zu].tool_calls[%zu].function.arguments must be a "
						"JSON object",
					    ix(x, i), k);
	json_decref(j);
	return r;
}

/* ---- pieces ---- */

/* render_tools: the template around the JSON of each tool's "function", one a line */
static int put_tools(struct enc *x, size_t i, const struct jval *tools)
{
	if (tools->k != JV_LIST)
		return err_set(x->c->e, PFX "messages[%zu].tools must be a list", ix(x, i));
	if (put(x, TOOLS_HEAD) < 0)
		return oom(x);
	for (size_t t = 0; t < tools->u.l->n; t++) {
		const struct jval *fn = field(&tools->u.l->v[t], "function");
		if (!fn)
			return err_set(x->c->e, PFX "messages[%zu].tools[%zu] has no \"function\"", ix(x, i), t);
		if ((t && put(x, "\n") < 0) || put_json(x, fn) < 0)
			return -1;
	}
	return put(x, TOOLS_TAIL) < 0 ? oom(x) : 0;
}

/* the "\n\n"-led tools block and response format of a system or developer message */
static int put_extras(struct enc *x, size_t i, const struct jval *msg)
{
	if (has(msg, "tools") && (put(x, "\n\n") < 0 || put_tools(x, i, field(msg, "tools")) < 0))
		return -1;
	if (has(msg, "response_format") &&
	    (put(x, "\n\n") < 0 || put(x, FORMAT_HEAD) < 0 || put_json(x, field(msg, "response_format")) < 0))
		return -1;
	return 0;
}

/* <｜User｜>...<｜Assistant｜> and the thinking token of a user or developer message */
static int put_user(struct enc *x, size_t i, const struct jval *msg, bool developer)
{
	const struct jval *content = field(msg, "content");
	if (put(x, USER) < 0)
		return -1;
	if (developer) {
		if (!content || !jv_truthy(content))
			return err_set(x->c->e, PFX "messages[%zu]: a developer message needs content", ix(x, i));
		if (put_extras(x, i, msg) < 0 || put(x, "\n\n# The user's message is: ") < 0)
			return -1;
	}
	if (put_text(x, content) < 0 || put(x, ASSISTANT) < 0)
		return -1;
	return put(x, (long)i == x->last_user && x->thinking ? THINK : UNTHINK);
}

/* one <｜DSML｜invoke> of an assistant message's tool call */
static int put_invoke(struct enc *x, size_t i, size_t k, const struct jval *call)
{
	const struct jval *fn = field(call, "function"), *name = fn ? field(fn, "name") : NULL;
	if (!name)
		return err_set(x->c->e, PFX "messages[%zu].tool_calls[%zu] has no function.name", ix(x, i), k);
	struct jval args;
	if (call_arguments(x, i, k, field(fn, "arguments"), &args) < 0)
		return -1;
	if (put(x, "<" DSML "invoke name=\"") < 0 || jv_to_str(x->c, name, x->c->out) < 0 || put(x, "\">\n") < 0)
		return -1;
	const struct jdict *d = args.u.d;
	for (size_t a = 0; a < d->n; a++) {
		const struct jval *v = &d->vals[a];
		if ((a && put(x, "\n") < 0) || put(x, "<" DSML "parameter name=\"") < 0 ||
		    jv_to_str(x->c, &d->keys[a], x->c->out) < 0 ||
		    put(x, v->k == JV_STR ? "\" string=\"true\">" : "\" string=\"false\">") < 0)
			return -1;
		if ((v->k == JV_STR ? jv_to_str(x->c, v, x->c->out) : put_json(x, v)) < 0 ||
		    put(x, "</" DSML "parameter>") < 0)
			return -1;
	}
	return put(x, "\n</" DSML "invoke>");
}

static int put_assistant(struct enc *x, size_t i, const struct jval *msg)
{
	const struct jval *calls = field(msg, "tool_calls");
	const struct jval *reasoning = has(msg, "reasoning") ? field(msg, "reasoning")
							     : field(msg, "reasoning_content");
	bool any_calls = calls && jv_truthy(calls);
	if (any_calls && calls->k != JV_LIST)
		return err_set(x->c->e, PFX "messages[%zu].tool_calls must be a list", ix(x, i));
	if (x->thinking && (long)i > x->last_user) {
		if (!any_calls && !(reasoning && jv_truthy(reasoning)))
			return err_set(x->c->e,
				       PFX "messages[%zu]: in thinking mode an assistant message after the last "
					   "user message needs reasoning_content or tool_calls",
				       ix(x, i));
		if ((reasoning && jv_truthy(reasoning) && put_text(x, reasoning) < 0) || put(x, UNTHINK) < 0)
			return -1;
	}
	const struct jval *content = field(msg, "content");
	if (content && jv_truthy(content) && put_text(x, content) < 0)
		return -1;
	if (any_calls) {
		if (put(x, "\n\n<" DSML "function_calls>\n") < 0)
			return -1;
		for (size_t k = 0; k < calls->u.l->n; k++)
			if ((k && put(x, "\n") < 0) || put_invoke(x, i, k, &calls->u.l->v[k]) < 0)
				return -1;
		if (put(x, "\n</" DSML "function_calls>") < 0)
			return -1;
	}
	return put(x, EOS);
}

/* a tool result: k-th of the calls of the assistant message before the run of results */
static int put_tool(struct enc *x, size_t i, const struct jval *msg)
{
	size_t a = i;
	while (a > 0 && role_is(&x->m->v[a - 1], "tool"))
		a--;
	const struct jval *calls = a > 0 && role_is(&x->m->v[a - 1], "assistant")
					   ? field(&x->m->v[a - 1], "tool_calls")
					   : NULL;
	size_t order = i - a + 1, n_calls = calls && calls->k == JV_LIST ? calls->u.l->n : 0;
	if (!n_calls)
		return err_set(x->c->e,
			       PFX "messages[%zu]: a tool message must follow an assistant message with "
				   "tool_calls",
			       ix(x, i));
	if (order > n_calls)
		return err_set(x->c->e, PFX "messages[%zu]: %zu tool results for %zu tool_calls", ix(x, i), order,
			       n_calls);
	if ((order == 1 && put(x, "\n\n<function_results>") < 0) || put(x, "\n<result>") < 0 ||
	    put_text(x, field(msg, "content")) < 0 || put(x, "</result>") < 0)
		return -1;
	if (order < n_calls)
		return 0;
	if (put(x, "\n</function_results>\n\n") < 0)
		return -1;
	return put(x, (long)i >= x->last_user && x->thinking ? THINK : UNTHINK);
}

static int put_message(struct enc *x, size_t i)
{
	const struct jval *msg = &x->m->v[i], *role = field(msg, "role");
	if (msg->k != JV_DICT)
		return err_set(x->c->e, PFX "messages[%zu] must be an object", ix(x, i));
	if (!role || role->k != JV_STR)
		return err_set(x->c->e, PFX "messages[%zu] has no role", ix(x, i));
	const char *r = role->u.s.p;
	if (!strcmp(r, "system")) {
		const struct jval *content = field(msg, "content");
		if (content && jv_truthy(content) && put_text(x, content) < 0)
			return -1;
		return put_extras(x, i, msg);
	}
	if (!strcmp(r, "user") || !strcmp(r, "developer"))
		return put_user(x, i, msg, r[0] == 'd');
	if (!strcmp(r, "assistant"))
		return put_assistant(x, i, msg);
	if (!strcmp(r, "tool"))
		return put_tool(x, i, msg);
	return err_set(x->c->e, PFX "messages[%zu]: unknown role '%s'", ix(x, i), r);
}

/* The request's tools go on the first message when it is a system message, else on an empty
 * system message put in front. */
static int attach_tools(struct enc *x, struct jval *messages, const struct jval *tools)
{
	struct jval key = jv_cstr("tools");
	struct jlist *l = messages->u.l;
	if (l->n && role_is(&l->v[0], "system")) {
		struct jval first = jv_dict(x->c->pool, l->v[0].u.d->n + 1); /* a copy: the caller's stays */
		if (first.k != JV_DICT)
			return oom(x);
		for (size_t k = 0; k < l->v[0].u.d->n; k++)
			if (jdict_set(x->c->pool, first.u.d, l->v[0].u.d->keys[k], l->v[0].u.d->vals[k]) < 0)
				return oom(x);
		if (jdict_set(x->c->pool, first.u.d, key, *tools) < 0)
			return oom(x);
		struct jval copy = jv_list(x->c->pool, l->n);
		if (copy.k != JV_LIST)
			return oom(x);
		memcpy(copy.u.l->v, l->v, l->n * sizeof *l->v);
		copy.u.l->n = l->n;
		copy.u.l->v[0] = first;
		*messages = copy;
		return 0;
	}
	struct jval sys = jv_dict(x->c->pool, 2), copy = jv_list(x->c->pool, l->n + 1);
	if (sys.k != JV_DICT || copy.k != JV_LIST ||
	    jdict_set(x->c->pool, sys.u.d, jv_cstr("role"), jv_cstr("system")) < 0 ||
	    jdict_set(x->c->pool, sys.u.d, key, *tools) < 0)
		return oom(x);
	copy.u.l->v[0] = sys;
	if (l->n)
		memcpy(copy.u.l->v + 1, l->v, l->n * sizeof *l->v);
	copy.u.l->n = l->n + 1;
	*messages = copy;
	x->shift = 1;
	return 0;
}

int chat_dsv32_encode(struct jctx *c, struct jval *messages, const struct jval *tools, bool thinking)
{
	struct enc x = {.c = c, .thinking = thinking, .last_user = -1};
	if (messages->k != JV_LIST)
		return err_set(c->e, PFX "messages must be a list");
	struct jval msgs = *messages;
	if (tools && tools->k != JV_NONE && tools->k != JV_UNDEF) {
		if (tools->k != JV_LIST)
			return err_set(c->e, PFX "tools must be a list");
		for (size_t t = 0; t < tools->u.l->n; t++)
			if (!field(&tools->u.l->v[t], "function"))
				return err_set(c->e, PFX "tools[%zu] has no \"function\"", t);
		if (tools->u.l->n && attach_tools(&x, &msgs, tools) < 0)
			return -1;
	}
	x.m = msgs.u.l;
	for (size_t i = x.m->n; i-- > 0;)
		if (role_is(&x.m->v[i], "user") || role_is(&x.m->v[i], "developer")) {
			x.last_user = (long)i;
			break;
		}
	/* encode_messages' drop_thinking (vLLM sets it when the last message is the user's) drops
	 * the reasoning of assistant messages before the last user message, which this encoder
	 * never writes in any case: the prompt is the same with or without it. */
	if (put(&x, BOS) < 0)
		return oom(&x);
	for (size_t i = 0; i < x.m->n; i++)
		if (put_message(&x, i) < 0)
			return c->out->oom ? err_set(c->e, PFX "output size limit exceeded") : -1;
	return c->out->oom ? err_set(c->e, PFX "output size limit exceeded") : 0;
}

bool chat_dsv32_for_model(const char *model_dir)
{
	char path[PATH_MAX];
	if (!model_dir || snprintf(path, sizeof path, "%s/config.json", model_dir) >= (int)sizeof path)
		return false;
	json_t *cfg = json_load_file(path, 0, NULL);
	const char *type = json_string_value(json_object_get(cfg, "model_type"));
	bool yes = type && !strcmp(type, "deepseek_v32");
	const json_t *arch = json_object_get(cfg, "architectures");
	for (size_t i = 0; !yes && i < json_array_size(arch); i++) {
		const char *a = json_string_value(json_array_get(arch, i));
		yes = a && !strcmp(a, "DeepseekV32ForCausalLM");
	}
	json_decref(cfg);
	return yes;
}
