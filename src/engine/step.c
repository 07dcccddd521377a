/* One engine step (step.h): schedule, run the forward, sample each choice's token (and,
 * with speculative decoding, verify its drafts), append, run the output stage, and propose
 * the next drafts (draft.c). Drafts are verified by sampling their rows in order with the
 * choice's ordinary sampler state (penalties, grammar, one RNG draw per token), keeping each
 * while it equals the token sampled at its position; the scheduler then moves n_computed back
 * to n_tokens - 1, so the stale latent rows of rejected drafts are simply written again (only
 * blocks full of real tokens are ever hashed for the prefix cache). */
#include "engine/step.h"

#include <stdlib.h>
#include <string.h>

#include "base/mono.h"
#include "engine/draft.h"
#include "engine/outbox.h"
#include "engine/req.h"
#include "engine/runner.h"
#include "engine/sample.h"
#include "engine/sched.h"
#include "engine/stats.h"
#include "guide/guide.h"

/* Choice i of the step (o.reqs[i]) after the forward: what it sampled and how its step
 * ended. Indexed by step position rather than kept in struct eseq because the choice may be
 * finished and freed during the step (step.alive says so). */
struct step_slot {
	int32_t sampled[SPEC_MAX_TOKENS + 1]; /* this step's tokens: the next, then one per kept draft */
	int n_sampled;
	int n_before;            /* output tokens before the step */
	enum finish_guide guide; /* the grammar's verdict while sampling */
};

struct step {
	struct step_config c;
	struct sample_scratch ss;
	/* per choice of the step, [max_num_seqs] each: its slot, whether it still runs after
	 * the step's outputs, and its logits rows (the runner's) */
	struct step_slot *slot;
	bool *alive;
	const float **rows;
	uint8_t *ban, *allow;   /* [vocab] a choice's banned tokens, a guided choice's mask */
	struct guide_vocab *gv; /* this step's (step_run's argument) */
	struct draft draft;
};

int step_new(const struct step_config *c, struct step **out, struct err *e)
{
	struct step *st = calloc(1, sizeof *st);
	if (!st)
		return err_set(e, "engine: out of memory");
	*out = st;
	st->c = *c;
	if (sample_scratch_init(&st->ss, c->vocab, e) < 0)
		return -1;
	int n = c->max_num_seqs;
	st->slot = calloc((size_t)n, sizeof *st->slot);
	st->alive = calloc((size_t)n, sizeof *st->alive);
	st->rows = calloc((size_t)n, sizeof *st->rows);
	st->ban = malloc((size_t)c->vocab);
	st->allow = malloc((size_t)c->vocab);
	if (!st->slot || !st->alive || !st->rows || !st->ban || !st->allow)
		return err_set(e, "engine: out of memory");
	st->draft = (struct draft){.sched = c->sched,
				   .runner = c->runner,
				   .spec = c->spec,
				   .vocab = c->vocab,
				   .eos_ids = c->eos_ids,
				   .n_eos_ids = c->n_eos_ids,
				   .rows = st->rows,
				   .ban = st->ban,
				   .allow = st->allow,
				   .biased = st->ss.masked};
	return draft_init(&st->draft, n, e);
}

void step_free(struct step *st)
{
	if (!st)
		return;
	draft_fini(&st->draft);
	sample_scratch_fini(&st->ss);
	free(st->slot);
	free(st->alive);
	free(st->rows);
	free(st->ban);
	free(st->allow);
	free(st);
}

/* Output stage of a choice's j-th token this step, of n_new appended (j == n_new: the step's
 * end, where only the grammar's verdict, `guide`, is left): the one finish decision
 * (finish_check_text: finish_check with the token's text) and the token's delivery.
 * Returns false when the choice finished and was freed. */
static bool seq_output(struct step *st, struct eseq *s, int j, int n_new, int n_before, enum finish_guide guide,
		       double t)
{
	if (j == n_new) {
		struct finish_in in = {.tok = -1, .guide = guide};
		struct finish_verdict v = finish_check(&in);
		if (v.why == ENGINE_FINISH_NONE)
			return true;
		st->c.finish(st->c.ctx, s, v.why, NULL, 0, NULL, v.error);
		return false;
	}
	int32_t tok = s->sr.tokens[s->sr.n_prompt + n_before + j];
	const struct engine_logprob *lp = s->p.logprobs >= 0 ? &s->lp[j] : NULL;
	pthread_mutex_lock(st->c.mu);
	st->c.st->generation_tokens++;
	if (s->t_first == 0) {
		s->t_first = t;
		stats_observe(&st->c.st->ttft, t - s->t_arrival);
		st->c.st->prompt_tokens += (uint64_t)s->sr.n_prompt;
	} else if (j == 0) {
		stats_observe(&st->c.st->itl, t - s->t_last); /* per step, as vLLM */
	}
	pthread_mutex_unlock(st->c.mu);
	s->t_last = t;
	struct err e;
	s->n_out = n_before + j + 1;
	/* the scheduler's verdict on this token again (it appended up to it), plus its text:
	 * a stop string finishes the choice here and drops any later token of this step */
	struct finish_in in = sched_req_finish_in(st->c.sched, &s->sr, s->n_out);
	struct finish_verdict v = finish_check_text(&in, &s->text, s->p.include_stop_str_in_output, &e);
	if (v.why != ENGINE_FINISH_NONE) {
		st->c.finish(st->c.ctx, s, v.why, &tok, 1, lp, v.error);
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
static void sample_choice(struct step *st, int i, struct eseq *s, const float *row0)
{
	struct sched_req *r = &s->sr;
	int n_draft = r->n_computed - r->n_tokens; /* scheduled drafts */
	const int32_t *draft = r->tokens + r->n_tokens;
	int32_t *out = st->slot[i].sampled;
	int n = 0, accepted = 0;
	st->slot[i].guide = FINISH_GUIDE_GO_ON;
	for (int j = 0; j <= n_draft; j++) {
		struct sample_input in = {.logits = row0 + (size_t)j * (size_t)st->c.vocab,
					  .p = &s->p,
					  .prompt = r->tokens,
					  .n_prompt = r->n_prompt,
					  .output = r->tokens + r->n_prompt,
					  .n_output = sched_req_n_output(r) + j,
					  .stop_ids = s->mask_ids,
					  .n_stop_ids = s->n_mask,
					  .rng = &s->rng};
		in.ban = sample_banned(&s->p, r->tokens + r->n_prompt, in.n_output, st->c.vocab, st->ban);
		if (s->guide && s->guide_on) {
			if (s->p.ignore_eos && guide_state_must_end(s->guide)) {
				st->slot[i].guide =
					FINISH_GUIDE_ENDED; /* nothing may follow but EOS, which would not end it */
				break;
			}
			if (guide_state_mask(st->gv, s->guide, st->c.eos_ids, st->c.n_eos_ids, st->allow) == 0) {
				/* a whole match with no EOS id to end on; or no token continues a partial
				 * one: the matcher cut its parses (a grammar nested past its stack) */
				st->slot[i].guide = guide_state_can_end(s->guide) ? FINISH_GUIDE_ENDED
										  : FINISH_GUIDE_STUCK;
				break;
			}
			in.allow = st->allow;
		}
		int32_t t = sample_token(&in, &st->ss, &s->lp[j]);
		if (s->guide && !s->guide_on) {
			s->guide_on = t == s->p.guide_after;
		} else if (s->guide && !guide_state_advance(st->gv, s->guide, t)) {
			st->slot[i].guide = FINISH_GUIDE_BROKEN; /* cannot happen: the mask allowed it */
			break;
		}
		out[n++] = t;
		if (j == n_draft || t != draft[j])
			break;
		accepted++;
	}
	st->slot[i].n_sampled = n;
	if (n_draft > 0) {
		pthread_mutex_lock(st->c.mu);
		st->c.st->spec_drafts++;
		st->c.st->spec_draft_tokens += (uint64_t)n_draft;
		st->c.st->spec_accepted_tokens += (uint64_t)accepted;
		for (int j = 0; j < accepted; j++)
			st->c.st->spec_accepted_per_pos[j]++;
		pthread_mutex_unlock(st->c.mu);
	}
}

/* prompt_logprobs: each prompt position of the step gives the next prompt token's logprob;
 * once the whole prompt ran, the handle's array is complete (before the first token event) */
static void prompt_logprobs(struct step *st, int i, struct eseq *s)
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
	const float *rows = runner_prompt_rows(st->c.runner, i, &pos0, &n);
	for (int j = 0; j < n; j++)
		sample_logprob_of(rows + (size_t)j * (size_t)st->c.vocab, st->c.vocab, r->tokens[pos0 + j + 1],
				  s->p.prompt_logprobs, &s->h->ob.prompt_lps[pos0 + j + 1]);
	if (sched_req_wants_token(r)) {
		r->prompt_rows = r->no_prefix_hit = false;
		r->max_chunk = 0;
		outbox_prompt_logprobs_ready(&s->h->ob);
	}
}

int step_run(struct step *st, struct guide_vocab *gv, struct err *e)
{
	st->gv = gv;
	struct sched_output o;
	sched_step(st->c.sched, &o);
	if (o.n == 0) {
		/* Cannot happen with a pool that holds max_model_len (checked at start-up);
		 * never spin on it. */
		struct sched_req *r = sched_waiting_head(st->c.sched);
		if (r) {
			st->c.finish(st->c.ctx, eseq_of(r), ENGINE_FINISH_ABORT, NULL, 0, NULL,
				     "request does not fit in the kv cache");
		}
		return 0;
	}
	double t0 = mono_now_s();
	for (int i = 0; i < o.n; i++) {
		struct eseq *s = eseq_of(o.reqs[i]);
		if (s->t_scheduled == 0) {
			s->t_scheduled = t0;
			pthread_mutex_lock(st->c.mu);
			stats_observe(&st->c.st->queue, t0 - s->t_arrival);
			pthread_mutex_unlock(st->c.mu);
		}
	}
	if (runner_execute(st->c.runner, &o, st->rows, e) < 0)
		return -1;
	for (int i = 0; i < o.n; i++)
		prompt_logprobs(st, i, eseq_of(o.reqs[i]));
	for (int i = 0; i < o.n; i++) {
		struct eseq *s = eseq_of(o.reqs[i]);
		struct step_slot *sl = &st->slot[i];
		sl->n_before = sched_req_n_output(&s->sr);
		sl->n_sampled = 0;
		sl->guide = FINISH_GUIDE_GO_ON;
		if (st->rows[i])
			sample_choice(st, i, s, st->rows[i]);
	}
	for (int i = 0; i < o.n; i++) /* every choice's tokens before any output, as before */
		sched_req_append(st->c.sched, o.reqs[i], st->slot[i].sampled, st->slot[i].n_sampled);
	double t1 = mono_now_s();
	for (int i = 0; i < o.n; i++) {
		struct eseq *s = eseq_of(o.reqs[i]);
		struct step_slot *sl = &st->slot[i];
		int n_new = sched_req_n_output(&s->sr) - sl->n_before; /* appended, up to a stop */
		bool alive = true;
		for (int j = 0; j <= n_new && alive; j++)
			alive = seq_output(st, s, j, n_new, sl->n_before, sl->guide, t1);
		st->alive[i] = alive;
	}
	const struct spec_config *c = &st->c.spec;
	if (c->method == SPEC_MTP && draft_mtp(&st->draft, &o, st->alive, gv, e) < 0)
		return -1;
	if (c->method != SPEC_NONE && c->k > 0)
		draft_propose(&st->draft, &o, st->alive);
	return 0;
}
