/* Deterministic random weights for --load-format dummy (dummy.h): per-chunk splitmix streams
 * seeded by the tensor's name and the dummy seed, so any thread count gives the same values. */
#include "model/dummy.h"

#include <math.h>

#include "ops/pool.h"

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s, uint64_t seed)
{
	uint64_t h = 1469598103934665603ull ^ seed;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

#define DUMMY_CHUNK 65536
struct dummy_ctx {
	uint16_t *dst;
	size_t n;
	uint64_t seed;
	float amp;
};

/* Random bf16 bit patterns: random sign and mantissa, exponent spread over the 4 binades
 * below amp (|w| in [amp/16, amp)), so weights have a sensible scale whatever the width.
 * Chunk k uses its own stream, so the thread count does not change the values. */
static void dummy_fill(void *arg, int begin, int end, int tid)
{
	const struct dummy_ctx *c = arg;
	int e_top = 0;
	frexpf(c->amp, &e_top); /* amp in [2^(e_top-1), 2^e_top) */
	uint16_t ebase = (uint16_t)(e_top - 1 + 127);
	for (int k = begin; k < end; k++) {
		uint64_t s = c->seed ^ ((uint64_t)k * 0xd1342543de82ef95ull);
		size_t i0 = (size_t)k * DUMMY_CHUNK, i1 = i0 + DUMMY_CHUNK < c->n ? i0 + DUMMY_CHUNK : c->n;
		for (size_t i = i0; i < i1; i += 4) {
			uint64_t r = splitmix(&s);
			for (size_t j = 0; j < 4 && i + j < i1; j++) {
				uint16_t b = (uint16_t)(r >> (16 * j));
				uint16_t e = (uint16_t)(ebase - ((b >> 8) & 3));
				c->dst[i + j] = (uint16_t)((b & 0x8000) | (uint16_t)(e << 7) | (b & 0x7f));
			}
		}
	}
}


/* Random bytes, per-chunk streams as dummy_fill; e4m3: random sign and mantissa with the
 * exponent field 4-7 (|v| in [1/8, 2)), never NaN, so that the caller's block scale of amp / 2
 * gives |w| in [amp/16, amp) as the bf16 dummies; else any value (MXFP4's e2m1 code pairs are
 * all finite). */
static void fill_random_bytes(const struct dummy_ctx *c, int begin, int end, bool e4m3)
{
	uint8_t *d = (uint8_t *)c->dst;
	for (int k = begin; k < end; k++) {
		uint64_t s = c->seed ^ ((uint64_t)k * 0xd1342543de82ef95ull);
		size_t i0 = (size_t)k * DUMMY_CHUNK, i1 = i0 + DUMMY_CHUNK < c->n ? i0 + DUMMY_CHUNK : c->n;
		for (size_t i = i0; i < i1; i += 8) {
			uint64_t r = splitmix(&s);
			for (size_t j = 0; j < 8 && i + j < i1; j++) {
				uint8_t b = (uint8_t)(r >> (8 * j));
				d[i + j] = e4m3 ? (uint8_t)((b & 0x80) | (uint8_t)((4 + ((b >> 3) & 3)) << 3) |
							    (b & 7))
						: b;
			}
		}
	}
}

static void dummy_fill_fp8(void *arg, int begin, int end, int tid)
{
	(void)tid;
	fill_random_bytes(arg, begin, end, true);
}

static void dummy_fill_bytes(void *arg, int begin, int end, int tid)
{
	(void)tid;
	fill_random_bytes(arg, begin, end, false);
}

int model_dummy_fill(struct model *m, const char *name, enum dtype dt, void *dst, size_t n, float amp)
{
	struct dummy_ctx c = {dst, n, name_hash(name, m->opt.dummy_seed), amp};
	void (*fn)(void *, int, int, int) = dt == DT_BF16      ? dummy_fill
					    : dt == DT_F8_E4M3 ? dummy_fill_fp8
					    : dt == DT_U8      ? dummy_fill_bytes
							       : NULL;
	if (!fn)
		return -1;
	pool_for(m->opt.pool, (int)((n + DUMMY_CHUNK - 1) / DUMMY_CHUNK), 1, fn, &c);
	return 0;
}
