/* Integer ranges as regexes (guide/int_range.h). */
#include "guide/int_range.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIGITS 20

struct buf {
	char *p;
	size_t n, cap;
	bool oom;
};

static void put(struct buf *b, const char *s)
{
	size_t k = strlen(s);
	if (b->oom)
		return;
	if (b->n + k + 1 > b->cap) {
		size_t cap = 2 * (b->n + k + 1) + 64;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, k + 1);
	b->n += k;
}

/* alternatives for the strings of length len between x and y (same length, x <= y), digit by
 * digit: "x0 rest-of-x..9s | (x0+1..y0-1) any | y0 0s..rest-of-y" */
static void same_len(struct buf *b, const char *x, const char *y, int len)
{
	char t[64];
	if (len == 0)
		return;
	bool x_low = true, y_high = true; /* x's tail all 0, y's tail all 9 */
	for (int i = 1; i < len; i++) {
		x_low &= x[i] == '0';
		y_high &= y[i] == '9';
	}
	if (x[0] == y[0]) {
		snprintf(t, sizeof t, "%c", x[0]);
		put(b, t);
		if (len > 1) {
			put(b, "(?:");
			same_len(b, x + 1, y + 1, len - 1);
			put(b, ")");
		}
		return;
	}
	if (x_low && y_high) { /* one class then any digits */
		snprintf(t, sizeof t, "[%c-%c]", x[0], y[0]);
		put(b, t);
		if (len > 1) {
			snprintf(t, sizeof t, "\\d{%d}", len - 1);
			put(b, t);
		}
		return;
	}
	char nines[MAX_DIGITS + 2], zeros[MAX_DIGITS + 2];
	memset(nines, '9', sizeof nines);
	memset(zeros, '0', sizeof zeros);
	int lo = x[0], hi = y[0];
	put(b, "(?:");
	if (!x_low) { /* x0 then [x's tail, 9..9] */
		snprintf(t, sizeof t, "%c(?:", x[0]);
		put(b, t);
		same_len(b, x + 1, nines, len - 1);
		put(b, ")|");
		lo++;
	}
	if (!y_high)
		hi--;
	if (lo <= hi) { /* the whole digits between */
		snprintf(t, sizeof t, "[%c-%c]", lo, hi);
		put(b, t);
		if (len > 1) {
			snprintf(t, sizeof t, "\\d{%d}", len - 1);
			put(b, t);
		}
		put(b, "|");
	}
	if (!y_high) { /* y0 then [0..0, y's tail] */
		snprintf(t, sizeof t, "%c(?:", y[0]);
		put(b, t);
		same_len(b, zeros, y + 1, len - 1);
		put(b, ")|");
	}
	b->n--; /* the last "|" */
	put(b, ")");
}

static int digits(uint64_t v)
{
	int d = 1;
	while (v >= 10)
		v /= 10, d++;
	return d;
}

/* the non-negative integers in [a, hi] */
static void non_negative(struct buf *b, uint64_t a, uint64_t hi)
{
	int da = digits(a), db = digits(hi);
	uint64_t p = 1;
	for (int i = 1; i < da; i++)
		p *= 10;
	bool first = true;
	for (int d = da; d <= db; d++, p *= 10) {
		uint64_t top = d >= 20 ? UINT64_MAX : p * 10 - 1;
		uint64_t lo = d == 1 ? a : (a > p ? a : p), up = hi < top ? hi : top;
		if (lo > up)
			continue;
		char x[32], y[32];
		snprintf(x, sizeof x, "%llu", (unsigned long long)lo);
		snprintf(y, sizeof y, "%llu", (unsigned long long)up);
		put(b, first ? "(?:" : "|(?:");
		same_len(b, x, y, d);
		put(b, ")");
		first = false;
	}
}

int guide_int_range_regex(bool has_lo, long long lo, bool has_hi, long long hi, char **out, struct err *e)
{
	*out = NULL;
	if (has_lo && has_hi && lo > hi)
		return err_set(e, "the integer range [%lld, %lld] is empty", lo, hi);
	struct buf b = {0};
	bool any = false;
	if (!has_lo || lo < 0) { /* negatives: "-" then their absolute values */
		long long nh = has_hi && hi < -1 ? hi : -1;
		uint64_t amin = (uint64_t)(-(nh + 1)) + 1, amax = has_lo ? (uint64_t)(-(lo + 1)) + 1 : (uint64_t)1 << 63;
		put(&b, "-(?:");
		non_negative(&b, amin, amax);
		put(&b, ")");
		any = true;
	}
	if (!has_hi || hi >= 0) {
		uint64_t a = has_lo && lo > 0 ? (uint64_t)lo : 0, z = has_hi ? (uint64_t)hi : (uint64_t)INT64_MAX;
		if (any)
			put(&b, "|");
		non_negative(&b, a, z);
	}
	if (b.oom) {
		free(b.p);
		return err_set(e, "out of memory");
	}
	*out = b.p;
	return 0;
}

/* x > 0 or x >= 0 (from ... to): the plain decimals I[.F] between integer bounds, 0 <= lo */
static int positive_decimals(struct buf *b, long long lo, bool lo_excl, bool has_hi, long long hi, bool hi_excl,
			     struct err *e)
{
	char t[64], *r;
	bool any = false;
	if (has_hi && (hi < lo || (hi == lo && (lo_excl || hi_excl))))
		return 0; /* nothing here */
	/* I strictly between the bounds: any fraction */
	if (!has_hi || hi - 1 >= lo + 1) {
		if (guide_int_range_regex(true, lo + 1, has_hi, hi - 1, &r, e) < 0)
			return -1;
		put(b, "(?:");
		put(b, r);
		put(b, ")(?:\\.\\d+)?");
		free(r);
		any = true;
	}
	/* I = lo: a fraction above zero when lo itself is excluded; only zeros when lo = hi */
	snprintf(t, sizeof t, "%s%lld", any ? "|" : "", lo);
	put(b, t);
	put(b, has_hi && hi == lo ? "(?:\\.0+)?" : lo_excl ? "\\.\\d*[1-9]\\d*" : "(?:\\.\\d+)?");
	/* I = hi: only hi itself (any zeros) */
	if (has_hi && hi > lo && !hi_excl) {
		snprintf(t, sizeof t, "|%lld(?:\\.0+)?", hi);
		put(b, t);
	}
	return 0;
}

int guide_num_range_regex(bool has_lo, long long lo, bool lo_excl, bool has_hi, long long hi, bool hi_excl, char **out,
			  struct err *e)
{
	*out = NULL;
	if (has_lo && has_hi && (lo > hi || (lo == hi && (lo_excl || hi_excl))))
		return err_set(e, "the number range is empty");
	struct buf b = {0};
	size_t n0;
	if (!has_lo || lo < 0) { /* negatives: "-" then x = -v > 0 between -hi and -lo */
		bool nh = has_hi && hi <= 0;
		put(&b, "-(?:");
		n0 = b.n;
		/* x from max(-hi, 0) (excluded at 0: "-0" is zero, generated by the other side) */
		long long xlo = nh ? -hi : 0;
		bool xlo_excl = nh ? hi_excl || hi == 0 : true;
		if (positive_decimals(&b, xlo, xlo_excl, has_lo, has_lo ? -lo : 0, lo_excl, e) < 0)
			goto fail;
		if (b.n == n0)
			b.n -= 4; /* no negatives after all */
		else
			put(&b, ")");
	}
	if (!has_hi || hi >= 0) {
		size_t before = b.n;
		if (b.n)
			put(&b, "|");
		n0 = b.n;
		bool xl = has_lo && lo >= 0;
		if (positive_decimals(&b, xl ? lo : 0, xl && lo_excl, has_hi, hi, hi_excl, e) < 0)
			goto fail;
		if (b.n == n0)
			b.n = before;
	}
	if (b.oom || !b.n) {
		free(b.p);
		return b.oom ? err_set(e, "out of memory") : err_set(e, "the number range is empty");
	}
	b.p[b.n] = 0;
	*out = b.p;
	return 0;
fail:
	free(b.p);
	return -1;
}
