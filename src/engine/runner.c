/* Model runner (runner.h): scheduler output -> flat batch -> forward -> logits rows. */
#include "engine/runner.h"

#include <stdlib.h>
#include <string.h>

#include "attn/kv_cache.h"
#include "engine/reorder.h"
#include "model/model.h"

#define ALLOC(a, type, count) ((type *)arena_alloc((a), sizeof(type) * (size_t)(count)))

static int max_blocks_per_seq(const struct runner_config *c) { return c->max_model_len / c->block_size + 2; }

int runner_init(struct runner *rn, const struct runner_config *c, struct model *model,
		const struct attn_backend *backend, struct kv_cache *kv, const struct engine_forward_hook *hook,
		struct err *e)
{
	memset(rn, 0, sizeof *rn);
	rn->c = *c;
	rn->model = model;
	rn->backend = backend;
	rn->kv = kv;
	if (hook)
		rn->hook = *hook;
	size_t T = (size_t)c->max_num_batched_tokens, S = (size_t)c->max_num_seqs;
	size_t MB = (size_t)max_blocks_per_seq(c);
	/* tokens, positions, slots, query_start, seq_lens, block table, logits rows, n_sched,
	 * n_computed; + 64 bytes of alignment slack per array */
	size_t R = S * (size_t)(1 + (c->max_spec > 0 ? c->max_spec : 0)); /* logits rows */
	size_t bytes = 4 * T * 2 + 8 * T + 4 * (S + 1) + 4 * S + 4 * S * MB + 4 * S * 2 + 4 * R + 4 * T +
		       64 * 12; /* 4 * T: prompt-logprob rows */
	/* an MTP plan (runner_execute_mtp) instead: 3 x [S] more, [T] hidden rows */
	bytes += 4 * 3 * (S + 1) + 4 * T + 64 * 4;
	if (arena_init(&rn->arena, bytes) < 0)
		return err_set(e, "runner: out of memory for a %zu-byte step arena", bytes);
	rn->logits = malloc(sizeof *rn->logits * S * (size_t)c->vocab);
	rn->logits_cap = (int)S;
	rn->perm = malloc(sizeof *rn->perm * S);
	rn->req = malloc(sizeof *rn->req * S);
	if (!rn->logits || !rn->perm || !rn->req) {
		runner_fini(rn);
		return err_set(e, "runner: out of memory for logits [%zu, %d]", S, c->vocab);
	}
	return 0;
}

void runner_fini(struct runner *rn)
{
	arena_fini(&rn->arena);
	free(rn->logits);
	free(rn->perm);
	free(rn->req);
	memset(rn, 0, sizeof *rn);
}

/* ---- pieces of both plans (the model's step and the MTP module's) ---- */

/* perm[k]: the sequence that goes k-th (decodes first, docs/mla-dcp.md §1.4), or the given order */
static void plan_order(const struct runner *rn, int n, const int32_t *n_q, const int32_t *n_comp, int32_t *perm)
{
	if (rn->c.threshold > 0)
		reorder_batch_to_split_decodes_and_prefills(n, n_q, n_comp, rn->c.threshold, perm);
	else
		for (int i = 0; i < n; i++)
			perm[i] = i;
}

/* a sequence's block-table row of max_blocks: its blocks, then the null block */
static void plan_bt_row(int32_t *row, const struct kv_seq *kv, int max_blocks)
{
	memcpy(row, kv->blocks, sizeof *row * (size_t)kv->n_blocks);
	for (int j = kv->n_blocks; j < max_blocks; j++)
		row[j] = 0;
}

/* the decode / prefill split of the ordered plan (docs/mla-dcp.md §1.5) */
static void plan_split(const struct runner *rn, struct step_plan *p)
{
	if (rn->c.threshold <= 0)
		return;
	struct batch_split s = split_decodes_and_prefills(p->query_start, p->n_seqs, rn->c.threshold,
							  rn->c.require_uniform);
	p->n_decodes = s.n_decodes;
	p->n_decode_tokens = s.n_decode_tokens;
}

/* runs plan p into rn->logits: through the distributed hook, or the local model */
static int plan_run(struct runner *rn, const struct step_plan *p, struct err *e)
{
	if (rn->hook.forward)
		return rn->hook.forward(rn->hook.ctx, p, rn->logits, e);
	struct batch b;
	step_plan_to_batch(p, &b);
	return p->flags & STEP_PLAN_MTP ? model_mtp_forward(rn->model, &b, rn->kv, rn->backend, rn->logits, e)
					: model_forward(rn->model, &b, rn->kv, rn->backend, rn->logits, e);
}

void runner_build_plan(struct runner *rn, const struct sched_output *o, struct step_plan *p)
{
	struct arena *a = &rn->arena;
	arena_reset(a);
	int n = o->n, bs = rn->c.block_size;
	CHECK(n <= rn->c.max_num_seqs && o->total_tokens <= rn->c.max_num_batched_tokens);
	int32_t *n_sched = ALLOC(a, int32_t, n + 1), *n_comp = ALLOC(a, int32_t, n + 1);
	int max_blocks = 1;
	for (int i = 0; i < n; i++) {
		n_sched[i] = o->reqs[i]->n_sched;
		n_comp[i] = o->reqs[i]->step_start;
		if (o->reqs[i]->kv.n_blocks > max_blocks)
			max_blocks = o->reqs[i]->kv.n_blocks;
	}
	int32_t *perm = rn->perm;
	plan_order(rn, n, n_sched, n_comp, perm);

	int T = o->total_tokens;
	int32_t *tokens = ALLOC(a, int32_t, T + 1), *pos = ALLOC(a, int32_t, T + 1);
	int64_t *slots = ALLOC(a, int64_t, T + 1);
	int32_t *qs = ALLOC(a, int32_t, n + 1), *seq_lens = ALLOC(a, int32_t, n + 1);
	int32_t *bt = ALLOC(a, int32_t, (size_t)n * max_blocks + 1);
	int n_rows = 0;
	for (int i = 0; i < n; i++) {
		const struct sched_req *r = o->reqs[i];
		n_rows += sched_req_n_rows(r);
		/* prompt logprobs: positions p < n_prompt - 1 of this chunk */
		int hi = r->step_start + r->n_sched < r->n_prompt - 1 ? r->step_start + r->n_sched : r->n_prompt - 1;
		rn->req[i].n_prow = r->prompt_rows && hi > r->step_start ? hi - r->step_start : 0;
		rn->req[i].prow_pos = r->step_start;
		n_rows += rn->req[i].n_prow;
	}
	int32_t *rows = ALLOC(a, int32_t, n_rows + 1);
	int t = 0, n_logits = 0;
	qs[0] = 0;
	for (int k = 0; k < n; k++) {
		int i = perm[k];
		const struct sched_req *r = o->reqs[i];
		int32_t *bt_row = bt + (size_t)k * max_blocks;
		plan_bt_row(bt_row, &r->kv, max_blocks);
		for (int q = 0; q < r->n_sched; q++, t++) {
			int p_ = r->step_start + q;
			CHECK(p_ / bs < r->kv.n_blocks);
			tokens[t] = r->tokens[p_];
			pos[t] = p_;
			slots[t] = kv_cache_slot(bt_row, bs, p_);
		}
		qs[k + 1] = t;
		rn->req[i].row = qs[k];
		seq_lens[k] = r->step_start + r->n_sched;
		rn->req[i].prow = rn->req[i].n_prow > 0 ? n_logits : -1;
		for (int j = 0; j < rn->req[i].n_prow; j++)
			rows[n_logits++] = qs[k] + j;
		int nr = sched_req_n_rows(r);
		if (nr > 0) {
			rn->req[i].logit = n_logits;
			for (int j = 0; j < nr; j++)
				rows[n_logits++] = t - nr + j;
		} else {
			rn->req[i].logit = -1;
		}
	}
	CHECK(t == T);
	memset(p, 0, sizeof *p);
	p->n_tokens = T;
	p->n_seqs = n;
	p->max_blocks = max_blocks;
	p->block_size = bs;
	p->n_logits = n_logits;
	p->tokens = tokens;
	p->positions = pos;
	p->query_start = qs;
	p->seq_lens = seq_lens;
	p->block_table = bt;
	p->slots = slots;
	p->logits_rows = rows;
	plan_split(rn, p);
}

int runner_execute(struct runner *rn, const struct sched_output *o, const float **rows, struct err *e)
{
	struct step_plan p;
	runner_build_plan(rn, o, &p);
	if (p.n_logits > rn->logits_cap) {
		float *l = realloc(rn->logits, sizeof *l * (size_t)p.n_logits * (size_t)rn->c.vocab);
		if (!l)
			return err_set(e, "runner: out of memory for logits [%d, %d]", p.n_logits, rn->c.vocab);
		rn->logits = l;
		rn->logits_cap = p.n_logits;
	}
	if (plan_run(rn, &p, e) < 0)
		return -1;
	for (int i = 0; i < o->n; i++)
		rows[i] = rn->req[i].logit < 0 ? NULL : rn->logits + (size_t)rn->req[i].logit * (size_t)rn->c.vocab;
	return 0;
}

const float *runner_prompt_rows(const struct runner *rn, int i, int *pos0, int *n)
{
	*n = rn->req[i].n_prow;
	*pos0 = rn->req[i].prow_pos;
	return *n > 0 ? rn->logits + (size_t)rn->req[i].prow * (size_t)rn->c.vocab : NULL;
}

/* runs an MTP plan; logits row j belongs to o->reqs[req_of_row[j]] (rows[], req[].mtp_row) */
static int mtp_plan_run(struct runner *rn, struct step_plan *p, const int32_t *req_of_row, const float **rows,
			struct err *e)
{
	plan_split(rn, p);
	CHECK(p->n_logits <= rn->logits_cap);
	if (plan_run(rn, p, e) < 0)
		return -1;
	for (int j = 0; j < p->n_logits; j++) {
		rows[req_of_row[j]] = rn->logits + (size_t)j * (size_t)rn->c.vocab;
		rn->req[req_of_row[j]].mtp_row = j;
	}
	return 0;
}

int runner_execute_mtp(struct runner *rn, const struct sched_output *o, const struct runner_mtp *m, const float **rows,
		       struct err *e)
{
	struct arena *a = &rn->arena;
	arena_reset(a);
	int n = 0, T = 0, bs = rn->c.block_size, max_blocks = 1;
	int32_t *idx = ALLOC(a, int32_t, o->n + 1); /* plan sequence -> o->reqs index, before reordering */
	int32_t *n_q = ALLOC(a, int32_t, o->n + 1), *n_comp = ALLOC(a, int32_t, o->n + 1);
	for (int i = 0; i < o->n; i++) {
		rows[i] = NULL;
		rn->req[i].mtp_row = -1;
		if (m[i].n <= 0)
			continue;
		const struct sched_req *r = o->reqs[i];
		CHECK(m[i].n <= r->n_sched && r->step_start + m[i].n < r->n_tokens);
		idx[n] = i;
		n_q[n] = m[i].n;
		n_comp[n++] = r->step_start;
		T += m[i].n;
		if (r->kv.n_blocks > max_blocks)
			max_blocks = r->kv.n_blocks;
	}
	if (n == 0)
		return 0;
	int32_t *perm = rn->perm;
	plan_order(rn, n, n_q, n_comp, perm);
	int32_t *tokens = ALLOC(a, int32_t, T + 1), *pos = ALLOC(a, int32_t, T + 1);
	int32_t *hid = ALLOC(a, int32_t, T + 1);
	int64_t *slots = ALLOC(a, int64_t, T + 1);
	int32_t *qs = ALLOC(a, int32_t, n + 1), *seq_lens = ALLOC(a, int32_t, n + 1);
	int32_t *bt = ALLOC(a, int32_t, (size_t)n * max_blocks + 1);
	int32_t *lrows = ALLOC(a, int32_t, n + 1), *lreq = ALLOC(a, int32_t, n + 1);
	int t = 0, n_logits = 0;
	qs[0] = 0;
	for (int k = 0; k < n; k++) {
		int i = idx[perm[k]];
		const struct sched_req *r = o->reqs[i];
		int32_t *bt_row = bt + (size_t)k * max_blocks;
		plan_bt_row(bt_row, &r->kv, max_blocks);
		for (int q = 0; q < m[i].n; q++, t++) {
			int p_ = r->step_start + q;
			tokens[t] = r->tokens[p_ + 1]; /* the token that follows position p_ */
			pos[t] = p_;
			hid[t] = rn->req[i].row + q;
			slots[t] = kv_cache_slot(bt_row, bs, p_);
		}
		qs[k + 1] = t;
		seq_lens[k] = r->step_start + m[i].n;
		if (m[i].want) {
			lreq[n_logits] = i;
			lrows[n_logits++] = t - 1;
		}
	}
	struct step_plan p = {.n_tokens = T,
			      .n_seqs = n,
			      .max_blocks = max_blocks,
			      .block_size = bs,
			      .flags = STEP_PLAN_MTP,
			      .n_logits = n_logits,
			      .tokens = tokens,
			      .positions = pos,
			      .query_start = qs,
			      .seq_lens = seq_lens,
			      .block_table = bt,
			      .slots = slots,
			      .logits_rows = lrows,
			      .hidden_rows = hid};
	return mtp_plan_run(rn, &p, lreq, rows, e);
}

int runner_execute_mtp_chain(struct runner *rn, const struct sched_output *o, const struct runner_mtp *m, int depth,
			     const float **rows, struct err *e)
{
	struct arena *a = &rn->arena;
	arena_reset(a);
	int n = 0, bs = rn->c.block_size, max_blocks = 1;
	int32_t *idx = ALLOC(a, int32_t, o->n + 1); /* plan sequence -> o->reqs index */
	int32_t *hid = ALLOC(a, int32_t, o->n + 1); /* its row in the last MTP pass */
	for (int i = 0; i < o->n; i++) {
		rows[i] = NULL;
		int prev = rn->req[i].mtp_row;
		rn->req[i].mtp_row = -1;
		if (m[i].tok < 0)
			continue;
		const struct sched_req *r = o->reqs[i];
		int pos = r->n_tokens - 2 + depth;
		CHECK(prev >= 0 && depth >= 1 && pos < r->kv.n_blocks * bs);
		hid[n] = prev;
		idx[n++] = i;
		if (r->kv.n_blocks > max_blocks)
			max_blocks = r->kv.n_blocks;
	}
	if (n == 0)
		return 0;
	/* one token each: every sequence is a decode, so the order is the requests' */
	int32_t *tokens = ALLOC(a, int32_t, n + 1), *pos = ALLOC(a, int32_t, n + 1);
	int64_t *slots = ALLOC(a, int64_t, n + 1);
	int32_t *qs = ALLOC(a, int32_t, n + 1), *seq_lens = ALLOC(a, int32_t, n + 1);
	int32_t *bt = ALLOC(a, int32_t, (size_t)n * max_blocks + 1);
	int32_t *lrows = ALLOC(a, int32_t, n + 1);
	qs[0] = 0;
	for (int k = 0; k < n; k++) {
		const struct sched_req *r = o->reqs[idx[k]];
		int32_t *bt_row = bt + (size_t)k * max_blocks;
		plan_bt_row(bt_row, &r->kv, max_blocks);
		tokens[k] = m[idx[k]].tok;
		pos[k] = r->n_tokens - 2 + depth;
		slots[k] = kv_cache_slot(bt_row, bs, pos[k]);
		qs[k + 1] = k + 1;
		seq_lens[k] = pos[k] + 1;
		lrows[k] = k;
	}
	struct step_plan p = {.n_tokens = n,
			      .n_seqs = n,
			      .max_blocks = max_blocks,
			      .block_size = bs,
			      .flags = STEP_PLAN_MTP | STEP_PLAN_MTP_CHAIN,
			      .n_logits = n,
			      .tokens = tokens,
			      .positions = pos,
			      .query_start = qs,
			      .seq_lens = seq_lens,
			      .block_table = bt,
			      .slots = slots,
			      .logits_rows = lrows,
			      .hidden_rows = hid};
	return mtp_plan_run(rn, &p, idx, rows, e);
}
