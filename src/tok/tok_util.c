/* Tokenizer helpers: id array, byte-level alphabet, string map, piece cache. */
#include "tok/tok_util.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "tok/tokenizer.h"

char *tok_strndup(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

int tok_oom(struct err *e)
{
	err_set(e, "out of memory");
	return TOK_ENOMEM;
}

int tok_ids_add(struct tok_ids *a, const int32_t *ids, size_t n)
{
	if (a->oom)
		return -1;
	if (a->n + n > a->cap) {
		size_t cap = a->cap ? a->cap : 64;
		while (cap < a->n + n)
			cap *= 2;
		int32_t *v = cap <= SIZE_MAX / sizeof *v ? realloc(a->v, cap * sizeof *v) : NULL;
		if (!v) {
			a->oom = true;
			return -1;
		}
		a->v = v;
		a->cap = cap;
	}
	if (n)
		memcpy(a->v + a->n, ids, n * sizeof *ids);
	a->n += n;
	return 0;
}

/* ---- byte-level alphabet (GPT-2 bytes_to_unicode) ---- */

static bool byte_printable(unsigned b)
{
	return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The 68 non-printable bytes are 0..32, 127..160 and 173; the k-th of them maps to 256 + k. */
uint32_t tok_byte_to_cp(unsigned char b)
{
	if (byte_printable(b))
		return b;
	if (b <= 32)
		return 256u + b;
	if (b >= 127 && b <= 160)
		return 256u + 33 + (b - 127u);
	return 256u + 67; /* 173 */
}

int tok_cp_to_byte(uint32_t cp)
{
	if (cp < 256)
		return byte_printable(cp) ? (int)cp : -1;
	if (cp >= 256 + 68)
		return -1;
	uint32_t k = cp - 256;
	return k < 33 ? (int)k : k < 67 ? (int)(127 + k - 33) : 173;
}

/* ---- string map ---- */

uint64_t tok_hash(const void *p, size_t n)
{
	/* FNV-1a over 8-byte words, then a final mix: keys are short (tokens, words) */
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ULL ^ n;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, s, 8);
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
		s += 8, n -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, s, n);
	h = (h ^ w) * 0x100000001b3ULL;
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ULL;
	h ^= h >> 32;
	return h;
}

static int strmap_grow(struct tok_strmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	uint32_t *slot = calloc(cap, sizeof *slot);
	if (!slot)
		return -1;
	for (size_t i = 0; i < m->n; i++) {
		size_t h = tok_hash(m->blob.p + m->koff[i], m->klen[i]) & (cap - 1);
		while (slot[h])
			h = (h + 1) & (cap - 1);
		slot[h] = (uint32_t)(i + 1);
	}
	free(m->slot);
	m->slot = slot;
	m->cap = cap;
	return 0;
}

/* Room for one more entry in koff / klen / val. */
static int strmap_grow_entries(struct tok_strmap *m)
{
	size_t cap = m->ecap ? m->ecap * 2 : 64;
	size_t *koff = realloc(m->koff, cap * sizeof *koff);
	if (koff)
		m->koff = koff;
	uint32_t *klen = realloc(m->klen, cap * sizeof *klen);
	if (klen)
		m->klen = klen;
	int32_t *val = realloc(m->val, cap * sizeof *val);
	if (val)
		m->val = val;
	if (!koff || !klen || !val)
		return -1; /* the grown ones are merely larger than ecap says */
	m->ecap = cap;
	return 0;
}

int tok_strmap_put(struct tok_strmap *m, const char *k, size_t n, int32_t v)
{
	if ((m->n + 1) * 2 > m->cap && strmap_grow(m))
		return -1;
	size_t h = tok_hash(k, n) & (m->cap - 1);
	while (m->slot[h]) {
		size_t i = m->slot[h] - 1;
		if (m->klen[i] == n && !memcmp(m->blob.p + m->koff[i], k, n)) {
			m->val[i] = v;
			return 0;
		}
		h = (h + 1) & (m->cap - 1);
	}
	if (m->n == m->ecap && strmap_grow_entries(m))
		return -1;
	size_t off = m->blob.n;
	/* keys are NUL-terminated in the blob (one reserve: both appends or neither) */
	if (strbuf_reserve(&m->blob, n + 1))
		return -1;
	strbuf_put(&m->blob, k, n);
	strbuf_putc(&m->blob, 0);
	m->koff[m->n] = off;
	m->klen[m->n] = (uint32_t)n;
	m->val[m->n] = v;
	m->slot[h] = (uint32_t)(++m->n);
	return 0;
}

int32_t tok_strmap_get(const struct tok_strmap *m, const char *k, size_t n)
{
	if (!m->cap)
		return -1;
	size_t h = tok_hash(k, n) & (m->cap - 1);
	while (m->slot[h]) {
		size_t i = m->slot[h] - 1;
		if (m->klen[i] == n && !memcmp(m->blob.p + m->koff[i], k, n))
			return m->val[i];
		h = (h + 1) & (m->cap - 1);
	}
	return -1;
}

void tok_strmap_free(struct tok_strmap *m)
{
	free(m->slot);
	free(m->koff);
	free(m->klen);
	free(m->val);
	strbuf_fini(&m->blob);
	memset(m, 0, sizeof *m);
}

/* ---- piece cache ---- */

#define CACHE_SLOTS 32768 /* at most 16384 pieces: about 5 MB per thread at worst */

static uint64_t cache_hash(uint32_t tag, const char *s, size_t n)
{
	return (tok_hash(s, n) ^ ((uint64_t)tag * 0x9E3779B97F4A7C15ULL)) | 1;
}

static bool cache_slot_eq(const struct tok_cache *c, const struct tok_cache_slot *sl, uint64_t h, uint32_t tag,
			  const char *s, size_t n)
{
	return sl->hash == h && sl->klen == n + 4 && !memcmp(c->keys.p + sl->koff, &tag, 4) &&
	       !memcmp(c->keys.p + sl->koff + 4, s, n);
}

bool tok_cache_get(const struct tok_cache *c, uint32_t tag, const char *s, size_t n, struct tok_ids *out)
{
	if (!c->slot)
		return false;
	uint64_t h = cache_hash(tag, s, n);
	for (size_t i = h & (c->cap - 1); c->slot[i].hash; i = (i + 1) & (c->cap - 1)) {
		const struct tok_cache_slot *sl = &c->slot[i];
		if (cache_slot_eq(c, sl, h, tag, s, n)) {
			tok_ids_add(out, c->ids.v + sl->ioff, sl->n_ids);
			return true;
		}
	}
	return false;
}

int tok_cache_put(struct tok_cache *c, uint32_t tag, const char *s, size_t n, const int32_t *ids, size_t n_ids)
{
	if (!c->slot) {
		c->slot = calloc(CACHE_SLOTS, sizeof *c->slot);
		if (!c->slot)
			return -1;
		c->cap = CACHE_SLOTS;
	}
	if (c->n * 2 >= c->cap || c->keys.n > (2u << 20) || c->ids.n > (512u << 10)) {
		/* full: start over (cheaper than LRU, and text keeps re-filling it) */
		memset(c->slot, 0, c->cap * sizeof *c->slot);
		c->n = 0;
		c->keys.n = 0;
		c->ids.n = 0;
	}
	uint64_t h = cache_hash(tag, s, n);
	size_t i = h & (c->cap - 1);
	while (c->slot[i].hash) {
		if (cache_slot_eq(c, &c->slot[i], h, tag, s, n))
			return 0;
		i = (i + 1) & (c->cap - 1);
	}
	struct tok_cache_slot sl = {h, (uint32_t)c->keys.n, (uint32_t)(n + 4), (uint32_t)c->ids.n, (uint32_t)n_ids};
	if (strbuf_reserve(&c->keys, n + 4) || tok_ids_add(&c->ids, ids, n_ids))
		return -1; /* sticky: the owner drops the cache with its context */
	strbuf_put(&c->keys, &tag, 4);
	strbuf_put(&c->keys, s, n);
	c->slot[i] = sl;
	c->n++;
	return 0;
}

void tok_cache_free(struct tok_cache *c)
{
	free(c->slot);
	strbuf_fini(&c->keys);
	free(c->ids.v);
	memset(c, 0, sizeof *c);
}

int tok_seq_alloc(const json_t *j, const char *key, const char *what, const char *path, size_t elem_size, void **out,
		  size_t *n, struct err *e)
{
	const json_t *arr = json_object_get(j, key);
	*out = NULL;
	*n = 0;
	if (!json_is_array(arr))
		return err_set(e, "%s: %s.%s: expected an array", what, path, key);
	*out = calloc(json_array_size(arr) + 1, elem_size);
	if (!*out)
		return tok_oom(e);
	*n = json_array_size(arr);
	return 0;
}
