/* The two JSON bits the parsers and the OpenAI answers share: a string from model bytes and
 * a random id (tool calls' "chatcmpl-tool-...", responses' "chatcmpl-...", "resp_..."). */
#ifndef MLA_SERVER_PARSERS_JSTR_H
#define MLA_SERVER_PARSERS_JSTR_H

#include <jansson.h>
#include <stddef.h>

/* A JSON string from model bytes that may not be valid UTF-8 (broken sequences → U+FFFD). */
json_t *jstr_new(const char *s, size_t n);

/* `prefix` "chatcmpl-" / "cmpl-" + 32 random hex digits into buf (>= 48 bytes). */
void jstr_random_id(char *buf, size_t n, const char *prefix);

#endif
