/* The indexer's keys as the V4 kernels read them (v4_kernels.h, and its AMX level
 * v4_ix_amx.h, which v4_kernels.c dispatches to). */
#ifndef MLA_MODEL_V4_V4_KEYS_H
#define MLA_MODEL_V4_V4_KEYS_H

/* Where the indexer's keys are: packed (v4_pack_ix: e2m1 codes and e8m0 bytes) or float rows. */
struct v4k_keys {
	const float *const *rows; /* rows[e]: key e, packed or [di] floats */
	int packed;
};

#define V4K_MAX_DI 1024 /* the widest indexer head the kernels take */

#endif
