#!/usr/bin/env python3
"""Test vectors for the units of src/model_v4 (tests/unit/test_v4_*.c), computed by
scripts/v4_reference.py's own functions (its Model methods on small synthetic weights, its
quantisers, its checkpoint decoder on tiny-v4), written as JSON into tests/fixtures/v4-units/.

  make_v4_unit_vectors.py [OUT_DIR]       (default tests/fixtures/v4-units)

Every input is a float32 value (printed exactly), so the C side reads the same numbers; the
expected outputs are the reference's float64 results.  Deterministic: fixed seeds, no clock.
Files: quant.json (fp8 / fp4 round trips, Hadamard), fp4.json (e2m1 / e8m0 tables, rows of a
tiny-v4 FP4 expert and a GEMV), hc.json (hc_pre / hc_post / hc_head), rope.json, compressor.json,
attn.json, moe.json, indexer.json, layer.json (the units composed into a
layer's attention), block.json (a whole block: hyper-connections, attention, FP4 MoE)."""
import json, math, os, random, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import v4_reference as V4  # noqa: E402
import mtp_reference as R  # noqa: E402
import v32_reference as V32  # noqa: E402

ROOT = os.path.join(HERE, '..')
TINY = os.path.join(ROOT, 'tests', 'fixtures', 'tiny-v4')


def f32(x):
    return R.f32(x)


def rvec(rng, n, scale=1.0):
    return [f32(rng.uniform(-1, 1) * scale) for _ in range(n)]


def rmat(rng, r, c, scale=1.0):
    return [rvec(rng, c, scale) for _ in range(r)]


def flat(m):
    return [v for row in m for v in row]


class FakeWeights:
    """v4_reference.Weights' interface over a dict of already decoded tensors."""

    def __init__(self, d):
        self.d = d

    def get(self, name):
        return self.d[name]

    def quantized(self, name):
        return False

    def __contains__(self, name):
        return name in self.d


def model(cfg, weights):
    """A v4_reference.Model without a checkpoint: the attributes __init__ sets, from cfg."""
    m = object.__new__(V4.Model)
    c = dict(json.load(open(os.path.join(TINY, 'config.json'))))
    c.update(cfg)
    m.c, m.w, m.aq, m.kv_sim = c, FakeWeights(weights), False, True
    m.dim, m.hc, m.eps, m.hc_eps = c['hidden_size'], c['hc_mult'], c['rms_norm_eps'], c['hc_eps']
    m.iters = c['hc_sinkhorn_iters']
    m.H, m.hd, m.rd = c['num_attention_heads'], c['head_dim'], c['qk_rope_head_dim']
    m.win, m.G, m.olr = c['sliding_window'], c['o_groups'], c['o_lora_rank']
    m.nL, m.ratios = c['num_hidden_layers'], c['compress_ratios']
    m.inh, m.ihd, m.K = c['index_n_heads'], c['index_head_dim'], c['index_topk']
    m.topk_e, m.n_hash = c['num_experts_per_tok'], c['num_hash_layers']
    m.lim, m.route_scale = c.get('swiglu_limit', 0) or 0, c['routed_scaling_factor']
    rs = c.get('rope_scaling') or {}
    m.yarn = dict(orig=rs.get('original_max_position_embeddings', 0), factor=rs.get('factor', 1),
                  bf=rs.get('beta_fast', 32), bs=rs.get('beta_slow', 1))
    m.tables, m.cs, m.rec = {}, {}, None
    return m


# ---------------------------------------------------------------- quant.json
def quant_vectors():
    rng = random.Random(11)
    cases = []
    # sizes with a partial last block; magnitudes from tiny to large, one all-zero block
    for n, scale in ((200, 1.0), (96, 1e-3), (64, 300.0), (70, 1e-6)):
        x = rvec(rng, n, scale)
        if n == 200:
            x[64:128] = [0.0] * 64
            x[5] = 0.0
        cases.append({
            'x': x,
            'fp8_64': V4.act_quant(x, 64),
            'fp8_128': V4.act_quant(x, 128),
            'fp4_32': V4.fp4_quant(x, 32),
        })
    had = []
    for n in (2, 8, 64):
        x = rvec(rng, n)
        had.append({'x': x, 'y': V32.hadamard(x)})
    return {'cases': cases, 'hadamard': had}


# ---------------------------------------------------------------- fp4.json
def fp4_vectors():
    raw = R.load(TINY)
    w = V4.Weights(TINY)
    name = 'layers.2.ffn.experts.1.w1.weight'
    dt, shape, b = raw[name]
    assert dt == 'I8'
    sdt, sshape, sb = raw[name[:-len('weight')] + 'scale']
    assert sdt == 'F8_E8M0'
    rows, kpack = 4, shape[1]
    k = 2 * kpack
    dec = w.get(name)[:rows]
    rng = random.Random(12)
    x = rvec(rng, k)
    return {
        'e2m1': [V4.E2M1[c & 7] * (-1 if c & 8 else 1) for c in range(16)],
        'e8m0': {str(e): V4.e8m0(e) for e in (0, 1, 100, 126, 127, 128, 133, 254)},
        'tensor': name, 'rows': rows, 'k': k,
        'packed': list(b[:rows * kpack]),
        'scales': list(sb[:rows * sshape[1]]),
        'decoded': flat(dec),
        'x': x,
        'y': V4.mv(dec, x),
    }


# ---------------------------------------------------------------- hc.json
def hc_vectors():
    """hc_pre / hc_post / hc_head of Model on hc 4 streams of D 16, 3 tokens."""
    rng = random.Random(13)
    hc, D, n = 4, 16, 3
    mix = (2 + hc) * hc
    w = {'L_fn': rmat(rng, mix, hc * D, 0.1), 'L_scale': [f32(0.6), f32(0.9), f32(1.7)],
         'L_base': rvec(rng, mix, 0.5),
         'hc_head_fn': rmat(rng, hc, hc * D, 0.1), 'hc_head_scale': [f32(0.8)], 'hc_head_base': rvec(rng, hc, 0.5)}
    m = model({'hidden_size': D, 'hc_mult': hc}, w)
    xs = [rmat(rng, hc, D) for _ in range(n)]
    outs = [rvec(rng, D) for _ in range(n)]
    ys, posts, combs, xo, heads = [], [], [], [], []
    for x, o in zip(xs, outs):
        y, post, comb = m.hc_pre('L', x)
        ys += y
        posts += post
        combs += flat(comb)
        xo += flat(m.hc_post(o, x, post, comb))
        heads += m.hc_head('', x)
    return {'hc': hc, 'dim': D, 'n': n, 'iters': m.iters, 'norm_eps': m.eps, 'hc_eps': m.hc_eps,
            'fn': flat(w['L_fn']), 'scale': w['L_scale'], 'base': w['L_base'],
            'head_fn': flat(w['hc_head_fn']), 'head_scale': w['hc_head_scale'], 'head_base': w['hc_head_base'],
            'x': flat(flat(xs)), 'out': flat(outs),
            'y': ys, 'post': posts, 'comb': combs, 'x_next': xo, 'head_y': heads}


# ---------------------------------------------------------------- rope.json
def rope_vectors():
    """tiny-v4's tables (rd 32): ratio 0 (rope_theta, no YaRN) and compressed (160000 + YaRN),
    cos / sin at a few positions, one vector rotated forward and back."""
    m = model({}, {})
    rng = random.Random(14)
    x = rvec(rng, 48)
    out = {'dim': m.rd, 'x': x, 'positions': [0, 1, 7, 300, 4095, 65536, 1000003], 'kinds': []}
    for ratio in (0, 4):
        k = {'ratio': ratio, 'inv_freq': m.inv_freq(ratio), 'cos': [], 'sin': [], 'fwd': [], 'inv': []}
        for p in out['positions']:
            cs = m.cos_sin(p, ratio)
            k['cos'] += [c for c, _ in cs]
            k['sin'] += [s for _, s in cs]
            k['fwd'] += m.rope(x, p, ratio)
            k['inv'] += m.rope(x, p, ratio, inverse=True)
        out['kinds'].append(k)
    return out


# ---------------------------------------------------------------- compressor.json
def selector(width):
    """wkv / wgate rows picking kv (first half) or score (second half) out of x = [kv | score],
    so the reference's fp32 linears hand the pooling exactly our kv / score rows."""
    eye = [[1.0 if j == i else 0.0 for j in range(2 * width)] for i in range(width)]
    return eye, [[1.0 if j == width + i else 0.0 for j in range(2 * width)] for i in range(width)]


def comp_case(rng, ratio, d, rotate, S):
    coff = 2 if ratio == 4 else 1
    width = coff * d
    wkv, wgate = selector(width)
    P = 'c.'
    w = {P + 'wkv.weight': wkv, P + 'wgate.weight': wgate, P + 'ape': rmat(rng, ratio, width, 0.5),
         P + 'norm.weight': rvec(rng, d, 1.0)}
    m = model({'qk_rope_head_dim': 8}, w)
    kv, sc = rmat(rng, S, width, 1.0), rmat(rng, S, width, 2.0)
    st = {}
    m.comp_prefill(P, [a + b for a, b in zip(kv, sc)], ratio, d, rotate, st)
    return {'ratio': ratio, 'd': d, 'kind': 'index' if rotate else 'kv', 'rope_dim': m.rd, 'eps': m.eps,
            'n': S, 'ape': flat(w[P + 'ape']), 'norm': w[P + 'norm.weight'],
            'kv': flat(kv), 'score': flat(sc), 'entries': flat(st['cache'])}


def compressor_vectors():
    """Model.comp_prefill on tiny-v4's RoPE config with rope dims 8: ratio 4 main (d 24,
    overlapping), ratio 4 indexer (d 16, Hadamard + fp4), ratio 16 main (d 24)."""
    rng = random.Random(15)
    return {'cases': [comp_case(rng, 4, 24, False, 13), comp_case(rng, 4, 16, True, 14),
                      comp_case(rng, 16, 24, False, 37)]}


# ---------------------------------------------------------------- attn.json
def attn_vectors():
    """Model.sparse_attn (softmax over the keys and the per-head sink) and attn_out's inverse
    RoPE, for 4 heads of head_dim 32 (rope 8) against 11 keys, at position 21 of a ratio-4
    layer; the sinks span 'negligible' to 'dominant'."""
    rng = random.Random(16)
    H, hd, n, pos = 4, 32, 11, 21
    sink = [f32(-3.0), f32(0.5), f32(2.0), f32(6.0)]
    m = model({'qk_rope_head_dim': 8, 'num_attention_heads': H, 'head_dim': hd}, {'a.attn_sink': sink})
    q, keys = rvec(rng, H * hd, 2.0), rmat(rng, n, hd, 1.0)
    o = m.sparse_attn('a.', q, keys)
    lse = []
    for h in range(H):  # the log of the denominator, sink included (independent of sparse_attn)
        sc = [sum(a * b for a, b in zip(q[h * hd:(h + 1) * hd], k)) * hd ** -0.5 for k in keys] + [sink[h]]
        mx = max(sc)
        lse.append(mx + math.log(sum(math.exp(v - mx) for v in sc)))
    un = []
    for h in range(H):
        un += m.rope(o[h * hd:(h + 1) * hd], pos, 4, inverse=True)
    return {'n_heads': H, 'head_dim': hd, 'rope_dim': m.rd, 'pos': pos, 'ratio': 4, 'sink': sink, 'q': q,
            'kv': flat(keys), 'o': o, 'lse': lse, 'o_unroped': un}


# ---------------------------------------------------------------- moe.json
def moe_vectors():
    """Model.moe's routing (8 experts, top 2, route_scale 1.5) on given gate logits (gate.weight
    = identity, so the logits are the input), score layer (bias) and hash layer (tid2eid), and
    Model.expert's clamped SwiGLU (w1 / w3 select g / u out of x = [g | u], w2 = identity) with
    limit 2 and without a limit."""
    rng = random.Random(17)
    E, k, T = 8, 2, 6
    eye = [[1.0 if j == i else 0.0 for j in range(E)] for i in range(E)]
    bias = rvec(rng, E, 0.3)
    vocab = 5
    tid = [rng.sample(range(E), k) for _ in range(vocab)]
    w = {'s.gate.weight': eye, 's.gate.bias': bias, 'h.gate.weight': eye, 'h.gate.tid2eid': tid}
    for P in ('s.', 'h.'):  # experts of width 1 that output zeros: only the routing is looked at
        for X in ['experts.%d.' % i for i in range(E)] + ['shared_experts.']:
            w[P + X + 'w1.weight'] = w[P + X + 'w3.weight'] = [[0.0] * E]
            w[P + X + 'w2.weight'] = [[0.0]] * E
    m = model({'n_routed_experts': E, 'num_experts_per_tok': k, 'num_hash_layers': 1, 'hidden_size': E,
               'routed_scaling_factor': 1.5}, w)
    logits = [rvec(rng, E, 4.0) for _ in range(T)]
    logits[1][3] = f32(25.0)  # softplus' linear branch (> 20)
    logits[2][4] = logits[2][5] = logits[2][6] = f32(9.0)  # a 3-way tie for 2 places: ids 4, 5
    bias[5] = bias[6] = bias[4]
    toks = [rng.randrange(vocab) for _ in range(T)]
    score_rows, hash_rows = [], []
    for li, P, rows in ((1, 's.', score_rows), (0, 'h.', hash_rows)):
        for x, tok in zip(logits, toks):
            _, ids = m.moe(li, P, x, tok)
            sc = [math.sqrt(V4.softplus(v)) for v in x]  # the weights as model.moe computes them
            if li < m.n_hash:
                order = list(tid[tok])
            else:
                order = V4.topk([a + b for a, b in zip(sc, bias)], k)
            assert sorted(order) == ids
            z = sum(sc[i] for i in order)
            rows.append({'ids': order, 'w': [sc[i] / z * m.route_scale for i in order]})
    # SwiGLU
    inter = 16
    g, u = rvec(rng, inter, 4.0), rvec(rng, inter, 4.0)
    sel1 = [[1.0 if j == i else 0.0 for j in range(2 * inter)] for i in range(inter)]
    sel3 = [[1.0 if j == inter + i else 0.0 for j in range(2 * inter)] for i in range(inter)]
    eyei = [[1.0 if j == i else 0.0 for j in range(inter)] for i in range(inter)]
    m.w.d.update({'x.w1.weight': sel1, 'x.w3.weight': sel3, 'x.w2.weight': eyei})
    wt = f32(0.625)
    m.lim = 2.0
    h_lim = m.expert('x.', g + u, wt)
    m.lim = 0
    h_free = m.expert('x.', g + u, wt)
    return {'n_experts': E, 'k': k, 'route_scale': m.route_scale, 'bias': bias, 'vocab': vocab,
            'tid2eid': flat(tid), 'logits': flat(logits), 'tokens': toks,
            'score_ids': flat([r['ids'] for r in score_rows]), 'score_w': flat([r['w'] for r in score_rows]),
            'hash_ids': flat([r['ids'] for r in hash_rows]), 'hash_w': flat([r['w'] for r in hash_rows]),
            'g': g, 'u': u, 'weight': wt, 'limit': 2.0, 'h_limit': h_lim, 'h_nolimit': h_free}


# ---------------------------------------------------------------- indexer.json
def indexer_vectors():
    """Model.idx_query (wq_b = identity: q is the input) and Model.idx_select (weights_proj =
    identity) for 4 heads of 16 (rope 8), index_topk 4, at query positions 37 (9 visible
    entries: a real selection) and 10 (2 visible: all of them)."""
    rng = random.Random(18)
    Hn, di, K = 4, 16, 4
    eye = [[1.0 if j == i else 0.0 for j in range(Hn * di)] for i in range(Hn * di)]
    eyeh = [[1.0 if j == i else 0.0 for j in range(Hn)] for i in range(Hn)]
    m = model({'qk_rope_head_dim': 8, 'index_n_heads': Hn, 'index_head_dim': di, 'index_topk': K},
              {'i.wq_b.weight': eye, 'i.weights_proj.weight': eyeh})
    keys = rmat(rng, 9, di, 1.0)
    cases = []
    for pos in (37, 10):
        q0, w0 = rvec(rng, Hn * di, 1.5), rvec(rng, Hn, 1.0)
        q = m.idx_query('i.', q0, pos, 4)
        visible = (pos + 1) // 4
        sel = m.idx_select('i.', w0, q, keys, visible)
        cases.append({'pos': pos, 'q_in': q0, 'w_in': w0, 'q': flat(q), 'visible': visible, 'sel': sel})
    return {'n_heads': Hn, 'head_dim': di, 'rope_dim': m.rd, 'topk': K, 'keys': flat(keys), 'cases': cases}


# ---------------------------------------------------------------- layer.json
def svec(rng, n, scale=1.0):
    """Short random numbers: multiples of scale / 32 (exact, few digits in the JSON)."""
    return [f32(rng.randint(-32, 32) * scale / 32) for _ in range(n)]


def smat(rng, r, c, scale=1.0):
    return [svec(rng, c, scale) for _ in range(r)]


ATTN_DIMS = dict(dim=16, q_lora_rank=8, n_heads=4, head_dim=16, rope_dim=8, o_groups=2, o_lora_rank=8,
                 index_n_heads=2, index_head_dim=16, window=4, index_topk=2)


def attn_weights(rng, ratio, P):
    """One layer's attention weights (prefix P) at ATTN_DIMS, short random values."""
    a = ATTN_DIMS
    D, ql, H, hd, G, olr = a['dim'], a['q_lora_rank'], a['n_heads'], a['head_dim'], a['o_groups'], a['o_lora_rank']
    inh, ihd = a['index_n_heads'], a['index_head_dim']
    w = {P + 'wq_a.weight': smat(rng, ql, D, 0.5), P + 'q_norm.weight': svec(rng, ql),
         P + 'wq_b.weight': smat(rng, H * hd, ql, 0.5), P + 'wkv.weight': smat(rng, hd, D, 0.5),
         P + 'kv_norm.weight': svec(rng, hd), P + 'attn_sink': svec(rng, H, 2.0),
         P + 'wo_a.weight': smat(rng, G * olr, H * hd // G, 0.25), P + 'wo_b.weight': smat(rng, D, G * olr, 0.25)}
    if ratio:
        coff = 2 if ratio == 4 else 1
        C = P + 'compressor.'
        w.update({C + 'wkv.weight': smat(rng, coff * hd, D, 0.5), C + 'wgate.weight': smat(rng, coff * hd, D, 0.5),
                  C + 'ape': smat(rng, ratio, coff * hd, 0.5), C + 'norm.weight': svec(rng, hd)})
    if ratio == 4:
        I, C = P + 'indexer.', P + 'indexer.compressor.'
        w.update({I + 'wq_b.weight': smat(rng, inh * ihd, ql, 0.5), I + 'weights_proj.weight': smat(rng, inh, D, 0.5),
                  C + 'wkv.weight': smat(rng, 2 * ihd, D, 0.5), C + 'wgate.weight': smat(rng, 2 * ihd, D, 0.5),
                  C + 'ape': smat(rng, 4, 2 * ihd, 0.5), C + 'norm.weight': svec(rng, ihd)})
    return w


def attn_config(ratio, extra=None):
    a = ATTN_DIMS
    c = {'hidden_size': a['dim'], 'q_lora_rank': a['q_lora_rank'], 'num_attention_heads': a['n_heads'],
         'head_dim': a['head_dim'], 'qk_rope_head_dim': a['rope_dim'], 'o_groups': a['o_groups'],
         'o_lora_rank': a['o_lora_rank'], 'index_n_heads': a['index_n_heads'],
         'index_head_dim': a['index_head_dim'], 'sliding_window': a['window'], 'index_topk': a['index_topk'],
         'compress_ratios': [ratio]}
    c.update(extra or {})
    return c


def put_weights(case, w, P):
    for k, v in w.items():
        case[k[len(P):]] = flat(v) if isinstance(v[0], list) else v


def sel_rows(sel, K):
    return flat([s_ + [-1] * (K - len(s_)) for s_ in sel]) if sel else []


def layer_case(rng, ratio):
    """Model.attn_prefill of one layer (q / kv projections, window, compressor, indexer,
    sink attention, inverse RoPE, grouped wo_a, wo_b) on small random weights."""
    S, K = 18, ATTN_DIMS['index_topk']
    w = attn_weights(rng, ratio, 'a.')
    m = model(attn_config(ratio), w)
    ys = smat(rng, S, ATTN_DIMS['dim'], 1.0)
    out, sel = m.attn_prefill(0, 'a.', ys, {})
    case = dict(ATTN_DIMS, ratio=ratio, eps=m.eps, y=flat(ys), out=flat(out), sel=sel_rows(sel, K))
    put_weights(case, w, 'a.')
    return case


def layer_vectors():
    """Attention layers of ratio 4 (CSA: indexer top 2), 8 (HCA) and 0 (window only): D 16,
    q_lora 8, 4 heads x 16 (rope 8), 2 output groups, window 4, 18 tokens in one prefill."""
    rng = random.Random(19)
    return {'cases': [layer_case(rng, 4), layer_case(rng, 8), layer_case(rng, 0)]}


# ---------------------------------------------------------------- block.json
class MixedWeights(FakeWeights):
    """Decoded float tensors plus raw checkpoint tensors (I8 FP4 experts with F8_E8M0 scales)
    that v4_reference.Weights.get decodes itself."""

    def __init__(self, d, raw):
        super().__init__(d)
        self.ref = object.__new__(V4.Weights)
        self.ref.raw, self.ref.cache = raw, {}

    def get(self, name):
        return self.ref.get(name) if name in self.ref.raw else self.d[name]

    def quantized(self, name):
        return name in self.ref.raw and self.ref.quantized(name)


def block_vectors():
    """Model.block of a ratio-4 layer: hc 2 streams, hc_pre -> attn_norm -> attention ->
    hc_post -> hc_pre -> ffn_norm -> MoE (4 FP4 experts of 32, top 2 by score + bias, an F32
    shared expert, swiglu_limit 2) -> hc_post; 12 tokens in one prefill."""
    rng = random.Random(20)
    ratio, hc, S, E, k, inter = 4, 2, 12, 4, 2, 32
    D = ATTN_DIMS['dim']
    P = 'b.'
    w = attn_weights(rng, ratio, P + 'attn.')
    mix = (2 + hc) * hc
    for n in ('hc_attn', 'hc_ffn'):
        w.update({P + n + '_fn': smat(rng, mix, hc * D, 0.25), P + n + '_scale': svec(rng, 3, 2.0),
                  P + n + '_base': svec(rng, mix, 1.0)})
    w.update({P + 'attn_norm.weight': svec(rng, D), P + 'ffn_norm.weight': svec(rng, D),
              P + 'ffn.gate.weight': smat(rng, E, D, 0.5), P + 'ffn.gate.bias': svec(rng, E, 0.25),
              P + 'ffn.shared_experts.w1.weight': smat(rng, inter, D, 0.5),
              P + 'ffn.shared_experts.w3.weight': smat(rng, inter, D, 0.5),
              P + 'ffn.shared_experts.w2.weight': smat(rng, D, inter, 0.25)})
    raw = {}
    for i in range(E):
        for n, (o, kk) in (('w1', (inter, D)), ('w3', (inter, D)), ('w2', (D, inter))):
            name = P + 'ffn.experts.%d.%s.' % (i, n)
            nb = (kk + 31) // 32
            raw[name + 'weight'] = ('I8', [o, kk // 2], bytes(rng.randrange(256) for _ in range(o * kk // 2)))
            raw[name + 'scale'] = ('F8_E8M0', [o, nb], bytes(rng.randrange(121, 126) for _ in range(o * nb)))
    m = model(attn_config(ratio, {'hc_mult': hc, 'n_routed_experts': E, 'num_experts_per_tok': k,
                                  'num_hash_layers': 0, 'moe_intermediate_size': inter}), {})
    m.w = MixedWeights(w, raw)
    X = [smat(rng, hc, D, 1.0) for _ in range(S)]
    toks = [rng.randrange(16) for _ in range(S)]
    m.rec = {'sel': {}, 'experts': {}}
    out = m.block(0, P, X, toks, {})
    case = dict(ATTN_DIMS, ratio=ratio, eps=m.eps, hc=hc, hc_eps=m.hc_eps, iters=m.iters, n_experts=E, topk=k,
                inter=inter, route_scale=m.route_scale, swiglu_limit=m.lim, x=flat(flat(X)), out=flat(flat(out)),
                sel=sel_rows(m.rec['sel'][0], ATTN_DIMS['index_topk']), experts=flat(m.rec['experts'][0]))
    put_weights(case, w, P)
    for name, (dt, shape, b) in raw.items():
        case[name[len(P):]] = list(b)
    return case


def num(v):
    """A number as JSON: float32 values in 9 significant digits (exact once cast to float: the
    C tests compare such values as floats), other floats in 17, integers as they are."""
    if isinstance(v, bool) or isinstance(v, int):
        return json.dumps(v)
    if v != v or v in (math.inf, -math.inf):
        raise ValueError('not finite: %r' % v)
    if f32(v) == v:  # 9 digits name a float32 exactly (read as double, cast to float)
        t = '%.9g' % v
        assert f32(float(t)) == v
        return t
    return repr(v)


def dumps(o):
    if isinstance(o, dict):
        return '{' + ','.join(json.dumps(str(k)) + ':' + dumps(v) for k, v in o.items()) + '}'
    if isinstance(o, (list, tuple)):
        return '[' + ','.join(dumps(v) for v in o) + ']'
    if isinstance(o, str):
        return json.dumps(o)
    return num(o)


def write(out, name, obj):
    path = os.path.join(out, name)
    with open(path, 'w') as f:
        f.write(dumps(obj) + '\n')
    print('%s: %d bytes' % (os.path.relpath(path), os.path.getsize(path)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, 'tests', 'fixtures', 'v4-units')
    os.makedirs(out, exist_ok=True)
    write(out, 'quant.json', quant_vectors())
    write(out, 'fp4.json', fp4_vectors())
    write(out, 'hc.json', hc_vectors())
    write(out, 'rope.json', rope_vectors())
    write(out, 'compressor.json', compressor_vectors())
    write(out, 'attn.json', attn_vectors())
    write(out, 'moe.json', moe_vectors())
    write(out, 'indexer.json', indexer_vectors())
    write(out, 'layer.json', layer_vectors())
    write(out, 'block.json', block_vectors())


if __name__ == '__main__':
    main()
