/* Lark grammars (the syntax of Python's Lark parser, which vLLM's guided_grammar also takes)
 * translated into this project's EBNF (guide/cfg.h), line for line, so that the compiler's
 * messages name the Lark line. What is taken:
 *   name: ... / ?name: / !name: / NAME.2: ...   rules and terminals (modifiers and priorities
 *                                                do not change the language)
 *   | on the next lines, "text", 'text', "text"i (ASCII case folded), "a".."z", /regex/ (no flags),
 *   ( ) [x] (optional) x? x* x+ x~n x~n..m, -> alias (dropped), // and # comments,
 *   %import common.NAME [-> ALIAS] and %import common (A, B) for Lark's common terminals,
 *   %ignore X: X may come before every token of a rule (a string, a regex or a terminal
 *   reference in a lowercase rule) and at the end, as Lark's lexer skips it.
 * The start rule is "start", else the first one. The language is the grammar's own: Lark's
 * lexer takes the longest match of a terminal, where here a token may also end earlier.
 * Templates, %declare / %override / %extend and other imports are refused by name. */
#ifndef MLA_GUIDE_LARK_H
#define MLA_GUIDE_LARK_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* No "::=" anywhere, and some line starts a Lark definition ("name:"). */
bool lark_likely(const char *src, size_t len);

/* The EBNF of a Lark grammar (malloc'd, *out_len bytes, to compile with CFG_REGEX_TERMS).
 * Errors: "grammar line N: ...". */
int lark_translate(const char *src, size_t len, char **out, size_t *out_len, struct err *e);

#endif
