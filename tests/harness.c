#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int harness_failed;
static char first_failure[1024];

void harness_fail(const char *file, int line, const char *fmt, ...)
{
	if (harness_failed++ == 0) {
		int n = snprintf(first_failure, sizeof first_failure, "%s:%d: ", file, line);
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(first_failure + n, sizeof first_failure - (size_t)n, fmt, ap);
		va_end(ap);
	}
}

const char *fixture_path(const char *rel)
{
	static char buf[8][4096];
	static int next;
	const char *root = getenv("MLASERVE_TEST_ROOT");
	char *b = buf[next++ % 8];
	snprintf(b, sizeof buf[0], "%s%stests/fixtures/%s", root ? root : "", root ? "/" : "", rel);
	return b;
}

/* argv[1], if given, runs only the tests whose name contains it. */
int harness_main(int argc, char **argv, const struct test_case *cases, int n)
{
	int failed = 0;
	for (int i = 0; i < n; i++) {
		if (argc > 1 && !strstr(cases[i].name, argv[1]))
			continue;
		harness_failed = 0;
		cases[i].fn();
		if (harness_failed) {
			printf("not ok - %s: %s\n", cases[i].name, first_failure);
			failed++;
		} else {
			printf("ok - %s\n", cases[i].name);
		}
		fflush(stdout);
	}
	return failed ? 1 : 0;
}
