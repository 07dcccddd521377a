/* Distributed step execution (dist_exec.h). The seam is the pointer-free step plan
 * (engine/plan.h, step_plan_pack / unpack): with one rank the runner calls model_forward
 * directly; with several, this hook broadcasts the packed plan (dist/comm.c) and every rank
 * rebuilds the same struct batch from it, so no rank ever needs a request. */
#include "engine/dist_exec.h"

#include <stdlib.h>
#include <string.h>

#include "attn/dcp.h"
#include "base/log.h"
#include "model/model.h"
#include "ops/pool.h"

#define MOD "dist"
#define SETUP_MAGIC 0x50555453 /* "STUP" */

struct dist_setup {
	int32_t magic, n_blocks, block_size, kv_dtype, backend, pad;
};

void dist_exec_init(struct dist_exec *d, struct comm *c, struct model *m, struct kv_cache *kv,
		    const struct attn_backend *backend, int dcp_interleave)
{
	memset(d, 0, sizeof *d);
	d->comm = c;
	d->model = m;
	d->kv = kv;
	d->backend = backend;
	d->dcp_interleave = dcp_interleave > 0 ? dcp_interleave : 1;
}

void dist_exec_fini(struct dist_exec *d)
{
	comm_msg_free(&d->msg);
	free(d->slots);
	free(d->local_lens);
	memset(d, 0, sizeof *d);
}

static int grow(struct dist_exec *d, int n_tokens, int n_seqs, struct err *e)
{
	if (n_tokens > d->cap_tokens) {
		int64_t *s = realloc(d->slots, sizeof *s * (size_t)n_tokens);
		if (!s)
			return err_set(e, "dist: out of memory for %d slots", n_tokens);
		d->slots = s;
		d->cap_tokens = n_tokens;
	}
	if (n_seqs > d->cap_seqs) {
		int32_t *l = realloc(d->local_lens, sizeof *l * (size_t)n_seqs);
		if (!l)
			return err_set(e, "dist: out of memory for %d sequence lengths", n_seqs);
		d->local_lens = l;
		d->cap_seqs = n_seqs;
	}
	return 0;
}

int dist_exec_forward(struct dist_exec *d, const struct step_plan *p, float *logits, struct err *e)
{
	struct batch b;
	step_plan_to_batch(p, &b);
	int W = d->comm ? d->comm->dcp_size : 1;
	if (W > 1) {
		int bs = d->kv->block_size, r = d->comm->dcp_rank, I = d->dcp_interleave;
		if (p->block_size != bs * W)
			return err_set(e, "dist: plan block size %d is not the kv block size %d x dcp %d",
				       p->block_size, bs, W);
		if (grow(d, p->n_tokens, p->n_seqs, e))
			return -1;
		for (int k = 0; k < p->n_seqs; k++) {
			const int32_t *bt = p->block_table + (size_t)k * (size_t)p->max_blocks;
			for (int t = p->query_start[k]; t < p->query_start[k + 1]; t++) {
				int64_t pos = p->positions[t];
				if (pos / p->block_size >= p->max_blocks)
					return err_set(e, "dist: position %lld of sequence %d is past its %d blocks",
						       (long long)pos, k, p->max_blocks);
				d->slots[t] = dcp_slot(bt, bs, W, r, I, pos);
			}
		}
		dcp_local_seq_lens(p->seq_lens, p->n_seqs, W, r, I, d->local_lens);
		b.attn.slots = d->slots;
		b.attn.dcp_size = W;
		b.attn.dcp_rank = r;
		b.attn.dcp_interleave = I;
		b.attn.local_seq_lens = d->local_lens;
	}
	if (p->flags & STEP_PLAN_MTP)
		return model_mtp_forward(d->model, &b, d->kv, d->backend, logits, e);
	return model_forward(d->model, &b, d->kv, d->backend, logits, e);
}

int dist_exec_hook(void *ctx, const struct step_plan *p, float *logits, struct err *e)
{
	struct dist_exec *d = ctx;
	size_t n = step_plan_packed_size(p);
	comm_msg_reset(&d->msg);
	if (comm_msg_reserve(&d->msg, n, e))
		goto fatal;
	step_plan_pack(p, d->msg.data);
	d->msg.len = n;
	if (comm_plan_send(d->comm, d->msg.data, n, e) || dist_exec_forward(d, p, logits, e))
		goto fatal;
	return 0;
fatal:
	/* the other ranks may be inside a collective of this step: end the job */
	LOG_E(MOD, "rank 0: step failed: %s; ending every rank", e->msg);
	comm_abort(d->comm, 1);
	return -1;
}

int dist_exec_send_setup(struct dist_exec *d, const struct kv_cache *kv, const struct attn_backend *backend,
			 struct err *e)
{
	struct dist_setup s = {SETUP_MAGIC, kv->n_blocks, kv->block_size, (int32_t)kv->dtype, -1, 0};
	for (int i = 0; i < attn_backend_count(); i++)
		if (attn_backend_at(i) == backend)
			s.backend = i;
	return comm_plan_send(d->comm, &s, sizeof s, e);
}

int dist_exec_serve(struct dist_exec *d, struct model *model, struct kv_cache *kv, struct err *e)
{
	int r = comm_plan_recv(d->comm, &d->msg, e);
	if (r <= 0) /* 0: rank 0 stopped before the engine started */
		return r;
	struct dist_setup s;
	if (comm_msg_get(&d->msg, &s, sizeof s, e))
		return -1;
	if (s.magic != SETUP_MAGIC || s.n_blocks < 1 || s.block_size < 1 || !attn_backend_at(s.backend) ||
	    (s.kv_dtype != DT_F32 && s.kv_dtype != DT_BF16 && s.kv_dtype != DT_F8_E4M3))
		return err_set(e, "dist: bad setup message (magic 0x%x, %d blocks of %d)", (unsigned)s.magic,
			       s.n_blocks, s.block_size);
	if (model_kv_cache_init(model, kv, s.n_blocks, s.block_size, (enum dtype)s.kv_dtype, e) < 0)
		return -1;
	d->model = model;
	d->kv = kv;
	d->backend = attn_backend_at(s.backend);
	for (;;) {
		r = comm_plan_recv(d->comm, &d->msg, e);
		if (r <= 0)
			return r;
		struct step_plan p;
		/* the logits are gathered to TP rank 0 only: a worker needs no buffer */
		if (step_plan_unpack(d->msg.data, d->msg.len, &p, e) || dist_exec_forward(d, &p, NULL, e))
			return -1;
	}
}
