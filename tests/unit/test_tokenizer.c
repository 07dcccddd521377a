/* Tokenizer: fixture vectors (DeepSeek LLM, DeepSeek Coder, tiny), round trips, incremental
 * decoding, invalid UTF-8, malformed files, and BPE options, added-token flags and decoders
 * on small hand-written tokenizer.json files. (Pre-tokenizers and normalizers on their own:
 * test_tok_pieces.c.) */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "base/utf8.h"
#include "tok_test_util.h"
#include "tok/tok_util.h"
#include "tok/tokenizer.h"

/* ---- helpers ---- */

static struct tok *load_text(const char *json, struct err *e)
{
	const char *p = tok_test_write_tmp(json);
	struct tok *t = NULL;
	if (p) {
		tok_load(p, &t, e);
		unlink(p);
	}
	return t;
}

static bool ids_eq(const int32_t *a, size_t na, const json_t *want)
{
	if (na != json_array_size(want))
		return false;
	for (size_t i = 0; i < na; i++)
		if (a[i] != json_integer_value(json_array_get(want, i)))
			return false;
	return true;
}

static void show_ids(char *buf, size_t cap, const int32_t *ids, size_t n)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && o + 16 < cap; i++)
		o += (size_t)snprintf(buf + o, cap - o, "%s%d", i ? "," : "", ids[i]);
}

/* Incremental decoding of ids one at a time must equal the one-shot decode. */
static bool incremental_matches(const struct tok *t, const int32_t *ids, size_t n, bool skip, const char *want,
				size_t want_len)
{
	struct tok_detok *d;
	struct err e;
	if (tok_detok_new(t, skip, NULL, 0, &d, &e))
		return false;
	char *acc = malloc(want_len * 2 + 64);
	size_t m = 0;
	bool ok = true;
	for (size_t i = 0; i < n && ok; i++) {
		const char *delta;
		size_t dl;
		ok = tok_detok_push(d, ids[i], &delta, &dl, &e) == 0 && m + dl <= want_len * 2 + 60 && delta[dl] == 0;
		if (ok) {
			/* a delta never ends inside a character */
			ok = utf8_valid(delta, dl, NULL);
			memcpy(acc + m, delta, dl);
			m += dl;
		}
	}
	if (ok) {
		const char *delta;
		size_t dl;
		ok = tok_detok_finish(d, &delta, &dl, &e) == 0 && m + dl <= want_len * 2 + 60;
		if (ok)
			memcpy(acc + m, delta, dl), m += dl;
	}
	ok = ok && m == want_len && !memcmp(acc, want, m);
	free(acc);
	tok_detok_free(d);
	return ok;
}

/* Every {"text", "ids"} line: encode == ids (no BOS), decode(ids) == text, incremental
 * decode == one-shot decode. Returns the number of vectors checked. */
static int check_vectors(const char *tok_dir, const char *vectors)
{
	struct err e;
	struct tok *t;
	if (tok_load(fixture_path(tok_dir), &t, &e)) {
		EXPECTF(0, "load %s: %s", tok_dir, e.msg);
		return 0;
	}
	FILE *f = fopen(fixture_path(vectors), "r");
	EXPECTF(f != NULL, "open %s", vectors);
	if (!f) {
		tok_free(t);
		return 0;
	}
	char *line = NULL;
	size_t cap = 0;
	int count = 0;
	while (getline(&line, &cap, f) > 0) {
		json_error_t je;
		json_t *v = json_loads(line, 0, &je);
		EXPECTF(v != NULL, "%s: bad line: %s", vectors, je.text);
		if (!v)
			continue;
		const char *text = json_string_value(json_object_get(v, "text"));
		size_t tl = json_string_length(json_object_get(v, "text"));
		const json_t *want = json_object_get(v, "ids");
		int32_t *ids;
		size_t n;
		int rc = tok_encode(t, text, tl, false, &ids, &n, &e);
		EXPECTF(rc == 0, "encode '%s': %s", text, e.msg);
		if (rc == 0) {
			char got[4096];
			show_ids(got, sizeof got, ids, n);
			EXPECTF(ids_eq(ids, n, want), "%s: '%s' → [%s]", vectors, text, got);
			char *back;
			size_t bl;
			EXPECT_EQ_INT(tok_decode(t, ids, n, false, &back, &bl, &e), 0);
			EXPECTF(bl == tl && !memcmp(back, text, tl), "%s: decode '%s' → '%s'", vectors, text, back);
			EXPECTF(incremental_matches(t, ids, n, false, back, bl), "%s: incremental decode of '%s'",
				vectors, text);
			free(back);
			free(ids);
		}
		json_decref(v);
		count++;
	}
	free(line);
	fclose(f);
	tok_free(t);
	return count;
}

/* ---- fixture vectors ---- */

static void test_deepseek_llm_vectors(void)
{
	EXPECT_EQ_INT(check_vectors("tokenizer", "tokenizer/deepseek-llm-vectors.jsonl"), 46);
}

static void test_deepseek_coder_vectors(void)
{
	EXPECT(check_vectors("tokenizer/deepseek-coder", "tokenizer/deepseek-coder/deepseek-coder-vectors.jsonl") >
	       40);
}

static void test_tiny_vectors(void) { EXPECT_EQ_INT(check_vectors("tiny-v3", "tokenizer/tiny-vectors.jsonl"), 52); }

static void test_deepseek_special_tokens(void)
{
	struct err e;
	struct tok *t;
	if (tok_load(fixture_path("tokenizer"), &t, &e)) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	EXPECT_EQ_INT(tok_vocab_size(t), 100015);
	EXPECT_EQ_INT(tok_bos_id(t), 100000);
	EXPECT_EQ_INT(tok_eos_id(t), -1);
	EXPECT(tok_is_special(t, 100000) && tok_is_special(t, 100001));
	EXPECT(!tok_is_special(t, 100002) && !tok_is_special(t, 17464));
	EXPECT_EQ_INT(tok_token_to_id(t, "<｜end▁of▁sentence｜>"), 100001);
	EXPECT_EQ_INT(tok_token_to_id(t, "ø"), 100002);
	EXPECT(tok_id_to_token(t, 17464) && !strcmp(tok_id_to_token(t, 17464), "Hello"));
	EXPECT(tok_id_to_token(t, 100015) == NULL && tok_id_to_token(t, -1) == NULL);

	int32_t *ids;
	size_t n;
	/* add_special_tokens puts BOS first; special text in the input is one id */
	const char *s = "<｜begin▁of▁sentence｜>User: Hello<｜end▁of▁sentence｜>";
	EXPECT_EQ_INT(tok_encode(t, "Hello", 5, true, &ids, &n, &e), 0);
	EXPECT(n == 2 && ids[0] == 100000 && ids[1] == 17464);
	free(ids);
	EXPECT_EQ_INT(tok_encode(t, s, strlen(s), false, &ids, &n, &e), 0);
	EXPECT(n >= 3 && ids[0] == 100000 && ids[n - 1] == 100001);
	char *txt;
	EXPECT_EQ_INT(tok_decode(t, ids, n, false, &txt, NULL, &e), 0);
	EXPECT(!strcmp(txt, s));
	free(txt);
	EXPECT_EQ_INT(tok_decode(t, ids, n, true, &txt, NULL, &e), 0);
	EXPECTF(!strcmp(txt, "User: Hello"), "skip specials: '%s'", txt);
	EXPECT(incremental_matches(t, ids, n, true, txt, strlen(txt)));
	free(txt);
	free(ids);
	/* ids the tokenizer does not define (model vocab padding) decode to nothing */
	int32_t pad[] = {17464, 100500, 102399, 1843};
	EXPECT_EQ_INT(tok_decode(t, pad, 4, false, &txt, NULL, &e), 0);
	EXPECT(!strcmp(txt, "Hello world"));
	free(txt);
	int32_t neg[] = {5, -3};
	EXPECT_EQ_INT(tok_decode(t, neg, 2, false, &txt, NULL, &e), -1);
	EXPECT(strstr(e.msg, "-3") != NULL);
	tok_free(t);
}

static void test_tiny_add_special(void)
{
	struct err e;
	struct tok *t;
	if (tok_load(fixture_path("tiny-v3"), &t, &e)) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	int32_t *ids;
	size_t n;
	EXPECT_EQ_INT(tok_encode(t, "", 0, true, &ids, &n, &e), 0);
	EXPECT(n == 1 && ids[0] == 0);
	free(ids);
	const char *s = "<｜User｜>Hi<｜Assistant｜>";
	EXPECT_EQ_INT(tok_encode(t, s, strlen(s), true, &ids, &n, &e), 0);
	EXPECT(n >= 4 && ids[0] == 0 && ids[1] == 2 && ids[n - 1] == 3);
	free(ids);
	tok_free(t);
}

/* tokenizer_config.json's add_bos_token / add_eos_token replace the post-processor. */
static void test_config_bos_eos(void)
{
	char dir[] = "/tmp/mlaserve-tokdir-XXXXXX", path[128];
	if (!mkdtemp(dir)) {
		EXPECT(0);
		return;
	}
	snprintf(path, sizeof path, "%s/tokenizer.json", dir);
	FILE *in = fopen(fixture_path("tiny-v3/tokenizer.json"), "rb"), *out = fopen(path, "wb");
	char buf[4096];
	size_t n;
	while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
		fwrite(buf, 1, n, out);
	if (in)
		fclose(in);
	if (out)
		fclose(out);
	static const struct {
		const char *cfg;
		int bos, eos; /* expected first / last id, -1 none */
		bool fails;
	} cases[] = {
		{"{\"add_bos_token\": false, \"bos_token\": \"<｜begin▁of▁sentence｜>\"}", -1, -1, false},
		{"{\"add_bos_token\": true, \"add_eos_token\": true, \"bos_token\": {\"content\": "
		 "\"<｜User｜>\"},"
		 " \"eos_token\": \"<｜end▁of▁sentence｜>\"}",
		 2, 1, false},
		{"{\"model_max_length\": 7}", 0, -1, false}, /* absent: the post-processor's BOS */
		{"{\"add_eos_token\": true}", -1, -1, true}, /* no eos_token to add */
		{"{\"add_bos_token\": true, \"bos_token\": \"<nope>\"}", -1, -1, true},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
		FILE *f = fopen(path, "wb");
		fputs(cases[i].cfg, f);
		fclose(f);
		struct tok *t;
		struct err e;
		int rc = tok_load(dir, &t, &e);
		if (cases[i].fails) {
			EXPECTF(rc == -1 && strstr(e.msg, "tokenizer_config.json"), "case %zu: '%s'", i,
				rc ? e.msg : "loaded");
			if (!rc)
				tok_free(t);
			continue;
		}
		EXPECTF(rc == 0, "case %zu: %s", i, e.msg);
		if (rc)
			continue;
		int32_t *ids;
		size_t m;
		EXPECT_EQ_INT(tok_encode(t, "hi", 2, true, &ids, &m, &e), 0);
		EXPECT_EQ_INT(tok_bos_id(t), cases[i].bos);
		EXPECT_EQ_INT(tok_eos_id(t), cases[i].eos);
		EXPECT_EQ_INT(m, 1 + (cases[i].bos >= 0) + (cases[i].eos >= 0));
		if (cases[i].bos >= 0)
			EXPECT_EQ_INT(ids[0], cases[i].bos);
		if (cases[i].eos >= 0)
			EXPECT_EQ_INT(ids[m - 1], cases[i].eos);
		free(ids);
		tok_free(t);
	}
	unlink(path);
	snprintf(path, sizeof path, "%s/tokenizer.json", dir);
	unlink(path);
	rmdir(dir);
}

/* ---- streaming ---- */

static void test_incremental_utf8(void)
{
	struct err e;
	struct tok *t;
	if (tok_load(fixture_path("tokenizer"), &t, &e)) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	/* " 🦙" is three byte-level tokens [12356, 99, 234] (" \xF0", ...) in this vocab */
	int32_t ids[] = {12356, 99, 234};
	struct tok_detok *d;
	EXPECT_EQ_INT(tok_detok_new(t, true, NULL, 0, &d, &e), 0);
	const char *delta;
	size_t dl;
	EXPECT_EQ_INT(tok_detok_push(d, ids[0], &delta, &dl, &e), 0);
	EXPECTF(!strcmp(delta, " "), "'%s'", delta); /* the lead byte is held back */
	EXPECT_EQ_INT(tok_detok_push(d, ids[1], &delta, &dl, &e), 0);
	EXPECT_EQ_INT(dl, 0);
	EXPECT_EQ_INT(tok_detok_push(d, ids[2], &delta, &dl, &e), 0);
	EXPECTF(!strcmp(delta, "🦙"), "'%s'", delta);
	EXPECT_EQ_INT(tok_detok_push(d, -1, &delta, &dl, &e), -1);
	EXPECT_EQ_INT(tok_detok_finish(d, &delta, &dl, &e), 0);
	EXPECT_EQ_INT(dl, 0);
	tok_detok_free(d);

	/* a character that never completes: U+FFFD at finish, same as one-shot */
	EXPECT_EQ_INT(tok_detok_new(t, false, ids, 3, &d, &e), 0);
	EXPECT_EQ_INT(tok_detok_push(d, ids[0], &delta, &dl, &e), 0);
	EXPECT_EQ_INT(tok_detok_push(d, ids[1], &delta, &dl, &e), 0);
	EXPECT_EQ_INT(dl, 0);
	EXPECT_EQ_INT(tok_detok_finish(d, &delta, &dl, &e), 0);
	EXPECT(!strcmp(delta, "\xEF\xBF\xBD"));
	tok_detok_free(d);
	char *txt;
	EXPECT_EQ_INT(tok_decode(t, ids, 2, false, &txt, NULL, &e), 0);
	EXPECT(!strcmp(txt, " \xEF\xBF\xBD"));
	free(txt);
	/* an incomplete character followed by ASCII: replaced at once, then the ASCII */
	int32_t mix[] = {12356, 99, 17464};
	EXPECT_EQ_INT(tok_decode(t, mix, 3, false, &txt, NULL, &e), 0);
	EXPECTF(!strcmp(txt, " \xEF\xBF\xBDHello"), "'%s'", txt);
	EXPECT(incremental_matches(t, mix, 3, false, txt, strlen(txt)));
	free(txt);
	tok_free(t);
}

static void test_invalid_utf8(void)
{
	struct err e;
	struct tok *t;
	if (tok_load(fixture_path("tiny-v3"), &t, &e)) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	static const char *bad[] = {
		"abc\x80",          /* lone continuation */
		"\xC0\x80",         /* overlong NUL */
		"x\xED\xA0\x80",    /* surrogate */
		"hello \xE4\xB8",   /* truncated at the end */
		"\xF5\x80\x80\x80", /* beyond U+10FFFF */
		"\xF0\x9F\x98",     /* truncated emoji */
		"\xFF",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int32_t *ids = (int32_t *)1;
		size_t n = 7;
		e.msg[0] = 0;
		EXPECT_EQ_INT(tok_encode(t, bad[i], strlen(bad[i]), true, &ids, &n, &e), -1);
		EXPECTF(strstr(e.msg, "invalid utf-8") != NULL, "case %zu: '%s'", i, e.msg);
		EXPECT(ids == NULL && n == 0);
	}
	/* a NUL byte inside the text is valid UTF-8 */
	int32_t *ids;
	size_t n;
	EXPECT_EQ_INT(tok_encode(t, "a\0b", 3, false, &ids, &n, &e), 0);
	free(ids);
	EXPECT(utf8_valid("\xF4\x8F\xBF\xBF", 4, NULL));
	size_t at = 99;
	EXPECT(!utf8_valid("abcdefghij\xC3", 11, &at) && at == 10);
	tok_free(t);
}

/* ---- malformed files ---- */

static void expect_load_error(const char *json, const char *want1, const char *want2)
{
	struct err e = {{0}};
	const char *p = tok_test_write_tmp(json);
	struct tok *t = NULL;
	EXPECT_EQ_INT(tok_load(p, &t, &e), -1);
	EXPECT(t == NULL);
	EXPECTF(strstr(e.msg, p) && strstr(e.msg, want1) && (!want2 || strstr(e.msg, want2)),
		"message '%s' lacks the file, '%s' or '%s'", e.msg, want1, want2 ? want2 : "");
	unlink(p);
}

#define MODEL_OK "'model': {'type': 'BPE', 'vocab': {'a': 0, 'b': 1, 'ab': 2}, 'merges': ['a b']}"

static void test_malformed(void)
{
	expect_load_error("{'model': ", "line", NULL);
	expect_load_error("{'version': '1.0'}", "model", "missing");
	expect_load_error("{'model': {'type': 'WordPiece', 'vocab': {}}}", "model.type", "WordPiece");
	expect_load_error("{" MODEL_OK ", 'normalizer': {'type': 'Precompiled'}}", "normalizer", "Precompiled");
	expect_load_error("{" MODEL_OK ", 'pre_tokenizer': {'type': 'Frobnicate'}}", "pre_tokenizer", "Frobnicate");
	expect_load_error("{" MODEL_OK ", 'pre_tokenizer': {'type': 'Sequence', 'pretokenizers': [{'type': "
			  "'Split', 'pattern': {'Regex': '(a'}, 'behavior': 'Isolated'}]}}",
			  "pre_tokenizer.pretokenizers[0].pattern", "regex");
	expect_load_error("{" MODEL_OK ", 'pre_tokenizer': {'type': 'Split', 'pattern': {'Regex': "
			  "'a'}, 'behavior': 'Sideways'}}",
			  "behavior", "Sideways");
	expect_load_error("{'model': {'type': 'BPE', 'vocab': {'a': 0, 'b': 1}, 'merges': ['a c']}}",
			  "model.merges[0]", "'c' is not in the vocab");
	expect_load_error("{'model': {'type': 'BPE', 'vocab': {'a': 0, 'b': 1}, 'merges': [['a', 'b']]}}",
			  "model.merges[0]", "'ab'");
	expect_load_error("{'model': {'type': 'BPE', 'vocab': {'a': 0}, 'merges': ['a  a']}}", "model.merges[0]",
			  "one space");
	expect_load_error("{" MODEL_OK ", 'decoder': {'type': 'CTC'}}", "decoder", "CTC");
	expect_load_error("{" MODEL_OK ", 'pre_tokenizer': {'type': 'Sequence', 'pretokenizers': "
			  "[{'type': 'ByteLevel'}, {'type': 'Digits'}]}}",
			  "pre_tokenizer", "after ByteLevel");
	expect_load_error("{" MODEL_OK ", 'added_tokens': [{'content': 'x'}]}", "added_tokens[0]", NULL);
	expect_load_error("{'model': {'type': 'BPE', 'vocab': {'a': 'zero'}, 'merges': []}}", "model.vocab", NULL);
	struct err e;
	struct tok *t;
	EXPECT_EQ_INT(tok_load("/nonexistent/dir", &t, &e), -1);
	EXPECT(strstr(e.msg, "/nonexistent/dir") != NULL);
}

/* ---- pieces ---- */

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return *s;
}

/* Random id sequences (unknown ids included): streaming == one-shot decoding. */
static void fuzz_ids(const struct tok *t, int rounds)
{
	uint64_t seed = 0x2545F4914F6CDD1DULL;
	for (int r = 0; r < rounds; r++) {
		int32_t ids[12];
		size_t n = 1 + rng_next(&seed) % 12;
		for (size_t i = 0; i < n; i++)
			ids[i] = (int32_t)(rng_next(&seed) % (uint64_t)(tok_vocab_size(t) + 3));
		for (int skip = 0; skip < 2; skip++) {
			char *txt;
			size_t len;
			struct err e;
			EXPECT_EQ_INT(tok_decode(t, ids, n, skip, &txt, &len, &e), 0);
			EXPECT(utf8_valid(txt, len, NULL));
			EXPECTF(incremental_matches(t, ids, n, skip, txt, len), "round %d", r);
			free(txt);
		}
	}
}

/* SentencePiece-style BPE: Llama-2 layout (normalizer Prepend + Replace, byte fallback,
 * decoder Replace / ByteFallback / Fuse / Strip). */
static const char LLAMA_LIKE[] =
	"{'added_tokens': [{'id': 1, 'content': '<s>', 'special': true, 'normalized': false},"
	" {'id': 2, 'content': '</s>', 'special': true, 'normalized': false}],"
	" 'normalizer': {'type': 'Sequence', 'normalizers': [{'type': 'Prepend', 'prepend': '▁'},"
	"   {'type': 'Replace', 'pattern': {'String': ' '}, 'content': '▁'}]},"
	" 'pre_tokenizer': null,"
	" 'post_processor': {'type': 'TemplateProcessing', 'single': [{'SpecialToken': {'id': '<s>', "
	"'type_id': 0}},"
	"   {'Sequence': {'id': 'A', 'type_id': 0}}], 'special_tokens': {'<s>': {'id': '<s>', 'ids': "
	"[1], 'tokens': ['<s>']}}},"
	" 'decoder': {'type': 'Sequence', 'decoders': [{'type': 'Replace', 'pattern': {'String': '▁'}, "
	"'content': ' '},"
	"   {'type': 'ByteFallback'}, {'type': 'Fuse'}, {'type': 'Strip', 'content': ' ', 'start': 1, "
	"'stop': 0}]},"
	" 'model': {'type': 'BPE', 'unk_token': '<unk>', 'byte_fallback': true, 'fuse_unk': true,"
	"   'vocab': {'<unk>': 0, '<s>': 1, '</s>': 2, '<0x0A>': 3, '<0xE2>': 4, '<0x82>': 5, "
	"'<0xAC>': 6,"
	"     '▁': 7, 'h': 8, 'i': 9, '▁h': 10, '▁hi': 11, 'x': 12},"
	"   'merges': [['▁', 'h'], '▁h i']}}";

static void test_llama_like(void)
{
	struct err e;
	struct tok *t = load_text(LLAMA_LIKE, &e);
	if (!t) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	int32_t *ids;
	size_t n;
	char buf[256];
	/* "€" is not in the vocab: byte fallback; "ä" has no byte tokens: unk */
	const char *s = "hi hi\n€äö";
	EXPECT_EQ_INT(tok_encode(t, s, strlen(s), true, &ids, &n, &e), 0);
	show_ids(buf, sizeof buf, ids, n);
	EXPECTF(!strcmp(buf, "1,11,11,3,4,5,6,0"), "got %s", buf);
	free(ids);
	int32_t dec_ids[] = {1, 11, 11, 3, 4, 5, 6, 12};
	char *txt;
	EXPECT_EQ_INT(tok_decode(t, dec_ids, 8, true, &txt, NULL, &e), 0);
	EXPECTF(!strcmp(txt, "hi hi\n€x"), "'%s'", txt);
	EXPECT(incremental_matches(t, dec_ids, 8, true, txt, strlen(txt)));
	free(txt);
	/* with the BOS kept, the leading space of "▁hi" still goes (Strip of the whole text) */
	EXPECT_EQ_INT(tok_decode(t, dec_ids, 3, false, &txt, NULL, &e), 0);
	EXPECTF(!strcmp(txt, "<s> hi hi"), "'%s'", txt);
	free(txt);
	/* prompt context: a continuation keeps its leading space */
	struct tok_detok *d;
	const char *delta;
	EXPECT_EQ_INT(tok_detok_new(t, true, dec_ids, 2, &d, &e), 0);
	EXPECT_EQ_INT(tok_detok_push(d, 11, &delta, NULL, &e), 0);
	EXPECT(!strcmp(delta, " hi"));
	tok_detok_free(d);
	fuzz_ids(t, 300);
	tok_free(t);
}

/* Added-token flags on a byte-level tokenizer. */
static const char ADDED_FLAGS[] =
	"{'added_tokens': ["
	" {'id': 10, 'content': '<mask>', 'special': true, 'lstrip': true, 'normalized': false},"
	" {'id': 11, 'content': '[R]', 'special': false, 'rstrip': true, 'normalized': true},"
	" {'id': 12, 'content': 'cat', 'special': false, 'single_word': true, 'normalized': true},"
	" {'id': 13, 'content': '<mask>x', 'special': false, 'normalized': false}],"
	" 'pre_tokenizer': {'type': 'ByteLevel', 'add_prefix_space': false, 'use_regex': true},"
	" 'decoder': {'type': 'ByteLevel'},"
	" 'model': {'type': 'BPE', 'vocab': {'a': 0, 'c': 1, 't': 2, 'Ġ': 3, 'x': 4, 's': 5, 'Ġa': 6},"
	"   'merges': ['Ġ a']}}";

static void test_added_flags(void)
{
	struct err e;
	struct tok *t = load_text(ADDED_FLAGS, &e);
	if (!t) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	static const struct {
		const char *text, *ids;
	} cases[] = {
		{"a  <mask>", "0,10"},   /* lstrip eats the spaces before */
		{"a <mask>x", "0,3,13"}, /* longest match wins; no lstrip on it */
		{"[R]  a", "11,0"},      /* rstrip eats the spaces after */
		{"a cat", "0,3,12"},     /* a single word */
		{"cats", "1,0,2,5"},     /* not a single word: plain BPE */
		{"xcat a", "4,1,0,2,6"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int32_t *ids;
		size_t n;
		char buf[128];
		EXPECT_EQ_INT(tok_encode(t, cases[i].text, strlen(cases[i].text), false, &ids, &n, &e), 0);
		show_ids(buf, sizeof buf, ids, n);
		EXPECTF(!strcmp(buf, cases[i].ids), "'%s' → %s, want %s", cases[i].text, buf, cases[i].ids);
		free(ids);
	}
	tok_free(t);
}

/* ignore_merges, continuing_subword_prefix, Metaspace decoding, no decoder. */
static void test_bpe_options(void)
{
	struct err e;
	struct tok *t = load_text("{'pre_tokenizer': {'type': 'Metaspace', 'replacement': '▁', 'prepend_scheme': "
				  "'first'},"
				  " 'decoder': {'type': 'Metaspace', 'replacement': '▁', 'prepend_scheme': 'first'},"
				  " 'model': {'type': 'BPE', 'ignore_merges': true,"
				  "   'vocab': {'▁': 0, 'a': 1, 'b': 2, '▁a': 3, '▁ab': 4, 'ab': 5, '▁b': 6},"
				  "   'merges': ['▁ a', 'a b']}}",
				  &e);
	if (!t) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	int32_t *ids;
	size_t n;
	char buf[64];
	/* "▁ab" is in the vocab: ignore_merges takes it whole (merges alone would give ▁a b) */
	EXPECT_EQ_INT(tok_encode(t, "ab b", 4, false, &ids, &n, &e), 0);
	show_ids(buf, sizeof buf, ids, n);
	EXPECTF(!strcmp(buf, "4,6"), "got %s", buf);
	char *txt;
	EXPECT_EQ_INT(tok_decode(t, ids, n, false, &txt, NULL, &e), 0);
	EXPECTF(!strcmp(txt, "ab b"), "'%s'", txt);
	EXPECT(incremental_matches(t, ids, n, false, txt, strlen(txt)));
	free(txt);
	free(ids);
	fuzz_ids(t, 200);
	tok_free(t);

	t = load_text("{'model': {'type': 'BPE', 'continuing_subword_prefix': '##',"
		      " 'vocab': {'a': 0, '##b': 1, '##c': 2, 'ab': 3, 'abc': 4, 'b': 5},"
		      " 'merges': ['a ##b', 'ab ##c']}}",
		      &e);
	if (!t) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	EXPECT_EQ_INT(tok_encode(t, "abcb", 4, false, &ids, &n, &e), 0);
	show_ids(buf, sizeof buf, ids, n);
	EXPECTF(!strcmp(buf, "4,1"), "got %s", buf);
	/* no decoder: tokens joined by spaces */
	EXPECT_EQ_INT(tok_decode(t, ids, n, false, &txt, NULL, &e), 0);
	EXPECTF(!strcmp(txt, "abc ##b"), "'%s'", txt);
	EXPECT(incremental_matches(t, ids, n, false, txt, strlen(txt)));
	free(txt);
	free(ids);
	fuzz_ids(t, 200);
	tok_free(t);
}

/* Random texts from a palette of awkward pieces: decode(encode(x)) == x, and streaming
 * equals one-shot decoding; random id sequences (broken UTF-8 included) stream the same as
 * they decode at once. */
static void fuzz_one(const char *dir, int n_texts)
{
	static const char *pal[] = {"a",
				    "Z",
				    " ",
				    "  ",
				    "\n",
				    "\r\n",
				    "\t",
				    "7",
				    "42",
				    "½",
				    "②",
				    "ø",
				    "ü",
				    "Führer",
				    "你好",
				    "🦙",
				    "😶‍🌫️",
				    "'s",
				    "'RE",
				    "...",
				    "!?",
				    "<｜",
				    "begin▁of▁sentence",
				    "<｜begin▁of▁sentence｜>",
				    "<｜end▁of▁sentence｜>",
				    "<｜User｜>",
				    "｜>",
				    "▁",
				    "Ġ",
				    "é",
				    "e\xCC\x81",
				    "ﬁ",
				    "\xE2\x80\xAF",
				    "x_y",
				    "$",
				    "{",
				    "}",
				    "—",
				    "\x00"};
	struct err e;
	struct tok *t;
	if (tok_load(fixture_path(dir), &t, &e)) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	uint64_t seed = 0x9E3779B97F4A7C15ULL;
	char text[512];
	for (int k = 0; k < n_texts; k++) {
		size_t n = 0;
		int parts = 1 + (int)(rng_next(&seed) % 24);
		for (int i = 0; i < parts; i++) {
			const char *p = pal[rng_next(&seed) % (sizeof pal / sizeof pal[0])];
			size_t l = p[0] ? strlen(p) : 1; /* the last entry is a NUL byte */
			if (n + l >= sizeof text)
				break;
			memcpy(text + n, p, l);
			n += l;
		}
		int32_t *ids;
		size_t m;
		if (tok_encode(t, text, n, k % 2, &ids, &m, &e)) {
			EXPECTF(0, "encode: %s", e.msg);
			continue;
		}
		char *back;
		size_t bl;
		EXPECT_EQ_INT(tok_decode(t, ids + (k % 2), m - (k % 2), false, &back, &bl, &e), 0);
		EXPECTF(bl == n && !memcmp(back, text, n), "%s: round trip of '%.*s' gave '%s'", dir, (int)n, text,
			back);
		free(back);
		/* streaming == one-shot, with and without skipping specials */
		for (int skip = 0; skip < 2; skip++) {
			EXPECT_EQ_INT(tok_decode(t, ids, m, skip, &back, &bl, &e), 0);
			EXPECT(incremental_matches(t, ids, m, skip, back, bl));
			free(back);
		}
		free(ids);
		/* random ids: byte tokens in any order make broken UTF-8 */
		int32_t rnd[16];
		for (int i = 0; i < 16; i++)
			rnd[i] = (int32_t)(rng_next(&seed) % (uint64_t)(tok_vocab_size(t) + 50));
		EXPECT_EQ_INT(tok_decode(t, rnd, 16, false, &back, &bl, &e), 0);
		EXPECT(utf8_valid(back, bl, NULL));
		EXPECT(incremental_matches(t, rnd, 16, false, back, bl));
		free(back);
	}
	tok_free(t);
}

static void test_fuzz_round_trip(void)
{
	fuzz_one("tokenizer", 300);
	fuzz_one("tokenizer/deepseek-coder", 200);
	fuzz_one("tiny-v3", 300);
}

/* Thread safety: several threads encode at once through the context pool. */
#include <pthread.h>
struct enc_job {
	const struct tok *t;
	int ok;
};

static void *enc_thread(void *arg)
{
	struct enc_job *j = arg;
	const char *s = "The quick brown fox 123 jumps over the lazy dog. 你好!";
	int32_t *ref = NULL;
	size_t nref = 0;
	struct err e;
	j->ok = tok_encode(j->t, s, strlen(s), true, &ref, &nref, &e) == 0;
	for (int i = 0; i < 200 && j->ok; i++) {
		int32_t *ids;
		size_t n;
		j->ok = tok_encode(j->t, s, strlen(s), true, &ids, &n, &e) == 0 && n == nref &&
			!memcmp(ids, ref, n * sizeof *ids);
		free(ids);
	}
	free(ref);
	return NULL;
}

static void test_threads(void)
{
	struct err e;
	struct tok *t;
	if (tok_load(fixture_path("tiny-v3/tokenizer.json"), &t, &e)) {
		EXPECTF(0, "%s", e.msg);
		return;
	}
	pthread_t th[4];
	struct enc_job jobs[4];
	for (int i = 0; i < 4; i++) {
		jobs[i] = (struct enc_job){t, 0};
		pthread_create(&th[i], NULL, enc_thread, &jobs[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		EXPECT(jobs[i].ok);
	}
	tok_free(t);
}

TESTS(T(test_deepseek_llm_vectors), T(test_deepseek_coder_vectors), T(test_tiny_vectors),
      T(test_deepseek_special_tokens), T(test_tiny_add_special), T(test_config_bos_eos), T(test_incremental_utf8),
      T(test_invalid_utf8), T(test_malformed), T(test_llama_like), T(test_added_flags), T(test_bpe_options),
      T(test_fuzz_round_trip), T(test_threads))
