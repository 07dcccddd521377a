/* Whole-file reads and a safe open for the loaders: messages name the path. */
#ifndef MLA_BASE_FILE_H
#define MLA_BASE_FILE_H

#include <stddef.h>
#include <sys/stat.h>

#include "base/err.h"

/* Opens PATH read-only and returns its fd (st filled), or -1 with "PATH: cannot open: ...".
 * O_NONBLOCK + a regular-file check: a FIFO or device must not hang a loader. */
int file_open_regular(const char *path, struct stat *st, struct err *e);

/* Reads the whole of PATH into a new NUL-terminated buffer (*out, free()); *len (may be
 * NULL) gets its length without the NUL. Errors: "PATH: cannot open: ...",
 * "PATH: read error", "PATH: out of memory". */
int file_read_all(const char *path, char **out, size_t *len, struct err *e);

#endif
