/* One engine step (engine_internal.h): schedule, run the forward, sample each choice's
 * token (and, with speculative decoding, verify its drafts), append, run the output stage,
 * and propose the next drafts (draft.c). */
#include <string.h>

#include "base/mono.h"
#include "engine/engine_internal.h"
#include "engine/outbox.h"
#include "guide/guide.h"

/* Output stage of a choice's j-th token this step, of n_new appended (j == n_new: the step's
 * end, where only the grammar's verdict, `guide`, is left): the one finish decision
 * (finish_check_text: finish_check with the token's text) and the token's delivery.
 * Returns false when the choice finished and was freed. */
static bool seq_output(struct engine *eng, struct eseq *s, int j, int n_new, int n_before, enum finish_guide guide,
		       double t)
{
	if (j == n_new) {
		struct finish_in in = {.tok = -1, .guide = guide};
		struct finish_verdict v = finish_check(&in);
		if (v.why == ENGINE_FINISH_NONE)
			return true;
		engine_seq_finish(eng, s, v.why, NULL, 0, NULL, v.error);
		return false;
	}
	int32_t tok = s->sr.tokens[s->sr.n_prompt + n_before + j];
	const struct engine_logprob *lp = s->p.logprobs >= 0 ? &s->lp[j] : NULL;
	pthread_mutex_lock(&eng->mu);
	eng->st.generation_tokens++;
	if (s->t_first == 0) {
		s->t_first = t;
		engine_hist_observe(&eng->st.ttft, t - s->t_arrival);
		eng->st.prompt_tokens += (uint64_t)s->sr.n_prompt;
	} else if (j == 0) {
		engine_hist_observe(&eng->st.itl, t - s->t_last); /* per step, as vLLM */
	}
	pthread_mutex_unlock(&eng->mu);
	s->t_last = t;
	struct err e;
	s->n_out = n_before + j + 1;
	/* the scheduler's verdict on this token again (it appended up to it), plus its text:
	 * a stop string finishes the choice here and drops any later token of this step */
	struct finish_in in = sched_req_finish_in(eng->sched, &s->sr, s->n_out);
	struct finish_verdict v = finish_check_text(&in, &s->text, s->p.include_stop_str_in_output, &e);
	if (v.why != ENGINE_FINISH_NONE) {
		engine_seq_finish(eng, s, v.why, &tok, 1, lp, v.error);
		return false;
	}
	const char *d;
	size_t n = seq_text_take(&s->text, false, &d);
	eseq_deliver(s, &tok, 1, lp, d, n, ENGINE_FINISH_NONE, NULL);
	return true;
}

/* Samples choice i's tokens from its logits rows: the token after its last known one, then,
 * while each sampled token equals the draft at its position, the token after that draft.
 * Each row sees the outputs before it (penalties, guided state), and draws from the
 * choice's RNG exactly as a step without drafts would, so the tokens are the same. */
static void sample_choice(struct engine *eng, int i, struct eseq *s, const float *row0)
{
	struct sched_req *r = &s->sr;
	int n_draft = r->n_computed - r->n_tokens; /* scheduled drafts */
	const int32_t *draft = r->tokens + r->n_tokens;
	int32_t *out = eng->slot[i].sampled;
	int n = 0, accepted = 0;
	eng->slot[i].guide = FINISH_GUIDE_GO_ON;
	for (int j = 0; j <= n_draft; j++) {
		struct sample_input in = {.logits = row0 + (size_t)j * (size_t)eng->vocab,
					  .p = &s->p,
					  .prompt = r->tokens,
					  .n_prompt = r->n_prompt,
					  .output = r->tokens + r->n_prompt,
					  .n_output = sched_req_n_output(r) + j,
					  .stop_ids = s->mask_ids,
					  .n_stop_ids = s->n_mask,
					  .rng = &s->rng};
		in.ban = sample_banned(&s->p, r->tokens + r->n_prompt, in.n_output, eng->vocab, eng->ban);
		if (s->guide && s->guide_on) {
			if (s->p.ignore_eos && guide_state_must_end(s->guide)) {
				eng->slot[i].guide =
					FINISH_GUIDE_ENDED; /* nothing may follow but EOS, which would not end it */
				break;
			}
			if (guide_state_mask(eng->guide_vocab, s->guide, eng->o.eos_ids, eng->o.n_eos_ids,
					     eng->allow) == 0) {
				/* a whole match with no EOS id to end on; or no token continues a partial
				 * one: the matcher cut its parses (a grammar nested past its stack) */
				eng->slot[i].guide = guide_state_can_end(s->guide) ? FINISH_GUIDE_ENDED
										   : FINISH_GUIDE_STUCK;
				break;
			}
			in.allow = eng->allow;
		}
		int32_t t = sample_token(&in, &eng->ss, &s->lp[j]);
		if (s->guide && !s->guide_on) {
			s->guide_on = t == s->p.guide_after;
		} else if (s->guide && !guide_state_advance(eng->guide_vocab, s->guide, t)) {
			eng->slot[i].guide = FINISH_GUIDE_BROKEN; /* cannot happen: the mask allowed it */
			break;
		}
		out[n++] = t;
		if (j == n_draft || t != draft[j])
			break;
		accepted++;
	}
	eng->slot[i].n_sampled = n;
	if (n_draft > 0) {
		pthread_mutex_lock(&eng->mu);
		eng->st.spec_drafts++;
		eng->st.spec_draft_tokens += (uint64_t)n_draft;
		eng->st.spec_accepted_tokens += (uint64_t)accepted;
		for (int j = 0; j < accepted; j++)
			eng->st.spec_accepted_per_pos[j]++;
		pthread_mutex_unlock(&eng->mu);
	}
}

/* prompt_logprobs: each prompt position of the step gives the next prompt token's logprob;
 * once the whole prompt ran, the handle's array is complete (before the first token event) */
static void prompt_logprobs(struct engine *eng, int i, struct eseq *s)
{
	struct sched_req *r = &s->sr;
	if (!r->no_prefix_hit)
		return;
	if (!r->prompt_rows) { /* another choice of the request: back to normal once it ran */
		if (sched_req_wants_token(r))
			r->no_prefix_hit = false, r->max_chunk = 0;
		return;
	}
	int pos0, n;
	const float *rows = runner_prompt_rows(&eng->runner, i, &pos0, &n);
	for (int j = 0; j < n; j++)
		sample_logprob_of(rows + (size_t)j * (size_t)eng->vocab, eng->vocab, r->tokens[pos0 + j + 1],
				  s->p.prompt_logprobs, &s->h->ob.prompt_lps[pos0 + j + 1]);
	if (sched_req_wants_token(r)) {
		r->prompt_rows = r->no_prefix_hit = false;
		r->max_chunk = 0;
		outbox_prompt_logprobs_ready(&s->h->ob);
	}
}

int engine_step(struct engine *eng, struct err *e)
{
	struct sched_output o;
	sched_step(eng->sched, &o);
	if (o.n == 0) {
		/* Cannot happen with a pool that holds max_model_len (checked at start-up);
		 * never spin on it. */
		struct sched_req *r = sched_waiting_head(eng->sched);
		if (r) {
			struct eseq *s = eseq_of(r);
			engine_seq_finish(eng, s, ENGINE_FINISH_ABORT, NULL, 0, NULL,
					  "request does not fit in the kv cache");
		}
		return 0;
	}
	double t0 = mono_now_s();
	for (int i = 0; i < o.n; i++) {
		struct eseq *s = eseq_of(o.reqs[i]);
		if (s->t_scheduled == 0) {
			s->t_scheduled = t0;
			pthread_mutex_lock(&eng->mu);
			engine_hist_observe(&eng->st.queue, t0 - s->t_arrival);
			pthread_mutex_unlock(&eng->mu);
		}
	}
	if (runner_execute(&eng->runner, &o, eng->rows, e) < 0)
		return -1;
	for (int i = 0; i < o.n; i++)
		prompt_logprobs(eng, i, eseq_of(o.reqs[i]));
	for (int i = 0; i < o.n; i++) {
		struct eseq *s = eseq_of(o.reqs[i]);
		struct step_slot *sl = &eng->slot[i];
		sl->n_before = sched_req_n_output(&s->sr);
		sl->n_sampled = 0;
		sl->guide = FINISH_GUIDE_GO_ON;
		if (eng->rows[i])
			sample_choice(eng, i, s, eng->rows[i]);
	}
	for (int i = 0; i < o.n; i++) /* every choice's tokens before any output, as before */
		sched_req_append(eng->sched, o.reqs[i], eng->slot[i].sampled, eng->slot[i].n_sampled);
	double t1 = mono_now_s();
	for (int i = 0; i < o.n; i++) {
		struct eseq *s = eseq_of(o.reqs[i]);
		struct step_slot *sl = &eng->slot[i];
		int n_new = sched_req_n_output(&s->sr) - sl->n_before; /* appended, up to a stop */
		bool alive = true;
		for (int j = 0; j <= n_new && alive; j++)
			alive = seq_output(eng, s, j, n_new, sl->n_before, sl->guide, t1);
		eng->alive[i] = alive;
	}
	if (eng->o.spec.method == SPEC_MTP && draft_mtp(&eng->draft, &o, eng->alive, eng->guide_vocab, e) < 0)
		return -1;
	if (eng->spec_k > 0)
		draft_propose(&eng->draft, &o, eng->alive);
	return 0;
}
