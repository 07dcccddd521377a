/* The Jinja interpreter behind chat templates, feature by feature, against expected strings
 * rendered by jinja2 in transformers' environment (ImmutableSandboxedEnvironment,
 * trim_blocks, lstrip_blocks, loopcontrols, HF's tojson) and written out literally:
 * operators, tests, string methods, filters, tojson, subscripts/slices, loops (loop.*, else,
 * filters, break/continue), scoping and namespace(), macros, literals and Python's str()/repr()
 * of values, whitespace control (-, +, trim_blocks, lstrip_blocks, raw, comments). */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tok/chat_template.h"

/* variables every case sees (passed as kwargs) */
static const char ctx_json[] =
	"{\"d\": {\"b\": [1, 2.5, null], \"a\": \"x\"}, \"s\": \"  Hello World  \", \"n\": 5, \"f\":"
	" 2.5, \"l\": [3, 1, 2], \"e\": [], \"strs\": [\"b\", \"A\", \"a\", \"c\"], \"objs\": [{\"ty"
	"pe\": \"text\", \"text\": \"t1\", \"k\": 2}, {\"type\": \"image\", \"k\": 1}, {\"type\": \""
	"text\", \"text\": \"t2\", \"k\": 3}], \"u\": \"héllo wörld\", \"msgs\": [{\"role\": \"user\""
	", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"<think>r</think>ans\"}]}";

struct jcase {
	const char *name, *src, *expect;
};

/* generated expectations: rendered with jinja2 3.1.6 in transformers' environment */
static const struct jcase cases[] = {
	{"arith",
	 "{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 2 "
	 "** 3 ** 2 }}|{{ 7 / 2 }}|{{ 1.5 + 1 }}|{{ -n }}|{{ 10 - 2 - 3 }}|{{ 'a' ~ 1 ~ none ~ true ~"
	 " nothing }}|{{ 'ab' * 3 }}|{{ [1] + [2] }}|{{ [1,2] * 2 }}|{{ n|float / 2 }}",
	 "7|9|3|-4|1|2|64|3.5|2.5|-5|5|a1NoneTrue|ababab|[1, 2]|[1, 2, 1, 2]|2.5"},
	{"compare_logic",
	 "{{ 1 in l }}{{ 5 in l }}{{ 5 not in l }}{{ 'a' in d }}{{ 'ell' in 'hello' }}{{ 'x' in nothi"
	 "ng }}|{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'a' < 'b' }}{{ [1,2] < [1,3] }}{{ 1 == 1.0 }}{{ 1 !="
	 " 2 }}|{{ not true }}{{ not nothing }}{{ true and 'x' }}{{ false or 'y' }}{{ none or 0 }}{{ "
	 "'a' if n > 3 else 'b' }}[{{ 'a' if n > 9 }}]",
	 "TrueFalseTrueTrueTrueFalse|TrueFalseTrueTrueTrueTrue|FalseTruexy0a[]"},
	{"tests",
	 "{{ n is defined }}{{ nothing is defined }}{{ nothing is undefined }}{{ none is none }}{{ n "
	 "is not none }}{{ s is string }}{{ d is mapping }}{{ l is iterable }}{{ l is sequence }}{{ n"
	 " is number }}{{ n is integer }}{{ f is float }}{{ true is boolean }}{{ true is true }}{{ 1 "
	 "is true }}{{ false is false }}{{ n is eq 5 }}{{ n is equalto(5) }}{{ n is odd }}{{ n is eve"
	 "n }}{{ n is divisibleby 5 }}{{ 'a' is in 'abc' }}{{ 'ab' is lower }}{{ n is gt 3 }}{{ n is "
	 "ne 3 }}{{ d is string }}",
	 "TrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueFalseTrueTrue"
	 "TrueTrueTrueFalse"},
	{"str_methods",
	 "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nA\\n'"
	 ".lstrip('\\n') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1)"
	 " }}|{{ 'a.b.c'.rsplit('.', 1) }}|{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('x','l"
	 "o')) }}|{{ 'aXa'.replace('a','bb') }}|{{ 'aaa'.replace('a','b',2) }}|{{ 'Ab'.lower() }}{{ '"
	 "Ab'.upper() }}|{{ 'hello world'.title() }}|{{ 'hello World'.capitalize() }}|{{ msgs[1].cont"
	 "ent.split('</think>')[-1] }}|{{ '-'.join(['a','b']) }}|{{ 'abcb'.find('b') }}{{ 'abcb'.coun"
	 "t('b') }}",
	 "Hello World|Hello World  |  Hello World|hi|A\n"
	 "|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a.b', 'c']|True|True|bbXbb|bba|abAB|Hello Wo"
	 "rld|Hello world|ans|a-b|12"},
	{"filters_str",
	 "{{ s|trim }}|{{ s|trim('  H') }}|{{ 'abc'|upper }}{{ 'ABC'|lower }}{{ 'hello world-foo'|tit"
	 "le }}{{ 'hELLO'|capitalize }}|{{ 'a-b'|replace('-', '+') }}|{{ 'x\\ny\\n\\nz'|indent(2) }}|"
	 "{{ 'x\\ny'|indent(2, true) }}|{{ 'x\\n\\ny\\n'|indent(width='>', blank=true) }}|{{ n|string"
	 " + 'x' }}|{{ nothing|default('dflt') }}|{{ ''|default('dflt') }}|{{ ''|default('dflt', true"
	 ") }}|{{ none|d('z', boolean=true) }}|{{ f|int }}|{{ '42'|int + 1 }}|{{ 'x'|int }}|{{ n|floa"
	 "t }}|{{ -3|abs }}|{{ 2.567|round(2) }}|{{ 'abc'|reverse }}|{{ u|length }}",
	 "Hello World|ello World|ABCabcHello World-FooHello|a+b|x\n"
	 "  y\n"
	 "\n"
	 "  z|  x\n"
	 "  y|x\n"
	 ">\n"
	 ">y\n"
	 ">|5x|dflt||dflt|z|2|43|0|5.0|3|2.57|cba|11"},
	{"filters_seq",
	 "{{ l|length }}|{{ d|length }}|{{ l|count }}|{{ l|first }}|{{ l|last }}|{{ l|list }}|{{ l|so"
	 "rt }}|{{ l|sort(reverse=true) }}|{{ strs|sort }}|{{ l|reverse|list }}|{{ l|join('-') }}|{{ "
	 "l|sum }}|{{ l|min }}{{ l|max }}|{{ strs|unique|list }}|{{ d|items|list }}|{{ d|dictsort }}|"
	 "{{ objs|selectattr('type', 'equalto', 'text')|map(attribute='text')|join(', ') }}|{{ objs|r"
	 "ejectattr('type', 'eq', 'text')|list|length }}|{{ objs|map(attribute='k')|sort|list }}|{{ o"
	 "bjs|sort(attribute='k')|map(attribute='k')|list }}|{{ strs|select('lower')|list }}|{{ [0,1,"
	 "2,'',none]|select|list }}|{{ [0,1,2]|reject|list }}|{{ strs|map('upper')|list }}|{{ objs|se"
	 "lectattr('text', 'defined')|list|length }}|{{ e|first }}",
	 "3|2|3|3|2|[3, 1, 2]|[1, 2, 3]|[3, 2, 1]|['A', 'a', 'b', 'c']|[2, 1, 3]|3-1-2|6|13|['b', 'A'"
	 ", 'c']|[('b', [1, 2.5, None]), ('a', 'x')]|[('a', 'x'), ('b', [1, 2.5, None])]|t1, t2|1|[1,"
	 " 2, 3]|[1, 2, 3]|['b', 'a', 'c']|[1, 2]|[0]|['B', 'A', 'A', 'C']|2|"},
	{"tojson",
	 "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ l|tojson }}|{{ e|tojson }}|{{ {}|tojson }}|{{ 'a"
	 "\"b\\\\c\\n\\u00e9\\x01'|tojson }}|{{ 3.0|tojson }}|{{ true|tojson }}|{{ none|tojson }}|{{ "
	 "d|tojson(sort_keys=true) }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(indent='\\t')"
	 " }}|{{ objs[0]|tojson(indent=4) }}",
	 "{\"b\": [1, 2.5, null], \"a\": \"x\"}|{\n"
	 "  \"b\": [\n"
	 "    1,\n"
	 "    2.5,\n"
	 "    null\n"
	 "  ],\n"
	 "  \"a\": \"x\"\n"
	 "}|[3, 1, 2]|[]|{}|\"a\\\"b\\\\c\\né\\u0001\"|3.0|true|null|{\"a\": \"x\", \"b\": [1, 2.5, n"
	 "ull]}|{\"b\":[1,2.5,null],\"a\":\"x\"}|{\n"
	 "\t\"b\": [\n"
	 "\t\t1,\n"
	 "\t\t2.5,\n"
	 "\t\tnull\n"
	 "\t],\n"
	 "\t\"a\": \"x\"\n"
	 "}|{\n"
	 "    \"type\": \"text\",\n"
	 "    \"text\": \"t1\",\n"
	 "    \"k\": 2\n"
	 "}"},
	{"dict_access",
	 "{{ d.items()|list }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.get('a') }}|{{ d.get('z"
	 "z', 'def') }}|{{ d.get('zz') }}|{{ d.a }}{{ d['a'] }}[{{ d.zz }}{{ d['zz'] }}]{{ l.0 }}|{{ "
	 "msgs[0].role }}{{ msgs[0]['content'] }}",
	 "[('b', [1, 2.5, None]), ('a', 'x')]|['b', 'a']|[[1, 2.5, None], 'x']|x|def|None|xx[]3|userH"
	 "i"},
	{"subscript_slice",
	 "{{ l[0] }}{{ l[-1] }}{{ l[1:] }}{{ l[:-1] }}{{ l[::-1] }}{{ l[::2] }}[{{ l[5] }}]|{{ u[1:3]"
	 " }}{{ u[-1] }}{{ u[::-1] }}|{{ 'abcdef'[-3:-1] }}{{ 'abcdef'[10:] }}|{{ l[1:100] }}",
	 "32[1, 2][3, 1][2, 1, 3][3, 2][]|élddlröw olléh|de|[1, 2]"},
	{"loops",
	 "{% for k, v in d.items() %}{{ loop.index }}{{ loop.index0 }}{{ k }}={{ v }}{{ loop.first }}"
	 "{{ loop.last }}{{ loop.length }}{{ loop.revindex }};{% endfor %}|{% for x in l if x > 1 %}{"
	 "{ x }}{{ loop.index }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in e %}{{ x }}{%"
	 " else %}empty{% endfor %}|{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{% if x ="
	 "= 2 %}{% break %}{% endif %}{{ x }}{% endfor %}|{% for x in [1,2] %}{% for y in 'ab' %}{{ l"
	 "oop.index }}{{ x }}{{ y }}{% endfor %}{{ loop.index }}{% endfor %}|{% for m in msgs[::-1] %"
	 "}{{ m.role }}{% endfor %}|{% for x in l %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor"
	 " %}|{% for c in 'hé' %}[{{ c }}]{% endfor %}",
	 "10b=[1, 2.5, None]TrueFalse22;21a=xFalseTrue21;|312222|empty|3|11a21b112a22b2|assistantuser"
	 "|-1,3-2,1-,|[h][é]"},
	{"scoping",
	 "{% set ns = namespace(a=1, s='') %}{% for x in l %}{% set ns.a = ns.a + x %}{% set ns.s = n"
	 "s.s ~ x %}{% endfor %}{{ ns.a }}{{ ns.s }}|{% set x = 1 %}{% for i in l %}{% set x = i %}{%"
	 " endfor %}{{ x }}|{% if true %}{% set y = 2 %}{% endif %}{{ y }}|{% for i in [1,2] %}[{{ z "
	 "}}]{% set z = i %}{{ z }}{% endfor %}|{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = (1,) %"
	 "}{{ t }}|{{ (1, 'a') }}|{% set blk %}  block {{ n }}  {% endset %}[{{ blk }}]",
	 "7312|1|2|[]1[]2|12|(1,)|(1, 'a')|[  block 5  ]"},
	{"macros",
	 "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }}"
	 "|{{ greet('B', '?') }}|{{ greet(name='C') }}|{{ greet('D', punct='.') }}|{{ greet() }}|{% m"
	 "acro rec(k) %}{% if k > 0 %}{{ k }}{{ rec(k - 1) }}{% endif %}{% endmacro %}{{ rec(3) }}",
	 "Hello A!|Hello B?|Hello C!|Hello D.|Hello !|321"},
	{"literals",
	 "{{ range(3)|list }}{{ range(1,4)|list }}{{ range(5,0,-2)|list }}|{{ dict(a=1, b='x') }}|{{ "
	 "namespace(x=2).x }}|{{ [1, 'a', none, true, 1.5, 1e20, 1e-7, 0.1] }}|{{ {'a': [1, {'b': non"
	 "e}]} }}|{{ \"it's\" }}|{{ ['it\\'s', \"q\\\"d\"] }}|{{ 1e16 }}{{ 123.456 }}{{ -0.0 }}{{ 100"
	 ".0 }}{{ 0.1 + 0.2 }}|{{ \"adj\" 'acent' }}|{{ 'a\\tb\\x41\\u00e9\\\\d' }}|{{ 1_000 }}|{{ Tr"
	 "ue }}{{ None }}",
	 "[0, 1, 2][1, 2, 3][5, 3, 1]|{'a': 1, 'b': 'x'}|2|[1, 'a', None, True, 1.5, 1e+20, 1e-07, 0."
	 "1]|{'a': [1, {'b': None}]}|it's|[\"it's\", 'q\"d']|1e+16123.456-0.0100.00.30000000000000004"
	 "|adjacent|a\tbAé\\d|1000|TrueNone"},
	{"whitespace",
	 "{%- if true -%}   trimmed   {%- endif -%}   |{% if true %}\n"
	 "  kept\n"
	 "{% endif %}\n"
	 "    {% if true %}lstripped{% endif %}\n"
	 "  {{ 'var not lstripped' }}\n"
	 "  {%+ if true %}plus{% endif %}\n"
	 "  {# comment #}\n"
	 "x {#- c -#} y\n"
	 "{% raw %}{{ not evaluated }}{% endraw %}\n"
	 "{%- for m in msgs -%}\n"
	 "  {{ m.role }}\n"
	 "{%- endfor %}\n"
	 "{{ 'a' -}}\n"
	 "\n"
	 "   {{- 'b' }}\015\n"
	 "end\n",
	 "trimmed|  kept\n"
	 "lstripped  var not lstripped\n"
	 "  plusxy\n"
	 "{{ not evaluated }}userassistantab\n"
	 "end"},
	{"whitespace2",
	 "<{% for x in l %}\n"
	 "    {{ x }}\n"
	 "{% endfor %}>\n"
	 "  {%- set q = 1 %}\n"
	 "\t{% if q %}tab{% endif %}\n"
	 " {#- c #}\n"
	 "{{ q }}\n"
	 "\n",
	 "<    3\n"
	 "    1\n"
	 "    2\n"
	 ">tab1\n"},
	{"undefined",
	 "[{{ nothing }}]{{ nothing is defined }}{{ nothing|length }}{% for x in nothing %}x{% endfor"
	 " %}{{ nothing|default('d') }}{{ nothing == nothing }}{{ nothing|trim }}{{ nothing ~ 'a' }}{"
	 "{ l[9] is defined }}{{ d.zz is defined }}{{ d['zz'] is none }}{{ none['x'] is defined }}",
	 "[]False0dTrueaFalseFalseFalseFalse"},
	{"multiline_errors_line",
	 "a\n"
	 "{# c\n"
	 " c #}\n"
	 "{% if true %}\n"
	 "{{ 'x' }}\n"
	 "{% endif %}\n",
	 "a\n"
	 "x\n"},
};

static char *render(const char *src, struct err *e)
{
	struct chat_template *t;
	char *out = NULL;
	if (chat_template_compile(src, &t, e) < 0)
		return NULL;
	json_t *kw = json_loads(ctx_json, 0, NULL), *m = json_array();
	chat_template_render(t, m, false, NULL, NULL, kw, &out, e);
	json_decref(kw);
	json_decref(m);
	chat_template_free(t);
	return out;
}

static void run(const char *name)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (strcmp(cases[i].name, name))
			continue;
		struct err e = {{0}};
		char *out = render(cases[i].src, &e);
		if (!out)
			EXPECTF(0, "%s: %s", name, e.msg);
		else
			EXPECTF(!strcmp(out, cases[i].expect), "%s:\n got  [%s]\n want [%s]", name, out,
				cases[i].expect);
		free(out);
		return;
	}
	EXPECTF(0, "no case %s", name);
}

static void test_arith(void) { run("arith"); }
static void test_compare_logic(void) { run("compare_logic"); }
static void test_tests(void) { run("tests"); }
static void test_str_methods(void) { run("str_methods"); }
static void test_filters_str(void) { run("filters_str"); }
static void test_filters_seq(void) { run("filters_seq"); }
static void test_tojson(void) { run("tojson"); }
static void test_dict_access(void) { run("dict_access"); }
static void test_subscript_slice(void) { run("subscript_slice"); }
static void test_loops(void) { run("loops"); }
static void test_scoping(void) { run("scoping"); }
static void test_macros(void) { run("macros"); }
static void test_literals(void) { run("literals"); }
static void test_whitespace(void)
{
	run("whitespace");
	run("whitespace2");
	run("multiline_errors_line");
}
static void test_undefined(void) { run("undefined"); }

/* runtime errors carry the line of the failing expression */
static void test_error_lines(void)
{
	struct err e = {{0}};
	char *out = render("a\n{# c\n c #}\n{% if true %}\n{{ 'x' + 1 }}\n{% endif %}", &e);
	EXPECTF(!out && strstr(e.msg, "chat template line 5: "), "got [%s]", e.msg);
	free(out);
	out = render("{% for m in l %}\n\n{{ m.x.y }}{% endfor %}", &e);
	EXPECTF(!out && strstr(e.msg, "line 3: 'int object' has no attribute 'x'"), "got [%s]", e.msg);
	free(out);
}

/* int overflow in the sum and abs filters goes to float, as + does (no signed overflow) */
static void test_filter_int_overflow(void)
{
	struct err e = {{0}};
	char *out = render("{% set big = 922337203685477580 * 10 + 7 %}" /* LLONG_MAX */
			   "{{ [big, 1]|sum }}|{{ (-big - 1)|abs }}|{{ big + 1 }}|{{ [2, 3]|sum }}|"
			   "{{ -4|abs }}",
			   &e);
	EXPECTF(out != NULL, "%s", e.msg);
	if (out) {
		char a[64], b[64], c[64], d[64];
		EXPECTF(sscanf(out, "%63[^|]|%63[^|]|%63[^|]|%63s", a, b, c, d) == 4, "got [%s]", out);
		EXPECTF(!strcmp(a, c) && !strcmp(b, c) && strchr(c, 'e') && !strcmp(d, "5|4"), "got [%s]", out);
	}
	free(out);
}

/* a compiled template is not changed by rendering: the same text every time */
static void test_reuse(void)
{
	struct chat_template *t;
	struct err e = {{0}};
	EXPECT(chat_template_compile("{% set ns = namespace(k=0) %}{% for x in l %}{% set ns.k = ns.k + x %}"
				     "{% endfor %}{{ ns.k }}",
				     &t, &e) == 0);
	json_t *kw = json_loads(ctx_json, 0, NULL), *m = json_array();
	for (int i = 0; i < 3; i++) {
		char *out = NULL;
		EXPECT(chat_template_render(t, m, false, NULL, NULL, kw, &out, &e) == 0);
		EXPECTF(out && !strcmp(out, "6"), "run %d: [%s]", i, out ? out : "");
		free(out);
	}
	json_decref(kw);
	json_decref(m);
	chat_template_free(t);
	chat_template_free(NULL);
}

TESTS(T(test_arith), T(test_compare_logic), T(test_tests), T(test_str_methods), T(test_filters_str),
      T(test_filters_seq), T(test_tojson), T(test_dict_access), T(test_subscript_slice), T(test_loops),
      T(test_scoping), T(test_macros), T(test_literals), T(test_whitespace), T(test_undefined), T(test_error_lines),
      T(test_filter_int_overflow), T(test_reuse))
