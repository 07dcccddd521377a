/* Added tokens of tokenizer.json ("added_tokens"): matched in the text before
 * pre-tokenization, leftmost-longest, honouring lstrip / rstrip / single_word. Tokens with
 * "normalized": false are matched on the raw text, those with "normalized": true on the
 * normalized text (Hugging Face's AddedVocabulary, two passes). */
#ifndef MLA_TOK_ADDED_H
#define MLA_TOK_ADDED_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct added_token {
	char *content;
	size_t len;
	int32_t id;
	bool special, lstrip, rstrip, single_word, normalized;
};

/* A byte trie over the contents of one class of added tokens. */
struct added_trie {
	struct added_node *node; /* node 0 is the root */
	size_t n, cap;
	bool first[256]; /* bytes that can start a match */
};

struct added_set {
	struct added_token *tok;
	size_t n;
	struct added_trie raw, norm; /* normalized: false / true */
};

/* One piece of a split: either an added token (id >= 0) or text (id -1), a byte range of
 * the string that was split. */
struct added_piece {
	size_t off, len;
	int32_t id;
};

int added_load(struct added_set *a, const json_t *arr, const char *what, struct err *e);
void added_free(struct added_set *a);

/* Splits s[0..n) on the tokens of trie (`normalized` picks the class), appending pieces to
 * *out (realloc'd; *n_out / *cap_out updated). Text pieces may be empty-free: no empty
 * pieces are produced. 0, or -1 out of memory. */
int added_split(const struct added_set *a, bool normalized, const char *s, size_t n, struct added_piece **out,
		size_t *n_out, size_t *cap_out);

#endif
