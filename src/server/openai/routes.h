/* The OpenAI server's routes: the handler the transport calls for every request
 * (server/http/http.h), the API key check, the small endpoints (/health /ping /version
 * /v1/models /metrics /tokenize /detokenize, stored Responses); generation endpoints go to
 * generate.h. */
#ifndef MLA_SERVER_OPENAI_ROUTES_H
#define MLA_SERVER_OPENAI_ROUTES_H

#include <stddef.h>

#include "server/http/http.h"
#include "server/openai/errors.h"

struct server;

/* The handler (its ctx is the struct server): http_handler.on_request and .error_body. */
enum MHD_Result routes_dispatch(void *server, struct hreq *r);
char *routes_error_body(void *server, int status, const char *msg, size_t *len);

/* Answers r with ae's OpenAI error body. */
enum MHD_Result routes_reply_error(struct hreq *r, const struct api_error *ae);
/* 404 unless model (NULL: not given) is one of the served names. */
int routes_check_model(struct server *s, const char *model, struct api_error *ae);
const char *routes_model_name(struct server *s); /* the first served name */

#endif
