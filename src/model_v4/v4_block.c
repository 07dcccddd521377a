#include "model_v4/v4_block.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_v4/v4_attn.h"
#include "model_v4/v4_indexer.h"
#include "ops/pool.h"

static long max_entries(int ratio, long max_len) { return ratio ? max_len / ratio + 1 : 0; }

static int ring_rows(const struct v4_attn_layer *l) { return l->window + l->rollback; }

/* floats of the compressors' states (cst then icst, adjacent) */
static size_t comp_floats(const struct v4_attn_layer *l)
{
	return (l->ratio ? v4_comp_state_floats(&l->comp) : 0) + (l->ratio == 4 ? v4_comp_state_floats(&l->icomp) : 0);
}

size_t v4_seq_attn_floats(const struct v4_attn_layer *l)
{
	return (size_t)ring_rows(l) * (size_t)l->head_dim +
	       comp_floats(l) * (size_t)(1 + (l->rollback ? l->rollback + 1 : 0));
}

void v4_seq_attn_rollback(const struct v4_attn_layer *l, struct v4_seq_attn *s, long q)
{
	size_t cf = comp_floats(l);
	if (cf && l->rollback && q >= 1)
		memcpy(s->cst, s->ck + (size_t)((q - 1) % (l->rollback + 1)) * cf, sizeof(float) * cf);
}

void v4_seq_attn_reset(const struct v4_attn_layer *l, struct v4_seq_attn *s)
{
	if (l->ratio)
		v4_comp_state_init(&l->comp, s->cst);
	if (l->ratio == 4)
		v4_comp_state_init(&l->icomp, s->icst);
}

void v4_seq_attn_init(const struct v4_attn_layer *l, float *mem, struct v4_seq_attn *s)
{
	memset(s, 0, sizeof *s);
	s->ring = mem;
	mem += (size_t)ring_rows(l) * (size_t)l->head_dim;
	if (l->ratio) {
		s->cst = mem;
		mem += v4_comp_state_floats(&l->comp);
	}
	if (l->ratio == 4) {
		s->icst = mem;
		mem += v4_comp_state_floats(&l->icomp);
	}
	s->ck = l->rollback ? mem : NULL;
	v4_seq_attn_reset(l, s);
}

static size_t up64(size_t n) { return (n + 63) / 64 * 64; }

/* the work's regions (v4_attn_seq_work_bytes) */
struct work {
	const float **ents, **iks, **keys; /* [max_ent] stored entries, indexer keys; [window + R + max_ent] */
	float *fed, *ifed;                 /* [max_n / r + 1, hd], [max_n / 4 + 1, index_dim] a feed's entries */
	float *rows;    /* unpacked entries: ratio 4 [K, hd] one query's picks; other ratios [max_ent, hd] all */
	int32_t *pick;  /* [K] */
	float *lse;     /* [H] */
	double *scores; /* [max_ent] the indexer's */
	struct v4_cand *cand, *all; /* DCP: [DT, K] this rank's candidates, [W, DT, K] the group's */
	double *attn;               /* v4_attn_fast's scratch for one query's keys */
};

/* DCP: query tokens whose indexer candidates one all-gather carries */
#define DCP_TOKENS 32

static int dcp_w(const struct v4_attn_layer *l) { return l->dcp_size > 1 ? l->dcp_size : 1; }

static size_t work_layout(const struct v4_attn_layer *l, long max_len, int max_n, unsigned char *w, struct work *o)
{
	size_t me = (size_t)max_entries(l->ratio, max_len), s = 0, P = sizeof(float *);
	size_t fed = l->ratio ? ((size_t)max_n / (size_t)l->ratio + 1) * (size_t)l->head_dim : 0;
	size_t ifed = l->ratio == 4 ? ((size_t)max_n / 4 + 1) * (size_t)l->index_dim : 0;
	size_t K = (size_t)(l->index_topk > 0 ? l->index_topk : 1);
	size_t rows = (l->ratio == 4 ? K : l->ratio ? me : 0) * (size_t)l->head_dim;
	size_t W = (size_t)dcp_w(l), nc = W > 1 && l->ratio == 4 ? DCP_TOKENS * K * sizeof(struct v4_cand) : 0;
	size_t n_kv = (size_t)ring_rows(l) + (l->ratio == 4 ? K : me); /* a query's keys at most */
	size_t sz[12] = {P * me,
			 P * me,
			 P * ((size_t)ring_rows(l) + me),
			 sizeof(float) * fed,
			 sizeof(float) * ifed,
			 sizeof(float) * rows,
			 sizeof(int32_t) * K,
			 sizeof(float) * (size_t)l->n_heads * W,
			 sizeof(double) * (l->ratio == 4 ? me : 0),
			 nc,
			 nc * W,
			 sizeof(double) * v4_attn_fast_scratch(l->n_heads * (int)W, l->head_dim, (int)n_kv)};
	void **dst[12] = {(void **)&o->ents,   (void **)&o->iks,  (void **)&o->keys, (void **)&o->fed,
			  (void **)&o->ifed,   (void **)&o->rows, (void **)&o->pick, (void **)&o->lse,
			  (void **)&o->scores, (void **)&o->cand, (void **)&o->all,  (void **)&o->attn};
	for (int i = 0; i < 12; i++) {
		if (w)
			*dst[i] = w + s;
		s += up64(sz[i]);
	}
	return s;
}

size_t v4_attn_seq_work_bytes(const struct v4_attn_layer *l, long max_len, int max_n)
{
	struct work w;
	return work_layout(l, max_len, max_n, NULL, &w);
}

/* feeds a compressor tokens [t0, t1) of the chunk at pos0 and writes the entries they complete
 * to their pages */
static void feed(const struct v4_comp *c, float *state, const struct v4_pages *pg, size_t off, size_t width, long pos0,
		 int t0, int t1, const float *kv, const float *score, float *fed)
{
	int w = v4_comp_width(c);
	int cnt = v4_comp_feed(c, state, pos0 + t0, t1 - t0, kv + (size_t)t0 * (size_t)w,
			       score + (size_t)t0 * (size_t)w, fed);
	long e0 = (pos0 + t0) / c->ratio;
	for (int i = 0; i < cnt; i++) /* under DCP the owner's alone */
		if (v4_entry_owned(pg->dcp, e0 + i))
			v4_comp_store(c, fed + (size_t)i * (size_t)c->d,
				      v4_page_entry(pg, c->ratio, e0 + i, width, off));
}

/* stored entries unpacked to rows, split over the pool */
struct unpack_job {
	const struct v4_comp *c;
	const float *const *src; /* [n] stored entries */
	const int32_t *pick;     /* NULL: entries 0 .. n - 1, else pick[i] */
	float *rows;             /* [n, c->d] */
};

static void unpack_range(void *ctx, int i0, int i1, int tid)
{
	const struct unpack_job *j = ctx;
	for (int i = i0; i < i1; i++)
		v4_comp_load(j->c, j->src[j->pick ? j->pick[i] : i], j->rows + (size_t)i * (size_t)j->c->d);
}

/* DCP: this rank's indexer candidates for tokens [t0, t1) of the chunk (its local top-k as
 * (score, global entry)), gathered over the group into w->all [W, t1 - t0, K] */
static int dcp_candidates(const struct v4_attn_layer *l, const struct v4_pages *pg, const struct work *w, long pos0,
			  int t0, int t1, const float *iq, const float *iw, struct err *e)
{
	const struct v4_dcp *d = pg->dcp;
	int K = l->index_topk, ih = l->index_heads, id = l->index_dim;
	for (int t = t0; t < t1; t++) {
		struct v4_cand *c = w->cand + (size_t)(t - t0) * (size_t)K;
		long lo, nc;
		v4_attn_visible(4, l->window, pos0 + t, &lo, &nc);
		int ns = v4_index_select_fast(pg->pool, ih, id, iq + (size_t)t * (size_t)(ih * id),
					      iw + (size_t)t * (size_t)ih, w->iks, l->icomp.kind == V4_COMP_INDEX,
					      (int)v4_entries_local(d, nc), K, w->scores, w->pick);
		for (int i = 0; i < K; i++)
			c[i] = i < ns ? (struct v4_cand){w->scores[w->pick[i]],
							 (int32_t)v4_entry_global(d, w->pick[i]), 0}
				      : (struct v4_cand){-INFINITY, -1, 0};
	}
	if (d->gather(d->gather_ctx, w->cand, sizeof(struct v4_cand) * (size_t)(t1 - t0) * (size_t)K, w->all, e))
		return err_prefix(e, "v4 indexer: the DCP top-k gather");
	return 0;
}

int v4_attn_seq(const struct v4_attn_layer *l, struct v4_seq_attn *s, const struct v4_pages *pg, long pos0, int n,
		float *q, float *kv, const float *ckv, const float *csc, float *iq, float *iw, const float *ikv,
		const float *isc, float *o, int32_t *sel, void *work, long max_len, struct err *e)
{
	/* H: the heads attended (under DCP the group's, gathered by the caller) */
	int H = l->n_heads * dcp_w(l), hd = l->head_dim, win = l->window, r = l->ratio, K = l->index_topk;
	int ih = l->index_heads, id = l->index_dim, rr = ring_rows(l);
	const struct v4_dcp *d = pg->dcp;
	long end = pos0 + n;
	if (end > max_len)
		return err_set(e, "v4 attention: position %ld past the %ld positions the step was sized for", end - 1,
			       max_len);
	if (d && (d->size != dcp_w(l) || !d->lse || (r == 4 && !d->gather)))
		return err_set(e, "v4 attention: DCP group of %d, the layer set for %d", d->size, dcp_w(l));
	struct work w;
	work_layout(l, max_len, n, work, &w);
	for (int t = 0; t < n; t++) {
		v4_attn_prep_q(&l->rope, H, hd, l->eps, pos0 + t, q + (size_t)t * (size_t)(H * hd));
		v4_attn_prep_kv(&l->rope, hd, pos0 + t, 1, kv + (size_t)t * (size_t)hd);
	}
	/* the entries the chunk completes: token t sees those e < (p + 1) / r, all completed by
	 * then, so the whole chunk is fed first */
	long n_ent = r ? end / r : 0, n_loc = v4_entries_local(d, n_ent);
	/* the last R + 1 tokens one at a time, the states after each kept (rollback) */
	int R = l->rollback, tail = R && r ? (n < R + 1 ? n : R + 1) : 0;
	size_t cf = comp_floats(l);
	for (int t0 = 0, t1 = n - tail; r && t0 < n; t0 = t1, t1 = t1 + 1) {
		feed(&l->comp, s->cst, pg, pg->ent_off, pg->ent_w, pos0, t0, t1, ckv, csc, w.fed);
		if (r == 4)
			feed(&l->icomp, s->icst, pg, pg->ix_off, pg->ix_w, pos0, t0, t1, ikv, isc, w.ifed);
		if (tail && t1 > n - tail)
			memcpy(s->ck + (size_t)((pos0 + t1 - 1) % (R + 1)) * cf, s->cst, sizeof(float) * cf);
	}
	/* this rank's entries (all of them in one process), by local index */
	if (r)
		v4_page_entries(pg, r, n_loc, pg->ent_w, pg->ent_off, w.ents);
	if (r && r != 4) { /* every entry is read: unpacked once */
		struct unpack_job uj = {&l->comp, w.ents, NULL, w.rows};
		pool_for(pg->pool, (int)n_loc, 64, unpack_range, &uj);
	}
	if (r == 4) {
		v4_page_entries(pg, 4, n_loc, pg->ix_w, pg->ix_off, w.iks);
		for (int t = 0; t < n; t++) {
			v4_index_query(&l->rope, ih, id, pos0 + t, 1, iq + (size_t)t * (size_t)(ih * id));
			v4_index_weights(ih, id, iw + (size_t)t * (size_t)ih);
		}
	}
	for (int t = 0, g0 = 0, g1 = 0; t < n; t++) {
		long p = pos0 + t, lo, nc;
		v4_attn_visible(r, win, p, &lo, &nc);
		int nk = 0;
		for (long k = lo; k <= p; k++) /* the chunk's own rows, else the ring's (DCP: the owner's) */
			if (v4_entry_owned(d, k))
				w.keys[nk++] = k >= pos0 ? kv + (size_t)(k - pos0) * (size_t)hd
							 : s->ring + (size_t)(k % rr) * (size_t)hd;
		int32_t *st = sel ? sel + (size_t)t * (size_t)K : NULL;
		for (int i = 0; st && i < K; i++)
			st[i] = -1;
		if (r == 4) {
			int ns;
			if (d) { /* the group's top-k from its ranks' candidates; this rank's of them */
				if (t == g1) {
					g0 = t, g1 = t + DCP_TOKENS < n ? t + DCP_TOKENS : n;
					if (dcp_candidates(l, pg, &w, pos0, g0, g1, iq, iw, e))
						return -1;
				}
				int ng = v4_index_merge(d->size, w.all + (size_t)(t - g0) * (size_t)K,
							(size_t)(g1 - g0) * (size_t)K, K, w.pick);
				ns = 0;
				for (int i = 0; i < ng; i++) {
					if (st)
						st[i] = w.pick[i];
					if (v4_entry_owned(d, w.pick[i]))
						w.pick[ns++] = (int32_t)v4_entries_local(d, w.pick[i]);
				}
			} else {
				ns = v4_index_select_fast(pg->pool, ih, id, iq + (size_t)t * (size_t)(ih * id),
							  iw + (size_t)t * (size_t)ih, w.iks,
							  l->icomp.kind == V4_COMP_INDEX, (int)nc, K, w.scores,
							  w.pick);
				for (int i = 0; st && i < ns; i++)
					st[i] = w.pick[i];
			}
			struct unpack_job uj = {&l->comp, w.ents, w.pick, w.rows};
			pool_for(pg->pool, ns, 64, unpack_range, &uj);
			for (int i = 0; i < ns; i++)
				w.keys[nk++] = w.rows + (size_t)i * (size_t)hd;
		} else {
			for (long c = 0, nl = v4_entries_local(d, nc); c < nl; c++)
				w.keys[nk++] = w.rows + (size_t)c * (size_t)hd;
		}
		float *ot = o + (size_t)t * (size_t)(H * hd);
		/* under DCP a partial result without the sink, not yet un-roped (the caller merges) */
		v4_attn_fast(pg->pool, H, hd, 1.0f / sqrtf((float)hd), q + (size_t)t * (size_t)(H * hd), w.keys, nk,
			     d ? NULL : l->sink, ot, d ? d->lse + (size_t)t * (size_t)H : w.lse, w.attn);
		if (!d)
			v4_attn_unrope(&l->rope, H, hd, ot, p);
	}
	for (int t = n > rr ? n - rr : 0; t < n; t++) /* the ring keeps the last window + R */
		memcpy(s->ring + (size_t)((pos0 + t) % rr) * (size_t)hd, kv + (size_t)t * (size_t)hd,
		       sizeof(float) * (size_t)hd);
	return 0;
}

int v4_page_slots_dcp(int ratio, int bs, int W, int I)
{
	if (W <= 1 || !ratio)
		return v4_page_slots(ratio, bs);
	long vb = (long)bs * W, most = 0;
	/* the counts repeat with a period of r W I virtual blocks */
	for (int rank = 0; rank < W; rank++) {
		struct v4_dcp d = {W, rank, I, NULL, NULL, NULL};
		for (long x = 0; x < (long)ratio * W * I; x++) {
			long c = v4_entries_local(&d, (x + 1) * vb / ratio) - v4_entries_local(&d, x * vb / ratio);
			most = c > most ? c : most;
		}
	}
	return (int)most;
}
