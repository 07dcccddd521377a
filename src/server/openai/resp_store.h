/* Stored Responses (POST /v1/responses with "store": true, OpenAI's default): each finished
 * Response object with the conversation it ended (its input items, after those of its
 * previous_response_id, then its output items), in memory, the oldest dropped past a bound
 * (serve --responses-store-size, 0: nothing is stored). GET /v1/responses/{id} returns it,
 * DELETE removes it, and a request's previous_response_id continues its conversation. */
#ifndef MLA_SERVER_OPENAI_RESP_STORE_H
#define MLA_SERVER_OPENAI_RESP_STORE_H

#include <jansson.h>

struct resp_store;

struct resp_store *resp_store_new(int max_entries); /* NULL: out of memory */
void resp_store_free(struct resp_store *st);        /* NULL is fine */
int resp_store_max(const struct resp_store *st);
/* Adds (or replaces) id; takes both references. Drops the oldest entry when full. 0, or -1
 * (out of memory; the references are released). */
int resp_store_put(struct resp_store *st, const char *id, json_t *response, json_t *items);
/* New references to id's Response object and / or conversation items (either may be NULL);
 * 0, or -1 when id is not stored. */
int resp_store_get(struct resp_store *st, const char *id, json_t **response, json_t **items);
int resp_store_delete(struct resp_store *st, const char *id); /* 0, or -1 when not stored */

#endif
