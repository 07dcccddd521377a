/* The KV block pool (docs/reference.md B.4/B.5): fixed-size blocks lent by id with reference counts,
 * block 0 reserved as the null block, a doubly-linked free queue (allocate from the head,
 * free to the tail) and prefix caching of full blocks by chained keyed hashes with token
 * comparison on every hit. Cached blocks that nobody references stay in the free queue and
 * are evicted least-recently-freed first. Pure bookkeeping: no tensors. */
#ifndef MLA_ENGINE_BLOCKS_H
#define MLA_ENGINE_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct block_hash {
	uint64_t lo, hi;
};

/* A request's KV state. Arrays are allocated once per request (kv_seq_init) with room for
 * max_len tokens, so the step path never reallocates. */
struct kv_seq {
	int32_t *blocks; /* [n_blocks] block ids, in position order */
	int n_blocks, cap_blocks;
	struct block_hash *hashes; /* [n_hashes] chained hash of full block j of the tokens */
	int n_hashes;
	int n_registered;       /* leading blocks already registered in the cache */
	struct block_hash salt; /* the first block's parent: {0, 0}, or a request's cache_salt
				    * (only requests with the same salt share cached blocks) */
};

int kv_seq_init(struct kv_seq *s, int max_len, int block_size, struct err *e);
void kv_seq_fini(struct kv_seq *s);

struct block_pool;

/* n_blocks includes the null block 0 (so n_blocks - 1 are usable); hash_key keys the hash
 * (a random per-process value, like vLLM's NONE_HASH). */
int blocks_new(int n_blocks, int block_size, bool caching, uint64_t hash_key, struct block_pool **out, struct err *e);
void blocks_free_pool(struct block_pool *p); /* the pool itself, every block with it */

int blocks_size(const struct block_pool *p);                  /* tokens per block */
int blocks_total(const struct block_pool *p);                 /* usable blocks (excludes block 0) */
int blocks_num_free(const struct block_pool *p);              /* in the free queue (cached or not) */
double blocks_usage(const struct block_pool *p);              /* 1 - free / usable */
int blocks_ref(const struct block_pool *p, int block);        /* tests */
bool blocks_is_cached(const struct block_pool *p, int block); /* has a registered hash */

/* A request's cache_salt as the root of its chain of block hashes (kv_seq.salt): the pool's
 * keyed hash of the bytes, never {0, 0} (no salt). */
struct block_hash blocks_salt(const struct block_pool *p, const char *salt, size_t n);

/* Extends s->hashes to cover every full block of tokens[0, n_tokens). */
void blocks_seq_hash(const struct block_pool *p, struct kv_seq *s, const int32_t *tokens, int n_tokens);

/* Longest run of leading cached blocks for tokens[0, n_tokens), capped so that at least
 * one token is left to compute (hit <= n_tokens - 1 tokens). Writes the block ids to hit
 * (room for n_tokens / block_size) and returns their count. No reference is taken. */
int blocks_find_cached(struct block_pool *p, struct kv_seq *s, const int32_t *tokens, int n_tokens, int32_t *hit);

/* allocate_slots: makes s own blocks for n_computed + n_hit * block_size + n_new tokens,
 * first touching the n_hit cache-hit blocks (only when s owns none yet), then popping new
 * blocks from the free queue head (evicting their cached hashes). With caching on,
 * registers every block that becomes full within min(covered, n_tokens) of tokens.
 * Returns -1 without changing anything when there are not enough free blocks. */
int blocks_allocate(struct block_pool *p, struct kv_seq *s, const int32_t *tokens, int n_tokens, int n_computed,
		    int n_new, const int32_t *hit, int n_hit);

/* Frees one sequence's blocks (not s itself: kv_seq_fini): drops s's references, last
 * block first, so a sequence's tail is evicted before its head. Freed blocks keep their
 * hash (eviction candidates). */
void blocks_free_seq(struct block_pool *p, struct kv_seq *s);

/* Blocks still referenced (for leak checks): usable - free. */
int blocks_num_used(const struct block_pool *p);

#endif
