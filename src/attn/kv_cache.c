/* The paged latent KV cache: allocation and row read/write (mla-dcp-spec §2.2). */
#include "attn/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"

size_t kv_cache_bytes_per_block(int n_layers, int block_size, int row, enum dtype dtype)
{
	return (size_t)n_layers * (size_t)block_size * (size_t)row * dtype_size(dtype);
}

int kv_cache_init(struct kv_cache *kv, int n_layers, int n_blocks, int block_size,
		  int kv_lora_rank, int rope_dim, enum dtype dtype, struct err *e)
{
	memset(kv, 0, sizeof *kv);
	if (n_layers <= 0 || n_blocks <= 0 || block_size <= 0)
		return err_set(e, "kv cache: bad geometry: %d layers, %d blocks, block size %d",
			       n_layers, n_blocks, block_size);
	if (kv_lora_rank <= 0 || rope_dim < 0)
		return err_set(e, "kv cache: bad row: kv_lora_rank %d, rope dim %d", kv_lora_rank,
			       rope_dim);
	if (dtype != DT_F32 && dtype != DT_BF16)
		return err_set(e, "kv cache: unsupported dtype %s (want F32 or BF16)",
			       dtype_name(dtype));
	int row = kv_lora_rank + rope_dim;
	size_t per_block = kv_cache_bytes_per_block(n_layers, block_size, row, dtype);
	if (per_block == 0 || (size_t)n_blocks > SIZE_MAX / per_block)
		return err_set(e, "kv cache: %d blocks of %zu bytes overflow", n_blocks, per_block);
	/* calloc: pages of a large cache stay untouched (and zero) until first written */
	kv->data = calloc((size_t)n_blocks, per_block);
	if (!kv->data)
		return err_set(e, "kv cache: out of memory for %d blocks of %zu bytes", n_blocks,
			       per_block);
	kv->n_layers = n_layers;
	kv->n_blocks = n_blocks;
	kv->block_size = block_size;
	kv->kv_lora_rank = kv_lora_rank;
	kv->rope_dim = rope_dim;
	kv->row = row;
	kv->dtype = dtype;
	return 0;
}

void kv_cache_fini(struct kv_cache *kv)
{
	free(kv->data);
	memset(kv, 0, sizeof *kv);
}

void *kv_cache_row_ptr(const struct kv_cache *kv, int layer, int64_t slot)
{
	int64_t n_slots = kv_cache_n_slots(kv);
	CHECK(layer >= 0 && layer < kv->n_layers && slot >= 0 && slot < n_slots);
	size_t idx = ((size_t)layer * (size_t)n_slots + (size_t)slot) * (size_t)kv->row;
	return (unsigned char *)kv->data + idx * dtype_size(kv->dtype);
}

const float *kv_cache_row_f32(const struct kv_cache *kv, int layer, int64_t slot, float *buf)
{
	void *p = kv_cache_row_ptr(kv, layer, slot);
	if (kv->dtype == DT_F32)
		return p;
	const uint16_t *h = p;
	for (int i = 0; i < kv->row; i++)
		buf[i] = bf16_to_f32(h[i]);
	return buf;
}

static void put(const struct kv_cache *kv, void *dst, int off, const float *src, int n)
{
	if (kv->dtype == DT_F32) {
		memcpy((float *)dst + off, src, (size_t)n * sizeof(float));
		return;
	}
	uint16_t *h = (uint16_t *)dst + off;
	for (int i = 0; i < n; i++)
		h[i] = f32_to_bf16(src[i]);
}

void kv_cache_write_strided(struct kv_cache *kv, int layer, const int64_t *slots,
			    const float *kv_c, int ld_c, const float *k_pe, int ld_pe, int n)
{
	for (int i = 0; i < n; i++) {
		if (slots[i] < 0)
			continue;
		void *row = kv_cache_row_ptr(kv, layer, slots[i]);
		put(kv, row, 0, kv_c + (size_t)i * ld_c, kv->kv_lora_rank);
		put(kv, row, kv->kv_lora_rank, k_pe + (size_t)i * ld_pe, kv->rope_dim);
	}
}

void kv_cache_write(struct kv_cache *kv, int layer, const int64_t *slots, const float *kv_c,
		    const float *k_pe, int n)
{
	kv_cache_write_strided(kv, layer, slots, kv_c, kv->kv_lora_rank, k_pe, kv->rope_dim, n);
}
