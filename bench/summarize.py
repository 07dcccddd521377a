#!/usr/bin/env python3
"""One summary line per bench/run.sh section from its JSON results.
usage: summarize.py SECTION FILE... (sections: forward throughput scaling paths blocksize prefix serve)"""
import json
import os
import sys


def load(p):
    return json.load(open(p))


def forward(f):
    j = load(f)
    r = j["runs"]
    s = f"forward   v2lite-4L: prefill {j['prefill_tokens_per_s']:.1f} tok/s"
    for d in r:
        s += f"; decode b{d['batch_size']} {d['decode_tokens_per_s']:.1f} tok/s ({100 * d['roofline_fraction']:.0f}% of bw roofline)"
    return s


def throughput(*fs):
    out = []
    for f in fs:
        j = load(f)
        n = os.path.basename(f)[len("throughput-"):-5]
        out.append(f"throughput {n}: {j['requests_per_second']:.2f} req/s, {j['input_tokens_per_second']:.0f} in + "
                   f"{j['output_tokens_per_second']:.0f} out tok/s ({j['num_requests']} x {j['input_len']} in / "
                   f"{j['output_len']} out), TTFT p50 {j['ttft_ms']['p50']:.0f} ms, TPOT p50 {j['tpot_ms']['p50']:.1f} ms")
    return "\n".join(out)


def scaling(*fs):
    out = []
    for f in fs:
        j = load(f)
        n = os.path.basename(j["config"].rstrip("/"))
        out.append(f"scaling   {n}: " + ", ".join(
            f"b{r['batch']} {r['tokens_per_s']:.1f} tok/s x{r['speedup_vs_batch1']:.2f} "
            f"({100 * r['fraction_of_bound']:.0f}% of {r['bound']} bound)" for r in j["rows"]))
    return "\n".join(out)


def paths(*fs):
    out = []
    for f in fs:
        j = load(f)
        n = os.path.basename(j["config"].rstrip("/"))
        out.append(f"paths     {n}: decode/prefill path time " + ", ".join(
            f"q{r['q_len']}@{r['ctx']} {r['decode_ms'] / r['prefill_ms']:.2f}" for r in j["runs"])
            + "  (< 1: the decode path is faster)")
    return "\n".join(out)


def blocksize(*fs):
    paths_f = sorted((f for f in fs if "paths" in f), key=lambda f: load(f)["block_size"])
    tp = {load(f)["block_size"]: load(f) for f in fs if "-tp-" in f}
    out = []
    for f in paths_f:
        j = load(f)
        bs = j["block_size"]
        d = {(r["q_len"]): r for r in j["runs"]}
        s = f"blocksize {bs:>3}: decode path q1@4096 {d[1]['decode_ms']:.2f} ms, prefill path q256@4096 {d[256]['prefill_ms']:.1f} ms"
        if bs in tp:
            s += f"; engine tiny-v3 {tp[bs]['tokens_per_second']:.0f} tok/s"
        out.append(s)
    return "\n".join(out)


def prefix(on, off):
    a, b = load(on), load(off)
    n = os.path.basename(on).split("--")[0][len("prefix-"):]
    return (f"prefix    {n}: caching on vs off {a['requests_per_second'] / b['requests_per_second']:.2f}x req/s, "
            f"TTFT p50 {a['ttft_ms']['p50']:.0f} vs {b['ttft_ms']['p50']:.0f} ms, "
            f"{100 * a['prefix_hit_rate']:.0f}% of prompt tokens cached")


def serve(f):
    j = load(f)
    runs = j if isinstance(j, list) else [j]
    return "serve     tiny-v3: " + ", ".join(
        f"c{r.get('max_concurrency')} {r['output_throughput']:.0f} out tok/s, TTFT p50 {r['median_ttft_ms']:.1f} ms, "
        f"TPOT p50 {r['median_tpot_ms']:.2f} ms" for r in runs)


if __name__ == "__main__":
    print(globals()[sys.argv[1]](*sys.argv[2:]))
