/* DeepSeek-V3.2's prompt encoder (chat_dsv32.h): encoding_dsv32.py's encode_messages, message
 * by message, on the Jinja interpreter's values (jinja/jinja.h) so that str() and json.dumps come
 * out as Python writes them. */
#include "tok/chat_dsv32.h"

#include <string.h>

#include "jinja/jinja.h"
#include "tok/chat_native.h"

#define DSML NATIVE_DSML
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

struct enc {
	struct native_enc n;
	const struct jlist *m; /* the messages */
	long last_user;        /* index of the last user or developer message, -1 */
	size_t shift;          /* 1 when a system message for the request's tools was put in front */
	bool thinking;
};

/* the index of messages[i] in the caller's list, for errors */
static size_t ix(const struct enc *x, size_t i) { return i - x->shift; }

static int put(struct enc *x, const char *s) { return native_put(&x->n, s); }

static int put_extras(struct enc *x, size_t i, const struct jval *msg)
{
	return native_put_extras(&x->n, ix(x, i), msg, TOOLS_HEAD, TOOLS_TAIL);
}

/* <｜User｜>...<｜Assistant｜> and the thinking token of a user or developer message */
static int put_user(struct enc *x, size_t i, const struct jval *msg, bool developer)
{
	const struct jval *content = native_field(msg, "content");
	if (put(x, USER) < 0)
		return -1;
	if (developer) {
		if (!content || !jv_truthy(content))
			return native_err(&x->n, "messages[%zu]: a developer message needs content", ix(x, i));
		if (put_extras(x, i, msg) < 0 || put(x, "\n\n# The user's message is: ") < 0)
			return -1;
	}
	if (native_put_text(&x->n, content) < 0 || put(x, ASSISTANT) < 0)
		return -1;
	return put(x, (long)i == x->last_user && x->thinking ? THINK : UNTHINK);
}

static int put_assistant(struct enc *x, size_t i, const struct jval *msg)
{
	const struct jval *calls = native_field(msg, "tool_calls");
	const struct jval *reasoning = native_reasoning(msg);
	bool any_calls = calls && jv_truthy(calls);
	if (x->thinking && (long)i > x->last_user) {
		if (!any_calls && !reasoning)
			return native_err(&x->n,
					  "messages[%zu]: in thinking mode an assistant message after the last "
					  "user message needs reasoning_content or tool_calls",
					  ix(x, i));
		if (native_put_text(&x->n, reasoning) < 0 || put(x, UNTHINK) < 0)
			return -1;
	}
	const struct jval *content = native_field(msg, "content");
	if (content && jv_truthy(content) && native_put_text(&x->n, content) < 0)
		return -1;
	if (any_calls && native_put_calls(&x->n, ix(x, i), calls, "function_calls", false) < 0)
		return -1;
	return put(x, EOS);
}

/* a tool result: k-th of the calls of the assistant message before the run of results */
static int put_tool(struct enc *x, size_t i, const struct jval *msg)
{
	size_t a = i;
	while (a > 0 && native_role_is(&x->m->v[a - 1], "tool"))
		a--;
	const struct jval *calls = a > 0 && native_role_is(&x->m->v[a - 1], "assistant")
					   ? native_field(&x->m->v[a - 1], "tool_calls")
					   : NULL;
	size_t order = i - a + 1, n_calls = calls && calls->k == JV_LIST ? calls->u.l->n : 0;
	if (!n_calls)
		return native_err(&x->n,
				  "messages[%zu]: a tool message must follow an assistant message with "
				  "tool_calls",
				  ix(x, i));
	if (order > n_calls)
		return native_err(&x->n, "messages[%zu]: %zu tool results for %zu tool_calls", ix(x, i), order,
				  n_calls);
	if ((order == 1 && put(x, "\n\n<function_results>") < 0) || put(x, "\n<result>") < 0 ||
	    native_put_text(&x->n, native_field(msg, "content")) < 0 || put(x, "</result>") < 0)
		return -1;
	if (order < n_calls)
		return 0;
	if (put(x, "\n</function_results>\n\n") < 0)
		return -1;
	return put(x, (long)i >= x->last_user && x->thinking ? THINK : UNTHINK);
}

static int put_message(struct enc *x, size_t i)
{
	const struct jval *msg = &x->m->v[i], *role = native_field(msg, "role");
	if (msg->k != JV_DICT)
		return native_err(&x->n, "messages[%zu] must be an object", ix(x, i));
	if (!role || role->k != JV_STR)
		return native_err(&x->n, "messages[%zu] has no role", ix(x, i));
	const char *r = role->u.s.p;
	if (!strcmp(r, "system")) {
		const struct jval *content = native_field(msg, "content");
		if (content && jv_truthy(content) && native_put_text(&x->n, content) < 0)
			return -1;
		return put_extras(x, i, msg);
	}
	if (!strcmp(r, "user") || !strcmp(r, "developer"))
		return put_user(x, i, msg, r[0] == 'd');
	if (!strcmp(r, "assistant"))
		return put_assistant(x, i, msg);
	if (!strcmp(r, "tool"))
		return put_tool(x, i, msg);
	return native_err(&x->n, "messages[%zu]: unknown role '%s'", ix(x, i), r);
}

int chat_dsv32_encode(struct jctx *c, struct jval *messages, const struct jval *tools, bool thinking)
{
	struct enc x = {.n = {.c = c, .name = "deepseek_v32"}, .thinking = thinking, .last_user = -1};
	if (messages->k != JV_LIST)
		return native_err(&x.n, "messages must be a list");
	struct jval msgs = *messages;
	if (native_attach_tools(&x.n, &msgs, tools, false, &x.shift) < 0)
		return -1;
	x.m = msgs.u.l;
	for (size_t i = x.m->n; i-- > 0;)
		if (native_role_is(&x.m->v[i], "user") || native_role_is(&x.m->v[i], "developer")) {
			x.last_user = (long)i;
			break;
		}
	/* encode_messages' drop_thinking (vLLM sets it when the last message is the user's) drops
	 * the reasoning of assistant messages before the last user message, which this encoder
	 * never writes in any case: the prompt is the same with or without it. */
	int r = put(&x, BOS);
	for (size_t i = 0; !r && i < x.m->n; i++)
		r = put_message(&x, i);
	return c->out->oom ? native_err(&x.n, "output size limit exceeded") : r;
}

bool chat_dsv32_for_model(const char *model_dir)
{
	return native_config_is(model_dir, "deepseek_v32", "DeepseekV32ForCausalLM");
}
