/* DFA trimming and intersection (guide/dfa_ops.h). */
#include "guide/dfa_ops.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* States from which an accepting one can be reached; the others lose their incoming edges */
int guide_dfa_trim(struct guide_dfa *d, const char *what, struct err *e)
{
	int n = d->n_states;
	uint8_t *useful = calloc((size_t)n, 1);
	int32_t *queue = malloc(sizeof *queue * (size_t)n), *cnt = calloc((size_t)n + 1, sizeof *cnt);
	int32_t *from = NULL;
	int rc = -1;
	if (!useful || !queue || !cnt)
		goto out;
	size_t edges = 0;
	for (size_t i = 0; i < (size_t)n * 256; i++)
		if (d->next[i] >= 0)
			cnt[d->next[i] + 1]++, edges++;
	for (int s = 0; s < n; s++)
		cnt[s + 1] += cnt[s];
	if (!(from = malloc(sizeof *from * (edges ? edges : 1))))
		goto out;
	int32_t *fill = queue; /* borrowed as the fill cursor per state first */
	memcpy(fill, cnt, sizeof *fill * (size_t)n);
	for (size_t i = 0; i < (size_t)n * 256; i++)
		if (d->next[i] >= 0)
			from[fill[d->next[i]]++] = (int32_t)(i / 256);
	int head = 0, tail = 0;
	for (int s = 0; s < n; s++)
		if (d->accept[s])
			useful[s] = 1, queue[tail++] = s;
	while (head < tail) {
		int t = queue[head++];
		for (int k = cnt[t]; k < cnt[t + 1]; k++)
			if (!useful[from[k]])
				useful[from[k]] = 1, queue[tail++] = from[k];
	}
	for (int s = 0; s < n; s++) {
		d->live[s] = 0;
		for (int c = 0; c < 256; c++) {
			int32_t *t = &d->next[(size_t)s * 256 + (size_t)c];
			if (*t >= 0 && !useful[*t])
				*t = -1;
			d->live[s] |= *t >= 0;
		}
	}
	rc = useful[0] ? 0 : err_set(e, "%s", what);
out:
	if (rc < 0 && (!useful || !queue || !cnt || !from))
		err_set(e, "out of memory");
	free(useful);
	free(queue);
	free(cnt);
	free(from);
	return rc;
}

/* pairs (state of a, state of b) → state, by open addressing */
struct pairs {
	int64_t *keys;
	int32_t *vals; /* state + 1, 0 empty */
	size_t cap;
};

int guide_dfa_intersect(const struct guide_dfa *a, const struct guide_dfa *b, const char *what, struct guide_dfa **out,
			struct err *e)
{
	*out = NULL;
	struct pairs h = {.cap = 1};
	while (h.cap < 4 * (size_t)GUIDE_DFA_MAX_STATES)
		h.cap *= 2;
	h.keys = malloc(sizeof *h.keys * h.cap);
	h.vals = calloc(h.cap, sizeof *h.vals);
	int32_t *pa = malloc(sizeof *pa * GUIDE_DFA_MAX_STATES), *pb = malloc(sizeof *pb * GUIDE_DFA_MAX_STATES);
	struct guide_dfa *d = calloc(1, sizeof *d);
	int rc = -1, cap = 0;
	if (!h.keys || !h.vals || !pa || !pb || !d) {
		err_set(e, "out of memory");
		goto out;
	}
	pa[0] = pb[0] = 0; /* the start pair, key 0, which hashes to slot 0 */
	h.keys[0] = 0;
	h.vals[0] = 1;
	d->n_states = 1;
	for (int s = 0; s < d->n_states; s++) {
		if (s >= cap) {
			cap = cap ? 2 * cap : 64;
			int32_t *n = realloc(d->next, sizeof *n * 256 * (size_t)cap);
			if (!n) {
				err_set(e, "out of memory");
				goto out;
			}
			d->next = n;
		}
		for (int c = 0; c < 256; c++) {
			int32_t x = a->next[(size_t)pa[s] * 256 + (size_t)c],
				y = b->next[(size_t)pb[s] * 256 + (size_t)c];
			int32_t t = -1;
			if (x >= 0 && y >= 0) {
				int64_t key = (int64_t)x * b->n_states + y;
				size_t i = (size_t)((uint64_t)key * 0x9e3779b97f4a7c15ull) & (h.cap - 1);
				while (h.vals[i] && h.keys[i] != key)
					i = (i + 1) & (h.cap - 1);
				if (!h.vals[i]) {
					if (d->n_states >= GUIDE_DFA_MAX_STATES) {
						err_set(e,
							"the intersection of two automata is too large (more than %d "
							"states)",
							GUIDE_DFA_MAX_STATES);
						goto out;
					}
					pa[d->n_states] = x;
					pb[d->n_states] = y;
					h.keys[i] = key;
					h.vals[i] = ++d->n_states;
				}
				t = h.vals[i] - 1;
			}
			d->next[(size_t)s * 256 + (size_t)c] = t;
		}
	}
	d->accept = malloc((size_t)d->n_states);
	d->live = malloc((size_t)d->n_states);
	if (!d->accept || !d->live) {
		err_set(e, "out of memory");
		goto out;
	}
	for (int s = 0; s < d->n_states; s++)
		d->accept[s] = a->accept[pa[s]] && b->accept[pb[s]];
	rc = guide_dfa_trim(d, what, e);
out:
	free(h.keys);
	free(h.vals);
	free(pa);
	free(pb);
	if (rc < 0) {
		guide_dfa_free(d);
		return -1;
	}
	*out = d;
	return 0;
}
