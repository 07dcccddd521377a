/* safetensors checkpoints: one file or shards + model.safetensors.index.json, mmapped
 * (huge pages advised), every header validated. Tensors point into the mapping. */
#ifndef MLA_IO_SAFETENSORS_H
#define MLA_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/err.h"

#define ST_MAX_DIMS 4

struct st_tensor {
	const char *name;
	const char *file; /* path of the shard it lives in (for messages) */
	enum dtype dtype;
	int ndim;
	int64_t shape[ST_MAX_DIMS];
	const void *data; /* inside the mmapped shard; not necessarily aligned */
	size_t nbytes;
};

struct st_set; /* all shards of one checkpoint */

/* Opens DIR/model.safetensors.index.json (shards) or else DIR/model.safetensors, or else the
 * single *.safetensors file in DIR. Validates every header: header length bound, JSON well
 * formed, known dtype (F32, F16, BF16, F8_E4M3, F8_E8M0, I64, I32, I8, U8: DeepSeek-V4's FP4
 * experts are I8 pairs of e2m1 codes with F8_E8M0 scales), offsets inside the file,
 * non-overlapping, nbytes == dtype x shape.
 * Tensors of layers >= n_layers_keep (MTP modules) and "rotary_emb.inv_freq" are dropped
 * (n_layers_keep < 0 keeps all). Errors name the file and the tensor. */
int st_open(const char *dir, int n_layers_keep, struct st_set **out, struct err *e);
/* The same keeping only the tensors whose names begin with `prefix` (a string that outlives
 * the set), found by their names without it (Kimi K2.5's text model under "language_model.");
 * every header is still validated whole, and messages name tensors in full. */
int st_open_under(const char *dir, const char *prefix, int n_layers_keep, struct st_set **out, struct err *e);
void st_close(struct st_set *s);

int st_count(const struct st_set *s);
const struct st_tensor *st_at(const struct st_set *s, int i);
const struct st_tensor *st_find(const struct st_set *s, const char *name); /* NULL if absent */

/* Looks up `name` and checks it is 2-D [rows, cols] (or 1-D [rows] when cols == 0) with one
 * of the dtypes in `dtype_mask` (bit per enum dtype). Errors: "FILE: tensor NAME: ..." for a
 * wrong shape/dtype, "DIR: missing tensor NAME" when absent. */
int st_expect(const struct st_set *s, const char *name, unsigned dtype_mask, int64_t rows, int64_t cols,
	      const struct st_tensor **out, struct err *e);

#define ST_DT(d) (1u << (d))
#define ST_FLOATS (ST_DT(DT_F32) | ST_DT(DT_F16) | ST_DT(DT_BF16))

#endif
