/* The engine's door into guide/ (guide.h): a choice's matcher state with its grammar. */
#include "guide/guide.h"

#include <stdlib.h>

#include "guide/grammar.h"
#include "guide/matcher.h"
#include "guide/vocab.h"

struct guide_state {
	struct guide_grammar *g;
	bool owns_g; /* false: a scratch borrowing the grammar of the state it copied */
	struct jm_state jm;
};

int guide_tokens_new(const struct tok *t, int vocab, struct guide_vocab **out, struct err *e)
{
	return guide_vocab_new(t, vocab, out, e);
}

void guide_tokens_free(struct guide_vocab *v) { guide_vocab_free(v); }

int guide_state_new(struct guide_grammar *g, struct guide_state **out, struct err *e)
{
	struct guide_state *s = malloc(sizeof *s);
	*out = NULL;
	if (!s)
		return err_set(e, "guided decoding: out of memory");
	s->g = g ? guide_ref(g) : NULL;
	s->owns_g = g != NULL;
	s->jm.n = 0;
	if (g)
		jm_init(&s->jm, g);
	*out = s;
	return 0;
}

void guide_state_free(struct guide_state *s)
{
	if (!s)
		return;
	if (s->owns_g)
		guide_unref(s->g);
	free(s);
}

void guide_state_copy(struct guide_state *dst, const struct guide_state *src)
{
	CHECK(!dst->owns_g);
	dst->g = src->g;
	jm_copy(&dst->jm, &src->jm);
}

void guide_state_restart(struct guide_state *dst, const struct guide_state *src)
{
	CHECK(!dst->owns_g);
	dst->g = src->g;
	jm_init(&dst->jm, src->g);
}

int guide_state_mask(struct guide_vocab *v, const struct guide_state *s, const int32_t *eos, int n_eos, uint8_t *allow)
{
	return guide_vocab_mask(v, s->g, &s->jm, eos, n_eos, allow);
}

bool guide_state_advance(const struct guide_vocab *v, struct guide_state *s, int32_t id)
{
	return guide_vocab_advance(v, s->g, &s->jm, id);
}

bool guide_state_can_end(const struct guide_state *s) { return jm_complete(&s->jm, s->g); }

bool guide_state_must_end(const struct guide_state *s) { return jm_finished(&s->jm, s->g); }
