/* A model family's tensors as one declarative table, as llama.cpp's llama-arch.cpp lists an
 * architecture's: a row per tensor (its name pattern, where it lands, its shape from the config,
 * the formats it may have and become, how tensor parallelism cuts it, on which layers it is),
 * and the walkers that loading (with its checks), tensor-parallel slicing and prepacking all
 * go through (tensors.c). A family (family.h) holds its table: DeepSeek's is
 * tensors_deepseek.c; a weight added there is loaded, checked, cut and packed. */
#ifndef MLA_MODEL_TENSORS_H
#define MLA_MODEL_TENSORS_H

#include <stddef.h>

#include "model/weights.h"

enum tensor_kind {
	TK_MAT,     /* a struct wmat read through weights.h (model_mat / model_mat_part) */
	TK_VEC,     /* a float * [rows] (model_vec_f32): norms, biases */
	TK_DERIVED, /* a struct wmat built at load by another row's `after` (no name): packed only */
};

/* The struct a row's offset is into: layer i's struct layer_weights, the MTP module's struct
 * mtp_weights (rows present on the MTP layer only), or struct model itself (the tensors outside
 * the layers: the walkers take them as layer TENSORS_MODEL). */
enum tensor_base { TB_LAYER, TB_MTP, TB_MODEL };
#define TENSORS_MODEL (-1)

enum tensor_flag {
	TF_NO_PACK = 1, /* not multiplied by a GEMM (indexed by row): never packed */
	TF_VIEWED = 2,  /* the forward also reads row views of it: the values quantized at load stay
			 * after packing (model_pack.c) */
};

/* Shapes and counts are symbols of the family (nonzero), valued by its table's dim(): the
 * config's sizes and their products (H * (dn + dr), ...), so that a row reads as its shape. */
struct tensor_spec {
	const char *name; /* "model.layers.%d.<...>": %d the layer (then the array index) */
	enum tensor_kind kind;
	enum tensor_base base;
	size_t off;     /* offsetof: a struct wmat, a float *, or (count) a struct wmat * */
	int rows, cols; /* [rows, cols]; TK_VEC: [rows] */
	int count;      /* 0: one tensor; else an array of dim(count) (experts: %d the index) */
	bool (*on)(const struct model *m, int layer); /* NULL: every layer of its base */
	enum wq q;  /* the formats it may have and become (weights.h); TK_VEC: floats */
	float fill; /* TK_VEC under dummy weights (1 for norms, 0 for biases) */
	/* tensor parallelism: split by rows or columns into this rank's part of dim(tp_over) units
	 * (heads, intermediate columns) of dim(tp_per) rows or columns each (0: 1) */
	enum split split;
	int tp_over, tp_per;
	bool tp_whole; /* read whole, then viewed: `after` sees the whole matrix */
	/* called once the row is loaded (with the whole matrix for TK_MAT): derived weights */
	int (*after)(struct model *m, int layer, const struct wmat *whole, struct err *e);
	unsigned flags; /* enum tensor_flag */
};

struct tensor_table {
	const char *family;
	const struct tensor_spec *rows;
	int n;
	int (*dim)(const struct model *m, int sym); /* a shape / count symbol's value */
};

/* Whether row s has a tensor on layer `layer` (the MTP layer: layers[num_hidden_layers]; the
 * model's own rows: TENSORS_MODEL). */
bool tensors_on(const struct model *m, const struct tensor_spec *s, int layer);
/* Loads and checks every row present on the layer into its field (arrays allocated here),
 * this rank's part of each split row; an array's consecutive rows load index by index (the
 * experts' gate, up, down, then the next expert's). Errors name the file and the tensor. */
int tensors_load(struct model *m, const struct tensor_table *t, int layer, struct err *e);
/* The TP slicing of row s: this rank's [lo, lo + n) of its rows (SPLIT_ROWS) or columns
 * (SPLIT_COLS), and the whole extent in *total; [0, total) when not split or without TP. */
void tensors_tp_part(const struct model *m, const struct tensor_table *t, const struct tensor_spec *s, int *lo, int *n,
		     int *total);
/* fn over every matrix (TK_MAT and TK_DERIVED, each array element) present on the layer that
 * a GEMM multiplies (not TF_NO_PACK), in table order; stops at the first nonzero return. */
typedef int (*tensors_mat_fn)(struct model *m, struct wmat *w, unsigned flags, void *ctx, struct err *e);
int tensors_each_mat(struct model *m, const struct tensor_table *t, int layer, tensors_mat_fn fn, void *ctx,
		     struct err *e);

/* What --load-format dummy allocates for the rows present on the layer, by the dtype each
 * becomes (model_mat_dummy_bytes; vectors as f32), added to by[]; derived rows not counted */
void tensors_dummy_bytes(const struct model *m, const struct tensor_table *t, int layer, size_t by[DT_COUNT]);

#endif
