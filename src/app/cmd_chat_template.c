/* mlaserve chat-template DIR --messages FILE.json [--add-generation-prompt]
 *                            [--chat-template FILE.jinja] [--kwargs JSON]
 *                            [--vllm [--chat-template-content-format auto|string|openai]]
 * Prints the rendered prompt (no trailing newline added). The template and the bos/eos
 * strings come from DIR/tokenizer_config.json (or DIR/chat_template.jinja; a DeepSeek-V3.2 or
 * V4 checkpoint without one gets DeepSeek's own encoder, tok/chat_dsv32.h, tok/chat_dsv4.h);
 * FILE.json is a messages array, or an object {"messages": [...], other keys passed to the template, e.g.
 * "tools"}. The messages reach the template as transformers passes them (text parts joined);
 * with --vllm as the server renders them, the way vLLM does (tok/chat_history.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/file.h"
#include "app/commands.h"
#include "tok/chat_template.h"
#include "io/hf_config.h"

static const char usage_text[] =
	"usage: mlaserve chat-template DIR --messages FILE.json [--add-generation-prompt]\n"
	"                              [--chat-template FILE.jinja] [--kwargs JSON]\n"
	"                              [--vllm [--chat-template-content-format auto|string|openai]]\n"
	"prints the prompt rendered with DIR's chat template (tokenizer_config.json; for a\n"
	"DeepSeek-V3.2 or V4 checkpoint without one, its own encoder: --kwargs '{\"thinking\": true}';\n"
	"V4's also reads \"reasoning_effort\" (\"max\", \"none\") and \"drop_thinking\");\n"
	"--vllm: the messages as the server (and vLLM) hands them to the template: content as one\n"
	"string or a list of text parts (the content format: auto detects it from the template),\n"
	"tool calls' arguments decoded from JSON\n";

int cmd_chat_template(int argc, char **argv)
{
	const char *dir = NULL, *msgs_path = NULL, *tpl_path = NULL, *kwargs_text = NULL;
	bool agp = false, vllm = false;
	enum chat_content_format fmt = CHAT_CONTENT_AUTO;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--messages") && i + 1 < argc)
			msgs_path = argv[++i];
		else if (!strcmp(argv[i], "--chat-template") && i + 1 < argc)
			tpl_path = argv[++i];
		else if (!strcmp(argv[i], "--kwargs") && i + 1 < argc)
			kwargs_text = argv[++i];
		else if (!strcmp(argv[i], "--add-generation-prompt"))
			agp = true;
		else if (!strcmp(argv[i], "--vllm"))
			vllm = true;
		else if (!strcmp(argv[i], "--chat-template-content-format") && i + 1 < argc) {
			struct err fe = {{0}};
			if (chat_content_format_parse(argv[++i], &fmt, &fe) < 0) {
				fprintf(stderr, "mlaserve chat-template: --chat-template-content-format: %s\n",
					fe.msg);
				return 2;
			}
			vllm = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else {
			fprintf(stderr, "mlaserve chat-template: unexpected argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (!dir || !msgs_path) {
		fputs(usage_text, stderr);
		return 2;
	}
	struct err e = {{0}};
	struct hf_config cfg;
	struct chat_template *tpl = NULL;
	json_t *doc = NULL, *kwargs = NULL;
	char *src = NULL, *out = NULL;
	int rc = 1;
	if (hf_config_load(dir, &cfg, &e) < 0) {
		fprintf(stderr, "mlaserve chat-template: %s\n", e.msg);
		return 1;
	}
	if (tpl_path && file_read_all(tpl_path, &src, NULL, &e))
		goto done;
	const char *text = src ? src : cfg.chat_template;
	if (chat_template_open(text, dir, &tpl, &e) < 0) {
		err_prefix(&e, "%s", tpl_path ? tpl_path : dir);
		goto done;
	}
	if (!tpl) {
		err_set(&e, "%s: no chat_template in tokenizer_config.json (use --chat-template FILE)", dir);
		goto done;
	}
	json_error_t je;
	doc = json_load_file(msgs_path, 0, &je);
	if (!doc) {
		if (je.line > 0)
			err_set(&e, "%s: line %d: %s", msgs_path, je.line, je.text);
		else
			err_set(&e, "%s", je.text);
		goto done;
	}
	json_t *messages = doc;
	kwargs = json_object();
	if (json_is_object(doc)) {
		messages = json_object_get(doc, "messages");
		json_object_update(kwargs, doc);
		json_object_del(kwargs, "messages");
		if (!json_is_array(messages)) {
			err_set(&e, "%s: \"messages\" must be an array", msgs_path);
			goto done;
		}
	} else if (!json_is_array(doc)) {
		err_set(&e, "%s: expected a messages array or an object with \"messages\"", msgs_path);
		goto done;
	}
	if (kwargs_text) {
		json_t *extra = json_loads(kwargs_text, 0, &je);
		if (!json_is_object(extra)) {
			if (extra)
				err_set(&e, "--kwargs: expected a JSON object");
			else
				err_set(&e, "--kwargs: %s", je.text);
			json_decref(extra);
			goto done;
		}
		json_object_update(kwargs, extra);
		json_decref(extra);
	}
	if ((vllm ? chat_template_render_vllm(tpl, messages, fmt, agp, cfg.bos_token, cfg.eos_token, kwargs, &out, &e)
		  : chat_template_render(tpl, messages, agp, cfg.bos_token, cfg.eos_token, kwargs, &out, &e)) < 0)
		goto done;
	fputs(out, stdout);
	rc = 0;
done:
	if (rc)
		fprintf(stderr, "mlaserve chat-template: %s\n", e.msg);
	free(out);
	free(src);
	json_decref(doc);
	json_decref(kwargs);
	chat_template_free(tpl);
	hf_config_free(&cfg);
	return rc;
}
