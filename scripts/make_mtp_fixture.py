#!/usr/bin/env python3
"""Adds a DeepSeek MTP module to a test checkpoint (standard library only).

  make_mtp_fixture.py SRC DST [--own-head]

DST gets SRC's config.json with num_nextn_predict_layers 1, links to SRC's other files, its
weights as shard model-00001 (a link to SRC/model.safetensors) and the MTP module
model.layers.{L}.* (L = num_hidden_layers) in shard model-00002, with the index that maps
both. The module's decoder layer is a copy of layer L-1 (same dtypes, fp8 scales included),
eh_proj [D, 2D] is random bf16, the three norms are near 1, and embed_tokens and
shared_head.head are copies of the model's, as in DeepSeek's V3/R1 checkpoints (with
--own-head the head is lm_head negated: a head the loader must load as its own). Random
weights: the drafts are not expected to be accepted, only to be computed right.
Used to make tests/fixtures/tiny-v3-mtp and (with --own-head) tiny-r1-mtp."""
import json, os, struct, sys

src, dst = sys.argv[1], sys.argv[2]
own_head = '--own-head' in sys.argv[3:]
cfg = json.load(open(os.path.join(src, 'config.json')))
L, D = cfg['num_hidden_layers'], cfg['hidden_size']
cfg['num_nextn_predict_layers'] = 1
os.makedirs(dst, exist_ok=True)
with open(os.path.join(dst, 'config.json'), 'w') as f:
    json.dump(cfg, f, indent=2)
    f.write('\n')
rel = os.path.relpath(src, dst)
for name in os.listdir(src):
    if name in ('config.json', 'golden') or name.endswith('.safetensors'):
        continue
    link = os.path.join(dst, name)
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.join(rel, name), link)
main = os.path.join(dst, 'model-00001-of-00002.safetensors')
if os.path.lexists(main):
    os.remove(main)
os.symlink(os.path.join(rel, 'model.safetensors'), main)

raw = open(os.path.join(src, 'model.safetensors'), 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
header.pop('__metadata__', None)


def tensor(name):
    h = header[name]
    a, b = h['data_offsets']
    return h['dtype'], h['shape'], data[a:b]


state = 0x9E3779B97F4A7C15


def rand():  # uniform in [-1, 1), xorshift64*
    global state
    state ^= (state >> 12)
    state ^= (state << 25) & 0xFFFFFFFFFFFFFFFF
    state ^= (state >> 27)
    return ((state * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF) / 2.0**63 - 1.0


def bf16(values):
    out = bytearray()
    for v in values:
        bits = struct.unpack('<I', struct.pack('<f', v))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
        out += struct.pack('<H', bits)
    return bytes(out)


new = {}
prefix = 'model.layers.%d.' % (L - 1)
for name in header:
    if name.startswith(prefix):
        new['model.layers.%d.' % L + name[len(prefix):]] = tensor(name)
mtp = 'model.layers.%d.' % L
for norm in ('enorm', 'hnorm', 'shared_head.norm'):
    new[mtp + norm + '.weight'] = ('BF16', [D], bf16(1.0 + 0.1 * rand() for _ in range(D)))
amp = 1.7 / (2 * D) ** 0.5
new[mtp + 'eh_proj.weight'] = ('BF16', [D, 2 * D], bf16(amp * rand() for _ in range(2 * D * D)))
new[mtp + 'embed_tokens.weight'] = tensor('model.embed_tokens.weight')
head = tensor('lm_head.weight')
if own_head:  # bf16: flip each value's sign bit
    assert head[0] == 'BF16'
    hb = bytearray(head[2])
    hb[1::2] = bytes(b ^ 0x80 for b in hb[1::2])
    head = (head[0], head[1], bytes(hb))
new[mtp + 'shared_head.head.weight'] = head

hdr, blob = {}, bytearray()
for name in sorted(new):
    dt, shape, b = new[name]
    hdr[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [len(blob), len(blob) + len(b)]}
    blob += b
h = json.dumps(hdr, separators=(',', ':')).encode()
h += b' ' * (-len(h) % 8)
with open(os.path.join(dst, 'model-00002-of-00002.safetensors'), 'wb') as f:
    f.write(struct.pack('<Q', len(h)) + h + blob)
wm = {name: 'model-00001-of-00002.safetensors' for name in header}
wm.update({name: 'model-00002-of-00002.safetensors' for name in new})
with open(os.path.join(dst, 'model.safetensors.index.json'), 'w') as f:
    json.dump({'metadata': {}, 'weight_map': dict(sorted(wm.items()))}, f, indent=1)
    f.write('\n')
