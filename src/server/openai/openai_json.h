/* Response bodies in vLLM's OpenAI-compatible shapes (docs/reference.md C.3-C.5): chat.completion,
 * chat.completion.chunk, text_completion (whole and chunks), usage, logprobs, /v1/models.
 * Every string that came from the model goes through utf8_sanitize, so a broken byte
 * sequence becomes U+FFFD instead of a serialization failure. Builders return new
 * references (NULL only when out of memory). */
#ifndef MLA_SERVER_OPENAI_OPENAI_JSON_H
#define MLA_SERVER_OPENAI_OPENAI_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "server/openai/request.h"
#include "server/http/sse.h"

struct tok;

/* What one choice produced (accumulated for non-streaming responses). */
struct oj_choice {
	int index;
	struct strbuf text;       /* the output text (raw bytes; sanitized when serialized) */
	json_t *logprobs;         /* accumulated logprobs object, or NULL when not requested */
	json_t *prompt_logprobs;  /* vLLM's prompt_logprobs list, or NULL (null) */
	bool prompt_lp_sent;      /* streaming: they went out with a chunk */
	json_t *token_ids;        /* return_token_ids: the output's ids (accumulated), or NULL */
	json_t *prompt_token_ids; /* return_token_ids: the prompt's (a reference), or NULL */
	bool prompt_ids_sent;     /* streaming: they went out with a chunk */
	size_t text_offset;       /* completions logprobs: characters before the next token */
	enum engine_finish finish;
	int32_t stop_token; /* -1 none */
	char *stop_str;     /* malloc'd or NULL */
	int n_tokens;
	bool split;              /* chat under a reasoning parser: text is the content only, */
	struct strbuf reasoning; /* ... and this the reasoning (server/parsers/reasoning.h) */
	json_t *tool_calls; /* parsed tool calls (server/parsers/tool_calls.h; text: the content before them) or NULL */
};

struct oj_usage {
	long prompt_tokens, completion_tokens;
	long cached_tokens; /* prompt tokens read from the prefix cache */
	bool details;       /* prompt_tokens_details: {"cached_tokens"} (else null) */
};

/* Logprobs of the tokens of one event (tok may be NULL: tokens are shown as "token_id:N").
 * Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
 * Completions: {text_offset, token_logprobs, tokens, top_logprobs}; *text_offset advances by
 * the characters of each token. */
json_t *oj_logprobs(enum srv_api api, const struct tok *tok, const struct engine_logprob *lp, int n,
		    size_t *text_offset);
/* Completions logprobs of an echoed prompt of n tokens (first = its first token, lp[1..n)
 * the engine's prompt logprobs): the first entry has null logprob and top_logprobs, offsets
 * count characters from 0. */
json_t *oj_prompt_logprobs_echo(const struct tok *tok, int32_t first, const struct engine_logprob *lp, int n);
/* vLLM's prompt_logprobs: [null, {"id": {"logprob", "rank", "decoded_token"}, ...}, ...], each
 * entry the prompt token and the top-N. */
json_t *oj_prompt_logprobs_vllm(const struct tok *tok, const struct engine_logprob *lp, int n);
/* One such entry: {"id": {"logprob", "rank", "decoded_token"}} for x's token and top-N. */
json_t *oj_logprob_entry_vllm(const struct tok *tok, const struct engine_logprob *x);

/* Appends the arrays of `part` (same api shape) to *acc (creating it). 0 ok, -1 no memory. */
int oj_logprobs_merge(json_t **acc, json_t *part);

/* Records an event's finish into c (stop_reason etc.). */
void oj_choice_finish(struct oj_choice *c, const struct engine_event *ev);
void oj_choice_fini(struct oj_choice *c);

/* "stop" / "length" / "abort" or null; stop_reason: null | token id | stop string. */
json_t *oj_finish_reason(enum engine_finish f);
json_t *oj_stop_reason(int32_t stop_token, const char *stop_str);
json_t *oj_usage_json(const struct oj_usage *u, bool with_details);

/* The whole answer of choices[0..n) (each a choice's own record, wherever it lives). */
json_t *oj_chat_response(const char *id, long long created, const char *model, const struct oj_choice *const *choices,
			 int n, const struct oj_usage *u);
json_t *oj_completion_response(const char *id, long long created, const char *model,
			       const struct oj_choice *const *choices, int n, const struct oj_usage *u);

/* What one streaming chunk adds to a choice. */
struct oj_delta {
	const char *text; /* content (completions: text) */
	size_t len;
	const char *reasoning; /* chat: reasoning_content when rlen > 0 */
	size_t rlen;
	const json_t *tool_calls; /* chat: calls (tool_calls.h), or NULL */
};

/* One streaming chunk for one choice. Chat: role != NULL makes the first chunk
 * ({"role": role, "content": ""}); otherwise delta {"content": text}, or with reasoning or
 * tool calls {"reasoning_content": ...} / {"tool_calls": [{"index", "id", "type",
 * "function"}]}, and "content" only when text is not empty. Tool calls turn a "stop" finish
 * into "tool_calls". finish NONE leaves finish_reason null and omits stop_reason (as vLLM's
 * exclude_unset does). `logprobs` is stolen (NULL -> null). `usage` (optional, stolen) adds
 * continuous usage. */
json_t *oj_chunk(enum srv_api api, const char *id, long long created, const char *model, int index, const char *role,
		 const struct oj_delta *d, json_t *logprobs, enum engine_finish finish, int32_t stop_token,
		 const char *stop_str, json_t *usage);
/* The final usage-only chunk ("choices": []). */
json_t *oj_usage_chunk(enum srv_api api, const char *id, long long created, const char *model,
		       const struct oj_usage *u);

/* GET /v1/models */
json_t *oj_models(const char *const *names, int n_names, const char *root, long long created, int max_model_len);

#endif
