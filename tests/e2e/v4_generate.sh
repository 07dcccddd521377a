#!/usr/bin/env bash
# DeepSeek-V4 through the engine: `mlaserve generate tests/fixtures/tiny-v4 --prompt-ids` on
# every golden prompt gives golden/greedy.json's greedy tokens (act-quant off: the logits'
# argmax chain), up to the first step whose top two logits are within 0.01 of each other (a
# near tie that float32 rounding may turn); --dtype auto runs float32; then what V4 cannot run
# refused with one line and exit status 1, for generate and serve alike: bfloat16, a state
# larger than the memory, a bad -tp / -dcp layout (-tp and -dcp run: dist_model.sh). Prefix caching: requests that share block-aligned
# prefixes with earlier ones give the tokens and logprobs of a cold run. Speculative decoding
# (deepseek_mtp with 1 and 3 drafts, ngram): the tokens of a run without drafts.
# Prints ok/not ok.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/mlaserve
FIX=tests/fixtures/tiny-v4
command -v python3 >/dev/null || { echo "not ok - python3 missing"; exit 1; }
[ -x "$BIN" ] || { echo "not ok - $BIN missing"; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# name, prompt ids, the golden tokens up to the first near tie
python3 - "$FIX/golden" >"$WORK/cases" <<'PY'
import json, sys
d = sys.argv[1]
prompts = {p['name']: p['tokens'] for p in json.load(open(d + '/prompts.json'))['prompts']}
for r in json.load(open(d + '/greedy.json'))['results']:
    n = next((i for i, m in enumerate(r['margins']) if m < 0.01), len(r['tokens']))
    print(r['name'], ','.join(map(str, prompts[r['name']])), ','.join(map(str, r['tokens'][:n])), n)
PY

while read -r name ids want n; do
	got=$(timeout 120 "$BIN" generate "$FIX" --dtype float32 --prompt-ids "$ids" --max-tokens "$n" --ignore-eos \
		--temperature 0 --max-num-seqs 4 --max-model-len 512 2>"$WORK/err")
	if [ "$got" = "$want" ]; then
		echo "ok - generate $name: $n greedy tokens as golden/greedy.json"
	else
		echo "not ok - generate $name: got $got, want $want: $(tail -1 "$WORK/err")"
	fi
done <"$WORK/cases"

# all of them in one engine: batched steps, 5 sequences through 4 per-sequence state slots (the
# window rows and compressor states; the entries are in the paged pool)
args=()
while read -r name ids want n; do args+=(--prompt-ids "$ids"); done <"$WORK/cases"
timeout 120 "$BIN" generate "$FIX" --dtype float32 "${args[@]}" --max-tokens 16 --ignore-eos --temperature 0 \
	--max-num-seqs 4 --max-model-len 512 >"$WORK/batch" 2>"$WORK/err"
k=0
while read -r name ids want n; do
	k=$((k + 1))
	got=$(sed -n "${k}p" "$WORK/batch" | cut -d, -f1-"$n")
	if [ "$got" = "$want" ]; then
		echo "ok - generate, 5 prompts batched over 4 slots: $name as golden/greedy.json"
	else
		echo "not ok - generate, 5 prompts batched: $name: got $got, want $want: $(tail -1 "$WORK/err")"
	fi
done <"$WORK/cases"

# a KV pool too small for all of them at once: sequences wait, are preempted and recomputed,
# and every output is the one an ample pool gives (4 rotations of the 64-token prompt, 100
# tokens each: 26 blocks of 16 tokens hold 2.6 of the 4)
rot=()
while read -r name ids want n; do
	[ "$name" = len64 ] && rot=$(python3 -c "import sys;t=sys.argv[1].split(',');print(' '.join('--prompt-ids '+','.join(t[i:]+t[:i]) for i in range(4)))" "$ids")
done <"$WORK/cases"
# 26 blocks of 16 tokens at the bytes a token the engine reports
"$BIN" generate "$FIX" --dtype float32 --prompt-ids 0,5,9 --max-tokens 1 --max-num-seqs 4 --max-model-len 400 \
	--block-size 16 2>"$WORK/err.probe" >/dev/null
per=$(sed -n 's/.*, \([0-9]*\) bytes a token.*/\1/p' "$WORK/err.probe")
small=$((26 * 16 * ${per:-0}))
for mem in ample small; do
	extra=(--block-size 16)
	[ $mem = ample ] || extra+=(--kv-cache-memory $small)
	# shellcheck disable=SC2086
	timeout 120 "$BIN" generate "$FIX" --dtype float32 $rot --max-tokens 100 --ignore-eos --temperature 0 \
		--max-num-seqs 4 --max-model-len 400 "${extra[@]}" >"$WORK/pool.$mem" 2>"$WORK/err.$mem"
done
pre=$(sed -n 's/.* \([0-9]*\) preemptions.*/\1/p' "$WORK/err.small")
if [ -s "$WORK/pool.ample" ] && cmp -s "$WORK/pool.ample" "$WORK/pool.small" && [ "${pre:-0}" -gt 0 ]; then
	echo "ok - a full KV pool: $pre preemptions, recomputed, the same 4 x 100 tokens as an ample pool"
else
	echo "not ok - a full KV pool: ${pre:-?} preemptions, outputs $(cmp "$WORK/pool.ample" "$WORK/pool.small" 2>&1): $(tail -1 "$WORK/err.small")"
fi

# prefix caching: one request at a time (--max-num-seqs 1), each sharing a prefix with an
# earlier one (len300's first 200, 100 and all 300 tokens, then 37); warm (the default, whole
# prompts, chunks of 37 tokens, n-gram drafts, MTP drafts: the module's state from the
# snapshots too) = cold (--no-enable-prefix-caching) under the same --max-num-batched-tokens:
# the same tokens, the same top-3 logprobs (within 1e-4), and the warm runs hit the cache.
# Chunks of 37 against whole prompts, both cold, likewise: every V4 GEMM sums in one order
# whatever its token count (wmat.fixed_order), so no float32 sum in another order moves a KV
# value across an e4m3 rounding midpoint of the cache's fp8 simulation (it did, by ~2e-3).
python3 - "$FIX/golden/prompts.json" >"$WORK/pc.jsonl" <<'PY'
import json, sys
P = [p for p in json.load(open(sys.argv[1]))['prompts'] if len(p['tokens']) == 300][0]['tokens']
for r in (P, P[:200] + [7, 8, 9, 10, 11], P[:100] + [3] * 20, P + [5, 6], P[:37], P[:200] + [12]):
    print(json.dumps({"prompt_token_ids": r, "max_tokens": 24, "temperature": 0, "ignore_eos": True, "logprobs": 3,
                      "logit_bias": {"5": 7, "9": 7, "77": 7}}))
PY
for run in cold cold37 cold-mtp warm warm37 warm-ngram warm-mtp; do
	extra=(--no-enable-prefix-caching)
	[ $run = cold37 ] && extra+=(--max-num-batched-tokens 37)
	[ $run = warm ] && extra=()
	[ $run = warm37 ] && extra=(--max-num-batched-tokens 37)
	[ $run = warm-ngram ] && extra=(--speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1}')
	mtp=(--speculative-config '{"method": "deepseek_mtp", "num_speculative_tokens": 2}')
	[ $run = warm-mtp ] && extra=("${mtp[@]}")
	[ $run = cold-mtp ] && extra+=("${mtp[@]}")
	timeout 120 "$BIN" generate "$FIX" --dtype float32 --prompts-file "$WORK/pc.jsonl" --max-num-seqs 1 \
		--max-model-len 512 "${extra[@]}" --output "$WORK/pc.$run" 2>"$WORK/err.$run"
done
for run in warm warm37 warm-ngram warm-mtp; do
	hit=$(sed -n 's/.*prefix cache \([0-9]*\)\/.*/\1/p' "$WORK/err.$run")
	cold=cold
	[ $run = warm37 ] && cold=cold37
	python3 - "$WORK/pc.$cold" "$WORK/pc.$run" "$run" "${hit:-0}" <<'PY'
import json, sys
try:
    a = [json.loads(l) for l in open(sys.argv[1])]
    b = [json.loads(l) for l in open(sys.argv[2])]
except (OSError, ValueError) as x:
    print('not ok - prefix caching (%s): %s' % (sys.argv[3], x)); sys.exit()
bad, worst = [], 0.0
for i, (x, y) in enumerate(zip(a, b)):
    if x['token_ids'] != y['token_ids']:
        bad.append(i)
    for p, q in zip(x['logprobs'], y['logprobs']):
        for t, v in p.items():
            worst = max(worst, abs(v['logprob'] - q[t]['logprob']) if t in q else 1e9)
hit = int(sys.argv[4])
ok = len(a) == 6 and len(b) == 6 and not bad and worst <= 1e-4 and hit > 0
print('%s - prefix caching (%s): %d cached prompt tokens, tokens as a cold run%s, top-3 logprobs max |diff| %.3g'
      % ('ok' if ok else 'not ok', sys.argv[3], hit, '' if not bad else ' except prompts %s' % bad, worst))
PY
done
python3 - "$WORK/pc.cold" "$WORK/pc.cold37" <<'PY'
import json, sys
try:
    a = [json.loads(l) for l in open(sys.argv[1])]
    b = [json.loads(l) for l in open(sys.argv[2])]
except (OSError, ValueError) as x:
    print('not ok - chunks of 37 without prefix caching: %s' % x); sys.exit()
same = len(a) == 6 and len(b) == 6 and all(x['token_ids'] == y['token_ids'] for x, y in zip(a, b))
worst = max([abs(v['logprob'] - q[t]['logprob']) if t in q else 1e9 for x, y in zip(a, b)
             for p, q in zip(x['logprobs'], y['logprobs']) for t, v in p.items()] or [1e9])
print('%s - chunks of 37 without prefix caching: the tokens of whole prompts%s, top-3 logprobs max |diff| %.3g'
      % ('ok' if same and worst <= 1e-4 else 'not ok', '' if same else ' differ', worst))
PY

# speculative decoding: the golden prompts, 48 greedy tokens each, steered by a logit_bias (the
# random-weight MTP module's drafts are then kept now and then, and rejected the rest: both
# paths, and the rollback of the attention state, run); every run's tokens = no drafts'
python3 - "$FIX/golden/prompts.json" >"$WORK/sp.jsonl" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))['prompts']:
    print(json.dumps({"prompt_token_ids": p['tokens'], "max_tokens": 48, "temperature": 0, "ignore_eos": True,
                      "logit_bias": {"5": 7, "9": 7, "77": 7}}))
PY
spec() { # name, extra flags...
	local name=$1
	shift
	timeout 300 "$BIN" generate "$FIX" --dtype float32 --prompts-file "$WORK/sp.jsonl" --max-num-seqs 4 \
		--max-model-len 512 "$@" --output "$WORK/sp.$name" 2>"$WORK/err.sp.$name" ||
		echo "not ok - speculative decoding $name: $(tail -1 "$WORK/err.sp.$name")"
}
spec none
MTP1='{"method": "deepseek_mtp", "num_speculative_tokens": 1}'
MTP3='{"method": "deepseek_mtp", "num_speculative_tokens": 3}'
spec mtp1 --speculative-config "$MTP1"
spec mtp3 --speculative-config "$MTP3"
spec mtp3-chunk7 --speculative-config "$MTP3" --max-num-batched-tokens 7
spec ngram3 --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1}'
# and in a pool too small for all at once (4 rotations of len64, 100 tokens each, as above):
# preempted and recomputed with drafts
python3 - "$FIX/golden/prompts.json" >"$WORK/sp2.jsonl" <<'PY'
import json, sys
t = [p for p in json.load(open(sys.argv[1]))['prompts'] if len(p['tokens']) == 64][0]['tokens']
for i in range(4):
    print(json.dumps({"prompt_token_ids": t[i:] + t[:i], "max_tokens": 100, "temperature": 0, "ignore_eos": True,
                      "logit_bias": {"5": 7, "9": 7, "77": 7}}))
PY
cp "$WORK/sp.jsonl" "$WORK/sp1.jsonl"
cp "$WORK/sp2.jsonl" "$WORK/sp.jsonl"
spec pool-none --max-model-len 400 --block-size 16
spec pool-mtp1 --speculative-config "$MTP1" --kv-cache-memory $small --block-size 16 --max-model-len 400
cp "$WORK/sp.pool-none" "$WORK/sp.none2"
cp "$WORK/sp1.jsonl" "$WORK/sp.jsonl"
for name in mtp1 mtp3 mtp3-chunk7 pool-mtp1 ngram3; do
	ref=none
	[ $name = pool-mtp1 ] && ref=none2
	python3 - "$WORK/sp.$ref" "$WORK/sp.$name" "$WORK/err.sp.$name" "$name" <<'PY'
import json, re, sys
try:
    a = [json.loads(l)['token_ids'] for l in open(sys.argv[1])]
    b = [json.loads(l)['token_ids'] for l in open(sys.argv[2])]
except (OSError, ValueError) as x:
    print('not ok - speculative decoding %s: %s' % (sys.argv[4], x)); sys.exit()
m = re.search(r'(\d+) of (\d+) draft tokens accepted', open(sys.argv[3]).read())
kept, drafts = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
pre = re.search(r'(\d+) preemptions', open(sys.argv[3]).read())
mtp = 'mtp' in sys.argv[4]
pool = sys.argv[4].startswith('pool')
ok = len(a) >= 4 and a == b and drafts > kept and (kept > 0 or not mtp) and (not pool or (pre and int(pre.group(1)) > 0))
print('%s - speculative decoding %s: the tokens of no drafts (%d prompts), %d of %d drafts kept%s'
      % ('ok' if ok else 'not ok', sys.argv[4], len(b), kept, drafts, ', %s preemptions' % pre.group(1) if pre else ''))
PY
done
# 4 at a time, 40 tokens each, MTP drafts: a request may also hit blocks that another computes
# in the same step (how many hit depends on when the engine takes each request); the tokens of a
# cold run without drafts
python3 -c "import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l); o['max_tokens'] = 40; del o['logprobs']; print(json.dumps(o))" "$WORK/pc.jsonl" >"$WORK/pc4.jsonl"
for run in cold warm; do
	extra=(--no-enable-prefix-caching)
	[ $run = warm ] && extra=(--speculative-config '{"method": "deepseek_mtp", "num_speculative_tokens": 2}')
	timeout 120 "$BIN" generate "$FIX" --dtype float32 --prompts-file "$WORK/pc4.jsonl" --max-num-seqs 4 \
		--max-model-len 512 "${extra[@]}" --output "$WORK/pc4.$run" 2>"$WORK/err.pc4.$run"
done
hit=$(sed -n 's/.*prefix cache \([0-9]*\)\/.*/\1/p' "$WORK/err.pc4.warm")
if [ -n "$hit" ] && [ -s "$WORK/pc4.cold" ] &&
	[ "$(python3 -c "import json,sys;print([json.loads(l)['token_ids'] for l in open(sys.argv[1])])" "$WORK/pc4.cold")" = \
		"$(python3 -c "import json,sys;print([json.loads(l)['token_ids'] for l in open(sys.argv[1])])" "$WORK/pc4.warm" 2>&1)" ]; then
	echo "ok - prefix caching, 4 requests at a time with MTP drafts: $hit cached prompt tokens, tokens as a cold run"
else
	echo "not ok - prefix caching, 4 requests at a time with MTP drafts: ${hit:-?} cached: $(grep -v ^INFO "$WORK/err.pc4.warm" | tail -1)"
fi

# with MTP drafts, prefix hits change nothing of the drafting: the same drafts kept as cold
# (logit_bias steers the random-weight module's drafts into being kept now and then; that the
# module's state comes back exactly from a snapshot is test_model_v4's prefix_resume_mtp)
dk() { sed -n 's/.*: \([0-9]* of [0-9]*\) draft tokens accepted.*/\1/p' "$1"; }
kept=$(dk "$WORK/err.cold-mtp")
if [ "${kept%% *}" -gt 0 ] 2>/dev/null && [ "$kept" = "$(dk "$WORK/err.warm-mtp")" ]; then
	echo "ok - prefix caching with MTP drafts: $(dk "$WORK/err.warm-mtp") drafts kept, as cold"
else
	echo "not ok - prefix caching with MTP drafts: $(dk "$WORK/err.warm-mtp") drafts kept, cold $(dk "$WORK/err.cold-mtp")"
fi

# --dtype auto: float32, said in the log
if "$BIN" generate "$FIX" --prompt-ids 0,5,9 --max-tokens 2 --max-num-seqs 2 --max-model-len 64 >/dev/null \
	2>"$WORK/err" && grep -q -- '--dtype auto: float32' "$WORK/err"; then
	echo "ok - --dtype auto runs float32"
else
	echo "not ok - --dtype auto: $(cat "$WORK/err")"
fi

. tests/e2e/refused.inc

refused "generate --dtype bfloat16" "float32" "$BIN" generate "$FIX" --prompt-ids 0,5,9 --dtype bfloat16
# the per-sequence state is checked against the memory before it is allocated
refused "generate, state larger than the memory" "lower --max-num-seqs" \
	env MLASERVE_MEM_AVAILABLE=1M "$BIN" generate "$FIX" --prompt-ids 0,5,9
# before any rank starts (no mpirun): one line from rank 0
refused "generate -tp 4 -dcp 3" "decode-context-parallel-size 3 must divide tensor-parallel-size 4" \
	"$BIN" generate "$FIX" --prompt-ids 0,5,9 -tp 4 -dcp 3
