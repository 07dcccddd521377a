/* Request handles and choices (req.h). */
#include "engine/req.h"

#include <stdlib.h>

#include "guide/guide.h"

struct engine_req *req_new(int n, struct engine *eng)
{
	struct engine_req *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->seqs = calloc((size_t)n, sizeof *h->seqs);
	if (!h->seqs || outbox_init(&h->ob, n) < 0) {
		free(h->seqs);
		free(h);
		return NULL;
	}
	h->eng = eng;
	return h;
}

void req_ref(struct engine_req *h) { outbox_ref(&h->ob); }

void req_unref(struct engine_req *h)
{
	if (!outbox_unref(&h->ob))
		return;
	free(h->seqs);
	free(h);
}

void req_discard(struct engine_req *h)
{
	outbox_discard(&h->ob);
	free(h->seqs);
	free(h);
}

void eseq_deliver(struct eseq *s, const int32_t *tok, int n_tok, const struct engine_logprob *lp, const char *text,
		  size_t text_len, enum engine_finish fin, const char *error)
{
	struct outbox_post o = {.tok = tok,
				.n_tok = n_tok,
				.lp = lp,
				.text = text,
				.text_len = text_len,
				.finish = fin,
				.stop_token = s->sr.stop_token,
				.stop_str = s->text.stop_idx >= 0 ? s->p.stop[s->text.stop_idx] : NULL,
				.error = error,
				.n_prompt = s->sr.n_prompt,
				.n_cached = s->sr.n_cached < 0 ? 0 : s->sr.n_cached,
				.n_output = s->n_out};
	outbox_post(&s->h->ob, s->index, &o);
}

void eseq_free(struct eseq *s)
{
	guide_state_free(s->guide);
	free(s->owned_ids);
	sched_req_fini(&s->sr);
	seq_text_fini(&s->text);
	free(s);
}
