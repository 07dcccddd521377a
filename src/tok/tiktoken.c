/* tiktoken rank files, Kimi's pre-tokenizer and tiktoken's rank-ordered BPE. */
#include "tok/tiktoken.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

/* tokenization_kimi.py's pat_str, written for PCRE2. Its Rust (fancy-regex) form uses
 * three things PCRE2 reads differently, rewritten here:
 *  - `\p{Han}` is the Script property there; PCRE2's \p{Han} is Script_Extensions (it would
 *    take 、。 into Han runs), so \p{sc:Han};
 *  - the class intersection `[X&&[^\p{Han}]]` is a literal '&' in PCRE2: a negative
 *    lookahead in front of the class instead;
 *  - `\s` is Unicode White_Space there; PCRE2's UCP \s adds U+180E: an explicit class. */
#define WS                                                                                                         \
	"\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}" \
	"\\x{3000}"
#define UPPER "(?:(?!\\p{sc:Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])"
#define LOWER "(?:(?!\\p{sc:Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])"
#define CONTRACTION "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
static const char kimi_pattern[] = "\\p{sc:Han}+"
				   "|[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" CONTRACTION
				   "|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER "*" CONTRACTION "|\\p{N}{1,3}"
				   "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
				   "|[" WS "]*[\\r\\n]+"
				   "|[" WS "]+(?![^" WS "])"
				   "|[" WS "]+";

/* ---- rank file ---- */

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 with padding → out (room for n * 3 / 4 bytes); the length, or -1. */
static long b64_decode(const char *s, size_t n, unsigned char *out)
{
	if (!n || n % 4)
		return -1;
	size_t pad = s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
	long len = 0;
	for (size_t i = 0; i < n; i += 4) {
		uint32_t v = 0;
		for (size_t j = 0; j < 4; j++) {
			bool is_pad = i + j >= n - pad;
			int d = is_pad ? 0 : b64_value((unsigned char)s[i + j]);
			if (d < 0 || (is_pad && s[i + j] != '='))
				return -1;
			v = v << 6 | (uint32_t)d;
		}
		unsigned char b[3] = {(unsigned char)(v >> 16), (unsigned char)(v >> 8), (unsigned char)v};
		size_t keep = i + 4 == n ? 3 - pad : 3;
		/* the bits a shorter final group leaves unused must be zero (canonical form) */
		if (keep < 3 && b[keep])
			return -1;
		memcpy(out + len, b, keep);
		len += (long)keep;
	}
	return len;
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

/* One non-empty line "TOKEN RANK" → the token's bytes in buf and its rank. */
static int parse_line(const char *s, size_t n, unsigned char *buf, long *len, int64_t *rank)
{
	size_t i = 0;
	while (i < n && is_blank(s[i]))
		i++;
	size_t t0 = i;
	while (i < n && !is_blank(s[i]))
		i++;
	size_t t1 = i;
	while (i < n && is_blank(s[i]))
		i++;
	size_t r0 = i;
	while (i < n && !is_blank(s[i]))
		i++;
	size_t r1 = i;
	while (i < n && is_blank(s[i]))
		i++;
	if (t1 == t0 || r1 == r0 || i != n)
		return -1;
	*rank = 0;
	for (size_t j = r0; j < r1; j++) {
		if (s[j] < '0' || s[j] > '9' || *rank > INT32_MAX)
			return -2;
		*rank = *rank * 10 + (s[j] - '0');
	}
	if (*rank >= INT32_MAX)
		return -2;
	*len = b64_decode(s + t0, t1 - t0, buf);
	return *len <= 0 ? -3 : 0;
}

int tiktoken_parse(struct tiktoken *k, const char *text, size_t n, const char *what, struct err *e)
{
	memset(k, 0, sizeof *k);
	k->max_rank = -1;
	k->max_run = TIKTOKEN_MAX_RUN_CHARS;
	unsigned char *buf = NULL;
	size_t buf_cap = 0;
	int32_t *line_of = NULL; /* rank → line, for the repeated-rank message */
	size_t line_of_cap = 0;
	int rc = 0;
	size_t line = 0;
	for (size_t pos = 0; pos < n && !rc;) {
		const char *nl = memchr(text + pos, '\n', n - pos);
		size_t end = nl ? (size_t)(nl - text) : n, len = end - pos;
		const char *s = text + pos;
		pos = end + 1;
		line++;
		if (len && s[len - 1] == '\r')
			len--;
		if (!len)
			continue;
		if (len > buf_cap) {
			unsigned char *b = realloc(buf, len);
			if (!b) {
				rc = tok_oom(e);
				break;
			}
			buf = b, buf_cap = len;
		}
		long blen = 0;
		int64_t rank = 0;
		int bad = parse_line(s, len, buf, &blen, &rank);
		if (bad == -1)
			rc = err_set(e, "%s: line %zu: expected 'TOKEN RANK' (base64 token bytes, a space, a rank)",
				     what, line);
		else if (bad == -2)
			rc = err_set(e, "%s: line %zu: bad rank (expected an integer from 0 to %d)", what, line,
				     INT32_MAX - 1);
		else if (bad == -3)
			rc = err_set(e, "%s: line %zu: the token is not valid base64 of at least one byte", what,
				     line);
		if (rc)
			break;
		if ((size_t)rank >= line_of_cap) {
			size_t cap = line_of_cap ? line_of_cap : 1024;
			while (cap <= (size_t)rank)
				cap *= 2;
			if (cap > 16u * 1024 * 1024) {
				rc = err_set(e, "%s: line %zu: rank %lld is too large", what, line, (long long)rank);
				break;
			}
			int32_t *v = realloc(line_of, cap * sizeof *v);
			if (!v) {
				rc = tok_oom(e);
				break;
			}
			memset(v + line_of_cap, 0, (cap - line_of_cap) * sizeof *v);
			line_of = v, line_of_cap = cap;
		}
		int32_t dup = tok_strmap_get(&k->ranks, (const char *)buf, (size_t)blen);
		if (dup >= 0)
			rc = err_set(e, "%s: line %zu: the token of rank %lld is repeated (line %d, rank %d)", what,
				     line, (long long)rank, line_of[dup], dup);
		else if (line_of[rank])
			rc = err_set(e, "%s: line %zu: rank %lld is repeated (line %d)", what, line, (long long)rank,
				     line_of[rank]);
		else if (tok_strmap_put(&k->ranks, (const char *)buf, (size_t)blen, (int32_t)rank))
			rc = tok_oom(e);
		if (rc)
			break;
		line_of[rank] = (int32_t)line;
		k->n_ranks++;
		if (rank > k->max_rank)
			k->max_rank = (int32_t)rank;
	}
	free(buf);
	free(line_of);
	for (int b = 0; b < 256 && !rc; b++) {
		char c = (char)b;
		if (tok_strmap_get(&k->ranks, &c, 1) < 0)
			rc = err_set(e, "%s: byte 0x%02x has no rank (every single byte must be a token)", what, b);
	}
	if (!rc)
		rc = tok_regex_compile(&k->pat, kimi_pattern, sizeof kimi_pattern - 1, false, "Kimi's pattern", e);
	if (rc)
		tiktoken_free(k);
	return rc;
}

void tiktoken_free(struct tiktoken *k)
{
	tok_strmap_free(&k->ranks);
	tok_regex_free(&k->pat);
	memset(k, 0, sizeof *k);
}

int tiktoken_vocab(const struct tiktoken *k, struct bpe *b, struct err *e)
{
	memset(b, 0, sizeof *b);
	b->unk_id = -1;
	b->n_ids = k->max_rank + 1;
	b->entry_of_id = malloc((size_t)(b->n_ids ? b->n_ids : 1) * sizeof(int32_t));
	if (!b->entry_of_id)
		return tok_oom(e);
	for (int32_t i = 0; i < b->n_ids; i++)
		b->entry_of_id[i] = -1;
	struct strbuf s = {0};
	for (size_t i = 0; i < k->ranks.n; i++) {
		const unsigned char *p = (const unsigned char *)k->ranks.blob.p + k->ranks.koff[i];
		s.n = 0;
		for (uint32_t j = 0; j < k->ranks.klen[i]; j++) {
			char c[4];
			strbuf_put(&s, c, (size_t)utf8_encode(tok_byte_to_cp(p[j]), c));
		}
		int32_t id = k->ranks.val[i];
		if (s.oom || tok_strmap_put(&b->vocab, s.p, s.n, id)) {
			strbuf_fini(&s);
			return tok_oom(e);
		}
		b->entry_of_id[id] = (int32_t)b->vocab.n - 1;
	}
	strbuf_fini(&s);
	bpe_set_byte_level(b);
	return 0;
}

/* ---- BPE ---- */

/* A candidate merge: the parts starting at `left` and ending at `end` (two adjacent parts
 * when it was pushed). */
struct tiktoken_cand {
	int32_t rank;
	uint32_t left, end;
};

static inline bool cand_less(struct tiktoken_cand a, struct tiktoken_cand b)
{
	return a.rank != b.rank ? a.rank < b.rank : a.left < b.left;
}

static int heap_push(struct tiktoken_scratch *s, size_t *n, struct tiktoken_cand c)
{
	if (*n == s->heap_cap) {
		size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
		struct tiktoken_cand *h = realloc(s->heap, cap * sizeof *h);
		if (!h)
			return -1;
		s->heap = h, s->heap_cap = cap;
	}
	size_t i = (*n)++;
	while (i && cand_less(c, s->heap[(i - 1) / 2])) {
		s->heap[i] = s->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	s->heap[i] = c;
	return 0;
}

static struct tiktoken_cand heap_pop(struct tiktoken_scratch *s, size_t *n)
{
	struct tiktoken_cand top = s->heap[0], last = s->heap[--*n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && cand_less(s->heap[c + 1], s->heap[c]))
			c++;
		if (!cand_less(s->heap[c], last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (*n)
		s->heap[i] = last;
	return top;
}

static inline int32_t rank_of(const struct tiktoken *k, const char *p, size_t a, size_t b)
{
	return tok_strmap_get(&k->ranks, p + a, b - a);
}

/* Pushes the pair of parts [a, b) when its bytes are a token. */
static int push_pair(const struct tiktoken *k, const char *p, uint32_t a, uint32_t b, struct tiktoken_scratch *s,
		     size_t *nh)
{
	int32_t r = rank_of(k, p, a, b);
	return r < 0 ? 0 : heap_push(s, nh, (struct tiktoken_cand){r, a, b});
}

/* tiktoken's byte_pair_merge picks the lowest-ranked pair by scanning; a heap keyed by
 * (rank, position) picks the same pair in O(log n). An entry is stale when its left part
 * is gone or its two parts no longer end at `end`; the same span with another middle
 * boundary has the same bytes, hence the same rank, and is still the right merge. */
static int merge(const struct tiktoken *k, const char *p, size_t n, struct tiktoken_scratch *s, struct tok_ids *out)
{
	if (n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 64;
		while (cap < n + 1)
			cap *= 2;
		uint32_t *nx = realloc(s->next, cap * sizeof *nx);
		if (nx)
			s->next = nx;
		uint32_t *pv = nx ? realloc(s->prev, cap * sizeof *pv) : NULL;
		if (!pv)
			return -1;
		s->prev = pv, s->cap = cap;
	}
	/* part i spans [i, next[i]); next[i] == 0 marks a removed boundary */
	size_t nh = 0;
	for (uint32_t i = 0; i < n; i++) {
		s->next[i] = i + 1;
		s->prev[i] = i ? i - 1 : 0;
		if (i + 2 <= n && push_pair(k, p, i, i + 2, s, &nh))
			return -1;
	}
	s->next[n] = 0;
	while (nh) {
		struct tiktoken_cand c = heap_pop(s, &nh);
		uint32_t mid = s->next[c.left];
		if (!mid || mid >= n || s->next[mid] != c.end)
			continue;
		s->next[c.left] = c.end; /* the two parts become one */
		s->next[mid] = 0;
		if (c.end < n)
			s->prev[c.end] = c.left;
		if (c.left && push_pair(k, p, s->prev[c.left], c.end, s, &nh))
			return -1;
		if (c.end < n && push_pair(k, p, c.left, s->next[c.end], s, &nh))
			return -1;
	}
	for (uint32_t i = 0; i < n; i = s->next[i])
		if (tok_ids_push(out, rank_of(k, p, i, s->next[i])))
			return -1;
	return 0;
}

/* Pieces up to this length are cached with their ids. */
#define CACHE_MAX_PIECE 64

int tiktoken_encode_piece(const struct tiktoken *k, const char *p, size_t n, struct tiktoken_scratch *s,
			  struct tok_ids *out)
{
	int32_t whole = tok_strmap_get(&k->ranks, p, n);
	if (whole >= 0)
		return tok_ids_push(out, whole);
	bool cached = n <= CACHE_MAX_PIECE;
	if (cached && tok_cache_get(&s->cache, 0, p, n, out))
		return out->oom ? -1 : 0;
	size_t before = out->n;
	if (merge(k, p, n, s, out))
		return -1;
	if (cached && tok_cache_put(&s->cache, 0, p, n, out->v + before, out->n - before))
		return -1;
	return 0;
}

/* ---- encode ---- */

/* Python's str.isspace: bidirectional class WS, B or S, or category Zs. */
static bool py_isspace(uint32_t c)
{
	return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
	       (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Kimi's pattern over one stretch of text between special tokens (the regex sees only it,
 * as in tiktoken); text the pattern does not match is dropped, as tiktoken drops it. */
static int encode_ordinary(const struct tiktoken *k, struct tiktoken_scratch *s, const char *p, size_t n,
			   struct tok_ids *out, struct err *e)
{
	size_t pos = 0, ms, me;
	while (pos < n) {
		int rc = tok_regex_find(&k->pat, &s->rx, p, n, pos, &ms, &me, e);
		if (rc < 0)
			return -1;
		if (!rc || me == ms)
			break;
		if (tiktoken_encode_piece(k, p + ms, me - ms, s, out))
			return tok_oom(e);
		pos = me;
	}
	return 0;
}

/* tiktoken's encode(text, allowed_special="all") of one slice. */
static int encode_slice(const struct tiktoken *k, const struct added_set *sp, struct tiktoken_scratch *s,
			const char *p, size_t n, struct tok_ids *out, struct err *e)
{
	if (!n)
		return 0;
	s->n_seg = 0;
	if (added_split(sp, false, p, n, &s->seg, &s->n_seg, &s->cap_seg))
		return tok_oom(e);
	for (size_t i = 0; i < s->n_seg; i++) {
		struct added_piece pc = s->seg[i];
		int rc = pc.id >= 0 ? (tok_ids_push(out, pc.id) ? tok_oom(e) : 0)
				    : encode_ordinary(k, s, p + pc.off, pc.len, out, e);
		if (rc)
			return rc;
	}
	return 0;
}

/* _split_whitespaces_or_nonwhitespaces of one chunk, each slice encoded as it is cut. */
static int encode_chunk(const struct tiktoken *k, const struct added_set *sp, struct tiktoken_scratch *s,
			const char *p, size_t n, struct tok_ids *out, struct err *e)
{
	size_t start = 0, run = 0;
	bool run_space = false;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t l = utf8_decode((const unsigned char *)p + i, n - i, &cp);
		bool space = py_isspace(cp);
		if (!i)
			run_space = space;
		if (space != run_space) {
			run = 1;
			run_space = space;
		} else if (++run > k->max_run) {
			int rc = encode_slice(k, sp, s, p + start, i - start, out, e);
			if (rc)
				return rc;
			start = i;
			run = 1;
		}
		i += l;
	}
	return encode_slice(k, sp, s, p + start, n - start, out, e);
}

int tiktoken_encode(const struct tiktoken *k, const struct added_set *specials, struct tiktoken_scratch *s,
		    const char *text, size_t len, struct tok_ids *out, struct err *e)
{
	if (!s->rx.md && tok_regex_ctx_init(&s->rx))
		return tok_oom(e);
	size_t start = 0, chars = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		i += utf8_decode((const unsigned char *)text + i, len - i, &cp);
		if (++chars == TIKTOKEN_CHUNK_CHARS || i == len) {
			int rc = encode_chunk(k, specials, s, text + start, i - start, out, e);
			if (rc)
				return rc;
			start = i;
			chars = 0;
		}
	}
	return out->oom ? tok_oom(e) : 0;
}

void tiktoken_scratch_free(struct tiktoken_scratch *s)
{
	if (s->rx.md)
		tok_regex_ctx_fini(&s->rx);
	free(s->next);
	free(s->prev);
	free(s->heap);
	free(s->seg);
	tok_cache_free(&s->cache);
	memset(s, 0, sizeof *s);
}
