/* Small helpers of the tokenizer: a growable id array, the GPT-2 byte-level alphabet, a
 * string → id hash map and the piece cache. Bytes go in base/strbuf. Out of memory is an
 * error like any other: the functions that allocate return -1 (sticky for the id array). */
#ifndef MLA_TOK_TOK_UTIL_H
#define MLA_TOK_TOK_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"
#include "base/strbuf.h"

/* Copy of s[0..n) with a NUL, or NULL when out of memory. */
char *tok_strndup(const char *s, size_t n);
/* Sets "out of memory" in e and returns TOK_ENOMEM (tok/tokenizer.h). */
int tok_oom(struct err *e);
/* A "Sequence" component's list j[key] (normalizers, pretokenizers): *out = calloc'd
 * (count + 1) elements of elem_size, *n = count. 0, or -1 with e set ("WHAT: PATH.KEY:
 * expected an array", or out of memory). */
int tok_seq_alloc(const json_t *j, const char *key, const char *what, const char *path, size_t elem_size, void **out,
		  size_t *n, struct err *e);

/* growable int32 array; like strbuf, a failed append sets the sticky oom and later appends
 * do nothing, so an encoder checks oom once per piece */
struct tok_ids {
	int32_t *v;
	size_t n, cap;
	bool oom;
};
int tok_ids_add(struct tok_ids *a, const int32_t *ids, size_t n); /* 0, or -1 (oom set) */
/* Inline: one call per token of the encoder otherwise. */
static inline int tok_ids_push(struct tok_ids *a, int32_t id)
{
	if (a->n < a->cap && !a->oom) {
		a->v[a->n++] = id;
		return 0;
	}
	return tok_ids_add(a, &id, 1);
}

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
	struct strbuf blob;
};

uint64_t tok_hash(const void *s, size_t n);
/* Inserts or overwrites. Keys are stored NUL-terminated at blob.p + koff[i]. 0, or -1 out
 * of memory (the map unchanged). */
int tok_strmap_put(struct tok_strmap *m, const char *k, size_t n, int32_t v);
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
	struct strbuf keys;
	struct tok_ids ids;
};

/* A key is (tag, bytes): the tag separates the levels that share the cache. On a hit the
 * ids are appended to out (which may then be out->oom) and true is returned. */
bool tok_cache_get(const struct tok_cache *c, uint32_t tag, const char *s, size_t n, struct tok_ids *out);
/* 0, or -1 out of memory (the cache then takes no more: its owner frees it). */
int tok_cache_put(struct tok_cache *c, uint32_t tag, const char *s, size_t n, const int32_t *ids, size_t n_ids);
void tok_cache_free(struct tok_cache *c);

#endif
