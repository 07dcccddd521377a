#!/usr/bin/env python3
"""Kimi K2.5 / K2.6 fixture from a Kimi K2 one: the same text model as Moonshot ships it inside
KimiK25ForConditionalGeneration (model_type kimi_k25).

  scripts/make_kimi_k25_fixture.py tests/fixtures/tiny-kimi-k2 tests/fixtures/tiny-kimi-k25
  scripts/make_kimi_k25_fixture.py K2_DIR OUT_DIR [--ignore-full-names] [--drop NAME]...

--ignore-full-names writes a compressed-tensors ignore list's module names as the wrapper
names them (lm_head -> language_model.lm_head); --drop leaves a K2 tensor out (its K2 name),
for tests of the error a missing tensor gives. K2_DIR may hold any V3-family text model
(model_type kimi_k2 or deepseek_v3).

config.json: the K2 config becomes "text_config" (its quantization_config stays in it, where
K2.5 publishes it), beside a small "vision_config" and K2.5's top-level keys. Tensors: every
K2 tensor renamed as K2.5's checkpoint names them (model.X -> language_model.model.X,
lm_head.weight -> language_model.lm_head.weight), with a few vision-tower and projector
tensors (vision_tower.*, mm_projector.*) that a text-only server must leave unread. The bytes
of every K2 tensor are copied unchanged, so the logits are K2's (its golden/ is the golden).
The tokenizer files and generation_config.json are copied. Pure Python: safetensors is a
little-endian u64 header length, a JSON header and the data.
"""
import argparse
import json
import os
import random
import shutil
import struct
import sys

VISION = {  # K2.5's vision keys, small (MoonViT3d with a patch-merger projector)
    "patch_size": 14, "init_pos_emb_height": 4, "init_pos_emb_width": 4, "init_pos_emb_time": 4,
    "pos_emb_type": "divided_fixed", "num_attention_heads": 2, "num_hidden_layers": 1, "hidden_size": 16,
    "intermediate_size": 32, "merge_kernel_size": [2, 2], "video_attn_type": "spatial_temporal",
    "merge_type": "sd2_tpool", "mm_projector_type": "patchmerger", "mm_hidden_size": 16,
    "projector_hidden_act": "gelu", "projector_ln_eps": 1e-05,
}
# name -> shape of the vision-side tensors (bf16, random): what the server must not read
VISION_TENSORS = {
    "vision_tower.patch_embed.proj.weight": [16, 3, 14, 14],
    "vision_tower.encoder.blocks.0.wqkv.weight": [48, 16],
    "mm_projector.pre_norm.weight": [16],
    "mm_projector.proj.0.weight": [64, 64],
    "mm_projector.proj.2.weight": [128, 64],
}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def k25_name(name):
    return "language_model." + name  # model.X and lm_head.weight alike


def main():
    ap = argparse.ArgumentParser(description="Kimi K2.5 fixture from a Kimi K2 one")
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--ignore-full-names", action="store_true")
    ap.add_argument("--drop", action="append", default=[])
    args = ap.parse_args()
    src, out = args.src, args.out
    with open(os.path.join(src, "config.json")) as f:
        text = json.load(f)
    if text.get("model_type") not in ("kimi_k2", "deepseek_v3"):
        sys.exit(f"{src}/config.json: model_type {text.get('model_type')!r}, expected 'kimi_k2' or 'deepseek_v3'")
    q = text.get("quantization_config") or {}
    if args.ignore_full_names and q.get("ignore"):
        q["ignore"] = [n if n.startswith("re:") else "language_model." + n for n in q["ignore"]]
    os.makedirs(out, exist_ok=True)
    config = {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "auto_map": {"AutoConfig": "configuration_kimi_k25.KimiK25Config",
                     "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
                     "AutoModelForCausalLM": "modeling_kimi_k25.KimiK25ForConditionalGeneration"},
        "bos_token_id": text.get("bos_token_id"),
        "eos_token_id": text.get("eos_token_id"),
        "ignore_index": -100,
        "media_placeholder_token_id": text["vocab_size"] - 2,
        "model_type": "kimi_k25",
        "pad_token_id": text["vocab_size"] - 1,
        "text_config": text,
        "tie_word_embeddings": text.get("tie_word_embeddings", False),
        "use_unified_vision_chunk": True,
        "video_placeholder": "<|kimi_k25_video_placeholder|>",
        "vision_config": VISION,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")

    index_path = os.path.join(src, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    else:
        shards = ["model.safetensors"]
    tensors = []  # (name, dtype, shape, bytes)
    for shard in shards:
        header, data = read_safetensors(os.path.join(src, shard))
        for name, v in header.items():
            if name == "__metadata__" or name in args.drop:
                continue
            b, e = v["data_offsets"]
            tensors.append((k25_name(name), v["dtype"], v["shape"], data[b:e]))
    rng = random.Random(25)
    for name, shape in VISION_TENSORS.items():
        n = 1
        for d in shape:
            n *= d
        # bf16 values in about [-0.1, 0.1]: the high half of a float32
        vals = b"".join(struct.pack("<f", rng.uniform(-0.1, 0.1))[2:] for _ in range(n))
        tensors.append((name, "BF16", shape, vals))
    tensors.sort(key=lambda t: t[0])

    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, dtype, shape, blob in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    shard = "model-00001-of-00001.safetensors"
    with open(os.path.join(out, shard), "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for blob in blobs:
            f.write(blob)
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": offset}, "weight_map": {t[0]: shard for t in tensors}}, f, indent=2)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "tiktoken.model",
                 "chat_template.jinja"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(out, name))
    print(f"{out}: {len(tensors)} tensors ({len(VISION_TENSORS)} vision-side), {offset} bytes")


if __name__ == "__main__":
    main()
