/* Sampler: greedy, seeds, top-k / top-p / min-p masks, penalties, min_tokens, logprobs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sample.h"
#include "harness.h"

#define V 8

static struct sample_scratch sc;

static void setup(void)
{
	struct err e;
	EXPECT(sample_scratch_init(&sc, V, &e) == 0);
}

/* logits whose softmax is probs (log), others -inf-ish */
static void logits_from_probs(float *l, const double *probs)
{
	for (int i = 0; i < V; i++)
		l[i] = probs[i] > 0 ? (float)log(probs[i]) : -1e30f;
}

static int32_t draw(const float *l, const struct sampling_params *p, struct sample_rng *rng, const int32_t *out,
		    int n_out)
{
	int32_t prompt[2] = {6, 7};
	struct sample_input in = {
		.logits = l, .p = p, .prompt = prompt, .n_prompt = 2, .output = out, .n_output = n_out, .rng = rng};
	return sample_token(&in, &sc, NULL);
}

static void hist(const float *l, const struct sampling_params *p, int n, int *h)
{
	struct sample_rng rng;
	sample_rng_seed(&rng, 99);
	memset(h, 0, sizeof *h * V);
	for (int i = 0; i < n; i++)
		h[draw(l, p, &rng, NULL, 0)]++;
}

static void test_greedy(void)
{
	setup();
	float l[V] = {0.1f, 2.0f, -1.0f, 3.5f, 3.5f, 0, 0, 0};
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.temperature = 0;
	struct sample_rng rng;
	sample_rng_seed(&rng, 1);
	struct sample_rng before = rng;
	EXPECT_EQ_INT(draw(l, &p, &rng, NULL, 0), 3); /* first of a tie, like torch.argmax */
	EXPECT(!memcmp(&rng, &before, sizeof rng));   /* greedy does not consume randomness */
	sample_scratch_fini(&sc);
}

static void test_seed_independent_of_batch(void)
{
	setup();
	double pr[V] = {0.2, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1};
	float l[V];
	logits_from_probs(l, pr);
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	struct sample_rng a, b, other;
	sample_rng_seed(&a, 1234);
	sample_rng_seed(&b, 1234);
	sample_rng_seed(&other, 5);
	int32_t alone[32], mixed[32];
	for (int i = 0; i < 32; i++)
		alone[i] = draw(l, &p, &a, NULL, 0);
	for (int i = 0; i < 32; i++) {
		draw(l, &p, &other, NULL, 0); /* another request sampled in the same step */
		mixed[i] = draw(l, &p, &b, NULL, 0);
		draw(l, &p, &other, NULL, 0);
	}
	EXPECT(!memcmp(alone, mixed, sizeof alone));
	int distinct = 0;
	for (int i = 1; i < 32; i++)
		distinct += alone[i] != alone[0];
	EXPECT(distinct > 0); /* really random */
	sample_scratch_fini(&sc);
}

static void test_distribution(void)
{
	setup();
	double pr[V] = {0.5, 0.3, 0.2, 0, 0, 0, 0, 0};
	float l[V];
	logits_from_probs(l, pr);
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	int h[V];
	hist(l, &p, 20000, h);
	EXPECT_NEAR(h[0] / 20000.0, 0.5, 0.02);
	EXPECT_NEAR(h[1] / 20000.0, 0.3, 0.02);
	EXPECT_NEAR(h[2] / 20000.0, 0.2, 0.02);
	/* temperature 0.5 squares then renormalizes: 25:9:4 */
	p.temperature = 0.5f;
	hist(l, &p, 20000, h);
	EXPECT_NEAR(h[0] / 20000.0, 25.0 / 38, 0.02);
	sample_scratch_fini(&sc);
}

static void test_masks(void)
{
	setup();
	double pr[V] = {0.5, 0.3, 0.2, 0, 0, 0, 0, 0};
	float l[V];
	logits_from_probs(l, pr);
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	int h[V];
	p.top_k = 2;
	hist(l, &p, 4000, h);
	EXPECT(h[2] == 0 && h[0] > 0 && h[1] > 0);
	EXPECT_NEAR(h[0] / 4000.0, 0.625, 0.03);
	p.top_k = 0;
	p.top_p = 0.6f; /* smallest prefix with mass >= 0.6: {0, 1} */
	hist(l, &p, 4000, h);
	EXPECT(h[2] == 0 && h[1] > 0);
	p.top_p = 0.5f; /* token 0 alone reaches 0.5 */
	hist(l, &p, 1000, h);
	EXPECT_EQ_INT(h[0], 1000);
	p.top_p = 1.0f;
	p.min_p = 0.5f; /* keep prob >= 0.25 */
	hist(l, &p, 4000, h);
	EXPECT(h[2] == 0 && h[1] > 0 && h[0] > 0);
	p.min_p = 0;
	p.top_k = 1; /* top_k 1 = greedy */
	hist(l, &p, 500, h);
	EXPECT_EQ_INT(h[0], 500);
	sample_scratch_fini(&sc);
}

static void test_penalties(void)
{
	setup();
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.temperature = 0;
	struct sample_rng rng;
	sample_rng_seed(&rng, 1);
	float l[V] = {2.0f, 1.5f, -0.5f, -0.6f, -9, -9, -9, -9};
	/* repetition 2 over prompt (6, 7) + output: token 0 (positive) halves to 1.0 */
	int32_t out[3] = {0, 0, 3};
	p.repetition_penalty = 2.0f;
	EXPECT_EQ_INT(draw(l, &p, &rng, out, 3), 1);
	/* negative logits are multiplied: token 3 -0.6 -> -1.2, token 2 untouched stays ahead */
	float l2[V] = {-1, -0.5f, -0.55f, -0.45f, -9, -9, -9, -9};
	int32_t out2[1] = {3};
	EXPECT_EQ_INT(draw(l2, &p, &rng, out2, 1), 1);
	p.repetition_penalty = 1.0f;
	/* frequency: 0.3 * count 2 = 0.6 -> token 0 at 1.4 < 1.5 */
	p.frequency_penalty = 0.3f;
	EXPECT_EQ_INT(draw(l, &p, &rng, out, 3), 1);
	p.frequency_penalty = 0.2f; /* 0.4 -> 1.6 > 1.5 */
	EXPECT_EQ_INT(draw(l, &p, &rng, out, 3), 0);
	p.frequency_penalty = 0;
	p.presence_penalty = 0.6f; /* once, whatever the count */
	EXPECT_EQ_INT(draw(l, &p, &rng, out, 3), 1);
	p.presence_penalty = 0.4f;
	EXPECT_EQ_INT(draw(l, &p, &rng, out, 3), 0);
	/* the scratch counters are back to zero */
	for (int i = 0; i < V; i++)
		EXPECT(sc.cnt[i] == 0 && sc.seen[i] == 0);
	/* logit_bias */
	p.presence_penalty = 0;
	p.n_logit_bias = 1;
	p.logit_bias_ids[0] = 5;
	p.logit_bias[0] = 500; /* clamped to 100 */
	EXPECT_EQ_INT(draw(l, &p, &rng, NULL, 0), 5);
	sample_scratch_fini(&sc);
}

static void test_min_tokens_mask(void)
{
	setup();
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.temperature = 0;
	p.min_tokens = 2;
	float l[V] = {0, 5, 1, 0, 0, 0, 0, 0};
	int32_t stop[1] = {1};
	int32_t out[1] = {2};
	struct sample_rng rng;
	sample_rng_seed(&rng, 1);
	struct sample_input in = {
		.logits = l, .p = &p, .output = out, .n_output = 1, .stop_ids = stop, .n_stop_ids = 1, .rng = &rng};
	EXPECT_EQ_INT(sample_token(&in, &sc, NULL), 2);
	in.n_output = 2;
	in.output = (int32_t[2]){2, 2};
	EXPECT_EQ_INT(sample_token(&in, &sc, NULL), 1);
	sample_scratch_fini(&sc);
}

/* Guided decoding's mask: only allowed tokens are drawn, greedy or not; it replaces the
 * min_tokens mask (the grammar may end the output); logprobs are those of the masked logits. */
static void test_allow_mask(void)
{
	setup();
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	float l[V] = {0, 5, 1, 4, 0, 0, 0, 2};
	uint8_t allow[V] = {0, 0, 1, 0, 0, 0, 1, 1};
	struct sample_rng rng;
	sample_rng_seed(&rng, 3);
	struct sample_input in = {.logits = l, .p = &p, .rng = &rng, .allow = allow};
	int h[V] = {0};
	for (int i = 0; i < 2000; i++)
		h[sample_token(&in, &sc, NULL)]++;
	EXPECT(h[0] == 0 && h[1] == 0 && h[3] == 0 && h[4] == 0 && h[5] == 0);
	EXPECT(h[2] > 0 && h[6] > 0 && h[7] > h[2]);
	p.temperature = 0;
	EXPECT_EQ_INT(sample_token(&in, &sc, NULL), 7);
	/* min_tokens would mask stop id 7; the grammar's mask wins */
	p.min_tokens = 5;
	int32_t stop[1] = {7};
	in.stop_ids = stop;
	in.n_stop_ids = 1;
	EXPECT_EQ_INT(sample_token(&in, &sc, NULL), 7);
	p.logprobs = 2;
	struct engine_logprob lp;
	EXPECT_EQ_INT(sample_token(&in, &sc, &lp), 7);
	double z = exp(1.0) + exp(0.0) + exp(2.0);
	EXPECT_NEAR(lp.logprob, 2 - log(z), 1e-5);
	EXPECT_EQ_INT(lp.rank, 1);
	EXPECT_EQ_INT(lp.top_ids[1], 2);
	sample_scratch_fini(&sc);
}

static void test_logprobs(void)
{
	setup();
	struct sampling_params p;
	sampling_params_init(&p, NULL);
	p.temperature = 0;
	p.logprobs = 3;
	p.repetition_penalty = 5; /* processing does not change the raw logprobs */
	float l[V] = {1, 3, 2, 0, 0, 0, 0, 2};
	double z = 0;
	for (int i = 0; i < V; i++)
		z += exp(l[i]);
	struct sample_rng rng;
	sample_rng_seed(&rng, 1);
	int32_t prompt[1] = {1};
	struct sample_input in = {.logits = l, .p = &p, .prompt = prompt, .n_prompt = 1, .rng = &rng};
	struct engine_logprob lp;
	int32_t t = sample_token(&in, &sc, &lp);
	EXPECT_EQ_INT(t, 2); /* token 1 penalized 3 -> 0.6 */
	EXPECT_EQ_INT(lp.token, 2);
	EXPECT_NEAR(lp.logprob, 2 - log(z), 1e-5);
	EXPECT_EQ_INT(lp.rank, 2);
	EXPECT_EQ_INT(lp.n_top, 3);
	EXPECT_EQ_INT(lp.top_ids[0], 1);
	EXPECT_EQ_INT(lp.top_ids[1], 2); /* tie 2 vs 7: lower id first */
	EXPECT_EQ_INT(lp.top_ids[2], 7);
	EXPECT_NEAR(lp.top_logprobs[0], 3 - log(z), 1e-5);
	sample_scratch_fini(&sc);
}

/* Naive reference: sort everything, then min_p / top_k / top_p, one uniform draw. */
static const float *g_ref_x;
static int ref_cmp(const void *a, const void *b)
{
	int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
	if (g_ref_x[i] != g_ref_x[j])
		return g_ref_x[i] > g_ref_x[j] ? -1 : 1;
	return (i > j) - (i < j);
}

static int32_t ref_sample(const float *logits, int vocab, const struct sampling_params *p, struct sample_rng *rng)
{
	float *x = malloc(sizeof *x * (size_t)vocab);
	int32_t *c = malloc(sizeof *c * (size_t)vocab);
	float mx = -INFINITY;
	for (int i = 0; i < vocab; i++) {
		x[i] = logits[i] * (1.0f / p->temperature);
		mx = x[i] > mx ? x[i] : mx;
	}
	float floor_x = p->min_p > 0 ? mx + logf(p->min_p) : -INFINITY;
	int n = 0;
	for (int i = 0; i < vocab; i++)
		if (x[i] >= floor_x)
			c[n++] = i;
	g_ref_x = x;
	/* the draw walks candidates in id order unless top-k / top-p sorted them */
	if ((p->top_k > 0 && p->top_k < n) || p->top_p < 1)
		qsort(c, (size_t)n, sizeof *c, ref_cmp);
	if (p->top_k > 0 && p->top_k < n)
		n = p->top_k;
	if (p->top_p < 1) {
		double z = 0, cum = 0;
		for (int i = 0; i < n; i++)
			z += exp((double)x[c[i]] - mx);
		for (int i = 0; i < n; i++) {
			cum += exp((double)x[c[i]] - mx);
			if (cum >= p->top_p * z) {
				n = i + 1;
				break;
			}
		}
	}
	double z = 0, cum = 0;
	for (int i = 0; i < n; i++)
		z += exp((double)x[c[i]] - mx);
	double u = sample_rng_uniform(rng) * z;
	int32_t tok = c[n - 1];
	for (int i = 0; i < n; i++) {
		cum += exp((double)x[c[i]] - mx);
		if (u < cum) {
			tok = c[i];
			break;
		}
	}
	free(x);
	free(c);
	return tok;
}

/* The fast paths (quickselect for top-k, a mass threshold before sorting for top-p) pick
 * exactly what a full sort picks, on a large vocabulary with a long tail and ties. */
static void test_matches_full_sort(void)
{
	enum { BV = 4096 };
	struct sample_scratch big;
	struct err e;
	EXPECT(sample_scratch_init(&big, BV, &e) == 0);
	float *l = malloc(sizeof *l * BV);
	struct sample_rng gen;
	sample_rng_seed(&gen, 2024);
	int mismatches = 0;
	for (int trial = 0; trial < 300; trial++) {
		double spread = 1 + 6 * sample_rng_uniform(&gen);
		for (int i = 0; i < BV; i++) {
			double u1 = sample_rng_uniform(&gen) + 1e-12, u2 = sample_rng_uniform(&gen);
			l[i] = (float)(spread * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
			if (i % 97 == 0)
				l[i] = l[i / 2]; /* ties */
		}
		struct sampling_params p;
		sampling_params_init(&p, NULL);
		p.temperature = 0.3f + (float)sample_rng_uniform(&gen);
		int mode = trial % 4;
		if (mode == 0 || mode == 2)
			p.top_p = 0.05f + 0.9f * (float)sample_rng_uniform(&gen);
		if (mode == 1 || mode == 2)
			p.top_k = 1 + (int)(sample_rng_uniform(&gen) * 200);
		if (mode == 3)
			p.min_p = 0.01f + 0.2f * (float)sample_rng_uniform(&gen);
		if (trial % 8 >= 4) /* a spike over a wide flat bulk: the top-p threshold must widen */
			for (int i = 0; i < BV; i++)
				l[i] = i == trial ? 9.0f * p.temperature : l[i] / (float)spread * 0.3f * p.temperature;
		struct sample_rng a, b;
		sample_rng_seed(&a, (uint64_t)trial);
		sample_rng_seed(&b, (uint64_t)trial);
		struct sample_input in = {.logits = l, .p = &p, .rng = &a};
		int32_t got = sample_token(&in, &big, NULL);
		int32_t want = ref_sample(l, BV, &p, &b);
		mismatches += got != want;
	}
	EXPECT_EQ_INT(mismatches, 0);
	free(l);
	sample_scratch_fini(&big);
}

static void test_validate(void)
{
	struct sampling_params p;
	struct err e;
	sampling_params_init(&p, NULL);
	EXPECT(sampling_params_validate(&p, 100, &e) == 0);
	p.top_p = 0;
	EXPECT(sampling_params_validate(&p, 100, &e) < 0);
	EXPECT(strstr(e.msg, "top_p") != NULL);
	sampling_params_init(&p, NULL);
	p.temperature = -1;
	EXPECT(sampling_params_validate(&p, 100, &e) < 0);
	sampling_params_init(&p, NULL);
	p.n_stop_token_ids = 1;
	p.stop_token_ids[0] = 100;
	EXPECT(sampling_params_validate(&p, 100, &e) < 0);
	sampling_params_init(&p, NULL);
	p.n_stop = 1;
	EXPECT(sampling_params_validate(&p, 100, &e) < 0); /* empty stop string */
}

TESTS(T(test_greedy), T(test_seed_independent_of_batch), T(test_distribution), T(test_masks), T(test_penalties),
      T(test_min_tokens_mask), T(test_allow_mask), T(test_logprobs), T(test_matches_full_sort), T(test_validate))
