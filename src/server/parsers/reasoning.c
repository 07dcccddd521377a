/* DeepSeek's reasoning splits (reasoning.h). */
#include "server/parsers/reasoning.h"

#include <string.h>

#include "server/parsers/tags.h"

static const char OPEN[] = "<think>", CLOSE[] = REASONING_END, DSML_CALLS[] = "<｜DSML｜tool_calls>",
		  KIMI_CALLS[] = "<|tool_calls_section_begin|>";
#define OPEN_LEN (sizeof OPEN - 1)
#define CLOSE_LEN (sizeof CLOSE - 1)

/* IN_CALLS: V4's tool calls began inside the reasoning; they are content, but the first
 * "</think>" is still the reasoning's end, left out as vLLM leaves it out */
enum { AT_START, IN_REASONING, IN_CALLS, IN_CONTENT };

int reasoning_parser_from_name(const char *name)
{
	if (!strcmp(name, "deepseek_r1"))
		return REASONING_DEEPSEEK_R1;
	if (!strcmp(name, "deepseek_v3"))
		return REASONING_DEEPSEEK_V3;
	if (!strcmp(name, "deepseek_v4"))
		return REASONING_DEEPSEEK_V4;
	if (!strcmp(name, "kimi_k2"))
		return REASONING_KIMI_K2;
	if (!strcmp(name, "glm45"))
		return REASONING_GLM45;
	return -1;
}

static bool py_truthy(const json_t *t) /* Python's bool() of a kwarg (absent: false) */
{
	return t && !json_is_false(t) && !json_is_null(t) && !(json_is_number(t) && json_number_value(t) == 0) &&
	       !(json_is_string(t) && !json_string_length(t)) && !(json_is_array(t) && !json_array_size(t)) &&
	       !(json_is_object(t) && !json_object_size(t));
}

bool reasoning_applies(int parser, const json_t *chat_template_kwargs)
{
	const json_t *thinking = json_object_get(chat_template_kwargs, "thinking"),
		     *enable = json_object_get(chat_template_kwargs, "enable_thinking");
	if (parser == REASONING_KIMI_K2) /* bool(kwargs.get("thinking", True)) */
		return !thinking || py_truthy(thinking);
	if (parser == REASONING_GLM45 && !thinking && !enable) /* thinking unless told otherwise */
		return true;
	if (parser == REASONING_GLM45)
		return py_truthy(thinking) || py_truthy(enable);
	if (parser != REASONING_DEEPSEEK_V3 && parser != REASONING_DEEPSEEK_V4)
		return parser == REASONING_DEEPSEEK_R1;
	const char *effort = json_string_value(json_object_get(chat_template_kwargs, "reasoning_effort"));
	if (parser == REASONING_DEEPSEEK_V4 && effort && !strcmp(effort, "none")) /* V4's encoder: no thinking */
		return false;
	return py_truthy(json_object_get(chat_template_kwargs, "thinking")) ||
	       py_truthy(json_object_get(chat_template_kwargs, "enable_thinking"));
}

/* text [p, p + n) is reasoning (IN_REASONING) or tool calls (IN_CALLS); the end of it may begin
 * "</think>" (or, in V4's and Kimi's reasoning, the calls' tag) unless last */
static int reasoning_text(struct reasoning_split *s, const char *p, size_t n, bool last, struct strbuf *reasoning,
			  struct strbuf *content)
{
	if (!n) { /* an empty piece (p may be NULL): nothing to split, nothing held */
		s->n_hold = 0;
		return 0;
	}
	bool calls_end_it = (s->dsml || s->kimi) && s->state == IN_REASONING;
	const char *calls_tag = s->kimi ? KIMI_CALLS : DSML_CALLS;
	size_t calls_len = strlen(calls_tag);
	const char *close = memmem(p, n, CLOSE, CLOSE_LEN),
		   *calls = calls_end_it ? memmem(p, n, calls_tag, calls_len) : NULL;
	if (calls && (!close || calls < close)) { /* the calls are content, from their tag on */
		if (strbuf_put(reasoning, p, (size_t)(calls - p)) < 0)
			return -1;
		if (s->kimi) { /* Kimi: all of the rest is content */
			s->state = IN_CONTENT;
			return strbuf_put(content, calls, n - (size_t)(calls - p));
		}
		s->state = IN_CALLS;
		return reasoning_text(s, calls, n - (size_t)(calls - p), last, reasoning, content);
	}
	struct strbuf *to = s->state == IN_REASONING ? reasoning : content;
	if (close) {
		s->state = IN_CONTENT;
		size_t after = (size_t)(close - p) + CLOSE_LEN;
		if (strbuf_put(to, p, (size_t)(close - p)) < 0)
			return -1;
		return n > after ? strbuf_put(content, p + after, n - after) : 0;
	}
	size_t keep = last ? 0 : tag_partial_tail(p, n, CLOSE, CLOSE_LEN);
	size_t keep_calls = last || !calls_end_it ? 0 : tag_partial_tail(p, n, calls_tag, calls_len);
	keep = keep > keep_calls ? keep : keep_calls;
	if (strbuf_put(to, p, n - keep) < 0)
		return -1;
	memcpy(s->hold, p + n - keep, keep);
	s->n_hold = keep;
	return 0;
}

int reasoning_feed(struct reasoning_split *s, const char *text, size_t len, bool last, struct strbuf *reasoning,
		   struct strbuf *content)
{
	if (s->state == IN_CONTENT)
		return len ? strbuf_put(content, text, len) : 0;
	/* the held bytes (at most 27) go in front of the new text */
	char small[256];
	struct strbuf joined = {0};
	const char *p = text;
	size_t n = len;
	if (s->n_hold) {
		n = s->n_hold + len;
		char *buf = small;
		if (n > sizeof small) {
			if (strbuf_put(&joined, s->hold, s->n_hold) < 0 || strbuf_put(&joined, text, len) < 0) {
				strbuf_fini(&joined);
				return -1;
			}
			buf = joined.p;
		} else {
			memcpy(small, s->hold, s->n_hold);
			if (len)
				memcpy(small + s->n_hold, text, len);
		}
		p = buf;
		s->n_hold = 0;
	}
	int rc = 0;
	if (s->state == AT_START) {
		if (n < OPEN_LEN && !last && !memcmp(p, OPEN, n)) { /* still maybe "<think>" */
			memcpy(s->hold, p, n);
			s->n_hold = n;
			strbuf_fini(&joined);
			return 0;
		}
		s->state = IN_REASONING;
		if (n >= OPEN_LEN && !memcmp(p, OPEN, OPEN_LEN))
			p += OPEN_LEN, n -= OPEN_LEN;
	}
	rc = reasoning_text(s, p, n, last, reasoning, content);
	strbuf_fini(&joined);
	return rc;
}
