/* DeepSeek-V4's prompt encoder (chat_dsv4.h): encoding_dsv4.py's encode_messages on the Jinja
 * interpreter's values (jinja/jinja.h): the messages regrouped into turns (merge_tool_messages,
 * sort_tool_results_by_call_order), the turns left out by drop_thinking, then each turn and the
 * tokens that follow it (render_message). */
#include "tok/chat_dsv4.h"

#include <string.h>

#include "jinja/jinja.h"
#include "tok/chat_native.h"

#define DSML NATIVE_DSML
static const char BOS[] = "<｜begin▁of▁sentence｜>", EOS[] = "<｜end▁of▁sentence｜>", THINK[] = "<think>",
		  UNTHINK[] = "</think>", USER[] = "<｜User｜>", ASSISTANT[] = "<｜Assistant｜>",
		  REMINDER[] = "<｜latest_reminder｜>";

/* TOOLS_TEMPLATE, its tokens filled in; the schemas go between HEAD and TAIL */
static const char TOOLS_HEAD[] =
	"## Tools\n\n"
	"You have access to a set of tools to help answer the user's question. You can invoke tools by writing "
	"a \"<" DSML "tool_calls>\" block like the following:\n\n"
	"<" DSML "tool_calls>\n"
	"<" DSML "invoke name=\"$TOOL_NAME\">\n"
	"<" DSML "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" DSML "parameter>\n"
	"...\n"
	"</" DSML "invoke>\n"
	"<" DSML "invoke name=\"$TOOL_NAME2\">\n"
	"...\n"
	"</" DSML "invoke>\n"
	"</" DSML "tool_calls>\n\n"
	"String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
	"booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
	"If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
	"<think>...</think> BEFORE any tool calls or final response.\n\n"
	"Otherwise, output directly after </think> with tool calls or final response.\n\n"
	"### Available Tool Schemas\n\n";
static const char TOOLS_TAIL[] =
	"\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

/* REASONING_EFFORT_MAX */
static const char EFFORT_MAX[] =
	"Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
	"You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
	"cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
	"scenarios.\n"
	"Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
	"alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

/* the quick-instruction tasks and their tokens (DS_TASK_SP_TOKENS) */
static const char *const TASKS[][2] = {
	{"action", "<｜action｜>"}, {"query", "<｜query｜>"}, {"authority", "<｜authority｜>"},
	{"domain", "<｜domain｜>"}, {"title", "<｜title｜>"}, {"read_url", "<｜read_url｜>"},
};

/* a user turn's piece: a text, or a tool result */
struct block {
	const struct jval *text; /* the text, or the result's content (NULL: "") */
	const struct jval *id;   /* a result's tool_call_id */
	bool result;
};

struct turn {
	const struct jval *msg; /* its message; a user turn's first user message, NULL when a tool
				 * result opened it */
	const char *role;
	size_t src;      /* the caller's index of that message (of the tool result that opened it) */
	struct block *b; /* a user turn's blocks */
	size_t nb;
};

struct enc {
	struct native_enc n;
	struct turn *t; /* the turns */
	size_t nt;
	struct turn **r; /* those written */
	size_t nr;
	long last_user; /* index in r of the last user or developer turn, -1 */
	bool thinking, drop, effort_max;
};

static int oom(struct enc *x) { return native_err(&x->n, "out of memory"); }

static int put(struct enc *x, const char *s) { return native_put(&x->n, s); }

static bool is(const struct turn *t, const char *role) { return !strcmp(t->role, role); }

/* a turn's task, when it has one ("task" not None) */
static const struct jval *task_of(const struct turn *t)
{
	const struct jval *v = native_field(t->msg, "task");
	return v && v->k != JV_NONE && v->k != JV_UNDEF ? v : NULL;
}

/* ---- the turns ---- */

static struct turn *new_turn(struct enc *x, const struct jval *msg, const char *role, size_t src, struct block *b)
{
	struct turn *t = &x->t[x->nt++];
	*t = (struct turn){.msg = msg, .role = role, .src = src, .b = b};
	return t;
}

/* merge_tool_messages: tool results and user messages into user turns' blocks. blocks has room
 * for one a message, so that each turn's blocks follow each other. */
static int merge(struct enc *x, const struct jlist *m, size_t shift, struct block *blocks)
{
	size_t nb = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct jval *msg = &m->v[i], *role = native_field(msg, "role");
		size_t src = i - (i >= shift ? shift : 0);
		if (!role || role->k != JV_STR)
			return native_err(&x->n, "messages[%zu] has no role", src);
		struct turn *last = x->nt ? &x->t[x->nt - 1] : NULL;
		bool tool = !strcmp(role->u.s.p, "tool");
		if (!tool && strcmp(role->u.s.p, "user")) {
			new_turn(x, msg, role->u.s.p, src, NULL);
			continue;
		}
		/* a tool result joins any user turn; a user message one without a task */
		if (!last || !is(last, "user") || (!tool && task_of(last)))
			last = new_turn(x, tool ? NULL : msg, "user", src, blocks + nb);
		blocks[nb++] = (struct block){.text = native_field(msg, "content"),
					      .id = tool ? native_field(msg, "tool_call_id") : NULL,
					      .result = tool};
		last->nb++;
	}
	return 0;
}

/* where the call with this id is in calls (the last of that id), else 0 */
static size_t call_order(const struct jval *calls, const struct jval *id)
{
	size_t at = 0;
	for (size_t k = 0; id && k < calls->u.l->n; k++) {
		const struct jval *tc = &calls->u.l->v[k], *tc_id = native_field(tc, "id");
		if (!tc_id || !jv_truthy(tc_id))
			tc_id = native_field(native_field(tc, "function"), "id");
		if (tc_id && jv_truthy(tc_id) && jv_equal(tc_id, id))
			at = k;
	}
	return at;
}

static bool any_call_id(const struct jval *calls)
{
	for (size_t k = 0; k < calls->u.l->n; k++) {
		const struct jval *tc = &calls->u.l->v[k];
		if (native_has(tc, "id") || native_has(native_field(tc, "function"), "id"))
			return true;
	}
	return false;
}

/* sort_tool_results_by_call_order: a turn's results (when more than one) in the order of the
 * calls of the last assistant message with tool_calls, the texts where they are (a stable sort) */
static void sort_results(struct enc *x)
{
	const struct jval *calls = NULL;
	for (size_t i = 0; i < x->nt; i++) {
		struct turn *t = &x->t[i];
		if (is(t, "assistant") && native_has(t->msg, "tool_calls")) {
			const struct jval *c = native_field(t->msg, "tool_calls");
			calls = c->k == JV_LIST && any_call_id(c) ? c : NULL;
			continue;
		}
		if (!calls || !is(t, "user"))
			continue;
		for (size_t a = 1; a < t->nb; a++) { /* insertion sort over the results only */
			if (!t->b[a].result)
				continue;
			struct block cur = t->b[a];
			size_t key = call_order(calls, cur.id), at = a;
			for (size_t p = a; p-- > 0;) {
				if (!t->b[p].result)
					continue;
				if (call_order(calls, t->b[p].id) <= key)
					break;
				t->b[at] = t->b[p]; /* move the result up to the previous result's place */
				at = p;
			}
			t->b[at] = cur;
		}
	}
}

static long last_user_of(struct turn **r, size_t n)
{
	for (size_t i = n; i-- > 0;)
		if (is(r[i], "user") || is(r[i], "developer"))
			return (long)i;
	return -1;
}

/* _drop_thinking_messages: before the last user turn only these roles (and assistants) stay */
static bool kept_before_last_user(const struct turn *t)
{
	static const char *const keep[] = {"user",     "system", "tool", "latest_reminder", "direct_search_results",
					   "assistant"};
	for (size_t k = 0; k < sizeof keep / sizeof *keep; k++)
		if (is(t, keep[k]))
			return true;
	return false;
}

/* ---- one turn ---- */

static int put_user(struct enc *x, const struct turn *t)
{
	if (put(x, USER) < 0)
		return -1;
	for (size_t k = 0; k < t->nb; k++) {
		const struct block *b = &t->b[k];
		if ((k && put(x, "\n\n") < 0) || (b->result && put(x, "<tool_result>") < 0) ||
		    native_put_text(&x->n, b->text) < 0 || (b->result && put(x, "</tool_result>") < 0))
			return -1;
	}
	return 0;
}

static int put_assistant(struct enc *x, size_t k, const struct turn *t)
{
	const struct jval *msg = t->msg, *calls = native_field(msg, "tool_calls");
	/* a task's answer (the turn before has a task) is written without thinking */
	if (x->thinking && !(k > 0 && task_of(x->r[k - 1])) && (!x->drop || (long)k > x->last_user) &&
	    (native_put_text(&x->n, native_reasoning(msg)) < 0 || put(x, UNTHINK) < 0))
		return -1;
	const struct jval *content = native_field(msg, "content");
	if (content && jv_truthy(content) && native_put_text(&x->n, content) < 0)
		return -1;
	if (calls && jv_truthy(calls) && native_put_calls(&x->n, t->src, calls, "tool_calls", true) < 0)
		return -1;
	return native_has(msg, "wo_eos") ? 0 : put(x, EOS);
}

static int put_body(struct enc *x, size_t k, const struct turn *t)
{
	const struct jval *content = native_field(t->msg, "content");
	if (is(t, "system")) {
		if (content && jv_truthy(content) && native_put_text(&x->n, content) < 0)
			return -1;
		return native_put_extras(&x->n, t->src, t->msg, TOOLS_HEAD, TOOLS_TAIL);
	}
	if (is(t, "developer")) {
		if (!content || !jv_truthy(content))
			return native_err(&x->n, "messages[%zu]: a developer message needs content", t->src);
		if (put(x, USER) < 0 || native_put_text(&x->n, content) < 0)
			return -1;
		return native_put_extras(&x->n, t->src, t->msg, TOOLS_HEAD, TOOLS_TAIL);
	}
	if (is(t, "user"))
		return put_user(x, t);
	if (is(t, "latest_reminder"))
		return put(x, REMINDER) < 0 ? -1 : native_put_text(&x->n, content);
	if (is(t, "assistant"))
		return put_assistant(x, k, t);
	return native_err(&x->n, "messages[%zu]: unknown role '%s'", t->src, t->role);
}

/* what follows turn k: nothing when the next turn is not an assistant or latest_reminder one;
 * else its task's token, or the assistant's prompt after a user or developer turn */
static int put_transition(struct enc *x, size_t k, const struct turn *t)
{
	if (k + 1 < x->nr && !is(x->r[k + 1], "assistant") && !is(x->r[k + 1], "latest_reminder"))
		return 0;
	const struct jval *task = task_of(t);
	if (task) {
		for (size_t i = 0; task->k == JV_STR && i < sizeof TASKS / sizeof *TASKS; i++) {
			if (strcmp(task->u.s.p, TASKS[i][0]))
				continue;
			if (i == 0) /* action: the assistant's prompt, then the task's token */
				return put(x, ASSISTANT) < 0 || put(x, x->thinking ? THINK : UNTHINK) < 0
					       ? -1
					       : put(x, TASKS[i][1]);
			return put(x, TASKS[i][1]);
		}
		return native_err(&x->n,
				  "messages[%zu]: invalid task (one of action, query, authority, domain, "
				  "title, read_url)",
				  t->src);
	}
	if (!is(t, "user") && !is(t, "developer"))
		return 0;
	if (put(x, ASSISTANT) < 0)
		return -1;
	return put(x, x->thinking && (!x->drop || (long)k >= x->last_user) ? THINK : UNTHINK);
}

int chat_dsv4_encode(struct jctx *c, struct jval *messages, const struct jval *tools, const struct chat_dsv4_opts *o)
{
	struct enc x = {.n = {.c = c, .name = "deepseek_v4"}, .thinking = o->thinking, .drop = !o->keep_thinking};
	if (o->reasoning_effort && !strcmp(o->reasoning_effort, "none"))
		x.thinking = false;
	x.effort_max = x.thinking && o->reasoning_effort && !strcmp(o->reasoning_effort, "max");
	if (messages->k != JV_LIST)
		return native_err(&x.n, "messages must be a list");
	struct jval msgs = *messages;
	size_t shift;
	if (native_attach_tools(&x.n, &msgs, tools, true, &shift) < 0)
		return -1;
	const struct jlist *m = msgs.u.l;
	size_t n = m->n ? m->n : 1;
	struct block *blocks = jpool_alloc(c->pool, n * sizeof *blocks);
	x.t = jpool_alloc(c->pool, n * sizeof *x.t);
	x.r = jpool_alloc(c->pool, n * sizeof *x.r);
	if (!blocks || !x.t || !x.r)
		return oom(&x);
	if (merge(&x, m, shift, blocks) < 0)
		return -1;
	sort_results(&x);
	for (size_t i = 0; i < x.nt; i++) /* any tools: every turn keeps its thinking */
		if (!is(&x.t[i], "user") && native_has(x.t[i].msg, "tools"))
			x.drop = false;
	for (size_t i = 0; i < x.nt; i++)
		x.r[i] = &x.t[i];
	x.nr = x.nt;
	if (x.thinking && x.drop) { /* the turns before the last user turn that drop_thinking leaves out */
		long last = last_user_of(x.r, x.nr);
		x.nr = 0;
		for (size_t i = 0; i < x.nt; i++)
			if ((long)i >= last || kept_before_last_user(&x.t[i]))
				x.r[x.nr++] = &x.t[i];
	}
	x.last_user = last_user_of(x.r, x.nr);
	int r = put(&x, BOS);
	for (size_t k = 0; !r && k < x.nr; k++)
		r = (k == 0 && x.effort_max && put(&x, EFFORT_MAX) < 0) || put_body(&x, k, x.r[k]) < 0 ||
				    put_transition(&x, k, x.r[k]) < 0
			    ? -1
			    : 0;
	return c->out->oom ? native_err(&x.n, "output size limit exceeded") : r;
}

bool chat_dsv4_for_model(const char *model_dir)
{
	return native_config_is(model_dir, "deepseek_v4", "DeepseekV4ForCausalLM");
}
