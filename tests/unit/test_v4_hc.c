/* model_v4/hc against scripts/v4_reference.py's Model.hc_pre / hc_post / hc_head
 * (v4-units/hc.json: hc 4 streams of D 16, 3 tokens, Sinkhorn 20), plus the Sinkhorn result
 * being (nearly) doubly stochastic and hc_post in place. */
#include <string.h>

#include "harness.h"
#include "model_v4/hc.h"
#include "unit/v4_vec.h"

static void test_vs_reference(void)
{
	json_t *j = v4v_load("hc.json");
	int hc = v4v_int(j, "hc"), dim = v4v_int(j, "dim"), n = v4v_int(j, "n");
	float *fn = v4v_f32(j, "fn"), *scale = v4v_f32(j, "scale"), *base = v4v_f32(j, "base");
	float *hfn = v4v_f32(j, "head_fn"), *hscale = v4v_f32(j, "head_scale"), *hbase = v4v_f32(j, "head_base");
	float *x = v4v_f32(j, "x"), *out = v4v_f32(j, "out");
	double *wy = v4v_f64(j, "y"), *wpost = v4v_f64(j, "post"), *wcomb = v4v_f64(j, "comb");
	double *wx = v4v_f64(j, "x_next"), *wh = v4v_f64(j, "head_y");
	struct v4_hc h = {
		hc,    dim, v4v_int(j, "iters"), (float)v4v_num(j, "norm_eps"), (float)v4v_num(j, "hc_eps"), fn,
		scale, base};
	struct v4_hc head = h;
	head.fn = hfn, head.scale = hscale, head.base = hbase;
	size_t nx = (size_t)n * (size_t)hc * (size_t)dim;
	float *y = malloc((size_t)n * (size_t)dim * sizeof *y), *post = malloc((size_t)n * (size_t)hc * sizeof *post);
	float *comb = malloc((size_t)n * (size_t)(hc * hc) * sizeof *comb), *xo = malloc(nx * sizeof *xo);
	float *hy = malloc((size_t)n * (size_t)dim * sizeof *hy);
	v4_hc_pre(&h, n, x, y, post, comb);
	v4_hc_post(hc, dim, n, out, x, post, comb, xo);
	v4_hc_head(&head, n, x, hy);
	double dy = v4v_maxdiff(y, wy, n * dim), dp = v4v_maxdiff(post, wpost, n * hc);
	double dc = v4v_maxdiff(comb, wcomb, n * hc * hc), dx = v4v_maxdiff(xo, wx, (int)nx);
	double dh = v4v_maxdiff(hy, wh, n * dim);
	printf("# hc vs reference, max abs: y %.3g post %.3g comb %.3g x_next %.3g head %.3g\n", dy, dp, dc, dx, dh);
	EXPECTF(dy < 2e-6 && dp < 1e-6 && dc < 1e-6 && dx < 2e-6 && dh < 2e-6, "y %g post %g comb %g x %g head %g", dy,
		dp, dc, dx, dh);
	/* in place: xo aliasing x gives the same */
	v4_hc_post(hc, dim, n, out, x, post, comb, x);
	EXPECT(memcmp(x, xo, nx * sizeof *x) == 0);
	free(fn), free(scale), free(base), free(hfn), free(hscale), free(hbase), free(x), free(out);
	free(wy), free(wpost), free(wcomb), free(wx), free(wh), free(y), free(post), free(comb), free(xo), free(hy);
	json_decref(j);
}

static void test_sinkhorn(void)
{
	/* after 20 rounds the rows and columns sum to ~1 (the eps terms keep them slightly off) */
	float c[16];
	uint64_t s = 5;
	for (int i = 0; i < 16; i++)
		c[i] = 4 * test_frand(&s);
	v4_hc_sinkhorn(4, 20, 1e-6f, c);
	for (int a = 0; a < 4; a++) {
		double r = 0, col = 0;
		for (int b = 0; b < 4; b++) {
			r += c[a * 4 + b];
			col += c[b * 4 + a];
			EXPECT(c[a * 4 + b] > 0);
		}
		EXPECT_NEAR(col, 1, 1e-5);
		EXPECT_NEAR(r, 1, 1e-3);
	}
}

TESTS(T(test_vs_reference), T(test_sinkhorn))
