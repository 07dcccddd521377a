/* Regular expressions for guided decoding (guided_regex, structured_outputs.regex, JSON
 * Schema "pattern") compiled to a DFA over UTF-8 bytes that accepts exactly the texts the
 * expression matches as a whole (Python's re.fullmatch; a leading ^ and a trailing $ are
 * allowed and change nothing).
 *
 * The syntax: literals, escapes (\d \w \s \D \W \S, \n \t \r \f \v \0, \xHH, \uHHHH, and a
 * backslash before any punctuation), ".", classes [a-z_] and [^...] (with the escapes
 * above inside), groups ( ) and (?: ) and named groups (?P<name> ) / (?<name> ), "|",
 * and the quantifiers * + ? {m} {m,} {m,n} {,n} (lazy and possessive forms match the same
 * texts). \d, \w and \s are ASCII; "." is any character but "\n"; negated classes and "."
 * take any Unicode scalar value, so the DFA accepts only valid UTF-8. A lookahead (?=X) or
 * (?!X) at the start holds for a prefix of the text (for the whole text when X ends in "$")
 * (regex_lookahead.c). Backreferences, other lookaround, anchors inside the expression and
 * flags are refused with a message naming them. */
#ifndef MLA_GUIDE_REGEX_DFA_H
#define MLA_GUIDE_REGEX_DFA_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define GUIDE_DFA_MAX_STATES 20000
#define GUIDE_REGEX_MAX_LEN 4096

struct guide_dfa {
	int n_states;    /* state 0 is the start */
	int32_t *next;   /* [n_states][256]: the next state, -1 when the byte is refused */
	uint8_t *accept; /* [n_states]: the text so far is a match */
	uint8_t *live;   /* [n_states]: some byte is accepted */
};

int guide_dfa_compile(const char *re, size_t len, struct guide_dfa **out, struct err *e);
/* The DFA of exactly these n byte strings (their trie): enums and choices of any number. */
int guide_dfa_literals(const char *const *lits, const size_t *lens, int n, struct guide_dfa **out, struct err *e);
void guide_dfa_free(struct guide_dfa *d);

#endif
