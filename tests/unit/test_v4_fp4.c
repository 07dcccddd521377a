/* model_v4/fp4 and model_v4/v4_quant against scripts/v4_reference.py (v4-units/fp4.json,
 * quant.json): e2m1 / e8m0 tables, rows of tiny-v4's FP4 expert layers.2.ffn.experts.1.w1
 * (nibble order, scales), the reference GEMV; the fp8 / fp4 round trips (exact) and the
 * Hadamard rotation. */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "model_v4/fp4.h"
#include "model_v4/v4_quant.h"
#include "ops/vec.h"
#include "unit/v4_vec.h"

static void test_tables(void)
{
	json_t *j = v4v_load("fp4.json");
	double *e2m1 = v4v_f64(j, "e2m1");
	for (int c = 0; c < 16; c++)
		EXPECT(fp4_e2m1_to_f32((uint8_t)c) == (float)e2m1[c]);
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(j, "e8m0"), k, v)
	{
		float got = fp4_e8m0_to_f32((uint8_t)atoi(k));
		EXPECTF(got == (float)json_number_value(v), "e8m0 %s: %g, expected %g", k, got, json_number_value(v));
	}
	EXPECT(isnan(fp4_e8m0_to_f32(0xff)));
	/* encode: every code decodes and re-encodes to itself (-0 included); ties to even */
	for (int c = 0; c < 16; c++)
		EXPECT_EQ_INT(fp4_f32_to_e2m1(fp4_e2m1_to_f32((uint8_t)c)), c);
	EXPECT_EQ_INT(fp4_f32_to_e2m1(0.25f), 0);  /* 0 | 0.5: even code 0 */
	EXPECT_EQ_INT(fp4_f32_to_e2m1(0.75f), 2);  /* 0.5 | 1: code 2 (1.0) */
	EXPECT_EQ_INT(fp4_f32_to_e2m1(1.25f), 2);  /* 1 | 1.5: code 2 */
	EXPECT_EQ_INT(fp4_f32_to_e2m1(2.5f), 4);   /* 2 | 3: code 4 */
	EXPECT_EQ_INT(fp4_f32_to_e2m1(5.0f), 6);   /* 4 | 6: code 6 */
	EXPECT_EQ_INT(fp4_f32_to_e2m1(-5.1f), 15); /* -6 */
	EXPECT_EQ_INT(fp4_f32_to_e2m1(100.0f), 7);
	free(e2m1);
	json_decref(j);
}

static void test_checkpoint_rows(void)
{
	json_t *j = v4v_load("fp4.json");
	int rows = v4v_int(j, "rows"), k = v4v_int(j, "k");
	long long *pk = v4v_i64(j, "packed"), *sc = v4v_i64(j, "scales");
	int nb = (k + FP4_BLOCK - 1) / FP4_BLOCK;
	uint8_t *packed = malloc((size_t)rows * (size_t)k / 2), *scales = malloc((size_t)rows * (size_t)nb);
	for (int i = 0; i < rows * k / 2; i++)
		packed[i] = (uint8_t)pk[i];
	for (int i = 0; i < rows * nb; i++)
		scales[i] = (uint8_t)sc[i];
	double *want = v4v_f64(j, "decoded"), *ywant = v4v_f64(j, "y");
	float *x = v4v_f32(j, "x"), *row = malloc((size_t)k * sizeof *row), y[16];
	for (int r = 0; r < rows; r++) {
		fp4_decode_row(packed + (size_t)r * (size_t)k / 2, scales + (size_t)r * (size_t)nb, k, row);
		int bad = v4v_mismatches(row, want + (size_t)r * (size_t)k, k);
		EXPECTF(bad == 0, "%s row %d: %d values differ from the reference's decoding",
			json_string_value(v4v_get(j, "tensor")), r, bad);
	}
	CHECK(rows <= 16);
	fp4_gemv_ref(packed, scales, rows, k, x, y);
	double d = v4v_maxdiff(y, ywant, rows);
	printf("# fp4 gemv vs reference: max abs %.3g\n", d);
	EXPECTF(d < 1e-5, "gemv: max abs %g", d);
	free(pk), free(sc), free(packed), free(scales), free(want), free(ywant), free(x), free(row);
	json_decref(j);
}

static void test_round_trips(void)
{
	json_t *j = v4v_load("quant.json");
	size_t i;
	json_t *c;
	json_array_foreach(v4v_get(j, "cases"), i, c)
	{
		int n = v4v_len(c, "x");
		static const struct {
			const char *key;
			int fp4, block;
		} kinds[] = {{"fp8_64", 0, 64}, {"fp8_128", 0, 128}, {"fp4_32", 1, 32}};
		for (int t = 0; t < 3; t++) {
			float *x = v4v_f32(c, "x");
			double *want = v4v_f64(c, kinds[t].key);
			if (kinds[t].fp4)
				v4_fp4_sim(x, n, kinds[t].block);
			else
				v4_fp8_sim(x, n, kinds[t].block);
			int bad = v4v_mismatches(x, want, n);
			EXPECTF(bad == 0, "case %zu %s: %d of %d values differ (max %g)", i, kinds[t].key, bad, n,
				v4v_maxdiff(x, want, n));
			free(x), free(want);
		}
	}
	double worst = 0;
	json_array_foreach(v4v_get(j, "hadamard"), i, c)
	{
		int n = v4v_len(c, "x");
		float *x = v4v_f32(c, "x");
		double *want = v4v_f64(c, "y");
		ops_hadamard(x, n);
		double d = v4v_maxdiff(x, want, n);
		worst = d > worst ? d : worst;
		ops_hadamard(x, n); /* an involution */
		float *x0 = v4v_f32(c, "x");
		for (int k = 0; k < n; k++)
			EXPECT_NEAR(x[k], x0[k], 1e-6);
		free(x), free(x0), free(want);
	}
	printf("# hadamard vs reference: max abs %.3g\n", worst);
	EXPECTF(worst < 1e-6, "hadamard: max abs %g", worst);
	json_decref(j);
}

TESTS(T(test_tables), T(test_checkpoint_rows), T(test_round_trips))
