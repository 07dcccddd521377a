#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum log_level log_level = LOG_INFO;
static int log_rank; /* set once at start-up, before any thread exists */

void log_set_rank(int rank) { log_rank = rank; }

void log_msg(enum log_level lvl, const char *module, const char *fmt, ...)
{
	static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
	if (lvl > log_level)
		return;
	if (log_rank != 0 && lvl > LOG_WARN)
		return;
	char line[2048];
	int n = snprintf(line, sizeof line, "%s [rank %d] %s: ", names[lvl], log_rank, module);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof line)
		vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line); /* one write per line: lines from threads do not interleave */
}
