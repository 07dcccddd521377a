#!/usr/bin/env python3
"""tiny-v4 as a bf16 checkpoint, the form bench/make_random_hf.py writes for V4 (standard library only):

  make_v4_bf16_fixture.py SRC DST

Every F8_E4M3 weight times its F8_E8M0 `.scale` per 128x128 block and every MXFP4 expert (I8 e2m1
pairs times an e8m0 scale per 32 columns) becomes BF16, exactly (e4m3 and e2m1 have at most 3
mantissa bits, the scales are powers of two); the `.scale` tensors go, and so do config.json's
quantization_config and expert_dtype. The other tensors and files are copied. tests/e2e/v4_logits.sh
checks that the copy gives SRC's golden logits."""
import json, os, shutil, struct, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mtp_reference as R  # noqa: E402  (safetensors reader)
import v4_reference as V4  # noqa: E402  (the dequantising reader)
from make_int4_fixture import bf16_bits, write_st  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: make_v4_bf16_fixture.py SRC DST')
    src, dst = sys.argv[1:]
    os.makedirs(dst, exist_ok=True)
    raw, w = R.load(src), V4.Weights(src)
    out = {}
    for name, (dt, shape, b) in raw.items():
        if dt == 'F8_E8M0' and name.endswith('.scale'):
            continue
        if dt in ('F8_E4M3', 'I8'):
            rows = w.get(name)
            for row in rows:  # exact in bf16, or this copy would change the model
                for v in row:
                    if V4.R.bf16(v) != v:
                        sys.exit('%s: %r is not a bf16 value' % (name, v))
            flat = [bf16_bits(v) for row in rows for v in row]
            out[name] = ('BF16', [len(rows), len(rows[0])], struct.pack('<%dH' % len(flat), *flat))
        else:
            out[name] = (dt, shape, b)
    write_st(os.path.join(dst, 'model.safetensors'), out)
    for f in os.listdir(src):
        p = os.path.join(src, f)
        if os.path.isfile(p) and not f.endswith('.safetensors') and f != 'model.safetensors.index.json':
            shutil.copy(p, dst)
    cfg = json.load(open(os.path.join(src, 'config.json')))
    cfg.pop('quantization_config', None)
    cfg.pop('expert_dtype', None)
    json.dump(cfg, open(os.path.join(dst, 'config.json'), 'w'), indent=2)


if __name__ == '__main__':
    main()
