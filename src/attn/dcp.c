/* Decode context parallelism math (docs/mla-dcp.md §4.3-4.7). */
#include "attn/dcp.h"

#include <math.h>
#include <stddef.h>

int dcp_config_check(int tp_size, int dcp_size, int interleave, int block_size, struct err *e)
{
	if (dcp_size < 1 || tp_size < 1 || tp_size % dcp_size != 0)
		return err_set(e, "decode context parallel size %d must divide tensor parallel size %d", dcp_size,
			       tp_size);
	if (interleave < 1 || block_size < 1 || interleave > block_size || block_size % interleave != 0)
		return err_set(e, "kv cache interleave size %d must divide block size %d", interleave, block_size);
	return 0;
}

int dcp_local_seq_len(int L, int W, int r, int I)
{
	if (L <= 0)
		return 0;
	int base = L / I / W * I;
	int rem = L - base * W - r * I;
	return base + (rem < 0 ? 0 : rem > I ? I : rem);
}

void dcp_local_seq_lens(const int32_t *L, int n, int W, int r, int I, int32_t *out)
{
	for (int i = 0; i < n; i++)
		out[i] = dcp_local_seq_len(L[i], W, r, I);
}

int dcp_visible_keys(int L, int q, int t, int W, int r, int I, int local_len)
{
	/* positions 0 .. L - q + t are visible: their count on rank r */
	int n = dcp_local_seq_len(L - q + t + 1, W, r, I);
	return n < local_len ? n : local_len;
}

int64_t dcp_slot(const int32_t *bt_row, int block_size, int W, int r, int I, int64_t p)
{
	int64_t vb = (int64_t)block_size * W;
	int64_t o = p % vb;
	if ((o / I) % W != r)
		return -1;
	int64_t local_off = o / ((int64_t)W * I) * I + o % I;
	return (int64_t)bt_row[p / vb] * block_size + local_off;
}

static float sanitize(float x) { return (isnan(x) || x == INFINITY) ? -INFINITY : x; }

void dcp_lse_correct(const float *lses, int W, int B, int Hg, int rank, float *out, int D, float *lse_g)
{
	size_t plane = (size_t)B * Hg;
	for (size_t bh = 0; bh < plane; bh++) {
		float m = -INFINITY;
		for (int k = 0; k < W; k++) {
			float x = sanitize(lses[k * plane + bh]);
			if (x > m)
				m = x;
		}
		if (m == -INFINITY)
			m = 0;
		double s = 0;
		for (int k = 0; k < W; k++)
			s += exp((double)sanitize(lses[k * plane + bh]) - m);
		float g = s > 0 ? (float)(log(s) + m) : -INFINITY;
		/* the own LSE is used raw, then sanitized: NaN/+inf/empty give factor 0 */
		float d = sanitize(lses[rank * plane + bh] - g);
		float factor = d == -INFINITY ? 0.0f : expf(d);
		float *o = out + bh * D;
		if (factor == 0.0f) {
			for (int i = 0; i < D; i++)
				o[i] = 0.0f; /* never 0 * NaN */
		} else {
			for (int i = 0; i < D; i++)
				o[i] *= factor;
		}
		if (lse_g)
			lse_g[bh] = g;
	}
}

int dcp_context_chunk_local(int max_context_chunk, int W, int I)
{
	int unit = W * I;
	return (max_context_chunk + unit - 1) / unit * I;
}

int dcp_context_chunk_rows(int local_ctx_k, int c, int C_loc)
{
	int n = local_ctx_k - c * C_loc;
	return n < 0 ? 0 : n > C_loc ? C_loc : n;
}
