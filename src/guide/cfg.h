/* Context-free grammars for guided decoding (guided_grammar, structured_outputs.grammar):
 * the GBNF / xgrammar EBNF that vLLM's default backend takes, compiled into rules whose
 * alternatives are sequences of terminals (each a small byte DFA: a string literal, a
 * character class or ".") and rule references. guide/matcher.c walks them byte by byte with
 * one stack per live parse, as llama.cpp's grammar sampler does.
 *
 * The syntax:
 *   name ::= alternatives        one rule per definition (several definitions of one name
 *                                add alternatives); names are [A-Za-z_][A-Za-z0-9_.-]*;
 *                                the output is what the rule "root" derives
 *   a b c                        a sequence;   a | b   alternatives;   ( ... )  a group
 *   "text"                       a string: escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH
 *   [a-z_\n] [^"\\]              a character class (the same escapes; ^ negates)
 *   .                            any character
 *   x? x* x+ x{m} x{m,} x{m,n} x{,n}   repetition (m, n <= 1000)
 *   # ...                        a comment to the end of the line
 * A rule ends where the next "name ::=" begins, so rules may span lines. Left recursion
 * (expr ::= expr "+" term | term, also through other rules) is rewritten as repetition
 * (guide/cfg_unleft.h); behind a part that may match nothing (a ::= "x"? a "y") it is refused
 * with a message naming the rule. xgrammar's lookahead assertions are refused. Lark grammars
 * are translated into this syntax first (guide/lark.h). */
#ifndef MLA_GUIDE_CFG_H
#define MLA_GUIDE_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "guide/regex_dfa.h"

#define CFG_MAX_ELEMS 65536        /* elements of all sequences: bounds what {m,n} can expand to */
#define CFG_MAX_RULES 4096         /* named rules */
#define CFG_MAX_CLASS_STATES 16384 /* DFA states of all distinct character classes */
#define CFG_MAX_SOURCE (256 * 1024)

enum cfg_elem_kind { CFG_TERM, CFG_REF };

struct cfg_elem {
	uint8_t kind; /* enum cfg_elem_kind */
	int32_t id;   /* CFG_TERM: index into terms; CFG_REF: rule index */
};

struct cfg_seq {
	int32_t start, len; /* elems[start, start + len) */
};

struct cfg_rule {
	int32_t first, n_alts; /* its alternatives: seqs alt_seq[first, first + n_alts) */
};

/* A terminal: the bytes of a string, or one character of a class (or ".") by its DFA, whose
 * accepting states are the character's ends. */
struct cfg_term {
	char *lit; /* the string's UTF-8 (dfa NULL); never empty */
	size_t len;
	struct guide_dfa *dfa;
};

struct guide_cfg {
	int n_rules, n_seqs, n_elems, n_terms, n_alt;
	struct cfg_rule *rules;
	struct cfg_seq *seqs;
	struct cfg_elem *elems;
	int32_t *alt_seq;
	struct cfg_term *terms;
	int root;           /* the rule "root" */
	bool root_nullable; /* the empty output is whole */
	bool root_nonempty; /* some non-empty output is */
	char **names;       /* [n_rules] for messages (anonymous rules: NULL) */
};

/* Compiles `len` bytes of grammar text. Errors name the line: "grammar line 3: ...". */
int cfg_compile(const char *src, size_t len, struct guide_cfg **out, struct err *e);
/* ... with flags: CFG_REGEX_TERMS also takes /regex/ terminals (a Lark grammar's, which
 * guide/lark.h translates into this syntax) */
#define CFG_REGEX_TERMS 1u
int cfg_compile_ex(const char *src, size_t len, unsigned flags, struct guide_cfg **out, struct err *e);
void cfg_free(struct guide_cfg *c); /* NULL is fine */

#endif
