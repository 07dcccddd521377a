#!/usr/bin/env python3
"""Writes tiny-v3 as a compressed-tensors pack-quantized int4 checkpoint (W4A16, group 32,
symmetric: Kimi K2-Thinking's form), standard library only, deterministic.

  make_int4_fixture.py DST [--goldens [--prompts A,B]]     (tests/fixtures/tiny-v3-int4)

DST gets tiny-v3's config.json plus a quantization_config (quant_method compressed-tensors,
format pack-quantized, one config group: targets ["Linear"], weights num_bits 4, type int,
symmetric, strategy group, group_size 32, actorder null, dynamic false; input_activations
null) whose ignore list leaves lm_head, attention, the shared experts and the dense MLP as
they are ("lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
"re:.*mlp\\.(gate|up|gate_up|down)_proj.*", as Kimi's), and model.safetensors: tiny-v3's
tensors, each routed expert's <module>.weight replaced by
  <module>.weight_packed  I32 [out, in / 8]: eight q + 8 per word along K, lowest nibble first
  <module>.weight_scale   [out, in / 32]: BF16 on layer 1, F32 on layer 2 (both forms are read)
  <module>.weight_shape   I64 [2]: [out, in]
quantized from tiny-v3's bf16 weights as compressed-tensors' symmetric int4 does: per row and
32 columns, scale = amax / 7.5 (rounded to the scale's dtype), q = clamp(round(w / scale), -8, 7)
(ties to even).

With --goldens it writes DST/golden/prompts.json (tiny-v3's prompts, or those named) and
NAME.logits.f32 for each: scripts/mtp_reference.py's float64 forward reading the int4 modules
as the engine holds them (q x scale; layer 2's f32 scales rounded to bf16, as the engine's int4
row keeps them) and multiplying them as the engine does with float32 activations (W4A8: x per
128 columns in int8, exact integer dots per 32-column group)."""
import json, os, struct, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mtp_reference as ref  # noqa: E402  its safetensors reader, its forward for the goldens
SRC = os.path.join(HERE, '..', 'tests', 'fixtures', 'tiny-v3')
IGNORE = ['lm_head', 're:.*self_attn.*', 're:.*shared_experts.*', 're:.*mlp\\.(gate|up|gate_up|down)_proj.*']
QCONFIG = {
    'quant_method': 'compressed-tensors',
    'format': 'pack-quantized',
    'quantization_status': 'compressed',
    'config_groups': {'group_0': {
        'targets': ['Linear'],
        'weights': {'num_bits': 4, 'type': 'int', 'symmetric': True, 'strategy': 'group', 'group_size': 32,
                    'actorder': None, 'dynamic': False, 'observer': 'minmax', 'block_structure': None},
        'input_activations': None,
        'output_activations': None}},
    'ignore': IGNORE,
    'kv_cache_scheme': None,
}


def write_st(path, tensors):  # name -> (dtype, shape, bytes), in name order, 8-byte aligned
    header, blob = {}, b''
    for name in sorted(tensors):
        dt, shape, b = tensors[name]
        blob += b'\0' * (-len(blob) % 8)
        header[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [len(blob), len(blob) + len(b)]}
        blob += b
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * (-len(text) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + blob)


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def bf16_bits(x):  # round to nearest even
    u = struct.unpack('<I', struct.pack('<f', x))[0]
    return (u + 0x7fff + (u >> 16 & 1)) >> 16


def bf16(x):
    return struct.unpack('<f', struct.pack('<I', bf16_bits(x) << 16))[0]


def quantize(dt, shape, b, scale_dtype):  # a bf16 matrix -> (packed, scale, shape) tensors
    R, C = shape
    w = [struct.unpack('<f', struct.pack('<I', h << 16))[0] for h in struct.unpack('<%dH' % (R * C), b)]
    words, scales = [], []
    for r in range(R):
        row, q = w[r * C:(r + 1) * C], []
        for a in range(0, C, 32):
            grp = row[a:a + 32]
            s = f32(max(abs(v) for v in grp) / 7.5)
            s = bf16(s) if scale_dtype == 'BF16' else s
            scales.append(s)
            q += [max(-8, min(7, round(v / s))) if s > 0 else 0 for v in grp]  # round: ties to even
        for j in range(0, C, 8):
            words.append(sum((q[j + i] + 8) << 4 * i for i in range(8)))
    packed = struct.pack('<%dI' % len(words), *words)
    sb = (struct.pack('<%dH' % len(scales), *[bf16_bits(s) for s in scales]) if scale_dtype == 'BF16'
          else struct.pack('<%df' % len(scales), *scales))
    return {'_packed': ('I32', [R, C // 8], packed), '_scale': (scale_dtype, [R, C // 32], sb),
            '_shape': ('I64', [2], struct.pack('<2q', R, C))}


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith('-'):
        raise SystemExit(__doc__)
    dst, goldens = args[0], '--goldens' in args
    only = args[args.index('--prompts') + 1].split(',') if '--prompts' in args else None
    os.makedirs(dst, exist_ok=True)
    cfg = json.load(open(os.path.join(SRC, 'config.json')))
    cfg['quantization_config'] = QCONFIG
    json.dump(cfg, open(os.path.join(dst, 'config.json'), 'w'), indent=2)
    out = {}
    for name, (dt, shape, b) in ref.load(SRC).items():
        if '.mlp.experts.' not in name:
            out[name] = (dt, shape, b)
            continue
        layer = int(name.split('.')[2])
        for suffix, t in quantize(dt, shape, b, 'BF16' if layer == 1 else 'F32').items():
            out[name + suffix] = t
    write_st(os.path.join(dst, 'model.safetensors'), out)
    print('wrote %s: %d tensors' % (dst, len(out)))
    if not goldens:
        return
    gdir = os.path.join(dst, 'golden')
    os.makedirs(gdir, exist_ok=True)
    prompts = json.load(open(os.path.join(SRC, 'golden', 'prompts.json')))
    prompts['model'] = 'tiny-v3-int4'
    prompts['prompts'] = [p for p in prompts['prompts'] if not only or p['name'] in only]
    json.dump(prompts, open(os.path.join(gdir, 'prompts.json'), 'w'), indent=1)
    m = ref.Model(dst)
    for p in prompts['prompts']:
        _, logits = ref.forward(m, p['tokens'])
        ref.write_f32(os.path.join(gdir, p['logits_file']), logits)
        print('wrote %s: logits [%d, %d]' % (p['logits_file'], len(logits), len(logits[0])))


if __name__ == '__main__':
    main()
