/* A byte-level matcher of a guide grammar (guide/grammar.h): a pushdown automaton over the
 * bytes of the output, one stack per alternative still alive (anyOf alternatives that accept
 * the same bytes so far, e.g. two object schemas before their first key differs).
 *
 * JSON as generated: no whitespace before or after the top-level value, elsewhere at most
 * JM_MAX_WS whitespace bytes in a row with at most one line break among them (pretty printing
 * fits; a model cannot loop on blank lines, a known failure of unbounded whitespace), strings
 * of valid UTF-8 without raw control characters, numbers of at most JM_MAX_NUM bytes, nesting
 * at most 30 containers deep (JM_MAX_DEPTH frames, the root's included). A choice
 * (guided_choice) is its raw bytes, and a regex (guided_regex) raw text that its DFA accepts.
 *
 * Why a byte matcher over a value graph rather than a general grammar engine: JSON is what
 * users ask for, and the state stays a few small frames that the vocabulary trie walk copies
 * per node. anyOf runs as parallel stacks (no backtracking); GBNF / Lark rules (guide/cfg.h)
 * run on the same stacks (matcher.c: F_CFG frames), so the mask, the engine and the fuzz
 * targets serve both. Duplicate parses (an ambiguous grammar reaching one stack several ways)
 * are dropped as they are made, so that they do not take the places of distinct ones. */
#ifndef MLA_GUIDE_MATCHER_H
#define MLA_GUIDE_MATCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guide/grammar.h"

#define JM_MAX_DEPTH 32
#define JM_MAX_ALTS \
	GUIDE_MAX_ALTS /* stacks kept (nested anyOfs may multiply them): past this the
					 * first ones, which never gives an invalid output */
#define JM_MAX_WS 32
#define JM_MAX_NUM 32

struct jm_frame {
	int32_t node;   /* grammar node */
	uint8_t kind;   /* frame kind (matcher.c) */
	uint8_t st;     /* its sub-state */
	uint8_t ws;     /* whitespace bytes in the current gap */
	uint8_t need;   /* string: UTF-8 continuation bytes still expected */
	uint8_t lo, hi; /* string: range of the next continuation byte */
	uint16_t key;   /* object: the key whose value comes */
	uint32_t n;     /* string characters, array items, literal / number bytes, object: next key index */
	uint32_t pos;   /* object: bytes of the key matched so far */
	uint64_t cand;  /* object: keys the bytes so far can still be */
};

struct jm_stack {
	int depth; /* frames in use; f[0] is the root */
	struct jm_frame f[JM_MAX_DEPTH];
};

struct jm_state {
	int n;    /* alternatives alive */
	bool cut; /* some parse was given up on the way (more than JM_MAX_ALTS stacks at once, rules
		   * nested past JM_MAX_DEPTH, or a byte's expansion budget spent: an ambiguous grammar):
		   * a refusal may then be the bound's, an acceptance never is */
	struct jm_stack s[JM_MAX_ALTS];
};

/* The state before any output. */
void jm_init(struct jm_state *s, const struct guide_grammar *g);
/* Advances by one byte; false (and s unchanged but for cut) when no alternative accepts it. */
bool jm_feed(struct jm_state *s, const struct guide_grammar *g, uint8_t b);
/* Advances by bytes [0, n); false (s then undefined) when one is refused. */
bool jm_feed_bytes(struct jm_state *s, const struct guide_grammar *g, const uint8_t *p, size_t n);
/* True when the output so far is a whole value (the request may end here). */
bool jm_complete(const struct jm_state *s, const struct guide_grammar *g);
/* True when no byte can follow (complete, and nothing may extend it). */
bool jm_finished(const struct jm_state *s, const struct guide_grammar *g);
/* Copies the live part of src (the rest of dst is left as it was). */
void jm_copy(struct jm_state *dst, const struct jm_state *src);

#endif
