/* The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocab, ranked merges,
 * unk / byte_fallback / fuse_unk / ignore_merges, continuing_subword_prefix and
 * end_of_word_suffix. Encodes one pre-token ("word") at a time. */
#ifndef MLA_TOK_BPE_H
#define MLA_TOK_BPE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "tok/tok_util.h"

struct bpe_merge_slot {
	uint64_t key; /* (left id << 32) | right id; UINT64_MAX = empty */
	uint32_t rank;
	int32_t new_id;
};

struct bpe {
	int32_t n_ids;           /* 1 + largest vocab id */
	struct tok_strmap vocab; /* token string → id */
	int32_t *entry_of_id;    /* id → entry index in vocab, or -1 (holes) */
	struct bpe_merge_slot *merges;
	size_t merges_cap; /* power of two */
	int32_t unk_id;    /* -1 none */
	bool fuse_unk, byte_fallback, ignore_merges;
	char *prefix, *suffix; /* continuing_subword_prefix / end_of_word_suffix, or NULL */
	/* Byte-level mode (set by the tokenizer when the pre-tokenizer has ByteLevel): words are
	 * raw bytes and each byte b stands for the vocab character tok_byte_to_cp(b). */
	bool byte_level;
	int32_t byte_id[256];     /* byte-level: id of the one-character token of each byte */
	int32_t fallback_id[256]; /* ids of "<0xXX>" tokens, -1 when absent */
};

/* Scratch memory for encoding, one per thread (reused across words). The tokenizer caches
 * results per piece; this level does not. */
struct bpe_scratch {
	struct bpe_sym *sym;
	size_t sym_cap;
	struct bpe_cand *heap;
	size_t heap_cap;
	struct strbuf word;
	bool oom; /* a symbol or candidate could not be added to this word */
};

/* Loads model; `what` names the file in messages ("DIR/tokenizer.json"). */
int bpe_load(struct bpe *b, const json_t *model, const char *what, struct err *e);
/* Switches to byte-level words (call once after bpe_load). */
void bpe_set_byte_level(struct bpe *b);
void bpe_free(struct bpe *b);

/* Appends the ids of one word (a pre-token, raw bytes, valid UTF-8 in char mode). 0, or -1
 * out of memory. */
int bpe_encode_word(const struct bpe *b, const char *w, size_t n, struct bpe_scratch *s, struct tok_ids *out);
void bpe_scratch_free(struct bpe_scratch *s);

/* Token string of id (as in the file) or NULL. */
const char *bpe_id_to_token(const struct bpe *b, int32_t id, size_t *len);

#endif
