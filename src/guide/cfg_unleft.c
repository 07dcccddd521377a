/* Left recursion rewritten as right recursion (guide/cfg_unleft.h), in four steps:
 * 1. alternatives that can never end are dropped;
 * 2. left recursion the rewrite cannot take is refused (behind, or beside, parts that may
 *    match nothing);
 * 3. rules that are whole alternatives of each other in a cycle are merged into one;
 * 4. Paull's algorithm over each strongly connected group of rules that start alternatives
 *    of each other: earlier rules substituted into later ones' first elements, then each
 *    rule's direct left recursion turned into a repetition rule.
 * Rewritten at compile time rather than parsed by an Earley parser, so that the matcher's
 * stacks stay small fixed frames. */
#include "guide/cfg_unleft.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

struct list {
	int32_t *v;
	int n, cap;
};

struct work {
	struct guide_cfg *c;
	struct list *alts; /* [n_rules] each rule's alternatives (sequence indices) */
	int32_t *origin;   /* [n_rules] */
	int cap_rules, cap_seqs, cap_elems;
	int bad_rule;
};

static int push(struct list *l, int32_t v)
{
	int32_t *n = grow_array(l->v, &l->cap, l->n + 1, sizeof *n);
	if (!n)
		return CFG_UNLEFT_OOM;
	l->v = n;
	l->v[l->n++] = v;
	return 0;
}

/* The rule a sequence starts with, or -1 (a terminal, or empty) */
static int first_rule(const struct guide_cfg *c, int q)
{
	const struct cfg_seq *s = &c->seqs[q];
	return s->len && c->elems[s->start].kind == CFG_REF ? c->elems[s->start].id : -1;
}

/* A new sequence: a's elements from a_from on, then b's from b_from on, then (ref >= 0) a
 * reference to rule ref. Returns its index, or a negative CFG_UNLEFT_* code. */
static int concat(struct work *w, int a, int a_from, int b, int b_from, int ref, int r)
{
	struct guide_cfg *c = w->c;
	int la = a >= 0 ? c->seqs[a].len - a_from : 0, lb = b >= 0 ? c->seqs[b].len - b_from : 0;
	int n = la + lb + (ref >= 0);
	if (c->n_elems + n >= CFG_MAX_ELEMS || c->n_seqs + 1 >= CFG_MAX_ELEMS) {
		w->bad_rule = w->origin[r];
		return CFG_UNLEFT_TOO_LARGE;
	}
	struct cfg_elem *el = grow_array(c->elems, &w->cap_elems, c->n_elems + n + 1, sizeof *el);
	if (!el)
		return CFG_UNLEFT_OOM;
	c->elems = el;
	struct cfg_seq *sq = grow_array(c->seqs, &w->cap_seqs, c->n_seqs + 1, sizeof *sq);
	if (!sq)
		return CFG_UNLEFT_OOM;
	c->seqs = sq;
	int at = c->n_elems;
	if (la)
		memcpy(el + at, el + c->seqs[a].start + a_from, sizeof *el * (size_t)la);
	if (lb)
		memcpy(el + at + la, el + c->seqs[b].start + b_from, sizeof *el * (size_t)lb);
	if (ref >= 0)
		el[at + la + lb] = (struct cfg_elem){.kind = CFG_REF, .id = ref};
	c->n_elems += n;
	sq[c->n_seqs] = (struct cfg_seq){.start = at, .len = n};
	return c->n_seqs++;
}

/* An anonymous rule (named as r, for messages) */
static int new_rule(struct work *w, int r)
{
	struct guide_cfg *c = w->c;
	int k = c->n_rules;
	if (k + 1 >= CFG_MAX_ELEMS) {
		w->bad_rule = w->origin[r];
		return CFG_UNLEFT_TOO_LARGE;
	}
	if (k == w->cap_rules) {
		int cap = 2 * w->cap_rules;
		struct list *al = realloc(w->alts, sizeof *al * (size_t)cap);
		if (al)
			w->alts = al;
		int32_t *o = al ? realloc(w->origin, sizeof *o * (size_t)cap) : NULL;
		if (o)
			w->origin = o;
		char **nm = o ? realloc(c->names, sizeof *nm * (size_t)cap) : NULL;
		if (nm)
			c->names = nm;
		struct cfg_rule *ru = nm ? realloc(c->rules, sizeof *ru * (size_t)cap) : NULL;
		if (!ru)
			return CFG_UNLEFT_OOM;
		c->rules = ru;
		w->cap_rules = cap;
	}
	memset(&w->alts[k], 0, sizeof w->alts[k]);
	memset(&c->rules[k], 0, sizeof c->rules[k]);
	w->origin[k] = w->origin[r];
	c->names[k] = NULL;
	c->n_rules++;
	if (c->names[r] && !(c->names[k] = strdup(c->names[r])))
		return CFG_UNLEFT_OOM;
	return k;
}

/* Rule r's alternatives that start with rule s (s != r, earlier in the group) replaced by
 * s's alternatives followed by their rest. */
static int substitute(struct work *w, int r, int s)
{
	struct list out = {0};
	int rc = 0;
	for (int a = 0; a < w->alts[r].n && !rc; a++) {
		int q = w->alts[r].v[a];
		if (first_rule(w->c, q) != s) {
			rc = push(&out, q);
			continue;
		}
		for (int b = 0; b < w->alts[s].n && !rc; b++) {
			int nq = concat(w, w->alts[s].v[b], 0, q, 1, -1, r);
			rc = nq < 0 ? nq : push(&out, nq);
		}
	}
	if (rc) {
		free(out.v);
		return rc;
	}
	free(w->alts[r].v);
	w->alts[r] = out;
	return 0;
}

/* r ::= r a1 | ... | r an | b1 | ... | bm  becomes  r ::= b1 t | ... | bm t,
 * t ::= a1 t | ... | an t | "" (r ::= r alone derives nothing and is dropped) */
static int direct(struct work *w, int r)
{
	int n_rec = 0;
	for (int a = 0; a < w->alts[r].n; a++)
		n_rec += first_rule(w->c, w->alts[r].v[a]) == r;
	if (!n_rec)
		return 0;
	int t = new_rule(w, r);
	if (t < 0)
		return t;
	struct list base = {0}, tail = {0};
	int rc = 0;
	for (int a = 0; a < w->alts[r].n && !rc; a++) {
		int q = w->alts[r].v[a], nq = 0;
		if (first_rule(w->c, q) != r)
			rc = (nq = concat(w, q, 0, -1, 0, t, r)) < 0 ? nq : push(&base, nq);
		else if (w->c->seqs[q].len > 1)
			rc = (nq = concat(w, q, 1, -1, 0, t, r)) < 0 ? nq : push(&tail, nq);
	}
	int eps = rc ? -1 : concat(w, -1, 0, -1, 0, -1, r);
	rc = rc ? rc : eps < 0 ? eps : push(&tail, eps);
	if (rc) {
		free(base.v);
		free(tail.v);
		return rc;
	}
	free(w->alts[r].v);
	w->alts[r] = base;
	w->alts[t] = tail;
	return 0;
}

/* Rule-to-rule edges in compressed rows. EDGES_FIRST: r -> s when an alternative of r starts
 * with s. EDGES_LEFT: s there or after rules that may match nothing (mark: after some). 
 * EDGES_UNIT: s anywhere in an alternative whose other elements are rules that may match
 * nothing, so r derives s (mark: the alternative has other elements). EDGES_SINGLE: s is a
 * whole alternative of r. */
enum edge_mode { EDGES_FIRST, EDGES_LEFT, EDGES_UNIT, EDGES_SINGLE };

struct edges {
	int32_t *off, *dst; /* off[n_rules + 1] */
	uint8_t *mark;
};

static void edges_free(struct edges *g)
{
	free(g->off);
	free(g->dst);
	free(g->mark);
}

static int edge_add(struct edges *g, int *m, int *cap, int32_t s, bool mark)
{
	int32_t *d = grow_array(g->dst, cap, *m + 1, sizeof *d);
	if (d)
		g->dst = d;
	uint8_t *h = d ? realloc(g->mark, (size_t)*cap) : NULL;
	if (!h)
		return CFG_UNLEFT_OOM;
	g->mark = h;
	g->dst[*m] = s;
	g->mark[(*m)++] = mark;
	return 0;
}

/* the number of elements of q that are not rules that may match nothing */
static int solid(const struct guide_cfg *c, const uint8_t *nullable, const struct cfg_seq *q)
{
	int n = 0;
	for (int k = 0; k < q->len; k++)
		n += c->elems[q->start + k].kind != CFG_REF || !nullable[c->elems[q->start + k].id];
	return n;
}

static int edges_build(const struct work *w, const uint8_t *nullable, enum edge_mode mode, struct edges *g)
{
	const struct guide_cfg *c = w->c;
	int n = c->n_rules, cap = 0, m = 0;
	memset(g, 0, sizeof *g);
	if (!(g->off = malloc(sizeof *g->off * (size_t)(n + 1))))
		return CFG_UNLEFT_OOM;
	for (int r = 0; r < n; r++) {
		g->off[r] = m;
		for (int a = 0; a < w->alts[r].n; a++) {
			const struct cfg_seq *q = &c->seqs[w->alts[r].v[a]];
			int others = mode == EDGES_UNIT ? solid(c, nullable, q) : 0;
			if (mode == EDGES_SINGLE) {
				if (q->len == 1 && c->elems[q->start].kind == CFG_REF &&
				    edge_add(g, &m, &cap, c->elems[q->start].id, false))
					return CFG_UNLEFT_OOM;
				continue;
			}
			for (int k = 0; k < q->len; k++) {
				const struct cfg_elem *el = &c->elems[q->start + k];
				if (el->kind != CFG_REF) {
					if (mode == EDGES_UNIT)
						continue;
					break;
				}
				if (mode == EDGES_UNIT && others - !nullable[el->id] > 0)
					continue; /* something else in the alternative must match */
				if (edge_add(g, &m, &cap, el->id, mode == EDGES_UNIT ? q->len > 1 : k > 0))
					return CFG_UNLEFT_OOM;
				if (mode == EDGES_FIRST || (mode == EDGES_LEFT && !nullable[el->id]))
					break;
			}
		}
	}
	g->off[n] = m;
	return 0;
}

/* Tarjan's strongly connected components of g, without recursion (a grammar may have tens of
 * thousands of rules): comp[r] its group, or -1 when r is in no cycle. Sets *cyclic when some
 * group has one. */
static int groups(const struct edges *g, int n, int32_t *comp, int *cyclic)
{
	int rc = CFG_UNLEFT_OOM;
	int32_t *index = malloc(sizeof *index * (size_t)n), *low = malloc(sizeof *low * (size_t)n);
	int32_t *stack = malloc(sizeof *stack * (size_t)n), *call = malloc(sizeof *call * (size_t)n);
	int32_t *next = malloc(sizeof *next * (size_t)n);
	uint8_t *on = calloc((size_t)n, 1);
	*cyclic = 0;
	if (!index || !low || !stack || !call || !next || !on)
		goto out;
	for (int i = 0; i < n; i++)
		index[i] = -1;
	int counter = 0, sp = 0, n_comp = 0;
	for (int root = 0; root < n; root++) {
		if (index[root] >= 0)
			continue;
		int depth = 0;
		call[depth++] = root;
		index[root] = low[root] = counter++;
		next[root] = g->off[root];
		stack[sp++] = root;
		on[root] = 1;
		while (depth) {
			int r = call[depth - 1];
			if (next[r] < g->off[r + 1]) {
				int s = g->dst[next[r]++];
				if (index[s] < 0) {
					index[s] = low[s] = counter++;
					next[s] = g->off[s];
					stack[sp++] = s;
					on[s] = 1;
					call[depth++] = s;
				} else if (on[s] && index[s] < low[r]) {
					low[r] = index[s];
				}
				continue;
			}
			depth--;
			if (depth && low[r] < low[call[depth - 1]])
				low[call[depth - 1]] = low[r];
			if (low[r] != index[r])
				continue;
			int size = 0, self = 0, s;
			do {
				s = stack[--sp];
				on[s] = 0;
				comp[s] = n_comp;
				size++;
			} while (s != r);
			for (int e = g->off[r]; e < g->off[r + 1]; e++)
				self |= g->dst[e] == r;
			if (size > 1 || self)
				*cyclic = 1;
			else
				comp[r] = -1;
			n_comp++;
		}
	}
	rc = 0;
out:
	free(index);
	free(low);
	free(stack);
	free(call);
	free(next);
	free(on);
	return rc;
}

/* Is some marked edge of g inside a cycle? Then *bad_rule is its rule's origin. */
static int marked_cycle(struct work *w, const struct edges *g, int32_t *comp, bool *found)
{
	int cyclic = 0, rc = groups(g, w->c->n_rules, comp, &cyclic);
	*found = false;
	for (int r = 0; !rc && cyclic && r < w->c->n_rules && !*found; r++)
		for (int e = g->off[r]; e < g->off[r + 1] && !*found; e++)
			if (g->mark[e] && comp[r] >= 0 && comp[g->dst[e]] == comp[r]) {
				w->bad_rule = w->origin[r];
				*found = true;
			}
	return rc;
}

/* Alternatives that can never end (they need a rule none of whose alternatives ends) are
 * dropped: the matcher then never starts them, and the rewrite never copies them. Then the
 * left recursion Paull's algorithm cannot rewrite is refused (it would copy such rules into
 * each other round after round): behind a part that may match nothing (a ::= n a "x", n
 * nullable: CFG_UNLEFT_HIDDEN), or a rule deriving itself beside such parts (a ::= a n:
 * CFG_UNLEFT_CYCLE). */
static int prune_and_check(struct work *w)
{
	struct guide_cfg *c = w->c;
	int n = c->n_rules, rc = CFG_UNLEFT_OOM;
	uint8_t *ends = calloc((size_t)n, 1), *nullable = calloc((size_t)n, 1);
	int32_t *comp = malloc(sizeof *comp * (size_t)n);
	struct edges g = {0};
	if (!ends || !nullable || !comp)
		goto out;
	for (bool changed = true; changed;) { /* ends, and nullable, to a fixed point */
		changed = false;
		for (int r = 0; r < n; r++)
			for (int a = 0; a < w->alts[r].n && (!ends[r] || !nullable[r]); a++) {
				const struct cfg_seq *q = &c->seqs[w->alts[r].v[a]];
				bool e = true, z = true;
				for (int k = 0; k < q->len; k++) {
					const struct cfg_elem *el = &c->elems[q->start + k];
					e &= el->kind != CFG_REF || ends[el->id];
					z &= el->kind == CFG_REF && nullable[el->id];
				}
				if ((e && !ends[r]) || (z && !nullable[r]))
					ends[r] |= e, nullable[r] |= z, changed = true;
			}
	}
	if (!ends[c->root]) {
		w->bad_rule = c->root;
		rc = CFG_UNLEFT_NO_END;
		goto out;
	}
	for (int r = 0; r < n; r++) {
		int m = 0;
		for (int a = 0; a < w->alts[r].n; a++) {
			const struct cfg_seq *q = &c->seqs[w->alts[r].v[a]];
			bool e = true;
			for (int k = 0; k < q->len; k++)
				e &= c->elems[q->start + k].kind != CFG_REF || ends[c->elems[q->start + k].id];
			if (e)
				w->alts[r].v[m++] = w->alts[r].v[a];
		}
		w->alts[r].n = m;
	}
	bool found = false;
	if ((rc = edges_build(w, nullable, EDGES_LEFT, &g)) || (rc = marked_cycle(w, &g, comp, &found)))
		goto out;
	rc = CFG_UNLEFT_HIDDEN;
	if (found)
		goto out;
	edges_free(&g);
	if ((rc = edges_build(w, nullable, EDGES_UNIT, &g)) || (rc = marked_cycle(w, &g, comp, &found)))
		goto out;
	rc = found ? CFG_UNLEFT_CYCLE : 0;
out:
	free(ends);
	free(nullable);
	free(comp);
	edges_free(&g);
	return rc;
}

/* Rules that are whole alternatives of each other in a cycle (a ::= b | "x", b ::= a | "y")
 * derive each other, so they have one language: the first of them takes all their other
 * alternatives and the rest become references to it. Else the rewrite would turn the cycle
 * into a rule deriving itself beside a new rule that may match nothing. */
static int merge_unit_cycles(struct work *w)
{
	struct guide_cfg *c = w->c;
	int n = c->n_rules, cyclic = 0, rc;
	int32_t *comp = malloc(sizeof *comp * (size_t)n);
	struct edges g = {0};
	if (!comp)
		return CFG_UNLEFT_OOM;
	if ((rc = edges_build(w, NULL, EDGES_SINGLE, &g)) || (rc = groups(&g, n, comp, &cyclic)) || !cyclic)
		goto out;
	uint8_t *done = calloc((size_t)n, 1);
	if (!done) {
		rc = CFG_UNLEFT_OOM;
		goto out;
	}
	for (int rep = 0; rep < n && !rc; rep++) {
		if (comp[rep] < 0 || done[rep])
			continue;
		int id = comp[rep];
		struct list merged = {0};
		for (int r = rep; r < n && !rc; r++)
			for (int a = 0; comp[r] == id && a < w->alts[r].n && !rc; a++) {
				const struct cfg_seq *q = &c->seqs[w->alts[r].v[a]];
				if (q->len != 1 || c->elems[q->start].kind != CFG_REF ||
				    comp[c->elems[q->start].id] != id)
					rc = push(&merged, w->alts[r].v[a]);
			}
		for (int r = rep + 1; r < n && !rc; r++) {
			if (comp[r] != id)
				continue;
			done[r] = 1;
			w->alts[r].n = 0;
			int q = concat(w, -1, 0, -1, 0, rep, r);
			rc = q < 0 ? q : push(&w->alts[r], q);
		}
		if (rc) {
			free(merged.v);
			break;
		}
		free(w->alts[rep].v);
		w->alts[rep] = merged;
	}
	free(done);
out:
	free(comp);
	edges_free(&g);
	return rc;
}

/* One round: every cyclic group rewritten, its rules in index order (Paull's algorithm) */
static int round_once(struct work *w, int *changed)
{
	int n = w->c->n_rules;
	int32_t *comp = malloc(sizeof *comp * (size_t)n);
	struct edges g = {0};
	if (!comp)
		return CFG_UNLEFT_OOM;
	int rc = edges_build(w, NULL, EDGES_FIRST, &g);
	rc = rc ? rc : groups(&g, n, comp, changed);
	edges_free(&g);
	for (int i = 0; i < n && !rc && *changed; i++) {
		if (comp[i] < 0)
			continue;
		for (int j = 0; j < i && !rc; j++)
			if (comp[j] == comp[i])
				rc = substitute(w, i, j);
		if (!rc)
			rc = direct(w, i);
	}
	free(comp);
	return rc;
}

#define CFG_UNLEFT_ROUNDS 8

int cfg_unleft(struct guide_cfg *c, int32_t **origin, int *bad_rule)
{
	*origin = NULL;
	*bad_rule = -1;
	struct work w = {
		.c = c, .cap_rules = c->n_rules + 16, .cap_seqs = c->n_seqs, .cap_elems = c->n_elems, .bad_rule = -1};
	int rc = CFG_UNLEFT_OOM;
	w.alts = calloc((size_t)w.cap_rules, sizeof *w.alts);
	w.origin = malloc(sizeof *w.origin * (size_t)w.cap_rules);
	char **nm = realloc(c->names, sizeof *nm * (size_t)w.cap_rules);
	if (nm)
		c->names = nm;
	struct cfg_rule *ru = nm ? realloc(c->rules, sizeof *ru * (size_t)w.cap_rules) : NULL;
	if (ru)
		c->rules = ru;
	if (!w.alts || !w.origin || !ru)
		goto out;
	for (int r = 0; r < c->n_rules; r++) {
		w.origin[r] = r;
		for (int a = 0; a < c->rules[r].n_alts; a++)
			if (push(&w.alts[r], c->alt_seq[c->rules[r].first + a]))
				goto out;
	}
	if ((rc = prune_and_check(&w)) || (rc = merge_unit_cycles(&w)))
		goto out;
	int changed = 1;
	for (int k = 0; k < CFG_UNLEFT_ROUNDS && changed; k++)
		if ((rc = round_once(&w, &changed)))
			goto out;
	/* flat again */
	int total = 0;
	for (int r = 0; r < c->n_rules; r++)
		total += w.alts[r].n;
	int32_t *flat = malloc(sizeof *flat * (size_t)(total + 1));
	if (!flat) {
		rc = CFG_UNLEFT_OOM;
		goto out;
	}
	for (int r = 0, at = 0; r < c->n_rules; r++) {
		c->rules[r].first = at;
		c->rules[r].n_alts = w.alts[r].n;
		if (w.alts[r].n)
			memcpy(flat + at, w.alts[r].v, sizeof *flat * (size_t)w.alts[r].n);
		at += w.alts[r].n;
	}
	free(c->alt_seq);
	c->alt_seq = flat;
	c->n_alt = total;
	*origin = w.origin;
	w.origin = NULL;
	rc = 0;
out:
	for (int r = 0; w.alts && r < c->n_rules; r++)
		free(w.alts[r].v);
	free(w.alts);
	free(w.origin);
	*bad_rule = rc == CFG_UNLEFT_OOM ? -1 : w.bad_rule;
	return rc;
}
