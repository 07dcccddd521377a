/* CORS as vLLM serves it (Starlette's CORSMiddleware under --allowed-origins,
 * --allowed-methods, --allowed-headers, --allow-credentials; each list a JSON array, ["*"] by
 * default): a request with an Origin header gets Access-Control-Allow-Origin ("*", or its own
 * origin when the origins are listed or it sends cookies) and, with credentials,
 * Access-Control-Allow-Credentials; a preflight (OPTIONS with Origin and
 * Access-Control-Request-Method) is answered before authentication: 200 "OK" with the allowed
 * methods, headers and a max age of 600 s, or a 400 JSON error naming what is disallowed. */
#ifndef MLA_SERVER_HTTP_CORS_H
#define MLA_SERVER_HTTP_CORS_H

#include <stdbool.h>

#include "base/err.h"

struct cors {
	char **origins, **methods, **headers; /* NULL-terminated; headers lower-cased */
	bool all_origins, all_headers, credentials;
	char *methods_line, *headers_line; /* the preflight's Allow-Methods / Allow-Headers */
};

/* Reads the flags' JSON lists (NULL: ["*"]). */
int cors_init(struct cors *c, const char *origins, const char *methods, const char *headers, bool credentials,
	      struct err *e);
void cors_fini(struct cors *c);

struct MHD_Response;
struct hreq;
/* The headers of an answer to a request that came with an Origin. */
void cors_add_headers(const struct cors *c, struct hreq *r, struct MHD_Response *resp);
/* A preflight: true when r is one (then it has been answered, *rc the result). */
bool cors_preflight(const struct cors *c, struct hreq *r, int *rc);

#endif
