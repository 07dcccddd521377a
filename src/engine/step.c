/* One engine step (engine_internal.h): schedule, run the forward, sample each choice's
 * token (and, with speculative decoding, verify its drafts), append, run the output stage,
 * and propose the next drafts. */
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

/* The tokens choice s may not sample after n_out outputs (allowed_token_ids, bad_words),
 * into eng->ban; NULL when none. Bad words never ban the last allowed token. */
static const uint8_t *banned(struct engine *eng, const struct eseq *s, int n_out)
{
	const struct sampling_params *p = &s->p;
	if (!p->n_allowed && !p->n_bad)
		return NULL;
	int V = eng->vocab;
	uint8_t *ban = eng->ban;
	memset(ban, p->n_allowed ? 1 : 0, (size_t)V);
	for (int i = 0; i < p->n_allowed; i++)
		ban[p->allowed_ids[i]] = 0;
	int n_free = 0;
	for (int i = 0; i < V && n_free < 2; i++)
		n_free += !ban[i];
	const int32_t *out = s->sr.tokens + s->sr.n_prompt;
	for (int i = 0, at = 0; i < p->n_bad; at += p->bad_lens[i++]) {
		const int32_t *w = p->bad_words + at;
		int L = p->bad_lens[i];
		if (L - 1 > n_out || memcmp(out + n_out - (L - 1), w, sizeof *w * (size_t)(L - 1)))
			continue; /* the output does not end with the word's head */
		if (!ban[w[L - 1]] && n_free > 1) {
			ban[w[L - 1]] = 1;
			n_free = 0;
			for (int v = 0; v < V && n_free < 2; v++)
				n_free += !ban[v];
		}
	}
	return ban;
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
		in.ban = banned(eng, s, in.n_output);
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

/* Drafts for the next step of every choice that is decoding (ngram lookup, or the MTP
 * module's draft). A backend that runs only uniform decode queries gets one draft count for
 * all: the longest proposal, padded with each choice's last token (a guess like any other,
 * verified like the rest), but no more than the choice nearest its length limit can take,
 * and none at all when padding would be most of the drafts. A shorter query would leave the
 * decode path for the prefill path: slower, and not the same rounding. */
static bool decoding(const struct engine *eng, const struct sched_output *o, int i)
{
	const struct sched_req *r = o->reqs[i];
	return eng->slot[i].alive && r->status == SREQ_RUNNING && r->n_computed == r->n_tokens - 1;
}

static bool spec_disabled(const struct engine *eng)
{
	const struct spec_config *c = &eng->o.spec;
	return c->disable_by_batch_size > 0 && sched_n_running(eng->sched) > c->disable_by_batch_size;
}

/* The grammar state of guided choice s after its first `depth` drafts (tokens[n_tokens,
 * + depth)) into eng->mtp_guide: NULL when the grammar does not apply yet after them; *dead
 * when a draft leaves the grammar (the mask allowed it, so only if the grammar ended). */
static const struct guide_state *guide_after_drafts(struct engine *eng, const struct eseq *s, int depth, bool *dead)
{
	*dead = false;
	const struct sched_req *r = &s->sr;
	bool on = s->guide_on;
	if (on && depth == 0)
		return s->guide;
	if (on)
		guide_state_copy(eng->mtp_guide, s->guide);
	for (int j = 0; j < depth; j++) {
		int32_t t = r->tokens[r->n_tokens + j];
		if (!on) {
			if ((on = t == s->p.guide_after))
				guide_state_restart(eng->mtp_guide, s->guide);
		} else if (!guide_state_advance(eng->guide_vocab, eng->mtp_guide, t)) {
			*dead = true;
			return NULL;
		}
	}
	return on ? eng->mtp_guide : NULL;
}

/* deepseek_mtp's draft from the MTP logits of a choice that has `depth` drafts already:
 * the argmax after its logit_bias, its banned tokens (allowed_token_ids, bad_words) and its
 * grammar, as its sampler would see them after those drafts, so that a request steered
 * towards some tokens gets drafts among them (-1: none) */
static int32_t mtp_draft(struct engine *eng, const struct eseq *s, const float *row, int depth)
{
	const struct sampling_params *p = &s->p;
	const uint8_t *ban = banned(eng, s, sched_req_n_output(&s->sr) + depth);
	const uint8_t *allow = NULL;
	if (s->guide) {
		bool dead;
		const struct guide_state *g = guide_after_drafts(eng, s, depth, &dead);
		if (dead)
			return -1;
		if (g) {
			if (guide_state_mask(eng->guide_vocab, g, eng->o.eos_ids, eng->o.n_eos_ids, eng->allow) == 0)
				return -1;
			allow = eng->allow;
		}
	}
	const float *x = row;
	if (p->n_logit_bias) { /* biased copy (the scratch is free between samples) */
		memcpy(eng->ss.masked, row, sizeof *row * (size_t)eng->vocab);
		sample_logit_bias(p, eng->ss.masked, eng->vocab);
		x = eng->ss.masked;
	}
	int32_t best = -1;
	for (int v = 0; v < eng->vocab; v++)
		if (!(ban && ban[v]) && !(allow && !allow[v]) && (best < 0 || x[v] > x[best]))
			best = v;
	return best;
}

/* the drafts choice i of the step may take: num_speculative_tokens, within its length */
static int draft_room(const struct engine *eng, const struct sched_req *r)
{
	int room = r->max_len - r->n_tokens - 1; /* the drafts and one more token fit */
	return eng->o.spec.k < room ? eng->o.spec.k : (room > 0 ? room : 0);
}

/* deepseek_mtp: the MTP module runs over every position of the step whose next token is now
 * known and whose hidden state was computed from known tokens (a prefill chunk's, a decode's
 * last token and its accepted drafts), so that its latent cache follows the model's; each
 * decoding choice gets the greedy draft of the token after its last one (mtp_draft). With
 * k > 1 drafts, each further draft is a chained pass of the same layer over the previous
 * draft and the layer's own output (vLLM's way with DeepSeek's one MTP layer), at the
 * positions the scheduler's lookahead holds. The drafts go to tokens[n_tokens, ...); the
 * logits are computed only when drafts are on. */
static int mtp_step(struct engine *eng, const struct sched_output *o, struct err *e)
{
	bool drafts = !spec_disabled(eng);
	int any = 0;
	for (int i = 0; i < o->n; i++) {
		const struct sched_req *r = o->reqs[i];
		eng->mtp[i].n = 0;
		eng->mtp[i].want = false;
		eng->slot[i].mtp_n_drafts = 0;
		if (!eng->slot[i].alive || r->status != SREQ_RUNNING)
			continue;
		int end = r->step_start + r->n_sched < r->n_tokens - 1 ? r->step_start + r->n_sched : r->n_tokens - 1;
		eng->mtp[i].n = end > r->step_start ? end - r->step_start : 0;
		eng->mtp[i].want = drafts && eng->mtp[i].n > 0 && decoding(eng, o, i) && draft_room(eng, r) > 0;
		any += eng->mtp[i].n;
	}
	if (!any)
		return 0;
	if (runner_execute_mtp(&eng->runner, o, eng->mtp, eng->rows, e) < 0)
		return -1;
	for (int depth = 0;; depth++) {
		int chained = 0;
		for (int i = 0; i < o->n; i++) {
			eng->mtp[i].tok = -1;
			if (!eng->rows[i])
				continue;
			struct sched_req *r = o->reqs[i];
			int32_t d = mtp_draft(eng, eseq_of(r), eng->rows[i], depth);
			if (d < 0)
				continue;
			r->tokens[r->n_tokens + depth] = d;
			eng->slot[i].mtp_n_drafts = depth + 1;
			if (depth + 1 < draft_room(eng, r)) {
				eng->mtp[i].tok = d;
				chained++;
			}
		}
		if (!chained)
			return 0;
		if (runner_execute_mtp_chain(&eng->runner, o, eng->mtp, depth + 1, eng->rows, e) < 0)
			return -1;
	}
}

static void propose(struct engine *eng, const struct sched_output *o)
{
	const struct spec_config *c = &eng->o.spec;
	if (spec_disabled(eng))
		return; /* every n_spec is 0 after sched_req_append */
	int longest = 0, least_room = c->k;
	for (int i = 0; i < o->n; i++) {
		if (!decoding(eng, o, i))
			continue;
		struct sched_req *r = o->reqs[i];
		int room = r->max_len - r->n_tokens - 1; /* the drafts and one more token fit */
		int k = draft_room(eng, r);
		if (c->method == SPEC_MTP) {
			r->n_spec = eng->slot[i].mtp_n_drafts; /* at tokens[n_tokens, ...) already, <= k */
		} else {
			r->n_spec = k > 0 ? spec_ngram_propose(r->tokens, r->n_tokens, c->lookup_min, c->lookup_max, k,
							       r->tokens + r->n_tokens)
					  : 0;
		}
		if (r->n_spec > longest)
			longest = r->n_spec;
		if (room < least_room)
			least_room = room;
	}
	if (!eng->runner.c.require_uniform || longest == 0)
		return;
	int k = longest < least_room ? longest : least_room;
	if (k < 0)
		k = 0;
	/* padding costs compute: no drafts this step if most verified tokens would be filler */
	int n_dec = 0, proposed = 0;
	for (int i = 0; i < o->n; i++)
		if (decoding(eng, o, i)) {
			n_dec++;
			proposed += o->reqs[i]->n_spec < k ? o->reqs[i]->n_spec : k;
		}
	if (proposed < n_dec * k - proposed)
		k = 0;
	for (int i = 0; i < o->n; i++) {
		if (!decoding(eng, o, i))
			continue;
		struct sched_req *r = o->reqs[i];
		for (; r->n_spec < k; r->n_spec++)
			r->tokens[r->n_tokens + r->n_spec] = r->tokens[r->n_tokens + r->n_spec - 1];
		r->n_spec = k;
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
		sl->alive = alive;
	}
	if (eng->o.spec.method == SPEC_MTP && mtp_step(eng, &o, e) < 0)
		return -1;
	if (eng->spec_k > 0)
		propose(eng, &o);
	return 0;
}
