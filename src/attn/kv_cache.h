/* Row access to the paged latent KV cache (struct kv_cache in attn.h): writing a step's
 * [kv_c | k_pe] rows by slot, and reading a row as fp32 whatever the cache dtype. */
#ifndef MLA_ATTN_KV_CACHE_H
#define MLA_ATTN_KV_CACHE_H

#include <stdint.h>

#include "attn/attn.h"

/* Total rows (slots) per layer: n_blocks * block_size. */
static inline int64_t kv_cache_n_slots(const struct kv_cache *kv) { return (int64_t)kv->n_blocks * kv->block_size; }

/* Slot of local key index k of a sequence whose pages are `bt_row` (docs/mla-dcp.md §2.2). */
static inline int64_t kv_cache_slot(const int32_t *bt_row, int block_size, int64_t k)
{
	return (int64_t)bt_row[k / block_size] * block_size + k % block_size;
}

/* Layer `layer`'s rows [n_slots, row_bytes]: a kv_write's table (ops/backend.h) for F32 / BF16;
 * an fp8 cache is written through kv_cache_write* only. */
void *kv_cache_layer_rows(const struct kv_cache *kv, int layer);
/* Raw pointer to row `slot` of `layer` (row_bytes). CHECKs the bounds. */
void *kv_cache_row_ptr(const struct kv_cache *kv, int layer, int64_t slot);

/* Row `slot` of `layer` as fp32 [row]: a pointer into the cache for DT_F32, else the row
 * converted into `buf` [row] and `buf` returned. */
const float *kv_cache_row_f32(const struct kv_cache *kv, int layer, int64_t slot, float *buf);

/* Writes n tokens: row slots[i] = [kv_c[i] (kv_lora_rank) | k_pe[i] (rope_dim)], converting
 * to the cache dtype (fp8: encoded, kv_fp8.h). slots[i] < 0 (padding, or a position owned by another DCP rank) is
 * skipped. kv_c: [n, kv_lora_rank], k_pe: [n, rope_dim], both contiguous. */
void kv_cache_write(struct kv_cache *kv, int layer, const int64_t *slots, const float *kv_c, const float *k_pe, int n);
/* Same with row strides (in floats) for kv_c and k_pe, e.g. both inside one [n, 576] buffer. */
void kv_cache_write_strided(struct kv_cache *kv, int layer, const int64_t *slots, const float *kv_c, int ld_c,
			    const float *k_pe, int ld_pe, int n);

/* An fp8 cache: rows [n, row] (ld floats apart) become the values the cache holds for them
 * (encoded and decoded, kv_fp8.h); other dtypes: nothing. */
void kv_cache_round_rows(const struct kv_cache *kv, float *rows, int ld, int n);

/* The indexer cache (V3.2): writes n tokens' keys, codes [n, index_dim] (e4m3) and scales
 * [n, index_groups], at slots[i] (< 0 skipped). */
void kv_cache_index_write(struct kv_cache *kv, int layer, const int64_t *slots, const uint8_t *codes,
			  const float *scales, int n);
/* Row `slot` of `layer` of the indexer cache: index_dim codes, and its index_groups scales. */
static inline const uint8_t *kv_cache_index_codes(const struct kv_cache *kv, int layer, int64_t slot)
{
	return kv->index_codes + ((size_t)layer * (size_t)kv_cache_n_slots(kv) + (size_t)slot) * (size_t)kv->index_dim;
}
static inline const float *kv_cache_index_scales(const struct kv_cache *kv, int layer, int64_t slot)
{
	return kv->index_scales +
	       ((size_t)layer * (size_t)kv_cache_n_slots(kv) + (size_t)slot) * (size_t)kv->index_groups;
}

#endif
