#!/usr/bin/env python3
"""A random-weight bf16 HF checkpoint of a bench config, for comparisons with engines that read
files rather than `--load-format dummy` (bench/vs_peers.sh, docs/PERFORMANCE.md §10):

  python3 bench/make_random_hf.py bench/configs/bench-v2lite-4L OUT_DIR

copies the config's files (config.json, tokenizer) into OUT_DIR and writes model.safetensors
with DeepSeek's tensor names: norms 1, every other weight normal x 0.02 (seed 0), bf16 by
truncation. A DeepseekV4ForCausalLM config (bench/configs/v4-flash-2L-e32-bf16) gets V4's names
(embed, layers.N.attn.wq_a, .compressor, .indexer, hc_*, ...), every matrix bf16 and the vectors
V4 keeps in float32 (sinks 0, router bias 0, hyper-connection mixes and compressor position biases
normal x 1.7 / sqrt(columns), as `--load-format dummy` fills them) float32; a config with a
quantization_config is refused (this writes bf16 only). Needs numpy (Debian: python3-numpy). Not
used by the tests."""
import json, os, shutil, struct, sys
if len(sys.argv) != 3 or not os.path.isfile(os.path.join(sys.argv[1], "config.json")):
    sys.exit("usage: make_random_hf.py CONFIG_DIR (with a config.json) OUT_DIR")
src, out = sys.argv[1], sys.argv[2]
try:
    import numpy as np
except ImportError:
    sys.exit("make_random_hf.py: needs numpy (Debian: apt-get install python3-numpy, then /usr/bin/python3)")
os.makedirs(out, exist_ok=True)
for f in os.listdir(src):
    shutil.copy(os.path.join(src, f), out)
c = json.load(open(os.path.join(src, "config.json")))
if "DeepseekV4ForCausalLM" in c.get("architectures", []):
    if c.get("quantization_config"):
        sys.exit("make_random_hf.py: %s has a quantization_config; give the bf16 variant (e.g. "
                 "bench/configs/v4-flash-2L-e32-bf16)" % src)
    if c.get("num_hash_layers", 0) or c.get("num_nextn_predict_layers", 0):
        sys.exit("make_random_hf.py: V4 hash layers and MTP modules are not written: set "
                 "num_hash_layers and num_nextn_predict_layers to 0")


def v4_tensors(c):
    """V4's tensors as the published checkpoint names them: (name, shape, kind), kind n: ones,
    z: float32 zeros, f: float32 normal x 1.7 / sqrt(columns), w: bf16 normal x 0.02"""
    D, V, H, hd = c["hidden_size"], c["vocab_size"], c["num_attention_heads"], c["head_dim"]
    hc, Q, og, olr = c["hc_mult"], c["q_lora_rank"], c["o_groups"], c["o_lora_rank"]
    E, I, S = c["n_routed_experts"], c["moe_intermediate_size"], c["n_shared_experts"]
    Hi, di = c["index_n_heads"], c["index_head_dim"]
    mix = (2 + hc) * hc  # pre, post and the hc x hc residual mix
    t = [("embed.weight", (V, D), "w"), ("norm.weight", (D,), "n"), ("head.weight", (V, D), "w"),
         ("hc_head_fn", (hc, hc * D), "f"), ("hc_head_base", (hc,), "f"), ("hc_head_scale", (1,), "f")]
    for i in range(c["num_hidden_layers"]):
        p, r = "layers.%d." % i, c["compress_ratios"][i]
        for s in ("attn", "ffn"):
            t += [(p + "hc_%s_fn" % s, (mix, hc * D), "f"), (p + "hc_%s_base" % s, (mix,), "f"),
                  (p + "hc_%s_scale" % s, (3,), "f")]
        t += [(p + "attn_norm.weight", (D,), "n"), (p + "ffn_norm.weight", (D,), "n"),
              (p + "attn.wq_a.weight", (Q, D), "w"), (p + "attn.q_norm.weight", (Q,), "n"),
              (p + "attn.wq_b.weight", (H * hd, Q), "w"), (p + "attn.wkv.weight", (hd, D), "w"),
              (p + "attn.kv_norm.weight", (hd,), "n"), (p + "attn.wo_a.weight", (og * olr, H * hd // og), "w"),
              (p + "attn.wo_b.weight", (D, og * olr), "w"), (p + "attn.attn_sink", (H,), "z")]
        if r > 0:  # the compressor; ratio 4 (CSA) overlaps two windows: twice the width
            cw = (2 if r == 4 else 1) * hd
            t += [(p + "attn.compressor.wkv.weight", (cw, D), "w"), (p + "attn.compressor.wgate.weight", (cw, D), "w"),
                  (p + "attn.compressor.ape", (r, cw), "f"), (p + "attn.compressor.norm.weight", (hd,), "n")]
        if r == 4:  # the indexer
            t += [(p + "attn.indexer.wq_b.weight", (Hi * di, Q), "w"),
                  (p + "attn.indexer.weights_proj.weight", (Hi, D), "w"),
                  (p + "attn.indexer.compressor.wkv.weight", (2 * di, D), "w"),
                  (p + "attn.indexer.compressor.wgate.weight", (2 * di, D), "w"),
                  (p + "attn.indexer.compressor.ape", (4, 2 * di), "f"),
                  (p + "attn.indexer.compressor.norm.weight", (di,), "n")]
        t += [(p + "ffn.gate.weight", (E, D), "w"), (p + "ffn.gate.bias", (E,), "z")]
        for x in range(E):
            q = p + "ffn.experts.%d." % x
            t += [(q + "w1.weight", (I, D), "w"), (q + "w3.weight", (I, D), "w"), (q + "w2.weight", (D, I), "w")]
        q = p + "ffn.shared_experts."
        t += [(q + "w1.weight", (S * I, D), "w"), (q + "w3.weight", (S * I, D), "w"), (q + "w2.weight", (D, S * I), "w")]
    return t


def v3_tensors(c):
    """V2 / V3's tensors under their HF names: (name, shape, kind), kind n: ones, w: bf16 normal x 0.02"""
    D, V, H = c["hidden_size"], c["vocab_size"], c["num_attention_heads"]
    dn, dr, dv = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    Lkv, Lq = c["kv_lora_rank"], c["q_lora_rank"]
    I, Im, E, S = c["intermediate_size"], c["moe_intermediate_size"], c["n_routed_experts"], c["n_shared_experts"]
    tensors = [("model.embed_tokens.weight", (V, D), "w"), ("model.norm.weight", (D,), "n"),
               ("lm_head.weight", (V, D), "w")]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors += [(p + "input_layernorm.weight", (D,), "n"), (p + "post_attention_layernorm.weight", (D,), "n"),
                    (p + "self_attn.kv_a_layernorm.weight", (Lkv,), "n"),
                    (p + "self_attn.kv_a_proj_with_mqa.weight", (Lkv + dr, D), "w"),
                    (p + "self_attn.kv_b_proj.weight", (H * (dn + dv), Lkv), "w"),
                    (p + "self_attn.o_proj.weight", (D, H * dv), "w")]
        if Lq:
            tensors += [(p + "self_attn.q_a_proj.weight", (Lq, D), "w"), (p + "self_attn.q_a_layernorm.weight", (Lq,), "n"),
                        (p + "self_attn.q_b_proj.weight", (H * (dn + dr), Lq), "w")]
        else:
            tensors += [(p + "self_attn.q_proj.weight", (H * (dn + dr), D), "w")]
        def mlp(pre, inter):
            return [(pre + "gate_proj.weight", (inter, D), "w"), (pre + "up_proj.weight", (inter, D), "w"),
                    (pre + "down_proj.weight", (D, inter), "w")]
        if i < c["first_k_dense_replace"]:
            tensors += mlp(p + "mlp.", I)
        else:
            tensors += [(p + "mlp.gate.weight", (E, D), "w")]
            for x in range(E):
                tensors += mlp(p + f"mlp.experts.{x}.", Im)
            tensors += mlp(p + "mlp.shared_experts.", S * Im)
    return tensors


tensors = v4_tensors(c) if "DeepseekV4ForCausalLM" in c.get("architectures", []) else v3_tensors(c)
hdr, off = {}, 0
for name, shape, kind in tensors:
    n = int(np.prod(shape)) * (4 if kind in "zf" else 2)
    hdr[name] = {"dtype": "F32" if kind in "zf" else "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
    off += n
h = json.dumps(hdr).encode()
h += b" " * ((8 - len(h) % 8) % 8)
rng = np.random.default_rng(0)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for name, shape, kind in tensors:
        if kind in "nz":
            a = np.full(shape, 1.0 if kind == "n" else 0.0, np.float32)
        else:
            a = rng.standard_normal(shape, dtype=np.float32) * (0.02 if kind == "w" else 1.7 / np.sqrt(shape[1] if len(shape) > 1 else 64))
        if kind in "zf":
            f.write(a.tobytes())
        else:
            f.write((a.view(np.uint32) >> 16).astype(np.uint16).tobytes())
print(out, off / 1e9, "GB")
