/* DeepSeek-V4's per-sequence state slots and the boundary snapshots that let a sequence
 * continue from a cached prefix (forward_v4.h).
 *
 * A slot is known by the blocks of its last R + 1 fed positions (ck_block) and its position
 * pos: a chunk at start > 0 finds the slot with start in [pos - R, pos] whose block of
 * start - 1 is its block table's, and takes it back to start when start < pos (R: the
 * rollback of speculative drafts, 0 without them). Inside a block that block is the
 * sequence's own (the engine shares only full blocks); at a block boundary it may be a full
 * block that another sequence shares through the prefix cache, and then the state at that
 * boundary is a snapshot's: the window rows and compressor states of every main layer as they were when the
 * block was completed, saved by the forward that completed it. Any sequence whose blocks up to
 * the boundary are the same (the same prefix: the cache's chained hashes) continues exactly
 * from it. */
#include <string.h>

#include "model/v4_seqstate.h"

static long seq_start(const struct batch *b, int k) { return b->positions[b->attn.query_start[k]]; }
static long seq_end(const struct batch *b, int k)
{
	return seq_start(b, k) + (b->attn.query_start[k + 1] - b->attn.query_start[k]);
}
static const int32_t *seq_bt(const struct batch *b, int k)
{
	return b->attn.block_table + (size_t)k * (size_t)b->attn.max_blocks;
}

/* one layer's state: the window ring first, then the compressors' (v4_seq_attn_init's carve) */
static void copy_layer(const struct v4_model *v, int li, struct v4_seq_attn *dst, const struct v4_seq_attn *src)
{
	memcpy(dst->ring, src->ring, sizeof(float) * v4_seq_attn_floats(v4_state_layer(v, li)));
}

static struct v4_snap *find_snap(const struct v4_model *v, int32_t block)
{
	for (int i = 0; i < v->n_snaps; i++)
		if (v->snaps[i].valid && v->snaps[i].block == block)
			return &v->snaps[i];
	return NULL;
}

/* With the MTP module loaded a hit needs its state in the snapshot too. */
bool v4_resumable(const struct v4_model *v, int32_t block)
{
	const struct v4_snap *sn = find_snap(v, block);
	return sn && (!v->hid || sn->mtp_valid);
}

/* a slot not taken in this step: one that held a sequence with the same first block (gone:
 * a sequence at position 0 owns its first block), a free one, else the least recently used */
static struct v4_slot *fresh_slot(struct v4_model *v, int32_t first)
{
	struct v4_slot *s = NULL;
	for (int i = 0; i < v->n_slots && !s && first >= 0; i++)
		if (v->slots[i].first_block == first && v->slots[i].last_step != v->step)
			s = &v->slots[i];
	for (int i = 0; i < v->n_slots && !s; i++)
		if (v->slots[i].first_block < 0)
			s = &v->slots[i];
	for (int i = 0; i < v->n_slots && !s; i++)
		if (v->slots[i].last_step != v->step && (!s || v->slots[i].last_step < s->last_step))
			s = &v->slots[i];
	return s;
}

/* the main forward's slot of sequence k at start */
static int claim_main(struct v4_model *v, const struct batch *b, int k, struct v4_slot **out, struct err *e)
{
	int bs = v->pool.bs, L = v->c.num_hidden_layers;
	const int32_t *bt = seq_bt(b, k);
	long start = seq_start(b, k);
	int R = v->rollback;
	struct v4_slot *s = NULL;
	if (start > 0)
		for (int i = 0; i < v->n_slots && !s; i++) {
			struct v4_slot *c = &v->slots[i];
			if (c->first_block >= 0 && c->last_step != v->step && start <= c->pos && c->pos - start <= R &&
			    c->ck_block[(start - 1) % (R + 1)] == bt[(start - 1) / bs])
				s = c;
		}
	if (s && s->pos > start) { /* drafts rejected: back to start */
		for (int l = 0; l < L; l++)
			v4_seq_attn_rollback(v4_state_layer(v, l), &s->layer[l], start);
		s->pos = start;
	}
	if (!s) {
		const struct v4_snap *sn = start > 0 && start % bs == 0 ? find_snap(v, bt[start / bs - 1]) : NULL;
		if (start > 0 && !sn)
			return err_set(e,
				       "DeepSeek-V4: sequence %d continues at position %ld, but its window rows and "
				       "compressor states there are neither kept nor a snapshot of a cached block",
				       k, start);
		if (!(s = fresh_slot(v, start == 0 ? bt[0] : -1)))
			return err_set(e, "DeepSeek-V4: more than %d sequences in one step", v->n_slots);
		bool with_mtp = sn && sn->mtp_valid;
		for (int l = 0; l < v->n_state_layers; l++)
			if (sn && (l < L || with_mtp))
				copy_layer(v, l, &s->layer[l], &sn->layer[l]);
			else
				v4_seq_attn_reset(v4_state_layer(v, l), &s->layer[l]);
		if (sn)
			((struct v4_snap *)sn)->used = v->step;
		s->pos = start;
		s->mtp_pos = start == 0 || with_mtp ? start : -1;
		for (int j = 0; j <= R; j++)
			s->ck_block[j] = -1;
	}
	s->first_block = bt[0];
	*out = s;
	return 0;
}

/* an MTP step continues the slot of its sequence: the one whose last fed position's block is
 * the sequence's own there (the main step wrote it: no other sequence has it); its MTP state
 * from position 0, where the last MTP step stopped, or a snapshot's */
static int claim_mtp(struct v4_model *v, const struct batch *b, int k, struct v4_slot **out, struct err *e)
{
	int L = v->c.num_hidden_layers, bs = v->pool.bs, R = v->rollback;
	long start = seq_start(b, k);
	const int32_t *bt = seq_bt(b, k);
	struct v4_slot *s = NULL;
	for (int i = 0; i < v->n_slots && !s; i++) {
		struct v4_slot *c = &v->slots[i];
		if (c->first_block >= 0 && c->last_step != v->step && c->pos >= 1 &&
		    (c->pos - 1) / bs < b->attn.max_blocks &&
		    bt[(c->pos - 1) / bs] == c->ck_block[(c->pos - 1) % (R + 1)])
			s = c;
	}
	if (s && start == 0) {
		s->mtp_pos = 0;
		for (int l = L; l < v->n_state_layers; l++)
			v4_seq_attn_reset(v4_state_layer(v, l), &s->layer[l]);
	} else if (s && start < s->mtp_pos && s->mtp_pos - start <= v->rollback) { /* chained drafts back */
		for (int l = L; l < v->n_state_layers; l++)
			v4_seq_attn_rollback(v4_state_layer(v, l), &s->layer[l], start);
		s->mtp_pos = start;
	} else if (!s || s->mtp_pos != start) {
		return err_set(e,
			       "DeepSeek-V4 MTP: sequence %d continues at position %ld, but the MTP module's state "
			       "is kept only for sequences it ran from position 0 without a gap or a step back",
			       k, start);
	}
	*out = s;
	return 0;
}

int v4_claim_slots(struct v4_model *v, const struct batch *b, bool mtp, struct v4_slot **out, struct err *e)
{
	const struct attn_meta *a = &b->attn;
	v->step++;
	for (int k = 0; k < a->n_seqs; k++) {
		long end = seq_end(b, k);
		if (end > v->max_len)
			return err_set(e, "DeepSeek-V4: position %ld past max_model_len %d", end - 1, v->max_len);
		if ((long)a->max_blocks * v->pool.bs < end)
			return err_set(e, "DeepSeek-V4: sequence %d's %d blocks do not hold position %ld", k,
				       a->max_blocks, end - 1);
		if (mtp ? claim_mtp(v, b, k, &out[k], e) : claim_main(v, b, k, &out[k], e))
			return -1;
		out[k]->last_step = v->step;
	}
	return 0;
}

void v4_advance(struct v4_model *v, const struct batch *b, bool mtp, struct v4_slot **slots)
{
	for (int k = 0; k < b->attn.n_seqs; k++) {
		long end = seq_end(b, k);
		if (mtp) {
			slots[k]->mtp_pos = end;
			continue;
		}
		long start = seq_start(b, k);
		if (end == start)
			continue;
		int bs = v->pool.bs, R = v->rollback;
		const int32_t *bt = seq_bt(b, k);
		/* this step wrote positions start .. end - 1, so no other live sequence has fed
		 * positions in their blocks (one admitted in this step may share a full one it hits,
		 * but its own last positions are in blocks of its own): any other slot known by one
		 * is a finished sequence's that had it before */
		for (int i = 0; i < v->n_slots; i++) {
			struct v4_slot *o = &v->slots[i];
			bool gone = false;
			for (int j = 0; o != slots[k] && !gone && o->first_block >= 0 && j <= R; j++)
				for (long x = start / bs; x <= (end - 1) / bs && !gone; x++)
					gone = o->ck_block[j] == bt[x];
			if (gone)
				o->first_block = -1;
		}
		for (long x = end - R - 1 > start ? end - R - 1 : start; x < end; x++)
			slots[k]->ck_block[x % (R + 1)] = bt[x / bs];
		slots[k]->pos = end;
	}
}

/* the snapshot a save takes: an invalid one, else the least recently used that no save of this
 * step holds */
static int take_snap(struct v4_model *v, const struct v4_save *sv, int n)
{
	int best = -1;
	for (int i = 0; i < v->n_snaps; i++) {
		bool held = false;
		for (int j = 0; j < n && !held; j++)
			held = sv[j].snap == i;
		if (held)
			continue;
		if (!v->snaps[i].valid)
			return i;
		if (best < 0 || v->snaps[i].used < v->snaps[best].used)
			best = i;
	}
	return best;
}

/* the MTP step's: into the snapshots the main steps saved of the blocks it passes */
static int plan_mtp_saves(struct v4_model *v, const struct batch *b, struct v4_save *sv)
{
	int bs = v->pool.bs, n = 0;
	for (int k = 0; k < b->attn.n_seqs; k++)
		for (long p = (seq_start(b, k) / bs + 1) * bs; p <= seq_end(b, k) && n < v->n_snaps; p += bs) {
			struct v4_snap *sn = find_snap(v, seq_bt(b, k)[p / bs - 1]);
			if (sn && !sn->mtp_valid)
				sv[n++] = (struct v4_save){k, p, (int)(sn - v->snaps)};
		}
	return n;
}

int v4_plan_saves(struct v4_model *v, const struct batch *b, bool mtp, struct v4_save *sv)
{
	if (mtp)
		return plan_mtp_saves(v, b, sv);
	int bs = v->pool.bs, n = 0, cap = v->n_snaps / 2 > 0 ? v->n_snaps / 2 : 1;
	/* every block this step completes changes: its old snapshot, if any, is void */
	for (int k = 0; k < b->attn.n_seqs; k++)
		for (long p = (seq_start(b, k) / bs + 1) * bs; p <= seq_end(b, k); p += bs) {
			struct v4_snap *o = find_snap(v, seq_bt(b, k)[p / bs - 1]);
			if (o)
				o->valid = o->mtp_valid = false;
		}
	/* the latest boundaries of each sequence first, in turn, up to half the snapshots */
	for (int back = 0, more = 1; more && n < cap; back++) {
		more = 0;
		for (int k = 0; k < b->attn.n_seqs && n < cap; k++) {
			long p = (seq_end(b, k) / bs - back) * bs;
			if (p <= seq_start(b, k) || p <= 0)
				continue;
			more = 1;
			int i = take_snap(v, sv, n);
			if (i < 0)
				return n;
			v->snaps[i].valid = v->snaps[i].mtp_valid = false;
			v->snaps[i].block = seq_bt(b, k)[p / bs - 1];
			sv[n++] = (struct v4_save){k, p, i};
		}
	}
	return n;
}

void v4_save_layer(struct v4_model *v, int snap, int li, const struct v4_seq_attn *st)
{
	copy_layer(v, li, &v->snaps[snap].layer[li], st);
}

void v4_commit_saves(struct v4_model *v, const struct v4_save *sv, int n, bool mtp)
{
	for (int j = 0; j < n; j++) {
		struct v4_snap *sn = &v->snaps[sv[j].snap];
		if (mtp && sn->valid) /* still the block the main step saved */
			sn->mtp_valid = true;
		else if (!mtp)
			sn->valid = true;
		sn->used = v->step;
	}
}
