#include "base/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid sequence starting at s[0] (1..4), or -(k) where k >= 1 is the length
 * of the maximal invalid subpart (Unicode §3.9 / WHATWG decoder), or 0 when s[0..n) is a
 * valid but incomplete prefix of a sequence (needs more bytes). */
static int seq_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	int need;
	unsigned lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		need = 1;
	else if (c >= 0xe0 && c <= 0xef) {
		need = 2;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 3;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else
		return -1;
	for (int i = 1; i <= need; i++) {
		if ((size_t)i >= n)
			return 0;
		unsigned b = s[i];
		if (b < lo || b > hi)
			return -i;
		lo = 0x80, hi = 0xbf;
	}
	return need + 1;
}

bool utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		int k = seq_len(p + i, n - i);
		if (k <= 0)
			return false;
		i += (size_t)k;
	}
	return true;
}

size_t utf8_complete_prefix(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	while (i < n) {
		int k = seq_len(p + i, n - i);
		if (k == 0)
			return i; /* a character still forming at the end */
		i += (size_t)(k > 0 ? k : -k);
	}
	return n;
}

char *utf8_sanitize(const char *s, size_t n, size_t *out_len)
{
	const unsigned char *p = (const unsigned char *)s;
	/* each invalid byte grows to at most 3 bytes */
	char *out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		int k = seq_len(p + i, n - i);
		if (k > 0) {
			memcpy(out + o, p + i, (size_t)k);
			o += (size_t)k;
			i += (size_t)k;
			continue;
		}
		/* invalid subpart, or an incomplete sequence cut by the end of the text */
		size_t skip = k < 0 ? (size_t)-k : n - i;
		memcpy(out + o, "\xef\xbf\xbd", 3);
		o += 3;
		i += skip;
	}
	out[o] = 0;
	if (out_len)
		*out_len = o;
	return out;
}

/* whether any string in v holds needle (NULL: a NUL byte) */
static bool any_string_has(const json_t *v, const char *needle)
{
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v);
		return needle ? memmem(s, n, needle, strlen(needle)) != NULL : memchr(s, 0, n) != NULL;
	}
	size_t i;
	const char *k;
	json_t *x;
	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if (any_string_has(x, needle))
				return true;
	} else if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x)
			if (any_string_has(x, needle))
				return true;
	}
	return false;
}

static json_t *hide(const json_t *v, const char *sentinel)
{
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v), m = strlen(sentinel), k = 0;
		char *b = malloc(n * m + 1);
		if (!b)
			return NULL;
		for (size_t i = 0; i < n; i++) {
			if (s[i]) {
				b[k++] = s[i];
			} else {
				memcpy(b + k, sentinel, m);
				k += m;
			}
		}
		json_t *o = json_stringn_nocheck(b, k);
		free(b);
		return o;
	}
	size_t i;
	const char *key;
	json_t *x;
	json_t *o = json_is_array(v) ? json_array() : json_is_object(v) ? json_object() : json_copy((json_t *)v);
	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if (!o || json_array_append_new(o, hide(x, sentinel)) < 0)
				goto fail;
	} else if (json_is_object(v)) {
		json_object_foreach((json_t *)v, key, x)
			if (!o || json_object_set_new(o, key, hide(x, sentinel)) < 0)
				goto fail;
	}
	return o;
fail:
	json_decref(o);
	return NULL;
}

json_t *nul_hide(const json_t *v, char sentinel[NUL_SENTINEL_MAX], bool *failed)
{
	*failed = false;
	if (!any_string_has(v, NULL))
		return NULL;
	/* noncharacters, which no text should hold; the first that none of the strings does */
	static const char *const cand[] = {"\xef\xbf\xbf", "\xef\xbf\xbe", "\xf4\x8f\xbf\xbf", "\xf0\x9f\xbf\xbf"};
	for (size_t c = 0; c < sizeof cand / sizeof *cand; c++) {
		if (any_string_has(v, cand[c]))
			continue;
		snprintf(sentinel, NUL_SENTINEL_MAX, "%s", cand[c]);
		json_t *o = hide(v, sentinel);
		*failed = !o;
		return o;
	}
	*failed = true;
	return NULL;
}

size_t nul_restore(char *text, const char *sentinel)
{
	size_t m = strlen(sentinel), k = 0;
	for (const char *p = text; *p;) {
		if (!strncmp(p, sentinel, m)) {
			text[k++] = 0;
			p += m;
		} else {
			text[k++] = *p++;
		}
	}
	text[k] = 0;
	return k;
}
