/* The typed field readers of request parsing (request_internal.h): each returns 0 when the
 * field is absent or null, 1 when read, -1 with a 400 naming the field (pydantic's wording). */
#include "server/openai/request_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Compact rendering of a value for messages (bounded). */
static const char *show(const json_t *v, char *buf, size_t n)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s) {
		snprintf(buf, n, "?");
		return buf;
	}
	if (strlen(s) >= n && n > 4)
		snprintf(buf, n, "%.*s...", (int)(n - 4), s);
	else
		snprintf(buf, n, "%s", s);
	free(s);
	return buf;
}

int req_bad_type(struct api_error *ae, const char *key, const char *what, const json_t *v)
{
	char b[96];
	return api_error_set(ae, 400, key, "'%s': input should be %s, got %s", key, what, show(v, b, sizeof b));
}

/* 0: absent or null, 1: read, -1: error. */
int req_get_bool(const json_t *o, const char *key, bool *out, struct api_error *ae)
{
	const json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return req_bad_type(ae, key, "a valid boolean", v);
	*out = json_is_true(v);
	return 1;
}

/* Integers; reals with an integral value are accepted as pydantic does. */
int req_get_int(const json_t *o, const char *key, long long *out, struct api_error *ae)
{
	const json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 1;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (d == floor(d) && fabs(d) < 9.0e18) {
			*out = (long long)d;
			return 1;
		}
		return req_bad_type(ae, key, "a valid integer, got a number with a fractional part", v);
	}
	return req_bad_type(ae, key, "a valid integer", v);
}

int req_get_num(const json_t *o, const char *key, double *out, struct api_error *ae)
{
	const json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return req_bad_type(ae, key, "a valid number", v);
	*out = json_number_value(v);
	return 1;
}

int req_get_str(const json_t *o, const char *key, const char **out, struct api_error *ae)
{
	const json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return req_bad_type(ae, key, "a valid string", v);
	*out = json_string_value(v);
	return 1;
}

int req_range_err(struct api_error *ae, const char *key, const char *rule, double v)
{
	return api_error_set(ae, 400, key, "%s must be %s, got %g.", key, rule, v);
}

int req_parse_token_list(const json_t *v, const char *key, int vocab, int max, int32_t *out, int *n_out,
			 struct api_error *ae)
{
	if (!json_is_array(v))
		return req_bad_type(ae, key, "a valid list of token ids", v);
	size_t n = json_array_size(v);
	if ((long)n > max)
		return api_error_set(ae, 400, key, "%s: at most %d token ids, got %zu", key, max, n);
	for (size_t i = 0; i < n; i++) {
		const json_t *t = json_array_get(v, i);
		if (!json_is_integer(t))
			return req_bad_type(ae, key, "a valid integer token id", t);
		long long id = json_integer_value(t);
		if (id < 0 || id >= vocab)
			return api_error_set(ae, 400, key, "%s: token id %lld is out of range [0, %d)", key, id,
					     vocab);
		out[i] = (int32_t)id;
	}
	*n_out = (int)n;
	return 0;
}
