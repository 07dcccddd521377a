/* Step plan packing (plan.h). */
#include "engine/plan.h"

#include <string.h>

#include "model/model.h"

#define PLAN_MAGIC 0x4e4c5053 /* "SPLN" */

struct plan_header {
	int32_t magic, n_tokens, n_seqs, max_blocks, n_decodes, n_decode_tokens, n_logits;
	int32_t block_size, flags, pad;
};

static size_t al8(size_t n) { return (n + 7) & ~(size_t)7; }

static size_t arrays_size(int64_t n_tokens, int64_t n_seqs, int64_t max_blocks, int64_t n_logits, int32_t flags)
{
	return al8(4 * (size_t)n_tokens) * (flags & STEP_PLAN_MTP ? 3 : 2) + al8(4 * (size_t)(n_seqs + 1)) +
	       al8(4 * (size_t)n_seqs) + al8(4 * (size_t)(n_seqs * max_blocks)) + 8 * (size_t)n_tokens +
	       al8(4 * (size_t)n_logits);
}

size_t step_plan_packed_size(const struct step_plan *p)
{
	return sizeof(struct plan_header) + arrays_size(p->n_tokens, p->n_seqs, p->max_blocks, p->n_logits, p->flags);
}

static unsigned char *put(unsigned char *o, const void *src, size_t n)
{
	if (n)
		memcpy(o, src, n);
	memset(o + n, 0, al8(n) - n);
	return o + al8(n);
}

void step_plan_pack(const struct step_plan *p, void *buf)
{
	struct plan_header h = {PLAN_MAGIC,         p->n_tokens, p->n_seqs,     p->max_blocks, p->n_decodes,
				p->n_decode_tokens, p->n_logits, p->block_size, p->flags,      0};
	unsigned char *o = buf;
	memcpy(o, &h, sizeof h);
	o += sizeof h;
	o = put(o, p->tokens, 4 * (size_t)p->n_tokens);
	o = put(o, p->positions, 4 * (size_t)p->n_tokens);
	o = put(o, p->query_start, 4 * (size_t)(p->n_seqs + 1));
	o = put(o, p->seq_lens, 4 * (size_t)p->n_seqs);
	o = put(o, p->block_table, 4 * (size_t)p->n_seqs * (size_t)p->max_blocks);
	o = put(o, p->slots, 8 * (size_t)p->n_tokens);
	o = put(o, p->logits_rows, 4 * (size_t)p->n_logits);
	if (p->flags & STEP_PLAN_MTP)
		put(o, p->hidden_rows, 4 * (size_t)p->n_tokens);
}

int step_plan_unpack(const void *buf, size_t n, struct step_plan *p, struct err *e)
{
	struct plan_header h;
	if (n < sizeof h)
		return err_set(e, "step plan: %zu bytes, shorter than its header", n);
	memcpy(&h, buf, sizeof h);
	if (h.magic != PLAN_MAGIC)
		return err_set(e, "step plan: bad magic 0x%x", (unsigned)h.magic);
	if (h.n_tokens < 0 || h.n_seqs < 0 || h.max_blocks < 0 || h.n_logits < 0 || h.n_decodes < 0 ||
	    h.n_decodes > h.n_seqs || h.n_decode_tokens < 0 || h.n_decode_tokens > h.n_tokens ||
	    h.n_logits > h.n_tokens || h.block_size < 0)
		return err_set(e, "step plan: bad counts (tokens %d, seqs %d, blocks %d, logits %d)", h.n_tokens,
			       h.n_seqs, h.max_blocks, h.n_logits);
	if (n != sizeof h + arrays_size(h.n_tokens, h.n_seqs, h.max_blocks, h.n_logits, h.flags))
		return err_set(e, "step plan: %zu bytes do not match its counts", n);
	memset(p, 0, sizeof *p);
	p->n_tokens = h.n_tokens;
	p->n_seqs = h.n_seqs;
	p->max_blocks = h.max_blocks;
	p->n_decodes = h.n_decodes;
	p->n_decode_tokens = h.n_decode_tokens;
	p->n_logits = h.n_logits;
	p->block_size = h.block_size;
	p->flags = h.flags;
	const unsigned char *o = (const unsigned char *)buf + sizeof h;
	p->tokens = (const int32_t *)o;
	o += al8(4 * (size_t)h.n_tokens);
	p->positions = (const int32_t *)o;
	o += al8(4 * (size_t)h.n_tokens);
	p->query_start = (const int32_t *)o;
	o += al8(4 * (size_t)(h.n_seqs + 1));
	p->seq_lens = (const int32_t *)o;
	o += al8(4 * (size_t)h.n_seqs);
	p->block_table = (const int32_t *)o;
	o += al8(4 * (size_t)h.n_seqs * (size_t)h.max_blocks);
	p->slots = (const int64_t *)o;
	o += 8 * (size_t)h.n_tokens;
	p->logits_rows = (const int32_t *)o;
	o += al8(4 * (size_t)h.n_logits);
	if (h.flags & STEP_PLAN_MTP)
		p->hidden_rows = (const int32_t *)o;
	return 0;
}

void step_plan_to_batch(const struct step_plan *p, struct batch *b)
{
	memset(b, 0, sizeof *b);
	b->n_tokens = p->n_tokens;
	b->tokens = p->tokens;
	b->positions = p->positions;
	b->n_logits = p->n_logits;
	b->logits_rows = p->logits_rows;
	b->hidden_rows = p->hidden_rows;
	b->hidden_from_mtp = (p->flags & STEP_PLAN_MTP_CHAIN) != 0;
	struct attn_meta *m = &b->attn;
	m->n_seqs = p->n_seqs;
	m->n_tokens = p->n_tokens;
	m->query_start = p->query_start;
	m->seq_lens = p->seq_lens;
	m->block_table = p->block_table;
	m->max_blocks = p->max_blocks;
	m->slots = p->slots;
	m->n_decodes = p->n_decodes;
	m->n_decode_tokens = p->n_decode_tokens;
	m->dcp_size = 1;
	m->dcp_rank = 0;
	m->dcp_interleave = 1;
	m->local_seq_lens = p->seq_lens;
	m->plan = NULL;
}
