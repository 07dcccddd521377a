/* Reading the model_v4 test vectors (tests/fixtures/v4-units/NAME.json, written by
 * scripts/make_v4_unit_vectors.py): a file as a jansson object, arrays of numbers as malloc'd
 * float / double / int arrays. A missing file or key fails the test and aborts it. */
#ifndef MLA_TESTS_UNIT_V4_VEC_H
#define MLA_TESTS_UNIT_V4_VEC_H

#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "base/err.h"
#include "harness.h"

static inline json_t *v4v_load(const char *name)
{
	char rel[256];
	json_error_t je;
	snprintf(rel, sizeof rel, "v4-units/%s", name);
	json_t *j = json_load_file(fixture_path(rel), 0, &je);
	if (!j) {
		fprintf(stderr, "%s: %s (run scripts/make_v4_unit_vectors.py)\n", rel, je.text);
		abort();
	}
	return j;
}

static inline const json_t *v4v_get(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	if (!v) {
		fprintf(stderr, "v4 vectors: no key \"%s\"\n", key);
		abort();
	}
	return v;
}

static inline int v4v_len(const json_t *o, const char *key) { return (int)json_array_size(v4v_get(o, key)); }
static inline int v4v_int(const json_t *o, const char *key) { return (int)json_integer_value(v4v_get(o, key)); }
static inline double v4v_num(const json_t *o, const char *key) { return json_number_value(v4v_get(o, key)); }

/* o[key] (a list of numbers) as float (inputs: exact float32 values) or double (expected) */
static inline float *v4v_f32(const json_t *o, const char *key)
{
	const json_t *a = v4v_get(o, key);
	float *p = malloc((json_array_size(a) + 1) * sizeof *p);
	CHECK(p);
	for (size_t i = 0; i < json_array_size(a); i++)
		p[i] = (float)json_number_value(json_array_get(a, i));
	return p;
}

static inline double *v4v_f64(const json_t *o, const char *key)
{
	const json_t *a = v4v_get(o, key);
	double *p = malloc((json_array_size(a) + 1) * sizeof *p);
	CHECK(p);
	for (size_t i = 0; i < json_array_size(a); i++)
		p[i] = json_number_value(json_array_get(a, i));
	return p;
}

static inline long long *v4v_i64(const json_t *o, const char *key)
{
	const json_t *a = v4v_get(o, key);
	long long *p = malloc((json_array_size(a) + 1) * sizeof *p);
	CHECK(p);
	for (size_t i = 0; i < json_array_size(a); i++)
		p[i] = json_integer_value(json_array_get(a, i));
	return p;
}

/* max |got[i] - want[i]| over n */
static inline double v4v_maxdiff(const float *got, const double *want, int n)
{
	double m = 0;
	for (int i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]);
		if (!(d <= m))
			m = isnan(d) ? INFINITY : d;
	}
	return m;
}

/* how many got[i] differ from want[i] cast to float (want: a float32 value in 9 digits) */
static inline int v4v_mismatches(const float *got, const double *want, int n)
{
	int bad = 0;
	for (int i = 0; i < n; i++)
		bad += got[i] != (float)want[i];
	return bad;
}

#endif
