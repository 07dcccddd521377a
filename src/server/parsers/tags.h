/* Finding a tag in text that arrives in pieces (the reasoning and tool-call parsers). */
#ifndef MLA_SERVER_PARSERS_TAGS_H
#define MLA_SERVER_PARSERS_TAGS_H

#include <stddef.h>
#include <string.h>

/* Length of the longest suffix of p[0..n) that is a proper prefix of tag: the bytes to hold
 * back until the next piece tells whether the tag follows. */
static inline size_t tag_partial_tail(const char *p, size_t n, const char *tag, size_t tag_len)
{
	for (size_t k = n < tag_len - 1 ? n : tag_len - 1; k > 0; k--)
		if (!memcmp(p + n - k, tag, k))
			return k;
	return 0;
}

#endif
