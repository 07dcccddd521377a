#include "model_v4/v4_block.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_v4/v4_attn.h"
#include "model_v4/v4_indexer.h"

static int max_entries(int ratio, int max_len) { return ratio ? max_len / ratio + 1 : 0; }

size_t v4_seq_attn_floats(const struct v4_attn_layer *l, int max_len)
{
	size_t n = (size_t)l->window * (size_t)l->head_dim;
	if (l->ratio) {
		n += (size_t)max_entries(l->ratio, max_len) * (size_t)l->head_dim + v4_comp_state_floats(&l->comp);
		if (l->ratio == 4)
			n += (size_t)max_entries(4, max_len) * (size_t)l->index_dim + v4_comp_state_floats(&l->icomp);
	}
	return n;
}

void v4_seq_attn_reset(const struct v4_attn_layer *l, struct v4_seq_attn *s)
{
	if (l->ratio)
		v4_comp_state_init(&l->comp, s->cst);
	if (l->ratio == 4)
		v4_comp_state_init(&l->icomp, s->icst);
}

void v4_seq_attn_init(const struct v4_attn_layer *l, float *mem, int max_len, struct v4_seq_attn *s)
{
	memset(s, 0, sizeof *s);
	s->max_ent = max_entries(l->ratio, max_len);
	s->ring = mem;
	mem += (size_t)l->window * (size_t)l->head_dim;
	if (l->ratio) {
		s->ents = mem;
		mem += (size_t)s->max_ent * (size_t)l->head_dim;
		s->cst = mem;
		mem += v4_comp_state_floats(&l->comp);
	}
	if (l->ratio == 4) {
		s->ients = mem;
		mem += (size_t)s->max_ent * (size_t)l->index_dim;
		s->icst = mem;
	}
	v4_seq_attn_reset(l, s);
}

static size_t up64(size_t n) { return (n + 63) / 64 * 64; }

size_t v4_attn_seq_work_bytes(const struct v4_attn_layer *l, int max_len)
{
	size_t keys = (size_t)l->window + (size_t)max_entries(l->ratio, max_len);
	size_t K = (size_t)(l->index_topk > 0 ? l->index_topk : 1);
	return up64(sizeof(float *) * keys) + up64(sizeof(int32_t) * K) + up64(sizeof(float) * (size_t)l->n_heads);
}

int v4_attn_seq(const struct v4_attn_layer *l, struct v4_seq_attn *s, long pos0, int n, float *q, float *kv,
		const float *ckv, const float *csc, float *iq, float *iw, const float *ikv, const float *isc, float *o,
		int32_t *sel, void *work, struct err *e)
{
	int H = l->n_heads, hd = l->head_dim, win = l->window, r = l->ratio, K = l->index_topk;
	int ih = l->index_heads, id = l->index_dim;
	long end = pos0 + n;
	if (r && end / r > s->max_ent)
		return err_set(e, "v4 attention: position %ld past the state's %d entries of ratio %d", end - 1,
			       s->max_ent, r);
	for (int t = 0; t < n; t++) {
		v4_attn_prep_q(&l->rope, H, hd, l->eps, pos0 + t, q + (size_t)t * (size_t)(H * hd));
		v4_attn_prep_kv(&l->rope, hd, pos0 + t, 1, kv + (size_t)t * (size_t)hd);
	}
	/* the entries the chunk completes: token t sees those e < (p + 1) / r, all completed by
	 * then, so the whole chunk is fed first */
	if (r)
		v4_comp_feed(&l->comp, s->cst, pos0, n, ckv, csc, s->ents + (size_t)(pos0 / r) * (size_t)hd);
	if (r == 4) {
		v4_comp_feed(&l->icomp, s->icst, pos0, n, ikv, isc, s->ients + (size_t)(pos0 / 4) * (size_t)id);
		for (int t = 0; t < n; t++) {
			v4_index_query(&l->rope, ih, id, pos0 + t, 1, iq + (size_t)t * (size_t)(ih * id));
			v4_index_weights(ih, id, iw + (size_t)t * (size_t)ih);
		}
	}
	/* work: [window + max_ent] key rows, [K] picks, [H] LSEs (v4_attn_seq_work_bytes) */
	unsigned char *w = work;
	const float **keys = (const float **)w;
	w += up64(sizeof(float *) * ((size_t)win + (size_t)s->max_ent));
	int32_t *pick = (int32_t *)w;
	w += up64(sizeof(int32_t) * (size_t)(K > 0 ? K : 1));
	float *lse = (float *)w;
	for (int t = 0; t < n; t++) {
		long p = pos0 + t, lo, nc;
		v4_attn_visible(r, win, p, &lo, &nc);
		int nk = 0;
		for (long k = lo; k <= p; k++) /* the chunk's own rows, else the ring's */
			keys[nk++] = k >= pos0 ? kv + (size_t)(k - pos0) * (size_t)hd
					       : s->ring + (size_t)(k % win) * (size_t)hd;
		int32_t *st = sel ? sel + (size_t)t * (size_t)K : NULL;
		for (int i = 0; st && i < K; i++)
			st[i] = -1;
		if (r == 4) {
			int ns = v4_index_select(ih, id, iq + (size_t)t * (size_t)(ih * id),
						 iw + (size_t)t * (size_t)ih, s->ients, (int)nc, K, pick);
			for (int i = 0; i < ns; i++) {
				keys[nk++] = s->ents + (size_t)pick[i] * (size_t)hd;
				if (st)
					st[i] = pick[i];
			}
		} else {
			for (long c = 0; c < nc; c++)
				keys[nk++] = s->ents + (size_t)c * (size_t)hd;
		}
		float *ot = o + (size_t)t * (size_t)(H * hd);
		v4_attn_one(H, hd, 1.0f / sqrtf((float)hd), q + (size_t)t * (size_t)(H * hd), keys, nk, l->sink, ot,
			    lse);
		v4_attn_unrope(&l->rope, H, hd, ot, p);
	}
	for (int t = n > win ? n - win : 0; t < n; t++) /* the ring keeps the last window */
		memcpy(s->ring + (size_t)((pos0 + t) % win) * (size_t)hd, kv + (size_t)t * (size_t)hd,
		       sizeof(float) * (size_t)hd);
	return 0;
}
