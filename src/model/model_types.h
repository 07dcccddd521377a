/* The types of model.h's API: what a model is loaded with (struct model_options) and one
 * step's input (struct batch). Apart from model.h so that the model's own files (through
 * model_internal.h) read them without depending on the API's implementation. */
#ifndef MLA_MODEL_MODEL_TYPES_H
#define MLA_MODEL_MODEL_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/attn.h"
#include "base/dtype.h"

struct pool;
struct wformat;
struct comm;

struct model_options {
	enum dtype act_dtype; /* DT_F32 (exact reference) or DT_BF16; see --dtype */
	bool act_dtype_auto;  /* --dtype auto: the checkpoint's dtype */
	bool load_dummy;      /* --load-format dummy: random weights from config.json alone */
	uint64_t dummy_seed;
	int max_batch_tokens; /* largest n_tokens of one forward (sizes the scratch arena) */
	int max_seqs;         /* largest n_seqs of one forward */
	int max_model_len;    /* largest context (sizes the prefill workspace) */
	struct pool *pool;    /* threads for kernels; not owned */
	/* tensor parallelism (1/0 = off) */
	int tp_size, tp_rank;
	/* the communicator of a TP/DCP run (NULL: a world of one); its tp_size/tp_rank win over
	 * the two fields above. Each rank keeps views of its slices of the mapped checkpoint:
	 * heads of q/q_b/kv_b (o_proj columns), the intermediate dimension of the dense MLP,
	 * shared and routed experts, and the vocabulary of lm_head (gathered to rank 0). */
	struct comm *comm;
	int dcp_interleave; /* DCP runs: the prefill context chunk is a multiple of W x this */
	bool load_mtp;      /* also load the checkpoint's MTP module (deepseek_mtp drafts) */
	int max_rollback;   /* positions a step's drafts may take a sequence back (0: no drafts) */
	/* --quantization NAME: the format (ops/wformat.h) the linear layers are quantized to at load
	 * (NULL: as the checkpoint has them). fp8: those of a bf16/f16/f32 checkpoint that a
	 * DeepSeek fp8 checkpoint stores in fp8, in 128x128 blocks (ops/quant_fp8.h); int8: W8A8,
	 * the same layers but kv_b_proj, a scale per row and 128 columns, activations per token and
	 * 128 columns at each GEMM (ops/quant_int8.h), fp8 checkpoints requantized. A format whose
	 * scales are no square blocks (not transposable) leaves kv_b_proj as the checkpoint has it. */
	const struct wformat *quant;
	/* --quantization-rest NAME (quant_rest_set): the format of the linear layers other than the
	 * routed experts (NULL: as the checkpoint has them); unset, --quantization's, but int8 under
	 * int4 (the CPU recipes' routed experts in 4 bits, attention and shared experts in 8) */
	const struct wformat *quant_rest;
	bool quant_rest_set;
	/* --quantize-lm-head: the lm_head too, as the linear layers (fp8 without --quantization;
	 * a DeepSeek fp8 checkpoint keeps it bf16, as vLLM's fp8 does; llama.cpp's Q8_0 quantizes
	 * it): a quarter fewer bytes per decode step on small models, logits within fp8's rounding */
	bool quantize_lm_head;
	/* --quantize-embedding: the token embedding too, in the lm_head's format rule (a lookup of
	 * rows through the format's get): the bytes that equal a 4-bit GGUF's */
	bool quantize_embedding;
};

/* One step's input. Rows are in the runner's reordered order (decodes first). */
struct batch {
	int n_tokens;
	const int32_t *tokens;    /* [n_tokens] */
	const int32_t *positions; /* [n_tokens] */
	struct attn_meta attn;
	int n_logits;
	const int32_t *logits_rows; /* [n_logits] token rows whose logits are wanted */
	/* model_mtp_forward only: [n_tokens] the row of the last model_forward whose hidden state
	 * each token follows (tokens[t] is the token after that row's) */
	const int32_t *hidden_rows;
	/* model_mtp_forward only: hidden_rows index the output rows of the last
	 * model_mtp_forward's logits rows instead (a chained draft: vLLM's MTP with
	 * num_speculative_tokens > 1 feeds the module its own output) */
	bool hidden_from_mtp;
};

#endif
