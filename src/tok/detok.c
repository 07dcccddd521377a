/* Decoder and detokenizers. Every decoder step that works token by token (ByteLevel,
 * Replace, ByteFallback, Metaspace, Strip before Fuse) is applied once at load time to
 * build an id → bytes table; decoding is then concatenation, lossy UTF-8 conversion and
 * the whole-text steps (a leading Strip after Fuse). One-shot decode runs the same
 * streaming machine as the incremental detokenizer, so the two agree byte for byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_util.h"
#include "base/utf8.h"
#include "tok/regex.h"
#include "tok/tok_internal.h"

enum step_kind { ST_BYTE_LEVEL, ST_REPLACE, ST_BYTE_FALLBACK, ST_METASPACE, ST_STRIP };

struct dec_step {
	enum step_kind kind;
	struct tok_regex re; /* Replace */
	char *content;       /* Replace content; Strip / Metaspace character */
	size_t content_len;
	int start, stop;  /* Strip */
	bool first_strip; /* Metaspace: remove the replacement in the first token */
};

struct dec_steps {
	struct dec_step *v;
	size_t n, cap;
	bool fused;
};

static void steps_free(struct dec_steps *s)
{
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].kind == ST_REPLACE)
			tok_regex_free(&s->v[i].re);
		free(s->v[i].content);
	}
	free(s->v);
}

static struct dec_step *step_new(struct dec_steps *s, enum step_kind k)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct dec_step *v = realloc(s->v, cap * sizeof *v);
		if (!v)
			return NULL;
		s->v = v;
		s->cap = cap;
	}
	memset(&s->v[s->n], 0, sizeof s->v[s->n]);
	s->v[s->n].kind = k;
	return &s->v[s->n++];
}

static int one_char(const char *s, const char *what, const char *key, struct err *e)
{
	uint32_t cp;
	size_t n = strlen(s);
	if (!n || utf8_decode((const unsigned char *)s, n, &cp) != n)
		return err_set(e, "%s: decoder.%s: expected one character, got '%s'", what, key, s);
	return 0;
}

static int parse_steps(struct tok *t, const json_t *d, struct dec_steps *s, struct err *e)
{
	const char *type, *w = t->what;
	if (json_util_str(d, w, "decoder.type", NULL, &type, e) < 0 || !type)
		return err_set(e, "%s: decoder: expected an object with a \"type\"", w);
	if (!strcmp(type, "Sequence")) {
		const json_t *arr = json_object_get(d, "decoders");
		if (!json_is_array(arr))
			return err_set(e, "%s: decoder.decoders: expected an array", w);
		for (size_t i = 0; i < json_array_size(arr); i++)
			if (parse_steps(t, json_array_get(arr, i), s, e))
				return -1;
		return 0;
	}
	if (!strcmp(type, "Fuse")) {
		s->fused = true;
		return 0;
	}
	if (!strcmp(type, "Strip")) {
		long long start, stop;
		const char *c;
		if (json_util_str(d, w, "decoder.content", " ", &c, e) < 0 || one_char(c, w, "content", e) ||
		    json_util_int(d, w, "decoder.start", 0, &start, e) < 0 ||
		    json_util_int(d, w, "decoder.stop", 0, &stop, e) < 0)
			return -1;
		if (start < 0 || start > 64 || stop < 0 || stop > 64)
			return err_set(e, "%s: decoder: Strip start/stop out of range", w);
		if (s->fused) { /* whole text: only a leading strip can be streamed */
			if (stop)
				return err_set(e, "%s: decoder: Strip with stop > 0 after Fuse is not supported", w);
			t->strip_leading = (int)start;
			t->strip_char_len = strlen(c);
			memcpy(t->strip_char, c, t->strip_char_len);
			return 0;
		}
		struct dec_step *st = step_new(s, ST_STRIP);
		if (!st || !(st->content = tok_strndup(c, strlen(c))))
			return tok_oom(e);
		st->content_len = strlen(c);
		st->start = (int)start, st->stop = (int)stop;
		return 0;
	}
	if (s->fused)
		return err_set(e, "%s: decoder: '%s' after Fuse is not supported", w, type);
	if (!strcmp(type, "ByteLevel"))
		return step_new(s, ST_BYTE_LEVEL) ? 0 : tok_oom(e);
	if (!strcmp(type, "ByteFallback"))
		return step_new(s, ST_BYTE_FALLBACK) ? 0 : tok_oom(e);
	if (!strcmp(type, "Replace")) {
		const json_t *pat = json_object_get(d, "pattern"), *c = json_object_get(d, "content");
		const json_t *rs = json_object_get(pat, "Regex"), *ss = json_object_get(pat, "String");
		if ((!json_is_string(rs) && !json_is_string(ss)) || !json_is_string(c))
			return err_set(e, "%s: decoder: Replace needs a pattern and a content", w);
		struct dec_step *st = step_new(s, ST_REPLACE);
		const json_t *p = rs ? rs : ss;
		size_t cn = json_string_length(c);
		if (!st || !(st->content = tok_strndup(json_string_value(c), cn)))
			return tok_oom(e);
		st->content_len = cn;
		char what[300];
		snprintf(what, sizeof what, "%s: decoder.pattern", w);
		return tok_regex_compile(&st->re, json_string_value(p), json_string_length(p), !rs, what, e);
	}
	if (!strcmp(type, "Metaspace")) {
		const char *r, *scheme;
		bool legacy;
		if (json_util_str(d, w, "decoder.replacement", "\xE2\x96\x81", &r, e) < 0 ||
		    one_char(r, w, "replacement", e) ||
		    json_util_bool(d, w, "decoder.add_prefix_space", true, &legacy, e) < 0 ||
		    json_util_str(d, w, "decoder.prepend_scheme", NULL, &scheme, e) < 0)
			return -1;
		struct dec_step *st = step_new(s, ST_METASPACE);
		if (!st || !(st->content = tok_strndup(r, strlen(r))))
			return tok_oom(e);
		st->content_len = strlen(r);
		st->first_strip = scheme ? strcmp(scheme, "never") != 0 : legacy;
		return 0;
	}
	return err_set(e, "%s: decoder: unsupported type '%s'", w, type);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
				      : -1;
}

/* Applies the per-token steps to one token string (first: it is the first token). 0, or -1
 * out of memory. */
static int apply_steps(const struct dec_steps *s, const char *tok, size_t n, bool first, struct strbuf *a,
		       struct strbuf *b, struct tok_regex_ctx *rx)
{
	a->n = 0;
	strbuf_put(a, tok, n);
	for (size_t k = 0; k < s->n; k++) {
		const struct dec_step *st = &s->v[k];
		b->n = 0;
		switch (st->kind) {
		case ST_BYTE_LEVEL: {
			/* all characters in the alphabet → their bytes; otherwise keep the token */
			bool all = true;
			for (size_t i = 0; i < a->n && all;) {
				uint32_t cp;
				size_t l = utf8_decode((const unsigned char *)a->p + i, a->n - i, &cp);
				int byte = l ? tok_cp_to_byte(cp) : -1;
				if (byte < 0)
					all = false;
				else
					strbuf_putc(b, (char)byte);
				i += l ? l : 1;
			}
			if (!all)
				continue; /* a unchanged */
			break;
		}
		case ST_BYTE_FALLBACK: {
			/* "<0xXX>" (upper-case hex, as sentencepiece writes them) → the byte */
			int hi = a->n == 6 ? hexval(a->p[3]) : -1, lo = a->n == 6 ? hexval(a->p[4]) : -1;
			if (hi >= 0 && lo >= 0 && !memcmp(a->p, "<0x", 3) && a->p[5] == '>') {
				strbuf_putc(b, (char)(hi * 16 + lo));
				break;
			}
			continue;
		}
		case ST_REPLACE: {
			size_t pos = 0, last = 0, ms, me;
			while (pos < a->n && tok_regex_find(&st->re, rx, a->p, a->n, pos, &ms, &me, NULL) == 1) {
				if (me == ms) {
					pos = ms + 1;
					continue;
				}
				strbuf_put(b, a->p + last, ms - last);
				strbuf_put(b, st->content, st->content_len);
				last = pos = me;
			}
			strbuf_put(b, a->p + last, a->n - last);
			break;
		}
		case ST_METASPACE:
			for (size_t i = 0; i < a->n;) {
				if (a->n - i >= st->content_len && !memcmp(a->p + i, st->content, st->content_len)) {
					if (!(first && st->first_strip))
						strbuf_putc(b, ' ');
					i += st->content_len;
				} else {
					strbuf_putc(b, a->p[i++]);
				}
			}
			break;
		case ST_STRIP: {
			size_t lo = 0, hi = a->n, cl = st->content_len;
			for (int i = 0; i < st->start && hi - lo >= cl && !memcmp(a->p + lo, st->content, cl); i++)
				lo += cl;
			for (int i = 0; i < st->stop && hi - lo >= cl && !memcmp(a->p + hi - cl, st->content, cl); i++)
				hi -= cl;
			strbuf_put(b, a->p + lo, hi - lo);
			break;
		}
		}
		if (b->oom)
			return -1;
		struct strbuf x = *a;
		*a = *b, *b = x;
	}
	return a->oom ? -1 : 0;
}

static int table_build(struct tok *t, const struct dec_steps *s, bool first, struct tok_dec_table *tb,
		       struct tok_regex_ctx *rx)
{
	struct strbuf a = {0}, b = {0};
	int rc = 0;
	tb->off = malloc(((size_t)t->n_ids + 1) * sizeof *tb->off);
	if (!tb->off)
		return -1;
	for (int32_t id = 0; id < t->n_ids && !rc; id++) {
		tb->off[id] = (uint32_t)tb->bytes.n;
		const char *str = t->id_str[id];
		if (!str)
			continue;
		if (t->flags[id] & TOKF_ADDED) { /* added tokens are emitted verbatim */
			rc = strbuf_puts(&tb->bytes, str);
			continue;
		}
		rc = apply_steps(s, str, strlen(str), first, &a, &b, rx) || strbuf_put(&tb->bytes, a.p, a.n);
	}
	tb->off[t->n_ids] = (uint32_t)tb->bytes.n;
	strbuf_fini(&a);
	strbuf_fini(&b);
	return rc ? -1 : 0;
}

int tok_decoder_load(struct tok *t, const json_t *dec, struct err *e)
{
	struct dec_steps s = {0};
	if (!dec || json_is_null(dec)) {
		t->join_space = true; /* tokenizers joins tokens with " " without a decoder */
	} else if (parse_steps(t, dec, &s, e)) {
		steps_free(&s);
		return -1;
	}
	struct tok_regex_ctx rx;
	if (tok_regex_ctx_init(&rx)) {
		steps_free(&s);
		return tok_oom(e);
	}
	int rc = table_build(t, &s, false, &t->dec, &rx);
	bool first_differs = false;
	for (size_t i = 0; i < s.n; i++)
		first_differs = first_differs || (s.v[i].kind == ST_METASPACE && s.v[i].first_strip);
	if (!rc && first_differs) {
		t->dec_first = calloc(1, sizeof *t->dec_first);
		rc = !t->dec_first || table_build(t, &s, true, t->dec_first, &rx);
	}
	tok_regex_ctx_fini(&rx);
	steps_free(&s);
	if (rc) /* the tables are freed with the tokenizer */
		return tok_oom(e);
	if (t->dec.bytes.n > UINT32_MAX / 2)
		return err_set(e, "%s: decoder: vocab too large", t->what);
	return 0;
}

static void table_free(struct tok_dec_table *tb)
{
	strbuf_fini(&tb->bytes);
	free(tb->off);
}

void tok_decoder_free(struct tok *t)
{
	table_free(&t->dec);
	if (t->dec_first)
		table_free(t->dec_first);
	free(t->dec_first);
	t->dec_first = NULL;
}

/* ---- the streaming machine ---- */

struct tok_detok {
	const struct tok *t;
	bool skip_special;
	size_t n_tokens;    /* tokens decoded so far (prompt context counts as one) */
	struct strbuf pend; /* bytes of an incomplete character */
	struct strbuf out;  /* the last delta */
	struct strbuf conv; /* scratch */
	int stripped;       /* leading strip_char removed so far */
	bool started;       /* text other than stripped characters was emitted */
	bool finished;
};

static void detok_init(struct tok_detok *d, const struct tok *t, bool skip)
{
	memset(d, 0, sizeof *d);
	d->t = t;
	d->skip_special = skip;
}

static void detok_fini(struct tok_detok *d)
{
	strbuf_fini(&d->pend);
	strbuf_fini(&d->out);
	strbuf_fini(&d->conv);
}

/* Converts n bytes of d->pend (complete or final) and appends the text to dst. 0, or -1
 * out of memory. */
static int emit(struct tok_detok *d, size_t n, struct strbuf *dst)
{
	const struct tok *t = d->t;
	d->conv.n = 0;
	if (strbuf_reserve(&d->conv, 3 * n)) /* U+FFFD for each invalid byte at worst */
		return -1;
	d->conv.n = utf8_lossy(d->pend.p, n, d->conv.p);
	memmove(d->pend.p, d->pend.p + n, d->pend.n - n);
	d->pend.n -= n;
	size_t pos = 0;
	while (!d->started && pos < d->conv.n) {
		if (d->stripped < t->strip_leading && d->conv.n - pos >= t->strip_char_len &&
		    !memcmp(d->conv.p + pos, t->strip_char, t->strip_char_len)) {
			pos += t->strip_char_len;
			d->stripped++;
		} else {
			d->started = true;
		}
	}
	return strbuf_put(dst, d->conv.p + pos, d->conv.n - pos);
}

const char *tok_id_bytes(const struct tok *t, int32_t id, size_t *len)
{
	if (id < 0 || id >= t->n_ids || !(t->flags[id] & TOKF_VALID))
		return NULL;
	*len = t->dec.off[id + 1] - t->dec.off[id];
	return t->dec.bytes.p + t->dec.off[id];
}

bool tok_decode_concatenates(const struct tok *t) { return !t->dec_first && !t->join_space && !t->strip_leading; }

/* 0, or -1 out of memory. */
static int feed(struct tok_detok *d, int32_t id, struct strbuf *dst)
{
	const struct tok *t = d->t;
	if (id >= t->n_ids || !(t->flags[id] & TOKF_VALID))
		return 0; /* unused id (e.g. a padding row of the model's vocab): no text */
	if (d->skip_special && (t->flags[id] & TOKF_SPECIAL))
		return 0;
	const struct tok_dec_table *tb = (d->n_tokens == 0 && t->dec_first) ? t->dec_first : &t->dec;
	if (t->join_space && d->n_tokens > 0)
		strbuf_putc(&d->pend, ' ');
	d->n_tokens++;
	if (strbuf_put(&d->pend, tb->bytes.p + tb->off[id], tb->off[id + 1] - tb->off[id]))
		return -1; /* also when the space above failed: oom is sticky */
	size_t hold = utf8_incomplete_tail((const unsigned char *)d->pend.p, d->pend.n);
	if (d->pend.n > hold)
		return emit(d, d->pend.n - hold, dst);
	return 0;
}

int tok_detok_new(const struct tok *t, bool skip_special_tokens, const int32_t *prompt_ids, size_t n_prompt,
		  struct tok_detok **out, struct err *e)
{
	*out = NULL;
	struct tok_detok *d = malloc(sizeof *d);
	if (!d)
		return tok_oom(e);
	detok_init(d, t, skip_special_tokens);
	for (size_t i = 0; i < n_prompt; i++) {
		int32_t id = prompt_ids[i];
		if (id < 0) {
			free(d);
			return err_set(e, "detokenize: bad prompt token id %d", id);
		}
		if (id < t->n_ids && (t->flags[id] & TOKF_VALID) &&
		    !(skip_special_tokens && (t->flags[id] & TOKF_SPECIAL))) {
			d->n_tokens = 1; /* output does not start the text */
			d->started = true;
		}
	}
	*out = d;
	return 0;
}

int tok_detok_push(struct tok_detok *d, int32_t id, const char **delta, size_t *delta_len, struct err *e)
{
	d->out.n = 0;
	int rc = 0;
	if (id < 0)
		rc = err_set(e, "detokenize: bad token id %d", id);
	else if (d->finished)
		rc = err_set(e, "detokenize: push after finish");
	else if (feed(d, id, &d->out))
		rc = tok_oom(e);
	if (rc)
		d->out.n = 0;
	/* strbuf keeps p[n] == 0 after an append; an empty delta is "" */
	*delta = d->out.n ? d->out.p : "";
	if (delta_len)
		*delta_len = d->out.n;
	return rc;
}

int tok_detok_finish(struct tok_detok *d, const char **delta, size_t *delta_len, struct err *e)
{
	d->out.n = 0;
	int rc = 0;
	/* an incomplete character becomes U+FFFD */
	if (!d->finished && d->pend.n && emit(d, d->pend.n, &d->out))
		rc = tok_oom(e);
	d->finished = true;
	if (rc)
		d->out.n = 0;
	*delta = d->out.n ? d->out.p : "";
	if (delta_len)
		*delta_len = d->out.n;
	return rc;
}

void tok_detok_free(struct tok_detok *d)
{
	if (!d)
		return;
	detok_fini(d);
	free(d);
}

int tok_decode(const struct tok *t, const int32_t *ids, size_t n, bool skip_special_tokens, char **text, size_t *len,
	       struct err *e)
{
	*text = NULL;
	for (size_t i = 0; i < n; i++)
		if (ids[i] < 0)
			return err_set(e, "detokenize: bad token id %d at position %zu", ids[i], i);
	struct tok_detok d;
	detok_init(&d, t, skip_special_tokens);
	struct strbuf out = {0};
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		rc = feed(&d, ids[i], &out);
	if (!rc && d.pend.n)
		rc = emit(&d, d.pend.n, &out);
	detok_fini(&d);
	if (!rc && !out.p) /* an empty text is still a malloc'd "" */
		rc = strbuf_put(&out, "", 0);
	if (rc) {
		strbuf_fini(&out);
		return tok_oom(e);
	}
	*text = out.p;
	if (len)
		*len = out.n;
	return 0;
}
