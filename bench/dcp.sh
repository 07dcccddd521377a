#!/usr/bin/env bash
# Decode context parallelism (DCP), D = 1, 2, 4 ranks (tp = dcp = D, self-launched by mpirun):
#  1. capacity: with a fixed --kv-cache-memory per rank, the KV tokens the group holds (the
#     engine's "kv cache:" line), then requests longer than the D = 1 capacity through
#     `mlaserve generate` (bench-attn-h16-1L, dummy weights): each must complete where it
#     fits and be refused where it does not;
#  2. decode attention per step at long context (bench/dcp_decode.c under mpirun -np D):
#     attention over each rank's shard (wall and CPU) and the three collectives, timed apart.
# Prints the tables; JSON lands in $BUILD/bench/dcp-*.json. BENCH_FULL=1: more repeats.
# Env: DCP_KV (per-rank KV budget, 2MiB), DCP_HEADS (128), DCP_CTX (4096,16384,65536),
# DCP_BATCH (1,4), DCP_REPS (3; 5 with BENCH_FULL=1). Needs build/mlaserve and mpirun.
set -eu -o pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$BUILD/mlaserve
OUT=$BUILD/bench
PKGS="jansson libpcre2-8 libmicrohttpd libcurl icu-uc"
full=${BENCH_FULL:-0}
KV=${DCP_KV:-2MiB}
HEADS=${DCP_HEADS:-128}
CTX=${DCP_CTX:-4096,16384,65536}
BATCH=${DCP_BATCH:-1,4}
REPS=${DCP_REPS:-$([ "$full" = 1 ] && echo 5 || echo 3)}
MODEL=bench/configs/bench-attn-h16-1L
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none"
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v mpirun >/dev/null || { echo "dcp.sh: mpirun not found (scripts/install-deps.sh)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "dcp.sh: $BIN not built (make -j2)" >&2; exit 1; }

echo "== DCP capacity ($MODEL, dummy weights, --kv-cache-memory $KV per rank, bf16 KV)"
echo "   ($(nproc) CPUs; D ranks share them; load average $(cut -d' ' -f1-3 /proc/loadavg))"
python3 - "$tmp" <<'EOF'
import json, sys
for n in (3000, 6000):
    with open("%s/p%d.jsonl" % (sys.argv[1], n), "w") as f:
        f.write(json.dumps({"prompt_token_ids": [(i * 7919) % 1000 + 1 for i in range(n)]}) + "\n")
EOF
# gen D MAXLEN PROMPTFILE LOG: one greedy request of 8 new tokens; status of mlaserve generate
gen() {
	local d=$1 len=$2 pf=$3 log=$4
	timeout 300 "$BIN" generate "$MODEL" --load-format dummy --kv-cache-memory "$KV" --max-num-seqs 4 \
		--max-num-batched-tokens 2048 --max-model-len "$len" --max-tokens 8 --ignore-eos \
		--prompts-file "$pf" --output "$tmp/gen.jsonl" -tp "$d" -dcp "$d" >"$log" 2>&1
}
# result D MAXLEN PROMPTFILE: "ok (N tokens, S s)" or "refused: <the error line>"
result() {
	local log=$tmp/log.txt t0 t1
	rm -f "$tmp/gen.jsonl"
	t0=$(date +%s.%N)
	if gen "$1" "$2" "$3" "$log" &&
		n=$(python3 -c 'import json,sys;print(len(json.loads(open(sys.argv[1]).readline())["token_ids"]))' "$tmp/gen.jsonl" 2>/dev/null); then
		t1=$(date +%s.%N)
		printf 'ok (%s new tokens, %.1f s)' "$n" "$(echo "$t1 - $t0" | bc)"
	else
		printf 'refused: %s' "$(grep -m1 -E 'mlaserve generate:|ERROR' "$log" |
			sed 's/^.*generate: //; s/kv cache of [0-9]* bytes //; s/; raise.*//; s/^prompt 0: //' | cut -c1-70)"
	fi
}
printf "%2s  %12s  %14s  %12s  %5s  %-58s  %-58s\n" D "KV per rank" "blocks x tok" "capacity" "xD" \
	"3000 prompt + 8 (max-model-len 3008)" "6000 prompt + 8 (max-model-len 6008)"
cap1=""
caps_json="["
for d in 1 2 4; do
	echo '{"prompt_token_ids": [1, 2, 3]}' >"$tmp/short.jsonl"
	gen "$d" 64 "$tmp/short.jsonl" "$tmp/cap.txt" || { cat "$tmp/cap.txt"; exit 1; }
	line=$(grep -m1 'kv cache:' "$tmp/cap.txt")
	nb=$(echo "$line" | sed -n 's/.*kv cache: \([0-9]*\) blocks x \([0-9]*\) tokens = \([0-9]*\) tokens.*/\1/p')
	vbs=$(echo "$line" | sed -n 's/.*kv cache: \([0-9]*\) blocks x \([0-9]*\) tokens = \([0-9]*\) tokens.*/\2/p')
	cap=$(echo "$line" | sed -n 's/.*kv cache: \([0-9]*\) blocks x \([0-9]*\) tokens = \([0-9]*\) tokens.*/\3/p')
	mib=$(echo "$line" | sed -n 's/.*[ (]\([0-9.]*\) MiB.*/\1/p')
	[ -n "$cap1" ] || cap1=$cap
	r3=$(result "$d" 3008 "$tmp/p3000.jsonl")
	r6=$(result "$d" 6008 "$tmp/p6000.jsonl")
	printf "%2s  %8s MiB  %6s x %5s  %12s  %5s  %-58s  %-58s\n" "$d" "$mib" "$nb" "$vbs" "$cap" \
		"$(echo "scale=2; $cap / $cap1" | bc)" "$r3" "$r6"
	caps_json="$caps_json$([ "$d" = 1 ] || echo ,){\"D\": $d, \"kv_mib_per_rank\": $mib, \"blocks\": $nb, \"tokens_per_block\": $vbs, \"capacity_tokens\": $cap, \"req3000\": \"$r3\", \"req6000\": \"$r6\"}"
done
echo "$caps_json]" >"$OUT/dcp-capacity.json"
# the same request against D = 1 configured at its capacity: refused per request
r=$(result 1 "$cap1" "$tmp/p3000.jsonl")
echo "D=1 with --max-model-len $cap1 (its capacity), 3000-token prompt: $r"

echo "== DCP decode attention per step (one layer, $HEADS heads, FLASHMLA, bf16 KV; ctx $CTX, batch $BATCH)"
mkdir -p "$BUILD/bench"
# shellcheck disable=SC2046,SC2086 # pkg-config output is a word list
cc -O2 -march=x86-64-v2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -pthread \
	-Isrc $(pkg-config --cflags $PKGS) -o "$BUILD/bench/dcp_decode" bench/dcp_decode.c "$BUILD/libmlaserve.a" \
	$(pkg-config --libs $PKGS) $(pkg-config --libs ompi-c 2>/dev/null) -lm -pthread
args="--heads $HEADS --ctx $CTX --batch $BATCH --reps $REPS"
# shellcheck disable=SC2086
"$BUILD/bench/dcp_decode" $args --json "$OUT/dcp-decode-1.json"
for d in 2 4; do
	# shellcheck disable=SC2086
	$MPIRUN -np $d "$BUILD/bench/dcp_decode" $args --json "$OUT/dcp-decode-$d.json" | tail -n +2
done
echo "== DCP decode: ratios to D = 1 (attention CPU per rank = work per rank; wall on $(nproc) CPUs)"
python3 - "$OUT" <<'EOF'
import json, sys
d = {D: {(r["ctx"], r["batch"]): r for r in json.load(open("%s/dcp-decode-%d.json" % (sys.argv[1], D)))}
     for D in (1, 2, 4)}
print("%6s %3s | %-23s | %-15s | %-13s | %-25s | %s" % ("ctx", "B", "attn CPU/rank, D=1 2 4", "CPU ratio 1:2 1:4",
      "wall 1:2 1:4", "comm D=2 D=4 (med; min)", "projected 1:2 1:4"))
comm = lambda x, s: sum(x[k][s] for k in ("q_allgather", "lse_allgather", "reduce_scatter"))
for key in sorted(d[1]):
    r = [d[D][key] for D in (1, 2, 4)]
    cpu = [x["attn_cpu"]["median_ms"] for x in r]
    wall = [x["attn_wall"]["median_ms"] for x in r]
    cm = [0.0] + [comm(x, "median_ms") for x in r[1:]]
    print("%6d %3d | %7.1f %7.1f %7.1f | x%5.2f x%5.2f | x%4.2f x%4.2f | %5.2f %5.2f; %5.2f %5.2f | x%5.2f x%5.2f" % (
        key[0], key[1], cpu[0], cpu[1], cpu[2], cpu[0] / cpu[1], cpu[0] / cpu[2], wall[0] / wall[1],
        wall[0] / wall[2], cm[1], cm[2], comm(r[1], "min_ms"), comm(r[2], "min_ms"),
        cpu[0] / (cpu[1] + cm[1]), cpu[0] / (cpu[2] + cm[2])))
print("(comm = q all-gather + lse all-gather + reduce-scatter, ms; projected = CPU(D=1) / (CPU per rank + comm):")
print(" the step time ratio with one free core per rank; wall ratios here are bound by the CPUs this box gives)")
EOF
