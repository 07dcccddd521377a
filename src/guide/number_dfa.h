/* The automaton of a JSON Schema integer or number with bounds and multipleOf (number_dfa.c). */
#ifndef MLA_GUIDE_NUMBER_DFA_H
#define MLA_GUIDE_NUMBER_DFA_H

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"
#include "guide/regex_dfa.h"

/* s's bounds and multipleOf as a DFA over the number's text (integer: no fraction or
 * exponent); *dfa NULL when s constrains neither. Errors name path. */
int guide_number_dfa(const json_t *s, const char *path, bool integer, struct guide_dfa **dfa, struct err *e);

#endif
