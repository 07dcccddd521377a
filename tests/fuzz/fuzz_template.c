/* Fuzz target "template": the Jinja chat-template engine (jinja/jinja_*.c).
 *   byte 0 even: the rest is a template's source, compiled and (when it compiles) rendered
 *                with a fixed conversation; errors are messages, rendering is bounded;
 *   byte 0 odd:  the rest is JSON {"messages": ..., "kwargs": ...} (or any JSON, taken as
 *                the messages) rendered by DeepSeek's real templates (tests/fixtures/templates).
 * Properties: compile and render return 0 with text or -1 with a message. */
#include <string.h>

#include <jansson.h>

#include "fuzz/fuzz.h"
#include "tok/chat_template.h"

const char fuzz_name[] = "template";

static const char *const real_names[] = {"deepseek-v3", "deepseek-r1", "deepseek-v2-lite-chat"};
#define N_REAL (sizeof real_names / sizeof *real_names)
static struct chat_template *real[N_REAL];
static json_t *fixed_messages, *fixed_kwargs;

static void setup(void)
{
	struct err e;
	for (size_t i = 0; i < N_REAL; i++) {
		char path[256];
		snprintf(path, sizeof path, "tests/fixtures/templates/%s.jinja", real_names[i]);
		FILE *f = fopen(path, "rb");
		FUZZ_SETUP(f, path);
		static char src[65536];
		size_t n = fread(src, 1, sizeof src - 1, f);
		fclose(f);
		src[n] = 0;
		FUZZ_SETUP(chat_template_compile(src, &real[i], &e) == 0, e.msg);
	}
	fixed_messages = json_loads(
		"[{\"role\":\"system\",\"content\":\"Be brief.\"},"
		"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"},{\"type\":\"text\",\"text\":"
		"\"there\"}]},"
		"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"id\":\"c1\","
		"\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1}\"}}]},"
		"{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"},"
		"{\"role\":\"assistant\",\"content\":\"<think>x</think>The answer is 42.\"},"
		"{\"role\":\"user\",\"content\":\"Again\"}]",
		0, NULL);
	fixed_kwargs = json_loads(
		"{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}],"
		"\"thinking\":true,\"n\":3,\"s\":\"str\",\"l\":[1,\"a\",null,2.5]}",
		0, NULL);
	FUZZ_SETUP(fixed_messages && fixed_kwargs, "the fixed conversation");
}

static void render(const struct chat_template *t, const json_t *messages, bool gen, const json_t *kwargs)
{
	char *text = NULL;
	struct err e;
	e.msg[0] = 0;
	if (chat_template_render(t, messages, gen, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", kwargs, &text,
				 &e) == 0) {
		FUZZ_CHECK(text);
		free(text);
	} else {
		FUZZ_CHECK(!text && e.msg[0]);
	}
	/* the server's render: the history converted as vLLM does (tok/chat_history.h) */
	e.msg[0] = 0;
	if (chat_template_render_vllm(t, messages, CHAT_CONTENT_AUTO, gen, NULL, NULL, kwargs, &text, &e) == 0) {
		FUZZ_CHECK(text);
		free(text);
	} else {
		FUZZ_CHECK(!text && e.msg[0]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!fixed_messages)
		setup();
	if (size < 1 || size > 8192)
		return 0;
	bool gen = data[0] & 2;
	if (!(data[0] & 1)) {
		char *src = malloc(size);
		if (!src)
			return 0;
		memcpy(src, data + 1, size - 1);
		src[size - 1] = 0;
		struct chat_template *t = NULL;
		struct err e;
		e.msg[0] = 0;
		if (chat_template_compile(src, &t, &e) == 0) {
			render(t, fixed_messages, gen, (data[0] & 4) ? fixed_kwargs : NULL);
			chat_template_free(t);
		} else {
			FUZZ_CHECK(!t && e.msg[0]);
		}
		free(src);
		return 0;
	}
	json_t *j = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY, NULL);
	if (!j)
		return 0;
	const json_t *messages = json_object_get(j, "messages"), *kwargs = json_object_get(j, "kwargs");
	if (!messages)
		messages = j;
	if (kwargs && !json_is_object(kwargs))
		kwargs = NULL;
	render(real[(data[0] >> 2) % N_REAL], messages, gen, kwargs);
	json_decref(j);
	return 0;
}
