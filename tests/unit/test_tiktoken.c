/* Kimi's tiktoken tokenizer: the rank-ordered BPE core on hand-made rank files, the rank
 * file's and tokenizer_config.json's errors, and the loaded tokenizer (special tokens,
 * lookups, streamed detokenization = one-shot) on tests/fixtures/kimi-tok. Exactness
 * against tiktoken itself is tests/e2e/tiktoken_kimi.test.mjs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tok/tiktoken.h"
#include "tok/tokenizer.h"

/* A rank file: the 256 bytes (rank = byte value) then `extra` tokens (space-separated, raw
 * ASCII) with ranks 256, 257, ... */
static char *rank_file(const char *extra)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t cap = 256 * 16 + strlen(extra) * 4 + 64;
	char *s = malloc(cap), *w = s;
	int rank = 0;
	for (int b = 0; b < 256; b++, rank++)
		w += sprintf(w, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], rank);
	for (const char *p = extra; *p;) {
		size_t n = strcspn(p, " ");
		const unsigned char *t = (const unsigned char *)p;
		for (size_t i = 0; i < n; i += 3) {
			uint32_t v = (uint32_t)t[i] << 16 | (i + 1 < n ? (uint32_t)t[i + 1] << 8 : 0) |
				     (i + 2 < n ? t[i + 2] : 0);
			*w++ = b64[v >> 18];
			*w++ = b64[(v >> 12) & 63];
			*w++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
			*w++ = i + 2 < n ? b64[v & 63] : '=';
		}
		w += sprintf(w, " %d\n", rank++);
		p += n;
		p += *p == ' ';
	}
	return s;
}

/* The ids of one piece as a string "a,b,c" (bytes as their value, others as rank). */
static const char *piece(const char *extra, const char *text)
{
	static char out[8192];
	struct tiktoken k;
	struct err e;
	char *rf = rank_file(extra);
	out[0] = 0;
	if (tiktoken_parse(&k, rf, strlen(rf), "test.model", &e)) {
		snprintf(out, sizeof out, "error: %s", e.msg);
		free(rf);
		return out;
	}
	free(rf);
	struct tiktoken_scratch s = {0};
	struct tok_ids ids = {0};
	if (tiktoken_encode_piece(&k, text, strlen(text), &s, &ids) == 0)
		for (size_t i = 0; i < ids.n; i++)
			snprintf(out + strlen(out), sizeof out - strlen(out), "%s%d", i ? "," : "", ids.v[i]);
	free(ids.v);
	tiktoken_scratch_free(&s);
	tiktoken_free(&k);
	return out;
}

#define EXPECT_PIECE(extra, text, want)                                                                              \
	do {                                                                                                         \
		const char *_got = piece(extra, text);                                                               \
		EXPECTF(!strcmp(_got, want), "ranks [%s] piece '%s': got %s, expected %s", extra, text, _got, want); \
	} while (0)

static void test_bpe_core(void)
{
	/* a=97 b=98 c=99 d=100; extra ranks from 256 */
	EXPECT_PIECE("", "abc", "97,98,99");
	EXPECT_PIECE("ab", "abc", "256,99");
	EXPECT_PIECE("bc ab", "abc", "97,256"); /* the lower rank wins, not the leftmost pair */
	EXPECT_PIECE("ab bc", "abc", "256,99");
	EXPECT_PIECE("aa", "aaa", "256,97"); /* equal ranks: the leftmost pair */
	EXPECT_PIECE("aa aaaa", "aaaaa", "257,97");
	/* a piece that is a token is that token, even when no merge reaches it */
	EXPECT_PIECE("abc", "abc", "256");
	EXPECT_PIECE("abc", "abcd", "97,98,99,100");
	/* merges go on from merged parts, by the rank of the bytes they join */
	EXPECT_PIECE("cd ab abcd bcd", "abcd", "258");
	EXPECT_PIECE("cd ab bcd", "xabcd", "120,257,256");
	EXPECT_PIECE("bc abc ab", "abcab", "257,258");
	/* a long piece (heap merging) equals the pairwise rule: "ab" everywhere, then "abab" */
	char longp[4001];
	for (int i = 0; i < 4000; i++)
		longp[i] = "ab"[i & 1];
	longp[4000] = 0;
	const char *got = piece("ab abab", longp);
	int n = 0;
	for (const char *p = got; *p; p++)
		n += *p == ',';
	EXPECTF(n + 1 == 1000 && !strncmp(got, "257,257,", 8), "4000 bytes of ab: %.40s... (%d ids)", got, n + 1);
}

/* tokenization_kimi.py's cut before a run of more than max_run (non-)whitespace characters,
 * counted in characters: with max_run 3, "ababab" is encoded as "aba" + "bab" */
static void test_long_runs_cut(void)
{
	char *rf = rank_file("ab");
	struct tiktoken k;
	struct err e;
	EXPECTF(tiktoken_parse(&k, rf, strlen(rf), "x", &e) == 0, "%s", e.msg);
	free(rf);
	struct added_set none = {0};
	struct tiktoken_scratch s = {0};
	static const struct {
		const char *text;
		size_t max_run;
		int n;
		int32_t ids[8];
	} cases[] = {
		{"ababab", 25000, 3, {256, 256, 256}},
		{"ababab", 3, 4, {256, 97, 98, 256}},
		{"éé ab", 2, 6, {0xc3, 0xa9, 0xc3, 0xa9, 32, 256}}, /* characters, not bytes: no cut */
		{"abab  ab", 3, 6, {256, 97, 98, 32, 32, 256}},     /* spaces start a new run */
	};
	for (int i = 0; i < 4; i++) {
		k.max_run = cases[i].max_run;
		struct tok_ids ids = {0};
		EXPECT(tiktoken_encode(&k, &none, &s, cases[i].text, strlen(cases[i].text), &ids, &e) == 0);
		bool same = (int)ids.n == cases[i].n;
		for (size_t j = 0; same && j < ids.n; j++)
			same = ids.v[j] == cases[i].ids[j];
		EXPECTF(same, "case %d '%s': %zu ids, first %d", i, cases[i].text, ids.n, ids.n ? ids.v[0] : -1);
		free(ids.v);
	}
	tiktoken_scratch_free(&s);
	tiktoken_free(&k);
}

static void expect_parse_error(const char *text, const char *want)
{
	struct tiktoken k;
	struct err e = {{0}};
	int rc = tiktoken_parse(&k, text, strlen(text), "DIR/tiktoken.model", &e);
	EXPECTF(rc != 0 && strstr(e.msg, want), "'%.40s...': expected an error with '%s', got rc %d '%s'", text, want,
		rc, rc ? e.msg : "");
	if (!rc)
		tiktoken_free(&k);
}

static void test_rank_file_errors(void)
{
	char *good = rank_file("ab");
	struct tiktoken k;
	struct err e;
	EXPECTF(tiktoken_parse(&k, good, strlen(good), "x", &e) == 0, "%s", e.msg);
	EXPECT_EQ_INT(k.n_ranks, 257);
	tiktoken_free(&k);
	size_t n = strlen(good);
	char *bad = malloc(n + 64);
	/* line 258: after the 257 good lines */
	sprintf(bad, "%sYWJj 5x\n", good);
	expect_parse_error(bad, "DIR/tiktoken.model: line 258: bad rank");
	sprintf(bad, "%sYW$j 300\n", good);
	expect_parse_error(bad, "line 258: the token is not valid base64");
	sprintf(bad, "%sYWJj\n", good);
	expect_parse_error(bad, "line 258: expected 'TOKEN RANK'");
	sprintf(bad, "%sYWJj 1 2\n", good);
	expect_parse_error(bad, "line 258: expected 'TOKEN RANK'");
	sprintf(bad, "%sYWJj 256\n", good);
	expect_parse_error(bad, "line 258: rank 256 is repeated (line 257)");
	sprintf(bad, "%sYWI= 300\n", good);
	expect_parse_error(bad, "line 258: the token of rank 300 is repeated (line 257, rank 256)");
	sprintf(bad, "%sYQ= 300\n", good); /* bad padding */
	expect_parse_error(bad, "line 258: the token is not valid base64");
	sprintf(bad, "%s\n\nYWJj 257\n", good); /* blank lines are skipped, and counted */
	EXPECTF(tiktoken_parse(&k, bad, strlen(bad), "x", &e) == 0, "%s", e.msg);
	tiktoken_free(&k);
	expect_parse_error(strchr(good, '\n') + 1, "DIR/tiktoken.model: byte 0x00 has no rank");
	free(bad);
	free(good);
}

/* A tokenizer directory in /tmp with a rank file and a config; tok_load's error or "". */
static const char *load_dir_error(const char *ranks, const char *config)
{
	static char msg[1200];
	char dir[] = "/tmp/mlaserve-tiktoken-XXXXXX", p[600];
	msg[0] = 0;
	if (!mkdtemp(dir))
		return "mkdtemp failed";
	snprintf(p, sizeof p, "%s/tiktoken.model", dir);
	FILE *f = fopen(p, "w");
	fputs(ranks, f);
	fclose(f);
	char cp[600];
	snprintf(cp, sizeof cp, "%s/tokenizer_config.json", dir);
	if (config) {
		f = fopen(cp, "w");
		fputs(config, f);
		fclose(f);
	}
	struct tok *t;
	struct err e;
	if (tok_load(dir, &t, &e))
		snprintf(msg, sizeof msg, "%s", e.msg + (strncmp(e.msg, dir, strlen(dir)) ? 0 : strlen(dir)));
	else
		tok_free(t);
	unlink(p);
	unlink(cp);
	rmdir(dir);
	return msg;
}

static void test_loader_errors(void)
{
	char *ranks = rank_file("ab");
	EXPECT_EQ_INT(strlen(load_dir_error(ranks, NULL)), 0);
	EXPECT_EQ_INT(strlen(load_dir_error(ranks, "{\"added_tokens_decoder\": {\"257\": {\"content\": \"[X]\"}}}")),
		      0);
	const char *m = load_dir_error(ranks, "{\"added_tokens_decoder\": {\"12\": {\"content\": \"[X]\"}}}");
	EXPECTF(strstr(m, "/tokenizer_config.json: added_tokens_decoder[\"12\"]: not a special id of tiktoken.model "
			  "(its 257 ranks are followed by ids 257..512)"),
		"%s", m);
	m = load_dir_error(ranks, "{\"added_tokens_decoder\": {\"300\": {\"content\": 5}}}");
	EXPECTF(strstr(m, "added_tokens_decoder[\"300\"]: expected {\"content\""), "%s", m);
	m = load_dir_error(ranks, "{\"added_tokens_decoder\": ");
	EXPECTF(strstr(m, "/tokenizer_config.json: line 1"), "%s", m);
	/* ranks with a gap: the special ids after them would collide */
	size_t n = strlen(ranks);
	char *gap = malloc(n + 32);
	sprintf(gap, "%sYWJj 400\n", ranks);
	m = load_dir_error(gap, NULL);
	EXPECTF(strstr(m, "/tiktoken.model: the ranks are not 0..257 (rank 400)"), "%s", m);
	sprintf(gap, "%sYWJj x\n", ranks);
	m = load_dir_error(gap, NULL);
	EXPECTF(strstr(m, "/tiktoken.model: line 258: bad rank"), "%s", m);
	free(gap);
	free(ranks);
}

static struct tok *kimi(void)
{
	struct tok *t = NULL;
	struct err e;
	EXPECTF(tok_load(fixture_path("kimi-tok"), &t, &e) == 0, "%s", e.msg);
	return t;
}

static void test_specials(void)
{
	struct tok *t = kimi();
	if (!t)
		return;
	EXPECT_EQ_INT(tok_vocab_size(t), 4096 + 256);
	EXPECT_EQ_INT(tok_token_to_id(t, "[BOS]"), 4096);
	EXPECT_EQ_INT(tok_token_to_id(t, "<|im_end|>"), 4098);
	EXPECT_EQ_INT(tok_token_to_id(t, "<|im_middle|>"), 4113);
	EXPECT_EQ_INT(tok_token_to_id(t, "<|reserved_token_4101|>"), 4101);
	EXPECT_EQ_INT(tok_token_to_id(t, "Ġ"), 32); /* byte-level vocab strings */
	EXPECT(tok_is_special(t, 4098) && !tok_is_special(t, 4101) && !tok_is_special(t, 4118));
	EXPECT(tok_decode_concatenates(t));
	const char *text = "<|im_user|>user<|im_middle|>hi<|im_end|><|reserved_token_4101|><think>";
	int32_t *ids;
	size_t n;
	struct err e;
	EXPECTF(tok_encode(t, text, strlen(text), true, &ids, &n, &e) == 0, "%s", e.msg);
	EXPECTF(n >= 7 && ids[0] == 4099 && ids[n - 3] == 4098 && ids[n - 2] == 4101 && ids[n - 1] == 4118, "n %zu",
		n);
	char *out;
	size_t len;
	EXPECT(tok_decode(t, ids, n, false, &out, &len, &e) == 0 && !strcmp(out, text));
	free(out);
	/* skip_special_tokens drops what the config marks special; reserved ids and <think> stay */
	EXPECT(tok_decode(t, ids, n, true, &out, &len, &e) == 0 &&
	       !strcmp(out, "userhi<|reserved_token_4101|><think>"));
	free(out);
	free(ids);
	tok_free(t);
}

static void test_detok_streamed_equals_whole(void)
{
	struct tok *t = kimi();
	if (!t)
		return;
	const char *text =
		"模型推理 🙂👨‍👩‍👧 naïve façade, 東京。\n\t한국어 <|im_end|> x\xef\xbf\xbd";
	int32_t *ids;
	size_t n;
	struct err e;
	EXPECTF(tok_encode(t, text, strlen(text), false, &ids, &n, &e) == 0, "%s", e.msg);
	/* byte-level BPE splits multi-byte characters across tokens here: the stream must hold them */
	int split = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l;
		const char *b = tok_id_bytes(t, ids[i], &l);
		split += b && l && ((unsigned char)b[0] & 0xC0) == 0x80;
	}
	EXPECTF(split > 0, "no token starts inside a character");
	struct tok_detok *d;
	EXPECT(tok_detok_new(t, false, NULL, 0, &d, &e) == 0);
	char acc[512] = "";
	for (size_t i = 0; i < n; i++) {
		const char *delta;
		size_t dl;
		EXPECT(tok_detok_push(d, ids[i], &delta, &dl, &e) == 0);
		strncat(acc, delta, sizeof acc - strlen(acc) - 1);
	}
	const char *delta;
	size_t dl;
	EXPECT(tok_detok_finish(d, &delta, &dl, &e) == 0);
	strncat(acc, delta, sizeof acc - strlen(acc) - 1);
	tok_detok_free(d);
	EXPECTF(!strcmp(acc, text), "streamed '%s'", acc);
	free(ids);
	tok_free(t);
}

TESTS(T(test_bpe_core), T(test_long_runs_cut), T(test_rank_file_errors), T(test_loader_errors), T(test_specials),
      T(test_detok_streamed_equals_whole))
