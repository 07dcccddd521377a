/* One checkpoint tensor as the model holds it (weights.c): what the tensor tables (tensors.h)
 * and a family's own loading read each weight through. Errors name the file and the tensor. */
#ifndef MLA_MODEL_WEIGHTS_H
#define MLA_MODEL_WEIGHTS_H

#include "model/dummy.h"
#include "model/model_internal.h"

/* What a matrix may be in the checkpoint and become at load: WQ_NONE, a float tensor kept as
 * the checkpoint has it; WQ_LINEAR, a linear layer (also fp8 with block scales in DeepSeek's
 * fp8 checkpoints, or pack-quantized int4 in a compressed-tensors one; quantized by
 * --quantization, or --quantization-rest); WQ_EXPERT, a routed expert's linear layer (the same,
 * quantized by --quantization: int4's class of its own); WQ_ABSORBED, one the absorbed
 * attention also multiplies transposed (kv_b_proj: W_UKᵀ), so fp8's square blocks suit it and
 * int8's row groups do not (they would fall along the transpose's dot products): int8 leaves it
 * as the checkpoint has it; WQ_HEAD, the lm_head (a float tensor, quantized by
 * --quantize-lm-head, as the linear layers are, fp8 by default). */
enum wq { WQ_NONE, WQ_LINEAR, WQ_EXPERT, WQ_ABSORBED, WQ_HEAD, WQ_EMBED };

/* How tensor parallelism cuts a matrix: not (every rank holds it whole), by rows (the output
 * dimension: column-parallel), by columns (the input dimension: row-parallel). */
enum split { SPLIT_NONE, SPLIT_ROWS, SPLIT_COLS };

/* The format a matrix of kind q is quantized to at load (NULL: kept as the checkpoint has it):
 * the routed experts take --quantization's; the other linear layers --quantization-rest's, or
 * without it --quantization's (int8 under int4); kv_b_proj the same when its scales suit the
 * transpose; the lm_head (--quantize-lm-head) the other linear layers' or else fp8. */
const struct wformat *model_quant_format(const struct model *m, enum wq q);

/* The checkpoint matrix `name` [rows, cols] (checked), or dummy values. */
int model_mat(struct model *m, const char *name, int rows, int cols, enum wq q, struct wmat *w, struct err *e);
/* The same, and this rank's view of it: rows or columns [lo, lo + n) (how), addressed in place
 * inside the mapping (fp8 views keep the full scale grid and their offset, so a cut inside a
 * 128x128 scale block is fine); quantized at load, only the blocks that cover the view. Counts
 * only the view's bytes. SPLIT_NONE, or no TP: the whole matrix. */
int model_mat_part(struct model *m, const char *name, int rows, int cols, enum wq q, enum split how, int lo, int n,
		   struct wmat *w, struct err *e);
/* What --load-format dummy allocates for model_mat_part's matrix (rows or columns [lo, lo + n)
 * kept under how): added to by[] under the dtype it becomes (mat_region's choice: a
 * compressed-tensors int4 module, fp8 with its grid, the --quantization format, or bf16) */
void model_mat_dummy_bytes(const struct model *m, const char *name, int rows, int cols, enum wq q, enum split how,
			   int lo, int n, size_t by[DT_COUNT]);
/* A 1-D float tensor [n] (any float dtype) as owned fp32 (dummy_value under dummy weights). */
int model_vec_f32(struct model *m, const char *name, int n, float dummy_value, float **out, struct err *e);

/* Rows [r0, r0 + nr) x cols [c0, c0 + nc) of src (a checkpoint tensor in the mapping, or dummy
 * weights) quantized to format f into memory m owns (counted as weights, and in the load
 * report's quantized bytes); *w's (row0, col0) is where it starts in src (f may widen the region
 * to whole scale blocks). file, name and flag (the option that asked) name it in errors. */
int model_quantize_mat(struct model *m, const struct wformat *f, const char *file, const char *name,
		       const struct wmat *src, int r0, int nr, int c0, int nc, const char *flag, struct wmat *w,
		       struct err *e);

/* Tensor parallelism: this rank's part [lo, lo + n) of n_total (heads, intermediate columns,
 * vocabulary rows); uneven totals give the first ranks one more. */
void model_tp_part(const struct model *m, int n_total, int *lo, int *n);

#endif
