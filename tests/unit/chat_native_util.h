/* For the tests of DeepSeek's native prompt encoders (test_chat_dsv32.c, test_chat_dsv4.c):
 * render through the chat-template API with a scratch checkpoint's encoder, compare with a
 * prompt, an error, or a published example. The including test defines native(): the template
 * its checkpoint opens (made once, from open_for). */
#ifndef MLA_TESTS_CHAT_NATIVE_UTIL_H
#define MLA_TESTS_CHAT_NATIVE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "harness.h"
#include "server/parsers/reasoning.h"
#include "tok/chat_template.h"

static struct chat_template *native(void);

/* A scratch model directory tmp (a mkdtemp pattern) with this config.json: the template
 * chat_template_open gives it (NULL when none, or on an error, in *e). */
static struct chat_template *open_for(char *tmp, const char *config, struct err *e)
{
	struct chat_template *t = NULL;
	char path[128];
	if (!mkdtemp(tmp))
		return NULL;
	snprintf(path, sizeof path, "%s/config.json", tmp);
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(config, f);
		fclose(f);
		if (chat_template_open(NULL, tmp, &t, e) < 0)
			t = NULL;
	}
	unlink(path);
	rmdir(tmp);
	return t;
}

/* Render messages (JSON text) with kwargs (JSON text or NULL); malloc'd prompt, or NULL with
 * the error in *e. */
static char *render(const char *messages, const char *kwargs, struct err *e)
{
	json_error_t je;
	json_t *m = json_loads(messages, 0, &je), *k = kwargs ? json_loads(kwargs, 0, &je) : NULL;
	char *out = NULL;
	if (!m || (kwargs && !k))
		err_set(e, "bad test JSON: %s", je.text);
	else if (!native())
		err_set(e, "no native template");
	else if (chat_template_render(native(), m, true, NULL, NULL, k, &out, e) < 0)
		out = NULL;
	json_decref(m);
	json_decref(k);
	return out;
}

static void expect_prompt(const char *what, const char *messages, const char *kwargs, const char *want)
{
	struct err e = {{0}};
	char *got = render(messages, kwargs, &e);
	EXPECTF(got && !strcmp(got, want), "%s: got\n%s\n--- want\n%s\n--- (%s)", what, got ? got : "(null)", want,
		got ? "" : e.msg);
	free(got);
}

static void expect_error(const char *what, const char *messages, const char *kwargs, const char *msg_part)
{
	struct err e = {{0}};
	char *got = render(messages, kwargs, &e);
	EXPECTF(!got && strstr(e.msg, msg_part), "%s: expected an error with '%s', got %s / '%s'", what, msg_part,
		got ? got : "(null)", e.msg);
	free(got);
}

/* One published example: fixture INPUT.json (a messages list, or {"messages", "tools"?}: the
 * tools are passed as the request's) rendered in thinking mode or not must be fixture OUTPUT
 * (without its final newline when final_newline: the V3.2 files have one). */
static void check_vector(const char *input, const char *output, bool thinking, bool final_newline)
{
	char *in = NULL, *want = NULL;
	size_t n_in, n_want = 0;
	struct err e = {{0}};
	EXPECTF(file_read_all(fixture_path(input), &in, &n_in, &e) == 0, "%s", e.msg);
	EXPECTF(file_read_all(fixture_path(output), &want, &n_want, &e) == 0, "%s", e.msg);
	json_t *doc = in ? json_loadb(in, n_in, 0, NULL) : NULL;
	json_t *kwargs = json_pack("{s:b}", "thinking", thinking);
	const json_t *messages = json_is_array(doc) ? doc : json_object_get(doc, "messages");
	if (json_object_get(doc, "tools"))
		json_object_set(kwargs, "tools", json_object_get(doc, "tools"));
	char *got = NULL;
	EXPECTF(messages && native() &&
			chat_template_render(native(), messages, true, NULL, NULL, kwargs, &got, &e) == 0,
		"%s: %s", input, e.msg);
	if (final_newline && want && n_want && want[n_want - 1] == '\n')
		want[--n_want] = 0;
	size_t at = 0;
	while (got && want && at < n_want && got[at] == want[at])
		at++;
	EXPECTF(got && want && strlen(got) == n_want && at == n_want,
		"%s: differs at byte %zu of %zu (got %zu): '%.60s' vs '%.60s'", output, at, n_want,
		got ? strlen(got) : 0, got ? got + at : "", want ? want + at : "");
	free(got);
	free(in);
	free(want);
	json_decref(doc);
	json_decref(kwargs);
}

/* Reasoning parser `parser` splits the output of a one-message request with each of these
 * kwargs (JSON text or NULL) exactly when the encoder's prompt ends inside the thinking. */
static void expect_split_agrees(int parser, const char *const *kw, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct err e = {{0}};
		char *p = render("[{\"role\": \"user\", \"content\": \"q\"}]", kw[i], &e);
		json_t *k = kw[i] ? json_loads(kw[i], 0, NULL) : NULL;
		bool opens = p && strlen(p) >= 7 && !strcmp(p + strlen(p) - 7, "<think>");
		EXPECTF(p && opens == reasoning_applies(parser, k), "kwargs %s: prompt %s, split %d",
			kw[i] ? kw[i] : "(none)", p ? p : e.msg, reasoning_applies(parser, k));
		json_decref(k);
		free(p);
	}
}

#endif
