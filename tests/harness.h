/* Tiny test harness. A test binary is a list of TEST() functions run by harness_main; each
 * prints "ok - name" or "not ok - name: why"; tests/run.sh counts them. */
#ifndef MLA_TESTS_HARNESS_H
#define MLA_TESTS_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

struct test_case {
	const char *name;
	void (*fn)(void);
};

extern int harness_failed; /* set by EXPECT when the current test fails */
void harness_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int harness_main(int argc, char **argv, const struct test_case *cases, int n);
/* Path of a fixture: tests/fixtures/<rel>, resolved against MLASERVE_TEST_ROOT or the cwd. */
const char *fixture_path(const char *rel);

#define EXPECT(cond)                                                            \
	do {                                                                    \
		if (!(cond))                                                    \
			harness_fail(__FILE__, __LINE__, "expected %s", #cond); \
	} while (0)
#define EXPECTF(cond, ...)                                             \
	do {                                                           \
		if (!(cond))                                           \
			harness_fail(__FILE__, __LINE__, __VA_ARGS__); \
	} while (0)
#define EXPECT_EQ_INT(a, b)                                                                                  \
	do {                                                                                                 \
		long long _a = (long long)(a), _b = (long long)(b);                                          \
		if (_a != _b)                                                                                \
			harness_fail(__FILE__, __LINE__, "%s == %lld, expected %s == %lld", #a, _a, #b, _b); \
	} while (0)
#define EXPECT_NEAR(a, b, tol)                                                                            \
	do {                                                                                              \
		double _a = (double)(a), _b = (double)(b);                                                \
		if (!(fabs(_a - _b) <= (tol)))                                                            \
			harness_fail(__FILE__, __LINE__, "%s = %.9g, expected %.9g (tol %g)", #a, _a, _b, \
				     (double)(tol));                                                      \
	} while (0)

/* The tests' random source, xorshift64: a fixed seed per test file keeps every run the same.
 * test_rand: 32 random bits; test_frand: uniform in [-1, 1). */
static inline uint32_t test_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 32);
}
static inline float test_frand(uint64_t *s) { return (float)test_rand(s) / 4294967296.0f * 2.0f - 1.0f; }

#define TESTS(...)                                                                             \
	int main(int argc, char **argv)                                                        \
	{                                                                                      \
		static const struct test_case cases[] = {__VA_ARGS__};                         \
		return harness_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0])); \
	}
#define T(fn)           \
	{               \
#fn, fn \
	}

#endif
