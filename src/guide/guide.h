/* Guided decoding as the engine sees it: the one header of guide/ that the engine includes.
 * The server compiles a request's grammar (guide/grammar.h) and hands the engine a
 * reference; the engine keeps one guide state per choice, asks it for the allowed-token mask
 * before sampling and advances it by the sampled token. The matcher's state stays opaque
 * here: a choice's state is copied with guide_state_copy, never by the engine. */
#ifndef MLA_GUIDE_GUIDE_H
#define MLA_GUIDE_GUIDE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct tok;
struct guide_grammar;
struct guide_vocab;
struct guide_state;

/* The vocabulary trie that masks are walked from (~60 ms for 100K tokens), shared by every
 * guided choice; vocab is the logits width. Fails for a tokenizer whose decoder does not
 * simply concatenate token bytes. */
int guide_tokens_new(const struct tok *t, int vocab, struct guide_vocab **out, struct err *e);
void guide_tokens_free(struct guide_vocab *v); /* NULL is fine */

/* One choice's state before any output, holding its own reference to g; or, with g NULL, a
 * scratch that guide_state_copy / guide_state_restart fill (it borrows their grammar). */
int guide_state_new(struct guide_grammar *g, struct guide_state **out, struct err *e);
void guide_state_free(struct guide_state *s); /* NULL is fine */
/* dst ← src's grammar and state (dst: a scratch; no allocation, for the step path). */
void guide_state_copy(struct guide_state *dst, const struct guide_state *src);
/* dst ← src's grammar before any output (dst: a scratch). */
void guide_state_restart(struct guide_state *dst, const struct guide_state *src);

/* allow[0, vocab) ← 1 for each token that keeps the output within the grammar, and for
 * eos[0, n_eos) once it is a whole match; returns how many are allowed (one caller of v at
 * a time). */
int guide_state_mask(struct guide_vocab *v, const struct guide_state *s, const int32_t *eos, int n_eos,
		     uint8_t *allow);
/* Advances s by token id; false when the grammar refuses it (s then undefined). */
bool guide_state_advance(const struct guide_vocab *v, struct guide_state *s, int32_t id);
/* The output so far is a whole match: it may end here. */
bool guide_state_can_end(const struct guide_state *s);
/* A whole match that nothing may extend: only an end can follow. */
bool guide_state_must_end(const struct guide_state *s);

#endif
