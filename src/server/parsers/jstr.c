#include "server/parsers/jstr.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "base/utf8.h"

void jstr_random_id(char *buf, size_t n, const char *prefix)
{
	unsigned char r[16];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		/* never expected; fall back to a clock-derived id (ids need not be secret) */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		for (size_t i = 0; i < sizeof r; i++)
			r[i] = (unsigned char)((uint64_t)ts.tv_nsec >> (i % 8 * 8)) ^ (unsigned char)i;
	}
	int w = snprintf(buf, n, "%s", prefix);
	for (size_t i = 0; i < sizeof r && w >= 0 && (size_t)w + 2 < n; i++)
		w += snprintf(buf + w, n - (size_t)w, "%02x", r[i]);
}

json_t *jstr_new(const char *s, size_t n)
{
	if (utf8_valid(s, n, NULL))
		return json_stringn(s, n);
	size_t m;
	char *t = utf8_sanitize(s, n, &m);
	json_t *j = t ? json_stringn(t, m) : NULL;
	free(t);
	return j;
}
