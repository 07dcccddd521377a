#!/usr/bin/env bash
# Kimi K2.5 / K2.6 (KimiK25ForConditionalGeneration) through the real binary, on checkpoints
# that scripts/make_kimi_k25_fixture.py wraps here from K2-shaped fixtures:
# - tiny-v3-int4 (compressed-tensors int4 experts) wrapped, its ignore list written with the
#   wrapper's full names (language_model.lm_head): float32 logits within 1e-3 of tiny-v3-int4's
#   goldens, so the int4 experts and the bf16 modules the list names load as they did unwrapped;
# - a wrapped checkpoint missing a text tensor: exit 1, one line naming it in full;
# - config.json of model_type kimi_k25 without text_config: exit 1, one line naming the key;
# - tiny-kimi-k25 generates the same greedy tokens as tiny-kimi-k2.
# Prints ok/not ok lines.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/mlaserve
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1: $2"; sed 's/^/    /' "$tmp/err" | tail -8; }
command -v python3 >/dev/null || { echo "not ok - python3 missing"; exit 1; }

ids() {
	python3 -c 'import json,sys;p=json.load(open(sys.argv[1]))["prompts"];print(",".join(map(str,[x for x in p if x["name"]==sys.argv[2]][0]["tokens"])))' "$1" "$2"
}
maxdiff() { # GOLDEN OUT -> the max |diff|, exit 1 above 1e-3
	python3 - "$1" "$2" <<'PY'
import struct, sys
g, o = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
if len(g) != len(o):
    print("%d bytes, golden %d" % (len(o), len(g))); sys.exit(1)
n = len(g) // 4
w = max(abs(a - b) for a, b in zip(struct.unpack("<%df" % n, g), struct.unpack("<%df" % n, o)))
print("max |diff| %.2e" % w); sys.exit(0 if w <= 1e-3 else 1)
PY
}

name="tiny-v3-int4 wrapped as Kimi K2.5 (full-name ignore list): logits = its goldens"
if python3 scripts/make_kimi_k25_fixture.py tests/fixtures/tiny-v3-int4 "$tmp/k25" --ignore-full-names >"$tmp/err" 2>&1 &&
	grep -q '"language_model.lm_head"' "$tmp/k25/config.json" &&
	timeout 120 "$BIN" logits "$tmp/k25" --tokens "$(ids tests/fixtures/tiny-v3-int4/golden/prompts.json len17)" \
		--out "$tmp/l.f32" --dtype float32 >"$tmp/err" 2>&1 &&
	res=$(maxdiff tests/fixtures/tiny-v3-int4/golden/len17.logits.f32 "$tmp/l.f32"); then
	ok "$name ($res)"
else
	notok "$name" "${res:-failed}"
fi

name="a wrapped checkpoint missing a text tensor: one line naming it in full, exit 1"
python3 scripts/make_kimi_k25_fixture.py tests/fixtures/tiny-kimi-k2 "$tmp/miss" \
	--drop model.layers.1.self_attn.kv_a_layernorm.weight >/dev/null
timeout 60 "$BIN" logits "$tmp/miss" --tokens 0,5,9 --out "$tmp/l2.f32" --dtype float32 >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ "$(grep -vc '^INFO' "$tmp/err")" -eq 1 ] &&
	grep -q "missing tensor language_model.model.layers.1.self_attn.kv_a_layernorm.weight" "$tmp/err"; then
	ok "$name"
else
	notok "$name" "exit status $rc"
fi

name="model_type kimi_k25 without text_config: one line naming the key, exit 1"
mkdir -p "$tmp/bad" && cp tests/fixtures/tiny-kimi-k25/* "$tmp/bad/" 2>/dev/null
python3 - "$tmp/bad/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["text_config"]; json.dump(c, open(sys.argv[1], "w"))
PY
timeout 60 "$BIN" logits "$tmp/bad" --tokens 0,5,9 --out "$tmp/l3.f32" --dtype float32 >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ "$(grep -vc '^INFO' "$tmp/err")" -eq 1 ] && grep -q 'config.json: key "text_config"' "$tmp/err"; then
	ok "$name"
else
	notok "$name" "exit status $rc"
fi

name="tiny-kimi-k25 generates what tiny-kimi-k2 does (greedy, its tiktoken tokenizer and template copied)"
for m in tiny-kimi-k2 tiny-kimi-k25; do
	timeout 60 "$BIN" generate "tests/fixtures/$m" --prompt "Hello, Kimi" --max-tokens 12 --temperature 0 \
		>"$tmp/$m.out" 2>"$tmp/err"
done
if [ -s "$tmp/tiny-kimi-k2.out" ] && cmp -s "$tmp/tiny-kimi-k2.out" "$tmp/tiny-kimi-k25.out"; then
	ok "$name"
else
	notok "$name" "$(cat "$tmp/tiny-kimi-k25.out" 2>/dev/null | head -c 200)"
fi
