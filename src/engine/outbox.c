/* The reader's side of request handles (outbox.h). */
#include "engine/outbox.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int outbox_init(struct outbox *h, int n)
{
	memset(h, 0, sizeof *h);
	h->ch = calloc((size_t)n, sizeof *h->ch);
	if (!h->ch)
		return -1;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	h->n = n;
	h->refs = 2; /* caller + engine */
	for (int i = 0; i < n; i++)
		h->ch[i].stop_token = -1;
	return 0;
}

void outbox_ref(struct outbox *h)
{
	pthread_mutex_lock(&h->mu);
	h->refs++;
	pthread_mutex_unlock(&h->mu);
}

static void chunk_free(struct outbox_chunk *c)
{
	free(c->toks);
	free(c->lps);
	free(c->text);
	memset(c, 0, sizeof *c);
}

static bool unref_locked(struct outbox *h)
{
	/* called with h->mu held; unlocks it */
	bool last = --h->refs == 0;
	pthread_mutex_unlock(&h->mu);
	if (!last)
		return false;
	for (int i = 0; i < h->n; i++) {
		chunk_free(&h->ch[i].pending);
		chunk_free(&h->ch[i].current);
		free(h->ch[i].stop_str);
		free(h->ch[i].error);
	}
	free(h->ch);
	free(h->prompt_lps);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
	return true;
}

bool outbox_unref(struct outbox *h)
{
	pthread_mutex_lock(&h->mu);
	return unref_locked(h);
}

static int chunk_reserve(struct outbox_chunk *c, int n_more, size_t text_more, bool logprobs)
{
	if (c->n + n_more > c->cap) {
		int cap = c->cap ? c->cap * 2 : 8;
		while (cap < c->n + n_more)
			cap *= 2;
		int32_t *t = realloc(c->toks, sizeof *t * (size_t)cap);
		if (!t)
			return -1;
		c->toks = t;
		if (logprobs || c->lps) {
			struct engine_logprob *l = realloc(c->lps, sizeof *l * (size_t)cap);
			if (!l)
				return -1;
			c->lps = l;
		}
		c->cap = cap;
	}
	if (c->len + text_more + 1 > c->text_cap) {
		size_t cap = c->text_cap ? c->text_cap * 2 : 64;
		while (cap < c->len + text_more + 1)
			cap *= 2;
		char *t = realloc(c->text, cap);
		if (!t)
			return -1;
		c->text = t;
		c->text_cap = cap;
	}
	return 0;
}

int outbox_next(struct outbox *h, struct engine_event *ev, int timeout_ms)
{
	struct timespec dl;
	if (timeout_ms > 0) {
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&h->mu);
	for (;;) {
		for (int k = 0; k < h->n; k++) {
			int i = (h->rr + k) % h->n;
			struct outbox_choice *c = &h->ch[i];
			if (!c->has_pending)
				continue;
			h->rr = (i + 1) % h->n;
			struct outbox_chunk t = c->current;
			c->current = c->pending;
			c->pending = t;
			c->pending.n = 0;
			c->pending.len = 0;
			c->has_pending = false;
			memset(ev, 0, sizeof *ev);
			ev->index = i;
			ev->n_tokens = c->current.n;
			ev->token_ids = c->current.toks;
			ev->logprobs = c->current.lps && c->current.n ? c->current.lps : NULL;
			ev->text = c->current.text ? c->current.text : "";
			ev->text_len = c->current.len;
			ev->stop_token = -1;
			if (c->finish != ENGINE_FINISH_NONE) {
				ev->finish = c->finish;
				ev->stop_token = c->stop_token;
				ev->stop_str = c->stop_str;
				ev->error = c->error;
				h->n_finished_read++;
			}
			ev->n_prompt_tokens = c->n_prompt;
			ev->n_cached_tokens = c->n_cached;
			ev->n_output_tokens = c->n_output;
			pthread_mutex_unlock(&h->mu);
			return ENGINE_EV_OK;
		}
		if (h->n_finished_read == h->n) {
			pthread_mutex_unlock(&h->mu);
			return ENGINE_EV_END;
		}
		if (timeout_ms == 0) {
			pthread_mutex_unlock(&h->mu);
			return ENGINE_EV_TIMEOUT;
		}
		if (timeout_ms < 0) {
			pthread_cond_wait(&h->cv, &h->mu);
		} else if (pthread_cond_timedwait(&h->cv, &h->mu, &dl) == ETIMEDOUT) {
			pthread_mutex_unlock(&h->mu);
			return ENGINE_EV_TIMEOUT;
		}
	}
}

void outbox_discard(struct outbox *h)
{
	pthread_mutex_lock(&h->mu);
	h->refs = 1;
	unref_locked(h);
}

void outbox_prompt_logprobs_ready(struct outbox *h)
{
	pthread_mutex_lock(&h->mu);
	h->prompt_lps_ready = true;
	pthread_mutex_unlock(&h->mu);
}

const struct engine_logprob *outbox_prompt_logprobs(struct outbox *h, int *n)
{
	pthread_mutex_lock(&h->mu);
	bool ready = h->prompt_lps_ready;
	pthread_mutex_unlock(&h->mu);
	*n = ready ? h->n_prompt_lps : 0;
	return ready ? h->prompt_lps : NULL;
}

void outbox_post(struct outbox *h, int index, const struct outbox_post *p)
{
	pthread_mutex_lock(&h->mu);
	struct outbox_choice *c = &h->ch[index];
	if (c->finish != ENGINE_FINISH_NONE) { /* a choice finishes once */
		pthread_mutex_unlock(&h->mu);
		return;
	}
	enum engine_finish fin = p->finish;
	const char *error = p->error;
	struct outbox_chunk *k = &c->pending;
	if (chunk_reserve(k, p->n_tok, p->text_len, p->lp != NULL) == 0) {
		if (p->n_tok > 0) {
			memcpy(k->toks + k->n, p->tok, sizeof *p->tok * (size_t)p->n_tok);
			if (p->lp && k->lps)
				memcpy(k->lps + k->n, p->lp, sizeof *p->lp * (size_t)p->n_tok);
		}
		k->n += p->n_tok;
		if (p->text_len)
			memcpy(k->text + k->len, p->text, p->text_len);
		k->len += p->text_len;
		k->text[k->len] = 0;
	} else {
		fin = ENGINE_FINISH_ABORT;
		error = "out of memory delivering output";
	}
	c->n_output = p->n_output;
	c->n_prompt = p->n_prompt;
	c->n_cached = p->n_cached;
	if (fin != ENGINE_FINISH_NONE) {
		c->finish = fin;
		c->stop_token = p->stop_token;
		if (p->stop_str)
			c->stop_str = strdup(p->stop_str);
		if (error)
			c->error = strdup(error);
	}
	c->has_pending = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

bool outbox_mark_cancelled(struct outbox *h)
{
	pthread_mutex_lock(&h->mu);
	bool all_done = true;
	for (int i = 0; i < h->n; i++)
		all_done &= h->ch[i].finish != ENGINE_FINISH_NONE;
	if (h->cancelled || all_done) {
		pthread_mutex_unlock(&h->mu);
		return false;
	}
	h->cancelled = true;
	h->refs++; /* held by the cancel list */
	pthread_mutex_unlock(&h->mu);
	return true;
}
