/* Fuzz target "tokenizer": the tiny fixtures' tokenizer, DeepSeek LLM's and Kimi's kind
 * (tiktoken.model, tests/fixtures/kimi-tok) (byte-level BPE, no normalizer: encoding is
 * lossless). Byte 0 picks the tokenizer (bit 3 set: Kimi's; else bit 0) and the mode:
 *   text: valid UTF-8 encodes and decodes back to itself (special tokens in the text
 *         included); invalid UTF-8 is an error that names a byte inside the text;
 *   ids:  pairs of bytes as token ids (some past the vocab), decoded whole and through the
 *         streaming detokenizer, which must give the same bytes; the text is valid UTF-8;
 *   rank file (bit 4): the rest parsed as a tiktoken.model: either every byte has a rank, or
 *         one error naming the file and, unless a byte is missing, the line. */
#include <stdbool.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "base/utf8.h"
#include "tok/tiktoken.h"
#include "tok/tokenizer.h"

const char fuzz_name[] = "tokenizer";

static struct tok *toks[3];

static void setup(void)
{
	struct err e;
	FUZZ_SETUP(tok_load("tests/fixtures/tiny-v3", &toks[0], &e) == 0, e.msg);
	FUZZ_SETUP(tok_load("tests/fixtures/tokenizer", &toks[1], &e) == 0, e.msg);
	FUZZ_SETUP(tok_load("tests/fixtures/kimi-tok", &toks[2], &e) == 0, e.msg);
}

static void text_mode(const struct tok *t, const char *p, size_t n, bool add_special)
{
	size_t bad_at;
	bool valid = utf8_valid(p, n, &bad_at);
	int32_t *ids = NULL;
	size_t n_ids = 0;
	struct err e;
	int rc = tok_encode(t, p, n, false, &ids, &n_ids, &e);
	if (!valid) {
		FUZZ_CHECK(rc < 0 && bad_at < n);
		return;
	}
	FUZZ_CHECK(rc == 0);
	for (size_t i = 0; i < n_ids; i++)
		FUZZ_CHECK(ids[i] >= 0 && ids[i] < tok_vocab_size(t));
	char *text = NULL;
	size_t len = 0;
	FUZZ_CHECK(tok_decode(t, ids, n_ids, false, &text, &len, &e) == 0);
	FUZZ_CHECK(len == n && !memcmp(text, p, n));
	free(text);
	if (add_special) { /* the same ids, with at most a BOS before and an EOS after */
		int32_t *ids2 = NULL;
		size_t n2 = 0;
		FUZZ_CHECK(tok_encode(t, p, n, true, &ids2, &n2, &e) == 0);
		size_t lead = n2 > n_ids && ids2[0] == tok_bos_id(t) ? 1 : 0;
		size_t trail = n2 - lead > n_ids && ids2[n2 - 1] == tok_eos_id(t) ? 1 : 0;
		FUZZ_CHECK(n2 == n_ids + lead + trail);
		FUZZ_CHECK(n_ids == 0 || !memcmp(ids2 + lead, ids, n_ids * sizeof *ids));
		free(ids2);
	}
	free(ids);
}

static void ids_mode(const struct tok *t, const uint8_t *p, size_t n, bool skip_special)
{
	size_t n_ids = n / 2;
	int32_t *ids = malloc((n_ids + 1) * sizeof *ids);
	if (!ids)
		return;
	int32_t vocab = tok_vocab_size(t);
	for (size_t i = 0; i < n_ids; i++) {
		uint32_t v = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
		/* the whole 16 bits on the small vocab, the big one reached by scaling */
		ids[i] = vocab <= 65536 ? (int32_t)(v % (uint32_t)(vocab + 8))
					: (int32_t)((uint64_t)v * (uint64_t)(vocab + 8) / 65536);
	}
	char *whole = NULL;
	size_t whole_len = 0;
	struct err e;
	FUZZ_CHECK(tok_decode(t, ids, n_ids, skip_special, &whole, &whole_len, &e) == 0);
	FUZZ_CHECK(utf8_valid(whole, whole_len, NULL));
	FUZZ_CHECK(strlen(whole) == whole_len || memchr(whole, 0, whole_len)); /* NUL-terminated */
	struct tok_detok *d = NULL;
	/* the first id (when there are several) as the prompt, as the server gives it */
	size_t n_prompt = n_ids > 1 ? 1 : 0;
	FUZZ_CHECK(tok_detok_new(t, skip_special, ids, n_prompt, &d, &e) == 0);
	char *streamed = malloc(whole_len + 64);
	size_t s_len = 0;
	FUZZ_CHECK(streamed);
	char *rest = NULL;
	size_t rest_len = 0;
	FUZZ_CHECK(tok_decode(t, ids + n_prompt, n_ids - n_prompt, skip_special, &rest, &rest_len, &e) == 0);
	for (size_t i = n_prompt; i < n_ids; i++) {
		const char *delta;
		size_t dl;
		FUZZ_CHECK(tok_detok_push(d, ids[i], &delta, &dl, &e) == 0);
		FUZZ_CHECK(utf8_valid(delta, dl, NULL));
		FUZZ_CHECK(s_len + dl <= rest_len + 32);
		memcpy(streamed + s_len, delta, dl);
		s_len += dl;
	}
	const char *delta;
	size_t dl;
	FUZZ_CHECK(tok_detok_finish(d, &delta, &dl, &e) == 0);
	FUZZ_CHECK(s_len + dl <= rest_len + 32);
	memcpy(streamed + s_len, delta, dl);
	s_len += dl;
	/* byte-level decoders strip nothing: the stream equals decoding the ids after the prompt */
	FUZZ_CHECK(s_len == rest_len && !memcmp(streamed, rest, s_len));
	tok_detok_free(d);
	free(streamed);
	free(rest);
	free(whole);
	free(ids);
}

static void rank_file_mode(const char *p, size_t n)
{
	struct tiktoken k;
	struct err e;
	if (tiktoken_parse(&k, p, n, "fuzz.model", &e)) {
		FUZZ_CHECK(!strncmp(e.msg, "fuzz.model: line ", 17) || !strncmp(e.msg, "fuzz.model: byte 0x", 19) ||
			   strstr(e.msg, "out of memory"));
		return;
	}
	FUZZ_CHECK(k.n_ranks >= 256 && k.max_rank >= k.n_ranks - 1);
	for (int b = 0; b < 256; b++) {
		char c = (char)b;
		FUZZ_CHECK(tok_strmap_get(&k.ranks, &c, 1) >= 0);
	}
	tiktoken_free(&k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!toks[0])
		setup();
	if (size < 1 || size > 4096)
		return 0;
	if (data[0] & 16) {
		rank_file_mode((const char *)data + 1, size - 1);
		return 0;
	}
	const struct tok *t = toks[data[0] & 8 ? 2 : data[0] & 1];
	bool flag = data[0] & 4;
	if (data[0] & 2)
		ids_mode(t, data + 1, size - 1, flag);
	else
		text_mode(t, (const char *)data + 1, size - 1, flag);
	return 0;
}
