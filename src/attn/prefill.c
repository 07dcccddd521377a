#include "attn/prefill.h"

#include <math.h>
#include <string.h>

#include "attn/dcp.h"
#include "attn/kv_cache.h"
#include "attn/merge.h"
#include "ops/cpu.h"
#include "ops/pool.h"
#include "ops/prepack.h"
#include "ops/vec.h"

/* MHA over up-projected keys: query a (of nq) sees keys [0, causal ? a+1 : nk). Work items
 * are (head, block of QB queries); each thread copies the head's K [nk, dn+dr] and Vᵀ
 * [dv, nk] into its own buffers and runs two GEMMs (scores, then probabilities x V).
 * Under bf16 (bf16-exact q, K, V on an AVX512_BF16 CPU) K and Vᵀ are packed for the bf16
 * dot-product kernel once per head for all nk keys (a causal block uses a prefix view) and
 * the probabilities are rounded to bf16 (as bf16 engines multiply P·V). */
#define QB 64

struct mha_ctx {
	int n_heads, dn, dr, dv;
	float scale;
	const float *q;
	int ldq; /* [nq, H*(dn+dr)] */
	const float *kvb;
	int ldkvb; /* [nk, H*(dn+dv)] */
	const float *kpe;
	int ldkpe; /* [nk, >= dr] */
	int nq, nk, causal;
	float *o;
	int ldo;    /* [nq, H*dv] */
	float *lse; /* [nq, H] */
	float *work;
	size_t work_ld; /* per thread: K, Vᵀ, S (fp32), or packed K, Vᵀ, S, x */
	int max_keys;
	bool bf16;
};

/* fp32 core: scores S [a1 - a0, nk] of queries [a0, a1) of head h → probabilities, zero past
 * each query's visible keys; their LSE into c->lse (the bf16 core writes its probabilities
 * as bf16 straight into P·V's input: mha_items_bf16) */
static void probabilities(const struct mha_ctx *c, float *S, int a0, int a1, int h, int nk)
{
	for (int a = a0; a < a1; a++) {
		float *sr = S + (size_t)(a - a0) * (size_t)nk;
		int vis = c->causal ? a + 1 : nk;
		c->lse[(size_t)a * (size_t)c->n_heads + (size_t)h] = ops_softmax_scaled(sr, vis, c->scale, false);
		for (int b = vis; b < nk; b++)
			sr[b] = 0;
	}
}

/* bf16: a thread's buffer: packed K [keys, dk] and Vᵀ [dv, keys], S [QB, keys], x scratch */
static size_t pk_k_words(int keys, int dk) { return (size_t)((keys + 31) / 32) * 32 * (size_t)prepack_pairs(dk); }
static size_t pk_v_words(int keys, int dv) { return (size_t)((dv + 31) / 32) * 32 * (size_t)prepack_pairs(keys); }
static size_t bf16_work_floats(int keys, int dk, int dv)
{
	size_t xe = prepack_x_elems(QB, keys > dk ? keys : dk);
	return pk_k_words(keys, dk) + pk_v_words(keys, dv) + (size_t)QB * (size_t)keys + (xe + 1) / 2 + 64;
}

static void mha_items_bf16(const struct mha_ctx *c, int begin, int end, int tid)
{
	int dk = c->dn + c->dr, hd = c->dn + c->dv, nqb = (c->nq + QB - 1) / QB;
	uint32_t *Kp = (uint32_t *)(c->work + (size_t)tid * c->work_ld);
	uint32_t *Vp = Kp + pk_k_words(c->nk, dk);
	float *S = (float *)(Vp + pk_v_words(c->nk, c->dv));
	uint16_t *xb = (uint16_t *)(S + (size_t)QB * (size_t)c->nk);
	struct wmat kf = {
		.dtype = DT_BF16, .rows = c->nk, .cols = dk, .ld = dk, .packed = Kp, .packed_pairs = prepack_pairs(dk)};
	struct wmat vf = {.dtype = DT_BF16,
			  .rows = c->dv,
			  .cols = c->nk,
			  .ld = c->nk,
			  .packed = Vp,
			  .packed_pairs = prepack_pairs(c->nk)};
	int cur_h = -1;
	for (int it = begin; it < end; it++) {
		int h = it / nqb, a0 = (it % nqb) * QB, a1 = a0 + QB < c->nq ? a0 + QB : c->nq;
		int nk = c->causal ? a1 : c->nk; /* keys any query of the block can see */
		if (h != cur_h) {                /* every key of the head, once: blocks take prefixes */
			const float *kv = c->kvb + (size_t)h * (size_t)hd;
			prepack_f32(Kp, c->nk, dk, 0, c->dn, kv, (size_t)c->ldkvb, 1);
			prepack_f32(Kp, c->nk, dk, c->dn, c->dr, c->kpe, (size_t)c->ldkpe, 1);
			prepack_f32(Vp, c->dv, c->nk, 0, c->nk, kv + c->dn, 1, (size_t)c->ldkvb);
			cur_h = h;
		}
		struct wmat kw = wmat_view(&kf, 0, nk, 0, dk), vw = wmat_view(&vf, 0, c->dv, 0, nk);
		struct gemm_job js = {.w = &kw,
				      .x = c->q + (size_t)a0 * (size_t)c->ldq + (size_t)h * (size_t)dk,
				      .ldx = c->ldq,
				      .y = S,
				      .ldy = nk,
				      .n = a1 - a0,
				      .x_bf16 = 1};
		prepack_gemm_1t(&js, xb);
		/* the probabilities go straight into xb as P·V's bf16 rows (the bits of rounding them
		 * in S and converting) */
		int ldxb = prepack_x_ld(nk);
		for (int a = a0; a < a1; a++)
			c->lse[(size_t)a * (size_t)c->n_heads + (size_t)h] = ops_softmax_scaled_to_bf16(
				S + (size_t)(a - a0) * (size_t)nk, c->causal ? a + 1 : nk, c->scale,
				xb + (size_t)(a - a0) * (size_t)ldxb, ldxb);
		struct gemm_job jo = {.w = &vw,
				      .y = c->o + (size_t)a0 * (size_t)c->ldo + (size_t)h * (size_t)c->dv,
				      .ldy = c->ldo,
				      .n = a1 - a0,
				      .x_bf16 = 1};
		prepack_gemm_1t_xb(&jo, xb);
	}
}

static void mha_items(void *arg, int begin, int end, int tid)
{
	const struct mha_ctx *c = arg;
	if (c->bf16) {
		mha_items_bf16(c, begin, end, tid);
		return;
	}
	int dk = c->dn + c->dr, hd = c->dn + c->dv, nqb = (c->nq + QB - 1) / QB;
	float *K = c->work + (size_t)tid * c->work_ld;       /* [nk, dk] */
	float *Vt = K + (size_t)c->max_keys * (size_t)dk;    /* [dv, nk] */
	float *S = Vt + (size_t)c->dv * (size_t)c->max_keys; /* [QB, nk] */
	int cur_h = -1, cur_nk = 0;
	for (int it = begin; it < end; it++) {
		int h = it / nqb, a0 = (it % nqb) * QB, a1 = a0 + QB < c->nq ? a0 + QB : c->nq;
		int nk = c->causal ? a1 : c->nk; /* keys any query of the block can see */
		if (h != cur_h || nk > cur_nk) {
			for (int b = 0; b < nk; b++) {
				const float *kv = c->kvb + (size_t)b * (size_t)c->ldkvb + (size_t)h * (size_t)hd;
				memcpy(K + (size_t)b * dk, kv, sizeof(float) * (size_t)c->dn);
				memcpy(K + (size_t)b * dk + c->dn, c->kpe + (size_t)b * (size_t)c->ldkpe,
				       sizeof(float) * (size_t)c->dr);
				for (int v = 0; v < c->dv; v++)
					Vt[(size_t)v * (size_t)c->max_keys + (size_t)b] = kv[c->dn + v];
			}
			cur_h = h;
			cur_nk = nk;
		}
		struct wmat kw = {.dtype = DT_F32, .data = K, .rows = nk, .cols = dk, .ld = dk};
		struct gemm_job js = {.w = &kw,
				      .x = c->q + (size_t)a0 * (size_t)c->ldq + (size_t)h * (size_t)dk,
				      .ldx = c->ldq,
				      .y = S,
				      .ldy = nk,
				      .n = a1 - a0};
		ops_gemm_multi(NULL, 1, &js);
		probabilities(c, S, a0, a1, h, nk);
		struct wmat vw = {.dtype = DT_F32, .data = Vt, .rows = c->dv, .cols = nk, .ld = c->max_keys};
		struct gemm_job jo = {.w = &vw,
				      .x = S,
				      .ldx = nk,
				      .y = c->o + (size_t)a0 * (size_t)c->ldo + (size_t)h * (size_t)c->dv,
				      .ldy = c->ldo,
				      .n = a1 - a0};
		ops_gemm_multi(NULL, 1, &jo);
	}
}

static int max_i(int a, int b) { return a > b ? a : b; }

/* a thread's MHA buffer: the fp32 layout or the bf16 one, whichever is larger */
static size_t work_floats(int keys, int dk, int dv)
{
	size_t f32 = (size_t)keys * (size_t)(dk + dv) + (size_t)QB * (size_t)keys, b = bf16_work_floats(keys, dk, dv);
	return f32 > b ? f32 : b;
}

size_t attn_prefill_scratch_bytes(int n_tokens, int n_heads, int nope_dim, int rope_dim, int v_dim, int kv_lora_rank,
				  int ws_rows, int n_threads)
{
	size_t H = (size_t)n_heads, n = (size_t)n_tokens, w = (size_t)ws_rows;
	size_t f = 0;
	f += n * H * (size_t)(nope_dim + v_dim);    /* kvb of new tokens */
	f += n * H;                                 /* lse new */
	f += w * (size_t)(kv_lora_rank + rope_dim); /* workspace rows */
	f += w * H * (size_t)(nope_dim + v_dim);    /* kvb of a context chunk */
	f += 2 * (n * H * (size_t)v_dim + n * H);   /* chunk and accumulated (o, lse) */
	int keys = max_i(n_tokens, ws_rows);
	f += (size_t)n_threads * work_floats(keys, nope_dim + rope_dim, v_dim); /* K, Vᵀ, S (+ bf16 x) */
	return f * sizeof(float) + 16 * 64;
}

size_t attn_prefill_dcp_scratch_bytes(int ws_rows, int dcp_size, int kv_lora_rank, int rope_dim)
{
	if (dcp_size <= 1)
		return 0;
	/* this rank's padded chunk rows [ws/W, row] and the gathered ones [ws, row] */
	size_t w = (size_t)ws_rows, row = (size_t)(kv_lora_rank + rope_dim);
	return (w / (size_t)dcp_size + w) * row * sizeof(float) + 2 * 64;
}

/* Context rows of sequence i (local indices [k0, k0 + n) of this rank's shard) as fp32. */
static int read_ctx_rows(const struct attn_prefill_args *a, int i, int k0, int n, float *dst, struct err *e)
{
	const struct attn_meta *m = a->meta;
	const int32_t *bt = m->block_table + (size_t)i * (size_t)m->max_blocks;
	int row = a->kv_lora_rank + a->rope_dim;
	for (int r = 0; r < n; r++) {
		int64_t pos = k0 + r;
		if (pos / a->kv->block_size >= m->max_blocks)
			return err_set(e, "prefill: position %lld of sequence %d is past its block table (%d blocks)",
				       (long long)pos, i, m->max_blocks);
		int64_t slot = kv_cache_slot(bt, a->kv->block_size, pos);
		if (slot < 0 || slot >= kv_cache_n_slots(a->kv))
			return err_set(e, "prefill: slot %lld of sequence %d is outside the kv cache", (long long)slot,
				       i);
		float *d = dst + (size_t)r * (size_t)row;
		const float *src = kv_cache_row_f32(a->kv, a->layer, slot, d);
		if (src != d)
			memcpy(d, src, sizeof(float) * (size_t)row);
	}
	return 0;
}

/* Under DCP the context of sequence i is sharded (docs/mla-dcp.md §4.6): chunk c of C_loc local
 * rows is padded to rank 0's (the largest) count, all-gathered over the group and
 * concatenated rank by rank, keeping each rank's true rows. The key order is a permutation
 * of the positions: harmless, the context attention is non-causal and RoPE sits in k_pe.
 * Every rank runs the same chunks with the same sizes (they depend on ctx, W and I only).
 * Returns the number of context rows in wsb (0 when the chunk is past the context). */
static int gather_ctx_chunk(const struct attn_prefill_args *a, int i, int ctx, int c0, int C_loc, float *loc,
			    float *gat, float *wsb, struct err *e)
{
	const struct attn_meta *m = a->meta;
	int W = m->dcp_size, I = m->dcp_interleave, row = a->kv_lora_rank + a->rope_dim;
	int max_local = dcp_local_seq_len(ctx, W, 0, I);
	int rows = max_local - c0 < C_loc ? max_local - c0 : C_loc; /* padded rows of this chunk */
	int mine = dcp_context_chunk_rows(dcp_local_seq_len(ctx, W, m->dcp_rank, I), c0 / C_loc, C_loc);
	if (read_ctx_rows(a, i, c0, mine, loc, e))
		return -1;
	memset(loc + (size_t)mine * (size_t)row, 0, sizeof(float) * (size_t)(rows - mine) * (size_t)row);
	if (a->dcp_allgather(a->dcp_ctx, loc, (size_t)rows * (size_t)row, gat, e))
		return err_prefix(e, "prefill context gather");
	int len = 0;
	for (int k = 0; k < W; k++) {
		int nk = dcp_context_chunk_rows(dcp_local_seq_len(ctx, W, k, I), c0 / C_loc, C_loc);
		if (nk > rows)
			nk = rows;
		memcpy(wsb + (size_t)len * (size_t)row, gat + (size_t)k * (size_t)rows * (size_t)row,
		       sizeof(float) * (size_t)nk * (size_t)row);
		len += nk;
	}
	return len;
}

int attn_prefill(const struct attn_prefill_args *a, struct err *e)
{
	const struct attn_meta *m = a->meta;
	if (m->n_decodes >= m->n_seqs)
		return 0;
	int W = m->dcp_size > 1 ? m->dcp_size : 1;
	if (W > 1) {
		int I = m->dcp_interleave > 0 ? m->dcp_interleave : 1;
		if (!a->dcp_allgather)
			return err_set(e, "prefill: dcp_size %d without a context all-gather", W);
		if (a->ws_rows < W * I || a->ws_rows % (W * I))
			return err_set(
				e, "prefill: context workspace of %d rows is not a multiple of dcp %d x interleave %d",
				a->ws_rows, W, I);
	}
	int H = a->n_heads, dn = a->nope_dim, dr = a->rope_dim, dv = a->v_dim, L = a->kv_lora_rank;
	int hd = H * (dn + dv), row = L + dr;
	int t_begin = m->query_start[m->n_decodes], t_end = m->query_start[m->n_seqs];
	int np = t_end - t_begin;
	if (np <= 0)
		return 0;
	int nthr = a->cx->pool ? pool_size(a->cx->pool) : 1;
	int ws = a->ws_rows > 0 ? a->ws_rows : 1;
	float *kvb = arena_alloc(a->cx->scratch, sizeof(float) * (size_t)np * (size_t)hd);    /* [np, H*(dn+dv)] */
	float *lse_new = arena_alloc(a->cx->scratch, sizeof(float) * (size_t)np * (size_t)H); /* [np, H] */
	int max_keys = max_i(np, ws);
	size_t work_ld = (work_floats(max_keys, dn + dr, dv) + 15) & ~(size_t)15; /* 64-byte aligned */
	float *work = arena_alloc(a->cx->scratch, sizeof(float) * (size_t)nthr * work_ld);
	float *wsb = NULL, *kvb_ctx = NULL, *o_c = NULL, *lse_c = NULL, *o_acc = NULL, *lse_acc = NULL;
	float *dcp_loc = NULL, *dcp_gat = NULL;

	/* up-project the new latents once for all prefill sequences (bf16: rounded like every
	 * activation, which the bf16 core needs) */
	struct gemm_job up = {.w = a->kv_b,
			      .x = a->kv_c + (size_t)t_begin * (size_t)a->ld_kv,
			      .ldx = a->ld_kv,
			      .y = kvb,
			      .ldy = hd,
			      .n = np,
			      .x_bf16 = a->bf16};
	ops_gemm_multi(a->cx->pool, 1, &up);
	if (a->bf16)
		ops_round_bf16(kvb, (int64_t)np * hd);
	bool core_bf16 = a->bf16 && ops_level_best() >= OPS_AVX512_BF16;

	for (int i = m->n_decodes; i < m->n_seqs; i++) {
		int qs = m->query_start[i], ql = m->query_start[i + 1] - qs;
		if (ql <= 0)
			continue;
		int ctx = m->seq_lens[i] - ql;
		if (ctx < 0)
			return err_set(e, "prefill: sequence %d has seq_len %d < query length %d", i, m->seq_lens[i],
				       ql);
		float *out = a->out + (size_t)qs * (size_t)H * (size_t)dv;
		float *lse = lse_new + (size_t)(qs - t_begin) * (size_t)H;
		struct mha_ctx c = {.n_heads = H,
				    .dn = dn,
				    .dr = dr,
				    .dv = dv,
				    .scale = a->scale,
				    .q = a->q + (size_t)qs * (size_t)H * (size_t)(dn + dr),
				    .ldq = H * (dn + dr),
				    .kvb = kvb + (size_t)(qs - t_begin) * (size_t)hd,
				    .ldkvb = hd,
				    .kpe = a->k_pe + (size_t)qs * (size_t)a->ld_kv,
				    .ldkpe = a->ld_kv,
				    .nq = ql,
				    .nk = ql,
				    .causal = 1,
				    .o = out,
				    .ldo = H * dv,
				    .lse = lse,
				    .work = work,
				    .work_ld = work_ld,
				    .max_keys = max_keys,
				    .bf16 = core_bf16};
		int items = H * ((ql + QB - 1) / QB);
		pool_for(a->cx->pool, items, 1, mha_items, &c);
		if (ctx == 0)
			continue;
		if (!wsb) {
			wsb = arena_alloc(a->cx->scratch, sizeof(float) * (size_t)ws * (size_t)row); /* [ws, L+dr] */
			kvb_ctx = arena_alloc(a->cx->scratch,
					      sizeof(float) * (size_t)ws * (size_t)hd); /* [ws, H*(dn+dv)] */
			o_c = arena_alloc(a->cx->scratch, sizeof(float) * (size_t)np * (size_t)H * (size_t)dv);
			lse_c = arena_alloc(a->cx->scratch, sizeof(float) * (size_t)np * (size_t)H);
			o_acc = arena_alloc(a->cx->scratch, sizeof(float) * (size_t)np * (size_t)H * (size_t)dv);
			lse_acc = arena_alloc(a->cx->scratch, sizeof(float) * (size_t)np * (size_t)H);
		}
		/* local coordinates: without DCP the whole context, chunks of ws rows; under DCP
		 * rank 0's (padded) share, chunks of ws / W local rows from every rank */
		int span = W > 1 ? dcp_local_seq_len(ctx, W, 0, m->dcp_interleave) : ctx;
		int step = ws / W;
		if (W > 1 && (!dcp_loc || !dcp_gat)) {
			dcp_loc = arena_alloc(a->cx->scratch,
					      sizeof(float) * (size_t)step * (size_t)row); /* [ws/W, row] */
			dcp_gat = arena_alloc(a->cx->scratch,
					      sizeof(float) * (size_t)ws * (size_t)row); /* [W, ws/W, row] */
		}
		for (int start = 0; start < span; start += step) {
			int len;
			if (W > 1) {
				len = gather_ctx_chunk(a, i, ctx, start, step, dcp_loc, dcp_gat, wsb, e);
				if (len < 0)
					return -1;
			} else {
				len = ctx - start < ws ? ctx - start : ws;
				if (read_ctx_rows(a, i, start, len, wsb, e))
					return -1;
			}
			struct gemm_job upc = {.w = a->kv_b,
					       .x = wsb,
					       .ldx = row,
					       .y = kvb_ctx,
					       .ldy = hd,
					       .n = len,
					       .x_bf16 = a->bf16};
			ops_gemm_multi(a->cx->pool, 1, &upc);
			if (a->bf16)
				ops_round_bf16(kvb_ctx, (int64_t)len * hd);
			int first = start == 0;
			struct mha_ctx cc = c;
			cc.kvb = kvb_ctx;
			cc.kpe = wsb + L;
			cc.ldkpe = row;
			cc.nk = len;
			cc.causal = 0;
			cc.o = first ? o_acc : o_c;
			cc.lse = first ? lse_acc : lse_c;
			pool_for(a->cx->pool, items, 1, mha_items, &cc);
			if (!first)
				attn_merge_states(ql, H, dv, o_acc, lse_acc, o_c, lse_c, o_acc, lse_acc);
		}
		/* output = merge(context, new tokens) */
		attn_merge_states(ql, H, dv, o_acc, lse_acc, out, lse, out, lse);
	}
	return 0;
}
