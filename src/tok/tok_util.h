/* Small helpers of the tokenizer: a growable byte buffer, the GPT-2 byte-level alphabet, and a
 * string → id hash map. */
#ifndef MLA_TOK_TOK_UTIL_H
#define MLA_TOK_TOK_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- growable buffer (aborts on out-of-memory, like every allocation in tok/) ---- */
struct tok_buf {
	char *p;
	size_t n, cap;
};

void *tok_xmalloc(size_t n);
void *tok_xrealloc(void *p, size_t n);
char *tok_xstrndup(const char *s, size_t n);
void tok_buf_reserve(struct tok_buf *b, size_t extra);
void tok_buf_add(struct tok_buf *b, const void *s, size_t n);
static inline void tok_buf_addc(struct tok_buf *b, char c)
{
	if (b->n + 1 > b->cap)
		tok_buf_reserve(b, 1);
	b->p[b->n++] = c;
}
void tok_buf_free(struct tok_buf *b);

/* growable int32 array */
struct tok_ids {
	int32_t *v;
	size_t n, cap;
};
void tok_ids_push(struct tok_ids *a, int32_t id);
void tok_ids_add(struct tok_ids *a, const int32_t *ids, size_t n);

/* ---- GPT-2 byte-level alphabet ---- */
/* byte → code point of its printable stand-in (e.g. ' ' → U+0120 'Ġ'). */
uint32_t tok_byte_to_cp(unsigned char b);
/* code point → byte, or -1 when cp is not in the alphabet. */
int tok_cp_to_byte(uint32_t cp);

/* ---- string → int32 hash map (open addressing, keys owned by the map) ---- */
struct tok_strmap {
	uint32_t *slot; /* entry index + 1, 0 = empty; cap slots, cap a power of two */
	size_t cap;
	size_t n, ecap; /* entries */
	size_t *koff;   /* entry → offset of its key in blob */
	uint32_t *klen; /* entry → key length */
	int32_t *val;   /* entry → value */
	struct tok_buf blob;
};

uint64_t tok_hash(const void *s, size_t n);
/* Inserts or overwrites. Keys are stored NUL-terminated at blob.p + koff[i]. */
void tok_strmap_put(struct tok_strmap *m, const char *k, size_t n, int32_t v);
/* Value of k, or -1. */
int32_t tok_strmap_get(const struct tok_strmap *m, const char *k, size_t n);
void tok_strmap_free(struct tok_strmap *m);

/* ---- piece → ids cache (per thread): open addressing, cleared when full ---- */
struct tok_cache_slot {
	uint64_t hash; /* 0 = empty */
	uint32_t koff, klen, ioff, n_ids;
};

struct tok_cache {
	struct tok_cache_slot *slot;
	size_t cap, n;
	struct tok_buf keys;
	struct tok_ids ids;
};

/* A key is (tag, bytes): the tag separates the levels that share the cache. On a hit the
 * ids are appended to out and true is returned. */
bool tok_cache_get(const struct tok_cache *c, uint32_t tag, const char *s, size_t n,
		   struct tok_ids *out);
void tok_cache_put(struct tok_cache *c, uint32_t tag, const char *s, size_t n, const int32_t *ids,
		   size_t n_ids);
void tok_cache_free(struct tok_cache *c);

#endif
