/* The DeepSeek V2/V3/R1 forward pass over a flat batch. The model never sees requests: the
 * runner hands it tokens, positions and attention metadata for one step. */
#ifndef MLA_MODEL_MODEL_H
#define MLA_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/attn.h"
#include "base/err.h"
#include "io/config.h"

struct pool;
struct wformat;

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
	/* --quantization NAME: the format (ops/wformat.h) the linear layers are quantized to at load
	 * (NULL: as the checkpoint has them). fp8: those of a bf16/f16/f32 checkpoint that a
	 * DeepSeek fp8 checkpoint stores in fp8, in 128x128 blocks (ops/quant_fp8.h); int8: W8A8,
	 * the same layers but kv_b_proj, a scale per row and 128 columns, activations per token and
	 * 128 columns at each GEMM (ops/quant_int8.h), fp8 checkpoints requantized. A format whose
	 * scales are no square blocks (not transposable) leaves kv_b_proj as the checkpoint has it. */
	const struct wformat *quant;
	/* --quantize-lm-head: the lm_head too, as the linear layers (fp8 without --quantization;
	 * a DeepSeek fp8 checkpoint keeps it bf16, as vLLM's fp8 does; llama.cpp's Q8_0 quantizes
	 * it): a quarter fewer bytes per decode step on small models, logits within fp8's rounding */
	bool quantize_lm_head;
};

struct model;

int model_load(const char *dir, const struct model_options *opt, struct model **out, struct err *e);
void model_free(struct model *m);
const struct model_config *model_config(const struct model *m);
/* Bytes of weights resident (for the memory report and the roofline). */
size_t model_weight_bytes(const struct model *m);
enum dtype model_act_dtype(const struct model *m); /* resolved activation dtype (DT_F32 or DT_BF16) */
/* Bytes of weights the last model_forward read, each matrix (or used view) counted once:
 * the numerator of the decode roofline (routed experts count only when some token chose
 * them). */
size_t model_step_weight_bytes(const struct model *m);
/* Seconds the last forward spent in DeepSeek Sparse Attention's indexer (V3.2; 0 otherwise):
 * its projections, the key cache write and the top-k selection (benchmarks report its share). */
double model_step_index_seconds(const struct model *m);
/* Layers of the latent KV cache this model writes: the main ones, plus the MTP layer when
 * it was loaded (model_options.load_mtp). */
int model_kv_layers(const struct model *m);
bool model_has_mtp(const struct model *m);
/* The KV cache this model needs: the latent cache of its model_kv_layers, and for DeepSeek
 * Sparse Attention (V3.2) the indexer's key cache beside it; its bytes per block of
 * block_size tokens (the budget's divisor), and its allocation. */
size_t model_kv_bytes_per_block(const struct model *m, int block_size, enum dtype kv_dtype);
int model_kv_cache_init(const struct model *m, struct kv_cache *kv, int n_blocks, int block_size, enum dtype kv_dtype,
			struct err *e);
/* The attention backend this model runs by default (sparse for V3.2, else the first dense
 * one), and whether `b` can run it (e filled naming the backends that can). */
const struct attn_backend *model_default_backend(const struct model *m);
int model_check_backend(const struct model *m, const struct attn_backend *b, struct err *e);

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

/* Writes the step's latent rows into `kv`, runs every layer, and fills
 * logits[n_logits, vocab_size] (fp32). Under tensor parallelism the logits are gathered to
 * TP rank 0; `logits` may be NULL on the other ranks. */
int model_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *backend,
		  float *logits, struct err *e);

/* DeepSeek MTP (V3 tech report §2.2; vLLM's deepseek_mtp): for each token t at position p,
 * h = eh_proj [enorm(embed(tokens[t])) | hnorm(hidden of row hidden_rows[t])] (the embedding
 * is zero at position 0), then the MTP decoder layer over its own latent cache layer, and
 * logits[n_logits, vocab] = shared_head(norm(h)) of the requested rows: the distribution of
 * the token after tokens[t]. The hidden states are the final-normed rows of the last
 * model_forward on this rank, so every rank runs this right after the same model_forward;
 * with b->hidden_from_mtp they are the layer's own output rows h (before the head's norm)
 * of the last model_mtp_forward's logits rows, which each call keeps (when there are at most
 * max_seqs of them). */
int model_mtp_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *backend,
		      float *logits, struct err *e);

#endif
