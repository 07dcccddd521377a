#include "server/utf8.h"

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
