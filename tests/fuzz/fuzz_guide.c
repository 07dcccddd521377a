/* Fuzz target "guide": structured-output grammars (guide/) and their matcher.
 *   byte 0 % 4 == 0: JSON Schema, NUL, output bytes: the schema compiles or is refused with a
 *     message; the matcher is fed the output, and an output it accepts as whole is JSON;
 *   byte 0 % 4 == 1: regex, NUL, text: compiled to a DFA, and the DFA's verdict on the text
 *     equals PCRE2's full match (for the syntax both read the same way);
 *   byte 0 % 4 == 2: choices separated by NUL: each choice is accepted as whole;
 *   byte 0 % 4 == 3: GBNF grammar, NUL, text: compiled or refused with a message, then fed.
 * The matcher refuses a byte without changing its state. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <string.h>

#include <jansson.h>

#include "fuzz/fuzz.h"
#include "base/utf8.h"
#include "guide/grammar.h"
#include "guide/matcher.h"
#include "tok/tokenizer.h"

const char fuzz_name[] = "guide";

static struct jm_state st, prev;

/* The live parts of two states are equal (jm_copy copies only those). */
static bool live_equal(const struct jm_state *a, const struct jm_state *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++)
		if (a->s[i].depth != b->s[i].depth ||
		    memcmp(a->s[i].f, b->s[i].f, (size_t)a->s[i].depth * sizeof a->s[i].f[0]))
			return false;
	return true;
}

/* Feeds p[0, n); returns whether every byte was accepted. */
static bool feed(const struct guide_grammar *g, const uint8_t *p, size_t n)
{
	jm_init(&st, g);
	for (size_t i = 0; i < n; i++) {
		jm_copy(&prev, &st);
		if (!jm_feed(&st, g, p[i])) {
			FUZZ_CHECK(live_equal(&prev, &st));
			return false;
		}
		if (jm_finished(&st, g))
			FUZZ_CHECK(jm_complete(&st, g));
	}
	return true;
}

static void schema_mode(const uint8_t *p, size_t n)
{
	const uint8_t *nul = memchr(p, 0, n);
	size_t sn = nul ? (size_t)(nul - p) : n;
	json_t *schema = json_loadb((const char *)p, sn, JSON_DECODE_ANY, NULL);
	if (!schema)
		return;
	struct guide_grammar *g = NULL;
	struct err e;
	e.msg[0] = 0;
	if (guide_from_schema(schema, "schema", &g, &e) < 0) {
		FUZZ_CHECK(!g && e.msg[0]);
		json_decref(schema);
		return;
	}
	const uint8_t *out = nul ? nul + 1 : p + n;
	size_t on = (size_t)(p + n - out);
	if (feed(g, out, on) && jm_complete(&st, g)) {
		json_error_t je;
		/* integers as reals: JSON allows any length, jansson's integers stop at 64 bits; and
		 * any exponent (15e9999), where jansson refuses what a double cannot hold */
		json_t *v = json_loadb((const char *)out, on, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &je);
		FUZZ_CHECK(v || strstr(je.text, "overflow"));
		json_decref(v);
	}
	guide_unref(g);
	json_decref(schema);
}

/* Constructs that PCRE2 reads otherwise than Python's re (our syntax): "\v" is a class of
 * vertical space there, "{,n}" a literal before PCRE2 10.43, "\0" octal of any length, and
 * POSIX classes "[:alpha:]". */
static bool pcre_comparable(const char *re, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++) {
		if (re[i] == '\\' && (re[i + 1] == 'v' || re[i + 1] == '0'))
			return false;
		if ((re[i] == '{' && re[i + 1] == ',') || (re[i] == '[' && re[i + 1] == ':'))
			return false;
	}
	return true;
}

static void regex_mode(const uint8_t *p, size_t n)
{
	const uint8_t *nul = memchr(p, 0, n);
	if (!nul)
		return;
	const char *re = (const char *)p;
	size_t rn = (size_t)(nul - p);
	const uint8_t *text = nul + 1;
	size_t tn = (size_t)(p + n - text);
	struct guide_grammar *g = NULL;
	struct err e;
	e.msg[0] = 0;
	if (guide_from_regex(re, rn, &g, &e) < 0) {
		FUZZ_CHECK(!g && e.msg[0]);
		return;
	}
	bool ours = feed(g, text, tn) && jm_complete(&st, g);
	if (ours)
		FUZZ_CHECK(utf8_valid((const char *)text, tn, NULL));
	if (pcre_comparable(re, rn) && utf8_valid(re, rn, NULL) && utf8_valid((const char *)text, tn, NULL)) {
		int code;
		PCRE2_SIZE off;
		pcre2_code *pc = pcre2_compile((PCRE2_SPTR)re, rn,
					       PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY | PCRE2_ANCHORED |
						       PCRE2_ENDANCHORED,
					       &code, &off, NULL);
		if (pc) {
			pcre2_match_data *md = pcre2_match_data_create_from_pattern(pc, NULL);
			int rc = pcre2_match(pc, text, tn, 0, 0, md, NULL);
			if (rc != PCRE2_ERROR_MATCHLIMIT && rc != PCRE2_ERROR_DEPTHLIMIT &&
			    rc != PCRE2_ERROR_HEAPLIMIT) {
				if ((rc >= 0) != ours)
					fprintf(stderr, "regex /%.*s/ on \"%.*s\": ours %d, pcre2 %d\n", (int)rn, re,
						(int)tn, (const char *)text, ours, rc);
				FUZZ_CHECK((rc >= 0) == ours);
			}
			pcre2_match_data_free(md);
			pcre2_code_free(pc);
		}
	}
	guide_unref(g);
}

static void choice_mode(const uint8_t *p, size_t n)
{
	const char *choices[16];
	size_t lens[16];
	int k = 0;
	size_t start = 0;
	for (size_t i = 0; i <= n && k < 16; i++)
		if (i == n || p[i] == 0) {
			choices[k] = (const char *)p + start;
			lens[k++] = i - start;
			start = i + 1;
		}
	struct guide_grammar *g = NULL;
	struct err e;
	e.msg[0] = 0;
	if (guide_from_choices(choices, lens, k, &g, &e) < 0) {
		FUZZ_CHECK(!g && e.msg[0]);
		return;
	}
	for (int i = 0; i < k; i++)
		FUZZ_CHECK(feed(g, (const uint8_t *)choices[i], lens[i]) && jm_complete(&st, g));
	guide_unref(g);
}

static void grammar_mode(const uint8_t *p, size_t n)
{
	const uint8_t *nul = memchr(p, 0, n);
	size_t gn = nul ? (size_t)(nul - p) : n;
	struct guide_grammar *g = NULL;
	struct err e;
	e.msg[0] = 0;
	if (guide_from_ebnf((const char *)p, gn, &g, &e) < 0) {
		FUZZ_CHECK(!g && e.msg[0]);
		return;
	}
	const uint8_t *text = nul ? nul + 1 : p + n;
	feed(g, text, (size_t)(p + n - text));
	guide_unref(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 4096)
		return 0;
	switch (data[0] % 4) {
	case 0: schema_mode(data + 1, size - 1); break;
	case 1: regex_mode(data + 1, size - 1); break;
	case 2: choice_mode(data + 1, size - 1); break;
	default: grammar_mode(data + 1, size - 1);
	}
	return 0;
}
