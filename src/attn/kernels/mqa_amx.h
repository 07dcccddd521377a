/* AMX-BF16 kernels of the paged MQA (mqa.c only, level OPS_AMX), for bf16 q and a bf16 cache.
 * Score rows are `ls` floats apart (ls: the job's key block, up to MQA_KEY_BLOCK_WIDE; mqa.c's
 * mqa_run_at chooses it), as in mqa_avx512.h's softmax. A job brackets its kernel
 * calls with mqa_amx_begin / mqa_amx_end on its thread (the tile configuration is per-thread
 * state; no other tile user may run in between). */
#ifndef MLA_ATTN_KERNELS_MQA_AMX_H
#define MLA_ATTN_KERNELS_MQA_AMX_H

#include <stddef.h>
#include <stdint.h>

#include "attn/kernels/kv_fp8.h"

/* The kernels take cache rows of a multiple of 32 bf16 (scores) and value widths of a
 * multiple of 32 (values): 576 and 512 for real models. */
static inline int mqa_amx_scores_ok(int row) { return row > 0 && row % 32 == 0; }
static inline int mqa_amx_values_ok(int dv) { return dv > 0 && dv % 32 == 0; }

/* Bytes of the kernels' bf16 work buffer for cache rows `row` wide (copies of key groups that
 * are not contiguous in the cache, then the value block's tiles). */
size_t mqa_amx_work_bytes(int row);
/* Words of the packed query (mqa_amx_pack_q) for nr rows of `row` bf16. */
size_t mqa_amx_q_words(int nr, int row);

/* The lines of the next key block's rows (n rows of `bytes`), prefetched a few per tile step
 * by both kernels of a block, from row r byte off on: the next block's loads then overlap
 * this block's products. With fp8 set (an fp8 cache), the rows are instead decoded to bf16
 * (row r, part part on; dst + r * width) `per` parts a step, each row prefetched a few rows
 * ahead: the decode's vector work then overlaps the tile products; mqa_amx_pf_finish decodes
 * what is left. */
struct mqa_amx_pf {
	const void *const *rows;
	int n, bytes, r, off;
	const struct kv_fp8_layout *fp8;
	uint16_t *dst;
	int width, per, part, level;
};

/* decodes the rest of pf's rows (an fp8 pf) */
void mqa_amx_pf_finish(struct mqa_amx_pf *pf);

/* Loads the tile configuration of a job of nr query rows; mqa_amx_end releases it. */
void mqa_amx_begin(int nr);
void mqa_amx_end(void);

/* qv = the nr query rows (fp32 holding bf16 values, `row` apart) as B tiles: for each group
 * of 16 rows and each 32-wide k-step, [16 pairs][16 rows] dwords (1 KB); rows past nr are 0. */
void mqa_amx_pack_q(uint32_t *qv, const float *q, int nr, int row);
/* s[i * KB + j] = scale * q_i . k_j for i < nr, j < nk: tdpbf16ps of the bf16 key rows kr[j]
 * (exact products, fp32 sums) against qv. work: mqa_amx_work_bytes(row). Meanwhile prefetches
 * the pf_bytes of each of pf[0:npf] (the next block's rows), spread out. */
void mqa_amx_scores(const uint32_t *qv, int nr, int row, const uint16_t *const *kr, int nk, float scale, float *s,
		    int ls, void *work, struct mqa_amx_pf *pf);
/* mqa512_accum_dp on tiles: out[i] = out[i] * alpha[i] + P_i · V for i < nr, with P = s rounded
 * to bf16 as prob_pairs does and V = the first dv bf16 of the cache rows vr[j] (`row` wide),
 * j < nk. Same contract on s, nvis and alpha (mqa512_softmax's output). The columns of each 32
 * of an out row stay split, [16 even | 16 odd], from the first call to mqa_amx_unsplit (alpha
 * and a final 1 / l scale them alike). pp: nr x ls / 2 words; work as for the
 * scores. Prefetches pf as mqa_amx_scores does. */
void mqa_amx_accum(float *out, int nr, int dv, const float *alpha, const float *s, int ls, const int *nvis,
		   const uint16_t *const *vr, int row, int nk, uint32_t *pp, void *work, struct mqa_amx_pf *pf);
/* Puts the columns of out [nr][dv] back in order after the value passes. */
void mqa_amx_unsplit(float *out, int nr, int dv);

#endif
