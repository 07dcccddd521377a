/* Context-free grammars for guided decoding (src/guide/cfg.c, their walk in matcher.c):
 * regular grammars agree with PCRE2 on every short text over their alphabet, non-regular
 * ones with a direct checker, errors name the construct and the line, and the token masks
 * equal a brute-force feed of every token. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "guide/cfg.h"
#include "guide/grammar.h"
#include "guide/matcher.h"
#include "guide/vocab.h"
#include "guide_test_util.h"
#include "harness.h"
#include "tok/tokenizer.h"

static struct guide_grammar *compile(const char *src)
{
	struct guide_grammar *g = NULL;
	struct err e;
	if (guide_from_ebnf(src, strlen(src), &g, &e) < 0)
		harness_fail(__FILE__, __LINE__, "%s: %s", src, e.msg);
	return g;
}

/* 1: whole, 0: a prefix of something, -1: refused */
static int verdict(const struct guide_grammar *g, const char *text, size_t n)
{
	struct jm_state s;
	jm_init(&s, g);
	if (!jm_feed_bytes(&s, g, (const uint8_t *)text, n))
		return -1;
	return jm_complete(&s, g) ? 1 : 0;
}

/* every text of up to max_len symbols of alpha[] (each symbol a UTF-8 string) */
static void each_text(const char *const *alpha, int n_alpha, int max_len,
		      void (*fn)(const char *text, size_t n, void *ctx), void *ctx)
{
	int idx[16];
	char buf[128];
	for (int len = 0; len <= max_len; len++) {
		memset(idx, 0, sizeof idx);
		for (;;) {
			size_t n = 0;
			for (int i = 0; i < len; i++) {
				size_t l = strlen(alpha[idx[i]]);
				memcpy(buf + n, alpha[idx[i]], l);
				n += l;
			}
			fn(buf, n, ctx);
			int i = 0;
			while (i < len && ++idx[i] == n_alpha)
				idx[i++] = 0;
			if (i == len)
				break;
		}
	}
}

struct vs_pcre {
	const struct guide_grammar *g;
	pcre2_code *re;
	pcre2_match_data *md;
	const char *what;
	int errors;
};

static void cmp_pcre(const char *text, size_t n, void *ctx)
{
	struct vs_pcre *v = ctx;
	bool want = pcre2_match(v->re, (PCRE2_SPTR)text, n, 0, 0, v->md, NULL) >= 0;
	int got = verdict(v->g, text, n);
	if ((got == 1) != want && v->errors++ < 5)
		harness_fail(__FILE__, __LINE__, "%s on '%.*s': grammar %d, pcre2 %d", v->what, (int)n, text, got,
			     want);
	/* a text the regex extends is a prefix the grammar keeps */
	int rc = pcre2_match(v->re, (PCRE2_SPTR)text, n, 0, PCRE2_PARTIAL_HARD, v->md, NULL);
	if ((rc >= 0 || rc == PCRE2_ERROR_PARTIAL) && got < 0 && v->errors++ < 5)
		harness_fail(__FILE__, __LINE__, "%s: prefix '%.*s' refused", v->what, (int)n, text);
}

/* regular grammars against the equivalent regex, on every text up to 6-7 symbols */
static void test_regular_vs_pcre2(void)
{
	static const struct {
		const char *grammar, *regex, *alpha[6];
		int max_len;
	} cases[] = {
		{"root ::= (\"ab\" | \"c\")* \"d\"?", "(ab|c)*d?", {"a", "b", "c", "d"}, 7},
		{"root ::= x{2,3} y\nx ::= [a-b]\ny ::= \"c\" | \"\"", "[ab]{2,3}c?", {"a", "b", "c"}, 6},
		{"root ::= (\"a\" (\"b\" | \"c\")+)? [^a-c]", "(a[bc]+)?[^a-c]", {"a", "b", "c", "d", "é"}, 6},
		{"# a comment\nroot ::= item (\",\" item)* # another\nitem ::= [0-9]{1,2}\n",
		 "[0-9]{1,2}(,[0-9]{1,2})*",
		 {"1", "2", ","},
		 7},
		{"root ::= \"é\"+ . \"\\u00e9\"?", "é+(.|\\n)é?", {"é", "e", "\n"}, 5},
		{"root ::= (a | b)*\na ::= \"x\" \"y\"?\nb ::= \"yy\"", "(xy?|yy)*", {"x", "y"}, 7},
		{"root ::= ( ( \"a\" ) ){0,2} \"b\"{1,}", "a{0,2}b+", {"a", "b"}, 6},
		{"root ::= \"a\"{ ,2} \"b\"{2} \"c\"{1, 2}", "a{0,2}b{2}c{1,2}", {"a", "b", "c"}, 7},
		/* left recursion: direct, through a group, through other rules, several at once */
		{"root ::= root \"+\" t | t\nt ::= [0-9]", "[0-9](\\+[0-9])*", {"1", "2", "+"}, 7},
		{"root ::= root \"a\" | root \"bc\" | \"\"", "(a|bc)*", {"a", "b", "c"}, 7},
		{"root ::= (root \"+\" | \"-\") \"1\"", "-1(\\+1)*", {"-", "+", "1"}, 7},
		{"root ::= a \"x\" | \"y\"\na ::= root \"z\" | \"w\"", "(y|wx)(zx)*", {"x", "y", "z", "w"}, 7},
		{"root ::= b \"1\" | \"0\"\nb ::= c \"2\"\nc ::= root \"3\" | \"4\"",
		 "(421|0)(321)*",
		 {"0", "1", "2", "3", "4"},
		 7},
		{"root ::= \"q\" | r\nr ::= r \"a\"", "q", {"q", "a"}, 4},
		{"root ::= x \"b\"\nx ::= x x | \"a\"", "a+b", {"a", "b"}, 6},
		/* Lark */
		{"start: \"a\" b+\nb: \"b\" | \"c\"", "a[bc]+", {"a", "b", "c"}, 6},
		{"start: x~2..3 Y\n?x: \"a\"..\"b\"\nY.2: \"c\"?", "[ab]{2,3}c?", {"a", "b", "c"}, 6},
		{"start: [\"a\" (\"b\"|\"c\")+] /[^a-c]/ -> alias", "(a[bc]+)?[^a-c]", {"a", "b", "c", "d", "é"}, 5},
		{"start: \"ab\"i \"c\"", "[aA][bB]c", {"a", "A", "b", "B", "c"}, 4},
		{"start: \"b-é\"i", "[bB]-é", {"b", "B", "-", "é"}, 4},
		{"start: item (\",\" item)*  // a comment\n\n?item: /[0-9]{1,2}/\n",
		 "[0-9]{1,2}(,[0-9]{1,2})*",
		 {"1", "2", ","},
		 7},
		{"start: \"a\" \"b\"\n%ignore \" \"", " *a *b *", {"a", "b", " "}, 6},
		{"start: NUMBER\n%import common.NUMBER",
		 "[0-9]+([eE][+-]?[0-9]+)?|([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?",
		 {"1", ".", "e", "-"},
		 6},
		{"start: 'a' \"'\" 'b\\'c'", "a'b'c", {"a", "b", "c", "'"}, 6},
		{"start: start \"+\" \"1\"\n    | \"1\"", "1(\\+1)*", {"1", "+"}, 7},
		{"start: /a\\/b/ WORD\n%import common (WORD, DIGIT)", "a/b[a-zA-Z]+", {"a", "/", "b", "B"}, 6},
		{"start: \"x\" WS_IN \"y\"\n%import common.WS_INLINE -> WS_IN", "x[ \t]+y", {"x", "y", " ", "\t"}, 5},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		struct guide_grammar *g = compile(cases[c].grammar);
		int code;
		PCRE2_SIZE off;
		pcre2_code *re = pcre2_compile((PCRE2_SPTR)cases[c].regex, PCRE2_ZERO_TERMINATED,
					       PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &code, &off, NULL);
		if (!g || !re) {
			harness_fail(__FILE__, __LINE__, "case %zu does not compile", c);
			guide_unref(g);
			pcre2_code_free(re);
			continue;
		}
		int n_alpha = 0;
		while (n_alpha < 6 && cases[c].alpha[n_alpha])
			n_alpha++;
		struct vs_pcre v = {g, re, pcre2_match_data_create_from_pattern(re, NULL), cases[c].grammar, 0};
		each_text(cases[c].alpha, n_alpha, cases[c].max_len, cmp_pcre, &v);
		EXPECTF(v.errors == 0, "%s: %d disagreements", cases[c].grammar, v.errors);
		pcre2_match_data_free(v.md);
		pcre2_code_free(re);
		guide_unref(g);
	}
}

/* balanced parentheses and brackets, by a counter */
static int balanced(const char *t, size_t n)
{
	char stack[64];
	int d = 0;
	for (size_t i = 0; i < n; i++) {
		if (t[i] == '(' || t[i] == '[') {
			stack[d++] = t[i];
		} else {
			if (!d || stack[d - 1] != (t[i] == ')' ? '(' : '['))
				return -1;
			d--;
		}
	}
	return d == 0 ? 1 : 0;
}

struct vs_fn {
	const struct guide_grammar *g;
	int errors;
};

static void cmp_balanced(const char *text, size_t n, void *ctx)
{
	struct vs_fn *v = ctx;
	int want = balanced(text, n), got = verdict(v->g, text, n);
	if (want != got && v->errors++ < 5)
		harness_fail(__FILE__, __LINE__, "'%.*s': grammar %d, checker %d", (int)n, text, got, want);
}

static void test_non_regular(void)
{
	struct guide_grammar *g = compile("root ::= group*\ngroup ::= \"(\" root \")\" | \"[\" root \"]\"");
	if (!g)
		return;
	static const char *const alpha[] = {"(", ")", "[", "]"};
	struct vs_fn v = {g, 0};
	each_text(alpha, 4, 8, cmp_balanced, &v);
	EXPECTF(v.errors == 0, "balanced brackets: %d disagreements", v.errors);
	/* nesting: 14 levels (two frames each here) fit the matcher's stack, deeper is cut
	 * (refused, never accepted wrongly) */
	char deep[256];
	int k = 0;
	for (int i = 0; i < 14; i++)
		deep[k++] = '(';
	for (int i = 0; i < 14; i++)
		deep[k++] = ')';
	EXPECT(verdict(g, deep, (size_t)k) == 1);
	k = 0;
	for (int i = 0; i < 100; i++)
		deep[k++] = '(';
	EXPECT(verdict(g, deep, (size_t)k) == -1);
	guide_unref(g);
	/* the same language, left recursive (rewritten as repetition: the stack stays flat) */
	if (!(g = compile("root ::= root \"(\" root \")\" | root \"[\" root \"]\" | \"\"")))
		return;
	v = (struct vs_fn){g, 0};
	each_text(alpha, 4, 8, cmp_balanced, &v);
	EXPECTF(v.errors == 0, "balanced brackets, left recursive: %d disagreements", v.errors);
	k = 0;
	for (int i = 0; i < 100; i++)
		deep[k++] = i % 2 ? ')' : '(';
	EXPECT(verdict(g, deep, (size_t)k) == 1);
	guide_unref(g);
	if (!(g = compile("root ::= root \"+\" \"1\" | \"1\"")))
		return;
	char sum[601];
	for (k = 0; k < 599; k++)
		sum[k] = k % 2 ? '+' : '1';
	EXPECT(verdict(g, sum, (size_t)k) == 1 && verdict(g, sum, (size_t)k - 1) == 0);
	guide_unref(g);
	/* arithmetic, as vLLM's docs write grammars */
	g = compile("root ::= expr\n"
		    "expr ::= term ((\"+\" | \"-\") term)*\n"
		    "term ::= factor ((\"*\" | \"/\") factor)*\n"
		    "factor ::= number | \"(\" expr \")\"\n"
		    "number ::= [0-9]+");
	if (!g)
		return;
	static const struct {
		const char *t;
		int v;
	} arith[] = {{"1+2*(3-4)/5", 1}, {"((7))", 1}, {"12", 1},    {"1+", 0},           {"(1", 0}, {"", 0},
		     {"1++2", -1},       {"a", -1},    {"(1))", -1}, {"2*(3+(4/5)-6)", 1}};
	for (size_t i = 0; i < sizeof arith / sizeof *arith; i++)
		EXPECTF(verdict(g, arith[i].t, strlen(arith[i].t)) == arith[i].v, "'%s': %d, expected %d", arith[i].t,
			verdict(g, arith[i].t, strlen(arith[i].t)), arith[i].v);
	guide_unref(g);
	/* every common terminal that %import takes, with a text it matches and one it does not */
	static const struct {
		const char *name, *yes, *no;
	} common[] = {{"DIGIT", "7", "a"},
		      {"HEXDIGIT", "F", "g"},
		      {"INT", "0042", "4.2"},
		      {"SIGNED_INT", "-12", "+-1"},
		      {"DECIMAL", ".5", "5"},
		      {"FLOAT", "1e-3", "12"},
		      {"SIGNED_FLOAT", "+2.5E7", "2e"},
		      {"NUMBER", "12.5e+3", "1..2"},
		      {"SIGNED_NUMBER", "-7", "--7"},
		      {"ESCAPED_STRING", "\"a\\\"b\"", "\"a\nb\""},
		      {"LCASE_LETTER", "q", "Q"},
		      {"UCASE_LETTER", "Q", "q"},
		      {"LETTER", "z", "1"},
		      {"WORD", "Hello", "he llo"},
		      {"CNAME", "_x9", "9x"},
		      {"WS_INLINE", " \t ", "\n"},
		      {"WS", " \r\n\t", "x"},
		      {"CR", "\r", "\n"},
		      {"LF", "\n", "\r"},
		      {"NEWLINE", "\r\n\n", "\r"},
		      {"SH_COMMENT", "# hi", "// hi"},
		      {"CPP_COMMENT", "// hi", "/ hi"},
		      {"SQL_COMMENT", "-- hi", "- hi"},
		      {"C_COMMENT", "/* a * b **/", "/* a */ b */"}};
	for (size_t i = 0; i < sizeof common / sizeof *common; i++) {
		char src[128];
		snprintf(src, sizeof src, "start: %s\n%%import common.%s", common[i].name, common[i].name);
		if (!(g = compile(src)))
			continue;
		EXPECTF(verdict(g, common[i].yes, strlen(common[i].yes)) == 1 &&
				verdict(g, common[i].no, strlen(common[i].no)) != 1,
			"%s: '%s' %d, '%s' %d", common[i].name, common[i].yes,
			verdict(g, common[i].yes, strlen(common[i].yes)), common[i].no,
			verdict(g, common[i].no, strlen(common[i].no)));
		guide_unref(g);
	}
	/* Lark's own JSON example: aliases, [optional], common terminals, %ignore WS */
	g = compile("?start: value\n"
		    "?value: object\n"
		    "      | array\n"
		    "      | string\n"
		    "      | SIGNED_NUMBER      -> number\n"
		    "      | \"true\"             -> true\n"
		    "      | \"false\"            -> false\n"
		    "      | \"null\"             -> null\n\n"
		    "array  : \"[\" [value (\",\" value)*] \"]\"\n"
		    "object : \"{\" [pair (\",\" pair)*] \"}\"\n"
		    "pair   : string \":\" value\n\n"
		    "string : ESCAPED_STRING\n\n"
		    "%import common.ESCAPED_STRING\n"
		    "%import common.SIGNED_NUMBER\n"
		    "%import common.WS\n"
		    "%ignore WS\n");
	if (!g)
		return;
	static const struct {
		const char *t;
		int v;
	} json[] = {{" {\"a\": [1, -2.5e3, true], \"b\\\"\" : null } ", 1},
		    {"[]", 1},
		    {"\"x\"", 1},
		    {"{\"a\" 1}", -1},
		    {"[1,]", -1},
		    {"{\"a\": [", 0},
		    {"-", 0},
		    {"\"a\nb\"", -1},
		    {"tru", 0},
		    {"[1 2]", -1}};
	for (size_t i = 0; i < sizeof json / sizeof *json; i++)
		EXPECTF(verdict(g, json[i].t, strlen(json[i].t)) == json[i].v, "Lark JSON '%s': %d, expected %d",
			json[i].t, verdict(g, json[i].t, strlen(json[i].t)), json[i].v);
	guide_unref(g);
}

/* complete / finished at the start and at the end */
static void test_ends(void)
{
	static const struct {
		const char *grammar, *text;
		bool complete, finished;
	} cases[] = {
		{"root ::= \"\"", "", true, true},
		{"root ::= \"a\"?", "", true, false},
		{"root ::= \"a\"?", "a", true, true},
		{"root ::= \"ab\"", "a", false, false},
		{"root ::= [0-9]+", "12", true, false},
		{"root ::= \"x\" (\"y\" | \"\")", "x", true, false},
		{"root ::= \"x\" (\"y\" | \"\")", "xy", true, true},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		struct guide_grammar *g = compile(cases[c].grammar);
		if (!g)
			continue;
		struct jm_state s;
		jm_init(&s, g);
		EXPECT(jm_feed_bytes(&s, g, (const uint8_t *)cases[c].text, strlen(cases[c].text)));
		EXPECTF(jm_complete(&s, g) == cases[c].complete && jm_finished(&s, g) == cases[c].finished,
			"%s on '%s': complete %d finished %d", cases[c].grammar, cases[c].text, jm_complete(&s, g),
			jm_finished(&s, g));
		guide_unref(g);
	}
}

static void test_errors(void)
{
	static const struct {
		const char *grammar, *msg;
	} bad[] = {
		{"", "empty grammar"},
		/* Lark */
		{"start: \"a\"\n%declare X", "line 2: this directive is not supported: %declare (Lark)"},
		{"start: /a/i", "regex flags are not supported: /.../i (Lark)"},
		{"root: \"a\"", "a rule named root is not supported"},
		{"start: x\nx{a}: \"b\"", "line 2: templates (name{...}) are not supported"},
		{"start: X\n%import python.X", "only Lark's common terminals"},
		{"start: FOO\n%import common.FOO", "not one of Lark's common terminals that are supported: FOO"},
		{"start: \"ab\"..\"z\"", "one character on each side"},
		{"start: /(a|)/", "must not match the empty string"},
		{"start: \"a\"~1001", "~ needs counts up to 1000"},
		{"a_rule_whose_name_is_much_longer_than_sixty_three_bytes_in_all_of_it: \"x\"", "longer than 63"},
		{"start: \"a\" undefined_rule", "line 1: undefined rule undefined_rule"},
		{"start: \"a\"\n  | /abc", "line 2: unterminated regex"},
		{"foo bar", "expected a rule \"name ::= ...\" (GBNF / EBNF) or \"name: ...\" (Lark)"},
		{"expr ::= \"1\"", "no rule \"root\""},
		{"root ::= x", "line 1: undefined rule x"},
		{"root ::= \"a\"\n\nr2 ::= \"x\"? r2 \"b\" | \"c\"",
		 "line 3: left recursion behind a part that may match nothing, through rule r2"},
		{"root ::= root \"a\"? | \"b\"",
		 "line 1: left recursion whose other parts may all match nothing (a rule that "
		 "derives itself), through rule root"},
		{"root ::= \"a\" b\nb ::= \"b\" b",
		 "line 1: no output is whole: every alternative of the rule needs a rule that "
		 "never ends, rule root"},
		{"root ::= a | \"z\"\na ::= \"x\"? root",
		 "line 2: left recursion behind a part that may match nothing, through rule a"},
		{"root ::= \"abc", "unterminated string"},
		{"root ::= [abc", "unterminated character class"},
		{"root ::= [z-a]", "out of order"},
		{"root ::= []", "empty character class"},
		{"root ::= \"\\q\"", "unknown escape \\q"},
		{"root ::= \"\\uD800\"", "not a Unicode character"},
		{"root ::= (\"a\"", "missing )"},
		{"root ::= \"a\")", "unbalanced )"},
		{"root ::= \"a\"{2,1}", "n < m"},
		{"root ::= \"a\"{1001}", "over 1000"},
		{"root ::= \"a\"*+", "multiple repeat"},
		{"root ::= \"a\"{}", "bad repetition"},
		{"root ::= \"a\"{1,2", "bad repetition"},
		{"root ::= \"\"*{2}", "multiple repeat"},
		{"root ::= (= \"a\") \"b\"", "lookahead"},
		{"root ::= @", "unexpected character @"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct guide_grammar *g = NULL;
		struct err e = {0};
		EXPECTF(guide_from_ebnf(bad[i].grammar, strlen(bad[i].grammar), &g, &e) < 0 && !g &&
				strstr(e.msg, bad[i].msg) && !strncmp(e.msg, "grammar", 7),
			"'%s': '%s', expected '%s'", bad[i].grammar, e.msg, bad[i].msg);
	}
	/* repetitions are rules, not copies: nesting them stays small, but many long ones in a row
	 * expand past the bound */
	struct guide_grammar *g = compile("root ::= ((\"a\"{1000}){1000})");
	EXPECT(g && verdict(g, "aaaa", 4) == 0);
	guide_unref(g);
	char big[1024] = "root ::=";
	for (int i = 0; i < 70; i++)
		strcat(big, " \"a\"{1000}");
	struct err e = {0};
	EXPECTF(guide_from_ebnf(big, strlen(big), &g, &e) < 0 && strstr(e.msg, "too large"), "70 x {1000}: '%s'",
		e.msg);
	/* rewriting left recursion copies alternatives into each other: bounded the same way
	 * (q's 400 alternatives each get r's 200-element one) */
	char *lr = malloc(16384);
	if (lr) {
		int n = sprintf(lr, "root ::= r\nr ::= q");
		for (int i = 0; i < 200; i++)
			n += sprintf(lr + n, " \"a\"");
		n += sprintf(lr + n, " | \"y\"\nq ::= r \"0\"");
		for (int i = 1; i < 400; i++)
			n += sprintf(lr + n, " | r \"%d\"", i);
		EXPECTF(guide_from_ebnf(lr, (size_t)n, &g, &e) < 0 &&
				strstr(e.msg,
				       "line 3: the grammar is too large (more than 65536 elements) once the left "
				       "recursion is rewritten, through rule q"),
			"400 x 200: '%s'", e.msg);
		free(lr);
	}
	/* multi-line rules, several definitions of one name, names with - and . */
	g = compile("root ::= a-b\n  | c.d\na-b ::= \"x\"\n"
		    "c.d ::= \"y\"\nc.d ::= \"z\"");
	if (g) {
		EXPECT(verdict(g, "x", 1) == 1 && verdict(g, "y", 1) == 1 && verdict(g, "z", 1) == 1 &&
		       verdict(g, "w", 1) == -1);
		guide_unref(g);
	}
}

/* the vocabulary mask of a grammar state equals feeding every token's bytes */
static void test_masks(void)
{
	struct mask_fixture m;
	if (!mask_fixture_open(&m, "tiny-v3"))
		return;
	struct guide_vocab *v = m.v;
	struct tok *t = m.t;
	uint8_t *allow = m.allow;
	int V = m.V;
	struct guide_grammar *g = compile("root ::= \"SELECT \" cols \" FROM \" [a-z_]+ (\" WHERE \" cond)? \";\"\n"
					  "cols ::= \"*\" | [a-z]+ (\", \" [a-z]+)*\n"
					  "cond ::= [a-z]+ \" = \" ([0-9]+ | \"'\" [^']* \"'\")");
	static const char *const prefixes[] = {"",
					       "SEL",
					       "SELECT ",
					       "SELECT a, b",
					       "SELECT * FROM t",
					       "SELECT * FROM t WHERE x = '",
					       "SELECT * FROM t WHERE x = 12"};
	/* twice: the second time from the mask cache, still equal to feeding every token */
	for (int round = 0; round < 2; round++)
		for (size_t p = 0; g && p < sizeof prefixes / sizeof *prefixes; p++)
			check_mask(v, t, V, g, "SQL grammar", prefixes[p], allow);
	/* two grammars whose states have the same bytes never share a cached mask */
	struct guide_grammar *ga = compile("root ::= [a-z]+"), *gb = compile("root ::= [0-9]+");
	for (int round = 0; ga && gb && round < 2; round++) {
		check_mask(v, t, V, ga, "letters", "", allow);
		check_mask(v, t, V, gb, "digits", "", allow);
		check_mask(v, t, V, ga, "letters", "ab", allow);
		check_mask(v, t, V, gb, "digits", "12", allow);
	}
	guide_unref(ga);
	guide_unref(gb);
	guide_unref(g);
	mask_fixture_close(&m);
}

TESTS(T(test_regular_vs_pcre2), T(test_non_regular), T(test_ends), T(test_errors), T(test_masks))
