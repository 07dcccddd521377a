#!/usr/bin/env python3
"""Writes a tiny DeepSeek-V3.2 checkpoint in the published fp8 form, with an MTP module (standard
library only, deterministic for a seed).

  make_v32_fixture.py DST [--seed N] [--set JSON] [--no-mtp] [--no-indexer] [--goldens [--prompts A,B] [--quick]]
                                                      (tests/fixtures/tiny-v32-mtp: --seed 18)

--no-indexer writes a dense V3-shaped model instead (no index_* keys, no indexer tensors; its
goldens: scripts/mtp_reference.py's logits only): tests/fixtures/tiny-kimi-k2 with --set of
Kimi K2's keys (model_type kimi_k2). tests/fixtures/tiny-glm5: --set of GLM-5's (glm_moe_dsa).

--set JSON overrides config keys after the defaults below (another shape: hidden size, heads,
ranks, experts, index_topk, rope_scaling, vocab_size ...); --no-mtp leaves the MTP module out
(num_nextn_predict_layers 0, one shard). --prompts keeps only the named prompts of tiny-v3's;
--quick leaves out the greedy, dense and perturbation runs (no greedy.json; meta.json then has
only the fragile points).

DST gets config.json (tiny-v3's shapes with 2 layers, 8 heads, model_type deepseek_v32,
DeepseekV32ForCausalLM, index_n_heads 8, index_head_dim 32, index_topk 12,
num_nextn_predict_layers 1, and the quantization_config of DeepSeek-V3.2: fp8 e4m3, 128x128
blocks, ue8m0 scales), copies of tiny-v3's tokenizer.json, tokenizer_config.json and
generation_config.json, the model (model.embed_tokens, layers 0..L-1, model.norm, lm_head) in
model-00001-of-00002.safetensors, the MTP module model.layers.{L}.* in
model-00002-of-00002.safetensors, and model.safetensors.index.json mapping both.

With --goldens it then writes DST/golden/ (prompts.json with tiny-v3's prompts, the logits, index
sets, MTP and chained MTP logits, greedy.json and meta.json; golden/README.md says what they are)
by running scripts/v32_reference.py on each prompt: minutes, most of them for len300.

Tensor types as DeepSeek-V3.2's safetensors (and vLLM's loader) have them: every linear layer of
attention, indexer (wq_b, wk) and MLP/experts is F8_E4M3 with an F32 `<name>.weight_scale_inv`
[ceil(rows/128), ceil(cols/128)] whose values are powers of two (ue8m0); indexer.weights_proj,
mlp.gate, the embeddings, lm_head and the MTP module's eh_proj / shared_head.head are BF16; the
RMSNorm weights are BF16; indexer.k_norm.{weight,bias} and mlp.gate.e_score_correction_bias are
F32. Random weights (Gaussian, std 1/sqrt(fan_in) for linears, norms near 1); the MTP module has
its own random head, and a copy of the model's embedding as DeepSeek's checkpoints do."""
import json, math, os, shutil, struct, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mtp_reference import FP8  # noqa: E402  the 256 e4m3fn values by byte

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, '..', 'tests', 'fixtures', 'tiny-v3')  # tokenizer files, base config, prompts

dst = sys.argv[1]
seed = int(sys.argv[sys.argv.index('--seed') + 1]) if '--seed' in sys.argv else 18

cfg = json.load(open(os.path.join(SRC, 'config.json')))
cfg.update({
    'architectures': ['DeepseekV32ForCausalLM'], 'model_type': 'deepseek_v32',
    'num_attention_heads': 8, 'num_key_value_heads': 8, 'num_hidden_layers': 2, 'first_k_dense_replace': 1,
    'num_nextn_predict_layers': 1, 'index_n_heads': 8, 'index_head_dim': 32, 'index_topk': 12,
    'quantization_config': {'activation_scheme': 'dynamic', 'fmt': 'e4m3', 'quant_method': 'fp8',
                            'scale_fmt': 'ue8m0', 'weight_block_size': [128, 128]},
})
if '--set' in sys.argv:  # a key set to null is left out (GLM-5's rope_theta lives in rope_parameters)
    cfg.update(json.loads(sys.argv[sys.argv.index('--set') + 1]))
    cfg = {k: v for k, v in cfg.items() if v is not None}
MTP = '--no-mtp' not in sys.argv
if not MTP:
    cfg['num_nextn_predict_layers'] = 0
IDX = '--no-indexer' not in sys.argv  # a dense V3-shaped model (Kimi K2's): no indexer keys or tensors
if not IDX:
    for k in ('index_n_heads', 'index_head_dim', 'index_topk', 'indexer_rope_interleave'):
        cfg.pop(k, None)
cfg = dict(sorted(cfg.items()))
D, L, V = cfg['hidden_size'], cfg['num_hidden_layers'], cfg['vocab_size']
H, dn, dr, dv = cfg['num_attention_heads'], cfg['qk_nope_head_dim'], cfg['qk_rope_head_dim'], cfg['v_head_dim']
QL, KL, I, MI, E = cfg['q_lora_rank'], cfg['kv_lora_rank'], cfg['intermediate_size'], cfg['moe_intermediate_size'], cfg['n_routed_experts']
NH, HD = (cfg['index_n_heads'], cfg['index_head_dim']) if IDX else (0, 0)

state = (0x9E3779B97F4A7C15 * (seed + 1)) & 0xFFFFFFFFFFFFFFFF or 1


def rand():  # uniform in (0, 1), xorshift64*
    global state
    state ^= state >> 12
    state ^= (state << 25) & 0xFFFFFFFFFFFFFFFF
    state ^= state >> 27
    return (((state * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF) >> 11) / 2.0**53 + 2.0**-54


def gauss(n, std, mean=0.0):  # Box-Muller
    out = []
    while len(out) < n:
        r, a = math.sqrt(-2 * math.log(rand())), 2 * math.pi * rand()
        out += [mean + std * r * math.cos(a), mean + std * r * math.sin(a)]
    return out[:n]


def bf16(values):
    out = bytearray()
    for v in values:
        bits = struct.unpack('<I', struct.pack('<f', v))[0]
        out += struct.pack('<H', (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)  # round to nearest even
    return bytes(out)


def f32(values):
    return struct.pack('<%df' % len(values), *values)


def e4m3_byte(v):  # the e4m3fn byte nearest to v (|v| <= 448), ties to the even code
    a, lo, hi = abs(v), 0, 126
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if FP8[mid] <= a else (lo, mid)
    d_lo, d_hi = a - FP8[lo], FP8[hi] - a
    b = lo if d_lo < d_hi or (d_lo == d_hi and lo % 2 == 0) else hi
    return b | 0x80 if v < 0 and b else b


tensors = {}  # name -> (dtype, shape, bytes)


def linear_fp8(name, rows, cols, std=None):
    """Gaussian weights quantized per 128x128 block: scale_inv = 2^ceil(log2(amax / 448)) (ue8m0),
    codes the nearest e4m3 values of w / scale_inv."""
    w = gauss(rows * cols, std if std is not None else cols ** -0.5)
    br, bc = -(-rows // 128), -(-cols // 128)
    sc = [[0.0] * bc for _ in range(br)]
    for i in range(br):
        for j in range(bc):
            amax = max(abs(w[r * cols + c]) for r in range(i * 128, min(rows, i * 128 + 128))
                       for c in range(j * 128, min(cols, j * 128 + 128)))
            sc[i][j] = 2.0 ** math.ceil(math.log2(amax / 448))
    codes = bytes(e4m3_byte(w[r * cols + c] / sc[r // 128][c // 128]) for r in range(rows) for c in range(cols))
    tensors[name + '.weight'] = ('F8_E4M3', [rows, cols], codes)
    tensors[name + '.weight_scale_inv'] = ('F32', [br, bc], f32([v for row in sc for v in row]))


def linear_bf16(name, rows, cols, std=None):
    tensors[name + '.weight'] = ('BF16', [rows, cols], bf16(gauss(rows * cols, std if std is not None else cols ** -0.5)))


def norm(name, n):
    tensors[name + '.weight'] = ('BF16', [n], bf16(gauss(n, 0.1, 1.0)))


def layer(li):
    P = 'model.layers.%d.' % li
    norm(P + 'input_layernorm', D)
    norm(P + 'post_attention_layernorm', D)
    A = P + 'self_attn.'
    linear_fp8(A + 'q_a_proj', QL, D)
    norm(A + 'q_a_layernorm', QL)
    linear_fp8(A + 'q_b_proj', H * (dn + dr), QL)
    linear_fp8(A + 'kv_a_proj_with_mqa', KL + dr, D)
    norm(A + 'kv_a_layernorm', KL)
    linear_fp8(A + 'kv_b_proj', H * (dn + dv), KL)
    linear_fp8(A + 'o_proj', D, H * dv)
    if not IDX:
        return mlp(P, li)
    X = A + 'indexer.'
    linear_fp8(X + 'wq_b', NH * HD, QL)
    linear_fp8(X + 'wk', HD, D)
    tensors[X + 'k_norm.weight'] = ('F32', [HD], f32(gauss(HD, 0.1, 1.0)))
    tensors[X + 'k_norm.bias'] = ('F32', [HD], f32(gauss(HD, 0.1)))
    linear_bf16(X + 'weights_proj', NH, D)
    mlp(P, li)


def mlp(P, li):
    M = P + 'mlp.'
    if li < cfg['first_k_dense_replace']:
        linear_fp8(M + 'gate_proj', I, D)
        linear_fp8(M + 'up_proj', I, D)
        linear_fp8(M + 'down_proj', D, I)
        return
    linear_bf16(M + 'gate', E, D, 0.17)
    tensors[M + 'gate.e_score_correction_bias'] = ('F32', [E], f32(gauss(E, 0.03)))
    for e in ['experts.%d.' % i for i in range(E)] + ['shared_experts.']:
        linear_fp8(M + e + 'gate_proj', MI * cfg['n_shared_experts'] if e == 'shared_experts.' else MI, D)
        linear_fp8(M + e + 'up_proj', MI * cfg['n_shared_experts'] if e == 'shared_experts.' else MI, D)
        linear_fp8(M + e + 'down_proj', D, MI * cfg['n_shared_experts'] if e == 'shared_experts.' else MI)


tensors['model.embed_tokens.weight'] = ('BF16', [V, D], bf16(gauss(V * D, 1.0)))
for li in range(L):
    layer(li)
norm('model.norm', D)
linear_bf16('lm_head', V, D, 2.5 * D ** -0.5)
main_names = set(tensors)
if MTP:
    layer(L)  # the MTP module's decoder layer (MoE, with its own indexer)
    P = 'model.layers.%d.' % L
    for n in ('enorm', 'hnorm', 'shared_head.norm'):
        norm(P + n, D)
    linear_bf16(P + 'eh_proj', D, 2 * D)
    tensors[P + 'embed_tokens.weight'] = tensors['model.embed_tokens.weight']
    linear_bf16(P + 'shared_head.head', V, D, 2.5 * D ** -0.5)


def write(path, names):
    hdr, blob = {'__metadata__': {'format': 'pt'}}, bytearray()
    for name in sorted(names):
        dt, shape, b = tensors[name]
        hdr[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [len(blob), len(blob) + len(b)]}
        blob += b
    h = json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + blob)
    return len(blob)


os.makedirs(dst, exist_ok=True)
with open(os.path.join(dst, 'config.json'), 'w') as f:
    json.dump(cfg, f, indent=2)
    f.write('\n')
for name in ('tokenizer.json', 'tokenizer_config.json', 'generation_config.json'):
    shutil.copyfile(os.path.join(SRC, name), os.path.join(dst, name))
shards = ('model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors') if MTP else \
    ('model-00001-of-00001.safetensors',)
total = write(os.path.join(dst, shards[0]), main_names)
if MTP:
    total += write(os.path.join(dst, shards[1]), set(tensors) - main_names)
wm = {name: shards[name not in main_names] for name in sorted(tensors)}
with open(os.path.join(dst, 'model.safetensors.index.json'), 'w') as f:
    json.dump({'metadata': {'total_size': total}, 'weight_map': wm}, f, indent=1)
    f.write('\n')
print('wrote %s: seed %d, %d tensors, %d bytes of weights' % (dst, seed, len(tensors), total))

MTP_PROMPTS = ('len17', 'len64')  # as tiny-v3-mtp: MTP and chained MTP logits for these


def dense_goldens(dst):
    """golden/ of a --no-indexer DST: prompts.json and the logits of scripts/mtp_reference.py's
    float64 V3 forward (no MTP, greedy or fragility runs)."""
    import mtp_reference as R
    gd = os.path.join(dst, 'golden')
    os.makedirs(gd, exist_ok=True)
    keep = sys.argv[sys.argv.index('--prompts') + 1].split(',') if '--prompts' in sys.argv else None
    src = json.load(open(os.path.join(SRC, 'golden', 'prompts.json')))
    prompts = [{'name': p['name'], 'tokens': p['tokens'], 'logits_file': p['name'] + '.logits.f32',
                'shape': [len(p['tokens']), V]} for p in src['prompts'] if not keep or p['name'] in keep]
    with open(os.path.join(gd, 'prompts.json'), 'w') as f:
        json.dump({'model': os.path.basename(os.path.normpath(dst)), 'vocab_size': V, 'prompts': prompts}, f, indent=1)
        f.write('\n')
    m, lg = R.Model(dst), []
    for p in prompts:
        _, logits = R.forward(m, p['tokens'])
        R.write_f32(os.path.join(gd, p['logits_file']), logits)
        lg += [v for row in logits for v in row]
        print('wrote %s' % p['logits_file'], flush=True)
    mean = sum(lg) / len(lg)
    with open(os.path.join(gd, 'meta.json'), 'w') as f:
        json.dump({'model': os.path.basename(os.path.normpath(dst)), 'seed': seed, 'dtype': 'float64 (written as float32)',
                   'reference': 'scripts/mtp_reference.py', 'weights': 'fp8 e4m3, 128x128 blocks, weight_scale_inv (powers of two)',
                   'max_abs_logit': max(abs(v) for v in lg),
                   'logit_std': math.sqrt(sum((v - mean) ** 2 for v in lg) / len(lg))}, f, indent=1)
        f.write('\n')
    print('wrote %s' % gd)


def goldens(dst):
    """golden/ of DST: every file from scripts/v32_reference.py, one run per prompt."""
    import subprocess, tempfile
    gd, K, quick = os.path.join(dst, 'golden'), cfg['index_topk'], '--quick' in sys.argv
    os.makedirs(gd, exist_ok=True)
    src = json.load(open(os.path.join(SRC, 'golden', 'prompts.json')))
    prompts = []
    keep = sys.argv[sys.argv.index('--prompts') + 1].split(',') if '--prompts' in sys.argv else None
    for p in src['prompts']:
        if keep and p['name'] not in keep:
            continue
        n = len(p['tokens'])
        prompts.append({'name': p['name'], 'tokens': p['tokens'], 'logits_file': p['name'] + '.logits.f32', 'shape': [n, V],
                        'topk_file': p['name'] + '.topk.i32', 'topk_shape': [L, n, K]})
    pj = os.path.join(gd, 'prompts.json')
    with open(pj, 'w') as f:
        json.dump({'model': os.path.basename(os.path.normpath(dst)), 'vocab_size': V, 'index_topk': K, 'prompts': prompts}, f, indent=1)
        f.write('\n')
    tmp, reps, greedy = tempfile.mkdtemp(), {}, []
    for p in prompts:
        nm = p['name']
        g = lambda suffix: os.path.join(gd, nm + suffix)  # noqa: E731
        cmd = [sys.executable, os.path.join(HERE, 'v32_reference.py'), dst, pj, nm, '--out', g('.logits.f32'),
               '--topk-out', g('.topk.i32'), '--json', os.path.join(tmp, nm + '.json')]
        if not quick:
            cmd += ['--greedy-out', os.path.join(tmp, nm + '.greedy.json'), '--dense', '--perturb', '1e-6',
                    '--trials', '4']
        if MTP and nm in MTP_PROMPTS:
            cmd += ['--mtp-out', g('.mtp.f32'), '--mtp-topk-out', g('.mtp.topk.i32'), '--chain-out', g('.chainDEPTH.f32')]
        print(' '.join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=True)
        reps[nm] = json.load(open(os.path.join(tmp, nm + '.json')))
        if not quick:
            greedy.append(json.load(open(os.path.join(tmp, nm + '.greedy.json'))))
    if not quick:
        with open(os.path.join(gd, 'greedy.json'), 'w') as f:
            json.dump({'n_new': len(greedy[0]['tokens']), 'results': greedy}, f)
            f.write('\n')
    lg = []
    for p in prompts:
        b = open(os.path.join(gd, p['logits_file']), 'rb').read()
        lg += struct.unpack('<%df' % (len(b) // 4), b)
    mean = sum(lg) / len(lg)
    meta = {
        'model': os.path.basename(os.path.normpath(dst)), 'seed': seed, 'dtype': 'float64 (written as float32)',
        'reference': 'scripts/v32_reference.py (on scripts/mtp_reference.py)', 'index_topk': K,
        'indexer': {'quant': 'fp8_e4m3', 'scale_fmt': 'ue8m0', 'group': min(128, cfg['index_head_dim']),
                    'rope': 'interleaved' if cfg.get('indexer_rope_interleave', cfg['model_type'] == 'glm_moe_dsa')
                    else 'non-interleaved (neox)', 'hadamard': True, 'kv_fp8': False},
        'weights': 'fp8 e4m3, 128x128 blocks, weight_scale_inv (powers of two)',
        'mtp_prompts': list(MTP_PROMPTS) if MTP else [],
        'max_abs_logit': max(abs(v) for v in lg), 'logit_std': math.sqrt(sum((v - mean) ** 2 for v in lg) / len(lg)),
        'prompts': {nm: {k: r[k] for k in ('fragility', 'fp8', 'fp8_flip_rows', 'min_routing_margin', 'perturb', 'sparse_vs_dense') if k in r}
                    for nm, r in reps.items()},
        'greedy_decode': {nm: {k: r['greedy'][k] for k in ('boundary_rows', 'min_rel_gap')} for nm, r in reps.items()
                          if 'greedy' in r},
    }
    with open(os.path.join(gd, 'meta.json'), 'w') as f:
        json.dump(meta, f, indent=1)
        f.write('\n')
    shutil.rmtree(tmp)
    print('wrote %s' % gd)


if '--goldens' in sys.argv:
    goldens(dst) if IDX else dense_goldens(dst)
