/* Sampler (vLLM V1 order; see sample.h). */
#include "engine/sample.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void sample_rng_seed(struct sample_rng *r, uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sample_rng_next(struct sample_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double sample_rng_uniform(struct sample_rng *r)
{
	return (double)(sample_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

int sample_scratch_init(struct sample_scratch *s, int vocab, struct err *e)
{
	memset(s, 0, sizeof *s);
	s->vocab = vocab;
	s->x = malloc(sizeof *s->x * (size_t)vocab);
	s->idx = malloc(sizeof *s->idx * (size_t)vocab);
	s->cnt = calloc((size_t)vocab, sizeof *s->cnt);
	s->seen = calloc((size_t)vocab, 1);
	s->masked = malloc(sizeof *s->masked * (size_t)vocab);
	if (!s->x || !s->idx || !s->cnt || !s->seen || !s->masked) {
		sample_scratch_fini(s);
		return err_set(e, "sampler: out of memory for vocab %d", vocab);
	}
	return 0;
}

void sample_scratch_fini(struct sample_scratch *s)
{
	free(s->x);
	free(s->idx);
	free(s->cnt);
	free(s->seen);
	free(s->masked);
	memset(s, 0, sizeof *s);
}

/* Descending by value, ties by ascending id: a total order, so results are deterministic. */
static int cmp_desc(const void *a, const void *b, void *ctx)
{
	const float *x = ctx;
	int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
	float xi = x[i], xj = x[j];
	if (xi > xj)
		return -1;
	if (xi < xj)
		return 1;
	return (i > j) - (i < j);
}

/* Partially orders c[0, n) so that c[0, k) holds the k first ids in cmp_desc order
 * (quickselect, median-of-three pivots). */
static void select_top(int32_t *c, int n, int k, const float *x)
{
	int lo = 0, hi = n - 1;
	void *ctx = (void *)x;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		/* median of three to c[mid] */
		if (cmp_desc(&c[mid], &c[lo], ctx) < 0) {
			int32_t t = c[mid];
			c[mid] = c[lo];
			c[lo] = t;
		}
		if (cmp_desc(&c[hi], &c[lo], ctx) < 0) {
			int32_t t = c[hi];
			c[hi] = c[lo];
			c[lo] = t;
		}
		if (cmp_desc(&c[hi], &c[mid], ctx) < 0) {
			int32_t t = c[hi];
			c[hi] = c[mid];
			c[mid] = t;
		}
		int32_t pivot = c[mid];
		int i = lo, j = hi;
		while (i <= j) {
			while (cmp_desc(&c[i], &pivot, ctx) < 0)
				i++;
			while (cmp_desc(&c[j], &pivot, ctx) > 0)
				j--;
			if (i <= j) {
				int32_t t = c[i];
				c[i] = c[j];
				c[j] = t;
				i++;
				j--;
			}
		}
		if (k - 1 <= j)
			hi = j;
		else if (k - 1 >= i)
			lo = i;
		else
			return;
	}
}

/* Ids of the k largest x (ties: lower id first), sorted descending, into out[k]. A bounded
 * insertion list: O(vocab * k) worst case, k <= vocab; fine for k <= a few hundred and
 * used only for top-N logprobs (N <= 20). */
static int top_n(const float *x, int vocab, int k, int32_t *out)
{
	int n = 0;
	for (int i = 0; i < vocab; i++) {
		if (n == k && !(x[i] > x[out[n - 1]]))
			continue;
		int j = n < k ? n++ : n - 1;
		while (j > 0 && x[i] > x[out[j - 1]]) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = i;
	}
	return n;
}

static int32_t argmax(const float *x, int vocab)
{
	int32_t best = 0;
	for (int i = 1; i < vocab; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

void sample_logprob_of(const float *l, int vocab, int32_t tok, int n, struct engine_logprob *lp)
{
	float mx = l[argmax(l, vocab)];
	double z = 0;
	for (int i = 0; i < vocab; i++)
		z += exp((double)l[i] - mx);
	double lse = mx + log(z);
	lp->token = tok;
	lp->logprob = (float)(l[tok] - lse);
	int rank = 1;
	for (int i = 0; i < vocab; i++)
		rank += l[i] > l[tok];
	lp->rank = rank;
	if (n > ENGINE_MAX_LOGPROBS)
		n = ENGINE_MAX_LOGPROBS;
	if (n > vocab)
		n = vocab;
	lp->n_top = top_n(l, vocab, n, lp->top_ids);
	for (int i = 0; i < lp->n_top; i++)
		lp->top_logprobs[i] = (float)(l[lp->top_ids[i]] - lse);
}

static void apply_penalties(const struct sample_input *in, struct sample_scratch *s)
{
	const struct sampling_params *p = in->p;
	float *x = s->x;
	int V = s->vocab;
	if (p->repetition_penalty != 1.0f) {
		float rp = p->repetition_penalty;
		for (int pass = 0; pass < 2; pass++) {
			const int32_t *t = pass ? in->output : in->prompt;
			int n = pass ? in->n_output : in->n_prompt;
			for (int i = 0; i < n; i++) {
				int32_t id = t[i];
				if (id < 0 || id >= V || s->seen[id])
					continue;
				s->seen[id] = 1;
				x[id] = x[id] > 0 ? x[id] / rp : x[id] * rp;
			}
		}
		for (int pass = 0; pass < 2; pass++) { /* clear the marks */
			const int32_t *t = pass ? in->output : in->prompt;
			int n = pass ? in->n_output : in->n_prompt;
			for (int i = 0; i < n; i++)
				if (t[i] >= 0 && t[i] < V)
					s->seen[t[i]] = 0;
		}
	}
	if (p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f) {
		for (int i = 0; i < in->n_output; i++)
			if (in->output[i] >= 0 && in->output[i] < V)
				s->cnt[in->output[i]]++;
		for (int i = 0; i < in->n_output; i++) {
			int32_t id = in->output[i];
			if (id < 0 || id >= V || s->cnt[id] == 0)
				continue;
			x[id] -= p->frequency_penalty * (float)s->cnt[id] + p->presence_penalty;
			s->cnt[id] = 0; /* applied once; also leaves the array zeroed */
		}
	}
}

void sample_logit_bias(const struct sampling_params *p, float *x, int V)
{
	for (int i = 0; i < p->n_logit_bias; i++) {
		int32_t id = p->logit_bias_ids[i];
		if (id >= 0 && id < V) {
			float b = p->logit_bias[i];
			x[id] += b > 100 ? 100 : b < -100 ? -100 : b;
		}
	}
}

int32_t sample_token(const struct sample_input *in, struct sample_scratch *s, struct engine_logprob *lp)
{
	const struct sampling_params *p = in->p;
	int V = s->vocab;
	float *x = s->x;
	const float *raw = in->logits;
	if (in->allow) {
		for (int i = 0; i < V; i++)
			s->masked[i] = in->allow[i] ? in->logits[i] : -INFINITY;
		raw = s->masked;
	}
	memcpy(x, raw, sizeof *x * (size_t)V);
	sample_logit_bias(p, x, V);
	if (in->ban)
		for (int i = 0; i < V; i++)
			if (in->ban[i])
				x[i] = -INFINITY;
	if (in->n_output < p->min_tokens && !in->allow)
		for (int i = 0; i < in->n_stop_ids; i++)
			if (in->stop_ids[i] >= 0 && in->stop_ids[i] < V)
				x[in->stop_ids[i]] = -INFINITY;
	apply_penalties(in, s);

	int32_t tok;
	if (p->temperature < 1e-5f) {
		tok = argmax(x, V);
		if (!(x[tok] > -INFINITY)) /* everything masked: the raw argmax, as below */
			tok = argmax(raw, V);
		goto done;
	}
	float inv_t = 1.0f / p->temperature;
	float mx = -INFINITY;
	for (int i = 0; i < V; i++) {
		x[i] *= inv_t;
		if (x[i] > mx)
			mx = x[i];
	}
	if (!(mx > -INFINITY)) { /* everything masked: fall back to the raw argmax */
		tok = argmax(raw, V);
		goto done;
	}
	/* candidates: min_p drops tokens with prob < min_p * max_prob */
	float floor_x = -INFINITY;
	if (p->min_p > 0)
		floor_x = mx + logf(p->min_p);
	int32_t *c = s->idx;
	int n = 0;
	for (int i = 0; i < V; i++)
		if (x[i] > -INFINITY && x[i] >= floor_x)
			c[n++] = i;
	int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
	bool sorted = false;
	if (k < n) {
		/* top-k: select the k largest in O(n), then sort only those */
		select_top(c, n, k, x);
		qsort_r(c, (size_t)k, sizeof *c, cmp_desc, x);
		n = k;
		sorted = true;
	}
	if (p->top_p < 1.0f) {
		double zall = 0;
		for (int i = 0; i < n; i++)
			zall += exp((double)x[c[i]] - mx);
		double target = (double)p->top_p * zall;
		if (!sorted) {
			/* The nucleus lies inside {x >= thr} once that set holds more than the
			 * target mass: sort only it (a big vocabulary is mostly a long tail). */
			double thr = mx - 8;
			for (;;) {
				double m = 0;
				for (int i = 0; i < n; i++)
					if (x[c[i]] >= thr)
						m += exp((double)x[c[i]] - mx);
				if (m >= target + 1e-9 * zall || thr < mx - 200)
					break;
				thr = mx - 2 * (mx - thr);
			}
			int m = 0;
			if (thr >= mx - 200)
				for (int i = 0; i < n; i++)
					if (x[c[i]] >= thr)
						c[m++] = c[i];
			n = thr >= mx - 200 ? m : n;
			qsort_r(c, (size_t)n, sizeof *c, cmp_desc, x);
		}
		double cum = 0;
		int keep = n;
		for (int i = 0; i < n; i++) {
			cum += exp((double)x[c[i]] - mx);
			if (cum >= target) {
				keep = i + 1;
				break;
			}
		}
		n = keep;
	}
	double z = 0;
	for (int i = 0; i < n; i++)
		z += exp((double)x[c[i]] - mx);
	double u = sample_rng_uniform(in->rng) * z, cum = 0;
	tok = c[n - 1];
	for (int i = 0; i < n; i++) {
		cum += exp((double)x[c[i]] - mx);
		if (u < cum) {
			tok = c[i];
			break;
		}
	}
done:
	if (p->logprobs >= 0 && lp)
		sample_logprob_of(raw, V, tok, p->logprobs, lp);
	return tok;
}

const uint8_t *sample_banned(const struct sampling_params *p, const int32_t *out, int n_out, int V, uint8_t *ban)
{
	if (!p->n_allowed && !p->n_bad)
		return NULL;
	memset(ban, p->n_allowed ? 1 : 0, (size_t)V);
	for (int i = 0; i < p->n_allowed; i++)
		ban[p->allowed_ids[i]] = 0;
	int n_free = 0;
	for (int i = 0; i < V && n_free < 2; i++)
		n_free += !ban[i];
	for (int i = 0, at = 0; i < p->n_bad; at += p->bad_lens[i++]) {
		const int32_t *w = p->bad_words + at;
		int L = p->bad_lens[i];
		if (L - 1 > n_out || memcmp(out + n_out - (L - 1), w, sizeof *w * (size_t)(L - 1)))
			continue; /* the output does not end with the word's head */
		if (!ban[w[L - 1]] && n_free > 1) {
			ban[w[L - 1]] = 1;
			n_free = 0;
			for (int v = 0; v < V && n_free < 2; v++)
				n_free += !ban[v];
		}
	}
	return ban;
}
