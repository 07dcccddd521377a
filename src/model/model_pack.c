/* Packing the loaded weights for the kernels of the CPU's level (ops/prepack.h), once at load:
 * which weights, in what order, and whether the memory allows it. */
#include "model/model_internal.h"

#include <stdlib.h>

#include "base/bigmem.h"
#include "base/log.h"
#include "base/mono.h"
#include "ops/cpu.h"
#include "ops/prepack.h"

static int by_address(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct owned *)a)->p, y = (uintptr_t)((const struct owned *)b)->p;
	return (x > y) - (x < y);
}

/* The buffer of values quantized at load (m->qbufs, sorted by address) holding w's bytes, if w may
 * lose them once packed: every GEMM on a packed weight reads the packed copy (under bf16
 * activations, or any for the AVX2 fp8 layout), except the W_UV row views of kv_b (forward.c), which keep it only on 32-row
 * boundaries; -1 otherwise */
static int quant_buffer(const struct model *m, const struct wmat *w, bool is_kv_b)
{
	const char *d = w->data;
	int lo = 0, hi = is_kv_b ? -1 : m->n_qbufs - 1, at = -1;
	while (lo <= hi) { /* the last buffer that starts at or below d */
		int mid = lo + (hi - lo) / 2;
		if ((const char *)m->qbufs[mid].p <= d)
			at = mid, lo = mid + 1;
		else
			hi = mid - 1;
	}
	return at >= 0 && d < (const char *)m->qbufs[at].p + m->qbufs[at].bytes ? at : -1; /* freed: 0 bytes */
}

/* Packs w for the kernels of the CPU's level when that pays (ops/prepack.h) into an owned
 * buffer. w->data stays valid (the mapping, or the dummy buffer) for the other paths, except
 * values quantized at load into m->qbufs (fp8's), which are dropped (data NULL): the packed
 * copy replaces them, so a quantized model does not hold its weights twice. With count set it only adds the
 * bytes that packing would add to the memory in use. */
static int prepack(struct model *m, struct wmat *w, size_t *bytes, bool count, bool is_kv_b, struct err *e)
{
	if (!w->data || !prepack_wanted(w, m->opt.act_dtype == DT_BF16))
		return 0;
	int qb = quant_buffer(m, w, is_kv_b);
	size_t add = prepack_bytes(w), drop = count && qb >= 0 ? m->qbufs[qb].bytes : 0;
	*bytes += add > drop ? add - drop : 0;
	if (count)
		return 0;
	uint32_t *d = model_own(m, prepack_bytes(w));
	if (!d)
		return err_set(e, "model: out of memory packing a %dx%d weight for the kernels", w->rows, w->cols);
	prepack_weights(w, d, m->opt.pool);
	if (qb >= 0) { /* the entry stays, empty, so that the list stays sorted */
		bigmem_free(m->qbufs[qb].p, m->qbufs[qb].bytes);
		m->qbufs[qb].bytes = 0;
		w->data = NULL;
	}
	return 0;
}

/* Every GEMM weight of the step (not the embedding table, which is indexed by row) */
static int prepack_each(struct model *m, size_t *bytes, bool count, struct err *e)
{
	if (prepack(m, &m->lm_head, bytes, count, false, e))
		return -1;
	if (m->mtp.own_head && prepack(m, &m->mtp.head, bytes, count, false, e))
		return -1;
	if (m->n_layers > m->cfg.num_hidden_layers) {
		if (!m->mtp.own_head && !count)
			m->mtp.head = m->lm_head; /* its packed copy too */
		if (prepack(m, &m->mtp.eh_proj, bytes, count, false, e))
			return -1;
	}
	for (int i = 0; i < m->n_layers; i++) {
		struct layer_weights *l = &m->layers[i];
		struct wmat *ws[] = {&l->q_proj,         &l->q_a, &l->q_b,  &l->kv_a,   &l->kv_b,    &l->o_proj,
				     &l->gate,           &l->up,  &l->down, &l->router, &l->ix_wq_b, &l->ix_wk,
				     &l->ix_weights_proj};
		for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++)
			if (prepack(m, ws[k], bytes, count, ws[k] == &l->kv_b, e))
				return -1;
		for (int h = 0; h < m->n_heads_local; h++)
			if (prepack(m, &l->uk_t[h], bytes, count, false, e))
				return -1;
		for (int x = 0; l->moe && x < m->cfg.n_routed_experts; x++)
			if (prepack(m, &l->e_gate[x], bytes, count, false, e) ||
			    prepack(m, &l->e_up[x], bytes, count, false, e) ||
			    prepack(m, &l->e_down[x], bytes, count, false, e))
				return -1;
	}
	return 0;
}

/* The packed copy when it fits the memory left (base/bigmem.h: cgroup limits included) with
 * a tenth to spare; else the weights are served as loaded (slower, never an OOM kill) */
int model_prepack_all(struct model *m, struct err *e)
{
	size_t need = 0, bytes = 0, avail = bigmem_available();
	if (m->n_qbufs)
		qsort(m->qbufs, (size_t)m->n_qbufs, sizeof *m->qbufs, by_address);
	prepack_each(m, &need, true, e);
	if (need > avail / 10 * 9) {
		LOG_W("model",
		      "packing the weights for the tile kernels needs %.2f GB and %.2f GB of memory is left: "
		      "serving them as loaded instead (slower; -q fp8 halves a bf16 checkpoint)",
		      need / 1e9, avail / 1e9);
		return 0;
	}
	double t0 = mono_now_s();
	if (prepack_each(m, &bytes, false, e))
		return -1;
	if (bytes)
		LOG_I("model", "packed %.2f GB of weights for the %s kernels in %.1f s", bytes / 1e9,
		      ops_level_best() >= OPS_AVX512_BF16 ? "bf16 dot-product" : "AVX2", mono_now_s() - t0);
	return 0;
}
