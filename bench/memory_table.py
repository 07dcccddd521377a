#!/usr/bin/env python3
"""Weight and KV-cache bytes of a DeepSeek checkpoint shape per weight format, from the loader's
own count, without loading the whole model:

  python3 bench/memory_table.py bench/configs/deepseek-r1 [--mlaserve build/mlaserve]
      [--kv-fp8-bytes N] [--contexts 32768,131072] [--budget-gib 370] [--formats int4,...]

A full DeepSeek-V3/R1 does not fit a small machine, so this loads cut-down copies of the config
with `mlaserve bench latency --load-format dummy` (random weights, the real loader and quantizers)
and reads each one's exact weight bytes (the JSON report's model_weight_bytes):

  A  1 layer, dense                              = base + dense
  B  2 layers, both dense                        = base + 2 dense
  C  2 layers, the second MoE with E1 experts    = base + dense + moe + E1 expert
  D  the same with E2 experts                    = base + dense + moe + E2 expert
  K  3 layers, one dense and two MoE with E1     (-q int4 only, a check: must equal the sum exactly)

where `expert` is one routed expert with its router row and `moe` the rest of a MoE layer
(attention, shared experts, norms). The whole model is then
base + n_dense dense + n_moe (moe + n_routed_experts expert), with the layer counts from the
config as the loader takes them (first_k_dense_replace, moe_layer_freq); the MTP layer is not
loaded without speculative decoding and is left out. Formats: bf16 (the config without its
quantization_config), the checkpoint's fp8 (its 128x128 blocks), -q int8, -q int4 (routed experts
int4, the rest int8) and -q int4 --quantization-rest fp8. The latent KV cache: per token and
layer (kv_lora_rank + qk_rope_head_dim) bf16 values, or --kv-cache-dtype fp8's row: dense MLA
(V2, V3/R1) kv_lora_rank + rope e4m3 values and a fp32 scale per 128 of them and one for the rope
(596 bytes), V3.2 (index_topk set) FlashMLA's fp8_ds_mla (512 e4m3, 4 fp32 scales, 64 bf16 rope
values: 656); --kv-fp8-bytes overrides it. --formats keeps the formats whose label starts with one
of the given words (e.g. int4: the two int4 rows). Needs ~8 GB of memory; ~5 loads per format, each
a minute or more."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

FORMATS = [  # label, keep the checkpoint's fp8 config, mlaserve flags
    ("bf16", False, []),
    ("fp8 (checkpoint)", True, []),
    ("int8 (-q int8)", True, ["-q", "int8"]),
    ("int4 experts + int8 rest (-q int4)", True, ["-q", "int4"]),
    ("int4 experts + fp8 rest", True, ["-q", "int4", "--quantization-rest", "fp8"]),
]


def die(msg):
    sys.exit("memory_table: " + msg)


def load_bytes(mlaserve, cfg, tmp, name, flags):
    """model_weight_bytes of a dummy load of cfg"""
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    j = os.path.join(d, "report.json")
    cmd = [mlaserve, "bench", "latency", d, "--load-format", "dummy", "--input-len", "1", "--output-len", "3",
           "--output-json", j] + flags
    env = dict(os.environ, MLASERVE_PREPACK="0")  # the weights as loaded, no packed copy
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        die("%s failed:\n%s" % (" ".join(cmd), r.stdout[-2000:]))
    with open(j) as f:
        return json.load(f)["model_weight_bytes"]


def moe_layer(c, i):  # as the loader decides it (io/config.c)
    return c["n_routed_experts"] > 0 and i >= c.get("first_k_dense_replace", 0) and i % c.get("moe_layer_freq", 1) == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config_dir")
    ap.add_argument("--mlaserve", default="build/mlaserve")
    ap.add_argument("--kv-fp8-bytes", type=int, help="fp8 KV bytes per token and layer (default: the layout's)")
    ap.add_argument("--contexts", default="32768,131072")
    ap.add_argument("--budget-gib", type=float, default=370.0,
                    help="the bound that int4 experts + 8-bit rest + an fp8 cache at the first context must meet")
    ap.add_argument("--formats", help="comma-separated label prefixes of the formats to load (default: all)")
    a = ap.parse_args()
    path = os.path.join(a.config_dir, "config.json")
    if not os.path.isfile(path):
        die("%s: no such file" % path)
    if not os.access(a.mlaserve, os.X_OK):
        die("%s: no such executable (make first)" % a.mlaserve)
    with open(path) as f:
        full = json.load(f)
    for k in ("num_hidden_layers", "n_routed_experts", "kv_lora_rank", "qk_rope_head_dim"):
        if not isinstance(full.get(k), int):
            die("%s: %s missing or not an integer" % (path, k))
    ctxs = [int(x) for x in a.contexts.split(",")]
    L, E = full["num_hidden_layers"], full["n_routed_experts"]
    n_moe = sum(moe_layer(full, i) for i in range(L))
    n_dense = L - n_moe
    topk = full.get("num_experts_per_tok", 1)
    # the fewest experts the router allows: top-k within topk_group of n_group groups
    grp, tgrp = max(full.get("n_group") or 1, 1), max(full.get("topk_group") or 1, 1)
    e1 = grp * -(-topk // min(tgrp, grp))
    e2 = 2 * e1

    def shape(layers, dense, experts, fp8):
        c = dict(full, num_hidden_layers=layers, first_k_dense_replace=dense, moe_layer_freq=1,
                 n_routed_experts=experts, num_nextn_predict_layers=0)
        if not fp8:
            c.pop("quantization_config", None)
        return c

    formats = FORMATS
    if a.formats:
        want = a.formats.split(",")
        formats = [f for f in FORMATS if any(f[0].startswith(w) for w in want)]
        if not formats:
            die("--formats %s: none of %s" % (a.formats, ", ".join(f[0] for f in FORMATS)))
    tmp = tempfile.mkdtemp(prefix="memory_table.")
    rows = []
    try:
        for label, fp8, flags in formats:
            m = lambda n, *s: load_bytes(a.mlaserve, shape(*s, fp8), tmp, n, flags)
            A, B = m("A", 1, 1, e1), m("B", 2, 2, e1)
            C, D = m("C", 2, 1, e1), m("D", 2, 1, e2)
            dense = B - A
            base = A - dense
            if (D - C) % (e2 - e1):
                die("%s: the expert bytes do not divide evenly (%d over %d experts)" % (label, D - C, e2 - e1))
            expert = (D - C) // (e2 - e1)
            moe = C - A - e1 * expert
            K = m("K", 3, 1, e1) if flags == ["-q", "int4"] else base + dense + 2 * (moe + e1 * expert)
            if K != base + dense + 2 * (moe + e1 * expert):
                die("%s: the loader's bytes are not a sum per layer (3 layers: %d, predicted %d)"
                    % (label, K, base + dense + 2 * (moe + e1 * expert)))
            total = base + n_dense * dense + n_moe * (moe + E * expert)
            experts = n_moe * E * expert
            rows.append((label, total, experts))
            print("%-36s base %.3f GB, dense layer %.3f GB, MoE layer %.3f GB + %d x %.2f MB" %
                  (label, base / 1e9, dense / 1e9, moe / 1e9, E, expert / 1e6), file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    gib = 2.0**30
    kv_bf16 = (full["kv_lora_rank"] + full["qk_rope_head_dim"]) * 2
    if a.kv_fp8_bytes is None:  # --kv-cache-dtype fp8's rows (attn/kv_cache.h)
        lkv, dr = full["kv_lora_rank"], full["qk_rope_head_dim"]
        sparse = full.get("index_topk") is not None
        a.kv_fp8_bytes = lkv + 4 * (lkv // 128) + 2 * dr if sparse else lkv + dr + 4 * (-(-lkv // 128) + 1)
    kv = [("bf16", kv_bf16), ("fp8", a.kv_fp8_bytes)]
    name = full.get("_name_or_path") or os.path.basename(os.path.normpath(a.config_dir))
    print("%s: %d layers (%d dense, %d MoE x %d routed experts), MTP layer not loaded; GiB = 2^30 bytes"
          % (name, L, n_dense, n_moe, E))
    print()
    print("| weights | total GiB | routed experts GiB | the rest GiB | bits per expert weight |")
    print("|---|---|---|---|---|")
    D_, Im = full["hidden_size"], full["moe_intermediate_size"]
    n_ew = n_moe * E * 3 * D_ * Im
    for label, total, experts in rows:
        print("| %s | %.1f | %.1f | %.1f | %.2f |" % (label, total / gib, experts / gib, (total - experts) / gib,
                                                     8.0 * experts / n_ew))
    print()
    print("| KV cache | bytes / token / layer | " + " | ".join("%dK tokens GiB" % (t // 1024) for t in ctxs) + " |")
    print("|---|---|" + "---|" * len(ctxs))
    for k, b in kv:
        print("| %s | %d | " % (k, b) + " | ".join("%.2f" % (b * L * t / gib) for t in ctxs) + " |")
    print()
    for label, total, _ in (r for r in rows if r[0].startswith("int4")):
        t = total + a.kv_fp8_bytes * L * ctxs[0]
        print("%s + fp8 KV at %d tokens: %.1f GiB, %s %.0f GiB" %
              (label, ctxs[0], t / gib, "within" if t <= a.budget_gib * gib else "OVER", a.budget_gib))


main()
