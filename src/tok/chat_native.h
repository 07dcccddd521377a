/* What DeepSeek's own prompt encoders (the Python encoding_dsv32.py and encoding_dsv4.py that
 * ship instead of a Jinja template) have in common, for their native ports chat_dsv32.c and
 * chat_dsv4.c: reading message dicts, writing text and JSON as Python's str() and json.dumps
 * (ensure_ascii=False) write them, the DSML invoke of a tool call, the tools and response-format
 * blocks, where the request's tools go, and which checkpoint an encoder is for. Values are the
 * Jinja interpreter's (jinja/jinja.h); the prompt goes to c->out. */
#ifndef MLA_TOK_CHAT_NATIVE_H
#define MLA_TOK_CHAT_NATIVE_H

#include <stdbool.h>
#include <stddef.h>

struct jctx;
struct jval;

/* One encoder's run: its context, and its name for errors ("deepseek_v32" →
 * "deepseek_v32 prompt: messages[2]: ..."). Indices in errors are the caller's: the encoders
 * pass the request's own message index. */
struct native_enc {
	struct jctx *c;
	const char *name;
};

#define NATIVE_DSML "｜DSML｜"

/* d[k] when d is a dict that has k, else NULL */
struct jval *native_field(const struct jval *d, const char *k);
/* d[k] is there and true (Python's bool) */
bool native_has(const struct jval *d, const char *k);
bool native_role_is(const struct jval *msg, const char *role);
/* An assistant message's reasoning: its "reasoning" (vLLM's name) when true, else its
 * "reasoning_content" (the encoders') when true, else NULL. */
const struct jval *native_reasoning(const struct jval *msg);

/* The message "NAME prompt: ..." in c->e; returns -1. */
int native_err(struct native_enc *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s; -1 when the output ran out (c->out->oom, reported at the end). */
int native_put(struct native_enc *x, const char *s);
/* str(v); None and an absent value are "" (Python would write "None", which no prompt means) */
int native_put_text(struct native_enc *x, const struct jval *v);
/* json.dumps(v, ensure_ascii=False) */
int native_put_json(struct native_enc *x, const struct jval *v);

/* "\n\n<｜DSML｜BLOCK>\n" INVOKES "\n</｜DSML｜BLOCK>": the tool_calls of messages[mi] (a list
 * of OpenAI's {"function": {"name", "arguments"}}), one invoke each, "\n" between them:
 *   <｜DSML｜invoke name="NAME">\n PARAMETERS \n</｜DSML｜invoke>
 * with one <｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter> per argument,
 * "\n" between them, a string as it is and any other value as JSON. The arguments are a JSON
 * object text (as OpenAI sends them) or already an object; a text that is not JSON is an error,
 * or with `lenient` (encoding_dsv4.py) the one string argument {"arguments": TEXT}. */
int native_put_calls(struct native_enc *x, size_t mi, const struct jval *calls, const char *block, bool lenient);

/* The "\n\n"-led tools block (tools_head, the JSON of each tool's "function" one a line,
 * tools_tail) and "\n\n## Response Format:..." block of messages[mi], each when the message has
 * "tools" / "response_format". */
int native_put_extras(struct native_enc *x, size_t mi, const struct jval *msg, const char *tools_head,
		      const char *tools_tail);

/* The request's tools (OpenAI form; NULL, None and [] are none) onto *messages: they replace the
 * tools of the first message when it is a system message (or, with developer_too, a developer
 * one), else go on an empty system message put in front (*shift = 1, else 0). *messages becomes a
 * new list when they are put anywhere; the caller's stays as it was. */
int native_attach_tools(struct native_enc *x, struct jval *messages, const struct jval *tools, bool developer_too,
			size_t *shift);

/* Whether DIR/config.json has this model_type, or this name in "architectures". A missing or
 * unreadable file is false. */
bool native_config_is(const char *model_dir, const char *model_type, const char *architecture);

#endif
