/* Shared by the GEMM files (gemm.c: driver; gemm_rows.c: portable and AVX2 kernels on
 * row-major weights; gemm_avx512.c: AVX-512 register-blocked kernels for few tokens;
 * gemm_pack512.c: AVX-512 packed kernels for many tokens; gemm_prepacked512.c and gemm_amx.c:
 * weights packed at load (ops/prepack.h), any token count; gemm_bf16_avx2.c and
 * gemm_fp8_avx2.c: the same at the AVX2 level; gemm_int8.c: W8A8 at every level; the format
 * rows wf_*.c). Not part of the ops API. */
#ifndef MLA_OPS_GEMM_INTERNAL_H
#define MLA_OPS_GEMM_INTERNAL_H

#include <stdbool.h>
#include <string.h>

#include "base/err.h"
#include "ops/gemm.h"

#define GEMM_PANEL 64 /* rows per work item (one thread's unit of work) */

/* element i of a weight array, as fp32 (fp8 without its block scale) */
static inline float gemm_elem(enum dtype dt, const void *p, size_t i)
{
	switch (dt) {
	case DT_F32: {
		float f;
		memcpy(&f, (const char *)p + 4 * i, 4);
		return f;
	}
	case DT_BF16: {
		uint16_t h;
		memcpy(&h, (const char *)p + 2 * i, 2);
		return bf16_to_f32(h);
	}
	case DT_F16: {
		uint16_t h;
		memcpy(&h, (const char *)p + 2 * i, 2);
		return f16_to_f32(h);
	}
	case DT_F8_E4M3: return fp8_e4m3_table[((const uint8_t *)p)[i]];
	default: CHECK(!"unsupported weight dtype"); return 0;
	}
}

/* fp8 block scale of view element (r, c) */
static inline float gemm_wscale(const struct wmat *w, int r, int c)
{
	return w->scale[(size_t)((w->row0 + r) / w->blk_r) * (size_t)w->scale_ld + (size_t)((w->col0 + c) / w->blk_c)];
}

/* first column after c that starts a new fp8 scale block (or cols) */
static inline int gemm_seg_end(const struct wmat *w, int c)
{
	if (w->dtype != DT_F8_E4M3)
		return w->cols;
	int nb = ((w->col0 + c) / w->blk_c + 1) * w->blk_c - w->col0;
	return nb < w->cols ? nb : w->cols;
}

/* Rows [r0, r1) of job j for all its tokens, AVX-512 (dp: bf16 dot products).
 * gemm_avx512.c: register-blocked, for jobs with few tokens (decode, MoE experts). */
void gemm_panel_avx512(const struct gemm_job *j, int r0, int r1, bool dp);
/* gemm_pack512.c: weights packed per panel and reused by every token tile (prefill). */
void gemm_panel_packed_avx512(const struct gemm_job *j, int r0, int r1, bool dp);
/* the AVX-512 driver takes the packed path from this many tokens (per weight dtype) */
int gemm_pack512_min_tokens(enum dtype dt, bool dp);

/* gemm_prepacked512.c: weights packed at load (w->packed, ops/prepack.h), any token count;
 * x as bf16 rows xb [n, ldxb] (gemm_x_to_bf16, ldxb = gemm_prepacked_ldxb(cols)). r0 is a
 * multiple of PREPACK_ROWS. Returns whether it rounded y (gemm_job.round_bf16). */
int gemm_panel_prepacked512(const struct gemm_job *j, const uint16_t *xb, int ldxb, int r0, int r1);
/* Tests: which fp8 step decoder the dp kernels use (1: the VBMI byte lookups, when the CPU has
 * them; 0: the arithmetic one; -1, the default: the best the CPU has). Set it while no GEMM
 * runs. */
void gemm_prepacked512_fp8_decoder(int vbmi);
int gemm_prepacked_ldxb(int cols);
/* gemm_fp8_avx2.c: fp8 weights packed at load in the AVX2 layout (PREPACK_KIND_FP8_AVX2), any
 * token count, fp32 x; r0 is a multiple of PREPACK_ROWS */
void gemm_panel_fp8_avx2(const struct gemm_job *j, int r0, int r1);
/* bf16 weights packed in the dot-product layout, at the AVX2 level (ops/gemm_bf16_avx2.c) */
void gemm_panel_bf16_avx2(const struct gemm_job *j, int r0, int r1);
/* gemm_int8.c: W8A8 on DT_I8 weights (ops/quant_int8.h), x quantized already (qx NULL: the
 * panel quantizes its own); r0 a multiple of INT8_ROWS; applies j->round_bf16 itself (returns
 * 1). gemm_int8_kernel: which kernel a level runs (0 portable, 1 AVX2, 2 AVX-512 VNNI, 3 AVX-VNNI). */
int gemm_panel_int8(enum ops_level lvl, const struct gemm_job *j, const uint8_t *qx, const float *sx, int r0, int r1);
int gemm_int8_kernel(enum ops_level lvl);
/* The quantized x of a call's n tokens as lvl's kernel reads it: gemm_int8_x_bytes bytes (qxu
 * rows, or the AVX2 kernel's layout), and scales sx [n][int8_groups(cols)]. gemm_int8_quant_x
 * writes token t's (x: its cols floats; sx: its row of scales) wherever it lies. */
size_t gemm_int8_x_bytes(enum ops_level lvl, int n, int cols);
void gemm_int8_quant_x(enum ops_level lvl, const float *x, int cols, int n, int t, uint8_t *qx, float *sx);
/* gemm_amx.c: the same on AMX tiles (level OPS_AMX); xb holds rows up to a multiple of 16
 * past 16 tokens (prepack_x_elems), their values unused. Returns 1 when it has applied
 * j->round_bf16 itself (as it stores: bf16 weights), 0 when the caller still must. */
int gemm_panel_amx(const struct gemm_job *j, const uint16_t *xb, int ldxb, int r0, int r1);
/* rows [r0, r1) of a job on its load-time packed weights (the AMX or the AVX512_BF16 kernel),
 * x already bf16 in xb; returns whether the kernel rounded y itself (gemm_job.round_bf16) */
static inline int gemm_panel_prepacked(enum ops_level lvl, const struct gemm_job *j, const uint16_t *xb, int ldxb,
				       int r0, int r1)
{
	if (lvl >= OPS_AMX)
		return gemm_panel_amx(j, xb, ldxb, r0, r1);
	return gemm_panel_prepacked512(j, xb, ldxb, r0, r1);
}
/* tokens [t0, t1) of x [n, ldx] (bf16-exact values) → xb, zero past cols */
void gemm_x_to_bf16(const float *x, int ldx, int t0, int t1, int cols, uint16_t *xb, int ldxb);

#endif
