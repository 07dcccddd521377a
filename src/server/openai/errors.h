/* OpenAI-style API errors: {"error": {"message", "type", "param", "code"}} (docs/reference.md C.6).
 * Request parsing and handlers fill a struct api_error; routes_reply_error (routes.h) answers
 * with its body, and the transport's own errors get the same body (routes_error_body). */
#ifndef MLA_SERVER_OPENAI_ERRORS_H
#define MLA_SERVER_OPENAI_ERRORS_H

#include <stddef.h>

#define API_ERROR_MSG_MAX 1024

struct api_error {
	int status; /* HTTP status: 400, 401, 404, 405, 413, 500, 503 */
	char message[API_ERROR_MSG_MAX];
	char param[64]; /* offending request field, "" = null */
};

/* Sets status, param (NULL = none) and a printf-style message; returns -1. */
int api_error_set(struct api_error *ae, int status, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* "BadRequestError", "NotFoundError", ... for an HTTP status. */
const char *api_error_type(int status);
/* The JSON body, NUL-terminated, malloc'd (never NULL: falls back to a static-shaped body
 * when out of memory is impossible to report otherwise). *len gets strlen. */
char *api_error_body(const struct api_error *ae, size_t *len);

#endif
