#!/usr/bin/env bash
# `mlaserve generate` end to end on the tiny fixtures: greedy ids of --prompt-ids equal the
# golden continuation, a JSONL batch gives one line per prompt (and choice) with the right
# fields, and bad input fails with one line and a non-zero status. Prints ok/not ok.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/mlaserve
out=$(mktemp)
in=$(mktemp)
trap 'rm -f "$out" "$in"' EXIT

ok() { echo "ok - $1"; }
notok() { echo "not ok - $1: $2"; sed 's/^/    /' "$out" | tail -10; }

# golden len5 continuation of tiny-v3 (golden/greedy.json), float32
want=$(python3 -c 'import json;r=json.load(open("tests/fixtures/tiny-v3/golden/greedy.json"))["results"];print(",".join(map(str,[x for x in r if x["name"]=="len5"][0]["tokens"][:8])))')
ids=$(python3 -c 'import json;p=json.load(open("tests/fixtures/tiny-v3/golden/prompts.json"))["prompts"];print(",".join(map(str,[x for x in p if x["name"]=="len5"][0]["tokens"])))')
if timeout 60 "$BIN" generate tests/fixtures/tiny-v3 --dtype float32 --prompt-ids "$ids" --max-tokens 8 --ignore-eos >"$out" 2>/dev/null &&
	[ "$(head -1 "$out")" = "$want" ]; then
	ok "generate --prompt-ids greedy equals golden"
else
	notok "generate --prompt-ids greedy equals golden" "want $want"
fi

# greedy_follows Q MARGIN: greedy decoding through the engine (KV cache, decode steps) under
# --quantization Q picks the argmax of the quantized model's one-shot logits (`logits -q Q`,
# checked against the reference in test_quant_fp8 / test_int8) at every step, up to the first
# whose top two logits are within MARGIN
greedy_follows() {
	local q=$1 margin=$2 lf gen
	lf=$(mktemp)
	if timeout 60 "$BIN" generate tests/fixtures/tiny-v3 --dtype float32 -q "$q" --prompt-ids "$ids" \
		--max-tokens 8 --ignore-eos >"$out" 2>/dev/null && gen=$(head -1 "$out") &&
		timeout 60 "$BIN" logits tests/fixtures/tiny-v3 --dtype float32 -q "$q" --tokens "$ids,$gen" \
			--out "$lf" >/dev/null 2>&1 &&
		python3 - "$lf" "$ids" "$gen" "$margin" <<'EOF'
import struct, sys
p, g = [int(x) for x in sys.argv[2].split(',')], [int(x) for x in sys.argv[3].split(',')]
raw = open(sys.argv[1], 'rb').read()
V = 1024
rows = [struct.unpack_from('<%df' % V, raw, 4 * V * i) for i in range(len(raw) // (4 * V))]
assert len(g) == 8, g
for k in range(len(g)):
    r = sorted(rows[len(p) - 1 + k], reverse=True)
    if r[0] - r[1] < float(sys.argv[4]):
        break
    assert max(range(V), key=rows[len(p) - 1 + k].__getitem__) == g[k], (k, g)
EOF
	then
		ok "generate -q $q greedy follows the quantized logits"
	else
		notok "generate -q $q greedy follows the quantized logits" "tokens ${gen:-none}"
	fi
	rm -f "$lf"
}
greedy_follows fp8 0
# int8: where the one-shot logits and the engine's steps (their sums in other orders) round an
# activation to either side of a half step, a logit moves by ~0.05 and may pick the other token
greedy_follows int8 0.2

# a JSONL batch through the engine together, prefix caching + small budget
cat >"$in" <<'EOF'
{"prompt": "Hello world"}
{"prompt_token_ids": [0, 177, 945, 109, 269], "max_tokens": 4, "temperature": 0.8, "seed": 3}
{"prompt": "Hello world", "n": 2, "temperature": 1.0, "seed": 1, "max_tokens": 5}
{"prompt_token_ids": [0, 177, 945, 109, 269], "max_tokens": 3, "ignore_eos": true}
EOF
if timeout 60 "$BIN" generate tests/fixtures/tiny-v3 --prompts-file "$in" --max-tokens 6 --ignore-eos \
	--max-num-batched-tokens 7 --block-size 4 --output /dev/stdout >"$out" 2>/dev/null &&
	python3 - "$out" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 5, len(lines)
assert [l["index"] for l in lines] == [0, 1, 2, 2, 3]
assert [len(l["token_ids"]) for l in lines] == [6, 4, 5, 5, 3], [len(l["token_ids"]) for l in lines]
assert all(l["finish_reason"] == "length" for l in lines)
assert all(isinstance(l["text"], str) for l in lines)
assert lines[2]["choice"] == 0 and lines[3]["choice"] == 1
EOF
then
	ok "generate --prompts-file batch"
else
	notok "generate --prompts-file batch" "unexpected output"
fi

# logprobs and prompt_logprobs per JSONL line, as vLLM's RequestOutput; the prompt's equal
# the log-softmax of the golden logits (float32)
ids=$(python3 -c 'import json;p=json.load(open("tests/fixtures/tiny-v3/golden/prompts.json"))["prompts"];print(json.dumps([x for x in p if x["name"]=="len17"][0]["tokens"]))')
printf '{"prompt_token_ids": %s, "logprobs": 2, "prompt_logprobs": 1, "max_tokens": 3, "temperature": 0}\n' "$ids" >"$in"
if timeout 60 "$BIN" generate tests/fixtures/tiny-v3 --dtype float32 --prompts-file "$in" --output /dev/stdout \
	>"$out" 2>/dev/null && python3 - "$out" <<'EOF'
import json, math, struct, sys
line = json.loads(open(sys.argv[1]).readline())
g = json.load(open("tests/fixtures/tiny-v3/golden/prompts.json"))
p = [x for x in g["prompts"] if x["name"] == "len17"][0]
V = g["vocab_size"]
raw = open("tests/fixtures/tiny-v3/golden/" + p["logits_file"], "rb").read()
assert len(line["logprobs"]) == 3 and all(1 <= len(d) <= 3 for d in line["logprobs"])
for d, t in zip(line["logprobs"], line["token_ids"]):
    assert str(t) in d and d[str(t)]["rank"] >= 1
plp = line["prompt_logprobs"]
assert plp[0] is None and len(plp) == len(p["tokens"])
for i in range(1, len(plp)):
    row = struct.unpack_from("<%df" % V, raw, (i - 1) * V * 4)
    mx = max(row)
    lse = mx + math.log(sum(math.exp(x - mx) for x in row))
    got = plp[i][str(p["tokens"][i])]["logprob"]
    assert abs(got - (row[p["tokens"][i]] - lse)) < 1e-3, (i, got)
EOF
then
	ok "generate logprobs and prompt_logprobs (golden)"
else
	notok "generate logprobs and prompt_logprobs (golden)" "unexpected output"
fi

# bad input: one error line, status 1
for bad in '"max_tokens": 2.5' '"priority": 1e20' '"seed": 1e30'; do
	printf '{"prompt": "a", %s}\n' "$bad" >"$in"
	timeout 60 "$BIN" generate tests/fixtures/tiny-v3 --prompts-file "$in" --scheduling-policy priority >"$out" 2>&1; rc=$?
	if [ $rc -eq 1 ] && grep -q "must be an integer" "$out"; then ok "generate rejects $bad"
	else notok "generate rejects $bad" "status $rc"; fi
done
printf '{"prompt_token_ids": [0, 99999]}\n' >"$in"
timeout 60 "$BIN" generate tests/fixtures/tiny-v3 --prompts-file "$in" >"$out" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q "out of vocabulary" "$out"; then
	ok "generate rejects an out-of-vocabulary prompt"
else
	notok "generate rejects an out-of-vocabulary prompt" "status $rc"
fi
timeout 60 "$BIN" generate tests/fixtures/tiny-v3 --prompt-ids 0,1 --kv-cache-memory 12 >"$out" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q "kv cache" "$out"; then
	ok "generate rejects a kv pool smaller than max_model_len"
else
	notok "generate rejects a kv pool smaller than max_model_len" "status $rc"
fi
