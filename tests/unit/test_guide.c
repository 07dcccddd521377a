/* Guided decoding (src/guide): the byte matcher against tables of whole outputs for several
 * grammars, its byte-by-byte prefix property, schema compile errors, the token masks of
 * guide/vocab.c against brute force on the DeepSeek tokenizer, random guided generations
 * that must parse, and the grammars' reference counts. In the tables below a ' stands for a
 * " (so the JSON stays readable); every failure is also printed to stderr as "# ...". */
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "guide/grammar.h"
#include "guide/matcher.h"
#include "guide/vocab.h"
#include "harness.h"
#include "tok/tokenizer.h"

/* a failure, also printed to stderr (the harness shows only a test's first one) */
__attribute__((format(printf, 3, 4))) static void failf(const char *file, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "# %s\n", msg);
	harness_fail(file, line, "%s", msg);
}
#define FAILF(...) failf(__FILE__, __LINE__, __VA_ARGS__)

/* printable form of bytes for messages (four rotating buffers) */
static const char *show(const void *p, size_t n)
{
	static char buf[4][600];
	static int k;
	char *o = buf[k++ & 3];
	const unsigned char *s = p;
	size_t j = 0;
	for (size_t i = 0; i < n && j + 8 < sizeof buf[0]; i++) {
		if (s[i] >= 0x20 && s[i] < 0x7f)
			o[j++] = (char)s[i];
		else
			j += (size_t)snprintf(o + j, 8, "\\x%02x", s[i]);
	}
	o[j] = 0;
	return o;
}

/* a copy of s with every ' turned into " (caller frees) */
static char *sq(const char *s)
{
	char *t = strdup(s);
	for (char *p = t; *p; p++)
		if (*p == '\'')
			*p = '"';
	return t;
}

enum { G_OBJ, G_REQ, G_TYPES, G_TREE, G_STR, G_ALT, G_NUM, G_TOPSTR, G_CHOICE, N_G };
static const char *const g_name[N_G] = {"json_object", "req",    "types",      "tree",  "str",
					"alt",         "number", "top_string", "choice"};
static const char *const g_schema[N_G] = {
	[G_REQ] = "{'type':'object','properties':{'a':{'type':'integer'},'b':{'type':'string'},"
		  "'c':{'type':'boolean'},'d':{'type':'null'}},'required':['a','c']}",
	[G_TYPES] = "{'properties':{'n':{'type':'number'},'e':{'enum':['red','green',1,null]},"
		    "'k':{'const':{'a':[1,'x']}},'u':{'anyOf':[{'type':'integer'},{'type':'string','maxLength':2}]},"
		    "'o':{'type':['string','null']},'t':{'type':'array','items':{'type':'integer'},'minItems':1,"
		    "'maxItems':3},'s':{'type':'object','properties':{'x':{'type':'integer'},'y':{'type':'string'}},"
		    "'required':['y']},'m':{'type':'object','additionalProperties':{'type':'integer'}},"
		    "'f':{'type':'object','additionalProperties':false}}}",
	[G_TREE] = "{'$defs':{'node':{'type':'object','properties':{'v':{'type':'integer'},'kids':{'type':'array',"
		   "'items':{'$ref':'#/$defs/node'}}},'required':['v']}},'$ref':'#/$defs/node'}",
	[G_STR] = "{'type':'object','properties':{'s':{'type':'string','minLength':2,'maxLength':3}},"
		  "'required':['s']}",
	[G_ALT] = "{'anyOf':[{'type':'object','properties':{'id':{'type':'string','maxLength':2},"
		  "'x':{'type':'integer'}},'required':['id','x']},{'type':'object','properties':{'id':{'type':"
		  "'string','maxLength':5},'y':{'type':'boolean'}},'required':['id','y']}]}",
	[G_NUM] = "{'type':'number'}",
	[G_TOPSTR] = "{'type':'string','maxLength':2,'description':'a top-level string'}",
};
static const char *const choices[] = {"yes", "no", "yes!", "\xc3\xa9t\xc3\xa9"};

static struct guide_grammar *build(int k)
{
	struct err e = {{0}};
	struct guide_grammar *g = NULL;
	int rc;
	if (k == G_OBJ) {
		rc = guide_from_json_object(&g, &e);
	} else if (k == G_CHOICE) {
		size_t lens[4];
		for (int i = 0; i < 4; i++)
			lens[i] = strlen(choices[i]);
		rc = guide_from_choices(choices, lens, 4, &g, &e);
	} else {
		char *s = sq(g_schema[k]);
		json_error_t je;
		json_t *j = json_loads(s, 0, &je);
		free(s);
		if (!j) {
			FAILF("test schema %s: %s", g_name[k], je.text);
			return NULL;
		}
		rc = guide_from_schema(j, g_name[k], &g, &e);
		json_decref(j);
	}
	if (rc < 0 || !g)
		FAILF("grammar %s: %s", g_name[k], e.msg);
	return rc < 0 ? NULL : g;
}

static void build_all(struct guide_grammar **gs)
{
	for (int k = 0; k < N_G; k++)
		gs[k] = build(k);
}

static void free_all(struct guide_grammar **gs)
{
	for (int k = 0; k < N_G; k++)
		guide_unref(gs[k]);
}

/* feeds p byte by byte from jm_init into s: index of the first refused byte, or -1 */
static long run(const struct guide_grammar *g, const char *p, size_t n, struct jm_state *s)
{
	jm_init(s, g);
	for (size_t i = 0; i < n; i++)
		if (!jm_feed(s, g, (uint8_t)p[i]))
			return (long)i;
	return -1;
}

/* the limits in the tables below */
_Static_assert(JM_MAX_WS == 32 && JM_MAX_NUM == 32 && JM_MAX_DEPTH == 32, "update the tables");
#define W8 "  \t  \t  "
#define W32 W8 W8 W8 W8
#define D31 "1234567890123456789012345678901"
#define L8 "[[[[[[[["
#define R8 "]]]]]]]]"

/* per grammar: whole outputs to accept, and outputs to refuse (a byte refused, or incomplete) */
static const struct mcase {
	int g;
	const char *yes[14], *no[36]; /* NULL-terminated: the last slot stays empty */
} mcases[] = {
	{G_OBJ,
	 {"{}", "{ }", "{'a':[1,{'b':null}],'c':'\\u00e9','a':true,'':-1.5e3}",
	  "{\n  'x': [ ],\n\t'y': {'z': [false, 0.25, 'q']}\r\n}",
	  "{'\xe4\xb8\xad\xf0\x9f\x98\x80':'\\/\\b\\f\\n\\r\\t\\\\\\''}", "{'x':[" W32 "1]}", "{'x'" W32 ":2}",
	  "{'a':" L8 L8 L8 "[[[[["
	  "'x'"
	  "]]]]]" R8 R8 R8 "}" /* 30 deep */},
	 {"[]",
	  "'x'",
	  "1",
	  "null",
	  " {}",
	  "{}\n",
	  "{}{}",
	  "{'a'}",
	  "{'a':}",
	  "{a:1}",
	  "{'a':1,}",
	  "{,'a':1}",
	  "{'a':[1,]}",
	  "{'a':[,1]}",
	  "{'a':[1 2]}",
	  "{'a':tru}",
	  "{'a':True}",
	  "{'a':nul",
	  "{'a':1}}",
	  "{'a':NaN}",
	  "{'a':-Infinity}",
	  "{'a':1",
	  "{'a':'x}",
	  "{'a\x01':1}",
	  "{'a':'\\x41'}",
	  "{'a':'\\a'}",
	  "{'a':'\\U0041'}",
	  "{'a':'\x1f'}",
	  "{'x':[" W32 " 1]}",
	  "{'x'" W32 " :2}",
	  "{'a':" L8 L8 L8 L8 "1" R8 R8 R8 R8 "}"}},
	/* key order, optional keys, required keys, no unknown keys, integers, line breaks */
	{G_REQ,
	 {"{'a':1,'c':true}", "{'a':1,'b':'x','c':false,'d':null}", "{'a':-0,'c':true,'d':null}",
	  "{'a':120,'b':'','c':true}", "{ 'a' : 1 ,\n 'c' : true }", "{\n  'a': 1,\r\n  'c': true\n}",
	  "{'a':" W32 "1,'c':true}", "{'a':\r\n" W8 W8 W8 "      1,'c':true}", "{'a':-" D31 ",'c':true}"},
	 {"{'c':true,'a':1}",
	  "{'b':'x','a':1,'c':true}",
	  "{'a':1,'c':true,'b':'x'}",
	  "{'a':1}",
	  "{'c':true}",
	  "{}",
	  "{'a':1,'c':true,'e':1}",
	  "{'a':1,'x':2,'c':true}",
	  "{'a':1,'a':2,'c':true}",
	  "{'a':1,'c':true,}",
	  "{'a':1,'c':true,'d':null,}",
	  "{'a':1.5,'c':true}",
	  "{'a':1e5,'c':true}",
	  "{'a':1.0,'c':true}",
	  "{'a':01,'c':true}",
	  "{'a':'1','c':true}",
	  "{'a':1,'c':'true'}",
	  "{'a':1,'b':null,'c':true}",
	  "{'a':1,'c':true,'d':0}",
	  " {'a':1,'c':true}",
	  "{'a':1,'c':true} ",
	  "{\n\n'a':1,'c':true}",
	  "{'a':1,\r\n\r\n'c':true}",
	  "{'a':1,\n \n'c':true}",
	  "{'a':1,\r 'c':true}",
	  "{'a':\r\r\n1,'c':true}",
	  "{'a':" W32 " 1,'c':true}",
	  "{'a':1" W32 "\n,'c':true}",
	  "{'a':\n" W32 "1,'c':true}",
	  "{'a':-" D31 "2,'c':true}"}},
	/* number grammar, enum, const, anyOf, type lists, arrays, nested objects */
	{G_TYPES,
	 {"{}", "{'n':-0}", "{'n':1e+5}", "{'n':1.25E-3}", "{'n':0.5}", "{'n':-10e2}", "{'e':'red','u':12,'o':null}",
	  "{'e':1,'k':{'a':[1,'x']},'u':'ab','o':'z','t':[1]}", "{'e':null,'t':[1, 2,\n3],'s':{'y':''}}",
	  "{'n':2,'e':'green','k':{'a':[1,'x']},'u':-3,'o':'','t':[0],'s':{'x':1,'y':'w'}}",
	  "{'m':{'x':1,'y':-2,'x':3},'f':{}}", "{'m':{}}"},
	 {"{'n':01}",
	  "{'n':1.}",
	  "{'n':.5}",
	  "{'n':+1}",
	  "{'n':1e}",
	  "{'n':1e+}",
	  "{'n':--1}",
	  "{'n':-}",
	  "{'n':1.5.2}",
	  "{'n':0x1}",
	  "{'e':'blue'}",
	  "{'e':'Red'}",
	  "{'e':2}",
	  "{'e':10}",
	  "{'e':'red '}",
	  "{'k':{'a':[1, 'x']}}",
	  "{'k':{'a':[1]}}",
	  "{'u':'abc'}",
	  "{'u':1.5}",
	  "{'u':true}",
	  "{'o':1}",
	  "{'t':[]}",
	  "{'t':[1,2,3,4]}",
	  "{'t':[1,]}",
	  "{'t':[1.5]}",
	  "{'t':1}",
	  "{'s':{'x':1}}",
	  "{'s':{}}",
	  "{'s':{'y':'q','x':1}}",
	  "{'s':{'y':'q','z':1}}",
	  "{'t':[1],'n':1}",
	  "{'m':{'x':'1'}}",
	  "{'m':[]}",
	  "{'f':{'a':1}}",
	  "{'f':{},'m':{}}"}},
	/* recursion through $ref */
	{G_TREE,
	 {"{'v':1}", "{'v':1,'kids':[]}", "{'v':1,'kids':[{'v':2},{'v':3,'kids':[{'v':4,'kids':[{'v':5}]}]}]}"},
	 {"{'v':1,'kids':[{}]}", "{'v':1,'kids':[{'v':'x'}]}", "{'kids':[]}", "{'v':1,'kids':[1]}",
	  "{'v':1,'kids':[{'v':2,'kids':[{'w':3}]}]}"}},
	/* minLength 2 / maxLength 3 in characters, escapes, UTF-8 */
	{G_STR,
	 {"{'s':'ab'}", "{'s':'abc'}", "{'s':'\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80'}", "{'s':'\xc3\xa9\xc3\xa9'}",
	  "{'s':'\\u00e9\\n\\''}", "{'s':'\\u00E9\\/\\\\'}", "{'s':'\xef\xbf\xbf\xf4\x8f\xbf\xbf\x7f'}"},
	 {"{'s':'a'}",
	  "{'s':'\xc3\xa9'}",
	  "{'s':'abcd'}",
	  "{'s':'\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9'}",
	  "{'s':'\\u00e9\\u00e9\\u00e9\\u00e9'}",
	  "{'s':'\\xb'}",
	  "{'s':'\\u00g0'}",
	  "{'s':'\\u00e'}",
	  "{'s':'\\ab'}",
	  "{'s':'a\x01'}",
	  "{'s':'a\x1f'}",
	  "{'s':'a\nb'}",
	  "{'s':'a\tb'}",
	  "{'s':'\xc0\x80"
	  "a'}",
	  "{'s':'\xc1\xbf"
	  "a'}",
	  "{'s':'\xe0\x80\x80"
	  "a'}",
	  "{'s':'\xed\xa0\x80"
	  "a'}",
	  "{'s':'\xf0\x80\x80\x80"
	  "a'}",
	  "{'s':'\xf4\x90\x80\x80"
	  "a'}",
	  "{'s':'\xf5\x80\x80\x80'}",
	  "{'s':'\xff\xfe'}",
	  "{'s':'\x80\x80'}",
	  "{'s':'a\xe2\x82'}",
	  "{'s':'a\xc3'}"}},
	/* two objects sharing their first key */
	{G_ALT,
	 {"{'id':'ab','x':1}", "{'id':'ab','y':true}", "{'id':'abcde','y':false}"},
	 {"{'id':'abc','x':1}", "{'id':'abcdef','y':false}", "{'id':'a','x':1,'y':true}", "{'id':'a'}", "{'x':1}"}},
	/* top-level values: no whitespace around them */
	{G_NUM, {"0", "-0", "-12.5e-3", "1E5"}, {"01", "1 ", " 1", "1.", "-", "1e", "1.5e+", "'1'"}},
	{G_TOPSTR, {"''", "'\xf0\x9f\x98\x80\\u0041'"}, {"'abc'", "ab", "'a'\n"}},
	/* choices: raw text, exactly one of them */
	{G_CHOICE, {"yes", "no", "yes!", "\xc3\xa9t\xc3\xa9"}, {"ye", "yes!!", "No", " yes", "'yes'", ""}},
};
#define N_MCASES (int)(sizeof mcases / sizeof mcases[0])

static void test_matcher_table(void)
{
	struct guide_grammar *gs[N_G];
	build_all(gs);
	static struct jm_state s, s2;
	for (int i = 0; i < N_MCASES; i++)
		if (mcases[i].yes[13] || mcases[i].no[35])
			FAILF("%s: table row full", g_name[mcases[i].g]);
	for (int i = 0; i < N_MCASES; i++)
		for (int ok = 0; ok <= 1; ok++)
			for (const char *const *in0 = ok ? mcases[i].yes : mcases[i].no; *in0 && gs[mcases[i].g];
			     in0++) {
				const struct guide_grammar *g = gs[mcases[i].g];
				char *in = sq(*in0);
				size_t n = strlen(in);
				long bad = run(g, in, n, &s);
				bool acc = bad < 0 && jm_complete(&s, g);
				/* nothing may follow an accepted output but a top-level number or a choice that
				 * is a prefix of another */
				bool fin = mcases[i].g != G_NUM && strcmp(in, "yes");
				if (acc != ok)
					FAILF("%s: '%s' %s (first refused byte %ld, complete %d)", g_name[mcases[i].g],
					      show(in, n), acc ? "accepted" : "refused", bad,
					      bad < 0 && jm_complete(&s, g));
				else if (ok && jm_finished(&s, g) != fin)
					FAILF("%s: '%s': finished %d", g_name[mcases[i].g], show(in, n), !fin);
				jm_init(&s2, g);
				if (jm_feed_bytes(&s2, g, (const uint8_t *)in, n) != (bad < 0))
					FAILF("%s: '%s': jm_feed_bytes disagrees with jm_feed", g_name[mcases[i].g],
					      show(in, n));
				free(in);
			}
	free_all(gs);
}

/* the live parts of two states are equal */
static bool same_state(const struct jm_state *a, const struct jm_state *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++)
		if (a->s[i].depth != b->s[i].depth ||
		    memcmp(a->s[i].f, b->s[i].f, sizeof a->s[i].f[0] * (size_t)a->s[i].depth))
			return false;
	return true;
}

/* An accepted output: each prefix is accepted one byte at a time; a refused byte leaves the
 * state as it was, which still takes the rest of the output. */
static void check_prefixes(const struct guide_grammar *g, const char *name, const char *in, uint64_t *seed)
{
	static struct jm_state s, t, u;
	size_t n = strlen(in);
	jm_init(&s, g);
	for (size_t k = 0; k <= n; k++) {
		int probes = 0, pick = (int)(test_rand(seed) % 256);
		for (int b = 0; b < 256; b++) {
			jm_copy(&t, &s);
			if (jm_feed(&t, g, (uint8_t)b))
				continue;
			if (!same_state(&t, &s)) {
				FAILF("%s: '%s': refused byte 0x%02x after %zu bytes changed the state", name,
				      show(in, n), b, k);
				return;
			}
			if (probes++ == 0 || b >= pick) { /* the first refused byte and a random one */
				pick = 256;
				jm_copy(&u, &t);
				if (!jm_feed_bytes(&u, g, (const uint8_t *)in + k, n - k) || !jm_complete(&u, g)) {
					FAILF("%s: '%s': the rest after %zu bytes and refused 0x%02x fails", name,
					      show(in, n), k, b);
					return;
				}
			}
		}
		if (k < n && !jm_feed(&s, g, (uint8_t)in[k])) {
			FAILF("%s: prefix '%s' refused", name, show(in, k + 1));
			return;
		}
	}
}

static void test_matcher_prefixes(void)
{
	struct guide_grammar *gs[N_G];
	build_all(gs);
	uint64_t seed = 0x5eed1234abcdULL;
	for (int i = 0; i < N_MCASES; i++)
		for (const char *const *in0 = mcases[i].yes; *in0 && gs[mcases[i].g]; in0++) {
			char *in = sq(*in0);
			check_prefixes(gs[mcases[i].g], g_name[mcases[i].g], in, &seed);
			free(in);
		}
	free_all(gs);
}

static void test_schema_errors(void)
{
	static const struct {
		const char *schema, *want1, *want2;
	} bad[] = {
		{"{'type':'string','pattern':'a(?=b)'}", "lookaround", NULL},
		{"{'type':'number','minimum':0.5,'maximum':0.25}", "empty", NULL},
		{"{'allOf':[{'type':'string'},{'maxLength':2}]}", "allOf", NULL},
		{"{'not':{'type':'string'}}", "'not'", NULL},
		{"{'type':'array','uniqueItems':true}", "uniqueItems", NULL},
		{"{'properties':{'a':{'type':'string'},'inner':{'type':'string','not':{}}}}", "inner", "'not'"},
		{"{'items':{'type':'string','not':{}}}", "items", "'not'"},
		{"{'$ref':'#/$defs/nope','$defs':{'a':{}}}", "$ref", "nope"},
		{"{'anyOf':[{'type':'string'}],'type':'string'}", "anyOf", "type"},
		{"{'type':'object','properties':{'a':{}},'required':['a','b']}", "required", NULL},
		{"{'type':'object','required':['b']}", "required", NULL},
		{"{'type':'array','minItems':3,'maxItems':2}", "maxItems", NULL},
		{"{'type':'string','minLength':3,'maxLength':2}", "maxLength", NULL},
		{"{'type':'strin'}", "strin", NULL},
		{"{'enum':[]}", "enum", NULL},
		{"false", "root", "false"},
	};
	struct err e;
	struct guide_grammar *g;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0] + 1; i++) {
		json_t *j;
		const char *w1 = "properties", *w2 = "64";
		if (i < sizeof bad / sizeof bad[0]) {
			char *s = sq(bad[i].schema);
			j = json_loads(s, JSON_DECODE_ANY, NULL);
			free(s);
			w1 = bad[i].want1, w2 = bad[i].want2;
		} else { /* one property more than GUIDE_MAX_PROPS */
			json_t *p = json_object();
			for (int k = 0; k <= GUIDE_MAX_PROPS; k++) {
				char name[16];
				snprintf(name, sizeof name, "p%d", k);
				json_object_set_new(p, name, json_pack("{s:s}", "type", "integer"));
			}
			j = json_pack("{s:s, s:o}", "type", "object", "properties", p);
		}
		memset(&e, 0, sizeof e);
		g = (struct guide_grammar *)1;
		int rc = j ? guide_from_schema(j, "root", &g, &e) : 0;
		if (rc == 0 || g)
			FAILF("schema %zu (%s): compiled (rc %d)", i, w1, rc);
		else if (!strstr(e.msg, w1) || (w2 && !strstr(e.msg, w2)))
			FAILF("schema %zu: message '%s' does not name '%s' / '%s'", i, e.msg, w1, w2 ? w2 : "");
		if (rc == 0)
			guide_unref(g);
		json_decref(j);
	}
	static const char *const ch[] = {"a", ""};
	static const size_t lens[] = {1, 0};
	memset(&e, 0, sizeof e);
	EXPECT(guide_from_choices(ch, lens, 0, &g, &e) < 0 && !g && e.msg[0]);
	memset(&e, 0, sizeof e);
	EXPECT(guide_from_choices(ch, lens, 2, &g, &e) < 0 && !g && strstr(e.msg, "choice 1"));
	/* a self-referencing $ref compiles and refuses everything without looping */
	json_t *j = json_loads("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", 0, NULL);
	if (guide_from_schema(j, "root", &g, &e) == 0) {
		static struct jm_state s;
		jm_init(&s, g);
		EXPECT(!jm_feed(&s, g, '{') && !jm_feed(&s, g, '"') && !jm_complete(&s, g));
		guide_unref(g);
	}
	json_decref(j);
}

/* ---- masks and generation on the DeepSeek tokenizer ---- */

struct vctx {
	struct tok *t;
	struct guide_vocab *v;
	int vocab, n_tok;
	int32_t eos[2]; /* the EOS token and a padding id past the tokenizer's */
};

static bool vctx_open(struct vctx *c)
{
	struct err e = {{0}};
	memset(c, 0, sizeof *c);
	if (tok_load(fixture_path("tokenizer"), &c->t, &e) < 0) {
		FAILF("tok_load: %s", e.msg);
		return false;
	}
	c->n_tok = tok_vocab_size(c->t);
	c->vocab = c->n_tok + 100;
	if (guide_vocab_new(c->t, c->vocab, &c->v, &e) < 0) {
		FAILF("guide_vocab_new: %s", e.msg);
		tok_free(c->t);
		return false;
	}
	c->eos[0] = tok_token_to_id(c->t, "<｜end▁of▁sentence｜>");
	c->eos[1] = c->vocab - 1;
	EXPECT(c->eos[0] >= 0 && tok_is_special(c->t, c->eos[0]));
	return true;
}

static void vctx_close(struct vctx *c)
{
	guide_vocab_free(c->v);
	tok_free(c->t);
}

/* states to compare masks at: prefixes of valid outputs (inside strings: plain, after a
 * backslash, inside \u, inside a UTF-8 character, near maxLength; numbers; keys; complete) */
static const struct {
	int g;
	const char *pre[24]; /* NULL-terminated */
} vstates[] = {
	{G_OBJ,
	 {"",       "{",        "{'",      "{'ab",    "{'a'",      "{'a':",       "{'a': ",         "{'a':-",
	  "{'a':1", "{'a':1.",  "{'a':1e", "{'a':'x", "{'a':'x\\", "{'a':'x\\u0", "{'a':'\xe2\x82", "{'a':'\xf0",
	  "{'a':[", "{'a':[1,", "{'a':t",  "{'a':{}", "{'a':1}"}},
	{G_REQ, {"", "{", "{'a':1", "{'a':1,", "{'a':1,'", "{'a':1,'b':'", "{'a':1,'c':true}"}},
	{G_TYPES,
	 {"{", "{'m':{", "{'m':{'a':", "{'f':{", "{'e':", "{'e':'", "{'e':'r", "{'u':", "{'u':'a", "{'k':{'a':[1,",
	  "{'o':", "{'t':[1,2,3"}},
	{G_TREE, {"{'v':1,'kids':[", "{'v':1,'kids':[{'v':2}", "{'v':1,'kids':[{'v':2,'kids':[{"}},
	{G_STR, {"{'s':'", "{'s':'a", "{'s':'ab", "{'s':'abc", "{'s':'\\u00e9\xc3\xa9", "{'s':'a\xc3", "{'s':'a\\"}},
	{G_ALT, {"{", "{'id'", "{'id':'", "{'id':'ab", "{'id':'abc", "{'id':'a',", "{'id':'a','"}},
	{G_NUM, {"", "-", "12", "1.5e"}},
	/* "" here: the root frame of a top-level string schema is taken for an open string */
	{G_TOPSTR, {"'", "'a", "'ab", "'ab'", ""}},
	{G_CHOICE, {"", "y", "yes"}},
};

static void test_mask_vs_brute_force(void)
{
	struct vctx c;
	if (!vctx_open(&c))
		return;
	struct guide_grammar *gs[N_G];
	build_all(gs);
	uint8_t *allow = malloc((size_t)c.vocab);
	static struct jm_state s, t;
	for (size_t i = 0; i < sizeof vstates / sizeof vstates[0]; i++)
		if (vstates[i].pre[23])
			FAILF("%s: vstates row full", g_name[vstates[i].g]);
	for (size_t i = 0; i < sizeof vstates / sizeof vstates[0]; i++)
		for (const char *const *p0 = vstates[i].pre; *p0 && gs[vstates[i].g]; p0++) {
			const struct guide_grammar *g = gs[vstates[i].g];
			const char *name = g_name[vstates[i].g];
			char *pre = sq(*p0);
			size_t n = strlen(pre);
			if (run(g, pre, n, &s) >= 0) {
				FAILF("%s: prefix '%s' refused", name, show(pre, n));
				free(pre);
				continue;
			}
			int count = guide_vocab_mask(c.v, g, &s, c.eos, 2, allow), want_count = 0;
			bool complete = jm_complete(&s, g);
			for (int32_t id = 0; id < c.vocab; id++) {
				size_t len = 0;
				const char *p = id < c.n_tok ? tok_id_bytes(c.t, id, &len) : NULL;
				bool want = complete && (id == c.eos[0] || id == c.eos[1]);
				if (!want && p && len && !tok_is_special(c.t, id)) {
					jm_copy(&t, &s);
					want = jm_feed_bytes(&t, g, (const uint8_t *)p, len);
				}
				want_count += want;
				if (want != (allow[id] != 0)) {
					FAILF("%s after '%s': token %d '%s' %s by the mask", name, show(pre, n), id,
					      p ? show(p, len) : "(none)", want ? "refused" : "allowed");
					want_count = count;
					break;
				}
			}
			if (want_count != count)
				FAILF("%s after '%s': mask count %d, %d allowed", name, show(pre, n), count,
				      want_count);
			free(pre);
		}
	free(allow);
	free_all(gs);
	vctx_close(&c);
}

static int cps(const json_t *v) /* code points of a string */
{
	int n = 0;
	for (const char *s = json_string_value(v); s && *s; s++)
		n += ((uint8_t)*s & 0xC0) != 0x80;
	return n;
}

/* o is an object whose keys are among the comma-separated names of `order`, in that order,
 * with each name of `req` present */
static bool keys_ok(const json_t *o, const char *order, const char *req)
{
	const char *key;
	json_t *v;
	long at = -1;
	if (!json_is_object(o))
		return false;
	json_object_foreach((json_t *)o, key, v)
	{
		size_t kl = strlen(key);
		const char *p = order;
		while ((p = strstr(p, key)) && ((p > order && p[-1] != ',') || (p[kl] && p[kl] != ',')))
			p++;
		if (!p || p - order <= at)
			return false;
		at = p - order;
	}
	for (char name[16]; *req; req += strcspn(req, ",") + (req[strcspn(req, ",")] == ',')) {
		snprintf(name, sizeof name, "%.*s", (int)strcspn(req, ","), req);
		if (!json_object_get(o, name))
			return false;
	}
	return true;
}

static bool dumps_as(const json_t *v, const char *want) /* compact JSON of v is want */
{
	char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	bool eq = d && !strcmp(d, want);
	free(d);
	return eq;
}

static bool int_array(const json_t *v, size_t mn, size_t mx)
{
	bool ok = json_is_array(v) && json_array_size(v) >= mn && json_array_size(v) <= mx;
	for (size_t i = 0; ok && i < json_array_size(v); i++)
		ok = json_is_integer(json_array_get(v, i));
	return ok;
}

static bool int_values(const json_t *o)
{
	const char *key;
	json_t *x;
	json_object_foreach((json_t *)o, key, x) if (!json_is_integer(x)) return false;
	return true;
}

static bool tree_ok(const json_t *j, int depth)
{
	const json_t *k = json_object_get(j, "kids");
	bool ok = depth < 40 && keys_ok(j, "v,kids", "v") && json_is_integer(json_object_get(j, "v")) &&
		  (!k || json_is_array(k));
	for (size_t i = 0; ok && k && i < json_array_size(k); i++)
		ok = tree_ok(json_array_get(k, i), depth + 1);
	return ok;
}

/* the parsed output of grammar gk meets its schema (by hand) */
static bool value_ok(int gk, const json_t *j)
{
	const json_t *v, *id = json_object_get(j, "id");
#define OPT(key, cond) (!(v = json_object_get(j, key)) || (cond))
	switch (gk) {
	case G_OBJ: return json_is_object(j);
	case G_REQ:
		return keys_ok(j, "a,b,c,d", "a,c") && json_is_integer(json_object_get(j, "a")) &&
		       json_is_boolean(json_object_get(j, "c")) && OPT("b", json_is_string(v)) &&
		       OPT("d", json_is_null(v));
	case G_TYPES:
		return keys_ok(j, "n,e,k,u,o,t,s,m,f", "") && OPT("n", json_is_number(v)) &&
		       OPT("m", json_is_object(v) && int_values(v)) &&
		       OPT("f", json_is_object(v) && !json_object_size(v)) &&
		       OPT("e", dumps_as(v, "\"red\"") || dumps_as(v, "\"green\"") || dumps_as(v, "1") ||
					dumps_as(v, "null")) &&
		       OPT("k", dumps_as(v, "{\"a\":[1,\"x\"]}")) &&
		       OPT("u", json_is_integer(v) || (json_is_string(v) && cps(v) <= 2)) &&
		       OPT("o", json_is_string(v) || json_is_null(v)) && OPT("t", int_array(v, 1, 3)) &&
		       OPT("s", keys_ok(v, "x,y", "y") && json_is_string(json_object_get(v, "y")) &&
					(!json_object_get(v, "x") || json_is_integer(json_object_get(v, "x"))));
	case G_TREE: return tree_ok(j, 0);
	case G_STR:
		return keys_ok(j, "s", "s") && json_is_string(v = json_object_get(j, "s")) && cps(v) >= 2 &&
		       cps(v) <= 3;
	case G_ALT:
		return json_is_string(id) &&
		       ((keys_ok(j, "id,x", "id,x") && json_is_integer(json_object_get(j, "x")) && cps(id) <= 2) ||
			(keys_ok(j, "id,y", "id,y") && json_is_boolean(json_object_get(j, "y")) && cps(id) <= 5));
	case G_NUM: return json_is_number(j);
	case G_TOPSTR: return json_is_string(j) && cps(j) <= 2;
	}
#undef OPT
	return false;
}

/* One random guided generation from jm_init into out (*len bytes): true when it ended on EOS.
 * Tokens are drawn from the mask, mostly not blank (the vocabulary has many whitespace
 * tokens) and, more and more often, holding a closing byte so that strings and containers end. */
struct gen {
	struct vctx c;
	uint8_t *allow, *closing, *blank;
	int32_t *all, *cl, *nb;
	char out[1 << 16];
	uint64_t seed;
};

static bool walk(struct gen *w, const struct guide_grammar *g, const char *name, size_t *len)
{
	static struct jm_state s;
	int32_t eos = w->c.eos[0];
	jm_init(&s, g);
	*len = 0;
	for (int step = 0; step < 300; step++) {
		int count = guide_vocab_mask(w->c.v, g, &s, &eos, 1, w->allow), na = 0, nc = 0, nn = 0;
		for (int32_t id = 0; id < w->c.vocab; id++)
			if (w->allow[id] && id != eos) {
				w->all[na++] = id;
				if (w->closing[id])
					w->cl[nc++] = id;
				if (!w->blank[id])
					w->nb[nn++] = id;
			}
		if (w->allow[eos] && (!na || test_rand(&w->seed) % 2)) {
			if (!jm_complete(&s, g))
				FAILF("%s: EOS allowed on an incomplete output '%s'", name, show(w->out, *len));
			return jm_complete(&s, g);
		}
		if (!na || count != na + (w->allow[eos] != 0)) {
			FAILF("%s: dead end or bad count (%d) after '%s'", name, count, show(w->out, *len));
			return false;
		}
		uint32_t r = test_rand(&w->seed) % 100, pick = test_rand(&w->seed);
		int32_t id = nc && (int)r < (step < 20 ? 20 : 85) ? w->cl[pick % (uint32_t)nc]
			     : nn && r % 10                       ? w->nb[pick % (uint32_t)nn]
								  : w->all[pick % (uint32_t)na];
		size_t tl = 0;
		const char *p = tok_id_bytes(w->c.t, id, &tl);
		if (*len + tl > sizeof w->out)
			return false;
		memcpy(w->out + *len, p, tl);
		*len += tl;
		if (!guide_vocab_advance(w->c.v, g, &s, id)) {
			FAILF("%s: allowed token %d '%s' refused after '%s'", name, id, show(p, tl),
			      show(w->out, *len - tl));
			return false;
		}
	}
	return false;
}

/* Random guided generations must end, parse with jansson and fit the schema. */
static void test_generation(void)
{
	static struct gen w;
	if (!vctx_open(&w.c))
		return;
	struct guide_grammar *gs[N_G];
	build_all(gs);
	size_t nv = (size_t)w.c.vocab, len;
	w.allow = malloc(nv), w.closing = calloc(nv, 1), w.blank = calloc(nv, 1);
	w.all = malloc(sizeof *w.all * nv), w.cl = malloc(sizeof *w.cl * nv), w.nb = malloc(sizeof *w.nb * nv);
	w.seed = 0x243f6a8885a308d3ULL;
	for (int32_t id = 0; id < w.c.n_tok; id++) {
		const char *p = tok_id_bytes(w.c.t, id, &len);
		w.closing[id] = p && (memchr(p, '"', len) || memchr(p, '}', len) || memchr(p, ']', len));
		w.blank[id] = p && len && strspn(p, " \t\r\n") >= len;
	}
	enum { WALKS = 10 };
	for (int gk = 0; gk < N_G; gk++) {
		int ended = 0;
		for (int k = 0; gs[gk] && k < WALKS; k++) {
			if (!walk(&w, gs[gk], g_name[gk], &len))
				continue;
			ended++;
			bool one = false;
			if (gk == G_CHOICE) {
				for (int i = 0; i < 4; i++)
					one = one || (len == strlen(choices[i]) && !memcmp(w.out, choices[i], len));
				if (!one)
					FAILF("choice: generated '%s'", show(w.out, len));
				continue;
			}
			json_error_t je;
			json_t *j = json_loadb(w.out, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
			if (!j && !strstr(je.text, "overflow") && !strstr(je.text, "too big")) /* 7e44261 is JSON */
				FAILF("%s: generated '%s' does not parse: %s", g_name[gk], show(w.out, len), je.text);
			else if (j && !value_ok(gk, j))
				FAILF("%s: generated '%s' does not fit the schema", g_name[gk], show(w.out, len));
			json_decref(j);
		}
		if (gs[gk] && ended * 4 < WALKS * 3)
			FAILF("%s: only %d of %d walks ended", g_name[gk], ended, WALKS);
	}
	free(w.allow), free(w.closing), free(w.blank), free(w.all), free(w.cl), free(w.nb);
	free_all(gs);
	vctx_close(&w.c);
}

static void test_refcount(void)
{
	struct guide_grammar *g = build(G_TREE), *refs[4];
	if (!g)
		return;
	EXPECT(guide_ref(g) == g);
	EXPECT_EQ_INT(atomic_load(&g->refs), 2);
	guide_unref(g);
	EXPECT_EQ_INT(atomic_load(&g->refs), 1);
	for (int i = 0; i < 4; i++)
		refs[i] = guide_ref(g);
	guide_unref(g); /* the last four references keep it alive */
	static struct jm_state s;
	for (int i = 0; i < 4; i++) {
		EXPECT(run(refs[i], "{\"v\":1}", 7, &s) < 0 && jm_finished(&s, refs[i]));
		guide_unref(refs[i]);
	}
	guide_unref(NULL);
	EXPECT(guide_ref(NULL) == NULL);
}

TESTS(T(test_matcher_table), T(test_matcher_prefixes), T(test_schema_errors), T(test_mask_vs_brute_force),
      T(test_generation), T(test_refcount))
