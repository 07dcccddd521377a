/* DeepSeek tool-call parsers (tool_calls.h). */
#include "server/parsers/tool_calls.h"

#include <stdlib.h>
#include <string.h>

#include "server/parsers/jstr.h"
#include "server/parsers/tool_calls_kimi_glm.h"
#include "base/pyjson.h"
#include "server/parsers/tags.h"
#include "base/utf8.h"

static const char CALLS_BEGIN[] = "<｜tool▁calls▁begin｜>", CALL_BEGIN[] = "<｜tool▁call▁begin｜>",
		  CALL_END[] = "<｜tool▁call▁end｜>", SEP[] = "<｜tool▁sep｜>", JSON_OPEN[] = "\n```json\n",
		  JSON_CLOSE[] = "\n```";
#define LEN(s) (sizeof(s) - 1)

#define DSML "｜DSML｜"
/* the block the invokes are in: V3.2's, then V4's, each after the "\n\n" that ends the content */
static const char *const DSML_CALLS[2][2] = {{"<" DSML "function_calls>", "\n\n<" DSML "function_calls>"},
					     {"<" DSML "tool_calls>", "\n\n<" DSML "tool_calls>"}};
static const char DSML_INVOKE[] = "<" DSML "invoke", DSML_INVOKE_END[] = "</" DSML "invoke>",
		  DSML_PARAM[] = "<" DSML "parameter", DSML_PARAM_END[] = "</" DSML "parameter>";

int tool_parser_from_name(const char *name)
{
	if (!strcmp(name, "deepseek_v3"))
		return TOOL_PARSER_DEEPSEEK_V3;
	if (!strcmp(name, "deepseek_v31"))
		return TOOL_PARSER_DEEPSEEK_V31;
	if (!strcmp(name, "deepseek_v32"))
		return TOOL_PARSER_DEEPSEEK_V32;
	if (!strcmp(name, "deepseek_v4"))
		return TOOL_PARSER_DEEPSEEK_V4;
	if (!strcmp(name, "kimi_k2"))
		return TOOL_PARSER_KIMI_K2;
	if (!strcmp(name, "glm47"))
		return TOOL_PARSER_GLM47;
	return -1;
}

static const char *find(const char *p, const char *end, const char *s, size_t n)
{
	return end > p ? memmem(p, (size_t)(end - p), s, n) : NULL;
}

/* one call's text between CALL_BEGIN and CALL_END → {"id", "type", "function"}, or NULL when
 * it does not have the parser's shape (*oom set when memory ran out) */
static json_t *one_call(int parser, const char *p, const char *end, bool *oom)
{
	const char *sep = find(p, end, SEP, LEN(SEP));
	if (!sep)
		return NULL;
	const char *type = "function", *name = p, *name_end = sep, *args = sep + LEN(SEP), *args_end = end;
	size_t type_len = strlen(type);
	if (parser == TOOL_PARSER_DEEPSEEK_V3) {
		/* TYPE<sep>NAME\n```json\nARGS\n``` */
		type = p, type_len = (size_t)(sep - p);
		name = sep + LEN(SEP);
		name_end = find(name, end, JSON_OPEN, LEN(JSON_OPEN));
		if (!name_end || (size_t)(end - name_end) < LEN(JSON_OPEN) + LEN(JSON_CLOSE) ||
		    memcmp(end - LEN(JSON_CLOSE), JSON_CLOSE, LEN(JSON_CLOSE)))
			return NULL;
		args = name_end + LEN(JSON_OPEN);
		args_end = end - LEN(JSON_CLOSE);
		if (args_end < args)
			return NULL;
	}
	if (name_end == name || memchr(name, '\n', (size_t)(name_end - name)))
		return NULL;
	char id[64];
	jstr_random_id(id, sizeof id, "chatcmpl-tool-");
	json_t *call = json_pack("{s:s, s:o, s:{s:o, s:o}}", "id", id, "type", jstr_new(type, type_len), "function",
				 "name", jstr_new(name, (size_t)(name_end - name)), "arguments",
				 jstr_new(args, (size_t)(args_end - args)));
	if (!call)
		*oom = true;
	return call;
}

static json_t *call_json(const char *name, size_t name_len, json_t *args)
{
	char id[64];
	jstr_random_id(id, sizeof id, "chatcmpl-tool-");
	return json_pack("{s:s, s:s, s:{s:o, s:o}}", "id", id, "type", "function", "function", "name",
			 jstr_new(name, name_len), "arguments", args);
}

/* ---- DSML (deepseek_v32, deepseek_v4) ---- */

static bool is_dsml(int parser) { return parser == TOOL_PARSER_DEEPSEEK_V32 || parser == TOOL_PARSER_DEEPSEEK_V4; }

/* the tag that opens the calls (nl: with the "\n\n" before it) */
static const char *calls_tag(int parser, bool nl)
{
	if (parser == TOOL_PARSER_KIMI_K2)
		return KIMI_SECTION_BEGIN;
	if (parser == TOOL_PARSER_GLM47)
		return GLM_CALL_BEGIN;
	return is_dsml(parser) ? DSML_CALLS[parser == TOOL_PARSER_DEEPSEEK_V4][nl] : CALLS_BEGIN;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Python's str.isspace() over ASCII (or an empty text) */
static bool all_space(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_space(p[i]))
			return false;
	return true;
}

static const char *skip_space(const char *p, const char *end)
{
	while (p < end && is_space(*p))
		p++;
	return p;
}

/* at p: whitespace (at least one char), KEY="VALUE" with a VALUE of at least one char and no
 * quote; the end of it, or NULL */
static const char *dsml_attr(const char *p, const char *end, const char *key, const char **v, size_t *vn)
{
	const char *q = skip_space(p, end);
	size_t kl = strlen(key);
	if (q == p || (size_t)(end - q) < kl + 2 || memcmp(q, key, kl) || q[kl] != '=' || q[kl + 1] != '"')
		return NULL;
	q += kl + 2;
	const char *close = memchr(q, '"', (size_t)(end - q));
	if (!close || close == q)
		return NULL;
	*v = q;
	*vn = (size_t)(close - q);
	return close + 1;
}

/* at p: optional whitespace, then ">"; the end of it, or NULL */
static const char *dsml_gt(const char *p, const char *end)
{
	p = p ? skip_space(p, end) : NULL;
	return p && p < end && *p == '>' ? p + 1 : NULL;
}

/* One parameter's value as JSON: string="true" a string as written, else the JSON it is (a
 * string as written when it is not JSON). */
static json_t *dsml_value(const char *v, size_t n, bool is_string)
{
	json_t *j = is_string ? NULL : json_loadb(v, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	return j ? j : jstr_new(v, n);
}

/* The parameters in [p, end) (an invoke's body) into args, later ones of a name replacing the
 * earlier value (a Python dict). 0, -1 out of memory. */
static int dsml_params(const char *p, const char *end, json_t *args)
{
	for (const char *at; (at = find(p, end, DSML_PARAM, LEN(DSML_PARAM)));) {
		const char *name, *flag, *q;
		size_t name_len, flag_len;
		p = at + 1; /* where the search goes on when this one does not match */
		q = dsml_attr(at + LEN(DSML_PARAM), end, "name", &name, &name_len);
		q = q ? dsml_attr(q, end, "string", &flag, &flag_len) : NULL;
		if (!q ||
		    !((flag_len == 4 && !memcmp(flag, "true", 4)) || (flag_len == 5 && !memcmp(flag, "false", 5))) ||
		    !(q = dsml_gt(q, end)))
			continue;
		const char *close = find(q, end, DSML_PARAM_END, LEN(DSML_PARAM_END));
		if (!close) /* nor can a later one end */
			break;
		p = close + LEN(DSML_PARAM_END);
		if (!utf8_valid(name, name_len, NULL)) /* not a key JSON can hold: the parameter is dropped */
			continue;
		json_t *v = dsml_value(q, (size_t)(close - q), flag_len == 4);
		if (!v || json_object_setn_new(args, name, name_len, v) < 0)
			return -1;
	}
	return 0;
}

/* Every whole <｜DSML｜invoke name="NAME">...</｜DSML｜invoke> from p on, as calls whose
 * arguments are the parameters as json.dumps writes them. 0, -1 out of memory. */
static int dsml_invokes(const char *p, const char *end, json_t *calls)
{
	for (const char *at; (at = find(p, end, DSML_INVOKE, LEN(DSML_INVOKE)));) {
		const char *name, *body;
		size_t name_len;
		p = at + 1;
		body = dsml_gt(dsml_attr(at + LEN(DSML_INVOKE), end, "name", &name, &name_len), end);
		if (!body)
			continue;
		const char *close = find(body, end, DSML_INVOKE_END, LEN(DSML_INVOKE_END));
		if (!close) /* nor can a later one end */
			break;
		p = close + LEN(DSML_INVOKE_END);
		json_t *args = json_object();
		struct strbuf text = {0};
		json_t *call = !args || dsml_params(body, close, args) < 0 || pyjson_dump(args, &text) < 0
				       ? NULL
				       : call_json(name, name_len, jstr_new(text.p ? text.p : "", text.n));
		json_decref(args);
		strbuf_fini(&text);
		if (!call || json_array_append_new(calls, call) < 0)
			return -1;
	}
	return 0;
}

/* Where the calls begin in [k, k + n) (NULL: not yet), and where the content ends: before the
 * "\n\n" that the encoder puts between content and calls. */
static const char *calls_begin(int parser, const char *k, size_t n, const char **content_end)
{
	const char *tag = calls_tag(parser, false), *b = k ? find(k, k + n, tag, strlen(tag)) : NULL;
	*content_end = b;
	if (b && is_dsml(parser) && b - k >= 2 && !memcmp(b - 2, "\n\n", 2))
		*content_end = b - 2;
	return b;
}

/* How many bytes at the end of [k, k + n) may begin the calls */
static size_t calls_partial(int parser, const char *k, size_t n)
{
	const char *tag = calls_tag(parser, false), *nl_tag = calls_tag(parser, true);
	size_t a = tag_partial_tail(k, n, tag, strlen(tag));
	if (!is_dsml(parser))
		return a;
	size_t b = tag_partial_tail(k, n, nl_tag, strlen(nl_tag));
	return a > b ? a : b;
}

int tool_calls_parse(int parser, const char *text, size_t len, json_t **calls, size_t *content_len)
{
	return tool_calls_parse_typed(parser, NULL, text, len, calls, content_len);
}

int tool_calls_parse_typed(int parser, const json_t *tools, const char *text, size_t len, json_t **calls,
			   size_t *content_len)
{
	*content_len = len;
	if (!(*calls = json_array()))
		return -1;
	if (parser == TOOL_PARSER_KIMI_K2 || parser == TOOL_PARSER_GLM47) {
		const char *tag = calls_tag(parser, false),
			   *b = text ? find(text, text + len, tag, strlen(tag)) : NULL;
		if (b && (parser == TOOL_PARSER_KIMI_K2 ? kimi_k2_calls(b, text + len, *calls)
							: glm47_calls(b, text + len, tools, *calls)) < 0) {
			json_decref(*calls);
			*calls = NULL;
			return -1;
		}
		if (json_array_size(*calls))
			*content_len = parser == TOOL_PARSER_GLM47 && all_space(text, (size_t)(b - text))
					       ? 0
					       : (size_t)(b - text);
		return 0;
	}
	if (is_dsml(parser)) {
		const char *cend, *b = calls_begin(parser, text, len, &cend);
		if (b && dsml_invokes(b + strlen(calls_tag(parser, false)), text + len, *calls) < 0) {
			json_decref(*calls);
			*calls = NULL;
			return -1;
		}
		if (json_array_size(*calls))
			*content_len = (size_t)(cend - text);
		return 0;
	}
	const char *end = text + len, *begin = text ? find(text, end, CALLS_BEGIN, LEN(CALLS_BEGIN)) : NULL;
	if (!begin)
		return 0;
	bool oom = false;
	for (const char *p = begin + LEN(CALLS_BEGIN);;) {
		const char *cb = find(p, end, CALL_BEGIN, LEN(CALL_BEGIN));
		const char *ce = cb ? find(cb + LEN(CALL_BEGIN), end, CALL_END, LEN(CALL_END)) : NULL;
		if (!ce)
			break;
		json_t *call = one_call(parser, cb + LEN(CALL_BEGIN), ce, &oom);
		if (oom || (call && json_array_append_new(*calls, call) < 0)) {
			json_decref(*calls);
			*calls = NULL;
			return -1;
		}
		p = ce + LEN(CALL_END);
	}
	if (json_array_size(*calls))
		*content_len = (size_t)(begin - text);
	return 0;
}

int tool_split_feed(struct tool_split *s, int parser, const char *text, size_t len, bool last, struct strbuf *content,
		    json_t **calls)
{
	*calls = NULL;
	if (len && strbuf_put(&s->kept, text, len) < 0)
		return -1;
	if (!s->in_calls) {
		const char *k = s->kept.p, *cend, *begin = calls_begin(parser, k, s->kept.n, &cend);
		size_t out = begin  ? (size_t)(cend - k)
			     : last ? s->kept.n
				    : s->kept.n - calls_partial(parser, k, s->kept.n);
		/* glm47: content of only whitespace before the calls is none; held until told */
		if (parser == TOOL_PARSER_GLM47 && !s->emitted && (begin || !last) && all_space(k, out))
			out = 0;
		s->emitted = s->emitted || out;
		if (out && strbuf_put(content, k, out) < 0)
			return -1;
		if (out) {
			memmove(s->kept.p, k + out, s->kept.n - out);
			s->kept.n -= out;
		}
		s->in_calls = begin != NULL;
	}
	if (!last || !s->in_calls)
		return 0;
	size_t content_len;
	if (tool_calls_parse_typed(parser, s->tools, s->kept.p, s->kept.n, calls, &content_len) < 0)
		return -1;
	if (json_array_size(*calls) == 0) { /* nothing parsed: all of it is content */
		json_decref(*calls);
		*calls = NULL;
		return strbuf_put(content, s->kept.p, s->kept.n);
	}
	return content_len ? strbuf_put(content, s->kept.p, content_len) : 0;
}

void tool_split_fini(struct tool_split *s) { strbuf_fini(&s->kept); }

int tool_calls_forced(bool required, const char *name, const char *text, size_t len, json_t **calls)
{
	*calls = NULL;
	json_t *a = json_array();
	if (!a)
		return -1;
	if (!required) {
		json_t *c = call_json(name, strlen(name), jstr_new(text, len));
		if (!c || json_array_append_new(a, c) < 0) {
			json_decref(a);
			return -1;
		}
		*calls = a;
		return 0;
	}
	json_t *v = json_loadb(text, len, JSON_ALLOW_NUL, NULL);
	for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++) {
		const json_t *e = json_array_get(v, i), *n = json_object_get(e, "name"),
			     *params = json_object_get(e, "parameters");
		if (!json_is_string(n) || !params)
			goto whole_not_calls;
		struct strbuf args = {0};
		json_t *c = pyjson_dump(params, &args) < 0
				    ? NULL
				    : call_json(json_string_value(n), json_string_length(n), jstr_new(args.p, args.n));
		strbuf_fini(&args);
		if (!c || json_array_append_new(a, c) < 0) {
			json_decref(v);
			json_decref(a);
			return -1;
		}
	}
	if (!json_is_array(v) || !json_array_size(a))
		goto whole_not_calls;
	json_decref(v);
	*calls = a;
	return 0;
whole_not_calls:
	json_decref(v);
	json_decref(a);
	return 0;
}

int tool_forced_feed(struct tool_split *s, bool required, const char *name, const char *text, size_t len, bool last,
		     struct strbuf *content, json_t **calls)
{
	*calls = NULL;
	if (!required) {           /* named: the arguments stream as they come, as vLLM streams them */
		if (!len && !last) /* the last delta always comes: its chunk finishes "tool_calls" */
			return 0;
		const char *tx = text ? text : ""; /* an empty piece may come without a buffer */
		json_t *c = s->in_calls ? json_pack("{s:{s:o}}", "function", "arguments", jstr_new(tx, len))
					: call_json(name, strlen(name), jstr_new(tx, len));
		if (!c || !(*calls = json_array()) || json_array_append_new(*calls, c) < 0) {
			json_decref(*calls);
			*calls = NULL;
			return -1;
		}
		s->in_calls = true;
		return 0;
	}
	if (len && strbuf_put(&s->kept, text, len) < 0)
		return -1;
	if (!last)
		return 0;
	if (tool_calls_forced(required, name, s->kept.p, s->kept.n, calls) < 0)
		return -1;
	return *calls ? 0 : strbuf_put(content, s->kept.p, s->kept.n);
}
