/* REFERENCE_MLA: the simplest correct decode attention over the latent cache, used as the
 * oracle for the other backends (docs/mla-dcp.md §2.6, §4.7). One (token, head) at a time:
 * scores over the visible keys in double, max-subtracted softmax, out = sum p * kv_c. */
#include <math.h>

#include "attn/backends/backends.h"
#include "attn/dcp.h"
#include "attn/kv_cache.h"
#include "attn/prefill.h"
#include "ops/pool.h"

static float row_elem(const struct kv_cache *kv, const void *row, int k)
{
	if (kv->dtype == DT_F8_E4M3)
		return kv_fp8_value(&kv->fp8, row, k);
	return kv->dtype == DT_F32 ? ((const float *)row)[k] : bf16_to_f32(((const uint16_t *)row)[k]);
}

struct ref_ctx {
	const struct attn_decode_args *a;
};

/* Visibility of local key j of sequence i for query t (§4.7), written out per key so this
 * backend does not share the prefix shortcut of the fast kernels. */
static bool ref_visible(const struct attn_meta *m, int L, int q, int t, int64_t j)
{
	int64_t g = j;
	if (m->dcp_size > 1)
		g = dcp_global_pos(j, m->dcp_size, m->dcp_rank, m->dcp_interleave);
	return g <= (int64_t)L - q + t;
}

static double ref_score(const struct attn_decode_args *a, const float *q, const void *row)
{
	double s = 0;
	for (int k = 0; k < a->kv->row; k++)
		s += (double)q[k] * row_elem(a->kv, row, k);
	return s * a->scale;
}

static void ref_run(void *vctx, int begin, int end, int tid)
{
	const struct attn_decode_args *a = ((struct ref_ctx *)vctx)->a;
	const struct attn_meta *m = a->meta;
	const struct kv_cache *kv = a->kv;
	int H = a->n_heads, Lkv = kv->kv_lora_rank;
	for (int item = begin; item < end; item++) {
		int tok = item / H, h = item % H;
		int i = 0;
		while (m->query_start[i + 1] <= tok)
			i++;
		int q = m->query_start[i + 1] - m->query_start[i];
		int t = tok - m->query_start[i];
		int L = m->seq_lens[i];
		int n = m->dcp_size > 1 && m->local_seq_lens ? m->local_seq_lens[i] : L;
		const int32_t *bt = m->block_table + (size_t)i * m->max_blocks;
		const float *qv = a->q + ((size_t)tok * H + h) * kv->row;
		float *o = a->out + ((size_t)tok * H + h) * Lkv;
		double mx = -INFINITY;
		for (int64_t j = 0; j < n; j++) {
			if (!ref_visible(m, L, q, t, j))
				continue;
			double s = ref_score(a, qv,
					     kv_cache_row_ptr(kv, a->layer, kv_cache_slot(bt, kv->block_size, j)));
			if (s > mx)
				mx = s;
		}
		for (int d = 0; d < Lkv; d++)
			o[d] = 0;
		if (mx == -INFINITY) { /* no visible key (an empty DCP shard) */
			a->lse[(size_t)tok * H + h] = -INFINITY;
			continue;
		}
		double l = 0;
		for (int64_t j = 0; j < n; j++) {
			if (!ref_visible(m, L, q, t, j))
				continue;
			const void *row = kv_cache_row_ptr(kv, a->layer, kv_cache_slot(bt, kv->block_size, j));
			float p = (float)exp(ref_score(a, qv, row) - mx);
			l += p;
			for (int d = 0; d < Lkv; d++)
				o[d] += p * row_elem(kv, row, d);
		}
		for (int d = 0; d < Lkv; d++)
			o[d] = (float)(o[d] / l);
		a->lse[(size_t)tok * H + h] = (float)(mx + log(l));
	}
}

static void ref_decode(const struct attn_decode_args *a)
{
	struct ref_ctx c = {a};
	pool_for(a->cx->pool, a->meta->n_decode_tokens * a->n_heads, 1, ref_run, &c);
}

const struct attn_backend attn_backend_reference_mla = {
	.name = "REFERENCE_MLA",
	.reorder_batch_threshold = 1,
	.query_len_support = QLEN_SINGLE_ONLY,
	.supports_dcp_multi_token = NULL,
	.returns_lse = true,
	.block_size_multiple = 1,
	.plan = NULL,
	.decode = ref_decode,
	.prefill = attn_prefill,
};
