/* Left recursion in a compiled grammar (guide/cfg.h) rewritten as right recursion, which the
 * matcher runs in constant stack: r ::= r a | b becomes r ::= b t, t ::= a t | "" (the same
 * language). Rules that call each other first (a ::= b "x" | "y", b ::= a "z") are first
 * substituted into one another (Paull's algorithm). Left recursion behind a part that may
 * match nothing (a ::= "x"? a "y") is left as it is: the compiler refuses it. */
#ifndef MLA_GUIDE_CFG_UNLEFT_H
#define MLA_GUIDE_CFG_UNLEFT_H

#include <stdint.h>

#include "guide/cfg.h"

enum {
	CFG_UNLEFT_OOM = -1,
	CFG_UNLEFT_TOO_LARGE = -2, /* the rewrite passed CFG_MAX_ELEMS */
	CFG_UNLEFT_HIDDEN = -3,    /* left recursion behind a part that may match nothing */
	CFG_UNLEFT_CYCLE = -4,     /* a rule derives itself beside parts that may match nothing */
	CFG_UNLEFT_NO_END = -5,    /* no output ends the root rule */
};

/* Drops the alternatives that can never end, then rewrites c's rules in place (new anonymous
 * rules are appended, named as the rule they come from). On success returns 0 and *origin is
 * a malloc'd [c->n_rules] map from each rule to the rule it comes from (itself for the old
 * ones). Else one of the codes above, *bad_rule naming the rule at fault. c stays valid for
 * cfg_free either way. */
int cfg_unleft(struct guide_cfg *c, int32_t **origin, int *bad_rule);

#endif
