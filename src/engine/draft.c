/* Speculative decoding's part of a step (draft.h). */
#include "engine/draft.h"

#include <stdlib.h>
#include <string.h>

#include "engine/req.h"
#include "engine/sample.h"
#include "guide/guide.h"

int draft_init(struct draft *d, int max_num_seqs, struct err *e)
{
	d->mtp = calloc((size_t)max_num_seqs, sizeof *d->mtp);
	d->n_mtp = calloc((size_t)max_num_seqs, sizeof *d->n_mtp);
	if (!d->mtp || !d->n_mtp)
		return err_set(e, "engine: out of memory");
	if (d->spec.method == SPEC_MTP && d->spec.k > 1 && guide_state_new(NULL, &d->mtp_guide, e) < 0)
		return -1;
	return 0;
}

void draft_fini(struct draft *d)
{
	free(d->mtp);
	free(d->n_mtp);
	guide_state_free(d->mtp_guide);
}

/* Drafts for the next step of every choice that is decoding (ngram lookup, or the MTP
 * module's draft). A backend that runs only uniform decode queries gets one draft count for
 * all: the longest proposal, padded with each choice's last token (a guess like any other,
 * verified like the rest), but no more than the choice nearest its length limit can take,
 * and none at all when padding would be most of the drafts. A shorter query would leave the
 * decode path for the prefill path: slower, and not the same rounding. */
static bool decoding(const struct sched_output *o, const bool *alive, int i)
{
	const struct sched_req *r = o->reqs[i];
	return alive[i] && r->status == SREQ_RUNNING && r->n_computed == r->n_tokens - 1;
}

static bool spec_disabled(const struct draft *d)
{
	const struct spec_config *c = &d->spec;
	return c->disable_by_batch_size > 0 && sched_n_running(d->sched) > c->disable_by_batch_size;
}

/* The grammar state of guided choice s after its first `depth` drafts (tokens[n_tokens,
 * + depth)) into d->mtp_guide: NULL when the grammar does not apply yet after them; *dead
 * when a draft leaves the grammar (the mask allowed it, so only if the grammar ended). */
static const struct guide_state *guide_after_drafts(struct draft *d, struct guide_vocab *gv, const struct eseq *s,
						    int depth, bool *dead)
{
	*dead = false;
	const struct sched_req *r = &s->sr;
	bool on = s->guide_on;
	if (on && depth == 0)
		return s->guide;
	if (on)
		guide_state_copy(d->mtp_guide, s->guide);
	for (int j = 0; j < depth; j++) {
		int32_t t = r->tokens[r->n_tokens + j];
		if (!on) {
			if ((on = t == s->p.guide_after))
				guide_state_restart(d->mtp_guide, s->guide);
		} else if (!guide_state_advance(gv, d->mtp_guide, t)) {
			*dead = true;
			return NULL;
		}
	}
	return on ? d->mtp_guide : NULL;
}

/* deepseek_mtp's draft from the MTP logits of a choice that has `depth` drafts already:
 * the argmax after its logit_bias, its banned tokens (allowed_token_ids, bad_words) and its
 * grammar, as its sampler would see them after those drafts, so that a request steered
 * towards some tokens gets drafts among them (-1: none) */
static int32_t mtp_draft(struct draft *d, struct guide_vocab *gv, const struct eseq *s, const float *row, int depth)
{
	const struct sampling_params *p = &s->p;
	const uint8_t *ban = sample_banned(p, s->sr.tokens + s->sr.n_prompt, sched_req_n_output(&s->sr) + depth,
					   d->vocab, d->ban);
	const uint8_t *allow = NULL;
	if (s->guide) {
		bool dead;
		const struct guide_state *g = guide_after_drafts(d, gv, s, depth, &dead);
		if (dead)
			return -1;
		if (g) {
			if (guide_state_mask(gv, g, d->eos_ids, d->n_eos_ids, d->allow) == 0)
				return -1;
			allow = d->allow;
		}
	}
	const float *x = row;
	if (p->n_logit_bias) { /* biased copy (the scratch is free between samples) */
		memcpy(d->biased, row, sizeof *row * (size_t)d->vocab);
		sample_logit_bias(p, d->biased, d->vocab);
		x = d->biased;
	}
	int32_t best = -1;
	for (int v = 0; v < d->vocab; v++)
		if (!(ban && ban[v]) && !(allow && !allow[v]) && (best < 0 || x[v] > x[best]))
			best = v;
	return best;
}

/* the drafts choice i of the step may take: num_speculative_tokens, within its length */
static int draft_room(const struct draft *d, const struct sched_req *r)
{
	int room = r->max_len - r->n_tokens - 1; /* the drafts and one more token fit */
	return d->spec.k < room ? d->spec.k : (room > 0 ? room : 0);
}

/* The MTP module runs over every position of the step whose next token is now known and
 * whose hidden state was computed from known tokens (a prefill chunk's, a decode's last
 * token and its accepted drafts), so that its latent cache follows the model's; each
 * decoding choice gets the greedy draft of the token after its last one (mtp_draft). With
 * k > 1 drafts, each further draft is a chained pass of the same layer over the previous
 * draft and the layer's own output (vLLM's way with DeepSeek's one MTP layer), at the
 * positions the scheduler's lookahead holds. The logits are computed only when drafts are
 * on. */
int draft_mtp(struct draft *d, const struct sched_output *o, const bool *alive, struct guide_vocab *gv, struct err *e)
{
	bool drafts = !spec_disabled(d);
	int any = 0;
	for (int i = 0; i < o->n; i++) {
		const struct sched_req *r = o->reqs[i];
		d->mtp[i].n = 0;
		d->mtp[i].want = false;
		d->n_mtp[i] = 0;
		if (!alive[i] || r->status != SREQ_RUNNING)
			continue;
		int end = r->step_start + r->n_sched < r->n_tokens - 1 ? r->step_start + r->n_sched : r->n_tokens - 1;
		d->mtp[i].n = end > r->step_start ? end - r->step_start : 0;
		d->mtp[i].want = drafts && d->mtp[i].n > 0 && decoding(o, alive, i) && draft_room(d, r) > 0;
		any += d->mtp[i].n;
	}
	if (!any)
		return 0;
	if (runner_execute_mtp(d->runner, o, d->mtp, d->rows, e) < 0)
		return -1;
	for (int depth = 0;; depth++) {
		int chained = 0;
		for (int i = 0; i < o->n; i++) {
			d->mtp[i].tok = -1;
			if (!d->rows[i])
				continue;
			struct sched_req *r = o->reqs[i];
			int32_t t = mtp_draft(d, gv, eseq_of(r), d->rows[i], depth);
			if (t < 0)
				continue;
			r->tokens[r->n_tokens + depth] = t;
			d->n_mtp[i] = depth + 1;
			if (depth + 1 < draft_room(d, r)) {
				d->mtp[i].tok = t;
				chained++;
			}
		}
		if (!chained)
			return 0;
		if (runner_execute_mtp_chain(d->runner, o, d->mtp, depth + 1, d->rows, e) < 0)
			return -1;
	}
}

void draft_propose(struct draft *d, const struct sched_output *o, const bool *alive)
{
	const struct spec_config *c = &d->spec;
	if (spec_disabled(d))
		return; /* every n_spec is 0 after sched_req_append */
	int longest = 0, least_room = c->k;
	for (int i = 0; i < o->n; i++) {
		if (!decoding(o, alive, i))
			continue;
		struct sched_req *r = o->reqs[i];
		int room = r->max_len - r->n_tokens - 1; /* the drafts and one more token fit */
		int k = draft_room(d, r);
		if (c->method == SPEC_MTP) {
			r->n_spec = d->n_mtp[i]; /* at tokens[n_tokens, ...) already, <= k */
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
	if (!d->runner->c.require_uniform || longest == 0)
		return;
	int k = longest < least_room ? longest : least_room;
	if (k < 0)
		k = 0;
	/* padding costs compute: no drafts this step if most verified tokens would be filler */
	int n_dec = 0, proposed = 0;
	for (int i = 0; i < o->n; i++)
		if (decoding(o, alive, i)) {
			n_dec++;
			proposed += o->reqs[i]->n_spec < k ? o->reqs[i]->n_spec : k;
		}
	if (proposed < n_dec * k - proposed)
		k = 0;
	for (int i = 0; i < o->n; i++) {
		if (!decoding(o, alive, i))
			continue;
		struct sched_req *r = o->reqs[i];
		for (; r->n_spec < k; r->n_spec++)
			r->tokens[r->n_tokens + r->n_spec] = r->tokens[r->n_tokens + r->n_spec - 1];
		r->n_spec = k;
	}
}
