/* Added tokens: load, byte trie, leftmost-longest split with lstrip / rstrip / single_word
 * (Hugging Face tokenizers' AddedVocabulary::split_with_indices). */
#include "tok/added.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/uchar.h>

#include "base/utf8.h"
#include "io/json_util.h"
#include "tok/tok_util.h"

struct added_node {
	int32_t child, sibling; /* first child / next sibling, -1 none */
	int32_t tok;            /* index of the token ending here, -1 none */
	unsigned char byte;
};

/* The index of a new node, or -1 out of memory. */
static int32_t trie_node(struct added_trie *t, unsigned char byte)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct added_node *v = realloc(t->node, cap * sizeof *v);
		if (!v)
			return -1;
		t->node = v;
		t->cap = cap;
	}
	t->node[t->n] = (struct added_node){-1, -1, -1, byte};
	return (int32_t)t->n++;
}

static int trie_add(struct added_trie *t, const char *s, size_t n, int32_t tok)
{
	if (!t->n && trie_node(t, 0) < 0)
		return -1;
	int32_t cur = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int32_t k = t->node[cur].child;
		while (k >= 0 && t->node[k].byte != c)
			k = t->node[k].sibling;
		if (k < 0) {
			if ((k = trie_node(t, c)) < 0)
				return -1;
			t->node[k].sibling = t->node[cur].child;
			t->node[cur].child = k;
		}
		cur = k;
	}
	/* a repeated content keeps the first token (same content → same match anyway) */
	if (t->node[cur].tok < 0)
		t->node[cur].tok = tok;
	t->first[(unsigned char)s[0]] = true;
	return 0;
}

/* Longest token matching at s[0..n): its index, and *len; -1 when none. */
static int32_t trie_match(const struct added_trie *t, const char *s, size_t n, size_t *len)
{
	int32_t cur = 0, best = -1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int32_t k = t->node[cur].child;
		while (k >= 0 && t->node[k].byte != c)
			k = t->node[k].sibling;
		if (k < 0)
			break;
		cur = k;
		if (t->node[cur].tok >= 0)
			best = t->node[cur].tok, *len = i + 1;
	}
	return best;
}

int added_load(struct added_set *a, const json_t *arr, const char *what, struct err *e)
{
	memset(a, 0, sizeof *a);
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return err_set(e, "%s: added_tokens: expected an array", what);
	a->tok = calloc(json_array_size(arr) + 1, sizeof *a->tok);
	if (!a->tok)
		return tok_oom(e);
	size_t i;
	json_t *o;
	json_array_foreach(arr, i, o)
	{
		char key[48];
		snprintf(key, sizeof key, "added_tokens[%zu]", i);
		const json_t *c = json_object_get(o, "content");
		int32_t id;
		if (!json_is_object(o) || !json_is_string(c) || !json_string_length(c) ||
		    !json_util_id(json_object_get(o, "id"), &id)) {
			added_free(a);
			return err_set(e, "%s: %s: expected {\"id\": N, \"content\": \"...\"}", what, key);
		}
		struct added_token *t = &a->tok[a->n];
		t->content = tok_strndup(json_string_value(c), json_string_length(c));
		if (!t->content) {
			added_free(a);
			return tok_oom(e);
		}
		t->len = json_string_length(c);
		t->id = id;
		a->n++;
		if (json_util_bool(o, key, "special", false, &t->special, e) < 0 ||
		    json_util_bool(o, key, "lstrip", false, &t->lstrip, e) < 0 ||
		    json_util_bool(o, key, "rstrip", false, &t->rstrip, e) < 0 ||
		    json_util_bool(o, key, "single_word", false, &t->single_word, e) < 0 ||
		    json_util_bool(o, key, "normalized", !t->special, &t->normalized, e) < 0) {
			added_free(a);
			return err_prefix(e, "%s", what);
		}
	}
	for (i = 0; i < a->n; i++) {
		struct added_token *t = &a->tok[i];
		if (trie_add(t->normalized ? &a->norm : &a->raw, t->content, t->len, (int32_t)i)) {
			added_free(a);
			return tok_oom(e);
		}
	}
	return 0;
}

void added_free(struct added_set *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->tok[i].content);
	free(a->tok);
	free(a->raw.node);
	free(a->norm.node);
	memset(a, 0, sizeof *a);
}

/* Code point of the character that ends at s[end) (text is valid UTF-8). */
static uint32_t cp_before(const char *s, size_t end)
{
	size_t i = end;
	while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
		i--;
	if (i > 0)
		i--;
	uint32_t cp = 0;
	utf8_decode((const unsigned char *)s + i, end - i, &cp);
	return cp;
}

static size_t cp_len_before(const char *s, size_t end)
{
	size_t i = end;
	while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
		i--;
	return end - (i > 0 ? i - 1 : 0);
}

/* Rust regex \w (Unicode): Alphabetic, M, Nd, Pc, Join_Control. */
static bool is_word_cp(uint32_t c)
{
	if (c < 0x80)
		return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
	int8_t t = u_charType((UChar32)c);
	return u_hasBinaryProperty((UChar32)c, UCHAR_ALPHABETIC) || t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK ||
	       t == U_COMBINING_SPACING_MARK || t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION ||
	       u_hasBinaryProperty((UChar32)c, UCHAR_JOIN_CONTROL);
}

static bool is_space_cp(uint32_t c)
{
	if (c < 0x80)
		return c == ' ' || (c >= 9 && c <= 13);
	return u_hasBinaryProperty((UChar32)c, UCHAR_WHITE_SPACE);
}

static int piece_add(struct added_piece **out, size_t *n, size_t *cap, size_t off, size_t len, int32_t id)
{
	if (!len && id < 0)
		return 0;
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct added_piece *v = realloc(*out, c * sizeof *v);
		if (!v)
			return -1;
		*out = v;
		*cap = c;
	}
	(*out)[(*n)++] = (struct added_piece){off, len, id};
	return 0;
}

int added_split(const struct added_set *a, bool normalized, const char *s, size_t n, struct added_piece **out,
		size_t *n_out, size_t *cap_out)
{
	const struct added_trie *t = normalized ? &a->norm : &a->raw;
	size_t start_offset = 0, pos = 0;
	while (t->n && pos < n) {
		if (!t->first[(unsigned char)s[pos]]) {
			pos++;
			continue;
		}
		size_t mlen = 0;
		int32_t k = trie_match(t, s + pos, n - pos, &mlen);
		if (k < 0) {
			pos++;
			continue;
		}
		const struct added_token *tok = &a->tok[k];
		size_t start = pos, stop = pos + mlen;
		pos = stop; /* matches never overlap: continue after this one */
		if (tok->single_word) {
			bool start_space = start == 0 || !is_word_cp(cp_before(s, start));
			uint32_t next = 0;
			bool stop_space = stop == n || (utf8_decode((const unsigned char *)s + stop, n - stop, &next),
							!is_word_cp(next));
			if (!start_space || !stop_space)
				continue;
		}
		if (tok->lstrip) {
			size_t ns = start;
			while (ns > start_offset && is_space_cp(cp_before(s, ns)))
				ns -= cp_len_before(s, ns);
			start = ns;
		}
		if (tok->rstrip) {
			while (stop < n) {
				uint32_t cp;
				size_t cl = utf8_decode((const unsigned char *)s + stop, n - stop, &cp);
				if (!cl || !is_space_cp(cp))
					break;
				stop += cl;
			}
			pos = stop;
		}
		if (piece_add(out, n_out, cap_out, start_offset, start - start_offset, -1) ||
		    piece_add(out, n_out, cap_out, start, stop - start, tok->id))
			return -1;
		start_offset = stop;
	}
	return piece_add(out, n_out, cap_out, start_offset, n - start_offset, -1);
}
