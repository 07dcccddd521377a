/* The pieces of the tokenizer on their own: pre-tokenizers (every Split behaviour, invert,
 * ByteLevel, Digits, Metaspace, ..., DeepSeek-V3's sequence), normalizers, the byte-level
 * alphabet. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tok_test_util.h"
#include "tok/normalize.h"
#include "tok/pretok.h"
#include "tok/tok_util.h"

static json_t *load_json(const char *text, char *why, size_t cap)
{
	const char *p = tok_test_write_tmp(text);
	json_error_t je;
	json_t *j = p ? json_load_file(p, 0, &je) : NULL;
	if (p)
		unlink(p);
	if (!j)
		snprintf(why, cap, "%s", p ? je.text : "cannot write a temp file");
	return j;
}

/* Pre-tokenizes text with the pre-tokenizer JSON pj; pieces joined with '|'. */
static void pieces(const char *pj, const char *text, char *out, size_t cap)
{
	out[0] = 0;
	char why[256];
	json_t *j = load_json(pj, why, sizeof why);
	struct pretok pt;
	struct err e;
	if (!j || pretok_load(&pt, j, "test", "pre_tokenizer", &e)) {
		snprintf(out, cap, "ERROR %s", j ? e.msg : why);
		json_decref(j);
		return;
	}
	json_decref(j);
	struct pretok_work w = {0};
	if (pretok_begin(&w, text, strlen(text), true, &e) || pretok_run(&pt, &w, &e)) {
		snprintf(out, cap, "ERROR %s", e.msg);
	} else {
		size_t o = 0;
		for (size_t i = 0; i < w.pieces.n && o < cap; i++)
			o += (size_t)snprintf(out + o, cap - o, "%s%.*s", i ? "|" : "", (int)w.pieces.v[i].len,
					      w.buf.p + w.pieces.v[i].off);
	}
	pretok_work_free(&w);
	pretok_free(&pt);
}

#define EXPECT_PIECES(pj, text, want)                                                                  \
	do {                                                                                           \
		char _got[1200];                                                                       \
		pieces(pj, text, _got, sizeof _got);                                                   \
		EXPECTF(!strcmp(_got, want), "%s on '%s': got '%s', want '%s'", pj, text, _got, want); \
	} while (0)

static void test_split_behaviors(void)
{
	const char *s = "the-final--countdown";
	EXPECT_PIECES("{'type': 'Split', 'pattern': {'String': '-'}, 'behavior': 'Removed'}", s,
		      "the|final|countdown");
	EXPECT_PIECES("{'type': 'Split', 'pattern': {'String': '-'}, 'behavior': 'Isolated'}", s,
		      "the|-|final|-|-|countdown");
	EXPECT_PIECES("{'type': 'Split', 'pattern': {'String': '-'}, 'behavior': 'MergedWithPrevious'}", s,
		      "the-|final-|-|countdown");
	EXPECT_PIECES("{'type': 'Split', 'pattern': {'String': '-'}, 'behavior': 'MergedWithNext'}", s,
		      "the|-final|-|-countdown");
	EXPECT_PIECES("{'type': 'Split', 'pattern': {'String': '-'}, 'behavior': 'Contiguous'}", s,
		      "the|-|final|--|countdown");
	/* invert: the pattern describes the pieces to keep */
	EXPECT_PIECES("{'type': 'Split', 'pattern': {'Regex': '\\\\w+'}, 'behavior': 'Removed', "
		      "'invert': true}",
		      "Hey friend!", "Hey|friend");
	EXPECT_PIECES("{'type': 'Split', 'pattern': {'Regex': '\\\\w+'}, 'behavior': 'Isolated', "
		      "'invert': true}",
		      "Hey friend!", "Hey| |friend|!");
	/* a String pattern is literal */
	EXPECT_PIECES("{'type': 'Split', 'pattern': {'String': '.'}, 'behavior': 'Removed'}", "a.b", "a|b");
	/* lookahead sees only the piece; Unicode classes */
	EXPECT_PIECES("{'type': 'Split', 'pattern': {'Regex': '\\\\s+(?!\\\\S)|\\\\s+|\\\\p{L}+'}, "
		      "'behavior': 'Isolated'}",
		      "ab   cd", "ab|  | |cd");
	EXPECT_PIECES("{'type': 'Whitespace'}", "Hey friend!  How", "Hey|friend|!|How");
	EXPECT_PIECES("{'type': 'WhitespaceSplit'}", " a\tb  c ", "a|b|c");
	EXPECT_PIECES("{'type': 'Punctuation'}", "a,b$c", "a|,|b|$|c");
}

static void test_pretokenizers(void)
{
	EXPECT_PIECES("{'type': 'Digits', 'individual_digits': true}", "a½②34b", "a|½|②|3|4|b");
	EXPECT_PIECES("{'type': 'Digits', 'individual_digits': false}", "a12b345", "a|12|b|345");
	EXPECT_PIECES("{'type': 'ByteLevel', 'add_prefix_space': true, 'use_regex': true}", "Hello world's  x",
		      " Hello| world|'s| | x");
	EXPECT_PIECES("{'type': 'ByteLevel', 'add_prefix_space': false, 'use_regex': false}", "Hello world",
		      "Hello world");
	EXPECT_PIECES("{'type': 'Metaspace', 'replacement': '▁', 'prepend_scheme': 'always', 'split': true}",
		      "Hey friend", "▁Hey|▁friend");
	EXPECT_PIECES("{'type': 'Metaspace', 'replacement': '▁', 'prepend_scheme': 'never', 'split': false}",
		      "Hey friend", "Hey▁friend");
	EXPECT_PIECES("{'type': 'Sequence', 'pretokenizers': [{'type': 'WhitespaceSplit'}, "
		      "{'type': 'Digits', 'individual_digits': true}]}",
		      "ab12 c3", "ab|1|2|c|3");
	/* DeepSeek-V3's pre-tokenizer (three Splits, then ByteLevel without its regex) */
	EXPECT_PIECES("{'type': 'Sequence', 'pretokenizers': ["
		      "{'type': 'Split', 'pattern': {'Regex': '\\\\p{N}{1,3}'}, 'behavior': 'Isolated', "
		      "'invert': false},"
		      "{'type': 'Split', 'pattern': {'Regex': '[一-龥぀-ゟ゠-ヿ]+'}, 'behavior': "
		      "'Isolated', 'invert': false},"
		      "{'type': 'Split', 'pattern': {'Regex': "
		      "'[!\\'#$%&()*+,\\\\-./"
		      ":;<=>?@\\\\[\\\\\\\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\\\p{L}\\\\p{P}\\\\p{S}]?[\\\\p{L}"
		      "\\\\p{M}]+| ?[\\\\p{P}\\\\p{S}]+[\\r\\n]*|\\\\s*[\\r\\n]+|\\\\s+(?!\\\\S)|\\\\s+'}, "
		      "'behavior': 'Isolated', 'invert': false},"
		      "{'type': 'ByteLevel', 'add_prefix_space': false, 'trim_offsets': true, 'use_regex': "
		      "false}]}",
		      "Hello, world! 12345 日本語です.x", "Hello|,| world|!| |123|45| |日本語です|.x");
	/* Ruby-style $: end of a line (HF compiles with Oniguruma) */
	EXPECT_PIECES("{'type': 'Split', 'pattern': {'Regex': '\\\\s+$'}, 'behavior': 'Isolated'}", "a  \nb",
		      "a|  |\nb");
}

static void norm_case(const char *nj, const char *in, const char *want)
{
	char why[256];
	json_t *j = load_json(nj, why, sizeof why);
	struct norm n;
	struct err e;
	if (!j || norm_load(&n, j, "test", "normalizer", &e)) {
		EXPECTF(0, "%s: %s", nj, j ? e.msg : why);
		json_decref(j);
		return;
	}
	json_decref(j);
	struct strbuf s = {0}, tmp = {0};
	struct tok_regex_ctx rx;
	EXPECT_EQ_INT(tok_regex_ctx_init(&rx), 0);
	EXPECT_EQ_INT(strbuf_puts(&s, in), 0);
	EXPECT_EQ_INT(norm_apply(&n, &s, &tmp, &rx, &e), 0);
	EXPECTF(s.n == strlen(want) && (!s.n || !memcmp(s.p, want, s.n)), "%s on '%s': '%.*s'", nj, in, (int)s.n,
		s.n ? s.p : "");
	tok_regex_ctx_fini(&rx);
	strbuf_fini(&s);
	strbuf_fini(&tmp);
	norm_free(&n);
}

static void test_normalizers(void)
{
	norm_case("{'type': 'NFC'}", "e\xCC\x81", "é");
	norm_case("{'type': 'NFD'}", "é", "e\xCC\x81");
	norm_case("{'type': 'NFKC'}", "ﬁ①", "fi1");
	norm_case("{'type': 'Lowercase'}", "ÀBΣ", "àbς");
	norm_case("{'type': 'Sequence', 'normalizers': [{'type': 'NFD'}, {'type': 'StripAccents'}]}", "Él", "El");
	norm_case("{'type': 'Replace', 'pattern': {'String': ' '}, 'content': '▁'}", "a b  c", "a▁b▁▁c");
	norm_case("{'type': 'Replace', 'pattern': {'Regex': '\\\\s+'}, 'content': ' '}", "a \t b", "a b");
	norm_case("{'type': 'Prepend', 'prepend': '▁'}", "x", "▁x");
	norm_case("{'type': 'Prepend', 'prepend': '▁'}", "", "");
	norm_case("{'type': 'Strip', 'strip_left': true, 'strip_right': true}", " \u3000a b\n", "a b");
	norm_case("{'type': 'Strip', 'strip_left': false, 'strip_right': true}", " a ", " a");
}

static void test_byte_level_alphabet(void)
{
	/* GPT-2 bytes_to_unicode spot values; a bijection onto 256 code points */
	EXPECT_EQ_INT(tok_byte_to_cp(' '), 0x120);  /* Ġ */
	EXPECT_EQ_INT(tok_byte_to_cp('\n'), 0x10A); /* Ċ */
	EXPECT_EQ_INT(tok_byte_to_cp(0), 256);
	EXPECT_EQ_INT(tok_byte_to_cp(127), 289);
	EXPECT_EQ_INT(tok_byte_to_cp(160), 322);
	EXPECT_EQ_INT(tok_byte_to_cp(173), 323);
	EXPECT_EQ_INT(tok_byte_to_cp('A'), 'A');
	EXPECT_EQ_INT(tok_byte_to_cp(0xF8), 0xF8);
	for (int b = 0; b < 256; b++)
		EXPECT_EQ_INT(tok_cp_to_byte(tok_byte_to_cp((unsigned char)b)), b);
	EXPECT_EQ_INT(tok_cp_to_byte(324), -1);
	EXPECT_EQ_INT(tok_cp_to_byte(173), -1);
}

TESTS(T(test_split_behaviors), T(test_pretokenizers), T(test_normalizers), T(test_byte_level_alphabet))
