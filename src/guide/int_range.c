/* Integer ranges as regexes (guide/int_range.h). */
#include "guide/int_range.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/strbuf.h"

#define MAX_DIGITS 20

/* alternatives for the strings of length len between x and y (same length, x <= y), digit by
 * digit: "x0 rest-of-x..9s | (x0+1..y0-1) any | y0 0s..rest-of-y" */
static void same_len(struct strbuf *b, const char *x, const char *y, int len)
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
		strbuf_puts(b, t);
		if (len > 1) {
			strbuf_puts(b, "(?:");
			same_len(b, x + 1, y + 1, len - 1);
			strbuf_puts(b, ")");
		}
		return;
	}
	if (x_low && y_high) { /* one class then any digits */
		snprintf(t, sizeof t, "[%c-%c]", x[0], y[0]);
		strbuf_puts(b, t);
		if (len > 1) {
			snprintf(t, sizeof t, "\\d{%d}", len - 1);
			strbuf_puts(b, t);
		}
		return;
	}
	char nines[MAX_DIGITS + 2], zeros[MAX_DIGITS + 2];
	memset(nines, '9', sizeof nines);
	memset(zeros, '0', sizeof zeros);
	int lo = x[0], hi = y[0];
	strbuf_puts(b, "(?:");
	if (!x_low) { /* x0 then [x's tail, 9..9] */
		snprintf(t, sizeof t, "%c(?:", x[0]);
		strbuf_puts(b, t);
		same_len(b, x + 1, nines, len - 1);
		strbuf_puts(b, ")|");
		lo++;
	}
	if (!y_high)
		hi--;
	if (lo <= hi) { /* the whole digits between */
		snprintf(t, sizeof t, "[%c-%c]", lo, hi);
		strbuf_puts(b, t);
		if (len > 1) {
			snprintf(t, sizeof t, "\\d{%d}", len - 1);
			strbuf_puts(b, t);
		}
		strbuf_puts(b, "|");
	}
	if (!y_high) { /* y0 then [0..0, y's tail] */
		snprintf(t, sizeof t, "%c(?:", y[0]);
		strbuf_puts(b, t);
		same_len(b, zeros, y + 1, len - 1);
		strbuf_puts(b, ")|");
	}
	b->n--; /* the last "|" */
	strbuf_puts(b, ")");
}

static int digits(uint64_t v)
{
	int d = 1;
	while (v >= 10)
		v /= 10, d++;
	return d;
}

/* the non-negative integers in [a, hi] */
static void non_negative(struct strbuf *b, uint64_t a, uint64_t hi)
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
		strbuf_puts(b, first ? "(?:" : "|(?:");
		same_len(b, x, y, d);
		strbuf_puts(b, ")");
		first = false;
	}
}

int guide_int_range_regex(bool has_lo, long long lo, bool has_hi, long long hi, char **out, struct err *e)
{
	*out = NULL;
	if (has_lo && has_hi && lo > hi)
		return err_set(e, "the integer range [%lld, %lld] is empty", lo, hi);
	struct strbuf b = {0};
	bool any = false;
	if (!has_lo || lo < 0) { /* negatives: "-" then their absolute values */
		long long nh = has_hi && hi < -1 ? hi : -1;
		uint64_t amin = (uint64_t)(-(nh + 1)) + 1,
			 amax = has_lo ? (uint64_t)(-(lo + 1)) + 1 : (uint64_t)1 << 63;
		strbuf_puts(&b, "-(?:");
		non_negative(&b, amin, amax);
		strbuf_puts(&b, ")");
		any = true;
	}
	if (!has_hi || hi >= 0) {
		uint64_t a = has_lo && lo > 0 ? (uint64_t)lo : 0, z = has_hi ? (uint64_t)hi : (uint64_t)INT64_MAX;
		if (any)
			strbuf_puts(&b, "|");
		non_negative(&b, a, z);
	}
	if (b.oom) {
		free(b.p);
		return err_set(e, "out of memory");
	}
	*out = b.p;
	return 0;
}

/* ---- numbers: plain decimals between decimal bounds ---- */

#define MAX_FRAC 18

/* a magnitude: integer part, then the fraction's digits (no trailing zeros; "" when whole) */
struct dec {
	uint64_t ip;
	char fr[MAX_FRAC + 1];
};

/* |x| as its shortest decimal; -1 past MAX_FRAC decimals */
static int to_dec(double x, struct dec *d)
{
	char s[64];
	if (fmt_double_fixed(x < 0 ? -x : x, MAX_FRAC, s, sizeof s) < 0)
		return -1;
	char *dot = strchr(s, '.');
	d->ip = strtoull(s, NULL, 10);
	d->fr[0] = 0;
	if (dot) {
		size_t n = strlen(dot + 1);
		while (n && dot[n] == '0')
			n--;
		memcpy(d->fr, dot + 1, n);
		d->fr[n] = 0;
	}
	return 0;
}

static int dec_cmp(const struct dec *a, const struct dec *b)
{
	if (a->ip != b->ip)
		return a->ip < b->ip ? -1 : 1;
	for (int i = 0; a->fr[i] || b->fr[i]; i++) {
		char x = a->fr[i] ? a->fr[i] : '0', y = b->fr[i] ? b->fr[i] : '0';
		if (x != y)
			return x < y ? -1 : 1;
		if (!a->fr[i] || !b->fr[i]) { /* one ended: the rest of the other decides */
			const char *r = a->fr[i] ? a->fr + i : b->fr + i;
			for (; *r; r++)
				if (*r != '0')
					return a->fr[i] ? 1 : -1;
			return 0;
		}
	}
	return 0;
}

/* s (n digits) plus or minus one; false past 9..9 or below 0..0 */
static bool step(char *s, int n, int by)
{
	for (int i = n - 1; i >= 0; i--) {
		if (by > 0 && s[i] < '9')
			return s[i]++, true;
		if (by < 0 && s[i] > '0')
			return s[i]--, true;
		s[i] = by > 0 ? '0' : '9';
	}
	return false;
}

static bool all_zero(const char *s, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i] != '0')
			return false;
	return true;
}

static void alt(struct strbuf *b, bool *first)
{
	strbuf_puts(b, *first ? "" : "|");
	*first = false;
}

/* The fraction part, after an integer part, of the decimals whose fraction f (in [0, 1)) has
 * lo <= f (lo < f with lo_x) and, with up, f <= hi (f < hi with hi_x): "\.(?:...)", with a
 * "?" when the integer part alone fits too. lo and hi are digit strings. Returns whether
 * anything fits. By the fraction's length m against K, the bounds' longest: shorter ones are
 * compared as if padded with zeros; longer ones by their first K digits D, then the rest. */
static bool frac_part(struct strbuf *b, const char *lo, bool lo_x, bool up, const char *hi, bool hi_x)
{
	int kl = (int)strlen(lo), kh = up ? (int)strlen(hi) : 0, K = kl > kh ? kl : kh;
	char Lp[MAX_FRAC + 1], Hp[MAX_FRAC + 1], x[MAX_FRAC + 1], y[MAX_FRAC + 1], t[64];
	memset(Lp, '0', sizeof Lp);
	memset(Hp, up ? '0' : '9', sizeof Hp);
	memcpy(Lp, lo, (size_t)kl);
	memcpy(Hp, up ? hi : "", (size_t)kh);
	bool zero_ok = !kl && !lo_x && (!up || kh || !hi_x);
	struct strbuf a = {0};
	bool first = true;
	for (int m = 1; m < K; m++) { /* shorter than the bounds */
		memcpy(x, Lp, (size_t)m);
		memcpy(y, Hp, (size_t)m);
		if ((lo_x || !all_zero(Lp + m, K - m)) && !step(x, m, 1))
			continue;
		if (up && hi_x && all_zero(Hp + m, K - m) && !step(y, m, -1))
			continue;
		if (memcmp(x, y, (size_t)m) > 0)
			continue;
		alt(&a, &first);
		same_len(&a, x, y, m);
	}
	const char *tail_lo = lo_x ? "\\d*[1-9]\\d*" : "\\d*"; /* D = Lp: the rest of the fraction */
	if (!K) {
		if (!up || (!lo_x && !hi_x)) {
			alt(&a, &first);
			strbuf_puts(&a, !up ? (lo_x ? "\\d*[1-9]\\d*" : "\\d+") : "0+");
		}
	} else if (up && !memcmp(Lp, Hp, (size_t)K)) {
		if (!lo_x && !hi_x) {
			alt(&a, &first);
			snprintf(t, sizeof t, "%.*s0*", K, Lp);
			strbuf_puts(&a, t);
		}
	} else {
		memcpy(x, Lp, (size_t)K);
		memcpy(y, Hp, (size_t)K);
		if (step(x, K, 1) && (!up || step(y, K, -1)) && memcmp(x, y, (size_t)K) <= 0) {
			alt(&a, &first); /* D strictly between: any rest */
			strbuf_puts(&a, "(?:");
			same_len(&a, x, y, K);
			strbuf_puts(&a, ")\\d*");
		}
		alt(&a, &first);
		snprintf(t, sizeof t, "%.*s", K, Lp);
		strbuf_puts(&a, t);
		strbuf_puts(&a, tail_lo);
		if (up && !hi_x) { /* D = Hp: only zeros after */
			alt(&a, &first);
			snprintf(t, sizeof t, "%.*s0*", K, Hp);
			strbuf_puts(&a, t);
		}
	}
	if (!first) {
		strbuf_puts(b, "(?:\\.(?:");
		strbuf_puts(b, a.p ? a.p : "");
		strbuf_puts(b, zero_ok ? "))?" : "))");
	}
	b->oom |= a.oom;
	free(a.p);
	return !first || zero_ok;
}

/* x >= 0 between lo and hi (magnitudes, lo <= hi unless the range is empty): integer parts
 * strictly between with any fraction, then lo's and hi's own integer parts */
static int positive_decimals(struct strbuf *b, const struct dec *lo, bool lo_x, bool has_hi, const struct dec *hi,
			     bool hi_x, struct err *e)
{
	if (has_hi && (dec_cmp(hi, lo) < 0 || (!dec_cmp(hi, lo) && (lo_x || hi_x))))
		return 0; /* nothing here */
	char t[32], *r;
	bool first = true;
	if (!has_hi || hi->ip >= lo->ip + 2) {
		if (guide_int_range_regex(true, (long long)lo->ip + 1, has_hi, has_hi ? (long long)hi->ip - 1 : 0, &r,
					  e) < 0)
			return -1;
		strbuf_puts(b, "(?:");
		strbuf_puts(b, r);
		strbuf_puts(b, ")(?:\\.\\d+)?");
		free(r);
		first = false;
	}
	for (int side = 0; side < 2; side++) { /* lo's integer part, then hi's */
		if (side == 1 && (!has_hi || hi->ip == lo->ip))
			break;
		struct strbuf f = {0};
		bool same = has_hi && hi->ip == lo->ip;
		bool fits = side == 0 ? frac_part(&f, lo->fr, lo_x, same, same ? hi->fr : "", hi_x)
				      : frac_part(&f, "", false, true, hi->fr, hi_x);
		if (fits) {
			snprintf(t, sizeof t, "%s%llu", first ? "" : "|",
				 (unsigned long long)(side ? hi->ip : lo->ip));
			strbuf_puts(b, t);
			strbuf_puts(b, f.p ? f.p : "");
			first = false;
		}
		b->oom |= f.oom;
		free(f.p);
	}
	return 0;
}

int guide_num_range_regex(bool has_lo, double lo, bool lo_excl, bool has_hi, double hi, bool hi_excl, char **out,
			  struct err *e)
{
	*out = NULL;
	struct dec l = {0}, h = {0}, zero = {0};
	if ((has_lo && to_dec(lo, &l) < 0) || (has_hi && to_dec(hi, &h) < 0))
		return err_set(e, "a bound has more than %d decimals", MAX_FRAC);
	if (has_lo && has_hi && (lo > hi || (lo == hi && (lo_excl || hi_excl))))
		return err_set(e, "the number range is empty");
	struct strbuf b = {0};
	size_t n0;
	if (!has_lo || lo < 0) { /* negatives: "-" then |x| between |hi| (or 0) and |lo| */
		bool nh = has_hi && hi <= 0;
		strbuf_puts(&b, "-(?:");
		n0 = b.n;
		/* |x| from |hi|, or from 0 excluded ("-0" is zero, which the other side writes) */
		if (positive_decimals(&b, nh ? &h : &zero, nh ? hi_excl || hi == 0 : true, has_lo, &l, lo_excl, e) < 0)
			goto fail;
		if (b.n == n0)
			b.n -= 4; /* no negatives after all */
		else
			strbuf_puts(&b, ")");
	}
	if (!has_hi || hi >= 0) {
		size_t before = b.n;
		if (b.n)
			strbuf_puts(&b, "|");
		n0 = b.n;
		bool xl = has_lo && lo >= 0;
		if (positive_decimals(&b, xl ? &l : &zero, xl && lo_excl, has_hi, &h, hi_excl, e) < 0)
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
