#!/usr/bin/env bash
# DeepSeek-V4 in `mlaserve bench latency`: tiny-v4's config with --load-format dummy and the
# checkpoint itself, decode at batch 1 and 3 (each sequence prefilled, then stepped), the JSON's
# figures (prefill, decode tokens/s, weight bytes per step: more at batch 3, whose tokens
# route to more experts); bench throughput through the engine; the published V4-Flash / V4-Pro configs refused in one line when the
# dummy weights exceed the memory available (MLASERVE_MEM_AVAILABLE fixes it). Prints ok/not ok.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
BIN=$ROOT/${BUILD:-build}/mlaserve
command -v python3 >/dev/null || { echo "not ok - python3 missing"; exit 1; }
[ -x "$BIN" ] || { echo "not ok - $BIN missing"; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. tests/e2e/refused.inc

for fmt in dummy auto; do
	what="bench latency tiny-v4 --load-format $fmt --batch-size 1,3"
	if ! timeout 300 "$BIN" bench latency tests/fixtures/tiny-v4 --load-format $fmt --batch-size 1,3 \
		--input-len 20 --output-len 4 --threads 2 --output-json "$WORK/$fmt.json" >"$WORK/$fmt.out" 2>&1; then
		echo "not ok - $what: $(tail -1 "$WORK/$fmt.out")"
		continue
	fi
	python3 - "$WORK/$fmt.json" "$what" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d['runs']
ok = (d['prefill_tokens_per_s'] > 0 and len(r) == 2 and [x['batch_size'] for x in r] == [1, 3]
      and all(x['decode_tokens_per_s'] > 0 and x['weight_bytes_per_step'] > 0 for x in r)
      and r[1]['weight_bytes_per_step'] >= r[0]['weight_bytes_per_step'])
print('%s - %s: prefill %.0f tokens/s, decode %s tokens/s, %s bytes a step' % (
    'ok' if ok else 'not ok', sys.argv[2], d['prefill_tokens_per_s'],
    [round(x['decode_tokens_per_s'], 1) for x in r], [int(x['weight_bytes_per_step']) for x in r]))
PY
done
if grep -q "DeepSeek-V4 weights by format (dummy): fp8 e4m3 + block scales .* GB, MXFP4 + e8m0 scales" "$WORK/dummy.out"; then
	echo "ok - the load report's bytes per format"
else
	echo "not ok - the load report's bytes per format: $(grep 'by format' "$WORK/dummy.out")"
fi
# bench throughput: the engine over V4's dummy weights, every request answered
what="bench throughput tiny-v4 --load-format dummy"
if timeout 300 "$BIN" bench throughput tests/fixtures/tiny-v4 --load-format dummy --num-prompts 6 --input-len 16 \
	--output-len 8 --output-json "$WORK/tp.json" >"$WORK/tp.out" 2>&1; then
	python3 - "$WORK/tp.json" "$what" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = d['num_requests'] == 6 and d['failed'] == 0 and d['total_output_tokens'] == 48 and d['output_tokens_per_second'] > 0
print('%s - %s: %.1f output tokens/s over %d requests' % ('ok' if ok else 'not ok', sys.argv[2],
      d['output_tokens_per_second'], d['num_requests']))
PY
else
	echo "not ok - $what: $(tail -1 "$WORK/tp.out")"
fi
for c in v4-flash v4-pro; do
	MLASERVE_MEM_AVAILABLE=16G refused "bench/configs/$c dummy on 16 GB" "DeepSeek-V4 dummy weights need .* GB available" \
		"$BIN" bench latency "bench/configs/$c" --load-format dummy --input-len 4 --output-len 2
done
