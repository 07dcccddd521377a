/* Detokenization + stop strings of one choice (output.h). The engine owns the output stage,
 * as vLLM's front-end OutputProcessor does: the incremental detokenizer (tok/detok.c) runs
 * here, hence the engine -> tok arrow, so that the HTTP server and the offline `generate`
 * command get the same text. */
#include "engine/output.h"

#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer.h"

int seq_text_init(struct seq_text *st, const struct tok *t, const struct sampling_params *p, const int32_t *prompt,
		  int n_prompt, struct err *e)
{
	memset(st, 0, sizeof *st);
	st->p = p;
	st->stop_idx = -1;
	size_t max_stop = 0;
	for (int i = 0; i < p->n_stop; i++) {
		size_t l = strlen(p->stop[i]);
		if (l > max_stop)
			max_stop = l;
	}
	/* vLLM's stop_buffer_length; an included stop string may be emitted as it grows */
	st->hold = max_stop == 0 || p->include_stop_str_in_output ? 0 : max_stop - 1;
	st->cap = 256;
	st->buf = malloc(st->cap);
	if (!st->buf)
		return err_set(e, "output text: out of memory");
	st->buf[0] = 0;
	if (t && tok_detok_new(t, p->skip_special_tokens, prompt, (size_t)n_prompt, &st->detok, e) < 0) {
		free(st->buf);
		st->buf = NULL;
		return -1;
	}
	return 0;
}

void seq_text_fini(struct seq_text *st)
{
	if (st->detok)
		tok_detok_free(st->detok);
	free(st->buf);
	memset(st, 0, sizeof *st);
}

static int append(struct seq_text *st, const char *s, size_t n, struct err *e)
{
	if (st->len + n + 1 > st->cap) {
		size_t cap = st->cap * 2;
		while (cap < st->len + n + 1)
			cap *= 2;
		char *b = realloc(st->buf, cap);
		if (!b)
			return err_set(e, "output text: out of memory for %zu bytes", cap);
		st->buf = b;
		st->cap = cap;
	}
	memcpy(st->buf + st->len, s, n);
	st->len += n;
	st->buf[st->len] = 0;
	return 0;
}

/* Looks for a stop string that ends inside the text added since old_len. On a hit the
 * earliest one wins; the text is cut before it (or after it when included). */
static int check_stops(struct seq_text *st, size_t old_len)
{
	const struct sampling_params *p = st->p;
	size_t best_at = (size_t)-1;
	int best = -1;
	for (int i = 0; i < p->n_stop; i++) {
		size_t l = strlen(p->stop[i]);
		if (l > st->len)
			continue;
		size_t from = old_len + 1 > l ? old_len + 1 - l : 0; /* must end in the new text */
		const char *hit = memmem(st->buf + from, st->len - from, p->stop[i], l);
		if (hit && (size_t)(hit - st->buf) < best_at) {
			best_at = (size_t)(hit - st->buf);
			best = i;
		}
	}
	if (best < 0)
		return 0;
	st->stop_idx = best;
	st->len = best_at + (p->include_stop_str_in_output ? strlen(p->stop[best]) : 0);
	if (st->emitted > st->len)
		st->emitted = st->len; /* cannot happen with the hold-back; kept for safety */
	st->buf[st->len] = 0;
	st->done = true;
	return 1;
}

int seq_text_push(struct seq_text *st, int32_t token, bool check_stops_in_it, struct err *e)
{
	if (!st->detok || st->done)
		return 0;
	const char *d;
	size_t n;
	if (tok_detok_push(st->detok, token, &d, &n, e) < 0)
		return -1;
	size_t old = st->len;
	if (n && append(st, d, n, e) < 0)
		return -1;
	if (st->p->n_stop == 0 || st->len == old || !check_stops_in_it)
		return 0;
	return check_stops(st, old);
}

int seq_text_finish(struct seq_text *st, struct err *e)
{
	if (!st->detok || st->done)
		return 0;
	const char *d;
	size_t n;
	st->done = true;
	if (tok_detok_finish(st->detok, &d, &n, e) < 0)
		return -1;
	size_t old = st->len;
	if (n && append(st, d, n, e) < 0)
		return -1;
	if (st->p->n_stop && st->len != old)
		check_stops(st, old);
	return 0;
}

size_t seq_text_take(struct seq_text *st, bool final, const char **out)
{
	size_t end = st->len;
	if (!final && !st->done)
		end = end > st->hold ? end - st->hold : 0;
	/* back up to a character boundary (never split a UTF-8 sequence) */
	while (end > st->emitted && end < st->len && ((unsigned char)st->buf[end] & 0xC0) == 0x80)
		end--;
	if (end < st->emitted)
		end = st->emitted;
	*out = st->buf + st->emitted;
	size_t n = end - st->emitted;
	st->emitted = end;
	return n;
}
