/* The vocabulary side of guided decoding: every token's bytes in a trie, walked from a
 * matcher state so that a whole subtree is dropped at the first byte the state refuses
 * (inside a JSON string most of the vocabulary is allowed; elsewhere a few hundred tokens
 * are visited). Special tokens are never allowed; EOS is allowed once the output is a
 * whole value, and is then the only token when nothing may follow. */
#ifndef MLA_GUIDE_VOCAB_H
#define MLA_GUIDE_VOCAB_H

#include <stdint.h>

#include "base/err.h"
#include "guide/matcher.h"

struct tok;
struct guide_vocab;

/* vocab: the model's logits width (ids past the tokenizer's are never allowed). Fails for a
 * tokenizer whose decoder does not simply concatenate token bytes. */
int guide_vocab_new(const struct tok *t, int vocab, struct guide_vocab **out, struct err *e);
void guide_vocab_free(struct guide_vocab *v);

/* allow[0, vocab) ← 1 for each token whose bytes s accepts whole, and for eos[0, n_eos)
 * when s is complete; 0 elsewhere. Returns how many are allowed. The masks of the last 8
 * (grammar, state, eos) are kept and reused: a repeated free-text class comes back to the
 * same state every token. Uses scratch inside v: one caller at a time. */
int guide_vocab_mask(struct guide_vocab *v, const struct guide_grammar *g, const struct jm_state *s,
		     const int32_t *eos, int n_eos, uint8_t *allow);

/* Forgets the kept masks (benchmarks time the walk itself with it). */
void guide_vocab_cache_clear(struct guide_vocab *v);

/* Advances s by the bytes of token id (an EOS or special token: no bytes); false when s
 * refuses them (s then undefined). */
bool guide_vocab_advance(const struct guide_vocab *v, const struct guide_grammar *g, struct jm_state *s, int32_t id);

#endif
