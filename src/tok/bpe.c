/* BPE model: load vocab + merges, encode a word by repeatedly merging the lowest-ranked
 * adjacent pair (a min-heap of candidate pairs over a linked list of symbols, as in Hugging
 * Face tokenizers' word.rs: ties go to the leftmost pair; stale candidates are skipped). */
#include "tok/bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "io/json_util.h"

struct bpe_sym {
	int32_t id;
	int32_t prev, next; /* -1 at the ends */
	bool gone;          /* merged into its left neighbour */
};

struct bpe_cand {
	uint32_t rank;
	uint32_t pos;
	int32_t new_id;
};

/* ---- merges hash: (left, right) → (rank, new id) ---- */

static inline uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

static inline size_t pair_hash(uint64_t k, size_t mask)
{
	k *= 0x9E3779B97F4A7C15ULL;
	return (size_t)(k >> 32) & mask;
}

static const struct bpe_merge_slot *merge_find(const struct bpe *b, int32_t l, int32_t r)
{
	uint64_t k = pair_key(l, r);
	size_t mask = b->merges_cap - 1, h = pair_hash(k, mask);
	for (;;) {
		const struct bpe_merge_slot *s = &b->merges[h];
		if (s->key == k)
			return s;
		if (s->key == UINT64_MAX)
			return NULL;
		h = (h + 1) & mask;
	}
}

static void merge_put(struct bpe *b, int32_t l, int32_t r, uint32_t rank, int32_t new_id)
{
	uint64_t k = pair_key(l, r);
	size_t mask = b->merges_cap - 1, h = pair_hash(k, mask);
	while (b->merges[h].key != UINT64_MAX && b->merges[h].key != k)
		h = (h + 1) & mask;
	/* a repeated pair keeps its last rank, like the HashMap collect in tokenizers */
	b->merges[h] = (struct bpe_merge_slot){k, rank, new_id};
}

/* ---- load ---- */

static int token_id(const struct bpe *b, const char *s, size_t n) { return tok_strmap_get(&b->vocab, s, n); }

static int load_vocab(struct bpe *b, const json_t *vocab, const char *what, struct err *e)
{
	if (!json_is_object(vocab))
		return err_set(e, "%s: model.vocab: expected an object of token → id", what);
	const char *k;
	json_t *v;
	int64_t max_id = -1;
	json_object_foreach((json_t *)vocab, k, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= INT32_MAX)
			return err_set(e, "%s: model.vocab: token '%s' has a bad id", what, k);
		int64_t id = json_integer_value(v);
		if (tok_strmap_put(&b->vocab, k, strlen(k), (int32_t)id))
			return tok_oom(e);
		if (id > max_id)
			max_id = id;
	}
	if (max_id > 16 * 1024 * 1024)
		return err_set(e, "%s: model.vocab: id %lld is too large", what, (long long)max_id);
	b->n_ids = (int32_t)(max_id + 1);
	b->entry_of_id = malloc((size_t)(b->n_ids ? b->n_ids : 1) * sizeof(int32_t));
	if (!b->entry_of_id)
		return tok_oom(e);
	for (int32_t i = 0; i < b->n_ids; i++)
		b->entry_of_id[i] = -1;
	for (size_t i = 0; i < b->vocab.n; i++)
		b->entry_of_id[b->vocab.val[i]] = (int32_t)i;
	return 0;
}

/* One merge entry: "a b" or ["a", "b"]. */
static int merge_parts(const json_t *m, size_t i, const char *what, const char **a, size_t *na, const char **bb,
		       size_t *nb, struct err *e)
{
	if (json_is_string(m)) {
		const char *s = json_string_value(m);
		size_t n = json_string_length(m);
		const char *sp = memchr(s, ' ', n);
		if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)))
			return err_set(e, "%s: model.merges[%zu]: '%s' is not two tokens separated by one space", what,
				       i, s);
		*a = s, *na = (size_t)(sp - s), *bb = sp + 1, *nb = n - *na - 1;
		return 0;
	}
	if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
	    json_is_string(json_array_get(m, 1))) {
		*a = json_string_value(json_array_get(m, 0));
		*na = json_string_length(json_array_get(m, 0));
		*bb = json_string_value(json_array_get(m, 1));
		*nb = json_string_length(json_array_get(m, 1));
		return 0;
	}
	return err_set(e, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", what, i);
}

static int load_merges(struct bpe *b, const json_t *merges, const char *what, struct err *e)
{
	if (merges && !json_is_array(merges))
		return err_set(e, "%s: model.merges: expected an array", what);
	size_t n = merges ? json_array_size(merges) : 0;
	size_t cap = 16;
	while (cap < n * 2)
		cap *= 2;
	b->merges_cap = cap;
	b->merges = malloc(cap * sizeof *b->merges);
	if (!b->merges)
		return tok_oom(e);
	for (size_t i = 0; i < cap; i++)
		b->merges[i].key = UINT64_MAX;
	size_t plen = b->prefix ? strlen(b->prefix) : 0;
	struct strbuf cat = {0};
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const char *l = NULL, *r = NULL;
		size_t nl = 0, nr = 0;
		if ((rc = merge_parts(json_array_get(merges, i), i, what, &l, &nl, &r, &nr, e)))
			break;
		int32_t il = token_id(b, l, nl), ir = token_id(b, r, nr);
		if (il < 0 || ir < 0) {
			rc = err_set(e, "%s: model.merges[%zu]: '%.*s' is not in the vocab", what, i,
				     (int)(il < 0 ? nl : nr), il < 0 ? l : r);
			break;
		}
		/* the merged token drops the right part's continuing-subword prefix */
		size_t skip = (plen && nr >= plen && !memcmp(r, b->prefix, plen)) ? plen : 0;
		cat.n = 0;
		strbuf_put(&cat, l, nl);
		strbuf_put(&cat, r + skip, nr - skip);
		if (cat.oom) {
			rc = tok_oom(e);
			break;
		}
		int32_t im = token_id(b, cat.p, cat.n);
		if (im < 0) {
			rc = err_set(e, "%s: model.merges[%zu]: merged token '%.*s' is not in the vocab", what, i,
				     (int)cat.n, cat.p);
			break;
		}
		merge_put(b, il, ir, (uint32_t)i, im);
	}
	strbuf_fini(&cat);
	return rc;
}

int bpe_load(struct bpe *b, const json_t *model, const char *what, struct err *e)
{
	memset(b, 0, sizeof *b);
	b->unk_id = -1;
	for (int i = 0; i < 256; i++)
		b->byte_id[i] = b->fallback_id[i] = -1;
	const char *s;
	int rc;
	if ((rc = load_vocab(b, json_object_get(model, "vocab"), what, e)))
		goto fail;
	if ((rc = json_util_str(model, what, "model.continuing_subword_prefix", NULL, &s, e)) < 0)
		goto fail;
	if (s && *s && !(b->prefix = tok_strndup(s, strlen(s)))) {
		rc = tok_oom(e);
		goto fail;
	}
	if ((rc = json_util_str(model, what, "model.end_of_word_suffix", NULL, &s, e)) < 0)
		goto fail;
	if (s && *s && !(b->suffix = tok_strndup(s, strlen(s)))) {
		rc = tok_oom(e);
		goto fail;
	}
	if ((rc = json_util_bool(model, what, "model.fuse_unk", false, &b->fuse_unk, e)) < 0 ||
	    (rc = json_util_bool(model, what, "model.byte_fallback", false, &b->byte_fallback, e)) < 0 ||
	    (rc = json_util_bool(model, what, "model.ignore_merges", false, &b->ignore_merges, e)) < 0)
		goto fail;
	const json_t *dropout = json_object_get(model, "dropout");
	if (dropout && !json_is_null(dropout) && json_number_value(dropout) > 0.0) {
		rc = err_set(e, "%s: model.dropout: BPE dropout is not supported for inference", what);
		goto fail;
	}
	if ((rc = json_util_str(model, what, "model.unk_token", NULL, &s, e)) < 0)
		goto fail;
	if (s) {
		b->unk_id = token_id(b, s, strlen(s));
		if (b->unk_id < 0) {
			rc = err_set(e, "%s: model.unk_token: '%s' is not in the vocab", what, s);
			goto fail;
		}
	}
	if ((rc = load_merges(b, json_object_get(model, "merges"), what, e)))
		goto fail;
	for (int i = 0; i < 256; i++) {
		char name[8];
		snprintf(name, sizeof name, "<0x%02X>", i);
		b->fallback_id[i] = token_id(b, name, 6);
	}
	return 0;
fail:
	bpe_free(b);
	return -1;
}

void bpe_set_byte_level(struct bpe *b)
{
	b->byte_level = true;
	for (int i = 0; i < 256; i++) {
		char c[4];
		int n = utf8_encode(tok_byte_to_cp((unsigned char)i), c);
		b->byte_id[i] = token_id(b, c, (size_t)n);
	}
}

void bpe_free(struct bpe *b)
{
	tok_strmap_free(&b->vocab);
	free(b->entry_of_id);
	free(b->merges);
	free(b->prefix);
	free(b->suffix);
	memset(b, 0, sizeof *b);
}

const char *bpe_id_to_token(const struct bpe *b, int32_t id, size_t *len)
{
	if (id < 0 || id >= b->n_ids || b->entry_of_id[id] < 0)
		return NULL;
	int32_t i = b->entry_of_id[id];
	if (len)
		*len = b->vocab.klen[i];
	return b->vocab.blob.p + b->vocab.koff[i];
}

/* ---- encode ---- */

static inline bool cand_less(const struct bpe_cand *x, const struct bpe_cand *y)
{
	return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static void heap_push(struct bpe_scratch *s, size_t *n, struct bpe_cand c)
{
	if (*n == s->heap_cap) {
		size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
		struct bpe_cand *h = realloc(s->heap, cap * sizeof *h);
		if (!h) {
			s->oom = true; /* checked once per word */
			return;
		}
		s->heap = h;
		s->heap_cap = cap;
	}
	size_t i = (*n)++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!cand_less(&c, &s->heap[p]))
			break;
		s->heap[i] = s->heap[p];
		i = p;
	}
	s->heap[i] = c;
}

static struct bpe_cand heap_pop(struct bpe_scratch *s, size_t *n)
{
	struct bpe_cand top = s->heap[0], last = s->heap[--(*n)];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && cand_less(&s->heap[c + 1], &s->heap[c]))
			c++;
		if (!cand_less(&s->heap[c], &last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (*n)
		s->heap[i] = last;
	return top;
}

static void sym_add(struct bpe_scratch *s, size_t *n, int32_t id)
{
	if (*n == s->sym_cap) {
		size_t cap = s->sym_cap ? s->sym_cap * 2 : 64;
		struct bpe_sym *v = realloc(s->sym, cap * sizeof *v);
		if (!v) {
			s->oom = true; /* checked once per word */
			return;
		}
		s->sym = v;
		s->sym_cap = cap;
	}
	s->sym[*n] = (struct bpe_sym){id, (int32_t)*n - 1, (int32_t)*n + 1, false};
	(*n)++;
}

/* Initial symbols of a word given as a character string (byte-level words already mapped),
 * with prefix / suffix, byte fallback and unk handling (tokenizers' merge_word). */
static void initial_symbols(const struct bpe *b, const char *w, size_t n, struct bpe_scratch *s, size_t *n_sym)
{
	struct strbuf key = {0};
	int32_t unk_pending = -1; /* fused unk waiting to be added */
	size_t i = 0;
	while (i < n) {
		uint32_t cp;
		size_t cl = utf8_decode((const unsigned char *)w + i, n - i, &cp);
		if (!cl)
			cl = 1; /* not reached: input is validated */
		const char *ks = w + i;
		size_t kn = cl;
		if ((i > 0 && b->prefix) || (i + cl >= n && b->suffix)) {
			key.n = 0;
			if (i > 0 && b->prefix)
				strbuf_puts(&key, b->prefix);
			strbuf_put(&key, w + i, cl);
			if (i + cl >= n && b->suffix)
				strbuf_puts(&key, b->suffix);
			if (key.oom) {
				s->oom = true;
				break;
			}
			ks = key.p, kn = key.n;
		}
		int32_t id = token_id(b, ks, kn);
		if (id >= 0) {
			if (unk_pending >= 0)
				sym_add(s, n_sym, unk_pending), unk_pending = -1;
			sym_add(s, n_sym, id);
		} else {
			bool done = false;
			if (b->byte_fallback) {
				bool all = true;
				for (size_t k = 0; k < kn; k++)
					all = all && b->fallback_id[(unsigned char)ks[k]] >= 0;
				if (all) {
					if (unk_pending >= 0)
						sym_add(s, n_sym, unk_pending), unk_pending = -1;
					for (size_t k = 0; k < kn; k++)
						sym_add(s, n_sym, b->fallback_id[(unsigned char)ks[k]]);
					done = true;
				}
			}
			if (!done && b->unk_id >= 0) {
				if (unk_pending >= 0 && !b->fuse_unk)
					sym_add(s, n_sym, unk_pending);
				unk_pending = b->unk_id;
			}
			/* no unk token: the character is dropped, as tokenizers does */
		}
		i += cl;
	}
	if (unk_pending >= 0)
		sym_add(s, n_sym, unk_pending);
	strbuf_fini(&key);
}

static void merge_all(const struct bpe *b, struct bpe_scratch *s, size_t n_sym)
{
	struct bpe_sym *sym = s->sym;
	size_t nh = 0;
	for (size_t i = 0; i + 1 < n_sym; i++) {
		const struct bpe_merge_slot *m = merge_find(b, sym[i].id, sym[i + 1].id);
		if (m)
			heap_push(s, &nh, (struct bpe_cand){m->rank, (uint32_t)i, m->new_id});
	}
	while (nh) {
		struct bpe_cand c = heap_pop(s, &nh);
		struct bpe_sym *cur = &sym[c.pos];
		if (cur->gone || cur->next < 0 || (size_t)cur->next >= n_sym)
			continue;
		struct bpe_sym *right = &sym[cur->next];
		const struct bpe_merge_slot *m = merge_find(b, cur->id, right->id);
		if (!m || m->new_id != c.new_id)
			continue; /* stale */
		cur->id = c.new_id;
		right->gone = true;
		cur->next = right->next;
		if (right->next >= 0 && (size_t)right->next < n_sym)
			sym[right->next].prev = (int32_t)c.pos;
		if (cur->prev >= 0) {
			m = merge_find(b, sym[cur->prev].id, cur->id);
			if (m)
				heap_push(s, &nh, (struct bpe_cand){m->rank, (uint32_t)cur->prev, m->new_id});
		}
		if (cur->next >= 0 && (size_t)cur->next < n_sym) {
			m = merge_find(b, cur->id, sym[cur->next].id);
			if (m)
				heap_push(s, &nh, (struct bpe_cand){m->rank, c.pos, m->new_id});
		}
	}
}

static int encode_uncached(const struct bpe *b, const char *w, size_t n, struct bpe_scratch *s, struct tok_ids *out)
{
	size_t n_sym = 0;
	s->oom = false;
	bool fast = b->byte_level && !b->prefix && !b->suffix && !b->ignore_merges;
	if (fast)
		for (size_t i = 0; i < n && fast; i++)
			fast = b->byte_id[(unsigned char)w[i]] >= 0;
	if (fast) {
		for (size_t i = 0; i < n; i++)
			sym_add(s, &n_sym, b->byte_id[(unsigned char)w[i]]);
	} else {
		if (b->byte_level) { /* map the raw bytes to the vocab's characters */
			s->word.n = 0;
			for (size_t i = 0; i < n; i++) {
				char c[4];
				int k = utf8_encode(tok_byte_to_cp((unsigned char)w[i]), c);
				strbuf_put(&s->word, c, (size_t)k);
			}
			if (s->word.oom)
				return -1;
			w = s->word.p, n = s->word.n;
		}
		if (b->ignore_merges) {
			int32_t id = token_id(b, w, n);
			if (id >= 0)
				return tok_ids_push(out, id);
		}
		initial_symbols(b, w, n, s, &n_sym);
	}
	if (s->oom)
		return -1;
	merge_all(b, s, n_sym);
	if (s->oom)
		return -1;
	for (size_t i = 0; i < n_sym; i++)
		if (!s->sym[i].gone)
			tok_ids_push(out, s->sym[i].id);
	return out->oom ? -1 : 0;
}

int bpe_encode_word(const struct bpe *b, const char *w, size_t n, struct bpe_scratch *s, struct tok_ids *out)
{
	if (!n)
		return 0;
	if (n == 1 && b->byte_level && b->byte_id[(unsigned char)w[0]] >= 0)
		return tok_ids_push(out, b->byte_id[(unsigned char)w[0]]);
	return encode_uncached(b, w, n, s, out);
}

void bpe_scratch_free(struct bpe_scratch *s)
{
	free(s->sym);
	free(s->heap);
	strbuf_fini(&s->word);
	memset(s, 0, sizeof *s);
}
