/* Pre-tokenizers: the split machinery of Hugging Face's NormalizedString::split (find the
 * matches, invert, merge by behaviour, drop empty pieces) over PCRE2 patterns. */
#include "tok/pretok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "io/json_util.h"

/* GPT-2's pattern, what ByteLevel uses when use_regex is true */
static const char GPT2_RE[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int behavior_parse(const json_t *j, const char *what, const char *path, enum split_behavior *b, struct err *e)
{
	static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
	const char *s;
	if (json_util_str(j, what, "behavior", NULL, &s, e) < 0)
		return -1;
	if (!s)
		return err_set(e, "%s: %s.behavior: missing", what, path);
	for (int i = 0; i < 5; i++)
		if (!strcmp(s, names[i])) {
			*b = (enum split_behavior)i;
			return 0;
		}
	return err_set(e, "%s: %s.behavior: unknown value '%s'", what, path, s);
}

static int compile_fixed(struct pretok *p, const char *re, enum split_behavior b, bool invert, const char *what,
			 struct err *e)
{
	p->kind = PT_SPLIT;
	p->behavior = b;
	p->invert = invert;
	p->has_re = true;
	return tok_regex_compile(&p->re, re, strlen(re), false, what, e);
}

int pretok_load(struct pretok *p, const json_t *j, const char *what, const char *path, struct err *e)
{
	memset(p, 0, sizeof *p);
	p->kind = PT_SEQUENCE; /* an empty sequence = no pre-tokenizer */
	if (!j || json_is_null(j))
		return 0;
	const char *type;
	if (!json_is_object(j) || json_util_str(j, what, "type", NULL, &type, e) < 0 || !type)
		return err_set(e, "%s: %s: expected an object with a \"type\"", what, path);
	char sub[256];
	if (!strcmp(type, "Sequence")) {
		const json_t *arr = json_object_get(j, "pretokenizers");
		void *sub_v;
		if (tok_seq_alloc(j, "pretokenizers", what, path, sizeof *p->sub, &sub_v, &p->n_sub, e))
			return -1;
		p->sub = sub_v;
		for (size_t i = 0; i < p->n_sub; i++) {
			snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", path, i);
			if (pretok_load(&p->sub[i], json_array_get(arr, i), what, sub, e)) {
				p->n_sub = i;
				pretok_free(p);
				return -1;
			}
		}
		return 0;
	}
	if (!strcmp(type, "Split")) {
		const json_t *pat = json_object_get(j, "pattern");
		const json_t *rs = json_object_get(pat, "Regex"), *ss = json_object_get(pat, "String");
		if (!json_is_string(rs) && !json_is_string(ss))
			return err_set(e, "%s: %s.pattern: expected {\"Regex\": ...} or {\"String\": ...}", what,
				       path);
		if (behavior_parse(j, what, path, &p->behavior, e) ||
		    json_util_bool(j, what, "invert", false, &p->invert, e) < 0)
			return -1;
		p->kind = PT_SPLIT;
		p->has_re = true;
		const json_t *s = rs ? rs : ss;
		snprintf(sub, sizeof sub, "%s: %s.pattern", what, path);
		return tok_regex_compile(&p->re, json_string_value(s), json_string_length(s), !rs, sub, e);
	}
	if (!strcmp(type, "ByteLevel")) {
		bool use_regex;
		if (json_util_bool(j, what, "add_prefix_space", true, &p->add_prefix_space, e) < 0 ||
		    json_util_bool(j, what, "use_regex", true, &use_regex, e) < 0)
			return -1;
		p->kind = PT_BYTE_LEVEL;
		p->behavior = SB_ISOLATED;
		p->has_re = use_regex;
		return use_regex ? tok_regex_compile(&p->re, GPT2_RE, strlen(GPT2_RE), false, what, e) : 0;
	}
	if (!strcmp(type, "Digits")) {
		bool individual;
		if (json_util_bool(j, what, "individual_digits", false, &individual, e) < 0)
			return -1;
		/* char::is_numeric is the Unicode N categories (½ and ② included) */
		return compile_fixed(p, "\\p{N}", individual ? SB_ISOLATED : SB_CONTIGUOUS, false, what, e);
	}
	if (!strcmp(type, "WhitespaceSplit"))
		return compile_fixed(p, "[\\s\\x{85}]", SB_REMOVED, false, what, e);
	if (!strcmp(type, "Whitespace"))
		return compile_fixed(p, "\\w+|[^\\w\\s]+", SB_REMOVED, true, what, e);
	if (!strcmp(type, "Punctuation")) {
		enum split_behavior b = SB_ISOLATED;
		if (json_object_get(j, "behavior") && behavior_parse(j, what, path, &b, e))
			return -1;
		return compile_fixed(p, "[\\p{P}!-/:-@\\[-`{-~]", b, false, what, e);
	}
	if (!strcmp(type, "Metaspace")) {
		const char *r, *scheme;
		bool legacy_prefix;
		if (json_util_str(j, what, "replacement", "\xE2\x96\x81", &r, e) < 0 ||
		    json_util_bool(j, what, "split", true, &p->split, e) < 0 ||
		    json_util_bool(j, what, "add_prefix_space", true, &legacy_prefix, e) < 0 ||
		    json_util_str(j, what, "prepend_scheme", NULL, &scheme, e) < 0)
			return -1;
		uint32_t cp;
		size_t rl = strlen(r);
		if (!rl || utf8_decode((const unsigned char *)r, rl, &cp) != rl)
			return err_set(e, "%s: %s.replacement: expected one character", what, path);
		memcpy(p->repl, r, rl);
		p->repl_len = rl;
		p->kind = PT_METASPACE;
		if (!scheme)
			p->prepend = legacy_prefix ? 2 : 0;
		else if (!strcmp(scheme, "always"))
			p->prepend = 2;
		else if (!strcmp(scheme, "first"))
			p->prepend = 1;
		else if (!strcmp(scheme, "never"))
			p->prepend = 0;
		else
			return err_set(e, "%s: %s.prepend_scheme: unknown value '%s'", what, path, scheme);
		if (p->split) {
			p->has_re = true;
			p->behavior = SB_MERGED_NEXT;
			return tok_regex_compile(&p->re, r, rl, true, what, e);
		}
		return 0;
	}
	return err_set(e, "%s: %s: unsupported pre-tokenizer type '%s'", what, path, type);
}

void pretok_free(struct pretok *p)
{
	for (size_t i = 0; i < p->n_sub; i++)
		pretok_free(&p->sub[i]);
	free(p->sub);
	if (p->has_re)
		tok_regex_free(&p->re);
	memset(p, 0, sizeof *p);
}

static int byte_level_walk(const struct pretok *p, bool *seen, bool *bl, const char *what, struct err *e)
{
	if (p->kind == PT_SEQUENCE) {
		for (size_t i = 0; i < p->n_sub; i++)
			if (byte_level_walk(&p->sub[i], seen, bl, what, e))
				return -1;
		return 0;
	}
	if (p->kind == PT_BYTE_LEVEL) {
		*seen = *bl = true;
		return 0;
	}
	if (*seen)
		return err_set(e, "%s: pre_tokenizer: a pre-tokenizer after ByteLevel is not supported", what);
	return 0;
}

int pretok_byte_level(const struct pretok *p, bool *byte_level, const char *what, struct err *e)
{
	bool seen = false;
	*byte_level = false;
	return byte_level_walk(p, &seen, byte_level, what, e);
}

/* ---- running ---- */

/* A failure sets the sticky l->oom, checked once per piece. */
static void list_add(struct pretok_list *l, size_t off, size_t len, bool at_start)
{
	if (!len || l->oom)
		return; /* empty pieces are dropped */
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct pretok_piece *v = realloc(l->v, cap * sizeof *v);
		if (!v) {
			l->oom = true;
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (struct pretok_piece){off, len, at_start};
}

int pretok_begin(struct pretok_work *w, const char *s, size_t n, bool at_start, struct err *e)
{
	if (!w->rx.md && tok_regex_ctx_init(&w->rx))
		return tok_oom(e);
	w->buf.n = 0;
	strbuf_put(&w->buf, s, n);
	w->pieces.n = 0;
	list_add(&w->pieces, 0, n, at_start);
	return w->buf.oom || w->pieces.oom ? tok_oom(e) : 0;
}

/* Splits one piece by p's pattern and behaviour, appending to out. */
static int split_piece(const struct pretok *p, struct pretok_work *w, struct pretok_piece pc, struct pretok_list *out,
		       struct err *e)
{
	/* spans: alternating gaps and matches covering the piece, as (end, is_match) */
	size_t pos = 0, prev_end = 0, n = pc.len;
	bool have_prev = false;
	/* pending output piece for the merge behaviours */
	size_t cur_s = 0, cur_e = 0;
	bool cur = false, prev_match = false;
	/* MergedWithNext: a match waits to be glued to the following span */
	for (;;) {
		size_t ms = n, me = n;
		bool found = false;
		while (pos <= n) {
			int rc = tok_regex_find(&p->re, &w->rx, w->buf.p + pc.off, n, pos, &ms, &me, e);
			if (rc < 0)
				return -1;
			if (!rc) {
				ms = me = n;
				break;
			}
			if (me == ms && have_prev && ms == prev_end) {
				/* empty match right after the previous match: skip one character */
				if (ms >= n) {
					ms = me = n;
					break;
				}
				uint32_t cp;
				size_t cl = utf8_decode((const unsigned char *)w->buf.p + pc.off + ms, n - ms, &cp);
				pos = ms + (cl ? cl : 1);
				continue;
			}
			found = true;
			break;
		}
		/* emit the gap [prev_end, ms) then the match [ms, me) */
		for (int k = 0; k < 2; k++) {
			size_t s = k == 0 ? prev_end : ms, t = k == 0 ? ms : me;
			bool is_match = k == 1;
			if (k == 0 && s == t)
				continue; /* no gap */
			if (k == 1 && !found)
				break;
			if (p->invert)
				is_match = !is_match;
			switch (p->behavior) {
			case SB_REMOVED:
				if (!is_match)
					list_add(out, pc.off + s, t - s, pc.at_start && s == 0);
				break;
			case SB_ISOLATED: list_add(out, pc.off + s, t - s, pc.at_start && s == 0); break;
			case SB_CONTIGUOUS:
				if (cur && is_match == prev_match) {
					cur_e = t;
				} else {
					if (cur)
						list_add(out, pc.off + cur_s, cur_e - cur_s,
							 pc.at_start && cur_s == 0);
					cur = true, cur_s = s, cur_e = t;
				}
				break;
			case SB_MERGED_PREV:
				if (cur && is_match && !prev_match) {
					cur_e = t;
				} else {
					if (cur)
						list_add(out, pc.off + cur_s, cur_e - cur_s,
							 pc.at_start && cur_s == 0);
					cur = true, cur_s = s, cur_e = t;
				}
				break;
			case SB_MERGED_NEXT:
				/* a match starts a new piece unless the previous span was a match
				 * waiting alone; a gap joins a waiting match */
				if (cur && !is_match && prev_match) {
					cur_e = t;
				} else {
					if (cur)
						list_add(out, pc.off + cur_s, cur_e - cur_s,
							 pc.at_start && cur_s == 0);
					cur = true, cur_s = s, cur_e = t;
				}
				break;
			}
			prev_match = is_match;
		}
		if (!found)
			break;
		have_prev = true;
		prev_end = me;
		if (me == n && me > ms)
			break;  /* only an empty match could follow, and it would be skipped */
		if (me == ms) { /* empty match: advance one character */
			if (me >= n)
				break;
			uint32_t cp;
			size_t cl = utf8_decode((const unsigned char *)w->buf.p + pc.off + me, n - me, &cp);
			pos = me + (cl ? cl : 1);
		} else {
			pos = me;
		}
		if (pos > n)
			break;
	}
	if (cur)
		list_add(out, pc.off + cur_s, cur_e - cur_s, pc.at_start && cur_s == 0);
	return out->oom ? tok_oom(e) : 0;
}

/* Appends a modified copy of *pc to the buffer and points *pc at it. */
static int metaspace_piece(const struct pretok *p, struct pretok_work *w, struct pretok_piece *pcp)
{
	struct pretok_piece pc = *pcp;
	if (strbuf_reserve(&w->buf, p->repl_len * (pc.len + 1))) /* copies from buf itself */
		return -1;
	size_t off = w->buf.n;
	bool starts = pc.len >= p->repl_len && !memcmp(w->buf.p + pc.off, p->repl, p->repl_len);
	bool starts_space = pc.len && w->buf.p[pc.off] == ' ';
	/* spaces become the replacement first, so a leading space counts as "starts with" */
	if (!starts && !starts_space && (p->prepend == 2 || (p->prepend == 1 && pc.at_start)))
		strbuf_put(&w->buf, p->repl, p->repl_len);
	/* the reserve holds every append: no failure below */
	for (size_t i = 0; i < pc.len; i++) {
		char c = w->buf.p[pc.off + i];
		if (c == ' ')
			strbuf_put(&w->buf, p->repl, p->repl_len);
		else
			strbuf_putc(&w->buf, c);
	}
	*pcp = (struct pretok_piece){off, w->buf.n - off, pc.at_start};
	return 0;
}

int pretok_apply(const struct pretok *p, struct pretok_work *w, struct pretok_piece pc, struct pretok_list *out,
		 struct err *e)
{
	if (p->kind == PT_SEQUENCE) { /* only reached through pretok_run: apply in turn */
		struct pretok_list cur = {0}, next = {0};
		list_add(&cur, pc.off, pc.len, pc.at_start);
		for (size_t i = 0; i < p->n_sub; i++) {
			next.n = 0;
			for (size_t k = 0; k < cur.n; k++) {
				int rc = pretok_apply(&p->sub[i], w, cur.v[k], &next, e);
				if (rc) {
					free(cur.v);
					free(next.v);
					return rc;
				}
			}
			struct pretok_list t = cur;
			cur = next, next = t;
		}
		for (size_t k = 0; k < cur.n; k++)
			list_add(out, cur.v[k].off, cur.v[k].len, cur.v[k].at_start);
		bool oom = cur.oom || out->oom;
		free(cur.v);
		free(next.v);
		return oom ? tok_oom(e) : 0;
	}
	if (p->kind == PT_BYTE_LEVEL && p->add_prefix_space && w->buf.p[pc.off] != ' ') {
		size_t off = w->buf.n;
		if (strbuf_reserve(&w->buf, pc.len + 1)) /* the copy reads from buf itself */
			return tok_oom(e);
		strbuf_putc(&w->buf, ' ');
		strbuf_put(&w->buf, w->buf.p + pc.off, pc.len);
		pc.off = off, pc.len++;
	}
	if (p->kind == PT_METASPACE && metaspace_piece(p, w, &pc))
		return tok_oom(e);
	if (!p->has_re || (!p->invert && !tok_regex_may_match(&p->re, w->buf.p + pc.off, pc.len))) {
		list_add(out, pc.off, pc.len, pc.at_start); /* no match: the piece stays whole */
		return out->oom ? tok_oom(e) : 0;
	}
	return split_piece(p, w, pc, out, e);
}

int pretok_run(const struct pretok *p, struct pretok_work *w, struct err *e)
{
	if (!p || !w->pieces.n)
		return 0;
	struct pretok_list out = {0};
	for (size_t i = 0; i < w->pieces.n; i++) {
		int rc = pretok_apply(p, w, w->pieces.v[i], &out, e);
		if (rc) {
			free(out.v);
			return rc;
		}
	}
	free(w->pieces.v);
	w->pieces = out;
	return 0;
}

static int flatten(const struct pretok *p, const struct pretok ***v, size_t *n, size_t *cap)
{
	if (p->kind == PT_SEQUENCE) {
		for (size_t i = 0; i < p->n_sub; i++)
			if (flatten(&p->sub[i], v, n, cap))
				return -1;
		return 0;
	}
	if (p->kind == PT_BYTE_LEVEL && !p->add_prefix_space && !p->has_re)
		return 0; /* changes nothing: the model reads raw bytes */
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 8;
		const struct pretok **nv = realloc(*v, c * sizeof *nv);
		if (!nv)
			return -1;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = p;
	return 0;
}

int pretok_flatten(const struct pretok *p, const struct pretok ***stages, size_t *n)
{
	size_t cap = 0;
	*stages = NULL;
	*n = 0;
	if (flatten(p, stages, n, &cap)) {
		free(*stages);
		*stages = NULL;
		*n = 0;
		return -1;
	}
	return 0;
}

void pretok_work_free(struct pretok_work *w)
{
	strbuf_fini(&w->buf);
	free(w->pieces.v);
	if (w->rx.md)
		tok_regex_ctx_fini(&w->rx);
	memset(w, 0, sizeof *w);
}
