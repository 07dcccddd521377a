/* Helpers the sub-commands share: integer flags and token-id lists. */
#ifndef MLA_SETUP_CLI_UTIL_H
#define MLA_SETUP_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The integer V of FLAG in [lo, hi]; V may be NULL (a missing value).
 * Error: "FLAG: invalid value 'V' (expected an integer in [LO, HI])". */
int cli_int_parse(const char *flag, const char *v, int lo, int hi, int *out, struct err *e);

/* A token-id list: "1,2,3", "1 2 3" or "[1, 2, 3]" (commas, blanks and brackets separate);
 * each id in [0, INT32_MAX]. *out is malloc'ed (also when empty). An empty list is an
 * error unless allow_empty. Errors name FLAG: "FLAG: invalid token id list 'S'". */
int cli_ids_parse(const char *flag, const char *s, bool allow_empty, int32_t **out, size_t *n, struct err *e);

#endif
