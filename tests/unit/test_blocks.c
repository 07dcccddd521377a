/* KV block pool: free queue order, reference counts, prefix-cache hits, eviction order. */
#include <stdlib.h>
#include <string.h>

#include "engine/blocks.h"
#include "harness.h"

#define BS 4

static struct block_pool *pool_make(int n_blocks, bool caching)
{
	struct block_pool *p = NULL;
	struct err e;
	EXPECT(blocks_new(n_blocks, BS, caching, 42, &p, &e) == 0);
	return p;
}

static void seq_make(struct kv_seq *s)
{
	struct err e;
	EXPECT(kv_seq_init(s, 64, BS, &e) == 0);
}

static void test_null_block_and_fifo(void)
{
	struct block_pool *p = pool_make(6, false);
	EXPECT_EQ_INT(blocks_total(p), 5);
	EXPECT_EQ_INT(blocks_num_free(p), 5);
	struct kv_seq s;
	seq_make(&s);
	int32_t tok[24] = {0};
	/* 9 tokens -> 3 blocks, from the head: 1, 2, 3 (never the null block) */
	EXPECT_EQ_INT(blocks_allocate(p, &s, tok, 9, 0, 9, NULL, 0), 0);
	EXPECT_EQ_INT(s.n_blocks, 3);
	EXPECT_EQ_INT(s.blocks[0], 1);
	EXPECT_EQ_INT(s.blocks[2], 3);
	EXPECT_EQ_INT(blocks_num_free(p), 2);
	EXPECT_NEAR(blocks_usage(p), 0.6, 1e-12);
	/* growing within the last block needs nothing; crossing needs one more */
	EXPECT_EQ_INT(blocks_allocate(p, &s, tok, 12, 9, 3, NULL, 0), 0);
	EXPECT_EQ_INT(s.n_blocks, 3);
	EXPECT_EQ_INT(blocks_allocate(p, &s, tok, 13, 12, 1, NULL, 0), 0);
	EXPECT_EQ_INT(s.n_blocks, 4);
	/* not enough: 2 more blocks wanted, 1 free -> failure, nothing changed */
	EXPECT_EQ_INT(blocks_allocate(p, &s, tok, 24, 13, 11, NULL, 0), -1);
	EXPECT_EQ_INT(s.n_blocks, 4);
	EXPECT_EQ_INT(blocks_num_free(p), 1);
	blocks_free_seq(p, &s);
	EXPECT_EQ_INT(blocks_num_free(p), 5);
	EXPECT_EQ_INT(blocks_num_used(p), 0);
	kv_seq_fini(&s);
	blocks_free_pool(p);
}

static void test_prefix_hit_and_cap(void)
{
	struct block_pool *p = pool_make(16, true);
	int32_t tok[12];
	for (int i = 0; i < 12; i++)
		tok[i] = 100 + i;
	struct kv_seq a, b;
	seq_make(&a);
	seq_make(&b);
	/* A: 12 tokens = 3 full blocks, all registered */
	EXPECT_EQ_INT(blocks_allocate(p, &a, tok, 12, 0, 12, NULL, 0), 0);
	for (int i = 0; i < 3; i++)
		EXPECT(blocks_is_cached(p, a.blocks[i]));
	/* B, same 12 tokens: hit capped at 11 tokens -> 2 blocks */
	int32_t hit[8];
	int n_hit = blocks_find_cached(p, &b, tok, 12, hit);
	EXPECT_EQ_INT(n_hit, 2);
	EXPECT_EQ_INT(hit[0], a.blocks[0]);
	EXPECT_EQ_INT(hit[1], a.blocks[1]);
	EXPECT_EQ_INT(blocks_allocate(p, &b, tok, 12, 0, 4, hit, n_hit), 0);
	EXPECT_EQ_INT(blocks_ref(p, a.blocks[0]), 2);
	EXPECT_EQ_INT(blocks_ref(p, a.blocks[2]), 1);
	EXPECT(b.blocks[2] != a.blocks[2]); /* the last block is recomputed in a new block */
	/* 13 tokens: all 3 blocks hit */
	int32_t tok13[13];
	memcpy(tok13, tok, sizeof tok);
	tok13[12] = 7;
	struct kv_seq c;
	seq_make(&c);
	EXPECT_EQ_INT(blocks_find_cached(p, &c, tok13, 13, hit), 3);
	/* a prompt differing in block 1 hits block 0 only; in block 0: nothing */
	struct kv_seq d;
	seq_make(&d);
	int32_t tokd[12];
	memcpy(tokd, tok, sizeof tok);
	tokd[5] = 9;
	EXPECT_EQ_INT(blocks_find_cached(p, &d, tokd, 12, hit), 1);
	struct kv_seq f;
	seq_make(&f);
	tokd[0] = 9;
	EXPECT_EQ_INT(blocks_find_cached(p, &f, tokd, 12, hit), 0);
	blocks_free_seq(p, &a);
	blocks_free_seq(p, &b);
	EXPECT_EQ_INT(blocks_num_used(p), 0);
	/* freed blocks keep their hashes: still a hit */
	struct kv_seq g;
	seq_make(&g);
	EXPECT_EQ_INT(blocks_find_cached(p, &g, tok13, 13, hit), 3);
	/* touching hit blocks that sit in the free queue removes them from it */
	int free_before = blocks_num_free(p);
	EXPECT_EQ_INT(blocks_allocate(p, &g, tok13, 13, 0, 1, hit, 3), 0);
	EXPECT_EQ_INT(blocks_num_free(p), free_before - 4);
	blocks_free_seq(p, &g);
	kv_seq_fini(&a);
	kv_seq_fini(&b);
	kv_seq_fini(&c);
	kv_seq_fini(&d);
	kv_seq_fini(&f);
	kv_seq_fini(&g);
	blocks_free_pool(p);
}

/* Spec test idea 16: fill the pool, free A (a0..a3), allocate 1: a3 is evicted first. */
static void test_eviction_order(void)
{
	struct block_pool *p = pool_make(9, true); /* 8 usable */
	int32_t ta[16], tb[16];
	for (int i = 0; i < 16; i++) {
		ta[i] = i;
		tb[i] = 500 + i;
	}
	struct kv_seq a, b, c;
	seq_make(&a);
	seq_make(&b);
	seq_make(&c);
	EXPECT_EQ_INT(blocks_allocate(p, &a, ta, 16, 0, 16, NULL, 0), 0);
	EXPECT_EQ_INT(blocks_allocate(p, &b, tb, 16, 0, 16, NULL, 0), 0);
	EXPECT_EQ_INT(blocks_num_free(p), 0);
	int32_t a_ids[4];
	memcpy(a_ids, a.blocks, sizeof a_ids);
	blocks_free_seq(p, &a);
	int32_t tc[4] = {900, 901, 902, 903};
	EXPECT_EQ_INT(blocks_allocate(p, &c, tc, 4, 0, 4, NULL, 0), 0);
	EXPECT_EQ_INT(c.blocks[0], a_ids[3]); /* tail of A evicted first */
	EXPECT(blocks_is_cached(p, a_ids[0]));
	EXPECT(blocks_is_cached(p, c.blocks[0])); /* re-registered with C's contents */
	struct kv_seq d;
	seq_make(&d);
	int32_t hit[8];
	/* A again: blocks 0..2 still hit (block 3 was evicted) */
	EXPECT_EQ_INT(blocks_find_cached(p, &d, ta, 16, hit), 3);
	EXPECT_EQ_INT(hit[0], a_ids[0]);
	blocks_free_seq(p, &b);
	blocks_free_seq(p, &c);
	EXPECT_EQ_INT(blocks_num_used(p), 0);
	kv_seq_fini(&a);
	kv_seq_fini(&b);
	kv_seq_fini(&c);
	kv_seq_fini(&d);
	blocks_free_pool(p);
}

/* The hit check compares tokens, not only hashes: a different parent chain never hits. */
static void test_chain_distinguishes_prefix(void)
{
	struct block_pool *p = pool_make(16, true);
	int32_t t1[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	int32_t t2[9] = {9, 9, 9, 9, 5, 6, 7, 8, 0}; /* same block 1, different block 0 */
	struct kv_seq a, b;
	seq_make(&a);
	seq_make(&b);
	EXPECT_EQ_INT(blocks_allocate(p, &a, t1, 8, 0, 8, NULL, 0), 0);
	int32_t hit[4];
	EXPECT_EQ_INT(blocks_find_cached(p, &b, t2, 9, hit), 0);
	blocks_free_seq(p, &a);
	kv_seq_fini(&a);
	kv_seq_fini(&b);
	blocks_free_pool(p);
}

/* cache_salt: only sequences with the same salt share blocks */
static void test_salt_isolates(void)
{
	struct block_pool *p = pool_make(16, true);
	int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	struct kv_seq a, b, c, d;
	seq_make(&a);
	seq_make(&b);
	seq_make(&c);
	seq_make(&d);
	a.salt = blocks_salt(p, "tenant-a", 8);
	EXPECT_EQ_INT(blocks_allocate(p, &a, t, 8, 0, 8, NULL, 0), 0);
	int32_t hit[4];
	EXPECT_EQ_INT(blocks_find_cached(p, &b, t, 9, hit), 0); /* unsalted */
	c.salt = blocks_salt(p, "tenant-b", 8);
	struct block_hash again = blocks_salt(p, "tenant-a", 8), other = c.salt;
	EXPECT(again.lo == a.salt.lo && again.hi == a.salt.hi); /* deterministic */
	EXPECT(other.lo != a.salt.lo || other.hi != a.salt.hi); /* salts differ */
	struct block_hash longer = blocks_salt(
		p, "tenant-a-tenant-a-tenant-a-tenant-a-tenant-a-tenant-a-tenant-a-tenant-a", 72);
	EXPECT((longer.lo || longer.hi) && (longer.lo != a.salt.lo || longer.hi != a.salt.hi));
	EXPECT_EQ_INT(blocks_find_cached(p, &c, t, 9, hit), 0); /* another salt */
	d.salt = blocks_salt(p, "tenant-a", 8);
	EXPECT_EQ_INT(blocks_find_cached(p, &d, t, 9, hit), 2); /* the same salt */
	EXPECT(hit[0] == a.blocks[0] && hit[1] == a.blocks[1]);
	blocks_free_seq(p, &a);
	kv_seq_fini(&a);
	kv_seq_fini(&b);
	kv_seq_fini(&c);
	kv_seq_fini(&d);
	blocks_free_pool(p);
}

static void test_caching_off(void)
{
	struct block_pool *p = pool_make(8, false);
	int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	struct kv_seq a, b;
	seq_make(&a);
	seq_make(&b);
	EXPECT_EQ_INT(blocks_allocate(p, &a, tok, 8, 0, 8, NULL, 0), 0);
	int32_t hit[4];
	EXPECT_EQ_INT(blocks_find_cached(p, &b, tok, 8, hit), 0);
	EXPECT(!blocks_is_cached(p, a.blocks[0]));
	blocks_free_seq(p, &a);
	kv_seq_fini(&a);
	kv_seq_fini(&b);
	blocks_free_pool(p);
}

static void test_bad_sizes(void)
{
	struct block_pool *p = NULL;
	struct err e;
	EXPECT(blocks_new(1, 16, true, 0, &p, &e) < 0);
	EXPECT(strstr(e.msg, "blocks") != NULL);
	EXPECT(blocks_new(8, 0, true, 0, &p, &e) < 0);
}

TESTS(T(test_null_block_and_fifo), T(test_prefix_hit_and_cap), T(test_eviction_order),
      T(test_chain_distinguishes_prefix), T(test_salt_isolates), T(test_caching_off), T(test_bad_sizes))
