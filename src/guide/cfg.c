/* GBNF / xgrammar EBNF grammars compiled for the matcher (guide/cfg.h). */
#include "guide/cfg.h"

#include <stdio.h>
#include <string.h>

#include "base/grow.h"
#include "guide/cfg_build.h"
#include "guide/cfg_unleft.h"


static int line_of(const struct builder *b, const char *at)
{
	int line = 1;
	for (const char *q = b->start; q < at && q < b->end; q++)
		line += *q == '\n';
	return line;
}

int cfgb_fail_at(struct builder *b, const char *at, const char *fmt, const char *what)
{
	if (!b->failed)
		err_set(b->e, "grammar line %d: %s%s", line_of(b, at), fmt, what ? what : "");
	b->failed = true;
	return -1;
}

int cfgb_oom(struct builder *b) { return cfgb_fail_at(b, b->p, "out of memory", NULL); }

static int list_add(struct intlist *l, int32_t v)
{
	int32_t *n = grow_array(l->v, &l->cap, l->n + 1, sizeof *n);
	if (!n)
		return -1;
	l->v = n;
	l->v[l->n++] = v;
	return 0;
}

int cfgb_seq_add(struct builder *b, struct seqbuf *s, uint8_t kind, int32_t id)
{
	if (b->c->n_elems + s->n >= CFG_MAX_ELEMS)
		return cfgb_fail_at(b, b->p,
				    "the grammar is too large (more than 65536 elements once repetitions are "
				    "expanded)",
				    NULL);
	struct cfg_elem *n = grow_array(s->v, &s->cap, s->n + 1, sizeof *n);
	if (!n)
		return cfgb_oom(b);
	s->v = n;
	s->v[s->n].kind = kind;
	s->v[s->n++].id = id;
	return 0;
}

static uint32_t name_hash(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 16777619u;
	return h;
}

int cfgb_new_rule(struct builder *b, const char *name, size_t len)
{
	struct guide_cfg *c = b->c;
	if (c->n_rules == b->cap_rules) {
		int cap = b->cap_rules ? 2 * b->cap_rules : 64;
		struct cfg_rule *r = realloc(c->rules, sizeof *r * (size_t)cap);
		if (r)
			c->rules = r;
		char **nm = r ? realloc(c->names, sizeof *nm * (size_t)cap) : NULL;
		if (nm)
			c->names = nm;
		struct intlist *al = nm ? realloc(b->alts, sizeof *al * (size_t)cap) : NULL;
		if (al)
			b->alts = al;
		const char **d = al ? realloc(b->defined_at, sizeof *d * (size_t)cap) : NULL;
		if (d)
			b->defined_at = d;
		const char **u = d ? realloc(b->used_at, sizeof *u * (size_t)cap) : NULL;
		if (!u)
			return cfgb_oom(b);
		b->used_at = u;
		b->cap_rules = cap;
	}
	int k = c->n_rules;
	memset(&c->rules[k], 0, sizeof c->rules[k]);
	memset(&b->alts[k], 0, sizeof b->alts[k]);
	b->defined_at[k] = b->used_at[k] = NULL;
	c->names[k] = NULL;
	c->n_rules++;
	if (name && !(c->names[k] = strndup(name, len)))
		return cfgb_oom(b);
	return k;
}

int cfgb_rule_by_name(struct builder *b, const char *name, size_t len)
{
	uint32_t i = name_hash(name, len) & (HASH_CAP - 1);
	for (;; i = (i + 1) & (HASH_CAP - 1)) {
		int r = b->hash[i] - 1;
		if (r < 0)
			break;
		if (strlen(b->c->names[r]) == len && !memcmp(b->c->names[r], name, len))
			return r;
	}
	if (b->n_named >= CFG_MAX_RULES)
		return cfgb_fail_at(b, name, "more than 4096 named rules", NULL);
	int r = cfgb_new_rule(b, name, len);
	if (r < 0)
		return -1;
	b->hash[i] = r + 1;
	b->n_named++;
	return r;
}

/* the sequence as one of rule r's alternatives */
int cfgb_add_alt(struct builder *b, int r, struct seqbuf *s)
{
	struct guide_cfg *c = b->c;
	struct cfg_seq *q = grow_array(c->seqs, &b->cap_seqs, c->n_seqs + 1, sizeof *q);
	if (!q)
		return cfgb_oom(b);
	c->seqs = q;
	struct cfg_elem *el = grow_array(c->elems, &b->cap_elems, c->n_elems + s->n + 1, sizeof *el);
	if (!el)
		return cfgb_oom(b);
	c->elems = el;
	if (s->n)
		memcpy(c->elems + c->n_elems, s->v, sizeof *s->v * (size_t)s->n);
	c->seqs[c->n_seqs].start = c->n_elems;
	c->seqs[c->n_seqs].len = s->n;
	c->n_elems += s->n;
	if (list_add(&b->alts[r], c->n_seqs) < 0)
		return cfgb_oom(b);
	c->n_seqs++;
	return 0;
}

/* ---- terminals: code points → our regex syntax → a byte DFA ---- */

static int term_slot(struct builder *b)
{
	struct guide_cfg *c = b->c;
	if (c->n_terms == b->cap_terms) {
		int cap = b->cap_terms ? 2 * b->cap_terms : 64;
		struct cfg_term *t = realloc(c->terms, sizeof *t * (size_t)cap);
		if (t)
			c->terms = t;
		char **cr = t ? realloc(b->class_re, sizeof *cr * (size_t)cap) : NULL;
		if (!cr)
			return cfgb_oom(b);
		b->class_re = cr;
		b->cap_terms = cap;
	}
	memset(&c->terms[c->n_terms], 0, sizeof c->terms[c->n_terms]);
	b->class_re[c->n_terms] = NULL;
	return c->n_terms++;
}

/* one character of a class (regex text re): a terminal, the same one for the same text */
int cfgb_add_class(struct builder *b, const char *re, size_t len, const char *at)
{
	struct guide_cfg *c = b->c;
	uint32_t h = name_hash(re, len) & (CLASS_HASH_CAP - 1);
	for (;; h = (h + 1) & (CLASS_HASH_CAP - 1)) {
		int i = b->class_hash[h] - 1;
		if (i < 0)
			break;
		if (strlen(b->class_re[i]) == len && !memcmp(b->class_re[i], re, len))
			return i;
	}
	struct guide_dfa *d;
	struct err e2;
	if (guide_dfa_compile(re, len, &d, &e2) < 0)
		return cfgb_fail_at(b, at, "", e2.msg);
	if ((b->class_states += d->n_states) > CFG_MAX_CLASS_STATES) {
		guide_dfa_free(d);
		return cfgb_fail_at(b, at, "the grammar's character classes are too large", NULL);
	}
	int t = term_slot(b);
	if (t < 0 || !(b->class_re[t] = strndup(re, len))) {
		guide_dfa_free(d);
		return t < 0 ? -1 : cfgb_oom(b);
	}
	c->terms[t].dfa = d;
	b->class_hash[h] = t + 1;
	return t;
}

/* a string's bytes (len > 0; taken over): a terminal */
int cfgb_add_lit(struct builder *b, char *lit, size_t len)
{
	int t = term_slot(b);
	if (t < 0) {
		free(lit);
		return -1;
	}
	b->c->terms[t].lit = lit;
	b->c->terms[t].len = len;
	return t;
}


/* ---- checks ---- */

static bool seq_nullable(const struct guide_cfg *c, const uint8_t *nullable, int q)
{
	for (int k = 0; k < c->seqs[q].len; k++) {
		const struct cfg_elem *el = &c->elems[c->seqs[q].start + k];
		if (el->kind == CFG_TERM || !nullable[el->id])
			return false;
	}
	return true;
}

/* left recursion: rule r reaches itself without consuming a byte. color: 0 new, 1 on the
 * path, 2 done. */
static int left_dfs(struct builder *b, const uint8_t *nullable, uint8_t *color, int r, int depth)
{
	const struct guide_cfg *c = b->c;
	if (color[r] == 2)
		return 0;
	if (depth > 1000)
		return cfgb_fail_at(b, b->start, "rules that may match nothing nested more than 1000 deep", NULL);
	if (color[r] == 1) {
		const char *at = b->defined_at[r] ? b->defined_at[r] : b->start;
		return cfgb_fail_at(b, at, LEFT_HIDDEN, c->names[r] ? c->names[r] : "( ... )");
	}
	color[r] = 1;
	for (int a = 0; a < c->rules[r].n_alts; a++) {
		const struct cfg_seq *q = &c->seqs[c->alt_seq[c->rules[r].first + a]];
		for (int k = 0; k < q->len; k++) {
			const struct cfg_elem *el = &c->elems[q->start + k];
			if (el->kind == CFG_TERM)
				break;
			if (left_dfs(b, nullable, color, el->id, depth + 1) < 0)
				return -1;
			if (!nullable[el->id])
				break;
		}
	}
	color[r] = 2;
	return 0;
}

static int finish(struct builder *b)
{
	struct guide_cfg *c = b->c;
	int root = -1;
	for (int i = 0; i < c->n_rules; i++) {
		if (c->names[i] && !b->defined_at[i])
			return cfgb_fail_at(b, b->used_at[i] ? b->used_at[i] : b->start, "undefined rule ",
					    c->names[i]);
		if (c->names[i] && !strcmp(c->names[i], "root"))
			root = i;
	}
	if (root < 0)
		return cfgb_fail_at(b, b->start, "no rule \"root\" (the output is what root derives)", NULL);
	c->root = root;
	/* the alternatives, flat */
	int total = 0;
	for (int i = 0; i < c->n_rules; i++)
		total += b->alts[i].n;
	if (!(c->alt_seq = malloc(sizeof *c->alt_seq * (size_t)(total + 1))))
		return cfgb_oom(b);
	for (int i = 0, at = 0; i < c->n_rules; i++) {
		c->rules[i].first = at;
		c->rules[i].n_alts = b->alts[i].n;
		if (b->alts[i].n)
			memcpy(c->alt_seq + at, b->alts[i].v, sizeof *c->alt_seq * (size_t)b->alts[i].n);
		at += b->alts[i].n;
	}
	c->n_alt = total;
	b->n_parsed = c->n_rules;
	int32_t *origin = NULL;
	int bad = -1, u = cfg_unleft(c, &origin, &bad);
	if (u != 0 && u != CFG_UNLEFT_OOM) {
		const char *why = u == CFG_UNLEFT_HIDDEN ? LEFT_HIDDEN
				  : u == CFG_UNLEFT_CYCLE
					  ? "left recursion whose other parts may all match nothing (a "
					    "rule that derives itself), "
					    "through rule "
				  : u == CFG_UNLEFT_NO_END
					  ? "no output is whole: every alternative of the rule needs a rule "
					    "that never ends, rule "
					  : "the grammar is too large (more than 65536 elements) once the "
					    "left recursion is rewritten, through rule ";
		return cfgb_fail_at(b, b->defined_at[bad] ? b->defined_at[bad] : b->start, why,
				    c->names[bad] ? c->names[bad] : "( ... )");
	}
	const char **d = u ? NULL : realloc(b->defined_at, sizeof *d * (size_t)c->n_rules);
	if (!d) {
		free(origin);
		return cfgb_oom(b);
	}
	b->defined_at = d;
	for (int i = b->n_parsed; i < c->n_rules; i++)
		d[i] = d[origin[i]];
	free(origin);
	/* nullable and non-empty rules, to a fixed point */
	uint8_t *nullable = calloc((size_t)c->n_rules, 1), *nonempty = calloc((size_t)c->n_rules, 1);
	uint8_t *color = calloc((size_t)c->n_rules, 1);
	int rc = -1;
	if (!nullable || !nonempty || !color) {
		cfgb_oom(b);
		goto out;
	}
	for (bool changed = true; changed;) {
		changed = false;
		for (int i = 0; i < c->n_rules; i++)
			for (int a = 0; a < c->rules[i].n_alts; a++) {
				int q = c->alt_seq[c->rules[i].first + a];
				if (!nullable[i] && seq_nullable(c, nullable, q))
					nullable[i] = 1, changed = true;
				for (int k = 0; k < c->seqs[q].len && !nonempty[i]; k++) {
					const struct cfg_elem *el = &c->elems[c->seqs[q].start + k];
					if (el->kind == CFG_TERM || nonempty[el->id])
						nonempty[i] = 1, changed = true;
				}
			}
	}
	for (int i = 0; i < c->n_rules; i++)
		if (!color[i] && left_dfs(b, nullable, color, i, 0) < 0)
			goto out;
	c->root_nullable = nullable[root];
	c->root_nonempty = nonempty[root];
	rc = 0;
out:
	free(nullable);
	free(nonempty);
	free(color);
	return rc;
}

int cfg_compile(const char *src, size_t len, struct guide_cfg **out, struct err *e)
{
	return cfg_compile_ex(src, len, 0, out, e);
}

int cfg_compile_ex(const char *src, size_t len, unsigned flags, struct guide_cfg **out, struct err *e)
{
	*out = NULL;
	if (len > CFG_MAX_SOURCE)
		return err_set(e, "grammar: longer than %d bytes", CFG_MAX_SOURCE);
	struct builder b = {.p = src, .end = src + len, .start = src, .e = e, .regex_terms = flags & CFG_REGEX_TERMS};
	b.c = calloc(1, sizeof *b.c);
	b.hash = calloc(HASH_CAP, sizeof *b.hash);
	b.class_hash = calloc(CLASS_HASH_CAP, sizeof *b.class_hash);
	if (!b.c || !b.hash || !b.class_hash) {
		free(b.class_hash);
		free(b.c);
		free(b.hash);
		return err_set(e, "grammar: out of memory");
	}
	cfg_parse_rules(&b);
	if (!b.failed)
		finish(&b);
	for (int i = 0; i < (b.n_parsed ? b.n_parsed : b.c->n_rules); i++)
		free(b.alts[i].v);
	free(b.alts);
	free(b.defined_at);
	free(b.used_at);
	free(b.hash);
	free(b.class_hash);
	for (int i = 0; i < b.c->n_terms; i++)
		free(b.class_re[i]);
	free(b.class_re);
	if (b.failed) {
		cfg_free(b.c);
		return -1;
	}
	*out = b.c;
	return 0;
}

void cfg_free(struct guide_cfg *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n_terms; i++) {
		guide_dfa_free(c->terms[i].dfa);
		free(c->terms[i].lit);
	}
	for (int i = 0; i < c->n_rules; i++)
		free(c->names[i]);
	free(c->terms);
	free(c->names);
	free(c->rules);
	free(c->seqs);
	free(c->elems);
	free(c->alt_seq);
	free(c);
}
