/* OpenAI's Responses API (POST /v1/responses) over the chat pipeline. The request becomes a
 * chat request: instructions and the input's messages become messages, max_output_tokens
 * max_tokens, text.format response_format. The answer is written as a Response object, or as
 * its stream of typed events: response.created, output items (a reasoning item under a
 * reasoning parser, then the assistant message) with their deltas, then response.completed
 * (response.incomplete when max_output_tokens cut it). Function tools map to the chat
 * tools (the calls come back as function_call items; function_call / function_call_output
 * input items become the assistant's tool_calls and tool messages). Finished responses are
 * stored unless "store" is false (server/openai/resp_store.h), and previous_response_id continues a
 * stored one's conversation. What we cannot honour is a 400 naming the field: built-in tools,
 * background runs, images and files in the input. */
#ifndef MLA_SERVER_OPENAI_RESPONSES_H
#define MLA_SERVER_OPENAI_RESPONSES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "engine/engine.h"
#include "server/openai/errors.h"
#include "server/openai/openai_json.h"
#include "server/http/sse.h"

struct resp_state;

#define RESP_ID_MAX 128 /* longest response id, previous_response_id included */

/* body (borrowed) → *chat, a new chat-completions body; *rs formats the answer. prev_items:
 * the stored conversation of body's previous_response_id (the caller looks it up; NULL when
 * there is none); can_store: the server keeps responses. On a bad request: -1 with *ae set
 * (a 400 naming the field). */
int resp_translate(const json_t *body, const json_t *prev_items, bool can_store, json_t **chat, struct resp_state **rs,
		   struct api_error *ae);
/* After the answer (resp_object or resp_stream_end): new references to the finished Response
 * object and its conversation (input items, then output items) to store; -1 when it is not
 * to be stored ("store": false, or it failed). */
int resp_stored(const struct resp_state *rs, json_t **response, json_t **items);
void resp_state_free(struct resp_state *rs);

/* The finished Response object (non-streaming): reasoning (may be empty), text, parsed tool
 * calls (chat's [{"id", "function": {"name", "arguments"}}], or NULL) and logprobs (chat's
 * {"content": [...]}, or NULL) of the one choice, its finish, usage. With include
 * "message.output_text.logprobs" the output text carries every generated token's logprobs
 * (as chat's logprobs do, reasoning tokens included). */
json_t *resp_object(struct resp_state *rs, const char *id, long long created, const char *model, const char *reasoning,
		    size_t rlen, const char *text, size_t len, const json_t *calls, const json_t *logprobs,
		    enum engine_finish finish, const struct oj_usage *u);

/* Streaming: the opening events, then each delta (reasoning, text, chat tool-call deltas, the
 * event's chat logprobs: any may be empty or NULL), then the closing events with the finish and
 * usage (error: the engine's message, or NULL). Each appends "event: TYPE\ndata: JSON\n\n" frames
 * to out; -1 on out of memory. */
int resp_stream_start(struct resp_state *rs, struct strbuf *out, const char *id, long long created, const char *model);
int resp_stream_delta(struct resp_state *rs, struct strbuf *out, const char *reasoning, size_t rlen, const char *text,
		      size_t len, const json_t *calls, const json_t *logprobs);
int resp_stream_end(struct resp_state *rs, struct strbuf *out, enum engine_finish finish, const struct oj_usage *u,
		    const char *error);

#endif
