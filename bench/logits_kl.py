#!/usr/bin/env python3
"""How far a quantized model's next-token distributions are from a reference's: mean KL divergence
KL(ref || test) and top-1 agreement over every position of two `mlaserve logits` dumps (raw
float32 [positions, vocab], the same tokens):

  python3 bench/logits_kl.py REF.f32 TEST.f32 --vocab V

Both from one sequence, e.g. 2048 random tokens of the bench model with random weights:

  TOK=$(python3 bench/logits_kl.py --tokens 2048 --vocab 102400)
  M="build/mlaserve logits bench/configs/bench-v2lite-4L --load-format dummy --dtype float32 --tokens $TOK"
  $M --out ref.f32 && $M -q fp8 --out fp8.f32 && python3 bench/logits_kl.py ref.f32 fp8.f32 --vocab 102400

--tokens N prints N token ids (a fixed LCG, seed --seed) as --tokens takes them. Prints
`positions N  mean_kl X  top1 Y%` (and max KL). Needs numpy (Debian: python3-numpy)."""
import argparse
import os
import sys


def tokens(n, vocab, seed):
    r, out = seed, []
    for _ in range(n):
        r = (r * 6364136223846793005 + 1442695040888963407) % 2**64
        out.append(str((r >> 33) % vocab))
    return ",".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ref", nargs="?")
    ap.add_argument("test", nargs="?")
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--tokens", type=int, help="print this many token ids and exit")
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    if a.vocab <= 0:
        sys.exit("logits_kl: --vocab must be positive")
    if a.tokens is not None:
        if a.tokens <= 0:
            sys.exit("logits_kl: --tokens must be positive")
        print(tokens(a.tokens, a.vocab, a.seed))
        return
    if not a.ref or not a.test:
        ap.error("REF and TEST are needed (or --tokens N)")
    try:
        import numpy as np
    except ImportError:
        sys.exit("logits_kl: needs numpy (Debian: apt-get install python3-numpy, then /usr/bin/python3)")
    size = os.path.getsize(a.ref)
    if size != os.path.getsize(a.test):
        sys.exit("logits_kl: %s and %s differ in size" % (a.ref, a.test))
    if size == 0 or size % (4 * a.vocab):
        sys.exit("logits_kl: %s: %d bytes is not a whole number of float32 rows of %d" % (a.ref, size, a.vocab))
    n = size // (4 * a.vocab)
    ref = np.memmap(a.ref, dtype="<f4", mode="r", shape=(n, a.vocab))
    test = np.memmap(a.test, dtype="<f4", mode="r", shape=(n, a.vocab))
    kl_sum, kl_max, agree = 0.0, 0.0, 0
    for s in range(0, n, 128):  # rows in chunks: float64 log-softmax of each
        p = ref[s:s + 128].astype(np.float64)
        q = test[s:s + 128].astype(np.float64)
        if not (np.isfinite(p).all() and np.isfinite(q).all()):
            sys.exit("logits_kl: a logit that is not finite in rows %d..%d" % (s, s + len(p) - 1))
        lp = p - p.max(1, keepdims=True)
        lp -= np.log(np.exp(lp).sum(1, keepdims=True))
        lq = q - q.max(1, keepdims=True)
        lq -= np.log(np.exp(lq).sum(1, keepdims=True))
        kl = (np.exp(lp) * (lp - lq)).sum(1)
        kl_sum += kl.sum()
        kl_max = max(kl_max, kl.max())
        agree += int((p.argmax(1) == q.argmax(1)).sum())
    print("positions %d  mean_kl %.4f  max_kl %.4f  top1 %.1f%%" % (n, kl_sum / n, kl_max, 100.0 * agree / n))


main()
