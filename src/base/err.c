#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int err_vset(struct err *e, const char *fmt, va_list ap)
{
	if (e)
		vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	return -1;
}

int err_set(struct err *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(e, fmt, ap);
	va_end(ap);
	return -1;
}

int err_prefix(struct err *e, const char *fmt, ...)
{
	if (!e)
		return -1;
	char ctx[ERR_MSG_MAX], old[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof ctx, fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof old);
	/* either part may be cut to fit; the message stays one bounded line */
	int n = snprintf(e->msg, sizeof e->msg, "%s: ", ctx);
	if (n >= 0 && (size_t)n < sizeof e->msg)
		snprintf(e->msg + n, sizeof e->msg - (size_t)n, "%.*s", (int)(sizeof e->msg - (size_t)n - 1), old);
	return -1;
}

void check_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "internal error: %s:%d: CHECK(%s) failed\n", file, line, what);
	abort();
}
