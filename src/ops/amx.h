/* The AMX tile configuration shared by the tile kernels (ops/gemm_amx.c, attn/kernels/mqa_amx.c).
 * It is per-thread state: a kernel call loads its own and releases the tiles before it
 * returns (_tile_release), so tile users never interleave on a thread. */
#ifndef MLA_OPS_AMX_H
#define MLA_OPS_AMX_H

#include <stdint.h>
#include <string.h>

/* palette 1: 64 bytes, colsb and rows per tile */
struct amx_tile_cfg {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

/* Loads tiles 0-7 as 64-byte rows, rows[i] rows each. Inline asm: gcc 12's _tile_loadconfig
 * does not tell the compiler that it reads the configuration, so the stores that fill it can
 * be dropped (seen: a #GP on ldtilecfg). */
static inline void amx_tiles_config(const uint8_t rows[8])
{
	struct amx_tile_cfg c;
	memset(&c, 0, sizeof c);
	c.palette = 1;
	for (int i = 0; i < 8; i++) {
		c.rows[i] = rows[i];
		c.colsb[i] = 64;
	}
	__asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory");
}

#endif
