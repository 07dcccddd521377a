/* Distributed step execution (dist_exec.h). */
#include "engine/dist_exec.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/dcp.h"
#include "base/log.h"
#include "dist/launch.h"
#include "io/config.h"
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

int dist_exec_forward(struct dist_exec *d, const struct step_plan *p, float *logits,
		      struct err *e)
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

int dist_exec_send_setup(struct dist_exec *d, const struct kv_cache *kv,
			 const struct attn_backend *backend, struct err *e)
{
	struct dist_setup s = {SETUP_MAGIC, kv->n_blocks, kv->block_size, (int32_t)kv->dtype, -1, 0};
	for (int i = 0; i < attn_backend_count(); i++)
		if (attn_backend_at(i) == backend)
			s.backend = i;
	return comm_plan_send(d->comm, &s, sizeof s, e);
}

static int default_block_size(const struct engine_args *a, bool sparse, const struct attn_backend **be,
			      struct err *e)
{
	const char *name = a->attention_backend;
	if (!name || !*name)
		name = getenv("MLASERVE_ATTENTION_BACKEND");
	*be = name && *name ? attn_backend_by_name(name) : attn_backend_default(sparse);
	if (!*be)
		return err_set(e, "MLASERVE_ATTENTION_BACKEND: unknown attention backend '%s'", name);
	int mult = (*be)->block_size_multiple > 0 ? (*be)->block_size_multiple : 1;
	return a->block_size > 0 ? a->block_size : ((16 + mult - 1) / mult) * mult;
}

int dist_exec_check_args(const struct engine_args *a, struct err *e)
{
	if (a->tp_size <= 1 && a->dcp_size <= 1)
		return 0;
	struct model_config cfg;
	const struct attn_backend *be;
	if (!a->model_dir)
		return err_set(e, "no model directory");
	if (config_load(a->model_dir, &cfg, e) < 0)
		return -1;
	int bs = default_block_size(a, config_is_sparse(&cfg), &be, e);
	if (bs < 0)
		return -1;
	if (comm_config_check(a->tp_size, a->dcp_size, cfg.num_attention_heads, a->dcp_interleave,
			      bs, e))
		return err_prefix(e, "%s", a->model_dir);
	return 0;
}

int dist_exec_threads(int threads_flag, const struct comm *c)
{
	if (threads_flag > 0)
		return threads_flag;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int per = (int)(cpus > 0 ? cpus : 1) / (c && c->local_size > 0 ? c->local_size : 1);
	return per > 0 ? per : 1;
}

int dist_exec_worker_run(const struct engine_args *a, struct comm *c, struct err *e)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	struct pool *pool = NULL;
	struct model *model = NULL;
	struct kv_cache kv = {0};
	struct dist_exec d;
	dist_exec_init(&d, c, NULL, &kv, NULL, a->dcp_interleave);
	int rc = -1;
	enum dtype kvd;
	if (engine_args_open_model(a, &pool, &model, &kvd, e) < 0)
		goto fatal;
	int r = comm_plan_recv(c, &d.msg, e);
	if (r < 0)
		goto fatal;
	if (r == 0) { /* rank 0 stopped before the engine started */
		rc = 0;
		goto out;
	}
	struct dist_setup s;
	if (comm_msg_get(&d.msg, &s, sizeof s, e))
		goto fatal;
	if (s.magic != SETUP_MAGIC || s.n_blocks < 1 || s.block_size < 1 ||
	    !attn_backend_at(s.backend) || (s.kv_dtype != DT_F32 && s.kv_dtype != DT_BF16)) {
		err_set(e, "dist: bad setup message (magic 0x%x, %d blocks of %d)", (unsigned)s.magic,
			s.n_blocks, s.block_size);
		goto fatal;
	}
	if (model_kv_cache_init(model, &kv, s.n_blocks, s.block_size, (enum dtype)s.kv_dtype, e) < 0)
		goto fatal;
	d.model = model;
	d.backend = attn_backend_at(s.backend);
	for (;;) {
		r = comm_plan_recv(c, &d.msg, e);
		if (r < 0)
			goto fatal;
		if (r == 0)
			break;
		struct step_plan p;
		/* the logits are gathered to TP rank 0 only: a worker needs no buffer */
		if (step_plan_unpack(d.msg.data, d.msg.len, &p, e) || dist_exec_forward(&d, &p, NULL, e))
			goto fatal;
	}
	rc = 0;
	goto out;
fatal:
	/* rank 0 and the others may wait for this rank inside a collective: end the job */
	LOG_E(MOD, "rank %d: %s; ending every rank", c->world_rank, e->msg);
	comm_abort(c, 1);
out:
	dist_exec_fini(&d);
	if (kv.data)
		kv_cache_fini(&kv);
	model_free(model);
	pool_free(pool);
	return rc;
}

int dist_exec_start(int argc, char **argv, struct engine_args *a, struct comm *c, struct err *e)
{
	if (dist_exec_check_args(a, e) || dist_maybe_relaunch(argc, argv, a->tp_size, e) ||
	    comm_init(c, a->tp_size, a->dcp_size, e))
		return -1;
	log_set_rank(c->world_rank);
	a->comm = c;
	a->tp_rank = c->tp_rank;
	a->threads = dist_exec_threads(a->threads, c);
	return 0;
}
