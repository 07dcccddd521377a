/* The byte matcher of guide grammars (guide/matcher.h). */
#include "guide/matcher.h"

#include "guide/cfg.h"
#include "guide/regex_dfa.h"

#include <string.h>

enum { F_ROOT, F_OBJ, F_ARR, F_STR, F_NUM, F_LIT, F_RE, F_CFG };

/* F_ROOT: the top-level value */
enum { R_VALUE, R_DONE };
/* F_OBJ */
enum { O_OPEN, O_COMMA, O_KEY, O_KEYSTR, O_AFTER_KEY, O_VALUE, O_AFTER_VALUE };
/* F_ARR */
enum { A_OPEN, A_ITEM, A_AFTER_VALUE, A_COMMA };
/* F_STR: S_PLAIN, S_ESC, then 4..1 hex digits of a \u escape still to come */
enum { S_PLAIN = 0, S_ESC = 5 };
/* F_NUM */
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static bool is_ws(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }
static bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
static bool num_accepting(uint8_t st) { return st == N_ZERO || st == N_INT || st == N_FRAC || st == N_EXP; }

/* One whitespace byte b in a gap: at most JM_MAX_WS bytes, one line break ("\n" or "\r\n")
 * among them. ws: bits 0-5 the count, bit 6 a line break seen, bit 7 a "\r" just seen. */
static bool take_ws(struct jm_frame *f, uint8_t b)
{
	int count = f->ws & 63, nl = f->ws >> 6 & 1, cr = f->ws >> 7;
	if (count >= JM_MAX_WS || (cr && b != '\n') || ((b == '\n' || b == '\r') && nl))
		return false;
	if (b == '\n')
		nl = 1, cr = 0;
	else if (b == '\r')
		cr = 1;
	f->ws = (uint8_t)((count + 1) | nl << 6 | cr << 7);
	return true;
}

static void stack_copy(struct jm_stack *dst, const struct jm_stack *src)
{
	dst->depth = src->depth;
	memcpy(dst->f, src->f, sizeof *src->f * (size_t)src->depth);
}

void jm_copy(struct jm_state *dst, const struct jm_state *src)
{
	dst->n = src->n;
	dst->cut = src->cut;
	for (int i = 0; i < src->n; i++)
		stack_copy(&dst->s[i], &src->s[i]);
}

/* Can a value of node k start with byte b? (anyOf: any alternative; depth guards a cycle of
 * references that never reaches a value) */
static bool first_ok(const struct guide_grammar *g, int k, uint8_t b, int depth)
{
	const struct guide_node *n = &g->nodes[k];
	switch (n->kind) {
	case GUIDE_OBJECT: return b == '{';
	case GUIDE_ARRAY: return b == '[';
	case GUIDE_STRING: return b == '"';
	case GUIDE_NUMBER:
	case GUIDE_INTEGER: return b == '-' || is_digit(b);
	case GUIDE_LITERAL: return n->len > 0 && (uint8_t)n->text[0] == b;
	case GUIDE_REGEX: return n->dfa->next[b] >= 0;
	case GUIDE_CFG: /* the rules decide */ return true;
	case GUIDE_ANYOF:
		if (depth > 16)
			return false;
		for (int i = 0; i < n->n_alts; i++)
			if (first_ok(g, n->alts[i], b, depth + 1))
				return true;
		return false;
	}
	return false;
}

/* The top frame (a value) has ended: its parent moves past the value. */
static void child_done(struct jm_stack *s)
{
	s->depth--;
	struct jm_frame *p = &s->f[s->depth - 1];
	p->ws = 0;
	switch (p->kind) {
	case F_ROOT: p->st = R_DONE; break;
	case F_OBJ: p->st = p->st == O_KEYSTR ? O_AFTER_KEY : O_AFTER_VALUE; break;
	case F_ARR:
		p->st = A_AFTER_VALUE;
		p->n++;
		break;
	}
}

static struct jm_frame *push(struct jm_stack *s, int node, uint8_t kind, uint8_t st)
{
	if (s->depth >= JM_MAX_DEPTH)
		return NULL;
	struct jm_frame *f = &s->f[s->depth++];
	memset(f, 0, sizeof *f);
	f->node = node;
	f->kind = kind;
	f->st = st;
	return f;
}

struct outs {
	struct jm_stack *v;
	int n, cap;
	bool cut; /* a parse was given up (jm_state.cut) */
};

static bool same_stack(const struct jm_stack *a, const struct jm_stack *b)
{
	return a->depth == b->depth && !memcmp(a->f, b->f, sizeof *a->f * (size_t)a->depth);
}

/* Keeps s unless it is already there: an ambiguous grammar reaches one stack by several
 * parses, and the copies must not take the places of other stacks (the frames are fully
 * written, so equal stacks compare equal). */
static void emit(struct outs *o, const struct jm_stack *s)
{
	for (int i = 0; i < o->n; i++)
		if (same_stack(&o->v[i], s))
			return;
	if (o->n < o->cap)
		stack_copy(&o->v[o->n++], s);
	else
		o->cut = true;
}

/* ---- context-free grammars (guide/cfg.h) ----
 * An F_CFG frame is a position in one sequence of the grammar: cand = the sequence, n = the
 * element, pos = how far into that element's terminal (its DFA state, or bytes of a string).
 * Frames below the top wait at a rule reference for the rule to end. */

#define CFG_SETTLE_BUDGET 512 /* reference expansions per byte and stack */

/* The top sequence has ended: pop it, its parent moves past the reference. */
static void cfg_pop(struct jm_stack *t)
{
	t->depth--;
	struct jm_frame *p = &t->f[t->depth - 1];
	if (p->kind == F_ROOT) {
		p->st = R_DONE;
	} else {
		p->n++;
		p->pos = 0;
	}
}

/* Expands rule references at the top of t until each resulting stack waits at a terminal or
 * has finished the root rule; emits those. A reference that ends its sequence replaces it
 * (the rule's end is the sequence's end), so right recursion (x* as R ::= x R | "") does not
 * deepen the stack. */
static void cfg_settle(const struct guide_cfg *c, struct jm_stack *t, struct outs *o, int *budget)
{
	for (;;) {
		struct jm_frame *f = &t->f[t->depth - 1];
		if (f->kind != F_CFG) {
			emit(o, t);
			return;
		}
		const struct cfg_seq *q = &c->seqs[f->cand];
		if ((int)f->n == q->len) {
			cfg_pop(t);
			continue;
		}
		const struct cfg_elem *el = &c->elems[q->start + (int)f->n];
		if (el->kind == CFG_TERM) {
			emit(o, t);
			return;
		}
		const struct cfg_rule *r = &c->rules[el->id];
		bool tail = (int)f->n + 1 == q->len;
		for (int a = 0; a < r->n_alts; a++) {
			if (--*budget < 0 || o->n == o->cap) {
				o->cut = true;
				return;
			}
			struct jm_stack u;
			stack_copy(&u, t);
			if (tail)
				u.depth--;
			struct jm_frame *nf = push(&u, f->node, F_CFG, 0);
			if (!nf) { /* nested too deep: this parse is given up */
				o->cut = true;
				continue;
			}
			nf->cand = (uint64_t)c->alt_seq[r->first + a];
			cfg_settle(c, &u, o, budget);
		}
		return;
	}
}

/* Byte b on a stack whose top waits at a terminal. */
static void cfg_feed(const struct guide_cfg *c, const struct jm_stack *in, uint8_t b, struct outs *o)
{
	struct jm_stack t;
	stack_copy(&t, in);
	struct jm_frame *f = &t.f[t.depth - 1];
	const struct cfg_term *term = &c->terms[c->elems[c->seqs[f->cand].start + (int)f->n].id];
	bool more, end;
	if (term->lit) {
		if ((uint8_t)term->lit[f->pos] != b)
			return;
		more = f->pos + 1 < term->len;
		end = !more;
		f->pos++;
	} else {
		int32_t nx = term->dfa->next[(size_t)f->pos * 256 + b];
		if (nx < 0)
			return;
		more = term->dfa->live[nx];
		end = term->dfa->accept[nx];
		f->pos = (uint32_t)nx;
	}
	if (more)
		emit(o, &t);
	if (end) {
		f->n++;
		f->pos = 0;
		int budget = CFG_SETTLE_BUDGET;
		cfg_settle(c, &t, o, &budget);
	}
}

/* The first byte of the output: the root rule's alternatives, settled, each fed b. */
static void cfg_start(const struct guide_grammar *g, const struct jm_stack *s, int k, uint8_t b, struct outs *o)
{
	const struct guide_cfg *c = g->nodes[k].cfg;
	struct jm_stack starts[JM_MAX_ALTS];
	struct outs so = {starts, 0, JM_MAX_ALTS, false};
	struct jm_stack t;
	stack_copy(&t, s);
	struct jm_frame *f = push(&t, k, F_CFG, 0);
	if (!f)
		return;
	const struct cfg_rule *r = &c->rules[c->root];
	int budget = CFG_SETTLE_BUDGET;
	for (int a = 0; a < r->n_alts && !so.cut; a++) {
		t.f[t.depth - 1].cand = (uint64_t)c->alt_seq[r->first + a];
		t.f[t.depth - 1].n = 0;
		struct jm_stack u;
		stack_copy(&u, &t);
		cfg_settle(c, &u, &so, &budget);
	}
	for (int i = 0; i < so.n; i++)
		if (starts[i].f[starts[i].depth - 1].kind == F_CFG)
			cfg_feed(c, &starts[i], b, o);
	o->cut |= so.cut;
}

/* uniqueItems: may the enum item at the top of t still become a value its array has not had
 * (the array frame's cand holds the used ones)? */
static bool unique_ok(const struct guide_grammar *g, const struct jm_stack *t)
{
	const struct jm_frame *f = &t->f[t->depth - 1], *p = &t->f[t->depth - 2];
	if (t->depth < 3 || p->kind != F_ARR || !g->nodes[p->node].unique)
		return true;
	return (g->nodes[f->node].reach[f->n] & ~p->cand) != 0;
}

/* A value of node k starts with byte b on stack s (its parent already waits for it): one
 * output stack per alternative that takes b. */
static void start_value(const struct guide_grammar *g, const struct jm_stack *s, int k, uint8_t b, struct outs *o,
			int depth)
{
	const struct guide_node *n = &g->nodes[k];
	if (!first_ok(g, k, b, depth))
		return;
	if (n->kind == GUIDE_ANYOF) {
		for (int i = 0; i < n->n_alts; i++)
			start_value(g, s, n->alts[i], b, o, depth + 1);
		return;
	}
	struct jm_stack t;
	stack_copy(&t, s);
	struct jm_frame *f;
	switch (n->kind) {
	case GUIDE_OBJECT:
		if (!push(&t, k, F_OBJ, O_OPEN))
			return;
		break;
	case GUIDE_ARRAY:
		if (!(f = push(&t, k, F_ARR, A_OPEN)))
			return;
		break;
	case GUIDE_STRING:
		if (!push(&t, k, F_STR, S_PLAIN))
			return;
		break;
	case GUIDE_NUMBER:
	case GUIDE_INTEGER:
		if (!(f = push(&t, k, F_NUM, b == '-' ? N_MINUS : b == '0' ? N_ZERO : N_INT)))
			return;
		f->n = 1;
		break;
	case GUIDE_REGEX: /* raw text: never ends on a byte, only with the output */
		if (!(f = push(&t, k, F_RE, 0)))
			return;
		f->n = (uint32_t)n->dfa->next[b];
		if (!unique_ok(g, &t))
			return;
		break;
	case GUIDE_CFG: cfg_start(g, &t, k, b, o); return;
	case GUIDE_LITERAL:
		if (!(f = push(&t, k, F_LIT, 0)))
			return;
		f->n = 1;
		if (n->len == 1)
			child_done(&t);
		break;
	default: return;
	}
	emit(o, &t);
}

/* keys i >= from that may come next: every one up to and including the first required */
static uint64_t next_keys(const struct guide_node *n, int from)
{
	uint64_t c = 0;
	for (int i = from; i < n->n_props; i++) {
		c |= (uint64_t)1 << i;
		if (n->required >> i & 1)
			break;
	}
	return c;
}

static bool obj_closable(const struct guide_node *n, const struct jm_frame *f)
{
	return n->n_props == 0 || f->n >= 64 || (n->required >> f->n) == 0;
}

/* Byte b on one stack: the stacks it leads to go to o. */
static void feed_stack(const struct guide_grammar *g, const struct jm_stack *in, uint8_t b, struct outs *o)
{
	struct jm_stack t;
	stack_copy(&t, in);
	for (;;) {
		struct jm_frame *f = &t.f[t.depth - 1];
		const struct guide_node *n = &g->nodes[f->node];
		switch (f->kind) {
		case F_ROOT:
			if (f->st == R_VALUE)
				start_value(g, &t, f->node, b, o, 0);
			return;
		case F_CFG: cfg_feed(n->cfg, &t, b, o); return;
		case F_LIT:
			if ((uint8_t)n->text[f->n] != b)
				return;
			if (++f->n == n->len)
				child_done(&t);
			emit(o, &t);
			return;
		case F_RE: {
			int32_t nx = n->dfa->next[(size_t)f->n * 256 + b];
			if (nx >= 0) { /* greedy, as numbers: a value goes on while it can */
				f->n = (uint32_t)nx;
				if (unique_ok(g, &t))
					emit(o, &t);
				return;
			}
			/* raw text at the top ends with the output; a JSON value (an integer range)
			 * ends before a byte it cannot take, which goes to its container */
			if (t.depth == 2 || !n->dfa->accept[f->n])
				return;
			struct jm_frame *p = &t.f[t.depth - 2];
			if (p->kind == F_ARR && g->nodes[p->node].unique) { /* "1" may end where "12" goes on */
				uint64_t bit = (uint64_t)1 << n->lit[f->n];
				if (p->cand & bit)
					return;
				p->cand |= bit;
			}
			child_done(&t);
			continue;
		}
		case F_STR:
			if (n->dfa && b != '"') { /* a pattern: every content byte through its DFA, no escapes */
				int32_t nx = b == '\\' ? -1 : n->dfa->next[(size_t)f->pos * 256 + b];
				if (nx < 0)
					return;
				f->pos = (uint32_t)nx;
			}
			if (f->need) {
				if (b < f->lo || b > f->hi)
					return;
				f->need--;
				f->lo = 0x80;
				f->hi = 0xBF;
			} else if (f->st == S_ESC) {
				if (b == 'u')
					f->st = 4;
				else if (strchr("\"\\/bfnrt", b) && b)
					f->st = S_PLAIN;
				else
					return;
			} else if (f->st != S_PLAIN) { /* \u hex digits */
				if (!(is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F')))
					return;
				f->st = f->st == 1 ? S_PLAIN : f->st - 1;
			} else if (b == '"') {
				if ((int)f->n < n->min_len || (n->dfa && !n->dfa->accept[f->pos]))
					return;
				child_done(&t);
			} else {
				if (b < 0x20 || (n->max_len >= 0 && (int)f->n >= n->max_len))
					return;
				/* a new character: its UTF-8 lead byte fixes what follows */
				if (b == '\\')
					f->st = S_ESC;
				else if (b >= 0x80) {
					if (b >= 0xC2 && b <= 0xDF)
						f->need = 1, f->lo = 0x80, f->hi = 0xBF;
					else if (b == 0xE0)
						f->need = 2, f->lo = 0xA0, f->hi = 0xBF;
					else if (b == 0xED)
						f->need = 2, f->lo = 0x80, f->hi = 0x9F;
					else if (b >= 0xE1 && b <= 0xEF)
						f->need = 2, f->lo = 0x80, f->hi = 0xBF;
					else if (b == 0xF0)
						f->need = 3, f->lo = 0x90, f->hi = 0xBF;
					else if (b >= 0xF1 && b <= 0xF3)
						f->need = 3, f->lo = 0x80, f->hi = 0xBF;
					else if (b == 0xF4)
						f->need = 3, f->lo = 0x80, f->hi = 0x8F;
					else
						return;
				}
				f->n++;
			}
			emit(o, &t);
			return;
		case F_NUM: {
			bool integer = n->kind == GUIDE_INTEGER, d = is_digit(b);
			int st = -1;
			switch (f->st) {
			case N_MINUS: st = b == '0' ? N_ZERO : d ? N_INT : -1; break;
			case N_ZERO:
			case N_INT:
			case N_FRAC:
				if (d && f->st != N_ZERO)
					st = f->st;
				else if (b == '.' && f->st != N_FRAC && !integer)
					st = N_DOT;
				else if ((b == 'e' || b == 'E') && !integer)
					st = N_E;
				break;
			case N_DOT: st = d ? N_FRAC : -1; break;
			case N_E: st = b == '+' || b == '-' ? N_ESIGN : d ? N_EXP : -1; break;
			case N_ESIGN:
			case N_EXP: st = d ? N_EXP : -1; break;
			}
			if (st >= 0) {
				if (f->n >= JM_MAX_NUM)
					return;
				f->st = (uint8_t)st;
				f->n++;
				emit(o, &t);
				return;
			}
			if (!num_accepting(f->st))
				return;
			child_done(&t); /* the number ended before b: b goes to the parent */
			continue;
		}
		case F_ARR:
			if (is_ws(b) && f->st != A_ITEM) {
				if (take_ws(f, b))
					emit(o, &t);
				return;
			}
			if (f->st == A_AFTER_VALUE) {
				if (b == ',' && (n->max_items < 0 || (int)f->n < n->max_items)) {
					f->st = A_COMMA;
					f->ws = 0;
					emit(o, &t);
				} else if (b == ']' && (int)f->n >= n->min_items) {
					child_done(&t);
					emit(o, &t);
				}
				return;
			}
			if (f->st == A_OPEN && b == ']') {
				if (n->min_items == 0) {
					child_done(&t);
					emit(o, &t);
				}
				return;
			}
			if (f->st == A_OPEN && n->max_items == 0)
				return;
			f->st = A_ITEM;
			start_value(g, &t, (int)f->n < n->n_prefix ? n->prefix[f->n] : n->items, b, o, 0);
			return;
		case F_OBJ:
			if (is_ws(b) && (f->st == O_OPEN || f->st == O_COMMA || f->st == O_AFTER_KEY ||
					 f->st == O_VALUE || f->st == O_AFTER_VALUE)) {
				if (take_ws(f, b))
					emit(o, &t);
				return;
			}
			switch (f->st) {
			case O_OPEN:
			case O_COMMA:
				if (b == '}' && f->st == O_OPEN) {
					if (obj_closable(n, f)) {
						child_done(&t);
						emit(o, &t);
					}
					return;
				}
				if (b != '"')
					return;
				if (n->n_props == 0) { /* any key */
					if (n->additional < 0)
						return;
					f->st = O_KEYSTR;
					if (push(&t, GUIDE_NODE_ANY_STRING, F_STR, S_PLAIN))
						emit(o, &t);
					return;
				}
				f->cand = next_keys(n, (int)f->n);
				if (!f->cand)
					return;
				f->st = O_KEY;
				f->pos = 1;
				emit(o, &t);
				return;
			case O_KEY: {
				uint64_t c = 0;
				int done = -1;
				for (uint64_t m = f->cand; m; m &= m - 1) {
					int i = __builtin_ctzll(m);
					if (f->pos < n->key_len[i] && (uint8_t)n->keys[i][f->pos] == b) {
						c |= (uint64_t)1 << i;
						if (f->pos + 1 == n->key_len[i])
							done = i;
					}
				}
				if (!c)
					return;
				f->cand = c;
				f->pos++;
				if (done >= 0) { /* keys end with a quote: no key is a prefix of another */
					f->key = (uint16_t)done;
					f->n = (uint32_t)done + 1;
					f->st = O_AFTER_KEY;
					f->ws = 0;
				}
				emit(o, &t);
				return;
			}
			case O_AFTER_KEY:
				if (b == ':') {
					f->st = O_VALUE;
					f->ws = 0;
					emit(o, &t);
				}
				return;
			case O_VALUE:
				start_value(g, &t, n->n_props ? n->prop[f->key] : n->additional, b, o, 0);
				return;
			case O_AFTER_VALUE:
				if (b == ',') {
					if (n->n_props ? (int)f->n < n->n_props : n->additional >= 0) {
						f->st = O_COMMA;
						f->ws = 0;
						emit(o, &t);
					}
				} else if (b == '}' && obj_closable(n, f)) {
					child_done(&t);
					emit(o, &t);
				}
				return;
			}
			return;
		}
		return;
	}
}

void jm_init(struct jm_state *s, const struct guide_grammar *g)
{
	s->n = 1;
	s->cut = false;
	s->s[0].depth = 0;
	push(&s->s[0], g->root, F_ROOT, R_VALUE);
}

bool jm_feed(struct jm_state *s, const struct guide_grammar *g, uint8_t b)
{
	struct jm_stack out[JM_MAX_ALTS];
	struct outs o = {out, 0, JM_MAX_ALTS, false};
	for (int i = 0; i < s->n; i++)
		feed_stack(g, &s->s[i], b, &o);
	s->cut |= o.cut;
	if (!o.n)
		return false;
	for (int i = 0; i < o.n; i++) /* distinct already (emit) */
		stack_copy(&s->s[i], &out[i]);
	s->n = o.n;
	return true;
}

bool jm_feed_bytes(struct jm_state *s, const struct guide_grammar *g, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!jm_feed(s, g, p[i]))
			return false;
	return true;
}

/* a whole value: the root's is done, or a top-level number or regex text may end here */
/* Nothing written yet and the grammar is raw text at the top that may be empty (guided_regex
 * "a?" or "", an empty guided_choice, a grammar whose root may derive nothing): the output may
 * end here. */
static bool root_empty_match(const struct guide_grammar *g, const struct jm_stack *s)
{
	const struct guide_node *n = &g->nodes[s->f[0].node];
	return s->depth == 1 && s->f[0].st == R_VALUE &&
	       ((n->kind == GUIDE_REGEX && n->dfa->accept[0]) || (n->kind == GUIDE_CFG && n->cfg->root_nullable));
}

/* ... and nothing else may come either */
static bool root_empty_only(const struct guide_grammar *g, const struct jm_stack *s)
{
	const struct guide_node *n = &g->nodes[s->f[0].node];
	return root_empty_match(g, s) && (n->kind == GUIDE_REGEX ? !n->dfa->live[0] : !n->cfg->root_nonempty);
}

static bool stack_complete(const struct guide_grammar *g, const struct jm_stack *s)
{
	if (s->depth == 1)
		return s->f[0].st == R_DONE || root_empty_match(g, s);
	const struct jm_frame *f = &s->f[1];
	return s->depth == 2 && ((f->kind == F_NUM && num_accepting(f->st)) ||
				 (f->kind == F_RE && g->nodes[f->node].dfa->accept[f->n]));
}

bool jm_complete(const struct jm_state *s, const struct guide_grammar *g)
{
	for (int i = 0; i < s->n; i++)
		if (stack_complete(g, &s->s[i]))
			return true;
	return false;
}

bool jm_finished(const struct jm_state *s, const struct guide_grammar *g)
{
	for (int i = 0; i < s->n; i++) {
		const struct jm_stack *k = &s->s[i];
		bool regex_end = k->depth == 2 && k->f[1].kind == F_RE &&
				 g->nodes[k->f[1].node].dfa->accept[k->f[1].n] &&
				 !g->nodes[k->f[1].node].dfa->live[k->f[1].n];
		bool empty_end = root_empty_only(g, k);
		if (!(k->depth == 1 && k->f[0].st == R_DONE) && !regex_end && !empty_end)
			return false;
	}
	return s->n > 0;
}
