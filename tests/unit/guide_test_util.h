/* Shared by the guided-decoding tests (test_guide_regex.c, test_guide_cfg.c). */
#ifndef MLA_TESTS_GUIDE_TEST_UTIL_H
#define MLA_TESTS_GUIDE_TEST_UTIL_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "guide/grammar.h"
#include "guide/matcher.h"
#include "guide/vocab.h"
#include "harness.h"
#include "tok/tokenizer.h"

/* the mask of g after `pre` equals feeding every token; EOS once the text matches */
static void check_mask(struct guide_vocab *v, const struct tok *t, int V, const struct guide_grammar *g,
		       const char *what, const char *pre, uint8_t *allow)
{
	int32_t eos = V - 1;
	struct jm_state *s = malloc(sizeof *s), *u = malloc(sizeof *u);
	jm_init(s, g);
	EXPECTF(jm_feed_bytes(s, g, (const uint8_t *)pre, strlen(pre)), "%s: prefix '%s' refused", what, pre);
	int n = guide_vocab_mask(v, g, s, &eos, 1, allow), want_n = 0;
	for (int32_t id = 0; id < V; id++) {
		size_t len;
		const char *p = tok_id_bytes(t, id, &len);
		bool want = false;
		if (p && len && !tok_is_special(t, id)) {
			jm_copy(u, s);
			want = jm_feed_bytes(u, g, (const uint8_t *)p, len);
		}
		if (id == eos)
			want |= jm_complete(s, g);
		want_n += want;
		if (want != (allow[id] != 0)) {
			harness_fail(__FILE__, __LINE__, "%s after '%s': token %d %s by the mask", what, pre, id,
				     allow[id] ? "allowed" : "refused");
			break;
		}
	}
	EXPECT_EQ_INT(n, want_n);
	free(s);
	free(u);
}

/* The tokenizer of a fixture, its vocabulary trie and a mask buffer, for check_mask. */
struct mask_fixture {
	struct tok *t;
	struct guide_vocab *v;
	uint8_t *allow;
	int V;
};

static bool mask_fixture_open(struct mask_fixture *m, const char *fixture)
{
	struct err e;
	memset(m, 0, sizeof *m);
	if (tok_load(fixture_path(fixture), &m->t, &e) < 0 ||
	    (m->V = tok_vocab_size(m->t), guide_vocab_new(m->t, m->V, &m->v, &e) < 0) ||
	    !(m->allow = malloc((size_t)m->V))) {
		harness_fail(__FILE__, __LINE__, "%s: %s", fixture, e.msg);
		return false;
	}
	return true;
}

static void mask_fixture_close(struct mask_fixture *m)
{
	free(m->allow);
	guide_vocab_free(m->v);
	tok_free(m->t);
}

#endif
