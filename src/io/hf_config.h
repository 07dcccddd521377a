/* The checkpoint's tokenizer_config.json and generation_config.json: special-token strings,
 * BOS/EOS rules, chat template, context length, default sampling parameters.
 *
 * Both files are optional: a missing file leaves its fields absent (has_* false, strings
 * NULL, ids -1). A file that exists but is not valid JSON, or a field of the wrong type, is
 * an error naming the file and the key. */
#ifndef MLA_IO_HF_CONFIG_H
#define MLA_IO_HF_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

#define HF_MAX_EOS 16

struct hf_config {
	/* ---- tokenizer_config.json ---- */
	bool has_add_bos_token, add_bos_token;
	bool has_add_eos_token, add_eos_token;
	/* Token strings; each may be a plain string or an AddedToken object
	 * {"content": ...} in the file. NULL when absent or null. */
	char *bos_token, *eos_token, *pad_token, *unk_token;
	/* Their ids: from tokenizer_config.json "added_tokens_decoder" when it lists them,
	 * else filled by tok_resolve_special_ids (tok/tokenizer.h); -1 when unknown. */
	int32_t bos_token_id, eos_token_id, pad_token_id, unk_token_id;
	/* The template text: "chat_template" as a string, or from a list of {name, template}
	 * the one named "default"; if the key is absent, DIR/chat_template.jinja when present.
	 * NULL when there is none. */
	char *chat_template;
	/* The template named "tool_use" in the list form, else NULL. */
	char *chat_template_tool_use;
	/* model_max_length; absent (or HF's "very large" placeholder >= 1e18) → false. */
	bool has_model_max_length;
	long long model_max_length;
	bool clean_up_tokenization_spaces; /* false when absent */
	char *tokenizer_class;             /* e.g. "LlamaTokenizerFast", or NULL */

	/* ---- generation_config.json ---- */
	bool has_generation_config; /* the file exists */
	int32_t gen_bos_token_id;   /* -1 when absent */
	/* eos_token_id: an int or a list of ints in the file; n_eos == 0 when absent. */
	int32_t gen_eos_token_ids[HF_MAX_EOS];
	int n_gen_eos;
	int32_t gen_pad_token_id; /* -1 when absent */
	bool has_do_sample, do_sample;
	bool has_temperature;
	double temperature;
	bool has_top_p;
	double top_p;
	bool has_top_k;
	int top_k;
	bool has_min_p;
	double min_p;
	bool has_repetition_penalty;
	double repetition_penalty;
	bool has_max_new_tokens;
	int max_new_tokens;
};

/* Reads DIR/tokenizer_config.json, DIR/chat_template.jinja (only if the config has no
 * chat_template) and DIR/generation_config.json. On error nothing needs freeing. */
int hf_config_load(const char *dir, struct hf_config *cfg, struct err *e);
/* Same from JSON texts (tests); either may be NULL (file absent). */
int hf_config_parse(const char *tokenizer_config_json, const char *generation_config_json, struct hf_config *cfg,
		    struct err *e);
void hf_config_free(struct hf_config *cfg);

#endif
