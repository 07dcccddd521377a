/* Weight formats as a table, as ggml's type_traits_cpu: one descriptor per format of a
 * struct wmat (keyed by its dtype), holding everything the rest of the code asks of one:
 * its name, values and scale blocks, how a view cuts it, an element's value, how the loader
 * quantizes a float (or other) matrix into it, how it is packed at load for the kernels, what
 * its kernels want of the activations (prepared once per GEMM call), and its GEMM panel per
 * CPU level. gemm.c, prepack.c and the model's loader hold no per-format branches: they ask
 * the row (wformat_of(w->dtype)).
 *
 * Rows today (wformat.c): f32, f16, bf16 (wf_float.c: row-major, the shared float kernels,
 * bf16 packed for the dot-product / AVX2 kernels), fp8 (wf_fp8.c: e4m3 with one fp32 scale per
 * blk_r x blk_c block, 128x128 in DeepSeek's checkpoints and under --quantization fp8; ue8m0
 * checkpoints store the same fp32 grid holding powers of two), int8 (wf_int8.c: W8A8, a
 * scale per row and 128 columns, activations quantized per token and 128 columns per call),
 * int4 (wf_int4.c: signed 4-bit in groups of 32 along K with a bf16 scale each, in 32-row
 * blocks; bf16 x as it is from AVX512_BF16 on, else x quantized as int8's: W4A16 / W4A8)
 * and fp4 (wf_fp4.c: MXFP4, e2m1 pairs with an e8m0 byte per 32 along K in wmat.scale_e8m0,
 * DeepSeek-V4's experts as their checkpoint stores them). fp8 and fp4 round x through fp8 per
 * 128 columns first when the job asks (gemm_job.act_fp8: wact_fp8_act128, V4's act_quant).
 *
 * A new format plugs in as one file and one row:
 *   - a DT_ value for wmat.dtype (base/dtype.h, its name in dtype.c), unless it reuses one;
 *   - src/ops/wf_NAME.c defining `const struct wformat wformat_NAME` (its kernels may take
 *     files of their own, as the fp8 and int8 ones do);
 *   - its row in wformat.c's table ([DT_X] = &wformat_NAME, with the extern above it);
 *     a row with `quantize` is then a --quantization value (serve, bench, logits) by its name,
 *     in their --help and errors (its usage, quant_help);
 *   - its tests (tests/unit/test_wformat.c runs every row's view / get / bytes / GEMM against
 *     wmat_get, at every level).
 * Room for the coming rows: blk_k / blk_n give any scale block (MXFP4 e2m1: 32 x 1 with
 * WSCALE_E8M0 bytes; V4's fp8: 128 x 128
 * WSCALE_UE8M0), `bits` sub-byte values (4: two per byte, views then cut at even columns),
 * `act` activations other than bf16 rows or int8 groups (V4's fp8 act_quant: wact_fp8_act128),
 * and `view` / `bytes` a layout that is not row-major (as int8's and int4's blocks, or a format packed
 * at load into its kernels' own blocks). A grid of scale bytes is read through
 * wmat.scale_e8m0 (a union with the fp32 wmat.scale). What a format read from a checkpoint
 * rather than made at load still needs: the loader's lookup of its scale tensor (weights.c
 * reads fp8's `<name>_scale_inv` itself; V4's are `<name>.scale`, F8_E8M0). */
#ifndef MLA_OPS_WFORMAT_H
#define MLA_OPS_WFORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "ops/cpu.h"
#include "ops/gemm.h"

struct pool;

/* What a scale is stored as */
enum wscale {
	WSCALE_NONE,  /* no scales (f32, f16, bf16) */
	WSCALE_F32,   /* fp32 multipliers (fp8's weight_scale_inv, int8's) */
	WSCALE_UE8M0, /* powers of two 2^(e - 127) (DeepSeek's scale_fmt ue8m0; fp32 in the checkpoint) */
	WSCALE_E8M0,  /* the same in one byte each (MXFP4) */
	WSCALE_BF16,  /* bf16 multipliers inside the values' blocks (int4, compressed-tensors' weight_scale) */
};

/* Activations as a format's kernels read them, prepared once per GEMM call into per-thread
 * scratch, and shared by the jobs of one call that read the same x with the same wact (the
 * MoE gate and up). */
struct wact {
	const char *name;
	/* bytes of job j's n tokens prepared for lvl's kernels */
	size_t (*bytes)(enum ops_level lvl, const struct gemm_job *j);
	/* tokens [t0, t1) of j->x into buf (bytes(lvl, j) bytes, 64-byte aligned) */
	void (*fill)(enum ops_level lvl, const struct gemm_job *j, int t0, int t1, void *buf);
};
extern const struct wact wact_bf16_rows;   /* x as bf16 rows (gemm_prepacked_ldxb apart) */
extern const struct wact wact_int8_groups; /* x as int8 per 128 columns + scales (quant_int8.h) */
/* gemm_job.act_fp8 (wact_fp8.c): x rounded as DeepSeek-V4's act_quant (e4m3 per token and
 * 128 columns, a power-of-two scale), as fp32 rows [n, cols] (panels run on
 * wact_fp8_job(j, act)), or as bf16 rows (wact_bf16_rows' layout) for the dot-product kernels */
extern const struct wact wact_fp8_act128, wact_fp8_act128_bf16;
/* one token's x [n] rounded so → out [n]; a job j on the rounded fp32 rows act */
void wact_fp8_round(const float *x, int n, float *out);
struct gemm_job wact_fp8_job(const struct gemm_job *j, const void *act);

/* Rows [r0, r1) (r0 a multiple of GEMM_PANEL) of job j for all its tokens at level lvl; act: the
 * call's prepared activations (NULL: the format wants none for this job, or there was no
 * memory: the panel then reads j->x). Returns whether it rounded y (gemm_job.round_bf16). */
typedef int (*wformat_panel_fn)(enum ops_level lvl, const struct gemm_job *j, const void *act, int r0, int r1);

/* Memory for a quantized matrix, from its owner (the model): drop_when_packed marks bytes that
 * the packed copy replaces (freed once packed). NULL: out of memory. */
struct walloc {
	void *(*fn)(void *ctx, size_t bytes, bool drop_when_packed);
	void *ctx;
};

struct wformat {
	const char *name; /* "bf16", "fp8", "int8": --quantization's value when it quantizes */
	enum dtype dtype; /* wmat.dtype, the table's key */
	int bits;         /* bits per value: 32, 16, 8 (4: two per byte along K) */
	bool bf16_exact;  /* every value (before its scale) is a bf16 one: bf16 dot products take it */
	/* the scale blocks: one scale per blk_k columns (K) x blk_n rows (int8: 128 x 1); 0 with
	 * WSCALE_NONE. fp8's are the default of its quantizer: a checkpoint's are wmat.blk_r/blk_c.
	 * Each row of a block holds blk_k * bits / 8 bytes of values (ggml's bytes per block). */
	int blk_k, blk_n;
	enum wscale scale;

	/* ---- the matrix ---- */
	/* the view [r0, r0 + nr) x [c0, c0 + nc) of w (bounds checked by wmat_view); NULL: row-major
	 * at `bits` per value, the scale grid addressed through row0/col0, the packed copy kept on
	 * whole 32-row blocks from column 0 */
	struct wmat (*view)(const struct wmat *w, int r0, int nr, int c0, int nc);
	/* bytes of the view's values and scales; NULL: rows x cols x bits / 8 plus the fp32 grid
	 * that covers the view */
	size_t (*bytes)(const struct wmat *w);
	float (*get)(const struct wmat *w, int r, int c); /* element (r, c) as the GEMM sees it */

	/* ---- quantize at load (NULL: the loader never makes this format) ---- */
	/* The region [r0, r0 + nr) x [c0, c0 + nc) of src (any format of the table) into *out,
	 * memory from a; out->row0 / col0: where *out starts in src (it may cover more than the
	 * region: whole scale blocks). Returns 0; -1 with (*bad_r, *bad_c) the first weight that is
	 * not finite; -2 out of memory. */
	int (*quantize)(struct pool *p, const struct wmat *src, int r0, int nr, int c0, int nc, const struct walloc *a,
			struct wmat *out, int *bad_r, int *bad_c);
	/* the loader may give it kv_b_proj, whose transpose W_UKᵀ is multiplied too (tensors_deepseek.c copies
	 * it transposed element by element: whole bytes per value): square scale blocks stay blocks
	 * of the transpose, row groups do not */
	bool transposable;
	const char *scale_unit; /* what one scale covers, for errors: "block", "row" */
	const char *quant_help; /* what --quantization NAME does, for its error message */
	const char *usage;      /* the same for --help: lines of 52 columns at most, apart by '\n' */
	const char *quant_desc; /* what the loader made, for its log: "fp8 in 128x128 blocks" */
	const char *(*kernels)(enum ops_level lvl); /* the kernels a level runs, for the log (NULL: not named) */

	/* ---- packing at load (NULL: never packed) ---- */
	bool (*prepack_wanted)(const struct wmat *w, bool act_bf16); /* at ops_level_best() */
	int (*prepack_kind)(const struct wmat *w);                   /* the layout prepack_weights picks */
	size_t (*prepack_bytes)(const struct wmat *w);
	/* packs w into dst in layout kind (PREPACK_KIND_*) and sets w->packed... (ops/prepack.h) */
	void (*prepack)(struct wmat *w, uint32_t *dst, struct pool *p, int kind);

	/* ---- GEMM ---- */
	/* the activations job j's panels read at lvl (NULL, or the field NULL: j->x as it is) */
	const struct wact *(*act)(enum ops_level lvl, const struct gemm_job *j);
	wformat_panel_fn panel[OPS_N_LEVELS]; /* by level (ops_gemm_multi_at caps it at the best) */
};

/* The row of a weight dtype; NULL for one that is no weight format (DT_I32, DT_I64). */
const struct wformat *wformat_of(enum dtype dt);
/* The row named name ("fp8"); NULL if none. */
const struct wformat *wformat_by_name(const char *name);

/* --quantization / -q VALUE: the row named VALUE that quantizes at load, or an error listing
 * them. Parsed once (setup/engine_args.c) for serve, bench and logits. */
int wformat_parse_quantization(const char *v, const struct wformat **out, struct err *e);
/* The names of the rows that quantize at load, apart by sep ("fp8|int8"), into buf [n]. */
void wformat_quant_names(char *buf, size_t n, const char *sep);

/* The float kernels over row-major values (f32, f16, bf16, fp8 with its block scales):
 * portable, AVX2 (register blocks, and packing per call for many tokens), AVX-512 (register
 * blocks, or packing per call), bf16 dot products when x is bf16-exact, and the load-time
 * packed dot-product / AMX kernels when act holds x as bf16 rows (gemm_rows.c). */
int gemm_panel_rows(enum ops_level lvl, const struct gemm_job *j, const void *act, int r0, int r1);
/* The act of rows packed for the bf16 dot products (bf16, fp8): x as bf16 rows, from the
 * AVX512_BF16 level on, when x is bf16-exact (wf_float.c). */
const struct wact *wformat_act_dp(enum ops_level lvl, const struct gemm_job *j);

#endif
