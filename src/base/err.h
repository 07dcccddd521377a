/* Error reporting: fallible functions return an int status (0 ok, <0 error) and fill a
 * struct err with a one-line, lower-case message naming the object and the bad value. */
#ifndef MLA_BASE_ERR_H
#define MLA_BASE_ERR_H

#include <stdarg.h>

#define ERR_MSG_MAX 1024

struct err {
	char msg[ERR_MSG_MAX];
};

/* Set the message (printf-style) and return -1, so callers can `return err_set(e, ...)`.
 * A NULL e is allowed (the message is dropped). */
int err_set(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int err_vset(struct err *e, const char *fmt, va_list ap);
/* Prepend context: "ctx: <old message>". Returns -1. */
int err_prefix(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Abort with file:line on a broken internal invariant (never for user input). */
#define CHECK(cond)                                            \
	do {                                                   \
		if (!(cond))                                   \
			check_fail(__FILE__, __LINE__, #cond); \
	} while (0)
_Noreturn void check_fail(const char *file, int line, const char *what);

#endif
