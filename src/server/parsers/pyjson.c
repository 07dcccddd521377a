/* Python-style JSON text (server/parsers/pyjson.h). */
#include "server/parsers/pyjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int put(struct strbuf *o, const char *s) { return strbuf_put(o, s, strlen(s)); }

static int dump_string(const char *s, size_t n, struct strbuf *o)
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

/* Python's repr of a finite double */
static int dump_real(double x, struct strbuf *o)
{
	char e[40];
	for (int p = 1; p <= 17; p++) { /* the shortest round trip */
		snprintf(e, sizeof e, "%.*e", p - 1, x);
		if (strtod(e, NULL) == x)
			break;
	}
	/* e: [-]d[.ddd]e±XX → digits and the decimal point position */
	char digits[24];
	int nd = 0, neg = e[0] == '-';
	const char *p = e + neg;
	for (; *p && *p != 'e'; p++)
		if (*p != '.')
			digits[nd++] = *p;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	int decpt = atoi(p + 1) + 1;
	char out[64];
	size_t k = 0;
	if (neg)
		out[k++] = '-';
	if (decpt <= -4 || decpt > 16) {
		out[k++] = digits[0];
		if (nd > 1) {
			out[k++] = '.';
			for (int i = 1; i < nd; i++)
				out[k++] = digits[i];
		}
		snprintf(out + k, sizeof out - k, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
	} else if (decpt <= 0) {
		out[k++] = '0', out[k++] = '.';
		for (int i = 0; i < -decpt; i++)
			out[k++] = '0';
		for (int i = 0; i < nd; i++)
			out[k++] = digits[i];
		out[k] = 0;
	} else {
		for (int i = 0; i < (nd > decpt ? nd : decpt); i++) {
			if (i == decpt)
				out[k++] = '.';
			out[k++] = i < nd ? digits[i] : '0';
		}
		if (nd <= decpt)
			out[k++] = '.', out[k++] = '0';
		out[k] = 0;
	}
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
		json_object_foreach((json_t *)v, key, x) {
			if ((!first && put(o, ", ") < 0) || dump_string(key, strlen(key), o) < 0 || put(o, ": ") < 0 ||
			    pyjson_dump(x, o) < 0)
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
	case JSON_STRING:
		return dump_string(json_string_value(v), json_string_length(v), o);
	case JSON_INTEGER:
		snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return put(o, num);
	case JSON_REAL:
		return isfinite(json_real_value(v)) ? dump_real(json_real_value(v), o)
						    : put(o, json_real_value(v) > 0 ? "Infinity" : json_real_value(v) < 0 ? "-Infinity" : "NaN");
	case JSON_TRUE:
		return put(o, "true");
	case JSON_FALSE:
		return put(o, "false");
	default:
		return put(o, "null");
	}
}
