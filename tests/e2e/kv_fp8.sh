#!/usr/bin/env bash
# --kv-cache-dtype fp8 end to end:
# - test_kv_fp8 (codec, --kv-fp8 goldens) at the avx512_bf16, avx512, avx2 and portable levels too;
# - `mlaserve logits --kv-cache-dtype fp8` of tiny-v3 and tiny-v32 within 1e-3 of the --kv-fp8
#   goldens, one process and -tp 2 -dcp 2 (the DCP partials of the decode path, the prefill's
#   gathered context);
# - greedy `generate` of prompts sharing a prefix: the same tokens with prefix caching on (hits
#   counted) and off, and under -tp 2 -dcp 2;
# - the start-up log: tokens and bytes a token from the budget, fp8 against bf16;
# - fp8_e5m2 and DeepSeek-V4 refused in one line.
# Prints ok/not ok lines.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN=$BUILD/mlaserve
. tests/e2e/mpi_env.inc
unset MLASERVE_ATTENTION_BACKEND
tmp=$(mktemp -d)
out=$tmp/out
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1: $2"; sed 's/^/    /' "$out" | tail -12; }

for lv in avx512_bf16 avx512 avx2 portable; do # (capped at what the CPU has)
	if MLASERVE_CPU_LEVEL=$lv "$BUILD/tests/test_kv_fp8" >"$out" 2>&1 && ! grep -q "^not ok" "$out"; then
		ok "test_kv_fp8 at $lv"
	else
		notok "test_kv_fp8 at $lv" "$(grep '^not ok' "$out" | head -3)"
	fi
done

ids() { # MODEL PROMPT -> comma-separated golden prompt ids
	python3 -c 'import json,sys;p=json.load(open("tests/fixtures/%s/golden/prompts.json"%sys.argv[1]))["prompts"];print(",".join(map(str,[x for x in p if x["name"]==sys.argv[2]][0]["tokens"])))' "$1" "$2"
}
cmp_gold() { # MODEL PROMPT FILE: max |diff| against golden/PROMPT.kvfp8.f32 <= 1e-3
	python3 - "$@" <<'EOF'
import struct, sys
model, name, got = sys.argv[1:4]
g = open("tests/fixtures/%s/golden/%s.kvfp8.f32" % (model, name), "rb").read()
try:
    o = open(got, "rb").read()
except OSError as err:
    print("no output: %s" % err); sys.exit(1)
if len(o) != len(g):
    print("%d bytes, golden %d" % (len(o), len(g))); sys.exit(1)
n = len(g) // 4
worst = max(abs(x - y) for x, y in zip(struct.unpack("<%df" % n, g), struct.unpack("<%df" % n, o)))
print("max |diff| %.2e" % worst)
sys.exit(0 if worst <= 1e-3 else 1)
EOF
}

for model in tiny-v3 tiny-v32; do
	t=$(ids $model len17)
	for layout in "" "-tp 2 -dcp 2"; do
		for chunk in 1 0; do
			what="logits $model fp8 ${layout:-one process} chunk ${chunk/0/all}"
			c=""
			[ "$chunk" = 1 ] && c="--chunk 1"
			# shellcheck disable=SC2086
			if "$BIN" logits tests/fixtures/$model --tokens "$t" --out "$tmp/l.f32" --kv-cache-dtype fp8 \
				$layout $c >"$out" 2>&1 && r=$(cmp_gold $model len17 "$tmp/l.f32"); then
				ok "$what ($r)"
			else
				notok "$what" "${r:-logits failed}"
			fi
			r=""
		done
	done
done

# prefix caching: the second and third prompts share the first's 40 tokens
p=$(python3 -c 'import random;r=random.Random(5);a=[r.randrange(1,1000) for _ in range(40)];print(" ".join(",".join(map(str,[0]+a+[r.randrange(1,1000) for _ in range(k)])) for k in (3,9,17)))')
gen() { # extra flags -> the generated ids, one line per prompt
	local args=()
	for x in $p; do args+=(--prompt-ids "$x"); done
	"$BIN" generate tests/fixtures/tiny-v3 "${args[@]}" --max-tokens 12 --temperature 0 --ignore-eos --dtype float32 \
		--kv-cache-dtype fp8 --max-num-seqs 1 --output "$tmp/g.jsonl" "$@" >"$out" 2>&1 &&
		python3 -c 'import json,sys;[print(json.loads(l).get("token_ids") or json.loads(l).get("output_ids") or json.loads(l)) for l in open(sys.argv[1])]' "$tmp/g.jsonl"
}
on=$(gen --enable-prefix-caching)
hits=$(grep -o "prefix cache [0-9]*/" "$out" | grep -o "[0-9]*")
off=$(gen --no-enable-prefix-caching)
if [ -n "$on" ] && [ "$on" = "$off" ] && [ "${hits:-0}" -gt 0 ]; then
	ok "generate fp8: the same greedy tokens with prefix caching on ($hits tokens hit) and off"
else
	notok "generate fp8 prefix caching" "on: $on / off: $off / hits ${hits:-none}"
fi

# the engine under -tp 2 -dcp 2 (the ranks' fp8 caches, the DCP merge of the decode partials)
tp=$(gen --enable-prefix-caching -tp 2 -dcp 2)
if [ -n "$tp" ] && [ "$tp" = "$on" ]; then
	ok "generate fp8 -tp 2 -dcp 2: the same greedy tokens as one process"
else
	notok "generate fp8 -tp 2 -dcp 2" "one process: $on / -tp 2 -dcp 2: $tp"
fi

# the log line: tokens = blocks x 16, bytes a token = layers x the row's bytes
# (tiny-v3: 3 layers, Lkv 64 + dr 16: bf16 160 bytes, fp8 64 + 16 + 2 scales = 88)
logline() {
	"$BIN" generate tests/fixtures/tiny-v3 --prompt-ids 0,5 --max-tokens 1 --kv-cache-memory 4MiB --kv-cache-dtype "$1" \
		>"$out" 2>&1
	grep -o "kv cache: [0-9]* blocks x 16 tokens = [0-9]* tokens ([0-9.]* MiB, [^,]*, [0-9]* bytes a token)" "$out"
}
l8=$(logline fp8)
l16=$(logline bfloat16)
if r=$(python3 - "$l8" "$l16" <<'EOF'

import re, sys
def parse(s):
    m = re.search(r"(\d+) blocks x 16 tokens = (\d+) tokens .*, (\d+) bytes a token", s)
    return tuple(int(x) for x in m.groups())
b8, t8, p8 = parse(sys.argv[1])
b16, t16, p16 = parse(sys.argv[2])
budget = 4 << 20
ok = p8 == 3 * 88 and p16 == 3 * 160 and t8 == b8 * 16 and t16 == b16 * 16
ok = ok and b8 == budget // (16 * p8) and b16 == budget // (16 * p16)
print("fp8 %d tokens (%d bytes a token), bf16 %d (%d): %.2fx" % (t8, p8, t16, p16, t8 / t16))
sys.exit(0 if ok else 1)
EOF
); then
	ok "start-up log in tokens and bytes a token: $r"
else
	notok "start-up log" "fp8: '$l8' bf16: '$l16' $r"
fi

# refusals: one line, a failing exit (2: a bad flag value, 1: the model refuses it)
"$BIN" generate tests/fixtures/tiny-v3 --prompt-ids 0,5 --kv-cache-dtype fp8_e5m2 >"$out" 2>&1
rc=$?
if [ $rc = 2 ] && [ "$(wc -l <"$out")" = 1 ] && grep -q "fp8_e5m2: not supported" "$out"; then
	ok "fp8_e5m2 refused in one line"
else
	notok "fp8_e5m2 refusal" "rc $rc"
fi
"$BIN" generate tests/fixtures/tiny-v4 --prompt-ids 0,5 --kv-cache-dtype fp8 >"$out" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "deepseek_v4 keeps its own attention state" "$out" && [ "$(grep -c . "$out")" -le 3 ]; then
	ok "DeepSeek-V4 with --kv-cache-dtype fp8 refused"
else
	notok "DeepSeek-V4 fp8 refusal" "rc $rc"
fi
