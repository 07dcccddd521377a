/* Private to the request parser (request.c, request_fields.c, request_sampling.c). */
#ifndef MLA_SERVER_OPENAI_REQUEST_INTERNAL_H
#define MLA_SERVER_OPENAI_REQUEST_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "server/openai/request.h"

/* 400 "'key': input should be WHAT, got V". Returns -1. */
int req_bad_type(struct api_error *ae, const char *key, const char *what, const json_t *v);
/* 400 "key must be RULE, got V." Returns -1. */
int req_range_err(struct api_error *ae, const char *key, const char *rule, double v);
/* Field readers: 0 absent or null, 1 read, -1 wrong type (400). Integers accept reals with
 * an integral value, as pydantic does; strings are borrowed from o. */
int req_get_bool(const json_t *o, const char *key, bool *out, struct api_error *ae);
int req_get_int(const json_t *o, const char *key, long long *out, struct api_error *ae);
int req_get_num(const json_t *o, const char *key, double *out, struct api_error *ae);
int req_get_str(const json_t *o, const char *key, const char **out, struct api_error *ae);

/* A JSON list of token ids in [0, vocab), at most max, into out (*n its length). */
int req_parse_token_list(const json_t *v, const char *key, int vocab, int max, int32_t *out, int *n,
			 struct api_error *ae);

/* The sampling fields of both endpoints into r->sp (and r's logprobs / extras). */
int req_parse_sampling(const json_t *body, enum srv_api api, const struct sampling_params *base,
		       const struct srv_limits *lim, struct srv_request *r, struct api_error *ae);

#endif
