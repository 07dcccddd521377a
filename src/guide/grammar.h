/* Structured outputs: what a guided request's output must be, compiled once per request
 * from the OpenAI / vLLM fields (response_format json_object / json_schema, guided_json,
 * guided_choice, guided_regex, structured_outputs, tool_choice "required" or named) into a small graph of
 * value nodes that guide/matcher.c walks byte by byte.
 *
 * The JSON Schema subset (any other keyword is refused with a message naming it, so an output
 * always validates against the schema; within it, outputs may be a subset, as below):
 *   type (a name or a list), properties, required, additionalProperties (false, true or a
 *   schema), items (a schema, true or false), prefixItems, minItems, maxItems, uniqueItems
 *   (over an enum's values), minLength,
 *   maxLength, pattern (guide/regex_dfa.h's syntax, matched by the whole string, which then
 *   holds no escapes), format (date, time, date-time, duration, email, uuid, ipv4, ipv6,
 *   hostname, uri as patterns; a pattern beside it wins; other formats are annotations),
 *   minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers then written as plain
 *   decimals, compared exactly with the bounds' shortest decimals), multipleOf
 *   (guide/number_dfa.h), enum, const, anyOf, oneOf (generated as anyOf: an output matching
 *   two alternatives is not refused), allOf of a single schema (pydantic's wrapper of a $ref),
 *   $ref to
 *   "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed), and the annotations
 *   title, description, default, examples, $schema, $id, $comment, deprecated, readOnly,
 *   writeOnly.
 * As in vLLM's default backend (xgrammar), an object with properties is generated with its
 * keys in the schema's order, optional ones skippable, and no other keys; an object without
 * properties takes any keys whose values match additionalProperties (any value when
 * absent or true). Keys and literals are generated in compact JSON (jansson's escaping).
 *
 * A grammar is immutable once built and reference counted, so the server, the engine and
 * every choice of an n > 1 request share one. */
#ifndef MLA_GUIDE_GRAMMAR_H
#define MLA_GUIDE_GRAMMAR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"

struct guide_cfg;

#define GUIDE_MAX_PROPS 64   /* properties of one object (a 64-bit candidate mask) */
#define GUIDE_MAX_ALTS 32    /* alternatives of one anyOf (the matcher's parallel stacks) */
#define GUIDE_MAX_NODES 4096 /* nodes of one grammar */

enum guide_kind {
	GUIDE_OBJECT,
	GUIDE_ARRAY,
	GUIDE_STRING,
	GUIDE_NUMBER,
	GUIDE_INTEGER,
	GUIDE_LITERAL, /* these exact bytes: true, false, null, a const value */
	GUIDE_ANYOF,
	GUIDE_REGEX, /* text matching dfa: raw at the top (guided_regex, guided_choice), else a
			* JSON value that ends before a byte the DFA refuses (an enum, a bounded
			* integer or number) */
	GUIDE_CFG,   /* raw text that the context-free grammar cfg derives (guided_grammar);
			* only at the top */
};

struct guide_node {
	enum guide_kind kind;
	/* GUIDE_OBJECT */
	int n_props;
	char **keys; /* [n_props] each key as its JSON string, quotes included */
	size_t *key_len;
	int *prop;         /* [n_props] value node of each key */
	uint64_t required; /* bit i: key i must appear */
	int additional;    /* without properties: node of every value (keys any string) */
	/* GUIDE_ARRAY: item k's node is prefix[k] for k < n_prefix (prefixItems), else items */
	int items, min_items, max_items; /* max -1: none */
	int n_prefix;
	int *prefix;
	bool unique; /* uniqueItems over an enum's values: the matcher keeps the used ones */
	/* GUIDE_STRING: length in characters (code points) */
	int min_len, max_len; /* max -1: none */
	/* GUIDE_REGEX, or GUIDE_STRING with a "pattern" (its characters then go to the DFA
	 * unescaped: no backslash and no quote inside such a string) */
	struct guide_dfa *dfa;
	/* GUIDE_REGEX of an enum (a trie of its values' texts): enum_values, or 0 when not an
	 * enum; lit[state] the value that ends at that state (-1: none); reach[state] the values
	 * still reachable from it, one bit each (built for uniqueItems, up to 64 values) */
	int enum_values;
	int8_t *lit;
	uint64_t *reach;
	/* GUIDE_LITERAL */
	char *text;
	size_t len;
	/* GUIDE_ANYOF */
	int n_alts;
	int *alts;
	/* GUIDE_CFG */
	struct guide_cfg *cfg;
};

/* Fixed nodes of every grammar. ANY is the anyOf of the next seven, which differ in their
 * first byte. */
enum {
	GUIDE_NODE_ANY = 0,
	GUIDE_NODE_TRUE,
	GUIDE_NODE_FALSE,
	GUIDE_NODE_NULL,
	GUIDE_NODE_ANY_OBJECT, /* any keys, any values */
	GUIDE_NODE_ANY_ARRAY,  /* any items */
	GUIDE_NODE_ANY_STRING,
	GUIDE_NODE_ANY_NUMBER,
	GUIDE_NODE_FIXED
};

struct guide_grammar {
	atomic_int refs;
	uint64_t id; /* unique in the process (a cache key that outlives the address) */
	int root;
	int n_nodes, cap_nodes;
	struct guide_node *nodes;
	char *what; /* for logs: "json_schema", "json_object", "choice" */
};

/* Any JSON value whose top level is an object (response_format json_object). */
int guide_from_json_object(struct guide_grammar **out, struct err *e);
/* A JSON Schema (a JSON object, or true); `what` names it in errors ("response_format.
 * json_schema.schema"). */
int guide_from_schema(const json_t *schema, const char *what, struct guide_grammar **out, struct err *e);
/* Exactly one of the n strings (guided_choice): raw text, not JSON. */
int guide_from_choices(const char *const *choices, const size_t *lens, int n, struct guide_grammar **out,
		       struct err *e);

/* Raw text that the regular expression matches whole (guided_regex; guide/regex_dfa.h). */
int guide_from_regex(const char *re, size_t len, struct guide_grammar **out, struct err *e);
/* Raw text that a GBNF / EBNF grammar's rule "root" derives (guided_grammar; guide/cfg.h). */
int guide_from_ebnf(const char *text, size_t len, struct guide_grammar **out, struct err *e);

struct guide_grammar *guide_ref(struct guide_grammar *g);
void guide_unref(struct guide_grammar *g); /* NULL is fine */

#endif
