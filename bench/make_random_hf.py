#!/usr/bin/env python3
"""A random-weight bf16 HF checkpoint of a bench config, for comparisons with engines that read
files rather than `--load-format dummy` (bench/vs_peers.sh, docs/PERFORMANCE.md §10):

  python3 bench/make_random_hf.py bench/configs/bench-v2lite-4L OUT_DIR

copies the config's files (config.json, tokenizer) into OUT_DIR and writes model.safetensors
with DeepSeek's tensor names: norms 1, every other weight normal x 0.02 (seed 0), bf16 by
truncation. Needs numpy (Debian: python3-numpy). Not used by the tests."""
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
hdr, off = {}, 0
for name, shape, _ in tensors:
    n = int(np.prod(shape)) * 2
    hdr[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
    off += n
h = json.dumps(hdr).encode()
h += b" " * ((8 - len(h) % 8) % 8)
rng = np.random.default_rng(0)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for name, shape, kind in tensors:
        if kind == "n":
            a = np.ones(shape, np.float32)
        else:
            a = rng.standard_normal(shape, dtype=np.float32) * 0.02
        f.write((a.view(np.uint32) >> 16).astype(np.uint16).tobytes())
print(out, off / 1e9, "GB")
