/* A JSON Schema number's keywords (minimum, exclusiveMinimum, maximum, exclusiveMaximum,
 * multipleOf) as one DFA over its decimal text: the bounds through guide/int_range.h, the
 * multiples through guide/num_multiple.h, intersected (guide/dfa_ops.h). */
#include "guide/number_dfa.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "guide/dfa_ops.h"
#include "guide/int_range.h"
#include "guide/num_multiple.h"

/* the strictest of minimum / exclusiveMinimum and of maximum / exclusiveMaximum (each a
 * number, or draft 4's boolean beside minimum / maximum) */
struct bounds {
	bool has_lo, lo_excl, has_hi, hi_excl;
	double lo, hi;
};

static int read_bounds(const json_t *s, const char *path, struct bounds *b, struct err *e)
{
	static const char *const keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
	memset(b, 0, sizeof *b);
	for (int k = 0; k < 4; k++) {
		const json_t *v = json_object_get(s, keys[k]);
		if (!v || (k % 2 && json_is_boolean(v)))
			continue;
		if (!json_is_number(v))
			return err_set(e, "%s.%s must be a number", path, keys[k]);
		double x = json_number_value(v);
		if (!(x > -9.2e18 && x < 9.2e18))
			return err_set(e, "%s.%s is out of the int64 range", path, keys[k]);
		bool excl = k % 2 || json_is_true(json_object_get(s, keys[k + 1]));
		if (k < 2 && (!b->has_lo || x > b->lo || (x == b->lo && excl)))
			b->has_lo = true, b->lo = x, b->lo_excl = excl;
		if (k >= 2 && (!b->has_hi || x < b->hi || (x == b->hi && excl)))
			b->has_hi = true, b->hi = x, b->hi_excl = excl;
	}
	return 0;
}

/* a bounded integer or number as a DFA (guide/int_range.h); *dfa NULL when unbounded */
static int bounded_dfa(const json_t *s, const char *path, bool integer, struct guide_dfa **dfa, struct err *e)
{
	struct bounds b;
	*dfa = NULL;
	if (read_bounds(s, path, &b, e) < 0)
		return -1;
	if (!b.has_lo && !b.has_hi)
		return 0;
	char *re;
	int rc;
	if (integer) {
		long long lo = b.lo_excl ? (long long)floor(b.lo) + 1 : (long long)ceil(b.lo);
		long long hi = b.hi_excl ? (long long)ceil(b.hi) - 1 : (long long)floor(b.hi);
		rc = guide_int_range_regex(b.has_lo, lo, b.has_hi, hi, &re, e);
	} else {
		rc = guide_num_range_regex(b.has_lo, b.lo, b.lo_excl, b.has_hi, b.hi, b.hi_excl, &re, e);
	}
	if (rc < 0)
		return err_prefix(e, "%s", path);
	rc = guide_dfa_compile(re, strlen(re), dfa, e);
	free(re);
	return rc < 0 ? err_prefix(e, "%s", path) : 0;
}

/* bounded_dfa's automaton, restricted to the multiples of multipleOf when there is one */
int guide_number_dfa(const json_t *s, const char *path, bool integer, struct guide_dfa **dfa, struct err *e)
{
	if (bounded_dfa(s, path, integer, dfa, e) < 0)
		return -1;
	const json_t *mo = json_object_get(s, "multipleOf");
	if (!mo)
		return 0;
	struct guide_dfa *mult = NULL, *both = NULL;
	if (!json_is_number(mo) || guide_dfa_multiple(json_number_value(mo), integer, &mult, e) < 0) {
		if (!json_is_number(mo))
			err_set(e, "multipleOf must be a number");
		guide_dfa_free(*dfa);
		*dfa = NULL;
		return err_prefix(e, "%s", path);
	}
	if (!*dfa) {
		*dfa = mult;
		return 0;
	}
	int rc = guide_dfa_intersect(*dfa, mult, "no number in the bounds is a multiple of multipleOf", &both, e);
	guide_dfa_free(*dfa);
	guide_dfa_free(mult);
	*dfa = both;
	return rc < 0 ? err_prefix(e, "%s", path) : 0;
}
