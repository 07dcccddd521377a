#!/usr/bin/env python3
"""tests/fixtures/tiny-v4-base: tiny-v4 as a DeepSeek-V4-Flash-Base checkpoint (standard library only).

  make_v4_base_fixture.py DST [--goldens] [--prompts len1,len5,...]

The config is tiny-v4's with `expert_dtype: fp8`; every routed expert's MXFP4 weight (I8 e2m1
pairs + F8_E8M0 scale per 32 columns) becomes F8_E4M3 with an F8_E8M0 `.scale` per 128x128
block, as the dense weights are: per block (bi, bj) s = 2^(ceil(log2(amax / 448)) + (bi + 2 bj) % 4)
(ue8m0; the shift makes neighbouring blocks' scales differ), each weight the e4m3 code nearest
to w / s (ties to the even code; the small ones of a shifted block round).  The other tensors are copied.  With
--goldens, golden/ gets scripts/v4_reference.py's act-quant-off logits, MTP logits, indexer
selections and expert sets of the prompts (default len1,len5,len17,len64) of tiny-v4's
golden/prompts.json, in tiny-v4/golden's layout."""
import json, math, os, shutil, struct, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mtp_reference as R  # noqa: E402  (safetensors reader, FP8 table)
import v4_reference as V4  # noqa: E402  (the float64 forward, its dequantising reader)
from make_int4_fixture import write_st  # noqa: E402

SRC = os.path.join(HERE, '..', 'tests', 'fixtures', 'tiny-v4')
BLOCK = 128
E4M3_BYTE = {R.FP8[b]: b for b in range(127)}  # non-negative finite value -> its code


def e4m3_byte(v):
    q = R.e4m3_nearest(v)
    b = E4M3_BYTE[abs(q)]
    return b | 0x80 if q < 0 or (q == 0 and math.copysign(1, v) < 0) else b


def to_fp8(w):  # rows of floats -> (F8_E4M3 bytes, F8_E8M0 bytes [ceil(r/128), ceil(c/128)])
    r, c = len(w), len(w[0])
    sr, sc = -(-r // BLOCK), -(-c // BLOCK)
    scale = [[1.0] * sc for _ in range(sr)]
    for bi in range(sr):
        for bj in range(sc):
            amax = max(abs(w[i][j]) for i in range(bi * BLOCK, min(r, bi * BLOCK + BLOCK))
                       for j in range(bj * BLOCK, min(c, bj * BLOCK + BLOCK)))
            # + a shift of 0..3 by block: the blocks' scales differ (a mixed-up block index shows)
            shift = (bi + 2 * bj) % 4
            scale[bi][bj] = 2.0 ** (math.ceil(math.log2(amax / 448)) + shift) if amax > 0 else 1.0
    codes = bytes(e4m3_byte(w[i][j] / scale[i // BLOCK][j // BLOCK]) for i in range(r) for j in range(c))
    sbytes = bytes(int(math.log2(s)) + 127 for row in scale for s in row)
    return codes, sbytes, [sr, sc]


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith('-'):
        raise SystemExit(__doc__)
    dst, goldens = args[0], '--goldens' in args
    names = (args[args.index('--prompts') + 1] if '--prompts' in args else 'len1,len5,len17,len64').split(',')
    os.makedirs(dst, exist_ok=True)
    cfg = json.load(open(os.path.join(SRC, 'config.json')))
    cfg['expert_dtype'] = 'fp8'
    with open(os.path.join(dst, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
        f.write('\n')
    for f in ('generation_config.json', 'tokenizer.json', 'tokenizer_config.json'):
        shutil.copy(os.path.join(SRC, f), dst)
    src = V4.Weights(SRC)
    out, n = {}, 0
    for name, (dt, shape, b) in src.raw.items():
        if '.experts.' in name and name.endswith('.scale') and src.raw[name[:-5] + 'weight'][0] == 'I8':
            continue
        if '.experts.' in name and dt == 'I8':
            codes, sb, sshape = to_fp8(src.get(name))
            out[name] = ('F8_E4M3', [shape[0], shape[1] * 2], codes)
            out[name[:-len('weight')] + 'scale'] = ('F8_E8M0', sshape, sb)
            n += 1
        else:
            out[name] = (dt, shape, b)
    write_st(os.path.join(dst, 'model.safetensors'), out)
    print('wrote %s: %d tensors, %d routed expert matrices re-encoded as fp8' % (dst, len(out), n))
    if not goldens:
        return
    gdir = os.path.join(dst, 'golden')
    os.makedirs(gdir, exist_ok=True)
    prompts = json.load(open(os.path.join(SRC, 'golden', 'prompts.json')))
    keep = ('name', 'tokens', 'logits_file', 'mtp_logits_file', 'sel_file', 'experts_file')
    prompts['prompts'] = [{k: p[k] for k in keep if k in p} for p in prompts['prompts'] if p['name'] in names]
    prompts['model'] = 'tiny-v4-base'
    prompts['act_quant'] = 'off (the logits files only: no aq_* goldens)'
    m = V4.Model(dst)
    for p in prompts['prompts']:
        toks = p['tokens']
        lg, mt, rec = V4.run_prefill(m, toks, with_mtp=True)
        V4.write_f32(os.path.join(gdir, p['logits_file']), lg)
        V4.write_f32(os.path.join(gdir, p['mtp_logits_file']), mt)
        V4.write_i32(os.path.join(gdir, p['sel_file']), [v for l in V4.sel_rows(m, rec, len(toks)) for r in l for v in r])
        V4.write_i32(os.path.join(gdir, p['experts_file']),
                     [v for l in V4.expert_rows(m, rec, len(toks)) for r in l for v in r])
        L, V = len(toks), m.c['vocab_size']
        p.update(shape=[L, V], mtp_shape=[L - 1, V], sel_shape=[sum(1 for r in m.ratios[:m.nL] if r == 4), L, m.K],
                 experts_shape=[m.nL, L, m.topk_e])
        print('%s: %d tokens' % (p['name'], L), flush=True)
    with open(os.path.join(gdir, 'prompts.json'), 'w') as f:
        json.dump(prompts, f, indent=1)
        f.write('\n')


if __name__ == '__main__':
    main()
