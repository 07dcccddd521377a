/* tokenizer_config.json / generation_config.json on every fixture directory, and the forms
 * the fields take in real checkpoints. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "io/hf_config.h"
#include "tok/tokenizer.h"

static const char BOS[] = "<｜begin▁of▁sentence｜>", EOS[] = "<｜end▁of▁sentence｜>";

static void test_fixture_tiny_dirs(void)
{
	static const char *dirs[] = {"tiny-v3", "tiny-v2", "tiny-r1", "tiny-v3-fp8"};
	for (int i = 0; i < 4; i++) {
		struct hf_config c;
		struct err e;
		if (hf_config_load(fixture_path(dirs[i]), &c, &e)) {
			EXPECTF(0, "%s: %s", dirs[i], e.msg);
			continue;
		}
		EXPECT(c.has_add_bos_token && c.add_bos_token);
		EXPECT(c.has_add_eos_token && !c.add_eos_token);
		EXPECT(c.bos_token && !strcmp(c.bos_token, BOS));
		EXPECT(c.eos_token && !strcmp(c.eos_token, EOS));
		EXPECT(c.pad_token && !strcmp(c.pad_token, EOS));
		EXPECT(c.unk_token == NULL);
		EXPECT(c.chat_template && strstr(c.chat_template, "add_generation_prompt"));
		EXPECT(c.has_model_max_length && c.model_max_length == 512);
		EXPECT(c.tokenizer_class && !strcmp(c.tokenizer_class, "LlamaTokenizerFast"));
		EXPECT(c.has_generation_config);
		EXPECT_EQ_INT(c.gen_bos_token_id, 0);
		EXPECT(c.n_gen_eos == 1 && c.gen_eos_token_ids[0] == 1);
		EXPECT(c.has_temperature && c.temperature == 0.6);
		EXPECT(c.has_top_p && c.top_p == 0.95);
		EXPECT(!c.has_top_k && !c.has_repetition_penalty && !c.has_min_p);
		EXPECT(c.has_do_sample && c.do_sample);
		/* ids come from the tokenizer */
		EXPECT_EQ_INT(c.bos_token_id, -1);
		struct tok *t;
		if (tok_load(fixture_path(dirs[i]), &t, &e) == 0) {
			tok_resolve_special_ids(t, &c);
			EXPECT_EQ_INT(c.bos_token_id, 0);
			EXPECT_EQ_INT(c.eos_token_id, 1);
			EXPECT_EQ_INT(c.pad_token_id, 1);
			EXPECT_EQ_INT(c.unk_token_id, -1);
			tok_free(t);
		} else {
			EXPECTF(0, "%s", e.msg);
		}
		hf_config_free(&c);
	}
}

static void test_fixture_tokenizer_dirs(void)
{
	struct hf_config c;
	struct err e;
	/* AddedToken objects for the special tokens; the DeepSeek-V2 chat template */
	EXPECT_EQ_INT(hf_config_load(fixture_path("tokenizer"), &c, &e), 0);
	EXPECT(c.bos_token && !strcmp(c.bos_token, BOS));
	EXPECT(c.eos_token && !strcmp(c.eos_token, EOS));
	EXPECT(c.chat_template && !strncmp(c.chat_template, "{% if not add_generation_prompt", 31));
	EXPECT(c.model_max_length == 16384);
	EXPECT(!c.has_generation_config && c.n_gen_eos == 0 && c.gen_bos_token_id == -1);
	hf_config_free(&c);
	/* no chat template at all */
	EXPECT_EQ_INT(hf_config_load(fixture_path("tokenizer/deepseek-coder"), &c, &e), 0);
	EXPECT(c.chat_template == NULL && c.add_bos_token && c.bos_token);
	hf_config_free(&c);
	/* a directory without any of the files: everything absent */
	EXPECT_EQ_INT(hf_config_load(fixture_path("templates"), &c, &e), 0);
	EXPECT(!c.has_add_bos_token && !c.bos_token && !c.chat_template && !c.has_generation_config);
	hf_config_free(&c);
}

static void test_forms(void)
{
	struct hf_config c;
	struct err e;
	const char *tc = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"},"
			 " {\"name\": \"default\", \"template\": \"D\"}],"
			 " \"bos_token\": {\"content\": \"<s>\", \"lstrip\": false}, \"eos_token\": null,"
			 " \"model_max_length\": 1000000000000000019884624838656,"
			 " \"added_tokens_decoder\": {\"7\": {\"content\": \"<s>\", \"special\": true}}}";
	const char *gc = "{\"eos_token_id\": [1, 106, 107], \"top_k\": 20, \"repetition_penalty\": 1.05,"
			 " \"min_p\": 0, \"temperature\": 1, \"max_new_tokens\": 2048}";
	EXPECT_EQ_INT(hf_config_parse(tc, gc, &c, &e), 0);
	EXPECT(c.chat_template && !strcmp(c.chat_template, "D"));
	EXPECT(c.chat_template_tool_use && !strcmp(c.chat_template_tool_use, "T"));
	EXPECT(c.bos_token && !strcmp(c.bos_token, "<s>") && c.bos_token_id == 7);
	EXPECT(c.eos_token == NULL);
	EXPECT(!c.has_model_max_length); /* HF's "no limit" placeholder */
	EXPECT(!c.has_add_bos_token);
	EXPECT(c.n_gen_eos == 3 && c.gen_eos_token_ids[1] == 106 && c.gen_eos_token_ids[2] == 107);
	EXPECT(c.has_top_k && c.top_k == 20);
	EXPECT(c.has_repetition_penalty && c.repetition_penalty == 1.05);
	EXPECT(c.has_min_p && c.min_p == 0 && c.has_temperature && c.temperature == 1.0);
	EXPECT(c.has_max_new_tokens && c.max_new_tokens == 2048);
	EXPECT(!c.has_top_p);
	hf_config_free(&c);

	/* errors name the file and the key */
	EXPECT_EQ_INT(hf_config_parse("{\"add_bos_token\": \"yes\"}", NULL, &c, &e), -1);
	EXPECTF(strstr(e.msg, "tokenizer_config.json") && strstr(e.msg, "add_bos_token"), "%s", e.msg);
	EXPECT_EQ_INT(hf_config_parse("{\"bos_token\": 5}", NULL, &c, &e), -1);
	EXPECTF(strstr(e.msg, "bos_token"), "%s", e.msg);
	EXPECT_EQ_INT(hf_config_parse(NULL, "{\"eos_token_id\": \"x\"}", &c, &e), -1);
	EXPECTF(strstr(e.msg, "generation_config.json") && strstr(e.msg, "eos_token_id"), "%s", e.msg);
	EXPECT_EQ_INT(hf_config_parse(NULL, "{\"temperature\": 0.5,", &c, &e), -1);
	EXPECTF(strstr(e.msg, "generation_config.json"), "%s", e.msg);
	EXPECT_EQ_INT(hf_config_parse("{\"chat_template\": 3}", NULL, &c, &e), -1);
	EXPECTF(strstr(e.msg, "chat_template"), "%s", e.msg);
}

/* chat_template.jinja next to a config without "chat_template"; a broken file is an error */
static void test_jinja_file_and_errors(void)
{
	char dir[] = "/tmp/mlaserve-hfcfg-XXXXXX", p1[128], p2[128];
	if (!mkdtemp(dir)) {
		EXPECT(0);
		return;
	}
	snprintf(p1, sizeof p1, "%s/tokenizer_config.json", dir);
	snprintf(p2, sizeof p2, "%s/chat_template.jinja", dir);
	FILE *f = fopen(p1, "w");
	fputs("{\"add_bos_token\": true}", f);
	fclose(f);
	f = fopen(p2, "w");
	fputs("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}", f);
	fclose(f);
	struct hf_config c;
	struct err e;
	EXPECT_EQ_INT(hf_config_load(dir, &c, &e), 0);
	EXPECT(c.chat_template &&
	       !strcmp(c.chat_template, "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"));
	hf_config_free(&c);
	f = fopen(p1, "w");
	fputs("{\"add_bos_token\": true,", f);
	fclose(f);
	EXPECT_EQ_INT(hf_config_load(dir, &c, &e), -1);
	EXPECTF(strstr(e.msg, p1) != NULL, "%s", e.msg);
	unlink(p1);
	unlink(p2);
	rmdir(dir);
}

TESTS(T(test_fixture_tiny_dirs), T(test_fixture_tokenizer_dirs), T(test_forms), T(test_jinja_file_and_errors))
