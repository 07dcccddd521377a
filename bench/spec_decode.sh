#!/usr/bin/env bash
# Speculative decoding (n-gram prompt lookup, or with SPEC_METHOD=mtp DeepSeek's MTP module,
# on a config with num_nextn_predict_layers 1) against plain decoding: `mlaserve generate` on a
# bench config with --load-format dummy, the same prompts with and without
# --speculative-config, alternating, REPS times each. Prints generated tokens/s, steps and the
# share of drafts kept, and the ratio spec / plain of each pair (a ratio, since the machine is
# shared and noisy). Two regimes bracket what a real model sees:
#   free:   the random model's own greedy text, which barely repeats: nearly every draft is
#           rejected, so this is the cost of verifying drafts for nothing;
#   repeat: two tokens favoured by logit_bias, so the text repeats and most drafts are kept
#           (MTP: its random-weight drafts see the same bias, so they pick one of the two);
#   one:    (REGIMES="free repeat one") a single favoured token: every draft is kept, the
#           upper bound.
# usage: bash bench/spec_decode.sh [CONFIG_DIR] [BATCHES] [REPS] [K] (K: drafts per step, 3 for
# ngram and 1 for mtp unless given; mtp past 1 chains the module)
set -eu -o pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD:-build}/mlaserve
CFG=${1:-bench/configs/bench-v2lite-4L}
BATCHES=${2:-1 4}
REPS=${3:-2}
K=${4:-3}
SPEC="{\"method\": \"ngram\", \"num_speculative_tokens\": $K, \"prompt_lookup_min\": 1, \"prompt_lookup_max\": 3}"
[ "${SPEC_METHOD:-ngram}" = mtp ] && SPEC="{\"method\": \"deepseek_mtp\", \"num_speculative_tokens\": ${4:-1}}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# prompts REGIME BATCH: 64-token id prompts, 128 new tokens each
prompts() {
	python3 - "$1" "$2" "$CFG/config.json" <<'PY'
import json, random, sys
regime, batch = sys.argv[1], int(sys.argv[2])
vocab = json.load(open(sys.argv[3]))["vocab_size"]
top = min(vocab, 30000)
for i in range(batch):
    r = random.Random(i)
    line = {"prompt_token_ids": [0] + [r.randrange(2, top) for _ in range(63)],
            "max_tokens": 128, "ignore_eos": True, "temperature": 0}
    if regime == "one":
        line["logit_bias"] = {str((1000 + 11 * i) % (top - 2) + 2): 30}
    if regime == "repeat":
        line["logit_bias"] = {str((1000 + 11 * i) % (top - 2) + 2): 30, str((2000 + 11 * i) % (top - 2) + 2): 30}
    print(json.dumps(line))
PY
}

# run FILE [flags...]: "tok/s steps kept%"
run() {
	local f=$1
	shift
	"$BIN" generate "$CFG" --load-format dummy --prompts-file "$f" --output /dev/null "$@" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; exit 1; }
	python3 - "$tmp/err" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"([0-9.]+) tok/s generated.*?; (\d+) steps", t)
a = re.search(r"\((\d+\.\d)%\)", t)
print(m.group(1), m.group(2), a.group(1) if a else "-")
PY
}

printf '%-8s %-6s %-5s %12s %12s %7s %7s %6s\n' regime batch rep "plain tok/s" "spec tok/s" ratio steps kept%
for regime in ${REGIMES:-free repeat}; do
	for b in $BATCHES; do
		prompts $regime $b >"$tmp/p.jsonl"
		for rep in $(seq "$REPS"); do
			read -r pt ps _ < <(run "$tmp/p.jsonl")
			read -r st ss sk < <(run "$tmp/p.jsonl" --speculative-config "$SPEC")
			printf '%-8s %-6s %-5s %12s %12s %7s %7s %6s\n' $regime $b $rep "$pt" "$st" \
				"$(python3 -c "print(f'{$st/$pt:.2f}x')")" "$ps->$ss" "$sk"
		done
	done
done
