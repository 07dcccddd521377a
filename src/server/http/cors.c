/* CORS in the manner of Starlette's CORSMiddleware, as vLLM configures it: see cors.h. */
#include "server/http/cors.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/http/http_internal.h"

#define CORS_MAX_AGE "600"

static const char *const ALL_METHODS[] = {"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", NULL};
/* always allowed request headers (the CORS-safelisted ones), lower-cased */
static const char *const SAFELISTED[] = {"accept", "accept-language", "content-language", "content-type", NULL};

static void free_list(char **l)
{
	for (char **p = l; p && *p; p++)
		free(*p);
	free(l);
}

static bool in_list(char *const *l, const char *s)
{
	for (; l && *l; l++)
		if (!strcmp(*l, s))
			return true;
	return false;
}

/* A JSON list of strings (NULL: ["*"]) into a NULL-terminated list; *star: it holds "*". */
static int read_list(const char *flag, const char *json, bool lower, char ***out, bool *star, struct err *e)
{
	json_error_t je;
	json_t *v = json ? json_loads(json, 0, &je) : json_pack("[s]", "*");
	if (!json_is_array(v)) {
		json_decref(v);
		return err_set(e, "%s: expected a JSON list of strings such as '[\"*\"]', got '%s'", flag, json);
	}
	size_t n = json_array_size(v), i;
	char **l = calloc(n + 1, sizeof *l);
	json_t *x;
	*star = false;
	json_array_foreach(v, i, x)
	{
		if (!l || !json_is_string(x) || !(l[i] = strdup(json_string_value(x)))) {
			free_list(l);
			json_decref(v);
			return err_set(e, "%s: expected a JSON list of strings, got '%s'", flag, json);
		}
		for (char *c = l[i]; lower && *c; c++)
			*c = (char)tolower((unsigned char)*c);
		*star |= !strcmp(l[i], "*");
	}
	json_decref(v);
	*out = l;
	return 0;
}

static char *join(char *const *l, const char *const *extra)
{
	size_t n = 1;
	for (char *const *p = l; *p; p++)
		n += strlen(*p) + 2;
	for (const char *const *p = extra; p && *p; p++)
		n += strlen(*p) + 2;
	char *s = calloc(1, n);
	if (!s)
		return NULL;
	for (const char *const *p = extra; p && *p; p++)
		if (!in_list(l, *p))
			strcat(strcat(s, *s ? ", " : ""), *p);
	for (char *const *p = l; *p; p++)
		strcat(strcat(s, *s ? ", " : ""), *p);
	return s;
}

int cors_init(struct cors *c, const char *origins, const char *methods, const char *headers, bool credentials,
	      struct err *e)
{
	memset(c, 0, sizeof *c);
	c->credentials = credentials;
	bool all_methods = false;
	if (read_list("--allowed-origins", origins, false, &c->origins, &c->all_origins, e) < 0 ||
	    read_list("--allowed-methods", methods, false, &c->methods, &all_methods, e) < 0 ||
	    read_list("--allowed-headers", headers, true, &c->headers, &c->all_headers, e) < 0) {
		cors_fini(c);
		return -1;
	}
	if (all_methods) { /* "*": every method, spelled out */
		free_list(c->methods);
		size_t n = sizeof ALL_METHODS / sizeof *ALL_METHODS;
		c->methods = calloc(n, sizeof *c->methods);
		for (size_t i = 0; c->methods && ALL_METHODS[i]; i++)
			c->methods[i] = strdup(ALL_METHODS[i]);
	}
	c->methods_line = c->methods ? join(c->methods, NULL) : NULL;
	c->headers_line = join(c->headers, SAFELISTED);
	if (!c->methods_line || !c->headers_line) {
		cors_fini(c);
		return err_set(e, "CORS: out of memory");
	}
	return 0;
}

void cors_fini(struct cors *c)
{
	free_list(c->origins);
	free_list(c->methods);
	free_list(c->headers);
	free(c->methods_line);
	free(c->headers_line);
	memset(c, 0, sizeof *c);
}

static bool origin_allowed(const struct cors *c, const char *origin)
{
	return c->all_origins || in_list(c->origins, origin);
}

void cors_add_headers(const struct cors *c, struct hreq *r, struct MHD_Response *resp)
{
	const char *origin = http_header(r, "Origin");
	if (!origin || r->preflight)
		return;
	bool cookie = http_header(r, "Cookie") != NULL;
	if (c->all_origins && !cookie) {
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
	} else if (origin_allowed(c, origin)) { /* the origin mirrored back */
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
		MHD_add_response_header(resp, "Vary", "Origin");
	}
	if (c->credentials)
		MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
}

/* Whether each element of a comma-separated header list is allowed. */
static bool headers_allowed(const struct cors *c, const char *list)
{
	while (*list) {
		const char *comma = strchr(list, ',');
		size_t n = comma ? (size_t)(comma - list) : strlen(list);
		const char *s = list;
		while (n && isspace((unsigned char)*s))
			s++, n--;
		while (n && isspace((unsigned char)s[n - 1]))
			n--;
		char h[128];
		if (n >= sizeof h)
			return false;
		for (size_t i = 0; i < n; i++)
			h[i] = (char)tolower((unsigned char)s[i]);
		h[n] = 0;
		bool safelisted = false;
		for (const char *const *p = SAFELISTED; *p; p++)
			safelisted |= !strcmp(*p, h);
		if (n && !safelisted && !in_list(c->headers, h))
			return false;
		list = comma ? comma + 1 : list + strlen(list);
	}
	return true;
}

bool cors_preflight(const struct cors *c, struct hreq *r, int *rc)
{
	const char *origin = http_header(r, "Origin");
	const char *method = http_header(r, "Access-Control-Request-Method");
	if (strcmp(r->method, "OPTIONS") || !origin || !method)
		return false;
	r->preflight = true;
	const char *req_headers = http_header(r, "Access-Control-Request-Headers");
	char failures[64] = "";
	bool explicit_origin = !c->all_origins || c->credentials;
	if (!origin_allowed(c, origin))
		strcat(failures, "origin");
	if (!in_list(c->methods, method))
		strcat(strcat(failures, *failures ? ", " : ""), "method");
	if (req_headers && !c->all_headers && !headers_allowed(c, req_headers))
		strcat(strcat(failures, *failures ? ", " : ""), "headers");
	struct MHD_Response *resp;
	if (*failures) {
		char msg[96];
		snprintf(msg, sizeof msg, "Disallowed CORS %s", failures);
		size_t len = 0;
		char *body = r->hs->h.error_body(r->hs->h.ctx, 400, msg, &len);
		resp = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE) : NULL;
		if (!resp)
			free(body);
	} else {
		resp = MHD_create_response_from_buffer(2, (void *)"OK", MHD_RESPMEM_PERSISTENT);
	}
	if (!resp) {
		*rc = MHD_NO;
		return true;
	}
	if (!explicit_origin)
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
	else if (origin_allowed(c, origin))
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
	if (explicit_origin)
		MHD_add_response_header(resp, "Vary", "Origin");
	MHD_add_response_header(resp, "Access-Control-Allow-Methods", c->methods_line);
	MHD_add_response_header(resp, "Access-Control-Max-Age", CORS_MAX_AGE);
	if (c->all_headers && req_headers)
		MHD_add_response_header(resp, "Access-Control-Allow-Headers", req_headers);
	else if (!c->all_headers)
		MHD_add_response_header(resp, "Access-Control-Allow-Headers", c->headers_line);
	if (c->credentials)
		MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
	*rc = http_queue(r, *failures ? 400 : 200, resp, *failures ? "application/json" : "text/plain; charset=utf-8");
	return true;
}
