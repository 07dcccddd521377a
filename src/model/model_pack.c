/* Packing the loaded weights for the kernels of the CPU's level (ops/prepack.h), once at load:
 * the weights the family lists (family.h: each_weight, its tensor table's), and whether the
 * memory allows it. */
#include "model/family.h"
#include "model/tensors.h"

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

/* The buffer of values quantized at load (m->qbufs, sorted by address) holding w's bytes, if w
 * may lose them once packed: every GEMM on a packed weight reads the packed copy (under bf16
 * activations, or any for the AVX2 fp8 layout), except row views (TF_VIEWED: the W_UV views of
 * kv_b in forward.c), which keep it only on 32-row boundaries; -1 otherwise */
static int quant_buffer(const struct model *m, const struct wmat *w, bool viewed)
{
	const char *d = w->data;
	int lo = 0, hi = viewed ? -1 : m->n_qbufs - 1, at = -1;
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
static int prepack(struct model *m, struct wmat *w, size_t *bytes, bool count, bool viewed, struct err *e)
{
	if (!w->data || !prepack_wanted(w, m->opt.act_dtype == DT_BF16))
		return 0;
	int qb = quant_buffer(m, w, viewed);
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

struct pack_ctx {
	size_t *bytes;
	bool count;
};

/* one weight of the family's list (family.h: each_weight) */
static int pack_one(struct model *m, struct wmat *w, unsigned flags, void *ctx, struct err *e)
{
	const struct pack_ctx *c = ctx;
	return prepack(m, w, c->bytes, c->count, flags & TF_VIEWED, e);
}

/* Every GEMM weight of the step, as the family lists them (not the embedding table, which is
 * indexed by row) */
static int prepack_each(struct model *m, size_t *bytes, bool count, struct err *e)
{
	struct pack_ctx c = {bytes, count};
	return m->fam->each_weight(m, pack_one, &c, e);
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
