/* tiktoken's byte-level BPE as Moonshot's Kimi tokenizer (tokenization_kimi.py) runs it:
 * a `tiktoken.model` rank file (one "base64(token bytes) rank" per line), Kimi's
 * pre-tokenizer pattern, special tokens matched in the text, and the rank-ordered merge
 * loop of tiktoken's CoreBPE (merge the adjacent pair whose bytes have the lowest rank,
 * leftmost on ties, until no pair is a token; a piece that is a token is that one id). */
#ifndef MLA_TOK_TIKTOKEN_H
#define MLA_TOK_TIKTOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "tok/added.h"
#include "tok/bpe.h"
#include "tok/regex.h"
#include "tok/tok_util.h"

/* tokenization_kimi.py's TIKTOKEN_MAX_ENCODE_CHARS and MAX_NO_WHITESPACES_CHARS: the text
 * is cut into chunks of this many characters, and each chunk where a run of whitespace or
 * of non-whitespace (Python's str.isspace) grows past the second limit, before encoding. */
#define TIKTOKEN_CHUNK_CHARS 400000
#define TIKTOKEN_MAX_RUN_CHARS 25000

struct tiktoken {
	struct tok_strmap ranks; /* token bytes → rank */
	int32_t n_ranks;         /* lines; Kimi's special ids start here */
	int32_t max_rank;
	struct tok_regex pat; /* Kimi's pattern in PCRE2 syntax */
	size_t max_run;       /* TIKTOKEN_MAX_RUN_CHARS; tests lower it */
};

/* Per-thread scratch of one encode. */
struct tiktoken_scratch {
	struct tok_regex_ctx rx;
	uint32_t *next, *prev; /* byte-part boundaries of the piece being merged */
	struct tiktoken_cand *heap;
	size_t cap, heap_cap;
	struct added_piece *seg;
	size_t n_seg, cap_seg;
	struct tok_cache cache; /* short piece → ids */
};

/* Parses the text of a rank file. Errors name `what` and the 1-based line:
 * "DIR/tiktoken.model: line 7: bad base64 'a$=='", "... line 9: rank 3 is repeated (line 4)",
 * "... line 2: expected 'TOKEN RANK'", "...: byte 0x0a has no rank" (every single byte must
 * be a token, as tiktoken requires). Empty lines are skipped, as load_tiktoken_bpe does. */
int tiktoken_parse(struct tiktoken *k, const char *text, size_t n, const char *what, struct err *e);
void tiktoken_free(struct tiktoken *k);

/* Fills an empty struct bpe with the byte-level vocab (each token's bytes written in GPT-2's
 * byte alphabet, as tokenization_kimi.py's get_vocab shows them) so that the tokenizer's
 * lookups and decoder tables work on it unchanged. */
int tiktoken_vocab(const struct tiktoken *k, struct bpe *b, struct err *e);

/* The ids of one pre-token: its own rank when it is a token, else the merge loop. 0, or -1
 * out of memory. */
int tiktoken_encode_piece(const struct tiktoken *k, const char *p, size_t n, struct tiktoken_scratch *s,
			  struct tok_ids *out);

/* Encodes valid UTF-8 text as tokenization_kimi.py's encode(text) does: chunking, special
 * tokens (the raw trie of `specials`: every special is recognised in the text), the pattern,
 * BPE. 0, -1 with e set (regex failure), or TOK_ENOMEM. */
int tiktoken_encode(const struct tiktoken *k, const struct added_set *specials, struct tiktoken_scratch *s,
		    const char *text, size_t len, struct tok_ids *out, struct err *e);

void tiktoken_scratch_free(struct tiktoken_scratch *s);

#endif
