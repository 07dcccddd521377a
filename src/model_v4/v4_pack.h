/* DeepSeek-V4's compressed entries as the paged pool stores them. Their values are already
 * quantisation round trips (v4_quant.h): a main entry's non-RoPE dims are e4m3 x a power-of-two
 * scale per 64, an indexer key is e2m1 x a power-of-two scale per 32. So they are stored as
 * those codes and e8m0 scale bytes, and unpacked bit for bit:
 *   main entry [d] (rd RoPE dims last): [rd] float32 RoPE dims, then [d - rd] e4m3 codes and
 *     [ceil((d - rd) / 64)] e8m0 bytes
 *   indexer key [d]: [d / 2] e2m1 codes (element 2i in the low nibble), [ceil(d / 32)] e8m0
 * each rounded up to whole floats (the pool's unit). A block's scale is recomputed from the
 * stored values: it is a power of two no larger than the one that made them, so every value
 * divided by it is still a code. */
#ifndef MLA_MODEL_V4_V4_PACK_H
#define MLA_MODEL_V4_V4_PACK_H

#include <stddef.h>

/* floats of a packed main entry of d dims, rd of them RoPE */
size_t v4_pack_kv_floats(int d, int rd);
/* x [d] (an fp8 round trip of [:d - rd]) -> dst [v4_pack_kv_floats]; and back to x [d] */
void v4_pack_kv(const float *x, int d, int rd, float *dst);
void v4_unpack_kv(const float *src, int d, int rd, float *x);

/* floats of a packed indexer key of d dims (d even) */
size_t v4_pack_ix_floats(int d);
/* x [d] (an fp4 round trip in blocks of 32) -> dst [v4_pack_ix_floats]; and back */
void v4_pack_ix(const float *x, int d, float *dst);
void v4_unpack_ix(const float *src, int d, float *x);

#endif
