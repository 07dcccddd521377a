/* model_load: the load sequence every family goes through. The options and this rank's place
 * in a TP/DCP run, the family of the checkpoint (family.h) and its config, the checkpoint's
 * files (or dummy weights), the family's weights, packing them for the CPU's kernels, the
 * step's scratch arena, and the report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bigmem.h"
#include "base/log.h"
#include "model/family.h"
#include "model/model.h"
#include "model/weights.h"
#include "model/weights_ct.h"
#include "ops/cpu.h"
#include "ops/pool.h"
#include "ops/wformat.h"

/* the options' defaults and this rank's place in a TP run */
static int set_options(struct model *m, const struct model_options *opt, struct err *e)
{
	m->opt = *opt;
	if (m->opt.max_batch_tokens <= 0)
		m->opt.max_batch_tokens = 2048;
	if (m->opt.max_seqs <= 0)
		m->opt.max_seqs = 256;
	if (m->opt.max_model_len <= 0)
		m->opt.max_model_len = 4096;
	m->tp_size = m->opt.comm ? m->opt.comm->tp_size : m->opt.tp_size > 1 ? m->opt.tp_size : 1;
	m->tp_rank = m->opt.comm ? m->opt.comm->tp_rank : m->tp_size > 1 ? m->opt.tp_rank : 0;
	if (m->tp_size > 1 && (!m->opt.comm || m->tp_rank < 0 || m->tp_rank >= m->tp_size))
		return err_set(e, "model: tensor parallelism (tp_size %d) needs a communicator", m->tp_size);
	return 0;
}

/* what the config decides for every family: the vocabulary's split over the TP ranks (lm_head
 * rows, logit columns), the activation dtype, the prefill workspace */
static int set_shared(struct model *m, struct err *e)
{
	const struct model_config *c = &m->cfg;
	m->vocab_cols = calloc((size_t)m->tp_size, sizeof *m->vocab_cols);
	if (!m->vocab_cols)
		return err_set(e, "model: out of memory");
	for (int k = 0; k < m->tp_size; k++)
		m->vocab_cols[k] = (int)((int64_t)c->vocab_size * (k + 1) / m->tp_size -
					 (int64_t)c->vocab_size * k / m->tp_size);
	m->vocab0 = (int)((int64_t)c->vocab_size * m->tp_rank / m->tp_size);
	if (m->opt.act_dtype_auto)
		m->opt.act_dtype = !strcmp(c->torch_dtype, "float32") ? DT_F32 : DT_BF16;
	if (m->opt.act_dtype != DT_F32 && m->opt.act_dtype != DT_BF16)
		return err_set(e, "model: activation dtype %s unsupported (float32 or bfloat16)",
			       dtype_name(m->opt.act_dtype));
	m->n_threads = m->opt.pool ? pool_size(m->opt.pool) : 1;
	m->ws_rows = m->opt.max_model_len < 1024 ? m->opt.max_model_len : 1024;
	int W = m->opt.comm ? m->opt.comm->dcp_size : 1;
	if (W > 1) { /* DCP context chunks: whole multiples of W x I (docs/mla-dcp.md §4.6) */
		int wi = W * (m->opt.dcp_interleave > 0 ? m->opt.dcp_interleave : 1);
		m->ws_rows = (m->ws_rows + wi - 1) / wi * wi;
	}
	return 0;
}

/* the load report: what was quantized, the family's lines, the summary */
static void log_loaded(const struct model *m, const char *dir)
{
	bigmem_log_hugepages();
	/* the kernels this CPU gets: bf16 activations on avx512_bf16 run bf16 dot products */
	enum ops_level lvl = ops_level_best();
	const struct wformat *qf = m->opt.quant, *rf = model_quant_format(m, WQ_LINEAR),
			     *hf = model_quant_format(m, WQ_HEAD), *ef = model_quant_format(m, WQ_EMBED);
	if (m->quant_src_bytes) {
		/* quantized at load: one of the four was asked */
		const struct wformat *f = qf ? qf : rf ? rf : hf ? hf : ef;
		char what[224];
		snprintf(what, sizeof what, "%s", hf ? "--quantize-lm-head" : "");
		if (qf && rf != qf) /* the routed experts in one format, the rest in another */
			snprintf(what, sizeof what,
				 "--quantization %s (the routed experts; the other linear layers %s)%s", qf->name,
				 rf ? rf->name : "as the checkpoint has them", hf ? " --quantize-lm-head" : "");
		else if (qf || rf)
			snprintf(what, sizeof what, "--quantization %s%s", f->name,
				 hf ? " --quantize-lm-head" : " (the linear layers)");
		if (ef) /* in the lm_head's format */
			snprintf(what + strlen(what), sizeof what - strlen(what), "%s--quantize-embedding",
				 what[0] ? " " : "");
		LOG_I("model", "%s: %.2f GB of weights quantized to %s in %.1f s%s%s%s", what,
		      m->quant_src_bytes / 1e9, f->quant_desc, m->quant_s, f->kernels ? " (" : "",
		      f->kernels ? f->kernels(lvl) : "", f->kernels ? " kernels)" : "");
	} else if (qf) {
		LOG_I("model", "--quantization %s: the checkpoint's linear layers are %s already", qf->name, qf->name);
	}
	if (m->ct_bytes)
		LOG_I("model",
		      "compressed-tensors pack-quantized int4%s: %.2f GB of linear layers repacked for the int4 "
		      "kernels (%s)",
		      m->opt.load_dummy ? " (dummy weights)" : "", m->ct_bytes / 1e9,
		      wformat_by_name("int4")->kernels(lvl));
	if (m->fam->log_loaded)
		m->fam->log_loaded(m);
	LOG_I("model", "%s: %d layers, %.2f GB of weights, %s activations, scratch %.1f MB, %s kernels%s",
	      m->opt.load_dummy ? "dummy" : dir, m->cfg.num_hidden_layers, m->weight_bytes / 1e9,
	      m->opt.act_dtype == DT_F32 ? "float32" : "bfloat16", m->arena.cap / 1e6, ops_level_name(lvl),
	      lvl >= OPS_AVX512_BF16 && m->opt.act_dtype == DT_BF16 ? " (bf16 dot products)" : "");
}

int model_load(const char *dir, const struct model_options *opt, struct model **out, struct err *e)
{
	struct model *m = calloc(1, sizeof *m);
	if (!m)
		return err_set(e, "model: out of memory");
	m->fam = model_family_find(dir);
	if (set_options(m, opt, e) || m->fam->configure(m, dir, e) || set_shared(m, e))
		goto fail;
	const struct model_config *c = &m->cfg;
	if (!m->opt.load_dummy &&
	    st_open_under(dir, c->weight_prefix, c->num_hidden_layers + (m->opt.load_mtp ? 1 : 0), &m->st, e))
		goto fail;
	int rc = model_ct_begin(m, dir, e) || m->fam->load(m, dir, e);
	model_ct_end(m);
	if (rc || model_prepack_all(m, e))
		goto fail;
	size_t scratch = m->fam->scratch_bytes(m);
	if (arena_init(&m->arena, scratch)) {
		err_set(e, "model: out of memory for the %zu-byte step scratch", scratch);
		goto fail;
	}
	log_loaded(m, dir);
	*out = m;
	return 0;
fail:
	model_free(m);
	return -1;
}
