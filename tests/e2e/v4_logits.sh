#!/usr/bin/env bash
# DeepSeek-V4 through the real binary: `mlaserve logits tests/fixtures/tiny-v4` on every golden
# prompt in one prefill, in chunks of 5 and token by token, every row within 1e-3 of
# golden/lenN.logits.f32 (act-quant off); its bf16 copy (no quantization_config) on len17; then a
# checkpoint with a tensor missing: exit status 1 and one line naming it; bf16 activations refused
# with one line; an explicit --attention-backend (DEEPSEEK_V4 runs, an MLA one is refused). Prints
# ok/not ok.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
BIN=$ROOT/${BUILD:-build}/mlaserve
FIX=$ROOT/tests/fixtures/tiny-v4
command -v python3 >/dev/null || { echo "not ok - python3 missing"; exit 1; }
[ -x "$BIN" ] || { echo "not ok - $BIN missing"; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

python3 - "$FIX/golden/prompts.json" >"$WORK/prompts" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))['prompts']:
    print(p['name'], ','.join(map(str, p['tokens'])), p['logits_file'])
PY

while read -r name toks gold; do
	for chunk in 0 5 1; do
		what="$name, $([ $chunk = 0 ] && echo 'one prefill' || echo "--chunk $chunk")"
		args=(--tokens "$toks" --dtype float32 --out "$WORK/out.f32")
		[ $chunk = 0 ] || args+=(--chunk $chunk)
		if ! "$BIN" logits "$FIX" "${args[@]}" 2>"$WORK/err"; then
			echo "not ok - $what: $(tail -1 "$WORK/err")"
			continue
		fi
		python3 - "$WORK/out.f32" "$FIX/golden/$gold" "$what" <<'PY'
import array, sys
a, g = array.array('f'), array.array('f')
a.frombytes(open(sys.argv[1], 'rb').read()); g.frombytes(open(sys.argv[2], 'rb').read())
d = max(abs(x - y) for x, y in zip(a, g)) if len(a) == len(g) else float('inf')
print('%s - %s: max |diff| %.3g (%d values)' % ('ok' if d < 1e-3 else 'not ok', sys.argv[3], d, len(a)))
PY
	done
done <"$WORK/prompts"

# the same weights in bf16 (scripts/make_v4_bf16_fixture.py: every fp8 / MXFP4 weight widened
# exactly, no quantization_config), as bench/make_random_hf.py writes V4: the golden logits
if ! python3 scripts/make_v4_bf16_fixture.py "$FIX" "$WORK/bf16" 2>"$WORK/err"; then
	echo "not ok - make_v4_bf16_fixture.py: $(tail -1 "$WORK/err")"
else
	read -r name toks gold < <(grep '^len17 ' "$WORK/prompts")
	if ! "$BIN" logits "$WORK/bf16" --tokens "$toks" --dtype float32 --out "$WORK/bf16.f32" 2>"$WORK/err"; then
		echo "not ok - the bf16 copy, $name: $(tail -1 "$WORK/err")"
	else
		python3 - "$WORK/bf16.f32" "$FIX/golden/$gold" "the bf16 copy (no quantization_config), $name" <<'PY'
import array, sys
a, g = array.array('f'), array.array('f')
a.frombytes(open(sys.argv[1], 'rb').read()); g.frombytes(open(sys.argv[2], 'rb').read())
d = max(abs(x - y) for x, y in zip(a, g)) if len(a) == len(g) else float('inf')
print('%s - %s: max |diff| %.3g (%d values)' % ('ok' if d < 1e-3 else 'not ok', sys.argv[3], d, len(a)))
PY
	fi
fi

# an explicit --attention-backend: the config is read through the V4 family (not refused as an
# unknown model_type); DEEPSEEK_V4 runs it, an MLA backend is refused with one line
if "$BIN" logits "$FIX" --tokens 0,1,2 --dtype float32 --attention-backend DEEPSEEK_V4 --out "$WORK/be.f32" \
	2>"$WORK/err"; then
	echo "ok - --attention-backend DEEPSEEK_V4 names V4's backend, the V4 config is read by its family"
else
	echo "not ok - --attention-backend DEEPSEEK_V4: $(tail -1 "$WORK/err")"
fi
if ! "$BIN" logits "$FIX" --tokens 0,1,2 --dtype float32 --attention-backend FLASHMLA --out "$WORK/be.f32" \
	2>"$WORK/err" && [ "$(grep -vc '^INFO' "$WORK/err")" = 1 ] &&
	grep -q "FLASHMLA serves dense MLA attention and the model needs DeepSeek-V4: use DEEPSEEK_V4" "$WORK/err"; then
	echo "ok - --attention-backend FLASHMLA on V4 is refused with one line naming DEEPSEEK_V4"
else
	echo "not ok - --attention-backend FLASHMLA on V4: $(tail -1 "$WORK/err")"
fi

. tests/e2e/refused.inc

mkdir "$WORK/bad"
cp "$FIX"/*.json "$FIX"/*.safetensors "$WORK/bad/"
python3 - "$WORK/bad" <<'PY'
import json, struct, sys
d = sys.argv[1]
shard = d + '/model-00001-of-00002.safetensors'
raw = open(shard, 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
h = json.loads(raw[8:8 + n])
del h['layers.2.attn.wkv.weight']
text = json.dumps(h).encode()
open(shard, 'wb').write(struct.pack('<Q', len(text)) + text + raw[8 + n:])
idx = json.load(open(d + '/model.safetensors.index.json'))
del idx['weight_map']['layers.2.attn.wkv.weight']
json.dump(idx, open(d + '/model.safetensors.index.json', 'w'))
PY
refused "missing tensor" "layers.2.attn.wkv.weight" \
	"$BIN" logits "$WORK/bad" --tokens 0,1 --dtype float32 --out "$WORK/x"
refused "bf16 activations" "float32" "$BIN" logits "$FIX" --tokens 0,1 --dtype bfloat16 --out "$WORK/x"
