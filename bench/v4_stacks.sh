#!/usr/bin/env bash
# DeepSeek-V4-Flash layer stack decode, three ways, in alternating rounds on one machine
# (docs/PERFORMANCE.md, "DeepSeek-V4"): `mlaserve bench latency --load-format dummy` of
#   v4-flash-2L-e32       V4-Flash's widths, two layers (CSA + HCA), fp8 + MXFP4 experts
#   v4-flash-2L-e32-bf16  the same stack in bf16
#   v32-flashwidth-2L-e32 DeepSeek-V3.2 of the same widths and MoE (fp8), bf16 and float32
#                         activations (V4 runs float32 only)
# at batch 1 and 8, then prints decode tokens/s, each against the fp4+fp8 stack, and the weight
# bytes a step reads against the read bandwidth the same run measured (bench latency's probe).
#   bash bench/v4_stacks.sh            (ROUNDS=2 INPUT=64 OUTPUT=8 THREADS=2; BUILD=build)
# V4_FULL=1 adds bench/configs/v4-flash-2L (all 256 experts, ~9.5 GB).
set -eu -o pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-2}
INPUT=${INPUT:-64}
OUTPUT=${OUTPUT:-8}
THREADS=${THREADS:-2}
OUT=${OUT:-$BUILD/bench/v4_stacks}
mkdir -p "$OUT"
runs=("v4-flash-2L-e32:auto" "v4-flash-2L-e32-bf16:auto" "v32-flashwidth-2L-e32:auto" "v32-flashwidth-2L-e32:float32")
[ "${V4_FULL:-0}" = 1 ] && runs+=("v4-flash-2L:auto")
for r in $(seq 1 "$ROUNDS"); do
	for run in "${runs[@]}"; do
		cfg=${run%%:*} dt=${run##*:}
		echo "round $r: $cfg --dtype $dt" >&2
		nice -n 10 "$BUILD/mlaserve" bench latency "bench/configs/$cfg" --load-format dummy --dtype "$dt" \
			--batch-size 1,8 --input-len "$INPUT" --output-len "$OUTPUT" --threads "$THREADS" \
			--output-json "$OUT/$cfg-$dt-$r.json" >"$OUT/$cfg-$dt-$r.txt" 2>&1 ||
			{ tail -1 "$OUT/$cfg-$dt-$r.txt" >&2; exit 1; }
	done
done
python3 - "$OUT" "$ROUNDS" "${runs[@]}" <<'PY'
import json, sys, statistics as st
out, rounds, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(run, r):
    cfg, dt = run.split(':')
    return json.load(open('%s/%s-%s-%d.json' % (out, cfg, dt, r)))
base = {}
print('%-34s %5s %9s %7s %9s %9s %7s %8s %7s' % ('stack (activations)', 'batch', 'tokens/s', 'ratio', 'CPU ms',
                                                 'tok/CPU-s', 'ratio', 'GB/step', 'bw use'))
for run in runs:
    js = [load(run, r) for r in range(1, rounds + 1)]
    for b in (1, 8):
        rs = [next(x for x in j['runs'] if x['batch_size'] == b) for j in js]
        tps = st.median(x['decode_tokens_per_s'] for x in rs)
        cpu = st.median(x['decode_step_cpu_ms'] for x in rs)
        gb = st.median(x['weight_bytes_per_step'] for x in rs) / 1e9
        bw = max(j['read_bandwidth_gb_s'] for j in js)
        tpc = b / (cpu / 1e3)
        if run == runs[0]:
            base[b] = (tps, tpc)
        act = 'float32' if run.startswith('v4-') or 'float32' in run else 'bf16'
        print('%-34s %5d %9.2f %6.2fx %9.1f %9.2f %6.2fx %8.3f %6.0f%%' % (
            '%s (%s)' % (run.split(':')[0], act), b, tps, tps / base[b][0], cpu, tpc, tpc / base[b][1], gb,
            100 * gb * tps / b / bw))
print('medians of %d rounds; ratio: against the first stack; CPU ms: CPU time a step, all threads (steadier '
      'than wall time where other processes take the cores); bw use: the bytes a step reads at the median '
      'step time / the best read bandwidth the runs measured' % rounds)
PY
