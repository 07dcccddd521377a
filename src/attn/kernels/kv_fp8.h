/* The 8-bit latent cache row (--kv-cache-dtype fp8): e4m3 codes with fp32 scales, written when the
 * cache is written and decoded inside the attention kernels.
 *
 * The scale rule (vLLM's concat_and_cache_ds_mla, FlashMLA's fp8_ds_mla): the latent kv_c is cut
 * into groups of G = min(128, Lkv) values; a group's scale is s = max(amax / 448, FLT_MIN) in
 * fp32 (amax: its largest |x|), its codes e4m3(x / s) rounded to nearest even and saturated at
 * ±448; a value decodes as code * s.
 *
 * Two layouts of one row (bytes):
 *   fp8_ds_mla (sparse models, V3.2: FlashMLA's layout, 656 bytes for Lkv 512, dr 64):
 *       [Lkv e4m3 | Lkv / G fp32 scales | dr bf16 rope values]
 *   dense (V2/V3 and the rest, 596 bytes): the rope part in e4m3 too, under its own scale
 *       (same rule over its dr values):
 *       [Lkv e4m3 | dr e4m3 | Lkv / G + 1 fp32 scales]
 * The dense backends drop the bf16 rope because its 128 bytes would hold the capacity at 1.76x
 * the bf16 cache's (1152 / 656) instead of 1.93x (1152 / 596); the rope values keep a scale of
 * their own, their range being unlike the latent's. */
#ifndef MLA_ATTN_KERNELS_KV_FP8_H
#define MLA_ATTN_KERNELS_KV_FP8_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "ops/cpu.h"

#define KV_FP8_MAX_SCALES 64       /* scales of a row at most: latent widths up to 63 x 128 */
#define KV_FP8_MAX_ROW_BYTES 16384 /* rows a caller may encode into a stack buffer */

struct kv_fp8_layout {
	int nope, rope; /* Lkv, dr: values of the row */
	int group;      /* latent values per scale */
	bool rope_bf16; /* fp8_ds_mla: rope as bf16; else e4m3 with the last scale */
	int n_scales;   /* Lkv / group (+ 1 for an e4m3 rope) */
	int scale_off;  /* byte offset of the fp32 scales */
	int rope_off;   /* byte offset of the rope values */
	int row_bytes;
};

/* The layout of a row of nope + rope values; fails (naming the widths) where nope is not a
 * multiple of its group. */
int kv_fp8_layout_init(struct kv_fp8_layout *l, int nope, int rope, bool rope_bf16, struct err *e);

/* row = the encoding of [kv_c (nope) | k_pe (rope)] */
void kv_fp8_encode(const struct kv_fp8_layout *l, const float *kv_c, const float *k_pe, uint8_t *row);
/* value k of the row (one at a time: the oracle backend's reading) */
float kv_fp8_value(const struct kv_fp8_layout *l, const uint8_t *row, int k);
/* dst [nope + rope] = the row's values as fp32, exactly (code * scale), at a kernel level */
void kv_fp8_decode_f32(const struct kv_fp8_layout *l, const uint8_t *row, float *dst, enum ops_level level);
/* dst [nope + rope] = the same values rounded to bf16 (level >= OPS_AVX512_BF16 vectorises it;
 * the same bits at any level, but that there a value below FLT_MIN may become a zero, as the
 * bf16 dot products read such inputs anyway): the rows of the dp and AMX kernels */
void kv_fp8_decode_bf16(const struct kv_fp8_layout *l, const uint8_t *row, uint16_t *dst, enum ops_level level);
/* The parts of a row, decoded one at a time by kv_fp8_decode_bf16_part: its latent groups, then
 * the rope values (if any) */
static inline int kv_fp8_parts(const struct kv_fp8_layout *l) { return l->nope / l->group + (l->rope > 0); }
/* part `part` of kv_fp8_decode_bf16 (dst: the whole row's values, as there) */
void kv_fp8_decode_bf16_part(const struct kv_fp8_layout *l, const uint8_t *row, int part, uint16_t *dst,
			     enum ops_level level);

#endif
