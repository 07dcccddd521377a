/* Chat templates rendered byte for byte as transformers renders them (jinja2 with
 * trim_blocks/lstrip_blocks): the three DeepSeek templates saved in tests/fixtures/templates/
 * and the common ChatML / Qwen2.5 / Llama-3 / Llama-3.1 templates, for single-turn,
 * multi-turn, system-first, generation prompt on and off, tool calls and R1's reasoning
 * removal. Expected strings were produced by jinja2 3.1.6 in transformers' environment and
 * are written out literally. Plus: error reporting (compile and runtime) and robustness. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tok/chat_template.h"
#include "io/hf_config.h"

static const char BOS[] = "<｜begin▁of▁sentence｜>", EOS[] = "<｜end▁of▁sentence｜>";

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *s = malloc((size_t)n + 1);
	if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
		free(s);
		s = NULL;
	}
	if (s)
		s[n] = 0;
	fclose(f);
	return s;
}

#include "chat_template_cases.h"

/* Render `src` with messages/kwargs given as JSON text; returns malloc'd text or NULL (err). */
static char *render(const char *src, const char *messages, bool agp, const char *bos, const char *eos,
		    const char *kwargs, struct err *e)
{
	struct chat_template *t;
	char *out = NULL;
	if (chat_template_compile(src, &t, e) < 0)
		return NULL;
	json_error_t je;
	json_t *m = json_loads(messages, 0, &je), *kw = kwargs ? json_loads(kwargs, 0, &je) : NULL;
	if (!m || (kwargs && !kw))
		err_set(e, "bad test JSON: %s", je.text);
	else
		chat_template_render(t, m, agp, bos, eos, kw, &out, e);
	json_decref(m);
	json_decref(kw);
	chat_template_free(t);
	return out;
}

static void expect_render(const struct render_case *c)
{
	char *src = NULL;
	const char *text = inline_source(c->tpl);
	if (!text) {
		char rel[256];
		snprintf(rel, sizeof rel, "templates/%s.jinja", c->tpl);
		src = slurp(fixture_path(rel));
		text = src;
	}
	if (!text) {
		EXPECTF(0, "%s: template %s not found", c->name, c->tpl);
		return;
	}
	struct err e = {{0}};
	char *out = render(text, c->messages, c->add_generation_prompt, c->bos, c->eos, c->kwargs, &e);
	if (!out)
		EXPECTF(0, "%s: %s", c->name, e.msg);
	else
		EXPECTF(!strcmp(out, c->expect), "%s:\n got  [%s]\n want [%s]", c->name, out, c->expect);
	free(out);
	free(src);
}

static void run_prefix(const char *prefix)
{
	int n = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!strncmp(cases[i].name, prefix, strlen(prefix))) {
			expect_render(&cases[i]);
			n++;
		}
	EXPECTF(n > 0, "no cases for %s", prefix);
}

static void test_deepseek_v3(void) { run_prefix("deepseek-v3"); }
static void test_deepseek_r1(void) { run_prefix("deepseek-r1"); }
static void test_deepseek_v2_lite(void) { run_prefix("deepseek-v2-lite-chat"); }
static void test_chatml(void) { run_prefix("chatml"); }
static void test_qwen25(void) { run_prefix("qwen25"); }
static void test_llama3(void) { run_prefix("llama3 "); }
static void test_llama31(void) { run_prefix("llama31"); }

/* The rendered examples written in the spec (D.3), independently of the table above. */
static void test_spec_examples(void)
{
	static const char *msgs = "[{\"role\":\"system\",\"content\":\"You are helpful.\"},{\"role\":\"user\","
				  "\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello!\"},"
				  "{\"role\":\"user\",\"content\":\"2+2?\"}]";
	static const struct {
		const char *tpl, *messages, *expect;
	} ex[] = {
		{"deepseek-v2-lite-chat", NULL,
		 "<｜begin▁of▁sentence｜>You are helpful.\n\nUser: Hi\n\nAssistant: "
		 "Hello!<｜end▁of▁sentence｜>User: 2+2?\n\nAssistant:"},
		{"deepseek-v3", NULL,
		 "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!"
		 "<｜end▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜>"},
		{"deepseek-r1", NULL,
		 "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!"
		 "<｜end▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜><think>\n"},
		{"deepseek-v2-lite-chat", "[{\"role\":\"user\",\"content\":\"Hi\"}]",
		 "<｜begin▁of▁sentence｜>User: Hi\n\nAssistant:"},
		{"deepseek-v3", "[{\"role\":\"user\",\"content\":\"Hi\"}]",
		 "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>"},
	};
	for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
		struct render_case c = {ex[i].tpl, ex[i].tpl,   ex[i].messages ? ex[i].messages : msgs, true, BOS, EOS,
					NULL,      ex[i].expect};
		expect_render(&c);
	}
}

/* The tiny checkpoints' tokenizer_config.json carry the same templates; render through
 * hf_config like the CLI and the server do. */
static void test_from_tokenizer_config(void)
{
	static const struct {
		const char *dir, *expect;
	} dirs[] = {
		{"tiny-v3", "<｜begin▁of▁sentence｜>S<｜User｜>Hi<｜Assistant｜>"},
		{"tiny-r1", "<｜begin▁of▁sentence｜>S<｜User｜>Hi<｜Assistant｜><think>\n"},
		{"tiny-v2", "<｜begin▁of▁sentence｜>S\n\nUser: Hi\n\nAssistant:"},
		{"tokenizer", "<｜begin▁of▁sentence｜>S\n\nUser: Hi\n\nAssistant:"},
	};
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		struct hf_config cfg;
		struct err e = {{0}};
		if (hf_config_load(fixture_path(dirs[i].dir), &cfg, &e) < 0) {
			EXPECTF(0, "%s: %s", dirs[i].dir, e.msg);
			continue;
		}
		char *out = cfg.chat_template ? render(cfg.chat_template,
						       "[{\"role\":\"system\",\"content\":\"S\"},"
						       "{\"role\":\"user\",\"content\":\"Hi\"}]",
						       true, cfg.bos_token, cfg.eos_token, NULL, &e)
					      : NULL;
		EXPECTF(out && !strcmp(out, dirs[i].expect), "%s: got [%s] (%s)", dirs[i].dir, out ? out : "", e.msg);
		free(out);
		hf_config_free(&cfg);
	}
}

/* kwargs reach the template and override the defaults; tools defaults to none */
static void test_kwargs(void)
{
	struct err e = {{0}};
	char *out = render(
		"{{ tools is none }}|{{ documents is none }}|{{ flag }}|{{ bos_token }}|{{ eos_token is defined }}",
		"[]", false, "<s>", NULL, "{\"flag\": [1, \"x\"]}", &e);
	EXPECTF(out && !strcmp(out, "True|True|[1, 'x']|<s>|False"), "got [%s] %s", out ? out : "", e.msg);
	free(out);
	out = render("{{ add_generation_prompt }}{{ bos_token }}", "[]", true, "<s>", NULL,
		     "{\"add_generation_prompt\": false, \"bos_token\": \"B\"}", &e);
	EXPECTF(out && !strcmp(out, "FalseB"), "got [%s] %s", out ? out : "", e.msg);
	free(out);
	/* messages are passed through: extra fields visible, input JSON not modified */
	json_t *m = json_loads("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
			       "{\"type\":\"text\",\"text\":\"b\"}],\"name\":\"bob\"}]",
			       0, NULL);
	struct chat_template *t;
	EXPECT(chat_template_compile("{{ messages[0].content }}|{{ messages[0].name }}", &t, &e) == 0);
	EXPECT(chat_template_render(t, m, false, NULL, NULL, NULL, &out, &e) == 0);
	EXPECTF(out && !strcmp(out, "a\nb|bob"), "got [%s]", out ? out : "");
	EXPECT(json_is_array(json_object_get(json_array_get(m, 0), "content")));
	free(out);
	chat_template_free(t);
	json_decref(m);
}

static void expect_compile_error(const char *src, const char *want)
{
	struct chat_template *t = NULL;
	struct err e = {{0}};
	int r = chat_template_compile(src, &t, &e);
	EXPECTF(r < 0 && !t, "compiled but should not: %s", src);
	EXPECTF(r < 0 && strstr(e.msg, want), "error [%s] lacks [%s]", e.msg, want);
	chat_template_free(t);
}

static void test_compile_errors(void)
{
	expect_compile_error("a\nb\n{{ x|wordcount }}", "chat template line 3: unsupported filter \"wordcount\"");
	expect_compile_error("{% if x is prime %}{% endif %}", "line 1: unsupported test \"prime\"");
	expect_compile_error("{% include 'other.jinja' %}", "line 1: unsupported statement \"include\"");
	expect_compile_error("{% extends 'base' %}", "unsupported statement \"extends\"");
	expect_compile_error("x\n{% for m in messages %}\n{{ m }}", "unclosed \"for\" block (opened on line 2)");
	expect_compile_error("{% if a %}{% else %}", "unclosed \"if\" block");
	expect_compile_error("{% macro f() %}", "unclosed \"macro\" block");
	expect_compile_error("{% endif %}", "line 1: unexpected \"endif\"");
	expect_compile_error("{% for x in y %}{% endif %}", "unexpected \"endif\"");
	expect_compile_error("{{ 1 + }}", "line 1: expected an expression");
	expect_compile_error("{{ (1 }}", "line 1: unexpected '}', expected ')'");
	expect_compile_error("{{ (1 ", "unbalanced brackets in \"{{\" tag");
	expect_compile_error("{{ 1) }}", "unexpected ')'");
	expect_compile_error("{{ 'abc }}", "unterminated string literal");
	expect_compile_error("{# never closed", "unclosed comment");
	expect_compile_error("{{ x ", "unclosed \"{{\" tag");
	expect_compile_error("{% break %}", "\"break\" outside a for loop");
	expect_compile_error("{% frobnicate %}", "unknown statement \"frobnicate\"");
	expect_compile_error("{{ a $ b }}", "unexpected character '$'");
	expect_compile_error("{% for x in y recursive %}{% endfor %}", "unsupported recursive for loop");
	/* deep nesting is an error, not a stack overflow */
	char *deep = malloc(200001);
	memset(deep, '(', 200000);
	deep[200000] = 0;
	char *src = malloc(200010);
	snprintf(src, 200010, "{{ %s", deep);
	expect_compile_error(src, "nested too deeply");
	free(deep);
	free(src);
}

static void expect_render_error(const char *src, const char *messages, const char *want)
{
	struct err e = {{0}};
	char *out = render(src, messages ? messages : "[]", true, "<s>", "</s>", NULL, &e);
	EXPECTF(!out && strstr(e.msg, want), "%s: got [%s] error [%s], want [%s]", src, out ? out : "(null)", e.msg,
		want);
	free(out);
}

static void test_runtime_errors(void)
{
	expect_render_error(
		"{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}", NULL,
		"chat template: Conversation roles must alternate user/assistant/user/assistant/...");
	/* Mistral-style alternation check */
	expect_render_error("{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
			    "{{ raise_exception('roles must alternate') }}{% endif %}{% endfor %}",
			    "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]",
			    "chat template: roles must alternate");
	expect_render_error("x\n{{ 'a' + 1 }}", NULL,
			    "chat template line 2: can only concatenate str (not \"int\") to str");
	expect_render_error("{{ 1 + 'a' }}", NULL, "unsupported operand type(s) for +: 'int' and 'str'");
	expect_render_error("{{ nothing + 'a' }}", NULL, "'nothing' is undefined");
	expect_render_error("{{ nothing.attr }}", NULL, "'nothing' is undefined");
	expect_render_error("{{ 1 // 0 }}", NULL, "division or modulo by zero");
	expect_render_error("{{ nothing|tojson }}", NULL, "not JSON serializable");
	expect_render_error("{{ 'abc'.nomethod() }}", NULL, "'str object' has no attribute 'nomethod'");
	expect_render_error("{{ messages.append(1) }}", NULL, "has no attribute 'append'");
	expect_render_error("{% set x = 1 %}{% set x.y = 2 %}", NULL,
			    "cannot assign attribute on non-namespace object");
	/* V3 with an assistant tool call whose content is a string: R1 concatenates None */
	expect_render_error("{{ 'a' + none }}", NULL, "(not \"NoneType\") to str");
	/* limits: runaway loops and recursion stop with an error */
	expect_render_error("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", NULL,
			    "loop iteration limit exceeded");
	expect_render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL,
			    "recursion limit exceeded");
	/* deep expressions inside recursive macros: 64 calls x 200 nested "-" overflowed the stack
	 * under ASan (found by tests/fuzz/fuzz_template.c); all nesting together is bounded */
	{
		char src[1024] = "{% macro f(n) %}{{ ";
		for (int i = 0; i < 200; i++)
			strcat(src, "-");
		strcat(src, "f(n) }}{% endmacro %}{{ f(1) }}");
		expect_render_error(src, NULL, "nesting limit exceeded");
	}
	expect_render_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
			    "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}",
			    NULL, "limit");
	/* bad inputs */
	expect_render_error("{{ 1 }}", "{\"not\": \"an array\"}", "messages must be an array");
	expect_render_error("{{ 1 }}", "[\"not an object\"]", "messages[0] must be an object");
	expect_render_error("{{ 1 }}", "[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]",
			    "messages[0].content[0]: only");
}

/* Truncating or corrupting a real template anywhere gives an error or a render, never a
 * crash (run under ASan in `make asan`). */
static void test_mangled_templates_never_crash(void)
{
	char *src = slurp(fixture_path("templates/deepseek-r1.jinja"));
	if (!src) {
		EXPECTF(0, "templates/deepseek-r1.jinja not found");
		return;
	}
	json_t *m = json_loads("[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Hi\"},"
			       "{\"role\":\"assistant\",\"content\":\"<think>x</think>A\"}]",
			       0, NULL);
	size_t n = strlen(src);
	char *buf = malloc(n + 1);
	int compiled = 0, failed = 0;
	static const char junk[] = "{%}#-'\"([|.";
	for (size_t cut = 0; cut <= n; cut += 7) {
		for (int mode = 0; mode < 3; mode++) {
			memcpy(buf, src, n + 1);
			if (mode == 0)
				buf[cut] = 0; /* truncation */
			else if (cut < n)
				buf[cut] = junk[(cut / 7 + (size_t)mode) % (sizeof junk - 1)]; /* corruption */
			struct chat_template *t;
			struct err e = {{0}};
			char *out = NULL;
			if (chat_template_compile(buf, &t, &e) < 0) {
				failed++;
				EXPECT(strncmp(e.msg, "chat template", 13) == 0);
				continue;
			}
			compiled++;
			chat_template_render(t, m, true, BOS, EOS, NULL, &out, &e);
			free(out);
			chat_template_free(t);
		}
	}
	EXPECT(compiled > 0 && failed > 0);
	free(buf);
	free(src);
	json_decref(m);
}

/* One compiled template rendered from several threads at once (the server does this). */
struct thread_arg {
	const struct chat_template *t;
	const json_t *m;
	int bad;
};

static void *render_many(void *p)
{
	struct thread_arg *a = p;
	for (int i = 0; i < 200; i++) {
		char *out = NULL;
		struct err e;
		if (chat_template_render(a->t, a->m, true, BOS, EOS, NULL, &out, &e) < 0 ||
		    strcmp(out, "<｜begin▁of▁sentence｜>S<｜User｜>Hi<｜Assistant｜>A<｜end▁of▁sentence｜><"
				"｜Assistant｜><think>\n"))
			a->bad++;
		free(out);
	}
	return NULL;
}

static void test_concurrent_renders(void)
{
	char *src = slurp(fixture_path("templates/deepseek-r1.jinja"));
	struct chat_template *t = NULL;
	struct err e;
	if (!src || chat_template_compile(src, &t, &e) < 0) {
		EXPECTF(0, "cannot compile deepseek-r1.jinja");
		free(src);
		return;
	}
	json_t *m = json_loads("[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Hi\"},"
			       "{\"role\":\"assistant\",\"content\":\"<think>x</think>A\"}]",
			       0, NULL);
	pthread_t th[4];
	struct thread_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (struct thread_arg){t, m, 0};
		pthread_create(&th[i], NULL, render_many, &args[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ_INT(args[i].bad, 0);
	}
	json_decref(m);
	chat_template_free(t);
	free(src);
}

TESTS(T(test_deepseek_v3), T(test_deepseek_r1), T(test_deepseek_v2_lite), T(test_chatml), T(test_qwen25),
      T(test_llama3), T(test_llama31), T(test_spec_examples), T(test_from_tokenizer_config), T(test_kwargs),
      T(test_compile_errors), T(test_runtime_errors), T(test_mangled_templates_never_crash),
      T(test_concurrent_renders))
