/* DeepSeek-V4's per-sequence state slots and prefix-cache snapshots (v4_seqstate.c). */
#ifndef MLA_MODEL_V4_SEQSTATE_H
#define MLA_MODEL_V4_SEQSTATE_H

#include "model/v4_model.h"

/* The step's slots (the main forward's or, mtp, the MTP step's), each sequence
 * continuing where it stopped or from the snapshot of the cached block it starts after */
int v4_claim_slots(struct v4_model *v, const struct batch *b, bool mtp, struct v4_slot **out, struct err *e);
/* after a step that succeeded: each slot's position and key block */
void v4_advance(struct v4_model *v, const struct batch *b, bool mtp, struct v4_slot **slots);
/* whether a sequence may start after the full block `block` (a snapshot of its end is kept) */
bool v4_resumable(const struct v4_model *v, int32_t block);
/* the snapshots this step saves (sv [n_snaps]; their count): the blocks it completes; an MTP
 * step (mtp) adds its state to the snapshots of the blocks it passes that have none yet */
int v4_plan_saves(struct v4_model *v, const struct batch *b, bool mtp, struct v4_save *sv);
void v4_save_layer(struct v4_model *v, int snap, int li, const struct v4_seq_attn *st);
/* the saves are complete (every layer's state copied) */
void v4_commit_saves(struct v4_model *v, const struct v4_save *sv, int n, bool mtp);

#endif
