/* The compute seam: where a step's work runs (struct compute_ctx) and, in the next step of
 * this interface, the operations the forwards call. The CPU fills the context with its thread
 * pool and the model's per-step arena; a device backend would carry its stream and device
 * workspace in its place, so that the attention and model code name neither. */
#ifndef MLA_OPS_BACKEND_H
#define MLA_OPS_BACKEND_H

struct pool;
struct arena;

/* The execution context of one step, handed to every attention call (attn.h's args) */
struct compute_ctx {
	struct pool *pool;     /* the CPU's workers (NULL: inline on the caller) */
	struct arena *scratch; /* the step's temporaries, reset every step */
};

#endif
