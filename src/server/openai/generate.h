/* The generation endpoints: /v1/chat/completions, /v1/completions and /v1/responses (a chat
 * request answered in its own shapes), answered whole or streamed as SSE. */
#ifndef MLA_SERVER_OPENAI_GENERATE_H
#define MLA_SERVER_OPENAI_GENERATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/http/http.h"
#include "server/openai/errors.h"
#include "server/openai/request.h"

struct server;

/* Takes body. */
enum MHD_Result gen_handle(struct server *s, struct hreq *r, enum srv_api api, json_t *body);
/* POST /v1/responses (server/openai/responses.h); takes body */
enum MHD_Result gen_handle_responses(struct server *s, struct hreq *r, json_t *body);
/* Renders the chat template and tokenizes (for chat requests and /tokenize). */
int gen_chat_prompt(struct server *s, const json_t *messages, bool add_generation_prompt, bool continue_final_message,
		    const json_t *kwargs, bool add_special_tokens, int32_t **ids, size_t *n_ids, struct api_error *ae);
/* Aborts every in-flight generation (server stop). Caller holds s->mu. */
void gen_cancel_all_locked(struct server *s);

#endif
