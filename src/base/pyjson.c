/* Python-style JSON text (base/pyjson.h). */
#include "base/pyjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

static int put(struct strbuf *o, const char *s) { return strbuf_put(o, s, strlen(s)); }

int pyjson_put_string(struct strbuf *o, const char *s, size_t n)
{
	if (put(o, "\"") < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8] = {0};
		switch (c) {
		case '"': strcpy(esc, "\\\""); break;
		case '\\': strcpy(esc, "\\\\"); break;
		case '\n': strcpy(esc, "\\n"); break;
		case '\r': strcpy(esc, "\\r"); break;
		case '\t': strcpy(esc, "\\t"); break;
		case '\b': strcpy(esc, "\\b"); break;
		case '\f': strcpy(esc, "\\f"); break;
		default:
			if (c < 0x20)
				snprintf(esc, sizeof esc, "\\u%04x", c);
		}
		if (esc[0] ? put(o, esc) < 0 : strbuf_put(o, s + i, 1) < 0)
			return -1;
	}
	return put(o, "\"");
}

int pyjson_put_real(struct strbuf *o, double x)
{
	if (!isfinite(x))
		return put(o, x > 0 ? "Infinity" : x < 0 ? "-Infinity" : "NaN");
	char out[64];
	fmt_double_repr(x, out, sizeof out);
	return put(o, out);
}

int pyjson_dump(const json_t *v, struct strbuf *o)
{
	char num[32];
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		const char *key;
		json_t *x;
		int first = 1;
		if (put(o, "{") < 0)
			return -1;
		json_object_foreach((json_t *)v, key, x)
		{
			if ((!first && put(o, ", ") < 0) || pyjson_put_string(o, key, strlen(key)) < 0 ||
			    put(o, ": ") < 0 || pyjson_dump(x, o) < 0)
				return -1;
			first = 0;
		}
		return put(o, "}");
	}
	case JSON_ARRAY:
		if (put(o, "[") < 0)
			return -1;
		for (size_t i = 0; i < json_array_size(v); i++)
			if ((i && put(o, ", ") < 0) || pyjson_dump(json_array_get(v, i), o) < 0)
				return -1;
		return put(o, "]");
	case JSON_STRING: return pyjson_put_string(o, json_string_value(v), json_string_length(v));
	case JSON_INTEGER:
		snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return put(o, num);
	case JSON_REAL: return pyjson_put_real(o, json_real_value(v));
	case JSON_TRUE: return put(o, "true");
	case JSON_FALSE: return put(o, "false");
	default: return put(o, "null");
	}
}
