#!/usr/bin/env python3
"""A slow, plain float64 DeepSeek V3/R1 forward (standard library only), written from
../shared/docs/model-sched-api-spec.md §A (not from our C code), to make the MTP golden
logits that no independent implementation gives us.

  mtp_reference.py MODEL_DIR PROMPTS_JSON NAME [OUT [CHAIN_OUT]]
  mtp_reference.py --quantize-fp8 [--quantize-lm-head] MODEL_DIR PROMPTS_JSON NAME OUT
  mtp_reference.py --quantize-int8 [--quantize-lm-head] MODEL_DIR PROMPTS_JSON NAME OUT
  mtp_reference.py --quantize-int4 [--quantize-lm-head] MODEL_DIR PROMPTS_JSON NAME OUT
  mtp_reference.py --quantize-int4-rest [--quantize-lm-head] [--quantize-embedding] MODEL_DIR PROMPTS_JSON NAME OUT
  mtp_reference.py --kv-fp8 MODEL_DIR PROMPTS_JSON NAME OUT

Runs prompt NAME of PROMPTS_JSON (a fixture's golden/prompts.json) through the model and
prints the largest difference between its logits and the fixture's golden ones (the check
that this reference is right). With OUT and an MTP module in MODEL_DIR it also writes the
MTP logits [n - 1, vocab] float32: row p is the MTP module at position p, fed the model's
final-normed hidden state of position p and the token at p + 1, so it predicts the token at
p + 2 (the drafts of --speculative-config deepseek_mtp). With CHAIN_OUT (a name holding
DEPTH) it also writes the chained passes of depths 1 and 2 (num_speculative_tokens > 1),
each fed the prompt's own next tokens as drafts: row p of depth d is the module at position
p + d fed the token at p + d + 1 and its own output of the pass before, so it predicts the
token at p + d + 2.

With --quantize-fp8 the linear layers (those DeepSeek's fp8 checkpoints store in fp8) are
first quantized as `--quantization fp8` specifies (ops/quant_fp8.h): per 128x128 block,
scale = float32(amax / 448) (1 if that is 0), each weight the e4m3 value nearest to
float32(w / scale) (ties to the even code), times scale; OUT gets the model's logits [n, vocab].
--quantize-lm-head quantizes lm_head.weight the same way (`--quantize-lm-head`).
With --quantize-int8 they are W8A8 as `--quantization int8` specifies (ops/quant_int8.h),
kv_b_proj excepted: int8 weights with a float32 scale per row and 128 columns, each
product's input quantized the same way per 128 columns, exact integer dots per group, each
scaled by float32(sw * sx) and added in float32, group by group.
With --quantize-int4 the routed experts are int4 as `--quantization int4` quantizes them at load
(ops/quant_int4.h: per row and 32 columns, scale = bf16(max(float32(amax / 7.5), FLT_EPSILON))
(nearest even), q = clamp(rint(float32(w / scale)), -8, 7) against that rounded scale) and the
other layers int8 as --quantize-int8's. --quantize-int4-rest (`-q int4 --quantization-rest int4`)
puts those other layers (kv_b_proj excepted) in int4 too, and with --quantize-lm-head the lm_head.
--quantize-embedding (after any of the -q modes) quantizes the embedding as those other layers
(`--quantize-embedding`): each token's row read back as its dequantized values.
A compressed-tensors pack-quantized int4 module (<name>_packed and <name>_scale in the
checkpoint, scripts/make_int4_fixture.py) is read as the engine holds it: q x scale per row and
32 columns, f16 / f32 scales rounded to bf16 (nearest even; bf16 ones exactly)
and multiplied as the engine does with float32 activations (W4A8): x quantized per 128
columns as int8's, each 32-column group's exact integer dot scaled by float32(sw * sx) and
added in float32, group by group.
With --kv-fp8 every attention reads its keys and values from a latent cache rounded as
`--kv-cache-dtype fp8` stores it (attn/kernels/kv_fp8.h: kv_c per group of min(128, Lkv) values,
scale s = max(float32(amax / 448), FLT_MIN), each value the e4m3 nearest to float32(x / s) times
s; k_pe the same as one more group), the token's own row included, as a decode step reads it;
OUT gets the logits [n, vocab]."""
import json, math, os, struct, sys


def load(dirname):
    idx = os.path.join(dirname, 'model.safetensors.index.json')
    files = sorted(set(json.load(open(idx))['weight_map'].values())) if os.path.exists(idx) else ['model.safetensors']
    raw = {}
    for f in files:
        b = open(os.path.join(dirname, f), 'rb').read()
        n = struct.unpack('<Q', b[:8])[0]
        for name, h in json.loads(b[8:8 + n]).items():
            if name != '__metadata__':
                a, e = h['data_offsets']
                raw[name] = (h['dtype'], h['shape'], b[8 + n + a:8 + n + e])
    return raw


def fp8(byte):
    s, e, m = byte >> 7, (byte >> 3) & 15, byte & 7
    v = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


FP8 = [fp8(i) for i in range(256)]
QUANTIZED = ('q_proj', 'q_a_proj', 'q_b_proj', 'kv_a_proj_with_mqa', 'kv_b_proj', 'o_proj', 'gate_proj', 'up_proj',
             'down_proj', 'eh_proj')


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def e4m3_nearest(v):  # by search over the 127 finite non-negative values (bytes 0..126)
    a = min(abs(v), 448.0)
    lo, hi = 0, 126
    while hi - lo > 1:  # FP8[lo] <= a < FP8[hi]
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if FP8[mid] <= a else (lo, mid)
    d_lo, d_hi = a - FP8[lo], FP8[hi] - a
    b = lo if d_lo < d_hi or (d_lo == d_hi and lo % 2 == 0) else hi
    return -FP8[b] if v < 0 else FP8[b]


FLT_MIN = 2.0 ** -126


def bf16(x):  # float32(x) rounded to bfloat16, nearest even
    u = struct.unpack('<I', struct.pack('<f', x))[0]
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000
    return struct.unpack('<f', struct.pack('<I', u))[0]


def kv_fp8_group(v):  # --kv-cache-dtype fp8's rule on one group: s = max(f32(amax / 448), FLT_MIN),
    # each value the nearest e4m3 of f32(x / s) (ties even, saturating), decoded as f32(code * s)
    v = [f32(x) for x in v]
    s = max(f32(max(abs(x) for x in v) / 448.0), FLT_MIN)
    return [f32(e4m3_nearest(f32(x / s)) * s) for x in v]


def kv_fp8_row(kvc, kpe, ds_mla):  # a cached latent row as --kv-cache-dtype fp8 stores it: kv_c in
    # groups of min(128, Lkv); k_pe in bf16 (FlashMLA's fp8_ds_mla, V3.2) or one more e4m3 group
    g = min(128, len(kvc))
    c = [y for a in range(0, len(kvc), g) for y in kv_fp8_group(kvc[a:a + g])]
    return c, [bf16(x) for x in kpe] if ds_mla else kv_fp8_group(kpe)


def quantize(rows):  # rows of float32 values -> dequantized fp8 values, 128x128 blocks
    R, C = len(rows), len(rows[0])
    out = [list(r) for r in rows]
    for i0 in range(0, R, 128):
        for j0 in range(0, C, 128):
            blk = [(i, j) for i in range(i0, min(i0 + 128, R)) for j in range(j0, min(j0 + 128, C))]
            s = f32(max(abs(rows[i][j]) for i, j in blk) / 448.0) or 1.0
            for i, j in blk:
                out[i][j] = e4m3_nearest(f32(rows[i][j] / s)) * s
    return out



def decode_flat(dt, b):
    """A tensor's bytes as a flat list of values for F32, BF16 and F8_E4M3 (the codes' values,
    unscaled); None for another dtype."""
    if dt == 'F32':
        return list(struct.unpack('<%df' % (len(b) // 4), b))
    if dt == 'BF16':
        return [struct.unpack('<f', struct.pack('<I', h << 16))[0] for h in struct.unpack('<%dH' % (len(b) // 2), b)]
    if dt == 'F8_E4M3':
        return [FP8[x] for x in b]
    return None

class Weights:
    def __init__(self, dirname, quantize_fp8=False, quantize_head=False, quantize_int8=False, quantize_int4=False,
                 quantize_embed=False):
        quantize_int8 = quantize_int8 or quantize_int4  # int4's routed experts, int8's other layers
        self.raw, self.cache, self.quantize_fp8, self.int8 = load(dirname), {}, quantize_fp8 or quantize_int8, quantize_int8
        self.int4 = quantize_int4
        # int8 leaves kv_b_proj alone (the absorbed attention multiplies its transpose)
        q = tuple(n for n in QUANTIZED if n != 'kv_b_proj') if quantize_int8 else QUANTIZED
        self.quantized = q + (('lm_head',) if quantize_head else ()) + (('embed_tokens',) if quantize_embed else ())

    def __contains__(self, name):
        return name in self.raw or name + '_packed' in self.raw

    def get(self, name):  # a vector, or a matrix as a list of rows
        if name in self.cache:
            return self.cache[name]
        if name not in self.raw and name + '_packed' in self.raw:  # compressed-tensors int4
            self.cache[name] = Q4(self.raw[name + '_packed'], self.get(name + '_scale'))
            return self.cache[name]
        dt, shape, b = self.raw[name]
        flat = decode_flat(dt, b)
        if flat is None:
            raise SystemExit('%s: dtype %s' % (name, dt))
        if len(shape) == 1:
            out = flat
        else:
            r, c = shape
            out = [flat[i * c:(i + 1) * c] for i in range(r)]
            if dt == 'F8_E4M3':  # dequantize: multiply by the 128x128 block's scale_inv
                sc = self.get(name + '_scale_inv')
                out = [[v * sc[i // 128][j // 128] for j, v in enumerate(row)] for i, row in enumerate(out)]
            if self.quantize_fp8 and name.endswith('.weight') and name.split('.')[-2] in self.quantized:
                int4 = self.int4 and ('.mlp.experts.' in name or self.int4 == 'rest')  # 'rest': every one
                out = (q4_quantize(out) if int4 else Q8(out) if self.int8
                       else out if dt == 'F8_E4M3' else quantize(out))
                if name.endswith('embed_tokens.weight'):  # a lookup: the rows' values
                    out = dequantize(out)
        self.cache[name] = out
        return out


class Q8:  # an int8-quantized matrix (--quantization int8): q[r][c] and a scale per row and 128 columns
    def __init__(self, rows):
        self.q, self.s = [], []
        for row in rows:
            qr, sr = [], []
            for a in range(0, len(row), 128):
                s, q = quant_group(row[a:a + 128])
                qr += q
                sr.append(s)
            self.q.append(qr)
            self.s.append(sr)


class Q4:  # a compressed-tensors pack-quantized int4 matrix: q[r][c] (-8..7) and a scale per row and 32 columns
    def __init__(self, packed, scales):
        dt, (R, W), b = packed
        words = struct.unpack('<%dI' % (R * W), b)  # eight q + 8 per word, lowest nibble first
        self.s = [[bf16(v) for v in row] for row in scales]  # the engine's int4 row holds bf16 scales
        C = 32 * len(scales[0])
        self.q = [[(words[r * W + c // 8] >> 4 * (c % 8) & 15) - 8 for c in range(C)] for r in range(R)]


def dequantize(W):  # a Q4 / Q8 matrix's values as rows (each q x its scale, exact in float32)
    if isinstance(W, (Q4, Q8)):
        g = 32 if isinstance(W, Q4) else 128
        return [[f32(q * sr[c // g]) for c, q in enumerate(qr)] for qr, sr in zip(W.q, W.s)]
    return W


def q4_quantize(rows):  # --quantization int4 at load (ops/quant_int4.h): scale = bf16(max(amax / 7.5, FLT_EPSILON))
    m = Q4.__new__(Q4)
    m.q, m.s = [], []
    for row in rows:
        qr, sr = [], []
        for a in range(0, len(row), 32):
            g = [f32(v) for v in row[a:a + 32]]
            s = bf16(max(f32(max(abs(v) for v in g) / 7.5), 2.0 ** -23))  # q against the rounded scale
            sr.append(s)
            qr += [max(-8, min(7, round(f32(v / s)))) for v in g]  # round: ties to even, as rintf
        m.q.append(qr)
        m.s.append(sr)
    return m


def quant_group(v):  # float32 values -> (scale, ints): scale = amax / 127, q = rint(v / scale), ties to even
    v = [f32(x) for x in v]
    s = f32(max(abs(x) for x in v) / 127.0)
    return s, [round(f32(x / s)) if s > 0 else 0 for x in v]


def mv(W, x):
    if isinstance(W, Q4):  # W4A8 (float32 activations): x per 128 columns as int8's, exact dots per 32
        gx = [quant_group(x[a:a + 128]) for a in range(0, len(x), 128)]
        out = []
        for qr, sr in zip(W.q, W.s):
            acc = 0.0
            for g, sw in enumerate(sr):
                sx, qx = gx[g // 4]
                dot = sum(a * b for a, b in zip(qr[g * 32:(g + 1) * 32], qx[g % 4 * 32:g % 4 * 32 + 32]))
                acc = f32(dot * f32(sw * sx) + acc)
            out.append(acc)
        return out
    if not isinstance(W, Q8):
        return [sum(a * b for a, b in zip(row, x)) for row in W]
    # W8A8: x quantized per 128 columns too; each group's exact integer dot scaled by
    # float32(sw * sx) and added in float32 (a fused multiply-add), group by group
    gx = [quant_group(x[a:a + 128]) for a in range(0, len(x), 128)]
    out = []
    for qr, sr in zip(W.q, W.s):
        acc = 0.0
        for g, (sx, qx) in enumerate(gx):
            dot = sum(a * b for a, b in zip(qr[g * 128:(g + 1) * 128], qx))
            acc = f32(dot * f32(sr[g] * sx) + acc)
        out.append(acc)
    return out


def rmsnorm(x, w, eps):
    r = 1 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * r * g for v, g in zip(x, w)]


def silu(z):
    return z / (1 + math.exp(-z))


class Model:
    def __init__(self, dirname, quantize_fp8=False, quantize_head=False, quantize_int8=False, quantize_int4=False,
                 quantize_embed=False):
        self.c = json.load(open(os.path.join(dirname, 'config.json')))
        self.w = Weights(dirname, quantize_fp8, quantize_head, quantize_int8, quantize_int4, quantize_embed)
        c = self.c
        rp = c.get('rope_parameters')  # newer transformers: rope_theta and rope_type inside (GLM-5's)
        dr, theta = c['qk_rope_head_dim'], rp.get('rope_theta', c.get('rope_theta', 10000)) if rp else c['rope_theta']
        f = [theta ** (-2 * i / dr) for i in range(dr // 2)]
        rs = c.get('rope_scaling') if not rp else rp if rp.get('rope_type', 'default') != 'default' else None
        scale = (c['qk_nope_head_dim'] + dr) ** -0.5
        if rs:  # YaRN (§A.6)
            L, fac = rs['original_max_position_embeddings'], rs['factor']
            corr = lambda n: dr * math.log(L / (n * 2 * math.pi)) / (2 * math.log(theta))
            lo, hi = max(math.floor(corr(rs.get('beta_fast', 32))), 0), min(math.ceil(corr(rs.get('beta_slow', 1))), dr - 1)
            if lo == hi:
                hi += 0.001
            ramp = [min(max((i - lo) / (hi - lo), 0), 1) for i in range(dr // 2)]
            f = [fi / fac * r + fi * (1 - r) for fi, r in zip(f, ramp)]
            ms = lambda s, m: 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1
            self.cs_mul = ms(fac, rs.get('mscale', 1)) / ms(fac, rs.get('mscale_all_dim', 0))
            scale *= ms(fac, rs.get('mscale_all_dim', 0)) ** 2
        else:
            self.cs_mul = 1.0
        self.freqs, self.scale = f, scale

    def rope(self, x, p):  # interleaved pairs (§A.5)
        out = list(x)
        for i, fi in enumerate(self.freqs):
            co, si = math.cos(p * fi) * self.cs_mul, math.sin(p * fi) * self.cs_mul
            a, b = x[2 * i], x[2 * i + 1]
            out[2 * i], out[2 * i + 1] = a * co - b * si, b * co + a * si
        return out

    def layer(self, li, hs, positions):  # one decoder layer over a sequence's rows
        return self.ffn(li, self.attn(li, hs, positions))

    def attn(self, li, hs, positions):  # hs + MLA(input_layernorm(hs)), causal over the rows
        c, w, eps = self.c, self.w, self.c['rms_norm_eps']
        P = 'model.layers.%d.' % li
        H, dn, dr, dv, Lkv = c['num_attention_heads'], c['qk_nope_head_dim'], c['qk_rope_head_dim'], c['v_head_dim'], c['kv_lora_rank']
        xs = [rmsnorm(h, w.get(P + 'input_layernorm.weight'), eps) for h in hs]
        qs, ks, vs = [], [], []
        for x, p in zip(xs, positions):
            if c.get('q_lora_rank'):
                q = mv(w.get(P + 'self_attn.q_b_proj.weight'), rmsnorm(mv(w.get(P + 'self_attn.q_a_proj.weight'), x), w.get(P + 'self_attn.q_a_layernorm.weight'), eps))
            else:
                q = mv(w.get(P + 'self_attn.q_proj.weight'), x)
            heads = [q[h * (dn + dr):(h + 1) * (dn + dr)] for h in range(H)]
            qs.append([hq[:dn] + self.rope(hq[dn:], p) for hq in heads])
            kv = mv(w.get(P + 'self_attn.kv_a_proj_with_mqa.weight'), x)
            kvc, kpe = rmsnorm(kv[:Lkv], w.get(P + 'self_attn.kv_a_layernorm.weight'), eps), self.rope(kv[Lkv:], p)
            if KV_FP8:  # every key and value read back from the rounded cache (the decode path's view)
                kvc, kpe = kv_fp8_row(kvc, kpe, False)
            up = mv(w.get(P + 'self_attn.kv_b_proj.weight'), kvc)
            ks.append([up[h * (dn + dv):h * (dn + dv) + dn] + kpe for h in range(H)])
            vs.append([up[h * (dn + dv) + dn:(h + 1) * (dn + dv)] for h in range(H)])
        out = []
        for t in range(len(hs)):  # causal: the sequence's own earlier positions
            o = []
            for h in range(H):
                sc = [sum(a * b for a, b in zip(qs[t][h], ks[s][h])) * self.scale for s in range(t + 1)]
                mx = max(sc)
                e = [math.exp(v - mx) for v in sc]
                z = sum(e)
                o += [sum(e[s] / z * vs[s][h][i] for s in range(t + 1)) for i in range(dv)]
            out.append([a + b for a, b in zip(hs[t], mv(w.get(P + 'self_attn.o_proj.weight'), o))])
        return out

    def ffn(self, li, hs):  # hs + MLP or MoE(post_attention_layernorm(hs))
        c, w, eps = self.c, self.w, self.c['rms_norm_eps']
        P = 'model.layers.%d.' % li
        moe = c.get('n_routed_experts') and li >= c['first_k_dense_replace'] and li % c.get('moe_layer_freq', 1) == 0
        res = []
        for h in hs:
            x = rmsnorm(h, w.get(P + 'post_attention_layernorm.weight'), eps)
            mlp = lambda pre, x: mv(w.get(pre + 'down_proj.weight'), [silu(g) * u for g, u in zip(mv(w.get(pre + 'gate_proj.weight'), x), mv(w.get(pre + 'up_proj.weight'), x))])
            if not moe:
                y = mlp(P + 'mlp.', x)
            else:  # §A.7
                E, k = c['n_routed_experts'], c['num_experts_per_tok']
                g = mv(w.get(P + 'mlp.gate.weight'), x)
                s = [1 / (1 + math.exp(-v)) for v in g] if c.get('scoring_func') == 'sigmoid' else [math.exp(v - max(g)) / sum(math.exp(u - max(g)) for u in g) for v in g]
                bias = P + 'mlp.gate.e_score_correction_bias'
                ch = [a + b for a, b in zip(s, w.get(bias))] if bias in w else list(s)
                G, kg = c.get('n_group') or 1, c.get('topk_group') or 1
                gs = E // G
                score = [sum(sorted(ch[j * gs:(j + 1) * gs], reverse=True)[:2]) if bias in w else max(ch[j * gs:(j + 1) * gs]) for j in range(G)]
                keep = sorted(range(G), key=lambda j: (-score[j], j))[:kg]
                ch = [v if i // gs in keep else -math.inf for i, v in enumerate(ch)]
                ids = sorted(range(E), key=lambda i: (-ch[i], i))[:k]
                wt = [s[i] for i in ids]
                if c.get('norm_topk_prob'):
                    wt = [v / sum(wt) for v in wt]
                y = [0.0] * len(x)
                for i, wi in zip(ids, wt):
                    y = [a + c.get('routed_scaling_factor', 1.0) * wi * b for a, b in zip(y, mlp(P + 'mlp.experts.%d.' % i, x))]
                if c.get('n_shared_experts'):
                    y = [a + b for a, b in zip(y, mlp(P + 'mlp.shared_experts.', x))]
            res.append([a + b for a, b in zip(h, y)])
        return res


def forward(m, toks):  # the model over one sequence at positions 0..n-1: final-normed hidden states, logits
    c, w = m.c, m.w
    emb = w.get('model.embed_tokens.weight')
    hs = [list(emb[t]) for t in toks]
    pos = list(range(len(toks)))
    for li in range(c['num_hidden_layers']):
        hs = m.layer(li, hs, pos)
    fin = [rmsnorm(h, w.get('model.norm.weight'), c['rms_norm_eps']) for h in hs]
    return fin, [mv(w.get('lm_head.weight'), x) for x in fin]


class MTP:  # the MTP module model.layers.{L}.* (L = num_hidden_layers) of model m
    def __init__(self, m):
        c, w = m.c, m.w
        self.m, self.L, self.eps = m, c['num_hidden_layers'], c['rms_norm_eps']
        self.P = P = 'model.layers.%d.' % self.L
        self.emb = w.get(P + 'embed_tokens.weight') if P + 'embed_tokens.weight' in w else w.get('model.embed_tokens.weight')
        self.head = w.get(P + 'shared_head.head.weight') if P + 'shared_head.head.weight' in w else w.get('lm_head.weight')

    def input(self, e, h):  # eh_proj([enorm(embedding) | hnorm(hidden state)])
        w, P, eps = self.m.w, self.P, self.eps
        return mv(w.get(P + 'eh_proj.weight'), rmsnorm(e, w.get(P + 'enorm.weight'), eps) + rmsnorm(h, w.get(P + 'hnorm.weight'), eps))

    def logits(self, h):
        return mv(self.head, rmsnorm(h, self.m.w.get(self.P + 'shared_head.norm.weight'), self.eps))

    def first(self, toks, fin):  # row p: the module at position p, fed token p + 1 and fin[p]
        mi = []
        for p in range(len(toks) - 1):  # MTP at position p: token p + 1 and the hidden state of p
            e = [0.0] * self.m.c['hidden_size'] if p == 0 else list(self.emb[toks[p + 1]])
            mi.append(self.input(e, fin[p]))
        mh = self.m.layer(self.L, mi, list(range(len(toks) - 1)))
        return mi, mh, [self.logits(h) for h in mh]

    def chain(self, toks, mi, mh, d):
        # Chained passes (num_speculative_tokens > 1, as vLLM's MTP proposer): the module at
        # position p + d, fed the token at p + d + 1 and its own output at p + d - 1 (before the
        # head's norm), attending to its rows of positions 0..p from the first pass and to the
        # chained rows before it. Depth d's row p predicts the token at p + d + 2.
        rows = []
        for p in range(len(toks) - 1 - d):
            ins, prev = list(mi[:p + 1]), mh[p]
            for j in range(1, d + 1):
                ins.append(self.input(list(self.emb[toks[p + j + 1]]), prev))
                prev = self.m.layer(self.L, ins, list(range(p + j + 1)))[-1]
            rows.append(self.logits(prev))
        return rows


def write_f32(path, rows):
    with open(path, 'wb') as f:
        f.write(struct.pack('<%df' % sum(len(r) for r in rows), *[v for row in rows for v in row]))


KV_FP8 = False  # --kv-fp8


def main():
    global KV_FP8
    if sys.argv[1] == '--kv-fp8':
        KV_FP8 = True
        del sys.argv[1]
        model_dir, prompts, name, out = sys.argv[1:5]
        m = Model(model_dir)
        pr = next(p for p in json.load(open(prompts))['prompts'] if p['name'] == name)
        fin, logits = forward(m, pr['tokens'])
        write_f32(out, logits)
        print('wrote %s: logits [%d, %d] with the latent cache rounded as --kv-cache-dtype fp8' %
              (out, len(logits), m.c['vocab_size']))
        return
    q4 = {'--quantize-int4': 'experts', '--quantize-int4-rest': 'rest'}.get(sys.argv[1], False)
    q8 = q4 or sys.argv[1] == '--quantize-int8'
    q = q8 or sys.argv[1] == '--quantize-fp8'
    if q:
        del sys.argv[1]
    qh = q and sys.argv[1] == '--quantize-lm-head'
    if qh:
        del sys.argv[1]
    qe = q and sys.argv[1] == '--quantize-embedding'
    if qe:
        del sys.argv[1]
    model_dir, prompts, name = sys.argv[1:4]
    m = Model(model_dir, q and not q8, qh, q8, q4, qe)
    d = json.load(open(prompts))
    pr = next(p for p in d['prompts'] if p['name'] == name)
    toks = pr['tokens']
    n, V = len(toks), m.c['vocab_size']
    fin, logits = forward(m, toks)
    gold = open(os.path.join(os.path.dirname(prompts), pr['logits_file']), 'rb').read()
    g = struct.unpack('<%df' % (n * V), gold)
    diff = max(abs(logits[i][j] - g[i * V + j]) for i in range(n) for j in range(V))
    print('%s: max |logit - golden| over %d x %d: %.3g%s' % (name, n, V, diff, ' (unquantized golden)' if q else ''))
    if q:
        write_f32(sys.argv[4], logits)
        print('wrote %s: logits [%d, %d] of the %s-quantized model' % (sys.argv[4], n, V, 'int4' if q4 == 'experts' else 'all-int4' if q4 else 'int8' if q8 else 'fp8'))
        return
    if len(sys.argv) < 5:
        return
    mtp = MTP(m)
    mi, mh, out = mtp.first(toks, fin)
    write_f32(sys.argv[4], out)
    print('wrote %s: MTP logits [%d, %d]' % (sys.argv[4], n - 1, V))
    if len(sys.argv) < 6:
        return
    for d in (1, 2):
        rows = mtp.chain(toks, mi, mh, d)
        out_d = sys.argv[5].replace('DEPTH', str(d))
        write_f32(out_d, rows)
        print('wrote %s: chained MTP logits, depth %d [%d, %d]' % (out_d, d, len(rows), V))


if __name__ == '__main__':
    main()
