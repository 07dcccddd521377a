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

size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	if (!n)
		return 0;
	int k = seq_len(s, n);
	if (k <= 0)
		return 0;
	uint32_t c = k == 1 ? s[0] : s[0] & (0x7Fu >> k);
	for (int i = 1; i < k; i++)
		c = (c << 6) | (s[i] & 0x3F);
	*cp = c;
	return (size_t)k;
}

int utf8_encode(uint32_t cp, char out[4])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

bool utf8_valid(const char *text, size_t n, size_t *bad_at)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t i = 0;
	while (i < n) {
		/* ASCII fast path, 8 bytes at a time */
		if (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, s + i, 8);
			if (!(w & 0x8080808080808080ULL)) {
				i += 8;
				continue;
			}
		}
		int k = seq_len(s + i, n - i);
		if (k <= 0) {
			if (bad_at)
				*bad_at = i;
			return false;
		}
		i += (size_t)k;
	}
	return true;
}

size_t utf8_incomplete_tail(const unsigned char *s, size_t n)
{
	/* only the last lead byte can start a character that the end cuts: a lead byte is never a
	 * continuation, so the characters before it end before it */
	for (size_t k = 1; k <= 3 && k <= n; k++) {
		if (s[n - k] < 0xC0)
			continue; /* ASCII or continuation: not a lead */
		return seq_len(s + n - k, k) == 0 ? k : 0;
	}
	return 0;
}

size_t utf8_lossy(const char *s, size_t n, char *out)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, run = 0; /* p[run..i) is valid and not yet copied */
	size_t i = 0;
	if (!n)
		return 0;
	while (i < n) {
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		int k = seq_len(p + i, n - i);
		if (k > 0) {
			i += (size_t)k;
			continue;
		}
		/* invalid subpart, or an incomplete sequence cut by the end of the text */
		memcpy(out + o, p + run, i - run);
		o += i - run;
		memcpy(out + o, "\xef\xbf\xbd", 3);
		o += 3;
		i += k < 0 ? (size_t)-k : n - i;
		run = i;
	}
	memcpy(out + o, p + run, n - run);
	return o + n - run;
}

char *utf8_sanitize(const char *s, size_t n, size_t *out_len)
{
	/* each invalid byte grows to at most 3 bytes */
	char *out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	size_t o = utf8_lossy(s, n, out);
	out[o] = 0;
	if (out_len)
		*out_len = o;
	return out;
}

size_t utf8_len(const char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += ((unsigned char)s[i] & 0xc0) != 0x80;
	return k;
}

size_t utf8_offset(const char *s, size_t n, size_t k)
{
	size_t i = 0;
	for (; i < n; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80) {
			if (k == 0)
				return i;
			k--;
		}
	}
	return n;
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
		json_array_foreach(v, i, x) if (any_string_has(x, needle)) return true;
	} else if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x) if (any_string_has(x, needle)) return true;
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
		json_array_foreach(v, i, x) if (!o || json_array_append_new(o, hide(x, sentinel)) < 0) goto fail;
	} else if (json_is_object(v)) {
		json_object_foreach((json_t *)v, key,
				    x) if (!o || json_object_set_new(o, key, hide(x, sentinel)) < 0) goto fail;
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
