/* Scheduler: budgets, chunked prefill, max_num_seqs, preemption order, prefix hits, stop
 * conditions, and every block free again when all requests finish (docs/reference.md B.2-B.6). */
#include <stdlib.h>
#include <string.h>

#include "engine/plan.h"
#include "engine/runner.h"
#include "engine/sched.h"
#include "harness.h"
#include "model/model.h"

struct fix {
	struct block_pool *pool;
	struct sched *s;
	struct sched_req req[8];
	int n_req;
	int32_t sampled[64];
	struct sched_output o;
};

static void fix_init_cfg(struct fix *f, int n_blocks, int bs, bool caching, const struct sched_config *c)
{
	memset(f, 0, sizeof *f);
	struct err e;
	EXPECT(blocks_new(n_blocks, bs, caching, 1, &f->pool, &e) == 0);
	EXPECT(sched_new(c, f->pool, &f->s, &e) == 0);
}

static void fix_init(struct fix *f, int n_blocks, int bs, int max_seqs, int budget, int max_len, bool caching)
{
	struct sched_config c = {.max_num_seqs = max_seqs, .max_num_batched_tokens = budget, .max_model_len = max_len};
	fix_init_cfg(f, n_blocks, bs, caching, &c);
}

static struct sched_req *fix_add_p(struct fix *f, int n_prompt, int first_tok, int max_tokens, int priority)
{
	int32_t prompt[512];
	for (int i = 0; i < n_prompt; i++)
		prompt[i] = first_tok + i;
	struct sched_req *r = &f->req[f->n_req];
	struct err e;
	int max_len = n_prompt + max_tokens;
	EXPECT(sched_req_init(r, (uint64_t)f->n_req, prompt, n_prompt, max_len, blocks_size(f->pool), &e) == 0);
	r->max_tokens = max_tokens;
	r->priority = priority;
	f->n_req++;
	sched_add(f->s, r);
	return r;
}

static struct sched_req *fix_add(struct fix *f, int n_prompt, int first_tok, int max_tokens)
{
	return fix_add_p(f, n_prompt, first_tok, max_tokens, 0);
}

/* One step with a deterministic "model": sampled token = 7 for every completed request. */
static void fix_step(struct fix *f)
{
	sched_step(f->s, &f->o);
	for (int i = 0; i < f->o.n; i++)
		f->sampled[i] = sched_req_wants_token(f->o.reqs[i]) ? 7 : -1;
	sched_update(f->s, &f->o, f->sampled);
}

static void fix_fini(struct fix *f)
{
	EXPECT_EQ_INT(blocks_num_used(f->pool), 0); /* no leaked references */
	for (int i = 0; i < f->n_req; i++)
		sched_req_fini(&f->req[i]);
	sched_free(f->s);
	blocks_free_pool(f->pool);
}

/* Spec test idea 12, first half. */
static void test_chunked_prefill_alone(void)
{
	struct fix f;
	fix_init(&f, 64, 4, 8, 16, 512, true);
	struct sched_req *r = fix_add(&f, 40, 10, 3);
	int chunks[3] = {16, 16, 8};
	for (int k = 0; k < 3; k++) {
		fix_step(&f);
		EXPECT_EQ_INT(f.o.n, 1);
		EXPECT_EQ_INT(r->n_sched, chunks[k]);
		EXPECT_EQ_INT(r->step_start, 16 * k);
		EXPECT_EQ_INT(sched_req_n_output(r), k == 2 ? 1 : 0);
	}
	fix_step(&f);
	EXPECT_EQ_INT(r->n_sched, 1);
	fix_step(&f);
	EXPECT_EQ_INT(r->status, SREQ_FINISHED);
	EXPECT_EQ_INT(r->finish, ENGINE_FINISH_LENGTH);
	EXPECT_EQ_INT(sched_req_n_output(r), 3);
	fix_fini(&f);
}

/* Spec test idea 12, second half: a decoding request goes first every step. */
static void test_chunked_prefill_with_decode(void)
{
	struct fix f;
	fix_init(&f, 64, 4, 8, 16, 512, true);
	struct sched_req *a = fix_add(&f, 3, 500, 20);
	fix_step(&f); /* a prefilled, first token */
	EXPECT_EQ_INT(sched_req_n_output(a), 1);
	struct sched_req *b = fix_add(&f, 40, 10, 2);
	int chunks[3] = {15, 15, 10};
	for (int k = 0; k < 3; k++) {
		fix_step(&f);
		EXPECT_EQ_INT(f.o.n, 2);
		EXPECT(f.o.reqs[0] == a);
		EXPECT_EQ_INT(a->n_sched, 1);
		EXPECT_EQ_INT(b->n_sched, chunks[k]);
		EXPECT(f.o.total_tokens <= 16);
	}
	EXPECT_EQ_INT(sched_req_n_output(b), 1);
	sched_finish(f.s, a, ENGINE_FINISH_ABORT);
	fix_step(&f);
	EXPECT_EQ_INT(b->status, SREQ_FINISHED);
	fix_fini(&f);
}

/* Spec test idea 13. */
static void test_max_num_seqs(void)
{
	struct fix f;
	fix_init(&f, 64, 4, 2, 64, 512, true);
	struct sched_req *a = fix_add(&f, 5, 100, 2);
	fix_add(&f, 5, 200, 5);
	struct sched_req *c = fix_add(&f, 5, 300, 2);
	fix_step(&f);
	EXPECT_EQ_INT(sched_n_running(f.s), 2);
	EXPECT_EQ_INT(sched_n_waiting(f.s), 1);
	EXPECT_EQ_INT(c->status, SREQ_WAITING);
	fix_step(&f); /* a reaches max_tokens 2 and finishes */
	EXPECT_EQ_INT(a->status, SREQ_FINISHED);
	fix_step(&f);
	EXPECT_EQ_INT(c->status, SREQ_RUNNING);
	for (int i = 0; i < 10; i++)
		fix_step(&f);
	EXPECT_EQ_INT(sched_n_running(f.s) + sched_n_waiting(f.s), 0);
	fix_fini(&f);
}

/* Spec test idea 14: the most recently admitted request is preempted, goes to the head of
 * the queue, nothing is admitted in that step, and it resumes later. */
static void test_preemption_order(void)
{
	struct fix f;
	/* block size 4, 6 usable blocks = 24 token slots */
	fix_init(&f, 7, 4, 8, 64, 512, false);
	struct sched_req *a = fix_add(&f, 8, 100, 8); /* 2 blocks */
	struct sched_req *b = fix_add(&f, 8, 200, 8); /* 2 blocks */
	fix_step(&f);
	EXPECT_EQ_INT(f.o.n, 2);
	EXPECT_EQ_INT(blocks_num_free(f.pool), 2);
	struct sched_req *c = fix_add(&f, 4, 300, 4); /* waits behind */
	/* step 2: a and b each need a 3rd block (9th token): 1 left -> ... */
	fix_step(&f);
	EXPECT_EQ_INT(blocks_num_free(f.pool), 0);
	EXPECT_EQ_INT(f.o.n, 2); /* c not admitted: no space left */
	EXPECT_EQ_INT(c->status, SREQ_WAITING);
	/* decode until a block boundary forces a preemption: positions 9..11 fit */
	int preempted_step = -1;
	for (int k = 0; k < 6 && preempted_step < 0; k++) {
		fix_step(&f);
		if (f.o.n_preempted > 0)
			preempted_step = k;
	}
	EXPECT(preempted_step >= 0);
	EXPECT_EQ_INT(b->status, SREQ_PREEMPTED); /* b was admitted after a */
	EXPECT_EQ_INT(b->n_preemptions, 1);
	EXPECT_EQ_INT(b->n_computed, 0);
	EXPECT(sched_waiting_head(f.s) == b);   /* prepended, ahead of c */
	EXPECT_EQ_INT(c->status, SREQ_WAITING); /* no admission in a preempting step */
	EXPECT_EQ_INT(f.o.n, 1);
	EXPECT(f.o.reqs[0] == a);
	struct sched_counters cnt;
	sched_counters_get(f.s, &cnt);
	EXPECT_EQ_INT(cnt.preemptions, 1);
	int b_out = sched_req_n_output(b);
	for (int k = 0;
	     k < 40 && (a->status != SREQ_FINISHED || b->status != SREQ_FINISHED || c->status != SREQ_FINISHED); k++)
		fix_step(&f);
	EXPECT_EQ_INT(a->status, SREQ_FINISHED);
	EXPECT_EQ_INT(b->status, SREQ_FINISHED);
	EXPECT_EQ_INT(c->status, SREQ_FINISHED);
	EXPECT_EQ_INT(sched_req_n_output(b), 8); /* resumed and completed */
	EXPECT(b_out >= 1);
	fix_fini(&f);
}

/* A lone request that cannot get blocks preempts itself rather than hang. */
static void test_self_preemption(void)
{
	struct fix f;
	fix_init(&f, 3, 4, 8, 64, 512, false); /* 2 usable blocks = 8 tokens */
	struct sched_req *a = fix_add(&f, 7, 100, 4);
	fix_step(&f);
	fix_step(&f); /* position 7 fits */
	fix_step(&f); /* position 8 needs a 3rd block: a preempts itself */
	EXPECT_EQ_INT(f.o.n_preempted, 1);
	EXPECT_EQ_INT(a->status, SREQ_PREEMPTED);
	sched_finish(f.s, a, ENGINE_FINISH_ABORT);
	EXPECT_EQ_INT(a->finish, ENGINE_FINISH_ABORT);
	fix_fini(&f);
}

/* Spec test idea 15: a 3-block prompt twice -> 2 blocks cached (cap num_tokens - 1). */
static void test_prefix_hits(void)
{
	struct fix f;
	fix_init(&f, 64, 4, 8, 64, 512, true);
	struct sched_req *a = fix_add(&f, 12, 100, 5);
	fix_step(&f);
	struct sched_req *b = fix_add(&f, 12, 100, 2);
	fix_step(&f);
	EXPECT_EQ_INT(a->n_cached, 0);
	EXPECT_EQ_INT(b->n_cached, 8);
	EXPECT_EQ_INT(b->n_sched, 4);
	EXPECT_EQ_INT(b->step_start, 8);
	EXPECT_EQ_INT(b->kv.blocks[0], a->kv.blocks[0]);
	EXPECT_EQ_INT(blocks_ref(f.pool, a->kv.blocks[0]), 2);
	struct sched_counters cnt;
	sched_counters_get(f.s, &cnt);
	EXPECT_EQ_INT(cnt.prefix_queries, 24);
	EXPECT_EQ_INT(cnt.prefix_hits, 8);
	for (int k = 0; k < 6; k++)
		fix_step(&f);
	EXPECT_EQ_INT(a->status, SREQ_FINISHED);
	EXPECT_EQ_INT(b->status, SREQ_FINISHED);
	/* after both finished, a third identical prompt still hits */
	struct sched_req *c = fix_add(&f, 12, 100, 1);
	fix_step(&f);
	EXPECT_EQ_INT(c->n_cached, 8);
	fix_fini(&f);
}

/* deepseek_mtp: a hit gives up its last block (computed again, MTP rows included). */
static void test_prefix_hits_drop_last(void)
{
	struct fix f;
	struct sched_config c = {
		.max_num_seqs = 8, .max_num_batched_tokens = 64, .max_model_len = 512, .drop_last_hit = true};
	fix_init_cfg(&f, 64, 4, true, &c);
	struct sched_req *a = fix_add(&f, 13, 100, 5);
	fix_step(&f);
	struct sched_req *b = fix_add(&f, 13, 100, 2);
	fix_step(&f);
	EXPECT_EQ_INT(b->n_cached, 8); /* 3 blocks cached, 2 taken */
	EXPECT_EQ_INT(b->step_start, 8);
	EXPECT_EQ_INT(b->n_sched, 5);
	EXPECT_EQ_INT(b->kv.blocks[1], a->kv.blocks[1]);
	EXPECT(b->kv.blocks[2] != a->kv.blocks[2]);
	struct sched_req *d = fix_add(&f, 5, 100, 1); /* one block cached: none taken */
	fix_step(&f);
	EXPECT_EQ_INT(d->n_cached, 0);
	for (int k = 0; k < 8; k++)
		fix_step(&f);
	EXPECT(a->status == SREQ_FINISHED && b->status == SREQ_FINISHED && d->status == SREQ_FINISHED);
	fix_fini(&f);
}

/* deepseek_mtp's lookahead: a request that decodes next gets blocks for `lookahead` more
 * positions (its chained MTP passes write there); only blocks whose
 * positions the step computes are registered in the prefix cache. */
static void test_lookahead(void)
{
	struct fix f;
	struct sched_config c = {.max_num_seqs = 8, .max_num_batched_tokens = 7, .max_model_len = 512, .lookahead = 2};
	fix_init_cfg(&f, 64, 4, true, &c);
	struct sched_req *a = fix_add(&f, 8, 100, 6); /* 7 of its 8 prompt tokens in step 1 */
	fix_step(&f);
	EXPECT_EQ_INT(a->n_computed, 7);
	EXPECT_EQ_INT(a->kv.n_blocks, 3); /* positions 0..8: it decodes next, so 7 + 2 */
	/* block 1 holds position 7, not computed yet: not in the cache (a 9-token prompt with the
	 * same 8 first tokens hits one block, not two) */
	struct sched_req probe;
	int32_t toks[9], hit[8];
	struct err e;
	for (int i = 0; i < 9; i++)
		toks[i] = 100 + i;
	EXPECT(sched_req_init(&probe, 99, toks, 9, 16, 4, &e) == 0);
	EXPECT_EQ_INT(blocks_find_cached(f.pool, &probe.kv, probe.tokens, 9, hit), 1);
	fix_step(&f); /* a's last prompt token */
	EXPECT_EQ_INT(a->n_tokens, 9);
	EXPECT_EQ_INT(a->kv.n_blocks, 3);
	EXPECT_EQ_INT(blocks_find_cached(f.pool, &probe.kv, probe.tokens, 9, hit), 2);
	for (int k = 0; k < 8; k++)
		fix_step(&f);
	EXPECT(a->status == SREQ_FINISHED);
	sched_req_fini(&probe);
	fix_fini(&f);
}

/* A resumed (preempted) request hits the prefix cache over prompt + outputs. */
static void test_resume_hits_cache(void)
{
	struct fix f;
	fix_init(&f, 7, 4, 8, 64, 512, true);
	struct sched_req *a = fix_add(&f, 8, 100, 12);
	struct sched_req *b = fix_add(&f, 8, 200, 12);
	int guard = 0;
	while (b->n_preemptions == 0 && guard++ < 20)
		fix_step(&f);
	EXPECT_EQ_INT(b->n_preemptions, 1);
	sched_finish(f.s, a, ENGINE_FINISH_ABORT); /* make room */
	fix_step(&f);
	EXPECT_EQ_INT(b->status, SREQ_RUNNING);
	EXPECT(b->step_start >= 8);    /* resumed from cached blocks, not from 0 */
	EXPECT_EQ_INT(b->n_cached, 0); /* recorded once, at first admission */
	sched_finish(f.s, b, ENGINE_FINISH_ABORT);
	fix_fini(&f);
}

static void test_stop_conditions(void)
{
	struct fix f;
	fix_init(&f, 64, 4, 8, 64, 512, true);
	/* EOS = 7 (the fake model always samples 7) */
	struct sched_req *a = fix_add(&f, 3, 100, 10);
	a->eos = 7;
	/* stop token id 7 */
	struct sched_req *b = fix_add(&f, 3, 200, 10);
	static const int32_t stop_ids[] = {5, 7};
	b->stop_ids = stop_ids;
	b->n_stop_ids = 2;
	/* min_tokens 3 suppresses EOS until 3 outputs */
	struct sched_req *c = fix_add(&f, 3, 300, 10);
	c->eos = 7;
	c->min_tokens = 3;
	/* ignore_eos: exactly max_tokens */
	struct sched_req *d = fix_add(&f, 3, 400, 4);
	d->eos = 7;
	d->ignore_eos = true;
	for (int k = 0; k < 8; k++)
		fix_step(&f);
	EXPECT_EQ_INT(a->finish, ENGINE_FINISH_STOP);
	EXPECT_EQ_INT(a->stop_token, -1);
	EXPECT_EQ_INT(sched_req_n_output(a), 1);
	EXPECT_EQ_INT(b->finish, ENGINE_FINISH_STOP);
	EXPECT_EQ_INT(b->stop_token, 7);
	EXPECT_EQ_INT(c->finish, ENGINE_FINISH_STOP);
	EXPECT_EQ_INT(sched_req_n_output(c), 3);
	EXPECT_EQ_INT(d->finish, ENGINE_FINISH_LENGTH);
	EXPECT_EQ_INT(sched_req_n_output(d), 4);
	fix_fini(&f);
}

/* max_model_len caps with LENGTH and never schedules past it. */
static void test_max_model_len(void)
{
	struct fix f;
	fix_init(&f, 64, 4, 8, 64, 10, true);
	struct sched_req *a = fix_add(&f, 6, 100, 4); /* max_len = 10 = max_model_len */
	for (int k = 0; k < 10; k++)
		fix_step(&f);
	EXPECT_EQ_INT(a->finish, ENGINE_FINISH_LENGTH);
	EXPECT_EQ_INT(a->n_tokens, 10);
	fix_fini(&f);
}

/* Random workload: the invariants hold every step; everything drains and frees. */
static void test_random_workload(void)
{
	for (int pol = 0; pol < 2; pol++) {
		struct fix f;
		struct sched_config c = {
			.max_num_seqs = 3, .max_num_batched_tokens = 13, .max_model_len = 128, .priority = pol == 1};
		fix_init_cfg(&f, 20, 4, true, &c);
		unsigned seed = 12345;
		for (int i = 0; i < 8; i++) {
			seed = seed * 1103515245u + 12345u;
			int len = 1 + (int)((seed >> 16) % 30);
			struct sched_req *r = fix_add_p(&f, len, (i % 3) * 10, 1 + (int)((seed >> 8) % 12),
							(int)(seed >> 4) % 3);
			r->eos = 9999;
		}
		for (int k = 0; k < 400; k++) {
			fix_step(&f);
			EXPECT(f.o.total_tokens <= 13);
			EXPECT(sched_n_running(f.s) <= 3);
			for (int i = 0; i < f.o.n; i++)
				if (f.o.reqs[i]->status == SREQ_RUNNING)
					EXPECT(f.o.reqs[i]->kv.n_blocks * 4 >= f.o.reqs[i]->n_computed);
		}
		for (int i = 0; i < f.n_req; i++)
			EXPECT_EQ_INT(f.req[i].status, SREQ_FINISHED);
		fix_fini(&f);
	}
}

/* --scheduling-policy priority: the queue is ordered by (priority, arrival); fcfs keeps
 * arrival order whatever the priorities */
static void test_priority_queue_order(void)
{
	for (int pol = 0; pol < 2; pol++) {
		struct fix f;
		struct sched_config c = {
			.max_num_seqs = 1, .max_num_batched_tokens = 64, .max_model_len = 512, .priority = pol == 1};
		fix_init_cfg(&f, 64, 4, false, &c);
		struct sched_req *a = fix_add_p(&f, 4, 100, 2, 5), *b = fix_add_p(&f, 4, 200, 2, 0),
				 *cc = fix_add_p(&f, 4, 300, 2, 5), *d = fix_add_p(&f, 4, 400, 2, -1);
		struct sched_req *want[2][4] = {{a, b, cc, d}, {d, b, a, cc}};
		struct sched_req *q = sched_waiting_head(f.s);
		for (int k = 0; k < 4; k++, q = q ? q->next : NULL)
			EXPECTF(q == want[pol][k], "policy %d: place %d", pol, k);
		/* one running at a time: they finish in that order */
		for (int k = 0; k < 4; k++) {
			for (int t = 0; t < 8 && want[pol][k]->status != SREQ_FINISHED; t++)
				fix_step(&f);
			EXPECTF(want[pol][k]->status == SREQ_FINISHED, "policy %d: #%d", pol, k);
			for (int j = k + 1; j < 4; j++)
				EXPECT(want[pol][j]->status != SREQ_FINISHED);
		}
		fix_fini(&f);
	}
}

/* Out of blocks under the priority policy: the running request with the largest (priority,
 * arrival) goes, even one admitted first and already scheduled this step (its tokens go back
 * to the budget); it returns to the queue by its own priority */
static void test_priority_preemption(void)
{
	struct fix f;
	struct sched_config c = {
		.max_num_seqs = 8, .max_num_batched_tokens = 64, .max_model_len = 512, .priority = true};
	fix_init_cfg(&f, 7, 4, false, &c);                 /* 6 usable blocks of 4 */
	struct sched_req *a = fix_add_p(&f, 8, 100, 8, 1); /* 2 blocks, the less urgent */
	fix_step(&f);
	struct sched_req *b = fix_add_p(&f, 12, 200, 8, 0); /* 3 blocks */
	fix_step(&f);                                       /* a takes its 3rd block for token 9, b its 3 */
	EXPECT_EQ_INT(f.o.n, 2);
	EXPECT_EQ_INT(blocks_num_free(f.pool), 0);
	struct sched_req *w = fix_add_p(&f, 4, 300, 4, 2); /* waits: the lowest priority */
	/* a's 10th token fits its block and is scheduled first; b's 13th needs a block: a, the
	 * largest priority value, goes although it was admitted first and already scheduled */
	fix_step(&f);
	EXPECT_EQ_INT(f.o.n_preempted, 1);
	EXPECT_EQ_INT(a->status, SREQ_PREEMPTED);
	EXPECT_EQ_INT(b->status, SREQ_RUNNING);
	EXPECT_EQ_INT(f.o.n, 1);
	EXPECT(f.o.reqs[0] == b);
	EXPECT_EQ_INT(f.o.total_tokens, 1);                   /* a's token went back to the budget */
	EXPECT(sched_waiting_head(f.s) == a && a->next == w); /* priority 1 ahead of 2 */
	for (int k = 0;
	     k < 60 && (a->status != SREQ_FINISHED || b->status != SREQ_FINISHED || w->status != SREQ_FINISHED); k++)
		fix_step(&f);
	EXPECT(a->status == SREQ_FINISHED && b->status == SREQ_FINISHED && w->status == SREQ_FINISHED);
	EXPECT_EQ_INT(sched_req_n_output(a), 8);
	fix_fini(&f);
}

/* The runner's flat batch: decodes first, positions, slot mapping, block tables, logits
 * rows only for requests that completed their known tokens; the packed plan round-trips. */
static void test_runner_plan(void)
{
	struct fix f;
	fix_init(&f, 64, 4, 8, 10, 512, false);
	struct sched_req *a = fix_add(&f, 3, 100, 20); /* will be decoding */
	fix_step(&f);
	struct sched_req *b = fix_add(&f, 6, 200, 20);  /* fresh prefill, fits */
	struct sched_req *c = fix_add(&f, 30, 300, 20); /* chunked: gets the rest of the budget */
	sched_step(f.s, &f.o);
	EXPECT_EQ_INT(f.o.n, 3);
	EXPECT(f.o.reqs[0] == a && f.o.reqs[1] == b && f.o.reqs[2] == c);
	EXPECT_EQ_INT(c->n_sched, 3);
	struct runner rn;
	struct runner_config rc = {.max_num_seqs = 8,
				   .max_num_batched_tokens = 10,
				   .max_model_len = 512,
				   .block_size = 4,
				   .vocab = 16,
				   .threshold = 1,
				   .require_uniform = true};
	struct err e;
	EXPECT(runner_init(&rn, &rc, NULL, NULL, NULL, NULL, &e) == 0);
	/* move a to the back so the reorder has work to do */
	struct sched_req *tmp = f.o.reqs[0];
	f.o.reqs[0] = f.o.reqs[2];
	f.o.reqs[2] = tmp;
	struct step_plan p;
	runner_build_plan(&rn, &f.o, &p);
	EXPECT_EQ_INT(p.n_seqs, 3);
	EXPECT_EQ_INT(p.n_tokens, 10);
	EXPECT_EQ_INT(p.n_decodes, 1);
	EXPECT_EQ_INT(p.n_decode_tokens, 1);
	EXPECT_EQ_INT(p.query_start[1], 1); /* the decode (a) is first */
	EXPECT_EQ_INT(p.positions[0], 3);
	EXPECT_EQ_INT(p.seq_lens[0], 4);
	EXPECT_EQ_INT(p.tokens[0], a->tokens[3]);
	/* every token: slot = block_table[pos / bs] * bs + pos % bs, rows in its sequence */
	for (int k = 0; k < p.n_seqs; k++)
		for (int t = p.query_start[k]; t < p.query_start[k + 1]; t++) {
			int pos = p.positions[t];
			EXPECT_EQ_INT(p.slots[t], (int64_t)p.block_table[k * p.max_blocks + pos / 4] * 4 + pos % 4);
			EXPECT(p.block_table[k * p.max_blocks + pos / 4] > 0);
		}
	/* logits: a (decode) and b (prompt complete); c is mid-prefill */
	EXPECT_EQ_INT(p.n_logits, 2);
	EXPECT_EQ_INT(rn.req[0].logit, -1); /* c */
	EXPECT(rn.req[1].logit >= 0 && rn.req[2].logit >= 0);
	for (int i = 0; i < p.n_logits; i++) {
		int row = p.logits_rows[i];
		EXPECT(row >= 0 && row < p.n_tokens);
	}
	/* pack / unpack */
	size_t sz = step_plan_packed_size(&p);
	void *buf = malloc(sz);
	step_plan_pack(&p, buf);
	struct step_plan q;
	EXPECT(step_plan_unpack(buf, sz, &q, &e) == 0);
	EXPECT_EQ_INT(q.n_tokens, p.n_tokens);
	EXPECT_EQ_INT(q.n_decodes, p.n_decodes);
	EXPECT(!memcmp(q.slots, p.slots, 8 * (size_t)p.n_tokens));
	EXPECT(!memcmp(q.block_table, p.block_table, 4 * (size_t)(p.n_seqs * p.max_blocks)));
	EXPECT(!memcmp(q.logits_rows, p.logits_rows, 4 * (size_t)p.n_logits));
	EXPECT(step_plan_unpack(buf, sz - 8, &q, &e) < 0);
	struct batch bt;
	step_plan_to_batch(&q, &bt);
	EXPECT_EQ_INT(bt.attn.n_decodes, 1);
	EXPECT(bt.attn.local_seq_lens == q.seq_lens);
	free(buf);
	runner_fini(&rn);
	for (int i = 0; i < f.o.n; i++)
		f.sampled[i] = sched_req_wants_token(f.o.reqs[i]) ? 7 : -1;
	sched_update(f.s, &f.o, f.sampled);
	sched_finish(f.s, a, ENGINE_FINISH_ABORT);
	sched_finish(f.s, b, ENGINE_FINISH_ABORT);
	sched_finish(f.s, c, ENGINE_FINISH_ABORT);
	fix_fini(&f);
}

/* Requests with a max_chunk (prompt logprobs) share a per-step chunk budget, admission
 * order first; others are not limited by it. */
static void test_chunk_budget(void)
{
	struct fix f;
	struct sched_config c = {
		.max_num_seqs = 8, .max_num_batched_tokens = 64, .max_model_len = 64, .chunk_budget = 6};
	fix_init_cfg(&f, 64, 4, true, &c);
	struct sched_req *a = fix_add(&f, 10, 100, 2), *b = fix_add(&f, 10, 200, 2), *d = fix_add(&f, 10, 300, 2);
	a->max_chunk = b->max_chunk = 4;
	fix_step(&f);
	EXPECT_EQ_INT(a->n_sched, 4);
	EXPECT_EQ_INT(b->n_sched, 2);
	EXPECT(f.o.n == 3 && d->n_sched == 10); /* unlimited */
	fix_step(&f);
	EXPECT_EQ_INT(a->n_sched, 4);
	EXPECT_EQ_INT(b->n_sched, 2);
	for (int k = 0; k < 20 && sched_n_running(f.s) + sched_n_waiting(f.s) > 0; k++)
		fix_step(&f);
	EXPECT(a->status == SREQ_FINISHED && b->status == SREQ_FINISHED && d->status == SREQ_FINISHED);
	fix_fini(&f);
}

TESTS(T(test_chunk_budget), T(test_runner_plan), T(test_chunked_prefill_alone), T(test_chunked_prefill_with_decode),
      T(test_max_num_seqs), T(test_preemption_order), T(test_self_preemption), T(test_prefix_hits),
      T(test_prefix_hits_drop_last), T(test_lookahead), T(test_resume_hits_cache), T(test_stop_conditions),
      T(test_max_model_len), T(test_random_workload), T(test_priority_queue_order), T(test_priority_preemption))
