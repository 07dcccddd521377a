/* Routing, the API key check, and the small endpoints: /health /ping /version /v1/models
 * /metrics /tokenize /detokenize. Generation endpoints are in generate.c. */
#include "server/openai/routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#include "base/log.h"
#include "server/openai/metrics.h"
#include "server/openai/openai_json.h"
#include "server/openai/resp_store.h"
#include "server/openai/responses.h"
#include "server/openai/generate.h"
#include "server/openai/state.h"
#include "base/utf8.h"
#include "tok/tokenizer.h"

#include "base/version.h"
#define SERVER_VERSION MLASERVE_VERSION

const char *routes_model_name(struct server *s) { return s->cfg.served_names[0]; }

int routes_check_model(struct server *s, const char *model, struct api_error *ae)
{
	if (!model)
		return 0;
	for (int i = 0; i < s->cfg.n_served_names; i++)
		if (!strcmp(model, s->cfg.served_names[i]))
			return 0;
	return api_error_set(ae, 404, "model", "The model `%s` does not exist.", model);
}

enum MHD_Result routes_reply_error(struct hreq *r, const struct api_error *ae)
{
	size_t len = 0;
	char *body = api_error_body(ae, &len);
	return http_reply_json_body(r, ae->status, body, len, ae->message);
}

char *routes_error_body(void *server, int status, const char *msg, size_t *len)
{
	struct api_error ae;
	api_error_set(&ae, status, NULL, "%s", msg);
	return api_error_body(&ae, len);
}

/* Constant-time comparison (no early exit on the first differing byte). */
static bool key_matches(const char *given, size_t n, const char *key)
{
	size_t m = strlen(key);
	unsigned char diff = (unsigned char)(n != m);
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)given[i] ^ (unsigned char)key[i < m ? i : 0];
	return diff == 0 && m > 0;
}

static bool authorized(struct server *s, struct hreq *r)
{
	const char *key = s->cfg.api_key;
	if (!key || !key[0] || strncmp(r->path, "/v1", 3) || !strcmp(r->method, "OPTIONS"))
		return true;
	const char *h = http_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!h || strncasecmp(h, "Bearer ", 7))
		return false;
	h += 7;
	return key_matches(h, strlen(h), key);
}

static enum MHD_Result reply_err(struct hreq *r, int status, const char *param, const char *msg)
{
	struct api_error ae;
	api_error_set(&ae, status, param, "%s", msg);
	return routes_reply_error(r, &ae);
}

/* Parses the body as a JSON value; 400 with jansson's message otherwise. */
static json_t *parse_body(struct hreq *r, struct api_error *ae)
{
	json_error_t je;
	if (!r->body.n) {
		api_error_set(ae, 400, NULL, "Invalid JSON: the request body is empty");
		return NULL;
	}
	json_t *j = json_loadb(r->body.p, r->body.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	if (!j)
		api_error_set(ae, 400, NULL, "Invalid JSON: %s at line %d column %d", je.text, je.line, je.column);
	return j;
}

static enum MHD_Result health(struct server *s, struct hreq *r)
{
	if (!engine_alive(s->deps.eng))
		return reply_err(r, 503, NULL, "the engine is not running");
	return http_reply_text(r, 200, NULL, "", 0);
}

static enum MHD_Result version(struct server *s, struct hreq *r)
{
	return http_reply_json(r, 200, json_pack("{s:s}", "version", SERVER_VERSION));
}

static enum MHD_Result models(struct server *s, struct hreq *r)
{
	return http_reply_json(r, 200,
			       oj_models(s->cfg.served_names, s->cfg.n_served_names, s->cfg.model_root, s->started_at,
					 s->max_model_len));
}

static enum MHD_Result metrics(struct server *s, struct hreq *r)
{
	struct engine_stats st;
	engine_stats_get(s->deps.eng, &st);
	struct strbuf out = {0};
	if (metrics_render(&st, routes_model_name(s), &out) < 0) {
		strbuf_fini(&out);
		return reply_err(r, 500, NULL, "out of memory rendering metrics");
	}
	enum MHD_Result rc = http_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", out.p, out.n);
	strbuf_fini(&out);
	return rc;
}

/* The /tokenize and /detokenize bodies: a JSON object whose optional "model" is served. */
static int check_body_model(struct server *s, const json_t *body, struct api_error *ae)
{
	if (!json_is_object(body))
		return api_error_set(ae, 400, NULL, "the request body must be a JSON object");
	const json_t *model = json_object_get(body, "model");
	if (!model || json_is_null(model))
		return 0;
	if (!json_is_string(model))
		return api_error_set(ae, 400, "model", "'model' must be a string");
	return routes_check_model(s, json_string_value(model), ae);
}

static enum MHD_Result tokenize(struct server *s, struct hreq *r)
{
	struct api_error ae;
	json_t *body = parse_body(r, &ae);
	int32_t *ids = NULL;
	size_t n = 0;
	if (!body)
		return routes_reply_error(r, &ae);
	enum MHD_Result res;
	const json_t *prompt = json_object_get(body, "prompt");
	const json_t *messages = json_object_get(body, "messages");
	const json_t *ats = json_object_get(body, "add_special_tokens");
	const json_t *strs = json_object_get(body, "return_token_strs");
	if (check_body_model(s, body, &ae) < 0)
		goto fail;
	if (ats && !json_is_null(ats) && !json_is_boolean(ats)) {
		api_error_set(&ae, 400, "add_special_tokens", "'add_special_tokens' must be a boolean");
		goto fail;
	}
	if (json_is_string(prompt)) {
		bool add = ats && !json_is_null(ats) ? json_is_true(ats) : true;
		struct err e;
		int rc = tok_encode(s->deps.tok, json_string_value(prompt), json_string_length(prompt), add, &ids, &n,
				    &e);
		if (rc < 0) {
			if (rc == TOK_ENOMEM)
				api_error_set(&ae, 500, NULL, "out of memory");
			else
				api_error_set(&ae, 400, "prompt", "%s", e.msg);
			goto fail;
		}
	} else if (messages) {
		struct srv_request req;
		if (srv_request_parse(body, SRV_API_CHAT, &s->deps.defaults, &s->lim, &req, &ae, NULL, 0) < 0)
			goto fail;
		int rc = gen_chat_prompt(s, req.messages, req.add_generation_prompt, req.continue_final_message,
					 req.chat_template_kwargs, req.add_special_tokens, &ids, &n, &ae);
		srv_request_fini(&req);
		if (rc < 0)
			goto fail;
	} else {
		api_error_set(&ae, 400, "prompt", "either 'prompt' (a string) or 'messages' is required");
		goto fail;
	}
	json_t *tokens = json_array(), *token_strs = json_null();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(tokens, json_integer(ids[i]));
	if (json_is_true(strs)) {
		json_decref(token_strs);
		token_strs = json_array();
		for (size_t i = 0; i < n; i++) {
			const char *t = tok_id_to_token(s->deps.tok, ids[i]);
			size_t m;
			char *clean = t ? utf8_sanitize(t, strlen(t), &m) : NULL;
			json_array_append_new(token_strs, clean ? json_stringn(clean, m) : json_null());
			free(clean);
		}
	}
	res = http_reply_json(r, 200,
			      json_pack("{s:I, s:i, s:o, s:o}", "count", (json_int_t)n, "max_model_len",
					s->max_model_len, "tokens", tokens, "token_strs", token_strs));
	free(ids);
	json_decref(body);
	return res;
fail:
	free(ids);
	json_decref(body);
	return routes_reply_error(r, &ae);
}

static enum MHD_Result detokenize(struct server *s, struct hreq *r)
{
	struct api_error ae;
	json_t *body = parse_body(r, &ae);
	if (!body)
		return routes_reply_error(r, &ae);
	const json_t *toks = json_object_get(body, "tokens");
	int32_t *ids = NULL;
	char *text = NULL;
	size_t len = 0, n = json_array_size(toks);
	if (check_body_model(s, body, &ae) < 0)
		goto fail;
	if (!json_is_array(toks)) {
		api_error_set(&ae, 400, "tokens", "'tokens': a list of token ids is required");
		goto fail;
	}
	ids = malloc((n ? n : 1) * sizeof *ids);
	if (!ids) {
		api_error_set(&ae, 500, NULL, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *t = json_array_get(toks, i);
		if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= s->lim.vocab_size) {
			api_error_set(&ae, 400, "tokens", "'tokens[%zu]' must be a token id in [0, %d)", i,
				      s->lim.vocab_size);
			goto fail;
		}
		ids[i] = (int32_t)json_integer_value(t);
	}
	struct err e;
	int rc = tok_decode(s->deps.tok, ids, n, false, &text, &len, &e);
	if (rc < 0) {
		if (rc == TOK_ENOMEM)
			api_error_set(&ae, 500, NULL, "out of memory");
		else
			api_error_set(&ae, 400, "tokens", "%s", e.msg);
		goto fail;
	}
	size_t m;
	char *clean = utf8_sanitize(text ? text : "", len, &m);
	free(text);
	free(ids);
	json_decref(body);
	json_t *out = clean ? json_pack("{s:s%}", "prompt", clean, m) : NULL;
	free(clean);
	return http_reply_json(r, 200, out);
fail:
	free(ids);
	json_decref(body);
	return routes_reply_error(r, &ae);
}

static enum MHD_Result chat(struct server *s, struct hreq *r)
{
	struct api_error ae;
	json_t *body = parse_body(r, &ae);
	return body ? gen_handle(s, r, SRV_API_CHAT, body) : routes_reply_error(r, &ae);
}

static enum MHD_Result completions(struct server *s, struct hreq *r)
{
	struct api_error ae;
	json_t *body = parse_body(r, &ae);
	return body ? gen_handle(s, r, SRV_API_COMPLETION, body) : routes_reply_error(r, &ae);
}

static enum MHD_Result responses(struct server *s, struct hreq *r)
{
	struct api_error ae;
	json_t *body = parse_body(r, &ae);
	return body ? gen_handle_responses(s, r, body) : routes_reply_error(r, &ae);
}

static const struct route {
	const char *method, *path;
	enum MHD_Result (*fn)(struct server *s, struct hreq *r);
} routes[] = {
	{"GET", "/health", health},
	{"GET", "/ping", health},
	{"POST", "/ping", health},
	{"GET", "/version", version},
	{"GET", "/v1/models", models},
	{"GET", "/metrics", metrics},
	{"POST", "/tokenize", tokenize},
	{"POST", "/detokenize", detokenize},
	{"POST", "/v1/chat/completions", chat},
	{"POST", "/v1/completions", completions},
	{"POST", "/v1/responses", responses},
};

/* GET /v1/responses/{id}/input_items: the stored conversation's input items (those of its
 * previous responses included), newest first unless order=asc, limit (1-100, default 20)
 * after the item id `after`, as OpenAI's list */
static enum MHD_Result input_items(struct server *s, struct hreq *r, const char *id)
{
	struct api_error ae;
	json_t *resp = NULL, *items = NULL;
	if (resp_store_get(s->store, id, &resp, &items) < 0) {
		api_error_set(&ae, 404, NULL, "Response with id '%s' not found.", id);
		return routes_reply_error(r, &ae);
	}
	size_t n = json_array_size(items) - json_array_size(json_object_get(resp, "output"));
	json_decref(resp);
	const char *lim = http_query_arg(r, "limit");
	const char *order = http_query_arg(r, "order");
	const char *after = http_query_arg(r, "after");
	char *end = NULL;
	long limit = lim ? strtol(lim, &end, 10) : 20;
	int rc = 0;
	if (lim && (*end || limit < 1 || limit > 100))
		rc = api_error_set(&ae, 400, "limit", "limit must be an integer from 1 to 100");
	bool asc = order && !strcmp(order, "asc");
	if (rc == 0 && order && !asc && strcmp(order, "desc"))
		rc = api_error_set(&ae, 400, "order", "order must be asc or desc");
	size_t k = 0; /* place in the listing order of the first item returned: after `after` */
	if (rc == 0 && after) {
		size_t at = n;
		for (size_t i = 0; i < n && at == n; i++) {
			const char *iid = json_string_value(
				json_object_get(json_array_get(items, asc ? i : n - 1 - i), "id"));
			if (iid && !strcmp(iid, after))
				at = i;
		}
		if (at == n)
			rc = api_error_set(&ae, 400, "after", "no input item '%s' in this response", after);
		k = at + 1;
	}
	json_t *data = json_array();
	for (size_t c = 0; rc == 0 && data && c < (size_t)limit && k + c < n; c++)
		json_array_append(data, json_array_get(items, asc ? k + c : n - 1 - (k + c)));
	json_decref(items);
	if (rc < 0) {
		json_decref(data);
		return routes_reply_error(r, &ae);
	}
	size_t m = json_array_size(data);
	json_t *list = json_pack("{s:s, s:o, s:O, s:O, s:b}", "object", "list", "data", data, "first_id",
				 m ? json_object_get(json_array_get(data, 0), "id") : json_null(), "last_id",
				 m ? json_object_get(json_array_get(data, m - 1), "id") : json_null(), "has_more",
				 k + m < n);
	return list ? http_reply_json(r, 200, list) : reply_err(r, 500, NULL, "out of memory");
}

/* /v1/responses/{id}: GET the stored Response, DELETE it; GET {id}/input_items lists its
 * input; {id}/cancel is refused (no background responses to cancel) */
static enum MHD_Result stored_response(struct server *s, struct hreq *r, const char *id)
{
	struct api_error ae;
	const char *slash = strchr(id, '/');
	if (slash && !strcmp(slash, "/input_items") && (!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD")) &&
	    resp_store_max(s->store) > 0) {
		char rid[RESP_ID_MAX];
		snprintf(rid, sizeof rid, "%.*s", (int)(slash - id), id);
		return input_items(s, r, rid);
	}
	if (slash)
		return reply_err(r, 404, NULL,
				 strstr(id, "/cancel") ? "only background responses can be cancelled, and "
							 "this server runs none"
						       : "Not Found");
	bool get = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD"), del = !strcmp(r->method, "DELETE");
	if (!get && !del)
		return reply_err(r, 405, NULL, "Method Not Allowed");
	if (resp_store_max(s->store) == 0)
		return reply_err(r, 404, NULL, "responses are not stored by this server (--responses-store-size 0)");
	json_t *resp = NULL;
	if (get ? resp_store_get(s->store, id, &resp, NULL) < 0 : resp_store_delete(s->store, id) < 0) {
		api_error_set(&ae, 404, NULL, "Response with id '%s' not found.", id);
		return routes_reply_error(r, &ae);
	}
	if (del)
		resp = json_pack("{s:s, s:s, s:b}", "id", id, "object", "response", "deleted", 1);
	return resp ? http_reply_json(r, 200, resp) : reply_err(r, 500, NULL, "out of memory");
}

/* A 405's Allow header: the methods the route table has for the path. */
static const char *allowed_methods(const char *path)
{
	bool get = false, post = false;
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
		if (!strcmp(routes[i].path, path)) {
			get |= !strcmp(routes[i].method, "GET");
			post |= !strcmp(routes[i].method, "POST");
		}
	return get && post ? "GET, POST" : post ? "POST" : "GET";
}

/* The CORS preflight is answered before this, by the transport (server/http/cors.h). */
enum MHD_Result routes_dispatch(void *server, struct hreq *r)
{
	struct server *s = server;
	if (!authorized(s, r)) {
		struct api_error ae;
		api_error_set(&ae, 401, NULL, "Unauthorized");
		return routes_reply_error(r, &ae);
	}
	bool path_known = false;
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		if (strcmp(routes[i].path, r->path))
			continue;
		path_known = true;
		if (!strcmp(routes[i].method, r->method) ||
		    (!strcmp(r->method, "HEAD") && !strcmp(routes[i].method, "GET")))
			return routes[i].fn(s, r);
	}
	if (path_known) {
		r->allow = allowed_methods(r->path);
		return reply_err(r, 405, NULL, "Method Not Allowed");
	}
	if (!strncmp(r->path, "/v1/responses/", 14))
		return stored_response(s, r, r->path + 14);
	return reply_err(r, 404, NULL, "Not Found");
}
