/* mlaserve bench latency MODEL_DIR --batch-size B --input-len I --output-len O: drives
 * model_forward directly with synthetic batches. Measures prefill of one I-token prompt,
 * decode steps at batch B with I tokens of context, the machine's DRAM read bandwidth and
 * bf16 GEMM peak, and reports the decode roofline (bandwidth / weight bytes per step). */
#include <errno.h>
#include <immintrin.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/kv_cache.h"
#include "base/mono.h"
#include "base/dtype.h"
#include "base/err.h"
#include "tools/load/bench_serve.h"
#include "tools/throughput.h"
#include "setup/engine_args.h"
#include "tools/tools.h"
#include "model/model.h"
#include "ops/cpu.h"
#include "ops/gemm.h"
#include "ops/pool.h"
#include "ops/wformat.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* ---- DRAM read bandwidth: every thread streams its share of a buffer far larger than L3 ---- */
struct bw_ctx {
	const float *buf;
	size_t n;
	float sink[64];
};

__attribute__((target("avx2"))) static float sum_avx2(const float *p, size_t n)
{
	__m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps(), c = _mm256_setzero_ps(), d = _mm256_setzero_ps();
	for (size_t i = 0; i + 32 <= n; i += 32) {
		/* software prefetch 8 KB ahead, as the GEMM kernels stream their weights (without it
		 * the probe read less than a decode step does) */
		_mm_prefetch((const char *)(p + i) + 8192, _MM_HINT_T0);
		_mm_prefetch((const char *)(p + i) + 8192 + 64, _MM_HINT_T0);
		a = _mm256_add_ps(a, _mm256_load_ps(p + i));
		b = _mm256_add_ps(b, _mm256_load_ps(p + i + 8));
		c = _mm256_add_ps(c, _mm256_load_ps(p + i + 16));
		d = _mm256_add_ps(d, _mm256_load_ps(p + i + 24));
	}
	a = _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d));
	float t[8];
	_mm256_storeu_ps(t, a);
	return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

static void bw_range(void *arg, int begin, int end, int tid)
{
	struct bw_ctx *c = arg;
	size_t chunk = c->n / 1024;
	float s = 0;
	for (int k = begin; k < end; k++) {
		const float *p = c->buf + (size_t)k * chunk;
		if (ops_level_best() >= OPS_AVX2) {
			s += sum_avx2(p, chunk);
		} else {
			for (size_t i = 0; i < chunk; i += 16)
				s += p[i];
		}
	}
	c->sink[tid % 64] += s;
}

static double measure_read_bw(struct pool *pool, size_t bytes)
{
	size_t n = bytes / sizeof(float);
	float *buf = aligned_alloc(64, n * sizeof(float));
	if (!buf)
		return 0;
	for (size_t i = 0; i < n; i++)
		buf[i] = (float)(i & 7);
	struct bw_ctx c = {.buf = buf, .n = n};
	double best = 0;
	for (int r = 0; r < 10; r++) {
		double t0 = mono_now_s();
		pool_for(pool, 1024, 1, bw_range, &c);
		double t = mono_now_s() - t0;
		if (bytes / t > best)
			best = bytes / t;
	}
	free(buf);
	return best / 1e9;
}

/* ---- compute peak: register-only chains of the instruction the GEMM kernels use at this
 * dispatch level and activation dtype: tdpbf16ps (AMX, bf16 activations: 16384 FLOPs per
 * instruction), vdpbf16ps (AVX512_BF16, bf16 activations: 64 FLOPs per instruction),
 * 512-bit FMA (AVX-512), 256-bit FMA (AVX2). ---- */
struct peak_ctx {
	long iters;
	int kind; /* 0 fma256, 1 fma512, 2 dpbf16, 3 AMX tiles */
	float sink[64];
};

__attribute__((target("avx2,fma"))) static float peak_fma256(long iters)
{
	__m256 a[10], m = _mm256_set1_ps(0.999f), d = _mm256_set1_ps(1e-3f);
	for (int i = 0; i < 10; i++)
		a[i] = _mm256_set1_ps((float)i);
	for (long k = 0; k < iters; k++)
#pragma GCC unroll 10
		for (int i = 0; i < 10; i++)
			a[i] = _mm256_fmadd_ps(a[i], m, d);
	for (int i = 1; i < 10; i++)
		a[0] = _mm256_add_ps(a[0], a[i]);
	float t[8];
	_mm256_storeu_ps(t, a[0]);
	return t[0];
}

#define PEAK512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
PEAK512 static float peak_512(long iters, int dp)
{
	__m512 a[12], m = _mm512_set1_ps(0.999f), d = _mm512_set1_ps(1e-3f);
	__m512bh wb = (__m512bh)_mm512_set1_epi32(0x3f803f80), xb = (__m512bh)_mm512_set1_epi32(0x3a833a83);
	for (int i = 0; i < 12; i++)
		a[i] = _mm512_set1_ps((float)i);
	if (dp) {
		for (long k = 0; k < iters; k++)
#pragma GCC unroll 12
			for (int i = 0; i < 12; i++)
				a[i] = _mm512_dpbf16_ps(a[i], wb, xb);
	} else {
		for (long k = 0; k < iters; k++)
#pragma GCC unroll 12
			for (int i = 0; i < 12; i++)
				a[i] = _mm512_fmadd_ps(a[i], m, d);
	}
	for (int i = 1; i < 12; i++)
		a[0] = _mm512_add_ps(a[0], a[i]);
	return _mm512_reduce_add_ps(a[0]);
}

static void peak_range(void *arg, int begin, int end, int tid)
{
	struct peak_ctx *c = arg;
	for (int it = begin; it < end; it++)
		c->sink[tid % 64] += c->kind == 0   ? peak_fma256(c->iters)
				     : c->kind == 3 ? gemm_amx_peak_chain(c->iters / 4)
						    : peak_512(c->iters, c->kind == 2);
}

/* GFLOP/s of the best instruction for this level and activation dtype; *what names it */
static double measure_peak(struct pool *pool, bool act_bf16, const char **what)
{
	enum ops_level l = ops_level_best();
	*what = "none (portable C)";
	if (l < OPS_AVX2)
		return 0;
	struct peak_ctx c = {.iters = 1000000,
			     .kind = l >= OPS_AMX && act_bf16           ? 3
				     : l >= OPS_AVX512_BF16 && act_bf16 ? 2
				     : l >= OPS_AVX512                  ? 1
									: 0};
	/* FLOPs per loop iteration: chains x lanes x (2 per FMA, 4 per bf16 pair dot); AMX runs
	 * iters / 4 iterations of 4 tile products */
	double per_iter = c.kind == 0   ? 10 * 8 * 2
			  : c.kind == 1 ? 12 * 16 * 2
			  : c.kind == 2 ? 12 * 16 * 4
					: OPS_AMX_PEAK_FLOPS_PER_ITER / 4;
	*what = c.kind == 0   ? "256-bit fp32 FMA"
		: c.kind == 1 ? "512-bit fp32 FMA"
		: c.kind == 2 ? "512-bit bf16 dot (vdpbf16ps)"
			      : "AMX bf16 tiles (tdpbf16ps)";
	int nt = pool ? pool_size(pool) : 1;
	double best = 0;
	for (int r = 0; r < 7; r++) {
		double t0 = mono_now_s();
		pool_for(pool, nt, 1, peak_range, &c);
		double gf = (double)nt * c.iters * per_iter / (mono_now_s() - t0) / 1e9;
		best = gf > best ? gf : best;
	}
	return best;
}

/* FLOPs of a prefill of n tokens of one sequence (linears + causal attention + 1 lm_head row). */
static double prefill_flops(const struct model_config *c, int n, size_t step_weight_bytes, double bytes_per_param)
{
	(void)step_weight_bytes;
	double H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
	double D = c->hidden_size, Lq = c->q_lora_rank, Lkv = c->kv_lora_rank;
	double attn_lin = (Lq > 0 ? Lq * D + H * (dn + dr) * Lq : H * (dn + dr) * D) + (Lkv + dr) * D +
			  H * (dn + dv) * Lkv + D * H * dv;
	double per_tok = 0;
	for (int i = 0; i < c->num_hidden_layers; i++) {
		per_tok += attn_lin;
		if (config_layer_is_moe(c, i))
			per_tok += 3.0 * D * c->moe_intermediate_size *
					   (c->num_experts_per_tok + c->n_shared_experts) +
				   D * c->n_routed_experts;
		else
			per_tok += 3.0 * D * c->intermediate_size;
	}
	double attn = c->num_hidden_layers * 2.0 * H * (dn + dr + dv) * ((double)n * (n + 1) / 2);
	return 2.0 * per_tok * n + attn + 2.0 * D * c->vocab_size;
}

/* FLOPs of one decode step of B sequences at context ctx (absorbed MLA: W_UK/W_UV per head,
 * MQA over 576-wide latent rows; each token's k routed experts + the shared ones; lm_head). */
static double decode_flops(const struct model_config *c, int B, int ctx)
{
	double H = c->num_attention_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
	double D = c->hidden_size, Lq = c->q_lora_rank, Lkv = c->kv_lora_rank;
	double per_tok = 0;
	for (int i = 0; i < c->num_hidden_layers; i++) {
		per_tok += (Lq > 0 ? Lq * D + H * (dn + dr) * Lq : H * (dn + dr) * D) + (Lkv + dr) * D +
			   H * (dn + dv) * Lkv + D * H * dv + H * ((double)ctx * (Lkv + dr) + (double)ctx * Lkv);
		if (config_layer_is_moe(c, i))
			per_tok += 3.0 * D * c->moe_intermediate_size *
					   (c->num_experts_per_tok + c->n_shared_experts) +
				   D * c->n_routed_experts;
		else
			per_tok += 3.0 * D * c->intermediate_size;
	}
	return 2.0 * B * (per_tok + D * c->vocab_size);
}

/* One I-token prompt of random tokens as sequence s (block table bt + s * mb): the timed
 * prefill, and with per-sequence attention state each decode sequence's own context */
static int prefill_seq(struct model *m, struct kv_cache *kv, const struct attn_backend *be, const int32_t *bt, int mb,
		       int s, int I, float *logits, struct err *e)
{
	const struct model_config *c = model_config(m);
	int bs = kv->block_size, rc = -1;
	const int32_t *tab = bt + (size_t)s * (size_t)mb;
	int32_t *tok = malloc(sizeof(int32_t) * (size_t)I), *pos = malloc(sizeof(int32_t) * (size_t)I);
	int64_t *slots = malloc(sizeof(int64_t) * (size_t)I);
	if (!tok || !pos || !slots) {
		err_set(e, "bench: out of memory");
		goto out;
	}
	uint64_t r = 42;
	for (int i = 0; i < I; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		tok[i] = (int32_t)((r >> 33) % (uint64_t)c->vocab_size);
		pos[i] = i;
		slots[i] = (int64_t)tab[i / bs] * bs + i % bs;
	}
	int32_t qs[2] = {0, I}, sl[1] = {I}, row = I - 1;
	struct batch b = {.n_tokens = I, .tokens = tok, .positions = pos, .n_logits = 1, .logits_rows = &row};
	b.attn = (struct attn_meta){.n_seqs = 1,
				    .n_tokens = I,
				    .query_start = qs,
				    .seq_lens = sl,
				    .block_table = tab,
				    .max_blocks = mb,
				    .slots = slots,
				    .dcp_size = 1,
				    .local_seq_lens = sl};
	rc = model_forward(m, &b, kv, be, logits, e);
out:
	free(tok), free(pos), free(slots);
	return rc;
}

/* DeepSeek-V4 keeps each sequence's attention state (window, compressed entries, the
 * compressors' unfinished windows) apart from the latent rows a copy would duplicate: each
 * decode run prefills its sequences afresh */
static bool own_state(const struct model *m) { return !strcmp(model_config(m)->model_type, "deepseek_v4"); }

#define MAX_BATCHES 8
struct bench_opts {
	const char *dir, *json, *dtype, *backend;
	const char *kv_dtype;                /* --kv-cache-dtype (NULL: auto, the activations') */
	int batches[MAX_BATCHES], n_batches; /* --batch-size 1,16: one decode run each */
	int in_len, out_len, dummy, threads;
	int warmup; /* --num-iters-warmup: untimed prefills first (the first touch of scratch pages) */
	/* --quantization NAME (engine_args_quantization: a row of ops/wformat.h, NULL: none) */
	const struct wformat *quant;
	const struct wformat *quant_rest; /* --quantization-rest (engine_args_quantization_rest) */
	bool quant_rest_set;
	bool quantize_lm_head;   /* --quantize-lm-head */
	bool quantize_embedding; /* --quantize-embedding */
};

struct decode_result {
	int batch;
	double tps, p50, mean, best, bytes_step, flops_step, roof_steps, roof_frac;
	double cpu_step;   /* CPU seconds a step, all threads (steady where other processes take cores) */
	const char *bound; /* "bandwidth" or "compute" */
};

/* O decode steps of B tokens (one per sequence, context I + k) after the prefill. */
static int run_decode(struct model *m, struct kv_cache *kv, const struct attn_backend *be, int B, int I, int O, int mb,
		      const int32_t *bt, struct decode_result *res, struct err *e)
{
	const struct model_config *c = model_config(m);
	int bs = kv->block_size, rc = -1;
	int32_t *tok = malloc(sizeof(int32_t) * (size_t)B), *pos = malloc(sizeof(int32_t) * (size_t)B);
	int32_t *rows = malloc(sizeof(int32_t) * (size_t)B), *qs = malloc(sizeof(int32_t) * (size_t)(B + 1));
	int32_t *sl = malloc(sizeof(int32_t) * (size_t)B);
	int64_t *slots = malloc(sizeof(int64_t) * (size_t)B);
	float *logits = malloc(sizeof(float) * (size_t)B * (size_t)c->vocab_size);
	double *step_s = malloc(sizeof(double) * (size_t)O);
	if (!tok || !pos || !rows || !qs || !sl || !slots || !logits || !step_s) {
		err_set(e, "bench: out of memory");
		goto out;
	}
	double bytes = 0, cpu = 0;
	for (int s = 0; s < B && own_state(m); s++)
		if (prefill_seq(m, kv, be, bt, mb, s, I, logits, e))
			goto out;
	for (int k = 0; k < O; k++) {
		for (int s = 0; s < B; s++) {
			int p = I + k;
			tok[s] = (int32_t)((s * 7919 + k * 104729) % c->vocab_size);
			pos[s] = p;
			qs[s] = s;
			sl[s] = p + 1;
			rows[s] = s;
			slots[s] = (int64_t)bt[s * mb + p / bs] * bs + p % bs;
		}
		qs[B] = B;
		struct batch d = {.n_tokens = B, .tokens = tok, .positions = pos, .n_logits = B, .logits_rows = rows};
		d.attn = (struct attn_meta){.n_seqs = B,
					    .n_tokens = B,
					    .query_start = qs,
					    .seq_lens = sl,
					    .block_table = bt,
					    .max_blocks = mb,
					    .slots = slots,
					    .n_decodes = B,
					    .n_decode_tokens = B,
					    .dcp_size = 1,
					    .local_seq_lens = sl};
		double ts = mono_now_s(), cs = proc_cpu_s();
		if (model_forward(m, &d, kv, be, logits, e))
			goto out;
		step_s[k] = mono_now_s() - ts;
		if (k >= (O > 2 ? 1 : 0))
			cpu += proc_cpu_s() - cs;
		bytes += (double)model_step_weight_bytes(m);
	}
	/* the first step warms caches: statistics over the rest when there are enough */
	int first = O > 2 ? 1 : 0, ns = O - first;
	double tot = 0;
	for (int k = first; k < O; k++)
		tot += step_s[k];
	qsort(step_s + first, (size_t)ns, sizeof(double), cmp_double);
	res->batch = B;
	res->p50 = step_s[first + ns / 2];
	res->best = step_s[first];
	res->mean = tot / ns;
	res->cpu_step = cpu / ns;
	res->flops_step = own_state(m) ? 0 : decode_flops(c, B, I + O / 2);
	res->tps = B / res->mean;
	res->bytes_step = bytes / O;
	rc = 0;
out:
	free(tok), free(pos), free(rows), free(qs), free(sl), free(slots), free(logits), free(step_s);
	return rc;
}

static json_t *decode_json(const struct decode_result *d)
{
	return json_pack("{s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:s}", "batch_size", d->batch,
			 "decode_tokens_per_s", d->tps, "decode_step_ms_p50", d->p50 * 1e3, "decode_step_ms_mean",
			 d->mean * 1e3, "decode_step_ms_best", d->best * 1e3, "decode_step_cpu_ms", d->cpu_step * 1e3,
			 "weight_bytes_per_step", d->bytes_step, "flops_per_step", d->flops_step,
			 "roofline_steps_per_s", d->roof_steps, "roofline_fraction", d->roof_frac, "bound", d->bound);
}

static int run_bench(const struct bench_opts *o, struct err *e)
{
	int rc = -1, I = o->in_len, O = o->out_len, Bmax = 1;
	for (int i = 0; i < o->n_batches; i++)
		Bmax = o->batches[i] > Bmax ? o->batches[i] : Bmax;
	struct pool *pool = NULL;
	struct model *m = NULL;
	struct kv_cache kv = {0};
	int32_t *bt = NULL;
	float *logits = NULL;
	struct decode_result res[MAX_BATCHES];
	const struct attn_backend *be = o->backend ? attn_backend_by_name(o->backend) : NULL;
	if (o->backend && !be)
		return err_set(e, "--attention-backend: unknown backend '%s'", o->backend);
	if (pool_new(o->threads, &pool, e))
		return -1;
	struct model_options mo = {.act_dtype = DT_F32,
				   .load_dummy = o->dummy,
				   .dummy_seed = 1,
				   .max_batch_tokens = I > Bmax ? I : Bmax,
				   .max_seqs = Bmax,
				   .max_model_len = I + O,
				   .pool = pool,
				   .quant = o->quant,
				   .quant_rest = o->quant_rest,
				   .quant_rest_set = o->quant_rest_set,
				   .quantize_lm_head = o->quantize_lm_head,
				   .quantize_embedding = o->quantize_embedding};
	if (dtype_parse_flag("--dtype", o->dtype, &mo.act_dtype, &mo.act_dtype_auto, e) < 0)
		goto out;
	struct model_probe probe;
	if (mo.act_dtype_auto) { /* a family that runs float32 only (DeepSeek-V4) */
		if (model_probe_config(o->dir, 1, &probe, e))
			goto out;
		if (probe.auto_float32)
			mo.act_dtype_auto = false, mo.act_dtype = DT_F32;
	}
	double t_load = mono_now_s();
	if (model_load(o->dir, &mo, &m, e))
		goto out;
	t_load = mono_now_s() - t_load;
	const struct model_config *c = model_config(m);
	if (!be)
		be = model_default_backend(m);
	if (model_check_backend(m, be, e))
		goto out;
	int bs = attn_backend_default_block_size(be);
	int mb = (I + O + bs - 1) / bs;
	/* the KV cache follows the activations, as the server's --kv-cache-dtype auto does */
	enum dtype kvd = model_act_dtype(m) == DT_BF16 ? DT_BF16 : DT_F32, kv_set;
	bool kv_auto = true;
	if (o->kv_dtype && dtype_parse_kv_flag(o->kv_dtype, &kv_set, &kv_auto, e) < 0)
		goto out;
	if (!kv_auto)
		kvd = kv_set;
	fprintf(stderr, "bench: kv cache %s, %zu bytes a token\n", kvd == DT_F8_E4M3 ? "fp8" : dtype_name(kvd),
		model_kv_bytes_per_block(m, bs, kvd) / (size_t)bs);
	if (model_kv_cache_init(m, &kv, 1 + Bmax * mb, bs, kvd, e))
		goto out;
	bt = malloc(sizeof(int32_t) * (size_t)Bmax * mb);
	logits = malloc(sizeof(float) * (size_t)c->vocab_size);
	if (!bt || !logits) {
		err_set(e, "bench: out of memory");
		goto out;
	}
	for (int i = 0; i < Bmax * mb; i++)
		bt[i] = 1 + i;
	/* prefill: one I-token prompt (sequence 0); the warm-up runs the same prompt on the same
	 * slots, which the timed run overwrites */
	for (int w = 0; w < o->warmup; w++)
		if (prefill_seq(m, &kv, be, bt, mb, 0, I, logits, e))
			goto out;
	double t0 = mono_now_s(), c0 = proc_cpu_s();
	if (prefill_seq(m, &kv, be, bt, mb, 0, I, logits, e))
		goto out;
	double t_prefill = mono_now_s() - t0, cpu_prefill = proc_cpu_s() - c0;
	double pf_flops = own_state(m) ? 0 : prefill_flops(c, I, 0, 2);
	/* the other sequences get a copy of sequence 0's context rows (same content, own pages) */
	for (int s = 1; s < Bmax && !own_state(m); s++)
		for (int l = 0; l < c->num_hidden_layers; l++)
			for (int p = 0; p < I; p++)
				memcpy(kv_cache_row_ptr(&kv, l, (int64_t)bt[s * mb + p / bs] * bs + p % bs),
				       kv_cache_row_ptr(&kv, l, (int64_t)bt[p / bs] * bs + p % bs),
				       (size_t)kv.row_bytes);
	/* bandwidth before and after the decode runs, the better one kept: on a shared machine
	 * the bound is what the machine could give, so contention lowers the fraction */
	double bw = measure_read_bw(pool, (size_t)1 << 29);
	for (int i = 0; i < o->n_batches; i++)
		if (run_decode(m, &kv, be, o->batches[i], I, O, mb, bt, &res[i], e))
			goto out;
	double bw2 = measure_read_bw(pool, (size_t)1 << 29);
	bw = bw2 > bw ? bw2 : bw;
	bool act_bf16 = model_act_dtype(m) == DT_BF16;
	const char *peak_what;
	double peak = measure_peak(pool, act_bf16, &peak_what), peak1 = measure_peak(NULL, act_bf16, &peak_what);
	/* per CPU-second: robust to other processes taking cores away on a shared machine */
	double pf_cpu_frac = peak1 > 0 && cpu_prefill > 0 ? pf_flops / cpu_prefill / 1e9 / peak1 : 0;
	double pf_tps = I / t_prefill, pf_gf = pf_flops / t_prefill / 1e9;
	printf("model %s: %d layers, %.2f GB weights (load %.1f s), %s activations, %d threads, %s, backend %s\n",
	       o->dummy ? "dummy" : o->dir, c->num_hidden_layers, model_weight_bytes(m) / 1e9, t_load,
	       act_bf16 ? "bfloat16" : "float32", pool_size(pool), ops_level_name(ops_level_best()), be->name);
	printf("read bandwidth %.1f GB/s; compute peak %.1f GFLOP/s (%s)\n", bw, peak, peak_what);
	if (own_state(m))
		printf("prefill  %d tokens: %.3f s, %.1f tokens/s (CPU busy %.0f%% of %d threads); FLOPs not modelled "
		       "for deepseek_v4: the decode bound is its weight bytes at the read bandwidth\n",
		       I, t_prefill, pf_tps, 100 * cpu_prefill / t_prefill / pool_size(pool), pool_size(pool));
	else
		printf("prefill  %d tokens: %.3f s, %.1f tokens/s, %.1f GFLOP/s = %.0f%% of peak; per CPU-second "
		       "%.0f%% of the one-thread peak %.1f (CPU busy %.0f%% of %d threads)\n",
		       I, t_prefill, pf_tps, pf_gf, peak > 0 ? 100 * pf_gf / peak : 0, 100 * pf_cpu_frac, peak1,
		       100 * cpu_prefill / t_prefill / pool_size(pool), pool_size(pool));
	for (int i = 0; i < o->n_batches; i++) {
		struct decode_result *d = &res[i];
		/* the step's bound: its weight bytes at the bandwidth or its FLOPs at the peak,
		 * whichever takes longer */
		double t_bw = bw > 0 ? d->bytes_step / (bw * 1e9) : 0,
		       t_fl = peak > 0 ? d->flops_step / (peak * 1e9) : 0;
		double t_bound = t_bw > t_fl ? t_bw : t_fl;
		d->bound = t_bw >= t_fl ? "bandwidth" : "compute";
		d->roof_steps = t_bound > 0 ? 1.0 / t_bound : 0;
		/* the median step against the best bandwidth: contention on a shared machine
		 * lowers the fraction, never raises it */
		d->roof_frac = d->roof_steps > 0 ? (1.0 / d->p50) / d->roof_steps : 0;
		printf("decode   batch %d, context %d: step p50 %.2f ms (mean %.2f, best %.2f; CPU %.2f ms), %.1f "
		       "tokens/s; %.3f GB, %.1f GFLOP per step -> bound (%s) %.1f steps/s, achieved %.0f%%\n",
		       d->batch, I, d->p50 * 1e3, d->mean * 1e3, d->best * 1e3, d->cpu_step * 1e3, d->tps,
		       d->bytes_step / 1e9, d->flops_step / 1e9, d->bound, d->roof_steps, 100 * d->roof_frac);
	}
	if (o->json) {
		json_t *runs = json_array();
		for (int i = 0; i < o->n_batches; i++)
			json_array_append_new(runs, decode_json(&res[i]));
		json_t *j = json_pack(
			"{s:s,s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:o}", "model", o->dummy ? "dummy" : o->dir,
			"batch_size", o->batches[0], "input_len", I, "output_len", O, "threads", pool_size(pool),
			"prefill_tokens_per_s", pf_tps, "prefill_gflops", pf_gf, "peak_gflops", peak,
			"prefill_peak_fraction", peak > 0 ? pf_gf / peak : 0.0, "peak_gflops_one_thread", peak1,
			"prefill_cpu_peak_fraction", pf_cpu_frac, "read_bandwidth_gb_s", bw, "runs", runs);
		/* the first batch size's decode figures at the top level too */
		json_t *first = decode_json(&res[0]);
		if (j && first)
			json_object_update(j, first);
		json_decref(first);
		if (j) /* the load report's total, exact (its log line rounds to 10 MB) */
			json_object_set_new(j, "model_weight_bytes", json_integer((json_int_t)model_weight_bytes(m)));
		if (!j || json_dump_file(j, o->json, JSON_INDENT(2))) {
			json_decref(j);
			err_set(e, "%s: cannot write the JSON report", o->json);
			goto out;
		}
		json_decref(j);
	}
	rc = 0;
out:
	free(bt), free(logits);
	kv_cache_fini(&kv);
	model_free(m);
	pool_free(pool);
	return rc;
}

static void bench_usage(FILE *f)
{
	char q[64]; /* the --quantization methods: the rows of ops/wformat.h that quantize */
	wformat_quant_names(q, sizeof q, "|");
	fprintf(f,
		"usage: mlaserve bench serve [options]   (the serving benchmark client; bench serve --help)\n"
		"       mlaserve bench throughput MODEL_DIR [options]   (offline, through the engine; --help)\n"
		"       mlaserve bench latency MODEL_DIR [--batch-size B[,B2..]] [--input-len I] [--output-len O]\n"
		"         [--load-format auto|dummy] [--dtype auto|float32|bfloat16 (default auto: the "
		"checkpoint's)] [--threads N]\n"
		"         [--attention-backend NAME] [--quantization %s]\n"
		"         [--quantization-rest NAME|bf16] [--quantize-lm-head] [--quantize-embedding]\n"
		"         [--kv-cache-dtype auto|float32|bfloat16|fp8 (default auto: the activations')]\n"
		"         [--num-iters-warmup N (untimed prefills before the timed one; default 1)] [--output-json "
		"FILE]\n",
		q);
}

static int int_arg(const char *v, const char *what, int lo, int *out, struct err *e)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > 1 << 20)
		return err_set(e, "%s: invalid value '%s'", what, v);
	*out = (int)x;
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_opts o = {
		.dtype = "auto", .batches = {1}, .n_batches = 1, .in_len = 512, .out_len = 16, .warmup = 1};
	struct err e = {{0}};
	if (argc >= 2 && !strcmp(argv[1], "serve"))
		return bench_serve_main(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "throughput"))
		return bench_throughput_main(argc - 1, argv + 1);
	if (argc < 2 || strcmp(argv[1], "latency")) {
		bench_usage(argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? stdout : stderr);
		return argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? 0 : 2;
	}
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			bench_usage(stdout);
			return 0;
		}
		if (a[0] != '-') {
			if (o.dir) {
				fprintf(stderr, "mlaserve bench: unexpected argument '%s'\n", a);
				return 2;
			}
			o.dir = a;
			continue;
		}
		if (!strcmp(a, "--quantize-lm-head")) {
			o.quantize_lm_head = true;
			continue;
		}
		if (!strcmp(a, "--quantize-embedding")) {
			o.quantize_embedding = true;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "mlaserve bench: %s needs a value\n", a);
			return 2;
		}
		const char *v = argv[++i];
		int bad = 0;
		if (!strcmp(a, "--batch-size")) {
			char buf[128];
			snprintf(buf, sizeof buf, "%s", v);
			o.n_batches = 0;
			for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t && !bad; t = strtok_r(NULL, ",", &sv)) {
				if (o.n_batches == MAX_BATCHES)
					bad = err_set(&e, "--batch-size: at most %d sizes", MAX_BATCHES);
				else
					bad = int_arg(t, a, 1, &o.batches[o.n_batches++], &e);
			}
			if (!o.n_batches && !bad)
				bad = err_set(&e, "--batch-size: invalid value '%s'", v);
		} else if (!strcmp(a, "--input-len"))
			bad = int_arg(v, a, 1, &o.in_len, &e);
		else if (!strcmp(a, "--output-len"))
			bad = int_arg(v, a, 1, &o.out_len, &e);
		else if (!strcmp(a, "--num-iters-warmup"))
			bad = int_arg(v, a, 0, &o.warmup, &e);
		else if (!strcmp(a, "--threads"))
			bad = int_arg(v, a, 0, &o.threads, &e);
		else if (!strcmp(a, "--output-json"))
			o.json = v;
		else if (!strcmp(a, "--dtype"))
			o.dtype = v;
		else if (!strcmp(a, "--kv-cache-dtype"))
			o.kv_dtype = v;
		else if (!strcmp(a, "--attention-backend"))
			o.backend = v;
		else if (!strcmp(a, "--quantization") || !strcmp(a, "-q"))
			bad = engine_args_quantization(v, &o.quant, &e);
		else if (!strcmp(a, "--quantization-rest"))
			bad = engine_args_quantization_rest(v, &o.quant_rest, &o.quant_rest_set, &e);
		else if (!strcmp(a, "--load-format")) {
			if (strcmp(v, "dummy") && strcmp(v, "auto") && strcmp(v, "safetensors"))
				bad = err_set(&e, "--load-format: invalid value '%s' (auto, safetensors or dummy)", v);
			o.dummy = !strcmp(v, "dummy");
		} else {
			fprintf(stderr, "mlaserve bench: unknown option '%s'\n", a);
			bench_usage(stderr);
			return 2;
		}
		if (bad)
			goto fail;
	}
	if (!o.dir) {
		bench_usage(stderr);
		return 2;
	}
	if (o.quant_rest_set && !o.quant) {
		err_set(&e, "--quantization-rest needs --quantization (the routed experts' format)");
		goto fail;
	}
	if (run_bench(&o, &e))
		goto fail;
	return 0;
fail:
	fprintf(stderr, "mlaserve bench: %s\n", e.msg);
	return 1;
}
