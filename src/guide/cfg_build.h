/* Internals of guide/cfg.c shared with its text parser (cfg_parse.c): the grammar being
 * built and the builder's steps. Not an API: only these two files include it. */
#ifndef MLA_GUIDE_CFG_BUILD_H
#define MLA_GUIDE_CFG_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "guide/cfg.h"

#define CFG_MAX_REPEAT 1000
#define CFG_MAX_NEST 64 /* ( ) groups inside each other */
#define LEFT_HIDDEN "left recursion behind a part that may match nothing, through rule "

/* a sequence being built (its elements go to the grammar's array when it is whole) */
struct seqbuf {
	struct cfg_elem *v;
	int n, cap;
};

struct intlist {
	int32_t *v;
	int n, cap;
};

struct builder {
	const char *p, *end, *start;
	struct err *e;
	bool failed;
	struct guide_cfg *c;
	int cap_rules, cap_seqs, cap_elems, cap_terms;
	struct intlist *alts;    /* [n_rules] the alternatives' sequences of each rule */
	const char **defined_at; /* [n_rules] its first definition (NULL: only used) */
	const char **used_at;    /* [n_rules] its first use */
	int32_t *hash;           /* named rules by name: rule + 1, 0 empty; HASH_CAP slots */
	int n_named;
	char **class_re;     /* [n_terms] a class terminal's regex text (NULL: a string) */
	int32_t *class_hash; /* class terminals by regex text, to share DFAs: term + 1, 0
				    * empty; CLASS_HASH_CAP slots */
	int class_states;
	int nest;
	int n_parsed;     /* rules from the text (b->alts, used_at); later ones come from cfg_unleft */
	bool regex_terms; /* CFG_REGEX_TERMS */
};

#define HASH_CAP 8192 /* a power of two over 2x CFG_MAX_RULES */
/* a power of two over 2x the distinct classes: each DFA has 2 states or more, so at most
 * CFG_MAX_CLASS_STATES / 2 of them */
#define CLASS_HASH_CAP 16384

/* Records the first error (grammar line N: fmt what) and marks b failed; returns -1. */
int cfgb_fail_at(struct builder *b, const char *at, const char *fmt, const char *what);
int cfgb_oom(struct builder *b);
/* Appends an element (CFG_TERM / CFG_RULE, id) to sequence s. */
int cfgb_seq_add(struct builder *b, struct seqbuf *s, uint8_t kind, int32_t id);
/* A new rule: named (len > 0) or an anonymous group (name NULL). */
int cfgb_new_rule(struct builder *b, const char *name, size_t len);
/* The rule of that name, created at its first mention. */
int cfgb_rule_by_name(struct builder *b, const char *name, size_t len);
/* Adds sequence s as one more alternative of rule r. */
int cfgb_add_alt(struct builder *b, int r, struct seqbuf *s);
/* One character of a class (regex text re): a terminal, the same one for the same text. */
int cfgb_add_class(struct builder *b, const char *re, size_t len, const char *at);
/* A string's bytes (len > 0; taken over): a terminal. */
int cfgb_add_lit(struct builder *b, char *lit, size_t len);

/* cfg_parse.c: parses the whole text at b->p into rules (errors through cfgb_fail_at). */
void cfg_parse_rules(struct builder *b);

#endif
