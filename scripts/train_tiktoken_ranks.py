#!/usr/bin/env python3
"""Trains a small byte-level BPE rank file in tiktoken's format ("base64(bytes) rank" per line)
for testing mlaserve's tiktoken tokenizer (src/tok/tiktoken.c). Not a model's tokenizer: a
few thousand ranks learned from the text files given, pre-tokenized with Kimi's pattern.

    python3 scripts/train_tiktoken_ranks.py --ranks 4096 --out tests/fixtures/kimi-tok/tiktoken.model \
        README.md docs/*.md docs/guide/*.md src/tok/*.c tests/fixtures/kimi-tok/corpus_cjk.txt

Ranks 0..255 are the single bytes; each further rank is the most frequent adjacent pair of the
words' current tokens (ties: the smaller byte string), as in the usual BPE training. A prefix
of the output (the first N lines) is itself a valid rank file.

Needs python3-regex (Debian) for the \\p{..} classes.
"""
import argparse
import base64
import collections
import heapq
import sys

import regex

WS = r"\t\n\x0b\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
UP = r"(?:(?!\p{sc=Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])"
LO = r"(?:(?!\p{sc=Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])"
CT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
PATTERN = "|".join([
    r"\p{sc=Han}+",
    r"[^\r\n\p{L}\p{N}]?" + UP + "*" + LO + "+" + CT,
    r"[^\r\n\p{L}\p{N}]?" + UP + "+" + LO + "*" + CT,
    r"\p{N}{1,3}",
    r" ?[^" + WS + r"\p{L}\p{N}]+[\r\n]*",
    r"[" + WS + r"]*[\r\n]+",
    r"[" + WS + r"]+(?![^" + WS + r"])",
    r"[" + WS + r"]+",
])


def train(text, n_ranks):
    words = collections.Counter(m.group().encode() for m in regex.finditer(PATTERN, text))
    seqs = [[bytes([b]) for b in w] for w in words]
    counts = [words[w] for w in words]
    ranks = {bytes([b]): b for b in range(256)}
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, s in enumerate(seqs):
        for a, b in zip(s, s[1:]):
            pairs[a, b] += counts[i]
            where[a, b].add(i)
    # max-heap of (count, bytes) with stale entries skipped when popped
    heap = [(-c, p[0] + p[1], p) for p, c in pairs.items()]
    heapq.heapify(heap)
    while len(ranks) < n_ranks and heap:
        negc, _, best = heapq.heappop(heap)
        if pairs.get(best, 0) != -negc or negc >= 0:
            continue
        a, b = best
        merged = a + b
        if merged not in ranks:
            ranks[merged] = len(ranks)
        touched = set()
        for i in list(where[best]):
            s, c = seqs[i], counts[i]
            for x, y in zip(s, s[1:]):  # take this word's pairs out
                pairs[x, y] -= c
                where[x, y].discard(i)
                touched.add((x, y))
            out, j = [], 0
            while j < len(s):
                if j + 1 < len(s) and s[j] == a and s[j + 1] == b:
                    out.append(merged)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            seqs[i] = out
            for x, y in zip(out, out[1:]):
                pairs[x, y] += c
                where[x, y].add(i)
                touched.add((x, y))
        for p in touched:
            if pairs[p] > 0:
                heapq.heappush(heap, (-pairs[p], p[0] + p[1], p))
            else:
                del pairs[p]
    return ranks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--out", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    text = "".join(open(f, encoding="utf-8").read() for f in a.files)
    ranks = train(text, a.ranks)
    with open(a.out, "w") as f:
        for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(f"{base64.b64encode(tok).decode()} {r}\n")
    print(f"{a.out}: {len(ranks)} ranks from {len(text)} characters", file=sys.stderr)


if __name__ == "__main__":
    main()
