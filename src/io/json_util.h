/* Small jansson helpers: load a file, read typed fields with messages that name the source,
 * the key and the bad value. Reusable by io/, tok/ and server/. */
#ifndef MLA_IO_JSON_UTIL_H
#define MLA_IO_JSON_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Parses PATH (any JSON value). Errors: "PATH: cannot open: ...", "PATH: line L column C: ...". */
int json_util_load(const char *path, json_t **out, struct err *e);
/* Parses a text; `what` names it in messages. */
int json_util_parse(const char *text, size_t len, const char *what, json_t **out, struct err *e);

/* Compact JSON rendering of v for messages, truncated with "..." to fit buf. */
const char *json_util_show(const json_t *v, char *buf, size_t n);

/* obj[key] with the dotted-path rule below; NULL when absent or obj is not an object. */
const json_t *json_util_get(const json_t *obj, const char *key);

/* Typed reads of obj[key]. `key` is shown in messages as written and may be a dotted path
 * ("rope_scaling.factor"): only the part after the last '.' is looked up in obj.
 * Return 0 when read, 1 when absent or null (*out = def), -1 on a wrong type with
 * "WHAT: key "KEY": expected an integer, got VALUE". */
int json_util_int(const json_t *obj, const char *what, const char *key, long long def, long long *out, struct err *e);
int json_util_num(const json_t *obj, const char *what, const char *key, double def, double *out,
		  struct err *e); /* integer or real */
int json_util_bool(const json_t *obj, const char *what, const char *key, bool def, bool *out, struct err *e);
int json_util_str(const json_t *obj, const char *what, const char *key, const char *def, const char **out,
		  struct err *e); /* *out points into obj */

/* A token id: an integer in [0, INT32_MAX). True and *out set when v is one. */
bool json_util_id(const json_t *v, int32_t *out);

/* Sets "WHAT: key "KEY": ADJ value VALUE (EXPECTED...)" and returns -1, e.g. adj "unsupported",
 * fmt "expected softmax or sigmoid". */
int json_util_bad(struct err *e, const char *what, const char *key, const json_t *v, const char *adj, const char *fmt,
		  ...) __attribute__((format(printf, 6, 7)));

#endif
