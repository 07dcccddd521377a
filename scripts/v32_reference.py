#!/usr/bin/env python3
"""A slow, plain float64 DeepSeek-V3.2 forward (DeepSeek Sparse Attention), standard library only.

Written from tests/fixtures/tiny-v32/golden/README.md and DeepSeek's reference
inference/model.py + kernel.py (deepseek-ai/DeepSeek-V3.2-Exp, the 2025-11-17 version with the
non-interleaved indexer RoPE), not from our C code. Everything V3.2 shares with V3 (MLA, MoE,
YaRN, the MTP module, fp8 weights) is scripts/mtp_reference.py's; this file adds the lightning
indexer and attends to the keys it selects.

  v32_reference.py MODEL_DIR PROMPTS_JSON NAME [options]

Runs prompt NAME of PROMPTS_JSON through the model. Where the prompt's golden files exist next to
PROMPTS_JSON it prints the largest |logit - golden| and the number of (layer, position) index sets
that differ from <name>.topk.i32 (the check that this reference is right); with an MTP module, the
same for <name>.mtp.f32, <name>.mtp.topk.i32 and <name>.chain{1,2}.f32 where they exist. It always prints the
fragile points of the selection: for every query with more keys than index_topk, the gap between
its k-th and (k+1)-th index score relative to the row's largest |score|, and the smallest MoE
routing margin (the score gap that decides a row's expert groups or experts), and the rows whose
index set would change if one indexer fp8 code within 1e-4 ulp of a rounding midpoint went the
other way (float32 noise moves q/k by about 1e-5 ulp), with that code's distance.

  --out F           the model's logits [n, vocab], raw LE float32
  --topk-out F      the selected key positions [n_layers, n, index_topk] int32, ascending, -1 padded
  --mtp-out F       MTP logits [n - 1, vocab] (mtp_reference.py's meaning: row p is the module at
                    position p fed the final-normed hidden state of p and the token at p + 1)
  --mtp-topk-out F  the MTP layer's selected positions [1, n - 1, index_topk]
  --chain-out F     (F holding DEPTH) chained MTP passes of depths 1 and 2 [n - 1 - d, vocab]
  --greedy-out F    N (--greedy-n, default 16) greedy tokens after the prompt, as JSON {name, tokens,
                    margins (top-1 minus top-2 logit), top1_logits}: step k's logits are the last row
                    of a forward over the prompt and the k tokens before (causal, so the same as an
                    incremental decode); each decode row's boundary gap joins the fragile points
  --dense           also run the same weights with dense MLA (no indexer) and report how far the
                    rows with more than index_topk keys move: the proof that selection matters
  --kv-fp8          the latent cache rounded as --kv-cache-dtype fp8 stores it (FlashMLA's
                    fp8_ds_mla: kv_c per 128 values in e4m3, scale max(float32(amax / 448),
                    FLT_MIN); k_pe bf16), every key read back from it (mtp_reference.py)
  --json F          the numbers printed, machine-readable
  --perturb REL     also rerun the model TRIALS times (--trials, default 4) with every indexer q/k
                    element (before its fp8 rounding) and every head weight multiplied by
                    (1 + REL * u), u uniform in [-1, 1), and count the (layer, position) sets that
                    change: how far rounding noise is from a flip

Numerics (README K1-K6): activations float64; weights as stored (BF16 widened, F8_E4M3 times the
128x128 block's weight_scale_inv); the indexer's q/k go through fp8 e4m3 with ue8m0 scales as
the official act_quant does (float32 scale arithmetic, round-to-nearest-even codes); index-score
ties go to the lower position."""
import json, math, os, random, struct, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mtp_reference as R  # noqa: E402

FP8_MAX = 448.0
FP8_MAX_INV = R.f32(1 / FP8_MAX)  # fp8_max_inv = 1 / fp8_max, a float32 in the kernel


def ue8m0_scale(amax):
    """act_quant's scale with scale_fmt set: fast_round_scale(max(amax, 1e-4), fp8_max_inv), i.e.
    the float32 product amax * fl32(1/448) rounded UP to a power of two (exponent + 1 unless the
    mantissa bits are zero)."""
    s = R.f32(R.f32(max(amax, 1e-4)) * FP8_MAX_INV)
    m, e = math.frexp(s)  # s = m * 2^e, 0.5 <= m < 1
    return s if m == 0.5 else math.ldexp(1.0, e)


def e4m3_midpoint_dist(v):  # |v| 's distance to the nearest e4m3 rounding midpoint, in units of its ulp
    a = min(abs(v), FP8_MAX)
    lo, hi = 0, 126
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if R.FP8[mid] <= a else (lo, mid)
    ulp = R.FP8[hi] - R.FP8[lo]
    return abs(a - (R.FP8[lo] + R.FP8[hi]) / 2) / ulp


class Fp8Stats:
    def __init__(self):
        self.n, self.near4, self.near3, self.groups, self.scale_near = 0, 0, 0, 0, 0

    def scale(self, amax):  # a group whose ue8m0 rounding is within 1e-5 (relative) of going the other way
        s = R.f32(max(amax, 1e-4)) * FP8_MAX_INV
        m, _ = math.frexp(s)
        self.groups += 1
        self.scale_near += m < 0.5 * (1 + 1e-5) or m > 1 - 0.5e-5

    def add(self, y):
        d = e4m3_midpoint_dist(y)
        self.n += 1
        self.near4 += d < 1e-4
        self.near3 += d < 1e-3


def e4m3_second(v):  # the e4m3 value second nearest to v (the other side of the rounding decision)
    a = min(abs(v), FP8_MAX)
    lo, hi = 0, 126
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if R.FP8[mid] <= a else (lo, mid)
    b = lo if abs(R.e4m3_nearest(a) - R.FP8[hi]) < abs(R.e4m3_nearest(a) - R.FP8[lo]) else hi
    return -R.FP8[b] if v < 0 else R.FP8[b]


FLIP_ULP = 1e-4  # near a rounding midpoint: within this many ulp (f32 noise is ~1e-5 ulp)


def act_quant(x, group, stats=None, near=None):
    """Quantize-dequantize: per group of `group` elements, scale = ue8m0_scale(amax), code = the
    e4m3 value nearest to clamp(x / scale, +-448) (ties to even), value = code * scale (exact).
    With near (a list), appends (index, the other code's value) for each element within FLIP_ULP
    of a rounding midpoint."""
    out = []
    for g0 in range(0, len(x), group):
        blk = x[g0:g0 + group]
        s = ue8m0_scale(max(abs(v) for v in blk))
        if stats:
            stats.scale(max(abs(v) for v in blk))
        for i, v in enumerate(blk):
            y = min(max(v / s, -FP8_MAX), FP8_MAX)  # exact: s is a power of two
            if stats:
                stats.add(y)
            if near is not None and e4m3_midpoint_dist(y) < FLIP_ULP:
                near.append((g0 + i, e4m3_second(y) * s, e4m3_midpoint_dist(y)))
            out.append(R.e4m3_nearest(y) * s)
    return out


def hadamard(x):
    """fast_hadamard_transform.hadamard_transform(x, scale=d^-0.5): x @ H_d (Sylvester order,
    H[i][j] = (-1)^popcount(i & j)) times d^-0.5; d a power of two."""
    y, n, h = list(x), len(x), 1
    while h < n:
        for i in range(0, n, 2 * h):
            for j in range(i, i + h):
                a, b = y[j], y[j + h]
                y[j], y[j + h] = a + b, a - b
        h *= 2
    sc = n ** -0.5
    return [v * sc for v in y]


def layernorm(x, w, b, eps=1e-6):  # F.layer_norm: biased variance
    mu = sum(x) / len(x)
    var = sum((v - mu) ** 2 for v in x) / len(x)
    r = 1 / math.sqrt(var + eps)
    return [(v - mu) * r * g + c for v, g, c in zip(x, w, b)]


class V32Model(R.Model):
    def __init__(self, dirname):
        super().__init__(dirname)
        c = self.c
        self.nh, self.hd, self.topk = c['index_n_heads'], c['index_head_dim'], c['index_topk']
        self.group = min(128, self.hd)  # act_quant block: one scale per 128 (here: per head vector)
        self.stats = {}  # layer -> {'sel': [sorted positions per row], 'gap': [rel gap or None], 'abs': [...]}
        self.fp8 = Fp8Stats()
        self.route_margin = {}  # MoE layer -> per row: the smallest score gap that decides its experts
        self.perturb = None  # (rel, random.Random) while a noise trial runs

    def rope_indexer(self, x, p):  # NeoX halves (DeepSeek's), or MLA's interleaved pairs with
        # indexer_rope_interleave true (GLM-5's, vLLM's is_neox_style = not indexer_rope_interleave)
        return self.rope(x, p) if self.c.get('indexer_rope_interleave', self.c.get('model_type') == 'glm_moe_dsa') \
            else self.rope_neox(x, p)

    def rope_neox(self, x, p):  # the indexer's RoPE: NOT interleaved, pairs (x_i, x_{i + r/2})
        out, half = list(x), len(self.freqs)
        for i, fi in enumerate(self.freqs):
            co, si = math.cos(p * fi) * self.cs_mul, math.sin(p * fi) * self.cs_mul
            a, b = x[i], x[i + half]
            out[i], out[i + half] = a * co - b * si, b * co + a * si
        return out

    def noise(self, v):
        if not self.perturb:
            return v
        rel, rng = self.perturb
        return [a * (1 + rel * (2 * rng.random() - 1)) for a in v]

    def indexer(self, li, xs, qrs, positions):
        """README K1-K5: the key positions each row attends to (rows are the sequence's positions in
        order, causal by row), and per row the relative gap at the selection boundary."""
        w, P = self.w, 'model.layers.%d.self_attn.indexer.' % li
        nh, hd, dr = self.nh, self.hd, self.c['qk_rope_head_dim']
        iq, ik, wt, nq, nk = [], [], [], [], []
        for x, qr, p in zip(xs, qrs, positions):
            q = R.mv(w.get(P + 'wq_b.weight'), qr)
            heads, nq_t = [], []
            for h in range(nh):
                v = q[h * hd:(h + 1) * hd]
                v = hadamard(self.rope_indexer(v[:dr], p) + v[dr:])
                near = []
                heads.append(act_quant(self.noise(v), self.group, self.fp8, near))
                nq_t += [(h, j, alt, dist) for j, alt, dist in near]
            iq.append(heads)
            nq.append(nq_t)
            k = layernorm(R.mv(w.get(P + 'wk.weight'), x), w.get(P + 'k_norm.weight'), w.get(P + 'k_norm.bias'))
            k = hadamard(self.rope_indexer(k[:dr], p) + k[dr:])
            near = []
            ik.append(act_quant(self.noise(k), self.group, self.fp8, near))
            nk.append(near)
            wt.append(self.noise([v * nh ** -0.5 * hd ** -0.5 for v in R.mv(w.get(P + 'weights_proj.weight'), x)]))
        sel, gap, gabs, scs, keys, K = [], [], [], [], [], self.topk
        dot = lambda t, h, s: sum(a * b for a, b in zip(iq[t][h], ik[s]))  # noqa: E731
        for t in range(len(xs)):
            sc = [sum(wt[t][h] * max(dot(t, h, s), 0.0) for h in range(nh)) for s in range(t + 1)]
            scs.append(sc)
            if t + 1 <= K:  # every causal key
                sel.append(list(range(t + 1)))
                gap.append(None)
                gabs.append(None)
                keys.append(None)
                continue
            order = sorted(range(t + 1), key=lambda s: (-sc[s], s))  # ties: the lower position first
            sel.append(sorted(order[:K]))
            keys.append(((-sc[order[K - 1]], order[K - 1]), (-sc[order[K]], order[K])))
            g = sc[order[K - 1]] - sc[order[K]]
            mx = max(abs(v) for v in sc)
            gap.append(g / mx if mx else 0.0)
            gabs.append(g)
        # Which rows' sets would change if one fp8 code within FLIP_ULP of a rounding midpoint went
        # the other way (as float32 noise may make it do): key codes touch every later row, query
        # codes their own row.
        flip = {}  # row -> the smallest distance (ulp) of a code that would change its set
        for s, near in enumerate(nk):
            for j, alt, dist in near:
                d = alt - ik[s][j]
                for t in range(max(s, K), len(xs)):
                    new = (-sum(wt[t][h] * max(dot(t, h, s) + iq[t][h][j] * d, 0.0) for h in range(nh)), s)
                    last, nxt = keys[t]
                    if (new > nxt) if s in sel[t] else (new < last):
                        flip[t] = min(dist, flip.get(t, 1))
        for t, near in enumerate(nq):
            for h, j, alt, dist in near if t >= K else ():
                d = alt - iq[t][h][j]
                sc = [v + wt[t][h] * (max(dot(t, h, s) + d * ik[s][j], 0.0) - max(dot(t, h, s), 0.0)) for s, v in enumerate(scs[t])]
                if sorted(sorted(range(t + 1), key=lambda s: (-sc[s], s))[:K]) != sel[t]:
                    flip[t] = min(dist, flip.get(t, 1))
        self.last_flip = flip
        return sel, gap, gabs

    def ffn(self, li, hs):  # R.Model.ffn, noting how close each MoE row's routing is to a flip
        c, w = self.c, self.w
        P = 'model.layers.%d.' % li
        if c.get('n_routed_experts') and li >= c['first_k_dense_replace'] and P + 'mlp.gate.e_score_correction_bias' in w \
                and c.get('scoring_func') == 'sigmoid':
            E, k, G, kg = c['n_routed_experts'], c['num_experts_per_tok'], c.get('n_group') or 1, c.get('topk_group') or 1
            gs, m = E // G, []
            for h in hs:
                x = R.rmsnorm(h, w.get(P + 'post_attention_layernorm.weight'), c['rms_norm_eps'])
                ch = [1 / (1 + math.exp(-v)) + b for v, b in zip(R.mv(w.get(P + 'mlp.gate.weight'), x), w.get(P + 'mlp.gate.e_score_correction_bias'))]
                gsc = sorted((sum(sorted(ch[j * gs:(j + 1) * gs], reverse=True)[:2]) for j in range(G)), reverse=True)
                keep = sorted(range(G), key=lambda j: -sum(sorted(ch[j * gs:(j + 1) * gs], reverse=True)[:2]))[:kg]
                kept = sorted((v for i, v in enumerate(ch) if i // gs in keep), reverse=True)
                m.append(min(gsc[kg - 1] - gsc[kg] if kg < G else math.inf, kept[k - 1] - kept[k] if k < len(kept) else math.inf))
            self.route_margin[li] = m
        return super().ffn(li, hs)

    def attn(self, li, hs, positions):  # hs + MLA over the indexer's keys (README K1-K5)
        c, w, eps = self.c, self.w, self.c['rms_norm_eps']
        P = 'model.layers.%d.' % li
        H, dn, dr, dv, Lkv = c['num_attention_heads'], c['qk_nope_head_dim'], c['qk_rope_head_dim'], c['v_head_dim'], c['kv_lora_rank']
        xs = [R.rmsnorm(h, w.get(P + 'input_layernorm.weight'), eps) for h in hs]
        qs, ks, vs, qrs = [], [], [], []
        for x, p in zip(xs, positions):
            qr = R.rmsnorm(R.mv(w.get(P + 'self_attn.q_a_proj.weight'), x), w.get(P + 'self_attn.q_a_layernorm.weight'), eps)
            qrs.append(qr)
            q = R.mv(w.get(P + 'self_attn.q_b_proj.weight'), qr)
            heads = [q[h * (dn + dr):(h + 1) * (dn + dr)] for h in range(H)]
            qs.append([hq[:dn] + self.rope(hq[dn:], p) for hq in heads])  # MLA RoPE: interleaved
            kv = R.mv(w.get(P + 'self_attn.kv_a_proj_with_mqa.weight'), x)
            kvc, kpe = R.rmsnorm(kv[:Lkv], w.get(P + 'self_attn.kv_a_layernorm.weight'), eps), self.rope(kv[Lkv:], p)
            if R.KV_FP8:  # the keys and values as FlashMLA's fp8_ds_mla cache holds them (bf16 rope)
                kvc, kpe = R.kv_fp8_row(kvc, kpe, True)
            up = R.mv(w.get(P + 'self_attn.kv_b_proj.weight'), kvc)
            ks.append([up[h * (dn + dv):h * (dn + dv) + dn] + kpe for h in range(H)])
            vs.append([up[h * (dn + dv) + dn:(h + 1) * (dn + dv)] for h in range(H)])
        sel, gap, gabs = self.indexer(li, xs, qrs, positions)
        self.stats[li] = {'sel': sel, 'gap': gap, 'abs': gabs, 'flip': self.last_flip}
        out = []
        for t in range(len(hs)):  # softmax over the selected keys only, one set for all heads
            o = []
            for h in range(H):
                sc = [sum(a * b for a, b in zip(qs[t][h], ks[s][h])) * self.scale for s in sel[t]]
                mx = max(sc)
                e = [math.exp(v - mx) for v in sc]
                z = sum(e)
                o += [sum(e[j] / z * vs[s][h][i] for j, s in enumerate(sel[t])) for i in range(dv)]
            out.append([a + b for a, b in zip(hs[t], R.mv(w.get(P + 'self_attn.o_proj.weight'), o))])
        return out


def forward(m, toks):  # as R.forward, also returning each layer's index sets and gaps
    c, w = m.c, m.w
    emb = w.get('model.embed_tokens.weight')
    hs, pos, per_layer = [list(emb[t]) for t in toks], list(range(len(toks))), []
    for li in range(c['num_hidden_layers']):
        hs = m.layer(li, hs, pos)
        per_layer.append(dict(m.stats[li], route=m.route_margin.get(li)))
    fin = [R.rmsnorm(h, w.get('model.norm.weight'), c['rms_norm_eps']) for h in hs]
    return fin, [R.mv(w.get('lm_head.weight'), x) for x in fin], per_layer


def greedy(m, toks, logits, n_new, name, rows, routes, flips):
    """n_new greedy tokens after toks (logits: the prompt's forward); ties go to the lower id.
    Appends each decode row's boundary gap to rows and its routing margins to routes."""
    seq, last, out = list(toks), logits[-1], {'name': name, 'tokens': [], 'margins': [], 'top1_logits': []}
    for k in range(n_new):
        a = max(range(len(last)), key=lambda j: (last[j], -j))
        out['tokens'].append(a)
        out['margins'].append(last[a] - max(v for j, v in enumerate(last) if j != a))
        out['top1_logits'].append(last[a])
        if k == n_new - 1:
            break
        seq.append(a)
        _, lg, pl = forward(m, seq)
        last, t = lg[-1], len(seq) - 1
        for l, st in enumerate(pl):
            if st['gap'][t] is not None:
                rows.append(('%s/greedy%d/%d/%d' % (name, k + 1, l, t), st['gap'][t], st['abs'][t]))
            if st['route']:
                routes.append(('%s/greedy%d/%d/%d' % (name, k + 1, l, t), [st['route'][t]]))
            if t in st['flip']:
                flips.append(('%s/greedy%d/%d/%d' % (name, k + 1, l, t), st['flip'][t]))
    return out


def write_i32(path, layers, n, k):
    vals = []
    for st in layers:
        for t in range(n):
            s = st['sel'][t] if t < len(st['sel']) else []
            vals += s + [-1] * (k - len(s)) if len(s) < k else s
    with open(path, 'wb') as f:
        f.write(struct.pack('<%di' % len(vals), *vals))


def max_abs_vs(path, rows):  # the largest |rows - the float32 file's values|, of the same shape
    g = struct.unpack('<%df' % (len(rows) * len(rows[0])), open(path, 'rb').read())
    return max(abs(v - g[i * len(r) + j]) for i, r in enumerate(rows) for j, v in enumerate(r))


def read_sets(path, L, n, k):
    b = open(path, 'rb').read()
    v = struct.unpack('<%di' % (L * n * k), b)
    return [[frozenset(x for x in v[(l * n + t) * k:(l * n + t + 1) * k] if x >= 0) for t in range(n)] for l in range(L)]


def gap_summary(rows):  # rows: (label, rel, abs) for every boundary query
    rels = [r for _, r, _ in rows]
    out = {'boundary_rows': len(rows), 'exact_ties': sum(1 for _, _, a in rows if a == 0)}
    for e in (2, 3, 4, 5):
        out['rel_gap_lt_1e-%d' % e] = sum(1 for r in rels if r < 10 ** -e)
    out['min_rel_gap'] = min(rels) if rels else None
    out['smallest'] = [[lab, r] for lab, r, _ in sorted(rows, key=lambda x: x[1])[:5]]
    return out


def main():
    args, opt = [], {}
    it = iter(sys.argv[1:])
    for a in it:
        if a.startswith('--'):
            opt[a[2:]] = True if a in ('--dense', '--kv-fp8') else next(it)
        else:
            args.append(a)
    model_dir, prompts, name = args
    R.KV_FP8 = 'kv-fp8' in opt
    m = V32Model(model_dir)
    c = m.c
    pr = next(p for p in json.load(open(prompts))['prompts'] if p['name'] == name)
    toks, gdir = pr['tokens'], os.path.dirname(prompts)
    n, V, L, K = len(toks), c['vocab_size'], c['num_hidden_layers'], m.topk
    fin, logits, per_layer = forward(m, toks)
    fp8_first = (m.fp8.n, m.fp8.near4, m.fp8.near3, m.fp8.groups, m.fp8.scale_near)  # the chained passes recompute the same elements
    rep = {'prompt': name, 'n': n}
    gf = os.path.join(gdir, pr.get('logits_file', name + '.logits.f32'))
    if os.path.exists(gf):
        rep['max_abs_vs_golden'] = max_abs_vs(gf, logits)
        print('%s: max |logit - golden| over %d x %d: %.3g' % (name, n, V, rep['max_abs_vs_golden']))
    tf = os.path.join(gdir, pr.get('topk_file', name + '.topk.i32'))
    if os.path.exists(tf):
        gold = read_sets(tf, L, n, K)
        bad = [(l, t) for l in range(L) for t in range(n) if frozenset(per_layer[l]['sel'][t]) != gold[l][t]]
        rep['sets_differing'] = len(bad)
        print('%s: (layer, position) index sets differing from %s: %d of %d%s' % (
            name, os.path.basename(tf), len(bad), L * n, ' first %s' % (bad[0],) if bad else ''))
    rows = [('%s/%d/%d' % (name, l, t), st['gap'][t], st['abs'][t]) for l, st in enumerate(per_layer)
            for t in range(n) if st['gap'][t] is not None]
    routes = [('%s/%d' % (name, l), st['route']) for l, st in enumerate(per_layer)]
    flips = [('%s/%d/%d' % (name, l, t), st['flip'][t]) for l, st in enumerate(per_layer) for t in sorted(st['flip'])]
    if 'out' in opt:
        R.write_f32(opt['out'], logits)
        print('wrote %s: logits [%d, %d]' % (opt['out'], n, V))
    if 'topk-out' in opt:
        write_i32(opt['topk-out'], per_layer, n, K)
        print('wrote %s: index sets [%d, %d, %d]' % (opt['topk-out'], L, n, K))
    mtp_base = None
    gold_mtp, gold_chain = os.path.join(gdir, name + '.mtp.f32'), os.path.join(gdir, name + '.chainDEPTH.f32')
    check_mtp = c.get('num_nextn_predict_layers') and os.path.exists(gold_mtp)
    check_chain = check_mtp and os.path.exists(gold_chain.replace('DEPTH', '1'))
    if 'mtp-out' in opt or 'mtp-topk-out' in opt or 'chain-out' in opt or check_mtp:
        mtp = R.MTP(m)
        mi, mh, out = mtp.first(toks, fin)
        mst = m.stats[L]
        mtp_base = [frozenset(x) for x in mst['sel']]
        routes.append(('%s/mtp' % name, m.route_margin.get(L)))
        rows += [('%s/mtp/%d' % (name, t), mst['gap'][t], mst['abs'][t]) for t in range(n - 1) if mst['gap'][t] is not None]
        flips += [('%s/mtp/%d' % (name, t), mst['flip'][t]) for t in sorted(mst['flip'])]
        if check_mtp:
            rep['mtp_max_abs_vs_golden'] = max_abs_vs(gold_mtp, out)
            print('%s: max |MTP logit - golden| over %d x %d: %.3g' % (name, n - 1, V, rep['mtp_max_abs_vs_golden']))
            mtf = os.path.join(gdir, name + '.mtp.topk.i32')
            if os.path.exists(mtf):
                gold = read_sets(mtf, 1, n - 1, K)[0]
                rep['mtp_sets_differing'] = sum(1 for t in range(n - 1) if frozenset(mst['sel'][t]) != gold[t])
                print('%s: MTP index sets differing from %s: %d of %d' % (
                    name, os.path.basename(mtf), rep['mtp_sets_differing'], n - 1))
        if 'mtp-out' in opt:
            R.write_f32(opt['mtp-out'], out)
            print('wrote %s: MTP logits [%d, %d]' % (opt['mtp-out'], n - 1, V))
        if 'mtp-topk-out' in opt:
            write_i32(opt['mtp-topk-out'], [mst], n - 1, K)
            print('wrote %s: MTP index sets [1, %d, %d]' % (opt['mtp-topk-out'], n - 1, K))
        fp8_first = (m.fp8.n, m.fp8.near4, m.fp8.near3, m.fp8.groups, m.fp8.scale_near)
        if 'chain-out' in opt or check_chain:  # mtp_reference's chained passes, noting each new row's gap and routing
            for d in (1, 2):
                cr = []
                for p in range(n - 1 - d):
                    ins, prev = list(mi[:p + 1]), mh[p]
                    for j in range(1, d + 1):
                        ins.append(mtp.input(list(mtp.emb[toks[p + j + 1]]), prev))
                        prev = m.layer(L, ins, list(range(p + j + 1)))[-1]
                    st, t = m.stats[L], p + d  # the row of position p + d (depth d), new in this pass
                    if st['gap'][t] is not None:
                        rows.append(('%s/chain%d/%d' % (name, d, t), st['gap'][t], st['abs'][t]))
                    if m.route_margin.get(L):
                        routes.append(('%s/chain%d/%d' % (name, d, t), [m.route_margin[L][t]]))
                    if t in st['flip']:
                        flips.append(('%s/chain%d/%d' % (name, d, t), st['flip'][t]))
                    cr.append(mtp.logits(prev))
                gp = gold_chain.replace('DEPTH', str(d))
                if check_chain and os.path.exists(gp):
                    rep['chain%d_max_abs_vs_golden' % d] = max_abs_vs(gp, cr)
                    print('%s: max |chained MTP logit - golden|, depth %d, over %d x %d: %.3g' % (
                        name, d, len(cr), V, rep['chain%d_max_abs_vs_golden' % d]))
                if 'chain-out' in opt:
                    path = opt['chain-out'].replace('DEPTH', str(d))
                    R.write_f32(path, cr)
                    print('wrote %s: chained MTP logits, depth %d [%d, %d]' % (path, d, len(cr), V))
    if 'greedy-out' in opt:
        n_rows = len(rows)
        g = greedy(m, toks, logits, int(opt.get('greedy-n', 16)), name, rows, routes, flips)
        rep['greedy'] = dict(g, boundary_rows=len(rows) - n_rows,
                             min_rel_gap=min((r for _, r, _ in rows[n_rows:]), default=None))
        with open(opt['greedy-out'], 'w') as fp:
            json.dump(g, fp)
            fp.write('\n')
        print('wrote %s: %d greedy tokens %s, smallest margin %.3g; %d decode boundary rows, min relative gap %s' % (
            opt['greedy-out'], len(g['tokens']), g['tokens'], min(g['margins']), len(rows) - n_rows,
            '%.3g' % rep['greedy']['min_rel_gap'] if len(rows) > n_rows else '-'))
    if 'dense' in opt:
        _, dl = R.forward(R.Model(model_dir), toks)
        sp = [max(abs(a - b) for a, b in zip(logits[t], dl[t])) for t in range(K, n)]
        dn = max(abs(a - b) for t in range(min(K, n)) for a, b in zip(logits[t], dl[t]))
        am = sum(1 for t in range(K, n) if max(range(V), key=lambda j: logits[t][j]) != max(range(V), key=lambda j: dl[t][j]))
        rep['sparse_vs_dense'] = {'rows_dense_region_max_abs': dn, 'rows_sparse_region_max_abs': max(sp) if sp else None,
                                  'rows_sparse_region_median': sorted(sp)[len(sp) // 2] if sp else None,
                                  'argmax_changed_rows': am}
        print('%s: dense MLA vs sparse: rows < %d differ by %.3g; rows >= %d by up to %s (median %s), argmax changed in %d' % (
            name, K, dn, K, '%.3g' % max(sp) if sp else '-', '%.3g' % sorted(sp)[len(sp) // 2] if sp else '-', am))
    rep['fragility'] = gap_summary(rows)
    rep['fp8'] = dict(zip(('elements', 'within_1e-4_ulp_of_midpoint', 'within_1e-3_ulp_of_midpoint', 'groups',
                           'scale_within_1e-5_of_other_power_of_two'), fp8_first))
    flips.sort(key=lambda f: f[1])
    rep['fp8_flip_rows'] = [[lab, d] for lab, d in flips]
    f = rep['fragility']
    print('%s: %d boundary rows (queries with more than %d keys; MTP rows included when run), exact ties %d, '
          'min relative k/k+1 gap %s, below 1e-2/1e-3/1e-4/1e-5: %d/%d/%d/%d; smallest: %s' % (
              name, f['boundary_rows'], K, f['exact_ties'], '%.3g' % f['min_rel_gap'] if rows else '-',
              f['rel_gap_lt_1e-2'], f['rel_gap_lt_1e-3'], f['rel_gap_lt_1e-4'], f['rel_gap_lt_1e-5'],
              ', '.join('%s %.3g' % (a, b) for a, b in f['smallest'])))
    rm = [(min(r), lab + ('/%d' % r.index(min(r)) if len(r) > 1 else '')) for lab, r in routes if r]
    if rm:
        rep['min_routing_margin'] = min(rm)
        print('%s: smallest MoE routing margin (group or expert choice score gap): %.3g at %s' % ((name,) + min(rm)))
    print('%s: indexer fp8 elements %d (model and MTP first pass), within 1e-4 / 1e-3 ulp of a rounding midpoint: %d / %d; '
          'groups %d, ue8m0 scales within 1e-5 of rounding the other way: %d' % ((name,) + fp8_first))
    print('%s: rows whose index set one of those codes within 1e-4 ulp would change by going the other way: %d%s' % (
        name, len(flips), ' (row: the nearest such code\'s ulp distance: %s)' % ', '.join('%s %.2g' % f for f in flips[:8]) if flips else ''))
    if 'perturb' in opt:
        rel, trials = float(opt['perturb']), int(opt.get('trials', 4))
        base = [[frozenset(s) for s in st['sel']] for st in per_layer]
        rep['perturb'] = {'rel': rel, 'sets_changed_per_trial': [], 'logits_max_abs': 0.0}
        for tr in range(trials):
            m.perturb = (rel, random.Random(1000 + tr))
            fn, lg, pl = forward(m, toks)
            if mtp_base:  # the MTP module's first pass too, with the same noise
                mtp.first(toks, fn)
                rep['perturb'].setdefault('mtp_sets_changed_per_trial', []).append(
                    sum(1 for t in range(n - 1) if frozenset(m.stats[L]['sel'][t]) != mtp_base[t]))
            m.perturb = None
            ch = sum(1 for l in range(L) for t in range(n) if frozenset(pl[l]['sel'][t]) != base[l][t])
            rep['perturb']['sets_changed_per_trial'].append(ch)
            rep['perturb']['logits_max_abs'] = max(rep['perturb']['logits_max_abs'],
                                                   max(abs(a - b) for r1, r2 in zip(lg, logits) for a, b in zip(r1, r2)))
        print('%s: relative noise %g on indexer q/k and head weights, sets changed per trial: %s%s, logits moved up to %.3g' % (
            name, rel, rep['perturb']['sets_changed_per_trial'],
            ' (MTP first pass: %s)' % rep['perturb']['mtp_sets_changed_per_trial'] if mtp_base else '',
            rep['perturb']['logits_max_abs']))
    if 'json' in opt:
        with open(opt['json'], 'w') as fp:
            json.dump(rep, fp, indent=1)
            fp.write('\n')


if __name__ == '__main__':
    main()
