/* guided_regex and JSON Schema "pattern" (src/guide/regex_dfa.c, regex_parse.c): the DFA's
 * whole-text matches equal PCRE2's anchored matches (PCRE2_UTF) on random texts and on texts
 * walked out of the DFA; the syntax it refuses; patterns inside JSON strings; the allowed-token
 * mask of a regex grammar against feeding every token; integer bounds (guide/int_range.c) as
 * regexes and as JSON values. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "guide/grammar.h"
#include "guide/int_range.h"
#include "guide/matcher.h"
#include "guide/regex_dfa.h"
#include "guide/vocab.h"
#include "guide_test_util.h"
#include "harness.h"
#include "tok/tokenizer.h"

static bool dfa_match(const struct guide_dfa *d, const char *s, size_t n)
{
	int st = 0;
	for (size_t i = 0; i < n && st >= 0; i++)
		st = d->next[(size_t)st * 256 + (unsigned char)s[i]];
	return st >= 0 && d->accept[st];
}

/* Is out a whole output of g? */
static bool whole(const struct guide_grammar *g, const char *out)
{
	struct jm_state st;
	jm_init(&st, g);
	return jm_feed_bytes(&st, g, (const uint8_t *)out, strlen(out)) && jm_complete(&st, g);
}

static bool pcre_match(pcre2_code *re, pcre2_match_data *md, const char *s, size_t n)
{
	return pcre2_match(re, (PCRE2_SPTR)s, n, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, NULL) >= 0;
}

static const char *const PATTERNS[] = {
	"abc",
	"a|b|",
	"(ab)*c?",
	"\\d{3}-[a-z]+(x|yz)*",
	"[^a-c]{2,3}\\.é?",
	".{1,3}",
	"(?:a|bc){2}d+?",
	"(?P<year>\\d{4})-(?<m>0[1-9]|1[0-2])",
	"[\\w.-]+@[a-z]+\\.(com|org)",
	"\\s*\\S+",
	"[€-₿😀]+|\\x41\\u00e9",
	"^(true|false)$",
	"-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?",
	"[]a]+[^]]",
	"x{0}y{2,}z{,3}",
	"\\(\\[\\{\\*\\+\\?\\.\\|\\^\\$\\\\",
	"[a-]+[-b]",
	"\\D\\W",
	/* a leading lookahead: pydantic's Decimal, prefix and whole-text forms, both signs */
	"^(?!^[-+.]*$)[+-]?0*\\d*\\.?\\d*$",
	"(?=a)[a-c]+",
	"(?!ab)[a-c]{0,3}",
	"(?=[a-z]*\\d)[a-z0-9]{2,6}",
	"(?!.*--)[a-z-]+",
	"(?=.*b$)[ab]*",
	"(?!(a|b\\)))(?=[^x])[ab)x]{1,3}",
};

/* random texts over the pattern's characters and a few others */
static size_t random_text(const char *pat, uint64_t *seed, char *out)
{
	static const char *const extra[] = {
		"a", "b", "0", "9", "-", ".",    " ",   "\n", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
		"_", "@", "x", "y", "z", "\xff", "\xc3"};
	size_t n = 0, plen = strlen(pat), len = test_rand(seed) % 9;
	for (size_t i = 0; i < len; i++) {
		if (test_rand(seed) % 2 && plen) {
			out[n++] = pat[test_rand(seed) % plen];
		} else {
			const char *x = extra[test_rand(seed) % (sizeof extra / sizeof *extra)];
			memcpy(out + n, x, strlen(x));
			n += strlen(x);
		}
	}
	return n;
}

/* a random walk through the DFA that stops at an accepting state (a match, mostly) */
static size_t walk_text(const struct guide_dfa *d, uint64_t *seed, char *out, size_t cap)
{
	int st = 0;
	size_t n = 0;
	while (n + 1 < cap) {
		if (d->accept[st] && (!d->live[st] || test_rand(seed) % 4 == 0))
			break;
		int choices[256], k = 0;
		for (int b = 0; b < 256; b++)
			if (d->next[(size_t)st * 256 + (size_t)b] >= 0)
				choices[k++] = b;
		if (!k)
			break;
		int b = choices[test_rand(seed) % (uint32_t)k];
		out[n++] = (char)b;
		st = d->next[(size_t)st * 256 + (size_t)b];
	}
	return n;
}

/* every edge leads to a state from which a match can still be finished: the matcher never
 * lets an output start down a dead end (a lookahead's product is trimmed for this) */
static bool edges_all_useful(const struct guide_dfa *d)
{
	bool *useful = calloc((size_t)d->n_states, sizeof *useful);
	for (int s = 0; useful && s < d->n_states; s++)
		useful[s] = d->accept[s];
	for (bool changed = true; useful && changed;) {
		changed = false;
		for (int s = 0; s < d->n_states; s++)
			for (int c = 0; c < 256 && !useful[s]; c++) {
				int32_t t = d->next[(size_t)s * 256 + (size_t)c];
				if (t >= 0 && useful[t])
					useful[s] = changed = true;
			}
	}
	bool ok = useful != NULL;
	for (size_t i = 0; ok && i < (size_t)d->n_states * 256; i++)
		ok = d->next[i] < 0 || useful[d->next[i]];
	free(useful);
	return ok;
}

static void test_dfa_equals_pcre2(void)
{
	uint64_t seed = 0x5eed;
	for (size_t p = 0; p < sizeof PATTERNS / sizeof *PATTERNS; p++) {
		const char *pat = PATTERNS[p];
		struct guide_dfa *d;
		struct err e;
		if (guide_dfa_compile(pat, strlen(pat), &d, &e) < 0) {
			harness_fail(__FILE__, __LINE__, "%s: %s", pat, e.msg);
			continue;
		}
		EXPECTF(edges_all_useful(d), "%s: an edge leads to a dead end", pat);
		int ec;
		PCRE2_SIZE eo;
		/* PCRE2 reads "x{,3}" as literal text before 10.43; Python and we read {0,3} */
		char pcre_pat[256];
		snprintf(pcre_pat, sizeof pcre_pat, "%s", pat);
		char *brace = strstr(pcre_pat, "{,");
		if (brace) {
			memmove(brace + 2, brace + 1, strlen(brace + 1) + 1);
			brace[1] = '0';
		}
		pcre2_code *re = pcre2_compile((PCRE2_SPTR)pcre_pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_ALT_BSUX,
					       &ec, &eo, NULL);
		EXPECTF(re != NULL, "%s: pcre2 refuses it", pat);
		if (!re) {
			guide_dfa_free(d);
			continue;
		}
		pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
		int matches = 0;
		for (int i = 0; i < 3000; i++) {
			char s[64];
			size_t n = i % 2 ? random_text(pat, &seed, s) : walk_text(d, &seed, s, 40);
			bool a = dfa_match(d, s, n), b = pcre_match(re, md, s, n);
			matches += b;
			if (a != b) {
				harness_fail(__FILE__, __LINE__, "%s on '%.*s' (%zu bytes): dfa %d, pcre2 %d", pat,
					     (int)n, s, n, a, b);
				break;
			}
		}
		EXPECTF(matches > 100, "%s: only %d matching texts tried", pat, matches);
		pcre2_match_data_free(md);
		pcre2_code_free(re);
		guide_dfa_free(d);
	}
}

static void test_refused_syntax(void)
{
	static const struct {
		const char *re, *msg;
	} bad[] = {
		{"(a", "missing )"},
		{"a)", "unbalanced"},
		{"a(?=b)", "lookaround"},
		{"(?!a)a", "no text matches"},
		{"(?=a", "lookaround"},
		{"(?i)a", "flags"},
		{"(a)\\1", "backreference"},
		{"\\bword", "anchor"},
		{"a^b", "anchor"},
		{"*a", "nothing to repeat"},
		{"a{5,2}", "repeat count"},
		{"a{1001}", "repeat count"},
		{"[z-a]", "out of order"},
		{"[abc", "unterminated"},
		{"\\p{L}", "property"},
		{"\\q", "unknown escape"},
		{"\\x4", "hex"},
		{"a\\", "trailing backslash"},
		{"(?P<n", "group name"},
		{"((a{1000}){1000}){10}", "too large"},
		/* Python's "multiple repeat" (found by tests/fuzz: 30 stacked "+" took seconds) */
		{"X+++", "multiple repeat at byte 3"},
		{"X{2}{3}", "multiple repeat at byte 4"},
		{"X*?+", "multiple repeat at byte 3"},
		{"X{,2}*", "multiple repeat at byte 5"},
		/* the subset construction's work is bounded (this took minutes, with GBs) */
		{"(.?){1000}", "too complex"},
		{"(.{0,50}){0,50}x", "too complex"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct guide_dfa *d = NULL;
		struct err e = {0};
		EXPECTF(guide_dfa_compile(bad[i].re, strlen(bad[i].re), &d, &e) < 0 && !d && strstr(e.msg, bad[i].msg),
			"%s: '%s', expected '%s'", bad[i].re, e.msg, bad[i].msg);
	}
	/* one lazy or possessive mark is not a second repeat */
	static const char *const good[] = {"X++", "X+?", "X{2}+", "X??", "X*+", "(a+)+b", "a{2}b{3}"};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		struct guide_dfa *d = NULL;
		struct err e = {0};
		EXPECTF(guide_dfa_compile(good[i], strlen(good[i]), &d, &e) == 0, "%s: %s", good[i], e.msg);
		guide_dfa_free(d);
	}
}

/* a schema string with a pattern: its characters go through the DFA, unescaped */
static void test_pattern_in_json(void)
{
	json_t *s = json_loads(
		"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d+$\","
		"\"maxLength\":5}},\"required\":[\"id\"]}",
		0, NULL);
	struct guide_grammar *g;
	struct err e;
	EXPECT(s && guide_from_schema(s, "schema", &g, &e) == 0);
	json_decref(s);
	static const struct {
		const char *out;
		bool ok;
	} cases[] = {
		{"{\"id\":\"AB-12\"}", true},       {"{\"id\":\"AB-1\"}", true},      {"{\"id\":\"AB-\"}", false},
		{"{\"id\":\"ab-1\"}", false},       {"{\"id\":\"AB-123\"}", false}, /* maxLength 5 */
		{"{\"id\":\"A\\u0042-1\"}", false}, {"{\"id\":\"AB-1\\\"\"}", false},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		bool ok = whole(g, cases[i].out);
		EXPECTF(ok == cases[i].ok, "%s: %s", cases[i].out, ok ? "accepted" : "refused");
	}
	guide_unref(g);
}

/* pydantic's Decimal field: a number, or a string of digits with a leading lookahead */
static void test_pydantic_decimal(void)
{
	json_t *s = json_loads("{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"string\",\"pattern\":"
			       "\"^(?!^[-+.]*$)[+-]?0*\\\\d*\\\\.?\\\\d*$\"}]}",
			       0, NULL);
	struct guide_grammar *g = NULL;
	struct err e;
	EXPECTF(s && guide_from_schema(s, "schema", &g, &e) == 0, "%s", e.msg);
	json_decref(s);
	static const struct {
		const char *out;
		bool ok;
	} cases[] = {{"12.5", true},    {"\"12.50\"", true}, {"\"-0.5\"", true}, {"\".5\"", true},
		     {"\"+.\"", false}, {"\"\"", false},     {"\"1e5\"", false}, {"\"--1\"", false}};
	for (size_t i = 0; g && i < sizeof cases / sizeof *cases; i++) {
		bool ok = whole(g, cases[i].out);
		EXPECTF(ok == cases[i].ok, "%s: %s", cases[i].out, ok ? "accepted" : "refused");
	}
	guide_unref(g);
}

/* string formats with a regular language are enforced (date with month lengths and leap
 * years, time with an offset, date-time, email, uuid, ipv4, hostname); others stay
 * annotations; a pattern wins over a format */
static void test_formats(void)
{
	static const struct {
		const char *format, *text;
		bool ok;
	} cases[] = {
		{"date", "2024-02-29", true},
		{"date", "2023-02-29", false},
		{"date", "2000-02-29", true},
		{"date", "1900-02-29", false},
		{"date", "2023-04-31", false},
		{"date", "2023-12-31", true},
		{"date", "2023-13-01", false},
		{"date", "23-01-01", false},
		{"time", "23:59:60Z", true},
		{"time", "12:30:00.250+05:30", true},
		{"time", "12:30:00", false},
		{"time", "24:00:00Z", false},
		{"date-time", "2024-05-01T08:00:00Z", true},
		{"date-time", "2024-05-01 08:00:00Z", false},
		{"email", "first.last+x@mail.example.org", true},
		{"email", "a@b", false},
		{"email", "a..b@c.de", false},
		{"email", "@c.de", false},
		{"uuid", "123e4567-e89b-12d3-a456-426614174000", true},
		{"uuid", "123e4567e89b12d3a456426614174000", false},
		{"ipv4", "192.168.0.255", true},
		{"ipv4", "192.168.0.256", false},
		{"ipv4", "01.2.3.4", false},
		{"hostname", "a-b.example", true},
		{"hostname", "-ab.example", false},
		{"uri-template", "any text at all", true}, /* an annotation */
		{"ipv6", "2001:db8::8a2e:370:7334", true},
		{"ipv6", "::1", true},
		{"ipv6", "::", true},
		{"ipv6", "::ffff:192.168.0.1", true},
		{"ipv6", "1:2:3:4:5:6:7:8", true},
		{"ipv6", "1::2::3", false},
		{"ipv6", "1:2:3:4:5:6:7:8:9", false},
		{"ipv6", "12345::", false},
		{"uri", "https://example.com/a/b?x=1&y=%20z#top", true},
		{"uri", "mailto:someone@example.org", true},
		{"uri", "http://[::1]:8080/", true},
		{"uri", "urn:isbn:0451450523", true},
		{"uri", "no scheme", false},
		{"uri", "http://a b", false},
		{"uri", "http://x/%zz", false},
		{"uri", "1http://x", false},
		{"duration", "P1DT2H", true},
		{"duration", "P3Y6M4DT12H30M5S", true},
		{"duration", "PT36H", true},
		{"duration", "P2W", true},
		{"duration", "P", false},
		{"duration", "P1DT", false},
		{"duration", "PT1H5S", false},
		{"duration", "P1W2D", false},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char schema[128], out[128];
		snprintf(schema, sizeof schema, "{\"type\":\"string\",\"format\":\"%s\"}", cases[i].format);
		snprintf(out, sizeof out, "\"%s\"", cases[i].text);
		json_t *s = json_loads(schema, 0, NULL);
		struct guide_grammar *g = NULL;
		struct err e;
		EXPECTF(s && guide_from_schema(s, "schema", &g, &e) == 0, "%s: %s", schema, e.msg);
		json_decref(s);
		if (!g)
			continue;
		bool ok = whole(g, out);
		EXPECTF(ok == cases[i].ok, "%s %s: %s", cases[i].format, out, ok ? "accepted" : "refused");
		guide_unref(g);
	}
	json_t *s = json_loads("{\"type\":\"string\",\"format\":\"date\",\"pattern\":\"x+\"}", 0, NULL);
	struct guide_grammar *g = NULL;
	struct err e;
	EXPECT(s && guide_from_schema(s, "schema", &g, &e) == 0);
	json_decref(s);
	struct jm_state st;
	jm_init(&st, g);
	EXPECT(g && jm_feed_bytes(&st, g, (const uint8_t *)"\"xx\"", 4) && jm_complete(&st, g));
	guide_unref(g);
}

/* the mask of regex grammars, pattern strings and bounded integers equals feeding every token */
static void test_regex_mask(void)
{
	struct mask_fixture m;
	if (!mask_fixture_open(&m, "tokenizer"))
		return;
	struct guide_vocab *v = m.v;
	struct tok *t = m.t;
	uint8_t *allow = m.allow;
	int V = m.V;
	struct err e;
	static const struct {
		const char *re, *prefixes[4];
	} cases[] = {
		{"(yes|no)-\\d{2,4}", {"", "ye", "no-1", "yes-1234"}},
		{"[a-z ]+\\.", {"", "hello wor", "a.", NULL}},
		{"\\{\"k\": \"[^\"]*\"\\}", {"", "{\"k\": \"ab", "{\"k\": \"\"}", NULL}},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		struct guide_grammar *g;
		if (guide_from_regex(cases[c].re, strlen(cases[c].re), &g, &e) < 0) {
			harness_fail(__FILE__, __LINE__, "%s: %s", cases[c].re, e.msg);
			continue;
		}
		for (int k = 0; k < 4 && cases[c].prefixes[k]; k++)
			check_mask(v, t, V, g, cases[c].re, cases[c].prefixes[k], allow);
		guide_unref(g);
	}
	/* 200 choices sharing a prefix: all of them stay reachable (an anyOf of literals kept
	 * only the first 32 alternatives) */
	{
		char buf[200][16];
		const char *ch[200];
		size_t lens[200];
		for (int i = 0; i < 200; i++) {
			snprintf(buf[i], sizeof buf[i], "item%d", i);
			ch[i] = buf[i];
			lens[i] = strlen(buf[i]);
		}
		struct guide_grammar *g;
		EXPECT(guide_from_choices(ch, lens, 200, &g, &e) == 0);
		for (int i = 0; i < 200; i += 7) {
			struct jm_state st;
			jm_init(&st, g);
			EXPECTF(jm_feed_bytes(&st, g, (const uint8_t *)ch[i], lens[i]) && jm_complete(&st, g),
				"%s refused", ch[i]);
		}
		struct jm_state st;
		jm_init(&st, g);
		EXPECT(!(jm_feed_bytes(&st, g, (const uint8_t *)"item200", 7) && jm_complete(&st, g)));
		check_mask(v, t, V, g, "200 choices", "item1", allow);
		check_mask(v, t, V, g, "200 choices", "item199", allow);
		guide_unref(g);
	}
	static const char *const schema =
		"{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"array\",\"items\":"
		"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":300}},\"id\":{\"type\":\"string\","
		"\"pattern\":\"[A-Z]{2}\\\\d\"}},\"required\":[\"n\",\"id\"]}";
	static const char *const pre[] = {"{\"n\":[",
					  "{\"n\":[2",
					  "{\"n\":[29",
					  "{\"n\":[-",
					  "{\"n\":[300",
					  "{\"n\":[1],\"id\":\"",
					  "{\"n\":[1],\"id\":\"AB"};
	json_t *js = json_loads(schema, 0, NULL);
	struct guide_grammar *g;
	if (js && guide_from_schema(js, "schema", &g, &e) == 0) {
		for (size_t k = 0; k < sizeof pre / sizeof *pre; k++)
			check_mask(v, t, V, g, "bounded integers and a pattern", pre[k], allow);
		guide_unref(g);
	} else {
		harness_fail(__FILE__, __LINE__, "schema: %s", js ? e.msg : "bad json");
	}
	json_decref(js);
	mask_fixture_close(&m);
}

/* integer bounds: the range's regex against every value in [-3000, 3000] and at int64's ends */
static void test_int_range_regex(void)
{
	static const struct {
		bool hl;
		long long lo;
		bool hh;
		long long hi;
	} r[] = {{1, 0, 1, 100},  {1, -5, 1, 5},  {1, 7, 1, 7},      {1, 13, 1, 2468},    {0, 0, 1, -3},
		 {1, -120, 0, 0}, {1, 0, 0, 0},   {0, 0, 0, 0},      {1, 99, 1, 1000},    {1, -1000, 1, -99},
		 {1, 1, 1, 9},    {1, 10, 1, 99}, {1, 100, 1, 1999}, {1, -2999, 1, 2999}, {1, 2000, 0, 0}};
	for (size_t c = 0; c < sizeof r / sizeof *r; c++) {
		char *re;
		struct err e;
		struct guide_dfa *d;
		if (guide_int_range_regex(r[c].hl, r[c].lo, r[c].hh, r[c].hi, &re, &e) < 0 ||
		    guide_dfa_compile(re, strlen(re), &d, &e) < 0) {
			harness_fail(__FILE__, __LINE__, "range %zu: %s", c, e.msg);
			continue;
		}
		for (long long v = -3000; v <= 3000; v++) {
			char s[32];
			snprintf(s, sizeof s, "%lld", v);
			bool want = (!r[c].hl || v >= r[c].lo) && (!r[c].hh || v <= r[c].hi);
			if (dfa_match(d, s, strlen(s)) != want) {
				harness_fail(__FILE__, __LINE__, "range %zu (%s): %lld %s", c, re, v,
					     want ? "refused" : "accepted");
				break;
			}
		}
		static const char *const never[] = {
			"007", "-0", "00", "+1", "1.0", "", "-", "9223372036854775808", "-9223372036854775809", "1e3"};
		for (size_t k = 0; k < sizeof never / sizeof *never; k++)
			EXPECTF(!dfa_match(d, never[k], strlen(never[k])), "range %zu: '%s' accepted", c, never[k]);
		bool open_hi = !r[c].hh, open_lo = !r[c].hl;
		EXPECT(dfa_match(d, "9223372036854775807", 19) == open_hi);
		EXPECT(dfa_match(d, "-9223372036854775808", 20) == open_lo);
		guide_dfa_free(d);
		free(re);
	}
	char *re = NULL;
	struct err e = {0};
	EXPECT(guide_int_range_regex(true, 5, true, 4, &re, &e) < 0 && !re && strstr(e.msg, "empty"));
}

/* number bounds: every multiple of 1/4 in [-20, 20], written several ways, against the range;
 * "-0" forms are never generated (zero comes as "0") */
static void test_num_range_regex(void)
{
	static const struct {
		bool hl;
		long long lo;
		bool le, hh;
		long long hi;
		bool he;
	} r[] = {{1, 0, 0, 1, 1, 0},  {1, 0, 1, 1, 1, 1},    {1, -3, 0, 1, 5, 1}, {1, -3, 1, 1, -1, 0},
		 {0, 0, 0, 1, 2, 0},  {1, -2, 1, 0, 0, 0},   {1, 2, 0, 1, 2, 0},  {1, 0, 0, 0, 0, 0},
		 {0, 0, 0, 1, 0, 1},  {1, -10, 0, 1, 10, 0}, {1, -1, 1, 1, 0, 0}, {1, 0, 1, 1, 10, 1},
		 {1, 7, 0, 1, 12, 0}, {0, 0, 0, 0, 0, 0}};
	for (size_t c = 0; c < sizeof r / sizeof *r; c++) {
		char *re;
		struct err e;
		struct guide_dfa *d;
		if (guide_num_range_regex(r[c].hl, r[c].lo, r[c].le, r[c].hh, r[c].hi, r[c].he, &re, &e) < 0 ||
		    guide_dfa_compile(re, strlen(re), &d, &e) < 0) {
			harness_fail(__FILE__, __LINE__, "range %zu: %s", c, e.msg);
			continue;
		}
		int bad = 0;
		for (int k = -80; k <= 80 && !bad; k++) {
			double v = k / 4.0;
			bool in = (!r[c].hl || (r[c].le ? v > r[c].lo : v >= r[c].lo)) &&
				  (!r[c].hh || (r[c].he ? v < r[c].hi : v <= r[c].hi));
			char forms[4][32];
			int nf = 0;
			if (k % 4 == 0) {
				snprintf(forms[nf++], 32, "%d", k / 4);
				snprintf(forms[nf++], 32, "%d.0", k / 4);
				snprintf(forms[nf++], 32, "%d.000", k / 4);
			} else {
				snprintf(forms[nf++], 32, "%.2f", v);
				snprintf(forms[nf++], 32, "%.3f", v);
			}
			for (int f = 0; f < nf; f++) {
				bool want = in && strncmp(forms[f], "-0", 2) != 0; /* -0.25 is "-0.25": allowed */
				if (!strncmp(forms[f], "-0.", 3) && v < 0)
					want = in;
				if (dfa_match(d, forms[f], strlen(forms[f])) != want) {
					harness_fail(__FILE__, __LINE__, "range %zu (%s): '%s' %s", c, re, forms[f],
						     want ? "refused" : "accepted");
					bad = 1;
					break;
				}
			}
		}
		static const char *const never[] = {"-0", "-0.0", "1e2", "01", ".5", "1.", "+1", "", "-"};
		for (size_t k = 0; k < sizeof never / sizeof *never; k++)
			EXPECTF(!dfa_match(d, never[k], strlen(never[k])), "range %zu: '%s' accepted", c, never[k]);
		guide_dfa_free(d);
		free(re);
	}
	char *re = NULL;
	struct err e = {0};
	EXPECT(guide_num_range_regex(true, 2, true, true, 2, false, &re, &e) < 0 && !re);
	EXPECT(guide_num_range_regex(true, 3, false, true, 2, false, &re, &e) < 0 && !re);
}

/* fractional bounds: every pair of bounds from a list (one-sided too, each end inclusive or
 * not) against every plain decimal [-]I[.F] with |I| <= 4 and up to 3 decimals, compared
 * exactly in thousandths; "-0" forms never */
static void test_frac_range_regex(void)
{
	static const double B[] = {-2.5, -1.25, -1, -0.5, -0.05, 0, 0.05, 0.1, 0.25, 0.5, 0.999, 1, 1.5, 2.125, 3};
	const int nb = (int)(sizeof B / sizeof *B);
	static char texts[2 * 5 * 1111][16];
	static long milli[2 * 5 * 1111];
	int nt = 0;
	for (int sign = 0; sign < 2; sign++)
		for (int ip = 0; ip <= 4; ip++)
			for (int len = 0; len <= 3; len++)
				for (int f = 0; f < (len ? (int)(len == 1 ? 10 : len == 2 ? 100 : 1000) : 1); f++) {
					if (len)
						snprintf(texts[nt], 16, "%s%d.%0*d", sign ? "-" : "", ip, len, f);
					else
						snprintf(texts[nt], 16, "%s%d", sign ? "-" : "", ip);
					long scale = len == 0 ? 0 : len == 1 ? 100 : len == 2 ? 10 : 1;
					milli[nt] = (sign ? -1 : 1) * (ip * 1000L + f * scale);
					nt++;
				}
	int bad = 0, cases = 0;
	for (int i = -1; i < nb && bad < 3; i++)
		for (int j = -1; j < nb && bad < 3; j++)
			for (int x = 0; x < 4 && bad < 3; x++) {
				bool hl = i >= 0, hh = j >= 0, lx = x & 1, hx = x & 2;
				double lo = hl ? B[i] : 0, hi = hh ? B[j] : 0;
				if ((!hl && lx) || (!hh && hx) || (!hl && !hh))
					continue;
				char *re = NULL;
				struct err e = {0};
				bool empty = hl && hh && (lo > hi || (lo == hi && (lx || hx)));
				int rc = guide_num_range_regex(hl, lo, lx, hh, hi, hx, &re, &e);
				if (empty || rc < 0) {
					EXPECTF(empty == (rc < 0), "[%g, %g] (%d): %s", lo, hi, x,
						rc < 0 ? e.msg : "taken though empty");
					bad += empty != (rc < 0);
					continue;
				}
				struct guide_dfa *d;
				if (guide_dfa_compile(re, strlen(re), &d, &e) < 0) {
					harness_fail(__FILE__, __LINE__, "[%g, %g]: %s: %s", lo, hi, re, e.msg);
					bad++;
					free(re);
					continue;
				}
				cases++;
				long l = hl ? lround(lo * 1000) : 0, h = hh ? lround(hi * 1000) : 0;
				for (int t = 0; t < nt; t++) {
					long v = milli[t];
					bool neg_zero = texts[t][0] == '-' && v == 0;
					bool want = !neg_zero && (!hl || (lx ? v > l : v >= l)) &&
						    (!hh || (hx ? v < h : v <= h));
					if (dfa_match(d, texts[t], strlen(texts[t])) != want) {
						harness_fail(__FILE__, __LINE__, "%s%g, %g%s (%s): '%s' %s",
							     lx ? "(" : "[", lo, hi, hx ? ")" : "]", re, texts[t],
							     want ? "refused" : "accepted");
						bad++;
						break;
					}
				}
				guide_dfa_free(d);
				free(re);
			}
	EXPECTF(cases > 400, "%d ranges", cases);
	char *re = NULL;
	struct err e = {0};
	EXPECT(guide_num_range_regex(true, 1e-20, false, false, 0, false, &re, &e) < 0 && !re &&
	       strstr(e.msg, "decimals"));
	/* 0.1 is the decimal 0.1, not its double's expansion */
	struct guide_dfa *d = NULL;
	EXPECT(guide_num_range_regex(true, 0.1, false, true, 0.3, false, &re, &e) == 0 &&
	       guide_dfa_compile(re, strlen(re), &d, &e) == 0);
	EXPECT(d && dfa_match(d, "0.1", 3) && dfa_match(d, "0.3", 3) && dfa_match(d, "0.30000", 7) &&
	       !dfa_match(d, "0.30001", 7) && !dfa_match(d, "0.09999999999", 13));
	guide_dfa_free(d);
	free(re);
}

/* multipleOf, alone and with bounds, on numbers and integers: every plain decimal with |I| <= 12
 * and up to 3 decimals against exact arithmetic in thousandths; "-0" forms never */
static void test_multiple_of(void)
{
	static const double steps[] = {3, 5, 0.5, 0.25, 0.01, 0.3, 7, 12.5, 1};
	static const char *const bounds[] = {"", ",\"minimum\":-2.5,\"maximum\":3",
					     ",\"exclusiveMinimum\":0,\"maximum\":10"};
	static char texts[2 * 13 * 1111][16];
	static long milli[2 * 13 * 1111];
	static bool has_dot[2 * 13 * 1111];
	int nt = 0;
	for (int sign = 0; sign < 2; sign++)
		for (int ip = 0; ip <= 12; ip++)
			for (int len = 0; len <= 3; len++)
				for (int f = 0; f < (len ? (len == 1 ? 10 : len == 2 ? 100 : 1000) : 1); f++) {
					if (len)
						snprintf(texts[nt], 16, "%s%d.%0*d", sign ? "-" : "", ip, len, f);
					else
						snprintf(texts[nt], 16, "%s%d", sign ? "-" : "", ip);
					long scale = len == 0 ? 0 : len == 1 ? 100 : len == 2 ? 10 : 1;
					milli[nt] = (sign ? -1 : 1) * (ip * 1000L + f * scale);
					has_dot[nt++] = len > 0;
				}
	int bad = 0;
	for (size_t m = 0; m < sizeof steps / sizeof *steps && bad < 3; m++)
		for (int integer = 0; integer < 2 && bad < 3; integer++)
			for (size_t bd = 0; bd < sizeof bounds / sizeof *bounds && bad < 3; bd++) {
				char schema[160];
				snprintf(schema, sizeof schema, "{\"type\":\"%s\",\"multipleOf\":%g%s}",
					 integer ? "integer" : "number", steps[m], bounds[bd]);
				json_t *js = json_loads(schema, 0, NULL);
				struct guide_grammar *g = NULL;
				struct err e;
				long step = lround(steps[m] * 1000), lo = bd == 1 ? -2500 : 1,
				     hi = bd == 1 ? 3000 : 10000;
				bool some = bd == 0;
				for (long v = lo; v <= hi && !some; v++)
					some = v % step == 0 && (!integer || v % 1000 == 0);
				int rc = js ? guide_from_schema(js, "schema", &g, &e) : -1;
				json_decref(js);
				if (rc < 0 || !some) {
					EXPECTF(rc < 0 && !some && strstr(e.msg, "no number in the bounds"), "%s: %s",
						schema, rc < 0 ? e.msg : "taken, though no number fits");
					guide_unref(g);
					continue;
				}
				for (int t = 0; t < nt; t++) {
					long v = milli[t];
					bool in = bd == 0 || (bd == 1 ? v >= -2500 && v <= 3000 : v > 0 && v <= 10000);
					bool want = v % step == 0 && in && !(texts[t][0] == '-' && v == 0) &&
						    !(integer && has_dot[t]);
					bool got = whole(g, texts[t]);
					if (got != want) {
						harness_fail(__FILE__, __LINE__, "%s: '%s' %s", schema, texts[t],
							     want ? "refused" : "accepted");
						bad++;
						break;
					}
				}
				guide_unref(g);
			}
	/* refusals: a step with too many residues, none in the bounds, a step that is not a positive number */
	static const struct {
		const char *schema, *msg;
	} no[] = {{"{\"type\":\"number\",\"multipleOf\":0.0000001}", "multipleOf must be a positive number"},
		  {"{\"type\":\"integer\",\"multipleOf\":7,\"minimum\":1,\"maximum\":6}", "no number in the bounds"},
		  {"{\"type\":\"number\",\"multipleOf\":-2}", "positive"},
		  {"{\"type\":\"number\",\"multipleOf\":\"2\"}", "must be a number"},
		  {"{\"type\":\"number\",\"multipleOf\":0.001234}", "automaton would need more than"},
		  {"{\"type\":\"integer\",\"multipleOf\":20000}", "automaton would need more than"}};
	for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
		json_t *js = json_loads(no[i].schema, 0, NULL);
		struct guide_grammar *g = NULL;
		struct err e = {0};
		EXPECTF(js && guide_from_schema(js, "schema", &g, &e) < 0 && !g && strstr(e.msg, no[i].msg),
			"%s: '%s'", no[i].schema, e.msg);
		json_decref(js);
	}
}

/* uniqueItems over enum values (pydantic's set of an Enum): every array of up to 4 items of
 * values that share prefixes ("a" / "ab", 1 / 12), with whitespace, is whole exactly when
 * its items differ, and its prefixes are kept while some unused value can still come */
static void test_unique_items(void)
{
	static const char *const schemas[] = {
		"{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"ab\",\"b\",1,12,2]},\"uniqueItems\":true}",
		"{\"$defs\":{\"E\":{\"enum\":[\"a\",\"ab\",\"b\",1,12,2],\"type\":[\"string\",\"integer\"]}},"
		"\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/E\"},\"uniqueItems\":true}"};
	static const char *const vals[] = {"\"a\"", "\"ab\"", "\"b\"", "1", "12", "2"};
	for (size_t sc = 0; sc < sizeof schemas / sizeof *schemas; sc++) {
		json_t *js = json_loads(schemas[sc], 0, NULL);
		struct guide_grammar *g = NULL;
		struct err e;
		EXPECTF(js && guide_from_schema(js, "schema", &g, &e) == 0, "%s: %s", schemas[sc], e.msg);
		json_decref(js);
		if (!g)
			continue;
		int bad = 0;
		for (int len = 0; len <= 4 && bad < 3; len++) {
			int idx[4] = {0}, total = 1;
			for (int i = 0; i < len; i++)
				total *= 6;
			for (int c = 0; c < total && bad < 3; c++) {
				char text[64] = "[";
				bool distinct = true;
				for (int i = 0, x = c; i < len; i++, x /= 6) {
					idx[i] = x % 6;
					for (int j = 0; j < i; j++)
						distinct &= idx[j] != idx[i];
					strcat(text, i ? (i % 2 ? ", " : ",") : "");
					strcat(text, vals[idx[i]]);
				}
				strcat(text, "]");
				bool ok = whole(g, text);
				if (ok != distinct) {
					harness_fail(__FILE__, __LINE__, "%s: %s %s", schemas[sc], text,
						     ok ? "accepted" : "refused");
					bad++;
				}
				/* a prefix of a whole output is never refused */
				size_t n = strlen(text) - 1;
				struct jm_state st;
				jm_init(&st, g);
				if (distinct && !jm_feed_bytes(&st, g, (const uint8_t *)text, n)) {
					harness_fail(__FILE__, __LINE__, "%s: prefix %.*s refused", schemas[sc],
						     (int)n, text);
					bad++;
				}
			}
		}
		/* all six used: no comma; a started duplicate dies at its first byte that only it
		 * can follow */
		struct jm_state st;
		jm_init(&st, g);
		static const char all6[] = "[\"a\",\"ab\",\"b\",1,12,2";
		EXPECT(jm_feed_bytes(&st, g, (const uint8_t *)all6, strlen(all6)) && !jm_feed(&st, g, ','));
		jm_init(&st, g);
		EXPECT(jm_feed_bytes(&st, g, (const uint8_t *)"[\"b\",\"", 6) && !jm_feed(&st, g, 'b'));
		guide_unref(g);
	}
	static const struct {
		const char *schema, *msg;
	} no[] = {
		{"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}", "an enum of at most 64"},
		{"{\"type\":\"array\",\"items\":{\"enum\":[1,2]},\"uniqueItems\":true,\"minItems\":3}",
		 "minItems 3, but items has 2 values"},
		{"{\"type\":\"array\",\"uniqueItems\":\"yes\"}", "must be a boolean"}};
	for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
		json_t *js = json_loads(no[i].schema, 0, NULL);
		struct guide_grammar *g = NULL;
		struct err e = {0};
		EXPECTF(js && guide_from_schema(js, "schema", &g, &e) < 0 && strstr(e.msg, no[i].msg), "%s: '%s'",
			no[i].schema, e.msg);
		json_decref(js);
	}
	/* with at most one item, or false, any items */
	json_t *js = json_loads(
		"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true,\"maxItems\":1}", 0, NULL);
	struct guide_grammar *g = NULL;
	struct err e;
	EXPECT(js && guide_from_schema(js, "schema", &g, &e) == 0);
	guide_unref(g);
	json_decref(js);
}

/* bounded integers as JSON values: inside arrays and objects they end before ',' ']' '}' */
static void test_bounded_integers_in_json(void)
{
	static const struct {
		const char *schema;
		long long lo, hi;
	} cases[] = {
		{"{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":12}}", -5,
		 11},
		{"{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":2.5,\"maximum\":7.9}}", 3, 7},
		{"{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0,\"exclusiveMinimum\":true,"
		 "\"maximum\":9,\"exclusiveMaximum\":true}}",
		 1, 8},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		json_t *s = json_loads(cases[c].schema, 0, NULL);
		struct guide_grammar *g;
		struct err e;
		if (!s || guide_from_schema(s, "schema", &g, &e) < 0) {
			harness_fail(__FILE__, __LINE__, "%s: %s", cases[c].schema, s ? e.msg : "bad json");
			json_decref(s);
			continue;
		}
		json_decref(s);
		for (long long v = -20; v <= 20; v++) {
			char out[64];
			snprintf(out, sizeof out, "[%lld, %lld]", v, v);
			bool ok = whole(g, out);
			EXPECTF(ok == (v >= cases[c].lo && v <= cases[c].hi), "%s: %s %s", cases[c].schema, out,
				ok ? "accepted" : "refused");
		}
		guide_unref(g);
	}
	/* a top-level bounded integer is complete once in range, and may go on */
	json_t *s = json_loads("{\"type\":\"integer\",\"minimum\":10,\"maximum\":200}", 0, NULL);
	struct guide_grammar *g;
	struct err e;
	EXPECT(s && guide_from_schema(s, "schema", &g, &e) == 0);
	json_decref(s);
	struct jm_state st;
	jm_init(&st, g);
	EXPECT(jm_feed_bytes(&st, g, (const uint8_t *)"1", 1) && !jm_complete(&st, g));
	EXPECT(jm_feed(&st, g, '5') && jm_complete(&st, g) && !jm_finished(&st, g));
	EXPECT(jm_feed(&st, g, '0') && jm_complete(&st, g) && jm_finished(&st, g));
	EXPECT(!jm_feed(&st, g, '0') && !jm_feed(&st, g, ','));
	guide_unref(g);
	/* numbers between whole bounds, as plain decimals */
	s = json_loads("{\"type\":\"array\",\"items\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}}", 0, NULL);
	EXPECT(s && guide_from_schema(s, "schema", &g, &e) == 0);
	json_decref(s);
	static const struct {
		const char *out;
		bool ok;
	} nums[] = {{"[0.5, 1]", true}, {"[1.0,0]", true}, {"[0.25]", true}, {"[1.5]", false},
		    {"[-0.1]", false},  {"[1e-1]", false}, {"[2]", false},   {"[0.999]", true}};
	for (size_t k = 0; k < sizeof nums / sizeof *nums; k++) {
		bool ok = whole(g, nums[k].out);
		EXPECTF(ok == nums[k].ok, "%s %s", nums[k].out, ok ? "accepted" : "refused");
	}
	guide_unref(g);
	/* tuples: prefixItems, then items (false: no more) */
	static const struct {
		const char *schema, *out;
		bool ok;
	} tup[] = {
		{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
		 "[1,\"a\"]", true},
		{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
		 "[1]", true},
		{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
		 "[1,\"a\",2]", false},
		{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
		 "[\"a\",1]", false},
		{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"}],\"items\":{\"type\":\"boolean\"},"
		 "\"minItems\":2}",
		 "[1,true,false]", true},
		{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"}],\"items\":{\"type\":\"boolean\"},"
		 "\"minItems\":2}",
		 "[1]", false},
		{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"}],\"items\":{\"type\":\"boolean\"},"
		 "\"minItems\":2}",
		 "[1,2]", false},
		{"{\"type\":\"array\",\"items\":false}", "[]", true},
		{"{\"type\":\"array\",\"items\":false}", "[1]", false},
	};
	for (size_t k = 0; k < sizeof tup / sizeof *tup; k++) {
		s = json_loads(tup[k].schema, 0, NULL);
		g = NULL;
		if (!s || guide_from_schema(s, "schema", &g, &e) < 0) {
			harness_fail(__FILE__, __LINE__, "%s: %s", tup[k].schema, s ? e.msg : "bad json");
			json_decref(s);
			continue;
		}
		json_decref(s);
		bool ok = whole(g, tup[k].out);
		EXPECTF(ok == tup[k].ok, "%s: %s %s", tup[k].schema, tup[k].out, ok ? "accepted" : "refused");
		guide_unref(g);
	}
	s = json_loads("{\"type\":\"array\",\"prefixItems\":[{}],\"items\":false,\"minItems\":2}", 0, NULL);
	g = NULL;
	EXPECT(guide_from_schema(s, "schema", &g, &e) < 0 && !g && strstr(e.msg, "minItems"));
	json_decref(s);
	/* an enum of 100 strings inside an object: every value reachable; anyOf past 32: refused */
	{
		char sch[4096];
		int o = snprintf(sch, sizeof sch, "{\"type\":\"object\",\"properties\":{\"c\":{\"enum\":[");
		for (int i = 0; i < 100; i++)
			o += snprintf(sch + o, sizeof sch - (size_t)o, "%s\"color%d\"", i ? "," : "", i);
		snprintf(sch + o, sizeof sch - (size_t)o, "]}},\"required\":[\"c\"]}");
		s = json_loads(sch, 0, NULL);
		g = NULL;
		EXPECT(s && guide_from_schema(s, "schema", &g, &e) == 0);
		json_decref(s);
		for (int i = 0; g && i < 100; i += 9) {
			char out[64];
			snprintf(out, sizeof out, "{\"c\": \"color%d\"}", i);
			jm_init(&st, g);
			EXPECTF(jm_feed_bytes(&st, g, (const uint8_t *)out, strlen(out)) && jm_complete(&st, g),
				"%s refused", out);
		}
		jm_init(&st, g);
		EXPECT(g && !jm_feed_bytes(&st, g, (const uint8_t *)"{\"c\": \"color100\"", 17));
		guide_unref(g);
		o = snprintf(sch, sizeof sch, "{\"anyOf\":[");
		for (int i = 0; i < 33; i++)
			o += snprintf(sch + o, sizeof sch - (size_t)o, "%s{\"const\":%d}", i ? "," : "", i);
		snprintf(sch + o, sizeof sch - (size_t)o, "]}");
		s = json_loads(sch, 0, NULL);
		g = NULL;
		EXPECT(s && guide_from_schema(s, "schema", &g, &e) < 0 && !g && strstr(e.msg, "anyOf"));
		json_decref(s);
	}
	/* pydantic's wrapper: {"allOf": [{"$ref": ...}], "description": ...} */
	s = json_loads("{\"$defs\":{\"P\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":3}},\"type\":\"object\","
		       "\"properties\":{\"p\":{\"allOf\":[{\"$ref\":\"#/$defs/"
		       "P\"}],\"description\":\"d\"}},\"required\":[\"p\"]}",
		       0, NULL);
	EXPECT(s && guide_from_schema(s, "schema", &g, &e) == 0);
	json_decref(s);
	jm_init(&st, g);
	EXPECT(jm_feed_bytes(&st, g, (const uint8_t *)"{\"p\":2}", 7) && jm_complete(&st, g));
	jm_init(&st, g);
	EXPECT(!jm_feed_bytes(&st, g, (const uint8_t *)"{\"p\":4}", 7));
	guide_unref(g);
	/* a fractional bound on a number, inside an object */
	s = json_loads("{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"number\",\"exclusiveMinimum\":0.5,"
		       "\"maximum\":1.5}},\"required\":[\"p\"]}",
		       0, NULL);
	g = NULL;
	EXPECT(s && guide_from_schema(s, "schema", &g, &e) == 0);
	json_decref(s);
	static const struct {
		const char *t;
		bool ok;
	} fr[] = {{"{\"p\":0.75}", true},  {"{\"p\":1.5}", true},     {"{\"p\":1}", true},  {"{\"p\":0.5}", false},
		  {"{\"p\":1.51}", false}, {"{\"p\":0.50001}", true}, {"{\"p\":2}", false}, {"{\"p\":0}", false}};
	for (size_t k = 0; g && k < sizeof fr / sizeof *fr; k++) {
		bool ok = whole(g, fr[k].t);
		EXPECTF(ok == fr[k].ok, "%s: %d", fr[k].t, ok);
	}
	guide_unref(g);
}

/* A regex or choice that matches the empty text lets the output end before its first byte
 * (found by tests/fuzz/fuzz_guide.c: "a?" used to force an "a"). */
static void test_empty_match(void)
{
	static const struct {
		const char *re;
		bool finished; /* nothing can follow */
	} cases[] = {{"", true}, {"a?", false}, {"(yes)?", false}, {"x*", false}, {"(|b)", false}};
	struct err e;
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		struct guide_grammar *g;
		if (guide_from_regex(cases[c].re, strlen(cases[c].re), &g, &e) < 0) {
			harness_fail(__FILE__, __LINE__, "%s: %s", cases[c].re, e.msg);
			continue;
		}
		struct jm_state st;
		jm_init(&st, g);
		EXPECTF(jm_complete(&st, g), "/%s/: the empty output is not complete", cases[c].re);
		EXPECTF(jm_finished(&st, g) == cases[c].finished, "/%s/: finished %d", cases[c].re,
			jm_finished(&st, g));
		guide_unref(g);
	}
	struct guide_grammar *g;
	EXPECT(guide_from_regex("a+", 2, &g, &e) == 0);
	struct jm_state st;
	jm_init(&st, g);
	EXPECT(!jm_complete(&st, g) && !jm_finished(&st, g));
	guide_unref(g);
	const char *ch[] = {"", "no"};
	size_t lens[] = {0, 2};
	if (guide_from_choices(ch, lens, 2, &g, &e) == 0) {
		jm_init(&st, g);
		EXPECT(jm_complete(&st, g) && !jm_finished(&st, g));
		guide_unref(g);
	}
}

TESTS(T(test_dfa_equals_pcre2), T(test_frac_range_regex), T(test_formats), T(test_pydantic_decimal),
      T(test_multiple_of), T(test_unique_items), T(test_refused_syntax), T(test_pattern_in_json), T(test_regex_mask),
      T(test_empty_match), T(test_int_range_regex), T(test_num_range_regex), T(test_bounded_integers_in_json))
