#!/usr/bin/env python3
"""A slow, plain float64 DeepSeek-V4 forward (standard library only).

Transcribed (not copied) from DeepSeek's reference inference/model.py + kernel.py as published
with DeepSeek-V4-Flash / -Pro (current revision: shared expert clamped with swiglu_limit, the
in-place act_quant casting through FP8) and tests/fixtures/tiny-v4/golden/README.md, not from our
C code.  Checkpoint reading, the e4m3 table and the ue8m0 scale are scripts/mtp_reference.py's /
scripts/v32_reference.py's.

  v4_reference.py MODEL_DIR (--tokens 0,5,7 | --prompt NAME) [options]
  v4_reference.py --check [FIXTURE_DIR] [--names len1,len5,...] [--aq]

Runs the token list through the model in ONE prefill at start_pos 0 and writes / compares:
  --out F          logits [L, vocab], raw LE float32 (row i: after tokens 0..i)
  --mtp F          MTP logits [L - 1, vocab]: row i = the MTP block at position i fed the main
                   model's final hidden streams of token i (before hc_head) and the embedding of
                   token i + 1 (it predicts token i + 2); the block runs as one prefill
  --sel F          the compressed entries the indexer selected, per ratio-4 main layer:
                   [n_csa_layers, L, index_topk] int32, ascending, -1 padded
  --experts F      routed experts [n_layers, L, num_experts_per_tok] int32, ascending
  --aq             act-quant ON (DeepSeek's GPU semantics): fp8 e4m3 act_quant (block 128, ue8m0)
                   of the input of every FP8/FP4-weight GEMM; default OFF (exact activations)
  --no-kv-sim      drop the in-place FP8 (window / compressed KV) and FP4 (indexer q / keys)
                   simulations (a diagnostic; the goldens keep them)
  --decode         compute the logits by prefill of the first token and then token-by-token
                   decode (model.py's start_pos > 0 path: compressor state machine, window ring,
                   compressed and indexer caches); rows mean the same as a prefill's
  --greedy N       N greedy tokens after the prompt (prefill + incremental decode, ties to the
                   lower id); printed, and written as JSON with --greedy-out F
  --prompt NAME    take the tokens of prompt NAME from MODEL_DIR/golden/prompts.json and compare
                   with its golden files (logits, MTP logits, sel / expert sets; with --greedy,
                   greedy.json)
  --check          for every prompt (--names, default len1,len5,len17,len64; add len300 if you
                   have the minutes) compare prefill logits, MTP logits, sel and expert sets with
                   the act-quant-off goldens (and with --aq the act-quant-on ones on their
                   aq_stable_rows), decode logits and greedy.json's tokens; prints PASS/FAIL lines,
                   exits 1 on any FAIL.  Tolerance --tol (default 1e-5 abs; float64 vs a float64
                   oracle stored as float32 agree to ~1e-6).

What is computed (README steps; model.py names):
  H  hyper-connections: x holds hc_mult streams; hc_pre: mixes = hc_fn @ flatten(x) * rsqrt(mean
     (x^2) + eps); pre = sigmoid(.)+hc_eps, post = 2 sigmoid(.), comb = row softmax + hc_eps, then
     column / (row, column) x (iters - 1) Sinkhorn (kernel.py hc_split_sinkhorn); y = sum pre_j x_j;
     hc_post: x'_k = post_k out + sum_j comb[j][k] x_j.
  A  attention: q = wq_b(q_norm(wq_a(y))) per head RMS-normalised (no weight); one kv =
     kv_norm(wkv(y)) is key and value; RoPE on the last rope dims, GPT-J pairs; kv[:-rope] through
     fp8 (block 64); keys = sliding window + compressed entries (ratio 4: indexer top-k; other
     ratios: all e < (t+1)//ratio); softmax with a per-head sink in the denominator; inverse RoPE
     on o; grouped low-rank output wo_a (BF16, no act quant) -> wo_b.
  C  compressor: gated softmax pooling of ratio tokens (ratio 4: overlapping windows, 2d
     channels), RMSNorm, RoPE at i * ratio, then fp8 (main) or Hadamard + fp4 (indexer).
  I  indexer: q = indexer.wq_b(qr), RoPE, Hadamard, fp4; score = sum_h relu(q_h . k) w_h.
  M  MoE: sqrt(softplus) scores, hash routing (tid2eid) for layers < num_hash_layers, else top-k
     of scores + bias; weights renormalised * routed_scaling_factor; SwiGLU with swiglu_limit
     clamps (routed and shared), routing weight applied before w2.
  O  hc_head (sigmoid, no Sinkhorn) -> norm -> head.   T  MTP block (see --mtp).
RoPE tables as model.py's precompute_freqs_cis, in float32: ratio-0 layers rope_theta without
YaRN, compressed layers compress_rope_theta with YaRN; angle = fp32(pos * fp32 inv_freq).
Simplifications as the golden README's S1-S3: float64 activations, top-k ties to the lower index,
fresh compressor state per sequence.

Official code vs golden README: no disagreement found in the numerics.  Notes:
  * The README says the convert.py dequantisation of wo_a makes it BF16; convert.py's reshape
    (unflatten(-1, (-1, 128))) needs in_features % 128 == 0, which tiny-v4's wo_a (in 192) does not
    meet, so here (as in the oracle) wo_a is dequantised per 128x128 block with a ceil-sized scale
    grid (e4m3 * 2^k is exact in BF16, so the values are the same).
  * model.py's Compressor keeps kv_state / score_state across prompts (README S3 quirk); here
    every sequence starts from (0, -inf).
  * The Pro-code mirror (Nicooo-Wang/DeepSeek-V4-Pro-code) ships kernel.py as a pure-torch
    rewrite whose in-place act_quant / fp4_act_quant only clamp and do NOT round to e4m3 / e2m1;
    the official tilelang kernels (kernel_tilelang.py there) cast through FP8 / FP4: this file
    follows the tilelang kernels, as the goldens do.
  * convert.py's name filter lists "tie2eid" (sic) next to "hc", "attn_sink", "ape"; harmless,
    tid2eid's key falls back to "gate", which the mapping leaves unchanged.
  * RoPE: model.py's freqs_cis is complex64 (torch.polar of float32 angles); its cos / sin are the
    C library's cosf / sinf, which glibc does not round correctly; this file calls libm's cosf /
    sinf through ctypes (without them: float32-rounded math.cos / sin, ~5e-8 off in the logits).
Golden fixture vs its README: `lenN.experts.i32` is not [n_layers, L, k] as the README says but
[n_layers + 2, L, k] (meta experts_shape [6, L, 2]): blocks 0, 1, 2, 3, 4, 5 hold layers 0, 1, 0, 1,
2, 3 (the two hash layers twice); --check matches blocks to layers by content.  The README's Q1
calls act-quant ON the oracle's default while the primary goldens (logits_file) are act-quant OFF,
and its "o (512-dim incl. rope part)" / "448 non-RoPE dims" are the full model's sizes (tiny-v4:
head_dim 96, 64 non-RoPE dims).
vLLM / HF transformers vs the official code:
  * vLLM (vllm/model_executor/models/deepseek_v4.py, read): compress_ratio = max(1, ratio) (and 1
    for the MTP layer); every layer gets rope_type deepseek_yarn (mscale disabled) with
    rope_theta for ratio <= 1 and compress_rope_theta otherwise, so YaRN scaling IS applied on the
    window-only layers, which model.py leaves unscaled (original_seq_len 0 there); wo_a is an FP8
    ColumnParallelLinear run as a bmm (act-quantised input) where model.py dequantises it to BF16
    (convert.py) and uses a BF16 einsum; the DeepGEMM MegaMoE path quantises the MoE input in
    ue8m0 groups of 32 (model.py's act_quant: groups of 128); the shared expert is clamped
    (SiluAndMulWithClamp), as in the current official revision.
  * HF transformers (from the golden README, not re-read here): mHC comb = sigmoid + eps with
    `iters` full (row, column) rounds, post = sigmoid + eps and the transposed residual mix
    (out[j] = sum_k comb[j][k] x[k]); unclamped shared expert; plain rope_theta RoPE for every
    layer's window attention; no act quant, Hadamard or FP4 indexer simulation, and no causal
    mask on the indexer scores / compressed entries in prefill."""
import json, math, os, struct, sys, time
from operator import mul

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mtp_reference as R  # noqa: E402  (load, FP8 table, f32, e4m3_nearest)
import v32_reference as V  # noqa: E402  (ue8m0_scale, hadamard)

INF = math.inf


def _libm_f32(fn):
    try:
        import ctypes
        import ctypes.util
        f = getattr(ctypes.CDLL(ctypes.util.find_library('m')), fn)
        f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
        return f
    except (OSError, AttributeError, TypeError):
        return None


LIBM_COSF, LIBM_SINF = _libm_f32('cosf'), _libm_f32('sinf')
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
FP4_MAX_INV = R.f32(1 / 6.0)


# ---------------------------------------------------------------- quantisers (kernel.py)
def pow2_ceil(s):  # 2^ceil(log2 s) for s > 0
    m, e = math.frexp(s)
    return s if m == 0.5 else math.ldexp(1.0, e)


def e2m1_nearest(v):  # round to the nearest e2m1 value, ties to the even code; |v| <= 6
    a = abs(v)
    lo = 0
    while lo < 7 and E2M1[lo + 1] <= a:
        lo += 1
    if lo == 7:
        r = 6.0
    else:
        dl, dh = a - E2M1[lo], E2M1[lo + 1] - a
        r = E2M1[lo] if dl < dh or (dl == dh and lo % 2 == 0) else E2M1[lo + 1]
    return -r if v < 0 else r


def act_quant(x, block):
    """kernel.py act_quant round trip (ue8m0): per block, s = 2^ceil(log2(fp32(max(amax, 1e-4)) *
    fp32(1/448))), x = e4m3_rne(clamp(x / s, +-448)) * s."""
    out = []
    for g0 in range(0, len(x), block):
        blk = x[g0:g0 + block]
        s = V.ue8m0_scale(max(map(abs, blk)))
        out += [R.e4m3_nearest(min(max(v / s, -448.0), 448.0)) * s for v in blk]
    return out


def fp4_quant(x, block=32):
    """kernel.py fp4_act_quant round trip: amax = max(|x|, 6 * 2^-126), s = 2^ceil(log2(amax *
    fp32(1/6))), x = e2m1_rne(clamp(x / s, +-6)) * s."""
    out = []
    for g0 in range(0, len(x), block):
        blk = x[g0:g0 + block]
        s = pow2_ceil(max(max(map(abs, blk)), 6 * 2.0 ** -126) * FP4_MAX_INV)
        out += [e2m1_nearest(min(max(v / s, -6.0), 6.0)) * s for v in blk]
    return out


# ---------------------------------------------------------------- checkpoint
def e8m0(b):
    return math.ldexp(1.0, b - 127)


class Weights:
    """Tensors by model.py name. F8_E4M3 matrices come back dequantised with their F8_E8M0
    `.scale` per 128x128 block, I8 (two e2m1 codes per byte, element 2i in the low nibble) with
    their e8m0 scale per 32 along K; BF16 / F32 widened; I64 as ints.  `quantized(name)` says
    whether model.py runs that weight through fp8_gemm / fp4_gemm (act_quant on its input)."""

    def __init__(self, dirname):
        self.raw, self.cache = R.load(dirname), {}

    def __contains__(self, name):
        return name in self.raw

    def quantized(self, name):
        return self.raw[name][0] in ('F8_E4M3', 'I8') and not name.endswith('wo_a.weight')

    def get(self, name):
        if name in self.cache:
            return self.cache[name]
        dt, shape, b = self.raw[name]
        flat = R.decode_flat(dt, b)
        if flat is not None:
            pass
        elif dt == 'F8_E8M0':
            flat = [e8m0(x) for x in b]
        elif dt == 'I8':  # packed e2m1 pairs
            flat = []
            for x in b:
                lo, hi = x & 15, x >> 4
                flat += [-E2M1[lo & 7] if lo & 8 else E2M1[lo], -E2M1[hi & 7] if hi & 8 else E2M1[hi]]
            shape = [shape[0], shape[1] * 2]
        elif dt == 'I64':
            flat = list(struct.unpack('<%dq' % (len(b) // 8), b))
        elif dt == 'I32':
            flat = list(struct.unpack('<%di' % (len(b) // 4), b))
        else:
            raise SystemExit('%s: dtype %s' % (name, dt))
        if len(shape) == 1:
            out = flat
        else:
            r, c = shape[0], math.prod(shape[1:])
            out = [flat[i * c:(i + 1) * c] for i in range(r)]
            if dt == 'F8_E4M3':
                sc = self.get(name[:-len('weight')] + 'scale')
                out = [[v * sc[i // 128][j // 128] for j, v in enumerate(row)] for i, row in enumerate(out)]
            elif dt == 'I8':
                sc = self.get(name[:-len('weight')] + 'scale')
                out = [[v * sc[i][j // 32] for j, v in enumerate(row)] for i, row in enumerate(out)]
        self.cache[name] = out
        return out


def mv(W, x):
    return [sum(map(mul, row, x)) for row in W]


def rmsnorm(x, w, eps):
    r = 1 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * r * g for v, g in zip(x, w)]


def sigmoid(z):
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def silu(z):
    return z * sigmoid(z)


def softplus(z):  # torch F.softplus (beta 1, threshold 20)
    return z if z > 20 else math.log1p(math.exp(z))


def topk(scores, k):  # indices of the k largest, ties to the lower index, ascending
    return sorted(sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k])


def pool(rows):
    """Compressor pooling: rows = [(kv vector, score vector)]; per feature, softmax of the scores
    over the rows, sum of kv * softmax."""
    d = len(rows[0][0])
    out = []
    for f in range(d):
        m = max(r[1][f] for r in rows)
        e = [math.exp(r[1][f] - m) for r in rows]
        z = sum(e)
        out.append(sum(ei * r[0][f] for ei, r in zip(e, rows)) / z)
    return out


# ---------------------------------------------------------------- model
class Model:
    def __init__(self, dirname, aq=False, kv_sim=True):
        self.c = c = json.load(open(os.path.join(dirname, 'config.json')))
        self.w = Weights(dirname)
        self.aq, self.kv_sim = aq, kv_sim
        self.dim, self.hc, self.eps, self.hc_eps = c['hidden_size'], c['hc_mult'], c['rms_norm_eps'], c['hc_eps']
        self.iters = c['hc_sinkhorn_iters']
        self.H, self.hd, self.rd = c['num_attention_heads'], c['head_dim'], c['qk_rope_head_dim']
        self.win, self.G, self.olr = c['sliding_window'], c['o_groups'], c['o_lora_rank']
        self.nL = c['num_hidden_layers']
        self.ratios = c['compress_ratios']
        self.inh, self.ihd, self.K = c['index_n_heads'], c['index_head_dim'], c['index_topk']
        self.topk_e, self.n_hash = c['num_experts_per_tok'], c['num_hash_layers']
        self.lim, self.route_scale = c.get('swiglu_limit', 0) or 0, c['routed_scaling_factor']
        rs = c.get('rope_scaling') or {}
        self.yarn = dict(orig=rs.get('original_max_position_embeddings', 0), factor=rs.get('factor', 1),
                         bf=rs.get('beta_fast', 32), bs=rs.get('beta_slow', 1))
        self.tables, self.cs = {}, {}
        self.embed = self.w.get('embed.weight')
        self.rec = None  # diagnostics of the last run: {'sel': {layer: rows}, 'experts': {layer: rows}}

    # ---- RoPE (precompute_freqs_cis in float32, apply_rotary_emb: interleaved pairs)
    def inv_freq(self, ratio):
        if ratio in self.tables:
            return self.tables[ratio]
        f32, dim = R.f32, self.rd
        if ratio:
            base, orig = self.c['compress_rope_theta'], self.yarn['orig']
        else:
            base, orig = self.c['rope_theta'], 0
        freqs = [f32(1.0 / f32(base ** f32(i / dim))) for i in range(0, dim, 2)]
        if orig > 0:
            def corr(n):
                return dim * math.log(orig / (n * 2 * math.pi)) / (2 * math.log(base))
            lo = max(math.floor(corr(self.yarn['bf'])), 0)
            hi = min(math.ceil(corr(self.yarn['bs'])), dim - 1)
            if lo == hi:
                hi += 0.001
            fac = self.yarn['factor']
            smooth = [f32(1 - f32(min(max(f32(f32(i - lo) / f32(hi - lo)), 0.0), 1.0))) for i in range(dim // 2)]
            freqs = [f32(f32(f32(fr / fac) * f32(1 - sm)) + f32(fr * sm)) for fr, sm in zip(freqs, smooth)]
        self.tables[ratio] = freqs
        return freqs

    def cos_sin(self, p, ratio):
        """freqs_cis[p] of model.py: torch.polar(1, fp32(p * inv_freq)) in complex64, i.e. the C
        library's float32 cosf / sinf of the float32 angle (through ctypes where libm has them:
        glibc's cosf is not correctly rounded, and rounding math.cos to float32 instead moves
        logits by ~5e-8); the float32-rounded double cos / sin otherwise."""
        key = (p, ratio)
        if key not in self.cs:
            angs = [R.f32(p * fr) for fr in self.inv_freq(ratio)]
            if LIBM_COSF:
                self.cs[key] = [(LIBM_COSF(a), LIBM_SINF(a)) for a in angs]
            else:
                self.cs[key] = [(R.f32(math.cos(a)), R.f32(math.sin(a))) for a in angs]
        return self.cs[key]

    def rope(self, x, p, ratio, inverse=False):  # rotate the LAST rd dims of x at position p
        out, o = list(x), len(x) - self.rd
        for i, (co, si) in enumerate(self.cos_sin(p, ratio)):
            if inverse:
                si = -si
            a, b = x[o + 2 * i], x[o + 2 * i + 1]
            out[o + 2 * i], out[o + 2 * i + 1] = a * co - b * si, a * si + b * co
        return out

    def lin(self, name, x):  # model.py linear(): act_quant before FP8 / FP4 GEMMs when --aq
        if self.aq and self.w.quantized(name):
            x = act_quant(x, 128)
        return mv(self.w.get(name), x)

    def kv8(self, v):  # in-place FP8 simulation of kv[..., :-rd], blocks of 64
        if not self.kv_sim:
            return v
        n = len(v) - self.rd
        return act_quant(v[:n], 64) + v[n:]

    def fp4(self, v):
        return fp4_quant(v, 32) if self.kv_sim else v

    # ---- hyper-connections
    def hc_pre(self, P, x):
        hc, w = self.hc, self.w
        f = [v for s in x for v in s]
        r = 1 / math.sqrt(sum(v * v for v in f) / len(f) + self.eps)
        mixes = [v * r for v in mv(w.get(P + '_fn'), f)]
        sc, b, eps = w.get(P + '_scale'), w.get(P + '_base'), self.hc_eps
        pre = [sigmoid(mixes[j] * sc[0] + b[j]) + eps for j in range(hc)]
        post = [2 * sigmoid(mixes[hc + j] * sc[1] + b[hc + j]) for j in range(hc)]
        comb = [[mixes[2 * hc + j * hc + k] * sc[2] + b[2 * hc + j * hc + k] for k in range(hc)] for j in range(hc)]
        for j in range(hc):  # softmax over each row, + eps
            m = max(comb[j])
            e = [math.exp(v - m) for v in comb[j]]
            z = sum(e)
            comb[j] = [v / z + eps for v in e]

        def colnorm():
            for k in range(hc):
                z = sum(comb[j][k] for j in range(hc)) + eps
                for j in range(hc):
                    comb[j][k] /= z
        colnorm()
        for _ in range(self.iters - 1):
            for j in range(hc):
                z = sum(comb[j]) + eps
                comb[j] = [v / z for v in comb[j]]
            colnorm()
        y = [sum(pre[j] * x[j][i] for j in range(hc)) for i in range(self.dim)]
        return y, post, comb

    def hc_post(self, out, x, post, comb):
        hc = self.hc
        return [[post[k] * out[i] + sum(comb[j][k] * x[j][i] for j in range(hc)) for i in range(self.dim)]
                for k in range(hc)]

    def hc_head(self, P, x):
        w, hc = self.w, self.hc
        f = [v for s in x for v in s]
        r = 1 / math.sqrt(sum(v * v for v in f) / len(f) + self.eps)
        mixes = [v * r for v in mv(w.get(P + 'hc_head_fn'), f)]
        sc, b = w.get(P + 'hc_head_scale'), w.get(P + 'hc_head_base')
        pre = [sigmoid(mixes[j] * sc[0] + b[j]) + self.hc_eps for j in range(hc)]
        return [sum(pre[j] * x[j][i] for j in range(hc)) for i in range(self.dim)]

    # ---- compressor (model.py Compressor)
    def comp_finish(self, P, v, p0, ratio, rotate):  # norm, RoPE at the window's first position, quant
        v = self.rope(rmsnorm(v, self.w.get(P + 'norm.weight'), self.eps), p0, ratio)
        if rotate:
            return self.fp4(V.hadamard(v))
        return self.kv8(v)

    def comp_prefill(self, P, xs, ratio, d, rotate, st):
        w = self.w
        kv = [mv(w.get(P + 'wkv.weight'), x) for x in xs]  # fp32 linear, no act quant
        sc = [mv(w.get(P + 'wgate.weight'), x) for x in xs]
        ape = w.get(P + 'ape')
        S, overlap = len(xs), ratio == 4
        coff, rem = 1 + overlap, len(xs) % ratio
        cutoff = S - rem
        st['kv'] = [[0.0] * (coff * d) for _ in range(coff * ratio)]
        st['score'] = [[-INF] * (coff * d) for _ in range(coff * ratio)]
        st['cache'] = []
        sca = [[a + b for a, b in zip(sc[t], ape[t % ratio])] for t in range(S)]
        off = ratio if overlap else 0
        if overlap and cutoff >= ratio:
            for j in range(ratio):
                st['kv'][j], st['score'][j] = list(kv[cutoff - ratio + j]), list(sca[cutoff - ratio + j])
        for j in range(rem):
            st['kv'][off + j], st['score'][off + j] = list(kv[cutoff + j]), list(sca[cutoff + j])
        for i in range(cutoff // ratio):
            cur = range(i * ratio, (i + 1) * ratio)
            if overlap:  # window i-1's first d channels (none for i = 0: -inf scores), window i's last d
                rows = [(kv[t][:d], sca[t][:d]) for t in range(max(0, (i - 1) * ratio), i * ratio)]
                rows += [(kv[t][d:], sca[t][d:]) for t in cur]
            else:
                rows = [(kv[t], sca[t]) for t in cur]
            st['cache'].append(self.comp_finish(P, pool(rows), i * ratio, ratio, rotate))

    def comp_decode(self, P, x, pos, ratio, d, rotate, st):
        w = self.w
        kv = mv(w.get(P + 'wkv.weight'), x)
        sc = [a + b for a, b in zip(mv(w.get(P + 'wgate.weight'), x), w.get(P + 'ape')[pos % ratio])]
        done = (pos + 1) % ratio == 0
        if ratio == 4:
            st['kv'][ratio + pos % ratio], st['score'][ratio + pos % ratio] = kv, sc
            if done:
                rows = [(st['kv'][j][:d], st['score'][j][:d]) for j in range(ratio)]
                rows += [(st['kv'][ratio + j][d:], st['score'][ratio + j][d:]) for j in range(ratio)]
                v = pool(rows)
                st['kv'][:ratio], st['score'][:ratio] = st['kv'][ratio:], st['score'][ratio:]
        else:
            st['kv'][pos % ratio], st['score'][pos % ratio] = kv, sc
            if done:
                v = pool(list(zip(st['kv'], st['score'])))
        if done:
            assert len(st['cache']) == pos // ratio
            st['cache'].append(self.comp_finish(P, v, pos + 1 - ratio, ratio, rotate))

    # ---- indexer (model.py Indexer)
    def idx_query(self, P, qr, p, ratio):
        q = self.lin(P + 'wq_b.weight', qr)
        n = self.ihd
        return [self.fp4(V.hadamard(self.rope(q[h * n:(h + 1) * n], p, ratio))) for h in range(self.inh)]

    def idx_select(self, P, x, q, ikv, visible):
        wt = [v * (self.ihd ** -0.5 * self.inh ** -0.5) for v in mv(self.w.get(P + 'weights_proj.weight'), x)]
        sc = [sum(wt[h] * max(sum(map(mul, q[h], ikv[e])), 0.0) for h in range(self.inh)) for e in range(visible)]
        return topk(sc, min(self.K, visible))

    # ---- attention (model.py Attention), prefill (start_pos 0) or one decode step
    def sparse_attn(self, P, q, keys):
        sink, scale, hd = self.w.get(P + 'attn_sink'), self.hd ** -0.5, self.hd
        o = []
        for h in range(self.H):
            qh = q[h * hd:(h + 1) * hd]
            s = [sum(map(mul, qh, k)) * scale for k in keys]
            m = max(s)
            e = [math.exp(v - m) for v in s]
            z = sum(e) + math.exp(sink[h] - m)
            o += [sum(ei * k[i] for ei, k in zip(e, keys)) / z for i in range(hd)]
        return o

    def q_kv(self, P, x, p, ratio):
        qr = rmsnorm(self.lin(P + 'wq_a.weight', x), self.w.get(P + 'q_norm.weight'), self.eps)
        q, hd = self.lin(P + 'wq_b.weight', qr), self.hd
        qq = []
        for h in range(self.H):
            v = q[h * hd:(h + 1) * hd]
            r = 1 / math.sqrt(sum(a * a for a in v) / hd + self.eps)
            qq += self.rope([a * r for a in v], p, ratio)
        kv = rmsnorm(self.lin(P + 'wkv.weight', x), self.w.get(P + 'kv_norm.weight'), self.eps)
        return qr, qq, self.kv8(self.rope(kv, p, ratio))

    def attn_out(self, P, o, p, ratio):
        hd, rd, G, olr = self.hd, self.rd, self.G, self.olr
        for h in range(self.H):  # inverse RoPE on each head's rope dims
            o[h * hd:(h + 1) * hd] = self.rope(o[h * hd:(h + 1) * hd], p, ratio, inverse=True)
        wo_a, gl = self.w.get(P + 'wo_a.weight'), len(o) // G
        z = []
        for g in range(G):
            z += mv(wo_a[g * olr:(g + 1) * olr], o[g * gl:(g + 1) * gl])
        return self.lin(P + 'wo_b.weight', z)

    def attn_prefill(self, li, P, ys, st):
        ratio, S, win = self.ratios[li], len(ys), self.win
        qrs, qs, kvs = [], [], []
        for t, x in enumerate(ys):
            qr, q, kv = self.q_kv(P, x, t, ratio)
            qrs.append(qr)
            qs.append(q)
            kvs.append(kv)
        st['ring'] = [None] * win
        for t in range(max(0, S - win), S):
            st['ring'][t % win] = kvs[t]
        sel = None
        if ratio:
            if ratio == 4:  # the indexer (its compressor first, as model.py)
                iq = [self.idx_query(P + 'indexer.', qr, t, ratio) for t, qr in enumerate(qrs)]
                st['icomp'] = {}
                self.comp_prefill(P + 'indexer.compressor.', ys, ratio, self.ihd, True, st['icomp'])
                ikv = st['icomp']['cache']
                sel = [self.idx_select(P + 'indexer.', ys[t], iq[t], ikv, (t + 1) // ratio) for t in range(S)]
            st['comp'] = {}
            self.comp_prefill(P + 'compressor.', ys, ratio, self.hd, False, st['comp'])
        out = []
        for t in range(S):
            keys = kvs[max(0, t - win + 1):t + 1]
            if ratio:
                ents = sel[t] if sel is not None else range((t + 1) // ratio)
                keys = keys + [st['comp']['cache'][e] for e in ents]
            out.append(self.attn_out(P, self.sparse_attn(P, qs[t], keys), t, ratio))
        return out, sel

    def attn_decode(self, li, P, y, pos, st):
        ratio, win = self.ratios[li], self.win
        qr, q, kv = self.q_kv(P, y, pos, ratio)
        st['ring'][pos % win] = kv
        if pos >= win - 1:  # get_window_topk_idxs: the whole ring, oldest first
            s = pos % win
            keys = [st['ring'][i] for i in list(range(s + 1, win)) + list(range(s + 1))]
        else:
            keys = [st['ring'][i] for i in range(pos + 1)]
        sel = None
        if ratio:
            if ratio == 4:
                iq = self.idx_query(P + 'indexer.', qr, pos, ratio)
                self.comp_decode(P + 'indexer.compressor.', y, pos, ratio, self.ihd, True, st['icomp'])
                sel = self.idx_select(P + 'indexer.', y, iq, st['icomp']['cache'], (pos + 1) // ratio)
            self.comp_decode(P + 'compressor.', y, pos, ratio, self.hd, False, st['comp'])
            ents = sel if sel is not None else range((pos + 1) // ratio)
            keys = keys + [st['comp']['cache'][e] for e in ents]
        return self.attn_out(P, self.sparse_attn(P, q, keys), pos, ratio), sel

    # ---- MoE (model.py MoE / Gate / Expert)
    def expert(self, P, x, wgt):
        xq = act_quant(x, 128) if self.aq and self.w.quantized(P + 'w1.weight') else x
        g, u = mv(self.w.get(P + 'w1.weight'), xq), mv(self.w.get(P + 'w3.weight'), xq)
        lim = self.lim
        if lim > 0:
            u = [min(max(v, -lim), lim) for v in u]
            g = [min(v, lim) for v in g]
        h = [wgt * silu(a) * b for a, b in zip(g, u)]
        return self.lin(P + 'w2.weight', h)

    def moe(self, li, P, x, tok):
        w = self.w
        scores = [math.sqrt(softplus(v)) for v in mv(w.get(P + 'gate.weight'), x)]
        if li < self.n_hash:
            ids = list(w.get(P + 'gate.tid2eid')[tok])
        else:
            b = w.get(P + 'gate.bias')
            ids = topk([s + bb for s, bb in zip(scores, b)], self.topk_e)
        wt = [scores[i] for i in ids]
        z = sum(wt)
        wt = [v / z * self.route_scale for v in wt]
        y = [0.0] * self.dim
        for i, wi in zip(ids, wt):
            y = [a + b for a, b in zip(y, self.expert(P + 'experts.%d.' % i, x, wi))]
        y = [a + b for a, b in zip(y, self.expert(P + 'shared_experts.', x, 1.0))]
        return y, sorted(ids)

    # ---- one Block over rows (prefill) or one row (decode)
    def block(self, li, P, X, toks, st, pos=None):
        hp = [self.hc_pre(P + 'hc_attn', x) for x in X]
        ys = [rmsnorm(y, self.w.get(P + 'attn_norm.weight'), self.eps) for y, _, _ in hp]
        if pos is None:
            a, sel = self.attn_prefill(li, P + 'attn.', ys, st)
        else:
            a0, s0 = self.attn_decode(li, P + 'attn.', ys[0], pos, st)
            a, sel = [a0], [s0]
        X = [self.hc_post(o, x, post, comb) for o, x, (_, post, comb) in zip(a, X, hp)]
        hp = [self.hc_pre(P + 'hc_ffn', x) for x in X]
        out, exps = [], []
        for (y, post, comb), x, tok in zip(hp, X, toks):
            f, e = self.moe(li, P + 'ffn.', rmsnorm(y, self.w.get(P + 'ffn_norm.weight'), self.eps), tok)
            out.append(self.hc_post(f, x, post, comb))
            exps.append(e)
        if self.rec is not None:
            if sel is not None:
                self.rec['sel'].setdefault(li, []).extend(sel)
            self.rec['experts'].setdefault(li, []).extend(exps)
        return out

    def logits(self, P, x):
        h = rmsnorm(self.hc_head(P, x), self.w.get(P + 'norm.weight'), self.eps)
        return mv(self.w.get('head.weight'), h)

    def new_state(self):
        return {'layers': [dict() for _ in range(self.nL)], 'pos': 0}

    def forward(self, toks, state=None):
        """Prefill toks at start_pos 0 (state None or fresh) or, with a state holding n tokens, one
        decode step of the single token toks[0] at start_pos n.  Returns (logits rows, final streams)."""
        if state is None:
            state = self.new_state()
        pos = state['pos'] if state['pos'] > 0 else None
        assert pos is None or len(toks) == 1
        X = [[list(self.embed[t]) for _ in range(self.hc)] for t in toks]
        for li in range(self.nL):
            X = self.block(li, 'layers.%d.' % li, X, toks, state['layers'][li], pos)
        state['pos'] += len(toks)
        return [self.logits('', x) for x in X], X

    def mtp(self, toks, hfin):
        """MTP rows 0..L-2: token i + 1's embedding and the main model's final streams of token i,
        the MTP block as one prefill at start_pos 0 (README T)."""
        if len(toks) < 2:
            return []
        P, w = 'mtp.0.', self.w
        ids = toks[1:]
        X = []
        for t, h in zip(ids, hfin):
            e = self.lin(P + 'e_proj.weight', rmsnorm(self.embed[t], w.get(P + 'enorm.weight'), self.eps))
            X.append([[a + b for a, b in zip(e, self.lin(P + 'h_proj.weight', rmsnorm(s, w.get(P + 'hnorm.weight'), self.eps)))]
                      for s in h])
        X = self.block(self.nL, P, X, ids, {})
        return [self.logits(P, x) for x in X]


# ---------------------------------------------------------------- runs and comparisons
def run_prefill(m, toks, with_mtp=True):
    m.rec = {'sel': {}, 'experts': {}}
    lg, X = m.forward(toks)
    rec, m.rec = m.rec, None
    mt = m.mtp(toks, X[:-1]) if with_mtp else None
    return lg, mt, rec


def run_decode(m, toks):  # prefill of toks[0], then one decode step per token
    st = m.new_state()
    rows = m.forward(toks[:1], st)[0]
    for t in toks[1:]:
        rows += m.forward([t], st)[0]
    return rows


def greedy(m, toks, n):
    st = m.new_state()
    last = m.forward(toks, st)[0][-1]
    out = {'tokens': [], 'margins': [], 'top1_logits': []}
    for k in range(n):
        a = max(range(len(last)), key=lambda j: (last[j], -j))
        out['tokens'].append(a)
        out['margins'].append(last[a] - max(v for j, v in enumerate(last) if j != a))
        out['top1_logits'].append(last[a])
        if k < n - 1:
            last = m.forward([a], st)[0][-1]
    return out


def sel_rows(m, rec, n):  # [n_csa_layers, n, K] padded with -1
    layers = [li for li in range(m.nL) if m.ratios[li] == 4]
    return [[s + [-1] * (m.K - len(s)) for s in rec['sel'][li][:n]] for li in layers]


def read_f32(path):
    b = open(path, 'rb').read()
    return struct.unpack('<%df' % (len(b) // 4), b)


def read_i32(path):
    b = open(path, 'rb').read()
    return struct.unpack('<%di' % (len(b) // 4), b)


def row_diffs(rows, gold, V):  # per row max |a - b|
    return [max(abs(a - gold[i * V + j]) for j, a in enumerate(r)) for i, r in enumerate(rows)]


def f32_equal(rows, gold):  # how many of our values round to exactly the golden float32
    return sum(1 for i, r in enumerate(rows) for j, a in enumerate(r) if R.f32(a) == gold[i * len(r) + j])


def set_mismatches(mine, gold_flat, k):  # mine: [layer][row] lists; gold [layer, row, k]
    bad = []
    for l, rows in enumerate(mine):
        for t, r in enumerate(rows):
            g = set(x for x in gold_flat[(l * len(rows) + t) * k:(l * len(rows) + t + 1) * k] if x >= 0)
            if set(x for x in r if x >= 0) != g:
                bad.append((l, t))
    return bad


def expert_rows(m, rec, n):
    return [rec['experts'][li][:n] for li in range(m.nL)]


def compare_experts(m, rec, gold, n):
    """The golden's experts file is [n_layers + 2, L, k] (experts_shape [6, L, 2] for 4 layers):
    its blocks are matched to our layers by content; returns (mismatching rows over all our
    layers against the golden block with the fewest mismatches, the block order found)."""
    k = m.topk_e
    blocks = len(gold) // (n * k) if n else 0
    mine = expert_rows(m, rec, n)
    total, order = 0, []
    for l in range(m.nL):
        best = None
        for b in range(blocks):
            bad = sum(1 for t in range(n) if set(mine[l][t]) != set(gold[(b * n + t) * k:(b * n + t + 1) * k]))
            if best is None or bad < best[0]:
                best = (bad, b)
        total += best[0] if best else 0
        order.append(best[1] if best else None)
    return total, order


def check(fixture, names, tol, aq, do_decode, do_greedy):
    gdir = os.path.join(fixture, 'golden')
    prompts = {p['name']: p for p in json.load(open(os.path.join(gdir, 'prompts.json')))['prompts']}
    greedy_gold = json.load(open(os.path.join(gdir, 'greedy.json')))
    ok = True

    def verdict(label, good, detail):
        nonlocal ok
        ok &= good
        print('%s %s: %s' % ('PASS' if good else 'FAIL', label, detail), flush=True)

    modes = [False] + ([True] if aq else [])
    for name in names:
        pr = prompts[name]
        toks, n = pr['tokens'], len(pr['tokens'])
        for q in modes:
            m = Model(fixture, aq=q)
            V = m.c['vocab_size']
            tag = '%s%s' % (name, ' aq' if q else '')
            rows_ok = pr['aq_stable_rows'] if q else pr['stable_rows']
            t0 = time.time()
            lg, mt, rec = run_prefill(m, toks)
            dt = time.time() - t0
            gold = read_f32(os.path.join(gdir, pr['aq_logits_file' if q else 'logits_file']))
            d = row_diffs(lg, gold, V)
            verdict('%s logits' % tag, max(d[:rows_ok]) <= tol,
                    'max abs %.3g over rows [0, %d) (all %d rows: %.3g; %d of %d values round to the golden '
                    'float32 exactly), prefill + MTP %.1f s'
                    % (max(d[:rows_ok]), rows_ok, n, max(d), f32_equal(lg, gold), n * V, dt))
            if n > 1:
                gm = read_f32(os.path.join(gdir, pr['aq_mtp_logits_file' if q else 'mtp_logits_file']))
                dm = row_diffs(mt, gm, V)
                r = max(rows_ok - 1, 0)
                verdict('%s MTP logits' % tag, not r or max(dm[:r]) <= tol,
                        'max abs %.3g over rows [0, %d) (all %d rows: %.3g)' % (max(dm[:r]) if r else 0.0, r, n - 1, max(dm)))
            if not q:
                bad = set_mismatches(sel_rows(m, rec, n), read_i32(os.path.join(gdir, pr['sel_file'])), m.K)
                verdict('%s sel sets' % tag, not bad, '%d of %d (layer, row) sets differ%s'
                        % (len(bad), len(sel_rows(m, rec, n)) * n, ' first %s' % (bad[0],) if bad else ''))
                bad, order = compare_experts(m, rec, read_i32(os.path.join(gdir, pr['experts_file'])), n)
                verdict('%s expert sets' % tag, bad == 0, '%d (layer, row) sets differ (golden blocks matched to '
                        'layers 0..%d: %s)' % (bad, m.nL - 1, order))
            if do_decode:
                t0 = time.time()
                dd = row_diffs(run_decode(m, toks), read_f32(os.path.join(gdir, pr['aq_logits_file' if q else 'logits_file'])), V)
                verdict('%s decode logits' % tag, max(dd[:rows_ok]) <= tol,
                        'prefill(1) + %d decode steps vs golden prefill: max abs %.3g over rows [0, %d), %.1f s'
                        % (n - 1, max(dd[:rows_ok]), rows_ok, time.time() - t0))
            if do_greedy:
                gg = next(r for r in greedy_gold['results_aq' if q else 'results'] if r['name'] == name)
                t0 = time.time()
                g = greedy(m, toks, len(gg['tokens']))
                # compare while the golden margin > 1e-2 (README); later tokens informative
                upto = next((i for i, mg in enumerate(gg['margins']) if mg <= 1e-2), len(gg['margins']))
                top1 = max((abs(a - b) for a, b in zip(g['top1_logits'][:upto], gg['top1_logits'][:upto])), default=0.0)
                same = g['tokens'][:upto] == gg['tokens'][:upto] and top1 <= tol
                if q and rows_ok < n:
                    same, note = True, ' (informative: the aq prefill is stable on %d of %d rows)' % (rows_ok, n)
                else:
                    note = ''
                verdict('%s greedy' % tag, same, 'first %d tokens (golden margin > 1e-2) %s; all 16 equal: %s; '
                        'max |top1 logit - golden (float64)| %.3g; %.1f s%s' % (
                            upto, 'equal' if g['tokens'][:upto] == gg['tokens'][:upto] else 'DIFFER %s vs %s' % (
                                g['tokens'][:upto], gg['tokens'][:upto]),
                            g['tokens'] == gg['tokens'],
                            max(abs(a - b) for a, b in zip(g['top1_logits'], gg['top1_logits'])), time.time() - t0, note))
    print('ALL PASS' if ok else 'SOME FAILED')
    return ok


def write_f32(path, rows):
    R.write_f32(path, rows)


def write_i32(path, vals):
    with open(path, 'wb') as f:
        f.write(struct.pack('<%di' % len(vals), *vals))


def main():
    args, opt = [], {}
    it = iter(sys.argv[1:])
    flags = ('--aq', '--no-kv-sim', '--decode', '--check', '--no-greedy', '--no-decode')
    for a in it:
        if a in flags:
            opt[a[2:]] = True
        elif a.startswith('--'):
            opt[a[2:]] = next(it)
        else:
            args.append(a)
    here = os.path.dirname(os.path.abspath(__file__))
    if 'check' in opt:
        fixture = args[0] if args else os.path.join(here, '..', 'tests', 'fixtures', 'tiny-v4')
        names = opt.get('names', 'len1,len5,len17,len64').split(',')
        ok = check(fixture, names, float(opt.get('tol', 1e-5)), 'aq' in opt,
                   'no-decode' not in opt, 'no-greedy' not in opt)
        sys.exit(0 if ok else 1)
    if len(args) != 1:
        sys.exit(__doc__)
    mdir = args[0]
    m = Model(mdir, aq='aq' in opt, kv_sim='no-kv-sim' not in opt)
    V = m.c['vocab_size']
    pr = None
    if 'prompt' in opt:
        pr = next(p for p in json.load(open(os.path.join(mdir, 'golden', 'prompts.json')))['prompts'] if p['name'] == opt['prompt'])
        toks = pr['tokens']
    else:
        toks = [int(t) for t in opt['tokens'].replace(' ', ',').split(',') if t]
    n = len(toks)
    t0 = time.time()
    if 'decode' in opt:
        lg, mt, rec = run_decode(m, toks), None, None
    else:
        lg, mt, rec = run_prefill(m, toks, with_mtp='mtp' in opt or pr is not None)
    print('%d tokens: %s logits in %.1f s' % (n, 'decode' if 'decode' in opt else 'prefill (+ MTP)', time.time() - t0))
    if 'out' in opt:
        write_f32(opt['out'], lg)
    if 'mtp' in opt and mt is not None:
        write_f32(opt['mtp'], mt)
    if 'sel' in opt and rec:
        write_i32(opt['sel'], [v for l in sel_rows(m, rec, n) for r in l for v in r])
    if 'experts' in opt and rec:
        write_i32(opt['experts'], [v for l in expert_rows(m, rec, n) for r in l for v in r])
    if pr is not None:
        gdir, q = os.path.join(mdir, 'golden'), m.aq
        d = row_diffs(lg, read_f32(os.path.join(gdir, pr['aq_logits_file' if q else 'logits_file'])), V)
        print('%s: max |logit - golden| %.3g (per row: %s)' % (pr['name'], max(d), ' '.join('%.2g' % v for v in d)))
        if mt:
            dm = row_diffs(mt, read_f32(os.path.join(gdir, pr['aq_mtp_logits_file' if q else 'mtp_logits_file'])), V)
            print('%s: max |MTP logit - golden| %.3g' % (pr['name'], max(dm)))
        if rec and not q and 'no-kv-sim' not in opt:
            bad = set_mismatches(sel_rows(m, rec, n), read_i32(os.path.join(gdir, pr['sel_file'])), m.K)
            print('%s: sel sets differing: %d' % (pr['name'], len(bad)))
            bad, order = compare_experts(m, rec, read_i32(os.path.join(gdir, pr['experts_file'])), n)
            print('%s: expert sets differing: %d (golden blocks for layers 0..: %s)' % (pr['name'], bad, order))
    if 'greedy' in opt:
        g = greedy(m, toks, int(opt['greedy']))
        print('greedy: %s (smallest margin %.3g)' % (g['tokens'], min(g['margins'])))
        if 'greedy-out' in opt:
            with open(opt['greedy-out'], 'w') as f:
                json.dump(g, f)
                f.write('\n')


if __name__ == '__main__':
    main()
