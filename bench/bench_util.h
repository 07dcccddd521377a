/* Small helpers shared by the stand-alone benchmark programs in bench/. */
#ifndef MLA_BENCH_UTIL_H
#define MLA_BENCH_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mono.h"

/* qsort comparator for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* "1,16,64" -> v[0..n); each value in [1, max_value], at most max_n of them. -1 if bad. */
static inline int bench_list_parse(const char *s, int *v, int *n, int max_n, long max_value)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	*n = 0;
	for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
		char *end;
		errno = 0;
		long x = strtol(t, &end, 10);
		if (errno || *end || x < 1 || x > max_value || *n == max_n)
			return -1;
		v[(*n)++] = (int)x;
	}
	return *n ? 0 : -1;
}

#endif
