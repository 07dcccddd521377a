/* KV block pool with prefix caching (docs/reference.md B.4/B.5). */
#include "engine/blocks.h"

#include <stdlib.h>
#include <string.h>

struct blk {
	int32_t ref;
	int32_t prev, next; /* free queue links; -1 = none */
	int32_t hnext;      /* next block in the same hash bucket; -1 = none */
	bool in_free, hashed;
	struct block_hash hash, parent;
};

struct block_pool {
	int n_blocks, block_size;
	bool caching;
	uint64_t k0, k1; /* SipHash key */
	struct blk *b;   /* [n_blocks] */
	int32_t *tokens; /* [n_blocks][block_size] contents of hashed blocks (hit check) */
	int32_t head, tail;
	int n_free;
	int32_t *bucket; /* [n_buckets] first block of each hash bucket */
	uint32_t bucket_mask;
};

/* ---- SipHash-2-4 with 128-bit output: a keyed hash, so prefix-cache collisions cannot be
 * crafted by a client who does not know the per-process key. ---- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                   \
	do {                       \
		v0 += v1;          \
		v1 = ROTL(v1, 13); \
		v1 ^= v0;          \
		v0 = ROTL(v0, 32); \
		v2 += v3;          \
		v3 = ROTL(v3, 16); \
		v3 ^= v2;          \
		v0 += v3;          \
		v3 = ROTL(v3, 21); \
		v3 ^= v0;          \
		v2 += v1;          \
		v1 = ROTL(v1, 17); \
		v1 ^= v2;          \
		v2 = ROTL(v2, 32); \
	} while (0)

static struct block_hash siphash128(uint64_t k0, uint64_t k1, const struct block_hash *parent, const int32_t *tok,
				    int n_tok)
{
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
	v1 ^= 0xee;
	/* message: parent.lo, parent.hi, then tokens packed two per 64-bit word */
	int n_words = 2 + (n_tok + 1) / 2;
	for (int w = 0; w < n_words; w++) {
		uint64_t m;
		if (w == 0)
			m = parent->lo;
		else if (w == 1)
			m = parent->hi;
		else {
			int t = (w - 2) * 2;
			uint64_t a = (uint32_t)tok[t];
			uint64_t b = t + 1 < n_tok ? (uint32_t)tok[t + 1] : 0;
			m = a | b << 32;
		}
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	uint64_t len = (uint64_t)(16 + 4 * n_tok);
	uint64_t m = len << 56;
	v3 ^= m;
	SIPROUND;
	SIPROUND;
	v0 ^= m;
	v2 ^= 0xee;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	struct block_hash h;
	h.lo = v0 ^ v1 ^ v2 ^ v3;
	v1 ^= 0xdd;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	h.hi = v0 ^ v1 ^ v2 ^ v3;
	return h;
}

static bool hash_eq(struct block_hash a, struct block_hash b) { return a.lo == b.lo && a.hi == b.hi; }

int kv_seq_init(struct kv_seq *s, int max_len, int block_size, struct err *e)
{
	memset(s, 0, sizeof *s);
	int cap = max_len / block_size + 2;
	s->blocks = malloc(sizeof *s->blocks * (size_t)cap);
	s->hashes = malloc(sizeof *s->hashes * (size_t)cap);
	if (!s->blocks || !s->hashes) {
		kv_seq_fini(s);
		return err_set(e, "kv seq: out of memory for %d blocks", cap);
	}
	s->cap_blocks = cap;
	return 0;
}

void kv_seq_fini(struct kv_seq *s)
{
	free(s->blocks);
	free(s->hashes);
	memset(s, 0, sizeof *s);
}

/* ---- free queue ---- */

static void fq_remove(struct block_pool *p, int32_t id)
{
	struct blk *b = &p->b[id];
	CHECK(b->in_free);
	if (b->prev >= 0)
		p->b[b->prev].next = b->next;
	else
		p->head = b->next;
	if (b->next >= 0)
		p->b[b->next].prev = b->prev;
	else
		p->tail = b->prev;
	b->prev = b->next = -1;
	b->in_free = false;
	p->n_free--;
}

static void fq_push_tail(struct block_pool *p, int32_t id)
{
	struct blk *b = &p->b[id];
	CHECK(!b->in_free && b->ref == 0);
	b->prev = p->tail;
	b->next = -1;
	if (p->tail >= 0)
		p->b[p->tail].next = id;
	else
		p->head = id;
	p->tail = id;
	b->in_free = true;
	p->n_free++;
}

/* ---- hash map: bucket chains through blk.hnext; duplicates allowed ---- */

static uint32_t bucket_of(const struct block_pool *p, struct block_hash h)
{
	return (uint32_t)(h.lo ^ (h.hi >> 17)) & p->bucket_mask;
}

static void map_insert(struct block_pool *p, int32_t id)
{
	uint32_t k = bucket_of(p, p->b[id].hash);
	p->b[id].hnext = p->bucket[k];
	p->bucket[k] = id;
}

static void map_remove(struct block_pool *p, int32_t id)
{
	uint32_t k = bucket_of(p, p->b[id].hash);
	int32_t *link = &p->bucket[k];
	while (*link >= 0 && *link != id)
		link = &p->b[*link].hnext;
	CHECK(*link == id);
	*link = p->b[id].hnext;
	p->b[id].hnext = -1;
}

/* A cached block holding exactly these tokens after this parent, or -1. */
static int32_t map_find(const struct block_pool *p, struct block_hash h, struct block_hash parent, const int32_t *tok)
{
	for (int32_t id = p->bucket[bucket_of(p, h)]; id >= 0; id = p->b[id].hnext) {
		const struct blk *b = &p->b[id];
		if (hash_eq(b->hash, h) && hash_eq(b->parent, parent) &&
		    !memcmp(p->tokens + (size_t)id * p->block_size, tok, sizeof *tok * (size_t)p->block_size))
			return id;
	}
	return -1;
}

static void evict(struct block_pool *p, int32_t id)
{
	if (!p->b[id].hashed)
		return;
	map_remove(p, id);
	p->b[id].hashed = false;
}

int blocks_new(int n_blocks, int block_size, bool caching, uint64_t hash_key, struct block_pool **out, struct err *e)
{
	if (n_blocks < 2)
		return err_set(e, "kv pool: %d blocks (need at least 2 including the null block)", n_blocks);
	if (block_size < 1)
		return err_set(e, "kv pool: bad block size %d", block_size);
	struct block_pool *p = calloc(1, sizeof *p);
	if (!p)
		return err_set(e, "kv pool: out of memory");
	p->n_blocks = n_blocks;
	p->block_size = block_size;
	p->caching = caching;
	p->k0 = hash_key ^ 0x9e3779b97f4a7c15ULL;
	p->k1 = (hash_key * 0xbf58476d1ce4e5b9ULL) ^ 0x94d049bb133111ebULL;
	uint32_t nb = 16;
	while (nb < (uint32_t)n_blocks * 2 && nb < (1u << 30))
		nb <<= 1;
	p->bucket_mask = nb - 1;
	p->b = calloc((size_t)n_blocks, sizeof *p->b);
	p->bucket = malloc(sizeof *p->bucket * nb);
	p->tokens = caching ? malloc(sizeof *p->tokens * (size_t)n_blocks * (size_t)block_size) : NULL;
	if (!p->b || !p->bucket || (caching && !p->tokens)) {
		blocks_free_pool(p);
		return err_set(e, "kv pool: out of memory for %d blocks", n_blocks);
	}
	for (uint32_t i = 0; i < nb; i++)
		p->bucket[i] = -1;
	p->head = p->tail = -1;
	for (int i = 0; i < n_blocks; i++) {
		p->b[i].prev = p->b[i].next = p->b[i].hnext = -1;
		if (i > 0)
			fq_push_tail(p, i);
	}
	p->b[0].ref = 1; /* the null block is never handed out */
	*out = p;
	return 0;
}

void blocks_free_pool(struct block_pool *p)
{
	if (!p)
		return;
	free(p->b);
	free(p->bucket);
	free(p->tokens);
	free(p);
}

int blocks_size(const struct block_pool *p) { return p->block_size; }
int blocks_total(const struct block_pool *p) { return p->n_blocks - 1; }
int blocks_num_free(const struct block_pool *p) { return p->n_free; }
int blocks_num_used(const struct block_pool *p) { return p->n_blocks - 1 - p->n_free; }
int blocks_ref(const struct block_pool *p, int block) { return p->b[block].ref; }
bool blocks_is_cached(const struct block_pool *p, int block) { return p->b[block].hashed; }

double blocks_usage(const struct block_pool *p) { return 1.0 - (double)p->n_free / (double)(p->n_blocks - 1); }

void blocks_seq_hash(const struct block_pool *p, struct kv_seq *s, const int32_t *tokens, int n_tokens)
{
	int full = n_tokens / p->block_size;
	CHECK(full <= s->cap_blocks);
	for (int j = s->n_hashes; j < full; j++) {
		const struct block_hash *parent = j > 0 ? &s->hashes[j - 1] : &s->salt;
		s->hashes[j] = siphash128(p->k0, p->k1, parent, tokens + (size_t)j * p->block_size, p->block_size);
	}
	if (full > s->n_hashes)
		s->n_hashes = full;
}

struct block_hash blocks_salt(const struct block_pool *p, const char *salt, size_t n)
{
	/* the same keyed SipHash as the blocks, over the bytes as tokens, with a parent no
	 * block chain has ({0, 1}) */
	struct block_hash h = {0, 1};
	int32_t buf[64];
	size_t at = 0;
	do { /* 64 bytes at a time, each piece chained to the last */
		int m = 0;
		for (; m < 64 && at < n; m++, at++)
			buf[m] = (unsigned char)salt[at];
		struct block_hash parent = h;
		h = siphash128(p->k0, p->k1, &parent, buf, m);
	} while (at < n);
	if (h.lo == 0 && h.hi == 0)
		h.lo = 1;
	return h;
}

int blocks_find_cached(struct block_pool *p, struct kv_seq *s, const int32_t *tokens, int n_tokens, int32_t *hit)
{
	if (!p->caching || n_tokens < 1)
		return 0;
	int max_hit = (n_tokens - 1) / p->block_size; /* leave >= 1 token to compute */
	blocks_seq_hash(p, s, tokens, n_tokens);
	int n = 0;
	for (int j = 0; j < max_hit; j++) {
		int32_t id = map_find(p, s->hashes[j], j > 0 ? s->hashes[j - 1] : s->salt,
				      tokens + (size_t)j * p->block_size);
		if (id < 0)
			break;
		hit[n++] = id;
	}
	return n;
}

/* Registers blocks [s->n_registered, n_full) of s in the cache. */
static void register_full(struct block_pool *p, struct kv_seq *s, const int32_t *tokens, int n_full)
{
	if (n_full > s->n_blocks)
		n_full = s->n_blocks;
	if (n_full <= s->n_registered)
		return;
	blocks_seq_hash(p, s, tokens, n_full * p->block_size);
	for (int j = s->n_registered; j < n_full; j++) {
		struct blk *b = &p->b[s->blocks[j]];
		if (b->hashed)
			continue; /* a cache hit: already registered */
		b->hash = s->hashes[j];
		b->parent = j > 0 ? s->hashes[j - 1] : s->salt;
		b->hashed = true;
		memcpy(p->tokens + (size_t)s->blocks[j] * p->block_size, tokens + (size_t)j * p->block_size,
		       sizeof *tokens * (size_t)p->block_size);
		map_insert(p, s->blocks[j]);
	}
	s->n_registered = n_full;
}

int blocks_allocate(struct block_pool *p, struct kv_seq *s, const int32_t *tokens, int n_tokens, int n_computed,
		    int n_new, const int32_t *hit, int n_hit)
{
	CHECK(n_hit == 0 || s->n_blocks == 0);
	int bs = p->block_size;
	int covered = n_computed + n_hit * bs + n_new;
	int want = (covered + bs - 1) / bs;
	int needed = want - s->n_blocks - n_hit;
	if (needed < 0)
		needed = 0;
	CHECK(want <= s->cap_blocks);
	/* Hit blocks sitting in the free queue leave it when touched. */
	int hit_free = 0;
	for (int i = 0; i < n_hit; i++)
		hit_free += p->b[hit[i]].ref == 0;
	if (needed > p->n_free - hit_free)
		return -1;
	for (int i = 0; i < n_hit; i++) {
		struct blk *b = &p->b[hit[i]];
		if (b->ref == 0)
			fq_remove(p, hit[i]);
		b->ref++;
		s->blocks[s->n_blocks++] = hit[i];
	}
	for (int i = 0; i < needed; i++) {
		int32_t id = p->head;
		CHECK(id > 0);
		fq_remove(p, id);
		evict(p, id);
		p->b[id].ref = 1;
		s->blocks[s->n_blocks++] = id;
	}
	if (p->caching) {
		int upto = covered < n_tokens ? covered : n_tokens;
		register_full(p, s, tokens, upto / bs);
	}
	return 0;
}

void blocks_free_seq(struct block_pool *p, struct kv_seq *s)
{
	for (int i = s->n_blocks - 1; i >= 0; i--) {
		struct blk *b = &p->b[s->blocks[i]];
		CHECK(b->ref > 0);
		if (--b->ref == 0)
			fq_push_tail(p, s->blocks[i]);
	}
	s->n_blocks = 0;
	s->n_registered = 0;
}
