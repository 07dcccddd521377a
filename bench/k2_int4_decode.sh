#!/usr/bin/env bash
# Kimi K2-Thinking's int4 routed experts in decode (issue 44 item 4; docs/PERFORMANCE.md, "Kimi
# K2 and GLM-5"): `mlaserve bench latency --load-format dummy` of one stack of K2-Thinking's
# widths (bench/configs/kimi-k2-thinking-2L-e16: a dense layer and a MoE layer of 16 experts,
# top-8) four ways, in alternating rounds:
#   int4        as published: compressed-tensors int4 experts (W4A16), the ignore list bf16
#   int4+int8   the same int4 experts (kept as the checkpoint's), -q int4: the rest int8
#   bf16        kimi-k2-thinking-2L-e16-bf16, the same stack without quantization_config
#   int8        that stack under -q int8 (experts and rest int8)
# at batch 1 and 8; prints decode tokens/s and CPU ms a step (the medians over rounds), each
# against bf16, and the weight bytes a step reads and per token (the lm_head's 2.35 GB bf16
# included: one MoE layer here, 60 in the published model).
#   bash bench/k2_int4_decode.sh    (ROUNDS=2 INPUT=64 OUTPUT=8 THREADS=2; BUILD=build)
set -eu -o pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-2}
INPUT=${INPUT:-64}
OUTPUT=${OUTPUT:-8}
THREADS=${THREADS:-2}
OUT=${OUT:-$BUILD/bench/k2_int4_decode}
mkdir -p "$OUT"
runs=("int4:kimi-k2-thinking-2L-e16:" "int4+int8:kimi-k2-thinking-2L-e16:int4"
	"bf16:kimi-k2-thinking-2L-e16-bf16:" "int8:kimi-k2-thinking-2L-e16-bf16:int8")
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)" >&2
for r in $(seq 1 "$ROUNDS"); do
	for run in "${runs[@]}"; do
		IFS=: read -r name cfg q <<<"$run"
		echo "round $r: $name" >&2
		nice -n 10 "$BUILD/mlaserve" bench latency "bench/configs/$cfg" --load-format dummy ${q:+-q "$q"} \
			--batch-size 1,8 --input-len "$INPUT" --output-len "$OUTPUT" --threads "$THREADS" \
			--output-json "$OUT/$name-$r.json" >"$OUT/$name-$r.txt" 2>&1 ||
			{ tail -1 "$OUT/$name-$r.txt" >&2; exit 1; }
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$OUT" "$ROUNDS" "${runs[@]}" <<'PY'
import json, re, statistics, sys
out, rounds, runs = sys.argv[1], int(sys.argv[2]), [r.split(':')[0] for r in sys.argv[3:]]
def med(xs):
    return statistics.median(xs)
res = {}
for n in runs:
    js = [json.load(open('%s/%s-%d.json' % (out, n, r))) for r in range(1, rounds + 1)]
    log = open('%s/%s-1.txt' % (out, n)).read()
    fmt = re.search(r'weights by format \(dummy\): (.*)', log)
    res[n] = {'fmt': fmt.group(1) if fmt else '?', 'runs': {}}
    for i, b in enumerate(x['batch_size'] for x in js[0]['runs']):
        rs = [j['runs'][i] for j in js]
        res[n]['runs'][b] = dict(tps=med([x['decode_tokens_per_s'] for x in rs]),
                                 cpu=med([x['decode_step_cpu_ms'] for x in rs]),
                                 step=med([x['decode_step_ms_p50'] for x in rs]),
                                 bytes=med([x['weight_bytes_per_step'] for x in rs]))
cpu = open('/proc/cpuinfo').read().split('model name')[1].split('\n')[0].split(':', 1)[1].strip()
print('%s, %d rounds; weights loaded:' % (cpu, rounds))
for n in runs:
    print('  %-10s %s' % (n, res[n]['fmt']))
print('%-10s %5s %10s %8s %12s %8s %10s %12s' % ('stack', 'batch', 'tokens/s', 'vs bf16', 'CPU ms/step', 'vs bf16',
                                                'GB/step', 'GB/token'))
for n in runs:
    for b, x in sorted(res[n]['runs'].items()):
        base = res['bf16']['runs'][b]
        print('%-10s %5d %10.2f %7.2fx %12.1f %7.2fx %10.3f %12.3f' % (
            n, b, x['tps'], x['tps'] / base['tps'], x['cpu'], base['cpu'] / x['cpu'], x['bytes'] / 1e9,
            x['bytes'] / 1e9 / b))
PY
