/* Parsing and validation of /v1/chat/completions and /v1/completions bodies (docs/reference.md C.2, C.5)
 * into engine sampling parameters. Pure functions: no engine, no tokenizer, no I/O, so every
 * rule and every error body is unit-tested (tests/unit/test_server_request.c).
 *
 * Field rules follow vLLM's pydantic models: JSON null means "not set"; unknown fields are
 * ignored (and named in *unknown so the caller can log them); fields vLLM honours that this
 * engine cannot (beam search, suffix, structural tags, ...) are rejected with
 * 400 instead of being silently dropped. */
#ifndef MLA_SERVER_OPENAI_REQUEST_H
#define MLA_SERVER_OPENAI_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "server/openai/errors.h"
#include "server/openai/structured.h"

enum srv_api { SRV_API_CHAT, SRV_API_COMPLETION };

/* One completion prompt: text (tokenized later) or token ids. */
struct srv_prompt {
	const char *text; /* points into the request body (json_t), or NULL */
	size_t text_len;
	int32_t *ids; /* malloc'd when the prompt was given as token ids */
	int n_ids;
};

struct srv_limits {
	int vocab_size;   /* token ids must be < this */
	int max_n;        /* cap on n (choices per prompt) */
	int max_prompts;  /* cap on the number of completion prompts */
	bool auto_tools;  /* --enable-auto-tool-choice with a --tool-call-parser */
	int max_logprobs; /* --max-logprobs (0: ENGINE_MAX_LOGPROBS) */
	bool priority;    /* --scheduling-policy priority: requests may carry a "priority" */
};

struct srv_request {
	enum srv_api api;
	const char *model; /* NULL: not given (use the first served name) */
	/* chat */
	json_t *messages; /* own reference */
	bool add_generation_prompt, continue_final_message;
	const char *chat_template;    /* request-supplied template (not trusted: rejected) */
	json_t *chat_template_kwargs; /* own reference or NULL */
	bool parse_tools;             /* tools given, tool_choice "auto" (or unset) and the server parses them */
	json_t *tools;                /* the request's tools (own reference or NULL): glm47 types
				       * arguments from their schemas */
	/* completions */
	int n_prompts;
	struct srv_prompt *prompts;
	bool echo;
	/* both */
	bool add_special_tokens;
	bool stream, include_usage, continuous_usage;
	int top_logprobs;                 /* chat: top_logprobs (0 if unset) */
	bool want_logprobs;               /* chat: logprobs: true / completions: logprobs != null */
	bool prompt_logprobs;             /* vLLM's prompt_logprobs given (the response's field) */
	bool echo_logprobs;               /* completions: echo with logprobs (the prompt's lead them) */
	bool echo_only;                   /* completions: echo with max_tokens 0: the prompt alone */
	int32_t *allowed;                 /* allowed_token_ids (owned; sp.allowed_ids points here) */
	int32_t *bad_tok, *bad_lens;      /* bad_words tokenized by the caller (srv_bad_words_tokenize;
				      * owned; sp.bad_words / bad_lens point here) */
	int truncate_prompt_tokens;       /* keep the prompt's last N tokens (0: all; -1: max_model_len) */
	bool tokens_as_ids;               /* return_tokens_as_token_ids: logprobs name tokens "token_id:N" */
	bool return_token_ids;            /* vLLM's return_token_ids: token_ids / prompt_token_ids */
	const char *request_id;           /* borrowed from the body: the response id is the prefix + it */
	const json_t *bad_words;          /* borrowed from the body: strings the caller tokenizes into
				  * sp.bad_words / bad_lens; NULL when none */
	struct sampling_params sp;        /* defaults from `base`, then the request's fields;
				    * sp.guide is structured.guide. sp.max_tokens is the request's
				    * max_tokens / max_completion_tokens (completions: 16 when
				    * absent), -1 when not given: an explicit one must fit the context
				    * (srv_request_check_length), base's default is put in
				    * at submission (generate.c) and only capped by the engine */
	struct srv_structured structured; /* response_format, guided_*, forced tool_choice */
};

/* Parses `body` (any JSON value; must be an object). `base` holds the server's default
 * sampling params (generation_config over OpenAI defaults). On failure fills *ae (400) and
 * leaves *out empty (srv_request_fini is still safe). `unknown` (optional, size n_unknown)
 * receives the first unknown field names, for a warning. */
int srv_request_parse(const json_t *body, enum srv_api api, const struct sampling_params *base,
		      const struct srv_limits *lim, struct srv_request *out, struct api_error *ae, char *unknown,
		      size_t n_unknown);
void srv_request_fini(struct srv_request *r);

struct tok;
/* vLLM's bad_words tokenized: each word's tokens (leading whitespace dropped), and those of
 * " " + the word when that gives a different first token of the same length (a word in the
 * middle of a text). The sequences back to back in *tok_out (malloc'd), their lengths in
 * *lens_out (malloc'd), *n_out of them. 400 when there is no tokenizer. */
int srv_bad_words_tokenize(const struct tok *tok, const json_t *words, int32_t **tok_out, int32_t **lens_out,
			   int *n_out, struct api_error *ae);

/* Checks a prompt of n_prompt tokens against max_model_len with vLLM's messages (400):
 * the prompt must leave room for one token, and an explicit max_tokens must fit. */
int srv_request_check_length(const struct srv_request *r, int n_prompt, int max_model_len, struct api_error *ae);

/* Text of the prompt cut right after the final message's content, as transformers does for
 * continue_final_message (the template rendered without a generation prompt). Returns the
 * new length, or -1 (400) when the content cannot be found in the rendered text. */
long srv_continue_final_cut(const json_t *messages, const char *rendered, size_t len, struct api_error *ae);

#endif
