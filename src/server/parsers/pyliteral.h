/* Python literals as JSON: the part of ast.literal_eval that a model writes as a tool call's
 * argument (glm47 reads a value this way when it is not JSON). */
#ifndef MLA_SERVER_PARSERS_PYLITERAL_H
#define MLA_SERVER_PARSERS_PYLITERAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* s[0..n) when it is one Python literal: None, True, False, an int (decimal, 0x, 0o, 0b,
 * underscores) or float within a double, a quoted string ('...', "..." with Python's escapes,
 * adjacent ones joined), a list, a tuple (→ a JSON array), a dict whose keys are strings, ints,
 * True, False or None (→ json.dumps's key text), a sign before a number; as JSON. NULL when it
 * is not (sets, bytes, complex numbers, triple quotes and f-strings are not read: the caller
 * keeps the text), or memory ran out (*oom set). */
json_t *py_literal_json(const char *s, size_t n, bool *oom);

#endif
