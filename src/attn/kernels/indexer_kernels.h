/* The lightning indexer's scoring kernels (attn/indexer.c drives them): a block of IX_KB
 * cached keys decoded once from their fp8 codes, then every query token that sees them
 * scored against it, s[j] = sum_h w[h] * relu(q[h] . k_j). Each key is a lane of its own, so
 * its score does not depend on the keys beside it; a level's kernels give one score per key
 * whatever the batch or the layout (DCP ranks run the same ones). */
#ifndef MLA_ATTN_KERNELS_INDEXER_KERNELS_H
#define MLA_ATTN_KERNELS_INDEXER_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/cpu.h"

#define IX_KB 32        /* keys of a block (two AVX-512 vectors) */
#define IX_MAX_DIM 1024 /* config.c caps index_head_dim */
/* bytes of one decoded block (either layout), 64-aligned by the caller */
#define IX_KT_BYTES (sizeof(float) * IX_MAX_DIM * IX_KB)

struct ix_kernels {
	/* the n (<= IX_KB) keys whose codes sit at base + off[j] (scales sc[j], one per group of
	 * `group` values) into kt; keys past n score 0. The cache is padded: 4-byte gathers may
	 * read 3 bytes past a row. */
	void (*decode)(const uint8_t *base, const int32_t *off, const float *const *sc, int n, int dim, int group,
		       void *kt);
	/* s[IX_KB] for one token: q [H, dim] fp32 (qb: its bf16 copy for the bf16 kernels), w [H] */
	void (*dots)(const float *q, const uint16_t *qb, const float *w, int H, int dim, const void *kt, float *s);
	/* kt holds the codes' values without their scale (bf16 pairs) and the caller multiplies
	 * each score by its key's one scale: exact, a power of two (only when group == dim) */
	bool unscaled;
};

/* The kernels of level l for keys of dim values in scale groups of `group`. */
struct ix_kernels ix_kernels_for(enum ops_level l, int dim, int group);
/* q [n] (dequantized fp8 values, exact in bf16) as bf16 bits. */
void ix_q_to_bf16(const float *q, int n, uint16_t *out);

#endif
