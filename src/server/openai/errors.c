#include "server/openai/errors.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

int api_error_set(struct api_error *ae, int status, const char *param, const char *fmt, ...)
{
	if (!ae)
		return -1;
	ae->status = status;
	snprintf(ae->param, sizeof ae->param, "%s", param ? param : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ae->message, sizeof ae->message, fmt, ap);
	va_end(ap);
	return -1;
}

const char *api_error_type(int status)
{
	switch (status) {
	case 400: return "BadRequestError";
	case 401: return "AuthenticationError";
	case 404: return "NotFoundError";
	case 405: return "MethodNotAllowedError";
	case 413: return "RequestEntityTooLargeError";
	case 414: return "URITooLongError";
	case 431: return "RequestHeaderFieldsTooLargeError";
	case 501: return "NotImplementedError";
	case 505: return "HTTPVersionNotSupportedError";
	case 503: return "ServiceUnavailableError";
	default: return status >= 500 ? "InternalServerError" : "BadRequestError";
	}
}

char *api_error_body(const struct api_error *ae, size_t *len)
{
	/* The message may quote client bytes (a bad field value): make it valid UTF-8 first so
	 * the error body itself can always be serialized. */
	size_t n = strnlen(ae->message, sizeof ae->message);
	char *msg = utf8_sanitize(ae->message, n, &n);
	json_t *inner = json_pack("{s:s%, s:s, s:o, s:i}", "message", msg ? msg : "error", msg ? n : 5, "type",
				  api_error_type(ae->status), "param",
				  ae->param[0] ? json_string(ae->param) : json_null(), "code", ae->status);
	free(msg);
	json_t *root = inner ? json_pack("{s:o}", "error", inner) : NULL;
	char *body = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	if (!body) {
		const char *fallback = "{\"error\":{\"message\":\"internal error\",\"type\":"
				       "\"InternalServerError\",\"param\":null,\"code\":500}}";
		body = strdup(fallback);
		if (!body)
			return NULL;
	}
	if (len)
		*len = strlen(body);
	return body;
}
