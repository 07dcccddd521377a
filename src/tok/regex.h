/* PCRE2 for tokenizer.json patterns: compiled once (UTF, UCP, JIT), matched with per-thread
 * scratch. Hugging Face compiles these with Oniguruma's Ruby syntax, where `^` / `$` are
 * line anchors, hence PCRE2_MULTILINE. */
#ifndef MLA_TOK_REGEX_H
#define MLA_TOK_REGEX_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct tok_regex {
	pcre2_code *code;
	bool jit;
	/* Bytes that can start a match (from PCRE2's start-of-match analysis); when
	 * has_first, a subject without any of them has no match and the call is skipped. */
	bool has_first;
	uint8_t first[32];
};

/* Per-thread match state (match data, JIT stack). */
struct tok_regex_ctx {
	pcre2_match_data *md;
	pcre2_match_context *mctx;
	pcre2_jit_stack *jit;
};

/* literal: the pattern is a plain string (tokenizer.json {"String": ...}). Errors name
 * `what` and the PCRE2 message with its offset. */
int tok_regex_compile(struct tok_regex *r, const char *pat, size_t len, bool literal, const char *what, struct err *e);
void tok_regex_free(struct tok_regex *r);

/* 0, or -1 out of memory (c then empty). */
int tok_regex_ctx_init(struct tok_regex_ctx *c);
void tok_regex_ctx_fini(struct tok_regex_ctx *c);

/* Finds the first match in s[0..n) starting at or after `from` (the subject is the whole
 * s: lookarounds see s, never text outside it). Returns 1 and [*ms, *me) on a match, 0
 * when none, -1 with an error (match limit, JIT stack) on pathological input. */
/* False when s[0..n) certainly has no match (no byte that can start one). */
static inline bool tok_regex_may_match(const struct tok_regex *r, const char *s, size_t n)
{
	if (!r->has_first)
		return true;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (r->first[c >> 3] & (1u << (c & 7)))
			return true;
	}
	return false;
}

int tok_regex_find(const struct tok_regex *r, struct tok_regex_ctx *c, const char *s, size_t n, size_t from,
		   size_t *ms, size_t *me, struct err *e);

#endif
