/* The paged latent KV cache: allocation and row read/write (docs/mla-dcp.md §2.2). */
#include "attn/kv_cache.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "ops/backend.h"

size_t kv_cache_bytes_per_block(int n_layers, int block_size, int row, enum dtype dtype)
{
	return (size_t)n_layers * (size_t)block_size * (size_t)row * dtype_size(dtype);
}

size_t kv_cache_row_bytes(int kv_lora_rank, int rope_dim, enum dtype dtype, bool sparse)
{
	if (dtype != DT_F8_E4M3)
		return (size_t)(kv_lora_rank + rope_dim) * dtype_size(dtype);
	struct kv_fp8_layout l;
	struct err e;
	return kv_fp8_layout_init(&l, kv_lora_rank, rope_dim, sparse, &e) < 0 ? 0 : (size_t)l.row_bytes;
}

size_t kv_cache_index_bytes_per_block(int n_layers, int block_size, int index_dim)
{
	if (index_dim <= 0)
		return 0;
	int groups = index_dim / kv_cache_index_group(index_dim);
	return (size_t)n_layers * (size_t)block_size * ((size_t)index_dim + sizeof(float) * (size_t)groups);
}

int kv_cache_init(struct kv_cache *kv, int n_layers, int n_blocks, int block_size, int kv_lora_rank, int rope_dim,
		  enum dtype dtype, struct err *e)
{
	return kv_cache_init_indexed(kv, n_layers, n_blocks, block_size, kv_lora_rank, rope_dim, dtype, 0, e);
}

int kv_cache_init_indexed(struct kv_cache *kv, int n_layers, int n_blocks, int block_size, int kv_lora_rank,
			  int rope_dim, enum dtype dtype, int index_dim, struct err *e)
{
	memset(kv, 0, sizeof *kv);
	if (n_layers <= 0 || n_blocks <= 0 || block_size <= 0)
		return err_set(e, "kv cache: bad geometry: %d layers, %d blocks, block size %d", n_layers, n_blocks,
			       block_size);
	if (kv_lora_rank <= 0 || rope_dim < 0)
		return err_set(e, "kv cache: bad row: kv_lora_rank %d, rope dim %d", kv_lora_rank, rope_dim);
	if (dtype != DT_F32 && dtype != DT_BF16 && dtype != DT_F8_E4M3)
		return err_set(e, "kv cache: unsupported dtype %s (want F32, BF16 or F8_E4M3)", dtype_name(dtype));
	/* the sparse models (with the indexer cache) take FlashMLA's fp8_ds_mla row */
	if (dtype == DT_F8_E4M3 && kv_fp8_layout_init(&kv->fp8, kv_lora_rank, rope_dim, index_dim > 0, e) < 0)
		return -1;
	if (index_dim < 0 || (index_dim > 0 && index_dim % kv_cache_index_group(index_dim)))
		return err_set(e, "kv cache: bad indexer key width %d", index_dim);
	/* the indexer addresses a layer's keys with 32-bit byte offsets (attn/indexer.c) */
	if (index_dim > 0 && (int64_t)n_blocks * block_size * index_dim >= INT32_MAX)
		return err_set(
			e,
			"kv cache: %d blocks of %d tokens are more than the indexer cache addresses (%lld tokens "
			"of %d-byte keys); lower --kv-cache-memory",
			n_blocks, block_size, (long long)(INT32_MAX / index_dim), index_dim);
	int row = kv_lora_rank + rope_dim;
	size_t row_bytes = dtype == DT_F8_E4M3 ? (size_t)kv->fp8.row_bytes : (size_t)row * dtype_size(dtype);
	size_t per_block = (size_t)n_layers * (size_t)block_size * row_bytes;
	if (per_block == 0 || (size_t)n_blocks > SIZE_MAX / per_block)
		return err_set(e, "kv cache: %d blocks of %zu bytes overflow", n_blocks, per_block);
	/* calloc: pages of a large cache stay untouched (and zero) until first written */
	kv->data = calloc((size_t)n_blocks, per_block);
	if (!kv->data)
		return err_set(e, "kv cache: out of memory for %d blocks of %zu bytes", n_blocks, per_block);
	if (index_dim > 0) {
		size_t slots = (size_t)n_layers * (size_t)n_blocks * (size_t)block_size;
		int groups = index_dim / kv_cache_index_group(index_dim);
		/* + 64: vector gathers read up to 3 bytes past a row (attn/indexer.c) */
		kv->index_codes = calloc(slots * (size_t)index_dim + 64, 1);
		kv->index_scales = calloc(slots * (size_t)groups, sizeof(float));
		if (!kv->index_codes || !kv->index_scales) {
			free(kv->data);
			free(kv->index_codes);
			free(kv->index_scales);
			memset(kv, 0, sizeof *kv);
			return err_set(e, "kv cache: out of memory for the indexer cache of %d blocks", n_blocks);
		}
		kv->index_dim = index_dim;
		kv->index_groups = groups;
	}
	kv->n_layers = n_layers;
	kv->n_blocks = n_blocks;
	kv->block_size = block_size;
	kv->kv_lora_rank = kv_lora_rank;
	kv->rope_dim = rope_dim;
	kv->row = row;
	kv->row_bytes = (int)row_bytes;
	kv->dtype = dtype;
	return 0;
}

void kv_cache_fini(struct kv_cache *kv)
{
	free(kv->data);
	free(kv->index_codes);
	free(kv->index_scales);
	memset(kv, 0, sizeof *kv);
}

void *kv_cache_layer_rows(const struct kv_cache *kv, int layer)
{
	CHECK(layer >= 0 && layer < kv->n_layers);
	size_t rows = (size_t)layer * (size_t)kv_cache_n_slots(kv);
	return (unsigned char *)kv->data + rows * (size_t)kv->row_bytes;
}

void *kv_cache_row_ptr(const struct kv_cache *kv, int layer, int64_t slot)
{
	int64_t n_slots = kv_cache_n_slots(kv);
	CHECK(layer >= 0 && layer < kv->n_layers && slot >= 0 && slot < n_slots);
	size_t idx = (size_t)layer * (size_t)n_slots + (size_t)slot;
	return (unsigned char *)kv->data + idx * (size_t)kv->row_bytes;
}

const float *kv_cache_row_f32(const struct kv_cache *kv, int layer, int64_t slot, float *buf)
{
	void *p = kv_cache_row_ptr(kv, layer, slot);
	if (kv->dtype == DT_F32)
		return p;
	if (kv->dtype == DT_F8_E4M3) {
		kv_fp8_decode_f32(&kv->fp8, p, buf, ops_level_best());
		return buf;
	}
	const uint16_t *h = p;
	for (int i = 0; i < kv->row; i++)
		buf[i] = bf16_to_f32(h[i]);
	return buf;
}

void kv_cache_write_strided(struct kv_cache *kv, int layer, const int64_t *slots, const float *kv_c, int ld_c,
			    const float *k_pe, int ld_pe, int n)
{
	int64_t n_slots = kv_cache_n_slots(kv);
	CHECK(layer >= 0 && layer < kv->n_layers);
	for (int i = 0; i < n; i++)
		CHECK(slots[i] < n_slots);
	if (kv->dtype == DT_F8_E4M3) {
		unsigned char *rows = kv_cache_layer_rows(kv, layer);
		for (int i = 0; i < n; i++)
			if (slots[i] >= 0)
				kv_fp8_encode(&kv->fp8, kv_c + (size_t)i * ld_c, k_pe + (size_t)i * ld_pe,
					      rows + (size_t)slots[i] * kv->row_bytes);
		return;
	}
	ops_rows_write(kv_cache_layer_rows(kv, layer), kv->dtype, kv->row, kv->kv_lora_rank, slots, n, kv_c, ld_c,
		       k_pe, ld_pe);
}

void kv_cache_round_rows(const struct kv_cache *kv, float *rows, int ld, int n)
{
	if (kv->dtype != DT_F8_E4M3)
		return;
	uint8_t buf[KV_FP8_MAX_ROW_BYTES];
	CHECK(kv->row_bytes <= (int)sizeof buf);
	enum ops_level level = ops_level_best();
	for (int i = 0; i < n; i++) {
		float *r = rows + (size_t)i * ld;
		kv_fp8_encode(&kv->fp8, r, r + kv->kv_lora_rank, buf);
		kv_fp8_decode_f32(&kv->fp8, buf, r, level);
	}
}

void kv_cache_write(struct kv_cache *kv, int layer, const int64_t *slots, const float *kv_c, const float *k_pe, int n)
{
	kv_cache_write_strided(kv, layer, slots, kv_c, kv->kv_lora_rank, k_pe, kv->rope_dim, n);
}

void kv_cache_index_write(struct kv_cache *kv, int layer, const int64_t *slots, const uint8_t *codes,
			  const float *scales, int n)
{
	int64_t n_slots = kv_cache_n_slots(kv);
	CHECK(kv->index_dim > 0 && layer >= 0 && layer < kv->n_layers);
	for (int i = 0; i < n; i++) {
		if (slots[i] < 0)
			continue;
		CHECK(slots[i] < n_slots);
		size_t at = (size_t)layer * (size_t)n_slots + (size_t)slots[i];
		memcpy(kv->index_codes + at * (size_t)kv->index_dim, codes + (size_t)i * kv->index_dim,
		       (size_t)kv->index_dim);
		memcpy(kv->index_scales + at * (size_t)kv->index_groups, scales + (size_t)i * kv->index_groups,
		       sizeof(float) * (size_t)kv->index_groups);
	}
}
