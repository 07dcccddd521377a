/* The shared UTF-8 helpers (base/utf8.h): strict decoding, encoding, validity, the incomplete
 * tail a stream holds back, and U+FFFD per maximal invalid subpart (Python's errors="replace"). */
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "harness.h"

#define FFFD "\xef\xbf\xbd"

static void test_decode_strict(void)
{
	uint32_t cp = 0;
	EXPECT_EQ_INT(utf8_decode((const unsigned char *)"A", 1, &cp), 1);
	EXPECT_EQ_INT(cp, 'A');
	EXPECT_EQ_INT(utf8_decode((const unsigned char *)"\xe2\x82\xac", 3, &cp), 3);
	EXPECT_EQ_INT(cp, 0x20ac);
	EXPECT_EQ_INT(utf8_decode((const unsigned char *)"\xf4\x8f\xbf\xbf", 4, &cp), 4);
	EXPECT_EQ_INT(cp, 0x10ffff);
	EXPECT_EQ_INT(utf8_decode((const unsigned char *)"\xc0\xaf", 2, &cp), 0);         /* overlong */
	EXPECT_EQ_INT(utf8_decode((const unsigned char *)"\xe0\x80\xaf", 3, &cp), 0);     /* overlong */
	EXPECT_EQ_INT(utf8_decode((const unsigned char *)"\xed\xa0\x80", 3, &cp), 0);     /* surrogate */
	EXPECT_EQ_INT(utf8_decode((const unsigned char *)"\xf4\x90\x80\x80", 4, &cp), 0); /* > 10FFFF */
	EXPECT_EQ_INT(utf8_decode((const unsigned char *)"\xe2\x82", 2, &cp), 0);         /* cut */
	EXPECT_EQ_INT(utf8_decode((const unsigned char *)"", 0, &cp), 0);
}

/* every code point encodes to what decodes back to it; surrogates encode but do not decode */
static void test_encode_round_trip(void)
{
	for (uint32_t c = 0; c <= 0x10ffff; c++) {
		char b[4];
		uint32_t back = 0;
		int n = utf8_encode(c, b);
		size_t k = utf8_decode((const unsigned char *)b, (size_t)n, &back);
		bool sur = c >= 0xd800 && c <= 0xdfff;
		if (sur ? k != 0 : (k != (size_t)n || back != c)) {
			EXPECTF(0, "code point %x", c);
			return;
		}
	}
}

static void test_valid_bad_at(void)
{
	size_t at = 99;
	EXPECT(utf8_valid("", 0, NULL));
	EXPECT(utf8_valid("plain ascii text, long enough for the fast path", 47, &at));
	EXPECT(!utf8_valid("abcdefghij\xC3", 11, &at) && at == 10);
	EXPECT(!utf8_valid("abcdefgh\xed\xa0\x80zz", 13, &at) && at == 8);
	EXPECT(utf8_valid("\xf0\x9f\x98\x80 ok", 7, NULL));
}

/* what a stream holds back: the bytes after the last lead byte when they could still become
 * a character (brute force: some continuation completes them) */
static size_t tail_ref(const unsigned char *s, size_t n)
{
	static const unsigned char cont[] = {0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf};
	for (size_t k = n < 3 ? n : 3; k >= 1; k--) {
		const unsigned char *p = s + n - k;
		uint32_t cp;
		if (utf8_decode(p, k, &cp))
			continue;
		for (size_t a = 0; a < sizeof cont; a++)
			for (size_t b = 0; b < sizeof cont; b++)
				for (size_t c = 0; c < sizeof cont; c++) {
					unsigned char t[8];
					memcpy(t, p, k);
					t[k] = cont[a], t[k + 1] = cont[b], t[k + 2] = cont[c];
					for (size_t e = 1; e <= 3 && k + e <= 4; e++)
						if (utf8_decode(t, k + e, &cp) == k + e)
							return k;
				}
	}
	return 0;
}

static void test_incomplete_tail(void)
{
	EXPECT_EQ_INT(utf8_incomplete_tail((const unsigned char *)"abc", 3), 0);
	EXPECT_EQ_INT(utf8_incomplete_tail((const unsigned char *)"ab\xe2\x82", 4), 2);
	EXPECT_EQ_INT(utf8_incomplete_tail((const unsigned char *)"ab\xf0", 3), 1);
	EXPECT_EQ_INT(utf8_incomplete_tail((const unsigned char *)"ab\xe2\x82\xac", 5), 0);
	EXPECT_EQ_INT(utf8_incomplete_tail((const unsigned char *)"ab\xff", 3), 0); /* invalid: not held */
	EXPECT_EQ_INT(utf8_incomplete_tail((const unsigned char *)"\xe2\x28", 2), 0);
	static const unsigned char v[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1,
					  0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff};
	size_t nv = sizeof v;
	for (size_t i = 0; i < nv * nv * nv; i++) {
		unsigned char s[3] = {v[i % nv], v[i / nv % nv], v[i / nv / nv]};
		for (size_t n = 1; n <= 3; n++)
			if (utf8_incomplete_tail(s, n) != tail_ref(s, n)) {
				EXPECTF(0, "%02x %02x %02x n=%zu", s[0], s[1], s[2], n);
				return;
			}
	}
}

static void test_lossy_maximal_subparts(void)
{
	static const struct {
		const char *in;
		size_t n;
		const char *out;
	} cases[] = {
		/* Unicode 3.9's example of maximal subparts */
		{"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", 13,
		 "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d"},
		/* surrogate, cut 4-byte, overlong, past 10FFFF: each byte alone */
		{"\xed\xa0\x80x\xf0\x90\x80\xe0\x80\xaf\xf4\x90\x80\x80", 14,
		 FFFD FFFD FFFD "x" FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD},
		{"ab\xe2\x82", 4, "ab" FFFD}, /* an incomplete end is one subpart */
		{"\xe2\x82\xac", 3, "\xe2\x82\xac"},
		{"", 0, ""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		size_t n = 0;
		char *s = utf8_sanitize(cases[i].in, cases[i].n, &n);
		EXPECT(s != NULL);
		if (!s)
			return;
		EXPECTF(n == strlen(cases[i].out) && !memcmp(s, cases[i].out, n), "case %zu", i);
		EXPECT(utf8_valid(s, n, NULL));
		free(s);
	}
}

static void test_len_offset(void)
{
	const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z"; /* a é € 😀 z */
	size_t n = strlen(s);
	EXPECT_EQ_INT(utf8_len(s, n), 5);
	EXPECT_EQ_INT(utf8_offset(s, n, 0), 0);
	EXPECT_EQ_INT(utf8_offset(s, n, 2), 3);
	EXPECT_EQ_INT(utf8_offset(s, n, 4), 10);
	EXPECT_EQ_INT(utf8_offset(s, n, 9), n);
}

TESTS(T(test_decode_strict), T(test_encode_round_trip), T(test_valid_bad_at), T(test_incomplete_tail),
      T(test_lossy_maximal_subparts), T(test_len_offset))
