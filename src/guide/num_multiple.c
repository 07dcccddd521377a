/* JSON Schema's multipleOf as a DFA over plain decimals (guide/num_multiple.h). */
#include "guide/num_multiple.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "guide/dfa_ops.h"
#include "guide/int_range.h"

#define MAX_DECIMALS 6
#define MAX_STEPS 100000 /* A, the step in units of its last decimal */

/* where a text is: the first digit of "0", the integer part, just after ".", in the first k
 * decimals, past them (only zeros may follow) */
enum { P_START, P_SIGN, P_ZERO, P_INT, P_DOT, P_FRAC, P_TAIL };

/* A state: phase, residue r of the digits so far (as one integer) modulo A, decimals j taken
 * into r, negative, some non-zero digit seen */
struct mstate {
	int phase, r, j, neg, nz;
};

struct builder {
	long A;
	int k;
	bool integer;
	struct guide_dfa *d;
	struct mstate *st;
	int cap;
	int32_t *index; /* [(phase, r, j, neg, nz) packed] → state + 1 */
	struct err *e;
};

static size_t pack(const struct builder *b, struct mstate m)
{
	return ((((size_t)m.phase * (size_t)b->A + (size_t)m.r) * (size_t)(b->k + 1) + (size_t)m.j) * 2 +
		(size_t)m.neg) *
		       2 +
	       (size_t)m.nz;
}

static int32_t state_of(struct builder *b, struct mstate m)
{
	size_t key = pack(b, m);
	if (b->index[key])
		return b->index[key] - 1;
	struct guide_dfa *d = b->d;
	if (d->n_states >= GUIDE_DFA_MAX_STATES)
		return err_set(b->e, "multipleOf: the step needs more than %d automaton states", GUIDE_DFA_MAX_STATES);
	if (d->n_states == b->cap) {
		int cap = b->cap ? 2 * b->cap : 64;
		int32_t *n = realloc(d->next, sizeof *n * 256 * (size_t)cap);
		struct mstate *s = n ? realloc(b->st, sizeof *s * (size_t)cap) : NULL;
		d->next = n ? n : d->next;
		b->st = s ? s : b->st;
		if (!s)
			return err_set(b->e, "out of memory");
		b->cap = cap;
	}
	b->st[d->n_states] = m;
	b->index[key] = ++d->n_states;
	return d->n_states - 1;
}

/* the state after byte c, or -1 (into *t), or -2 on error */
static int32_t step(struct builder *b, struct mstate m, int c)
{
	bool digit = c >= '0' && c <= '9';
	int dv = c - '0';
	struct mstate n = m;
	switch (m.phase) {
	case P_START:
	case P_SIGN:
		if (c == '-' && m.phase == P_START)
			n.phase = P_SIGN, n.neg = 1;
		else if (c == '0')
			n.phase = P_ZERO;
		else if (digit)
			n.phase = P_INT, n.r = (int)(dv % b->A), n.nz = 1;
		else
			return -1;
		break;
	case P_ZERO:
	case P_INT:
		if (digit && m.phase == P_INT)
			n.r = (int)((10L * m.r + dv) % b->A), n.nz = m.nz || dv;
		else if (c == '.' && !b->integer)
			n.phase = P_DOT;
		else
			return -1;
		break;
	case P_DOT:
	case P_FRAC:
		if (!digit)
			return -1;
		if (m.j < b->k)
			n.phase = P_FRAC, n.r = (int)((10L * m.r + dv) % b->A), n.j = m.j + 1, n.nz = m.nz || dv;
		else if (dv == 0)
			n.phase = P_TAIL;
		else
			return -1;
		break;
	case P_TAIL:
		if (c != '0')
			return -1;
		break;
	}
	int32_t t = state_of(b, n);
	return t < 0 ? -2 : t;
}

/* m as A / 10^k with A a whole number, from m's shortest decimal (0.01 is 1 / 10^2) */
static int as_steps(double m, long *A, int *k)
{
	char s[64], digits[64];
	if (!(m > 0) || m > 1e15 || (*k = fmt_double_fixed(m, MAX_DECIMALS, s, sizeof s)) < 0)
		return -1;
	size_t n = 0;
	for (const char *c = s; *c; c++)
		if (*c != '.')
			digits[n++] = *c;
	digits[n] = 0;
	long long a = strtoll(digits, NULL, 10);
	if (a < 1 || a > MAX_STEPS)
		return -1;
	*A = (long)a;
	return 0;
}

int guide_dfa_multiple(double m, bool integer, struct guide_dfa **out, struct err *e)
{
	*out = NULL;
	struct builder b = {.integer = integer, .e = e};
	if (as_steps(m, &b.A, &b.k) < 0)
		return err_set(
			e, "multipleOf must be a positive number of at most %d decimals and %d steps of its last one",
			MAX_DECIMALS, MAX_STEPS);
	if (integer && b.k) { /* a whole multiple of a fractional step: multiples of A / gcd(A, 10^k) */
		long p = 1, x, y;
		for (int i = 0; i < b.k; i++)
			p *= 10;
		for (x = b.A, y = p; y;) {
			long t = x % y;
			x = y, y = t;
		}
		b.A /= x;
		b.k = 0;
	}
	if ((size_t)b.A * (size_t)(b.k + 1) > GUIDE_DFA_MAX_STATES / 4)
		return err_set(
			e, "multipleOf %g: its automaton would need more than %d states (%ld residues, %d decimals)",
			m, GUIDE_DFA_MAX_STATES, b.A, b.k);
	size_t n_keys = 7 * (size_t)b.A * (size_t)(b.k + 1) * 4;
	b.index = calloc(n_keys, sizeof *b.index);
	struct guide_dfa *d = b.d = calloc(1, sizeof *d);
	int rc = -1;
	if (!b.index || !d) {
		err_set(e, "out of memory");
		goto out;
	}
	if (state_of(&b, (struct mstate){0}) < 0)
		goto out;
	for (int s = 0; s < d->n_states; s++)
		for (int c = 0; c < 256; c++) {
			int32_t t = step(&b, b.st[s], c);
			if (t == -2)
				goto out;
			d->next[(size_t)s * 256 + (size_t)c] = t;
		}
	d->accept = calloc((size_t)d->n_states, 1);
	d->live = calloc((size_t)d->n_states, 1);
	if (!d->accept || !d->live) {
		err_set(e, "out of memory");
		goto out;
	}
	long pow10[MAX_DECIMALS + 1];
	pow10[0] = 1 % b.A;
	for (int i = 1; i <= MAX_DECIMALS; i++)
		pow10[i] = pow10[i - 1] * 10 % b.A;
	for (int s = 0; s < d->n_states; s++) {
		struct mstate m = b.st[s];
		bool whole = m.phase == P_ZERO || m.phase == P_INT || m.phase == P_FRAC || m.phase == P_TAIL;
		/* the digits so far stand for r * 10^(k - j) units of the step's last decimal */
		d->accept[s] = whole && (!m.neg || m.nz) && (long)m.r * pow10[b.k - m.j] % b.A == 0;
	}
	rc = guide_dfa_trim(d, "multipleOf: no number fits", e);
out:
	free(b.index);
	free(b.st);
	if (rc < 0) {
		guide_dfa_free(d);
		return -1;
	}
	*out = d;
	return 0;
}
