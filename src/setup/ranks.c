/* Starting the ranks of a -tp/-dcp job (ranks.h). */
#include "setup/ranks.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "attn/attn.h"
#include "base/env.h"
#include "base/log.h"
#include "dist/launch.h"
#include "engine/dist_exec.h"
#include "model/model.h"
#include "ops/pool.h"

#define MOD "dist"

static int default_block_size(const struct engine_args *a, enum attn_kind kind, const struct attn_backend **be,
			      struct err *e)
{
	const char *name = a->attention_backend;
	if (!name || !*name)
		name = env_get(ENV_ATTENTION_BACKEND);
	*be = name && *name ? attn_backend_by_name(name) : attn_backend_default_kind(kind);
	if (!*be)
		return err_set(e, "MLASERVE_ATTENTION_BACKEND: unknown attention backend '%s'", name);
	return a->block_size > 0 ? a->block_size : attn_backend_default_block_size(*be);
}

int ranks_check_args(const struct engine_args *a, struct err *e)
{
	if (a->tp_size <= 1 && a->dcp_size <= 1)
		return 0;
	struct model_probe p;
	const struct attn_backend *be;
	if (!a->model_dir)
		return err_set(e, "no model directory");
	/* the family's refusals (one rank only), the layout's checks, then the cut the family makes
	 * (its configure at this tp_size): all before any rank starts */
	if (model_probe_config(a->model_dir, 1, &p, e) < 0 || engine_args_check_family(a, &p, e))
		return -1;
	int bs = default_block_size(a, p.attn_kind, &be, e);
	if (bs < 0)
		return -1;
	if (comm_config_check(a->tp_size, a->dcp_size, p.cfg.num_attention_heads, a->dcp_interleave, bs, e))
		return err_prefix(e, "%s", a->model_dir);
	return a->tp_size > 1 ? model_probe_config(a->model_dir, a->tp_size, &p, e) : 0;
}

int ranks_threads(int threads_flag, const struct comm *c)
{
	if (threads_flag > 0)
		return threads_flag;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int per = (int)(cpus > 0 ? cpus : 1) / (c && c->local_size > 0 ? c->local_size : 1);
	return per > 0 ? per : 1;
}

int ranks_worker_run(const struct engine_args *a, struct comm *c, struct err *e)
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
	if (engine_args_open_model(a, &pool, &model, &kvd, e) < 0 || dist_exec_serve(&d, model, &kv, e) < 0) {
		/* rank 0 and the others may wait for this rank inside a collective: end the job */
		LOG_E(MOD, "rank %d: %s; ending every rank", c->world_rank, e->msg);
		comm_abort(c, 1);
	} else {
		rc = 0;
	}
	dist_exec_fini(&d);
	if (kv.data)
		kv_cache_fini(&kv);
	model_free(model);
	pool_free(pool);
	return rc;
}

int ranks_start(int argc, char **argv, struct engine_args *a, struct comm *c, struct err *e)
{
	if (ranks_check_args(a, e) || dist_maybe_relaunch(argc, argv, a->tp_size, e) ||
	    comm_init(c, a->tp_size, a->dcp_size, e))
		return -1;
	log_set_rank(c->world_rank);
	a->comm = c;
	a->tp_rank = c->tp_rank;
	a->threads = ranks_threads(a->threads, c);
	return 0;
}
