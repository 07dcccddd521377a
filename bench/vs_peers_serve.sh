#!/usr/bin/env bash
# Serving: mlaserve against a peer's llama-server (ik_llama.cpp or llama.cpp), same weights, same
# client (`mlaserve bench serve`), same CPU, one run.
#
# For each concurrency C of CONC, each server in turn is started on loopback with THREADS
# threads and room for C requests (the peer: -np C slots, since llama-server's decode cost grows
# with the slots in use), the client sends NUM_PROMPTS streamed /v1/completions requests of
# random prompts (IN_LEN tokens from OUR_MODEL's tokenizer, sent as text) with exactly OUT_LEN
# output tokens (ignore_eos), at most C in flight, and the server is stopped. The two alternate,
# the peer first in even rounds, REPS rounds. Printed per concurrency: output tokens/s, median TTFT
# and median TPOT, the range over the rounds; the ratio is ours / peer on the best round
# (throughput: higher, latencies: lower is better).
#
# Peers are never part of this repository: shared/peers/README.md says how to fetch and build
# them outside it and how to convert OUR_MODEL (a HF checkpoint) to the GGUF they read.
#
# Usage (environment):
#   PEER_SERVER=/path/llama-server PEER_GGUF=model.gguf OUR_MODEL=hf_dir \
#   [OUR_FLAGS=""] [PEER_FLAGS="-fa 1 -mla 3"] [THREADS=2] [REPS=1] [CONC="4 16"] \
#   [NUM_PROMPTS=32] [IN_LEN=512] [OUT_LEN=128] [MLASERVE=build/mlaserve] [OUT=dir] \
#   bash bench/vs_peers_serve.sh
# bf16: PEER_GGUF a bf16 GGUF and OUR_FLAGS empty; the 1-byte formats: PEER_GGUF a Q8_0 GGUF and
# OUR_FLAGS="--quantization fp8 --quantize-lm-head".
set -eu -o pipefail
cd "$(dirname "$0")/.."

die() {
	echo "vs_peers_serve: $*" >&2
	exit 2
}

PEER_SERVER=${PEER_SERVER:-}
PEER_GGUF=${PEER_GGUF:-}
OUR_MODEL=${OUR_MODEL:-}
OUR_FLAGS=${OUR_FLAGS:-}
PEER_FLAGS=${PEER_FLAGS:--fa 1 -mla 3}
THREADS=${THREADS:-2}
REPS=${REPS:-1}
CONC=${CONC:-4 16}
NUM_PROMPTS=${NUM_PROMPTS:-32}
IN_LEN=${IN_LEN:-512}
OUT_LEN=${OUT_LEN:-128}
MLASERVE=${MLASERVE:-build/mlaserve}

[ -n "$PEER_SERVER" ] || die "PEER_SERVER is not set: the peer's llama-server binary (see shared/peers/README.md)"
[ -x "$PEER_SERVER" ] || die "PEER_SERVER=$PEER_SERVER: no such executable"
[ -n "$PEER_GGUF" ] || die "PEER_GGUF is not set: the GGUF of OUR_MODEL for the peer"
[ -f "$PEER_GGUF" ] || die "PEER_GGUF=$PEER_GGUF: no such file"
[ -n "$OUR_MODEL" ] || die "OUR_MODEL is not set: the HF checkpoint directory the GGUF was converted from"
[ -f "$OUR_MODEL/config.json" ] || die "OUR_MODEL=$OUR_MODEL: no config.json there"
[ -x "$MLASERVE" ] || die "MLASERVE=$MLASERVE: no such executable (make all first)"
# the peer runs in OUT (it writes a llama.log where it starts): absolute paths for it
PEER_SERVER=$(realpath "$PEER_SERVER")
PEER_GGUF=$(realpath "$PEER_GGUF")
for v in "$THREADS" "$REPS" "$NUM_PROMPTS" "$IN_LEN" "$OUT_LEN" $CONC; do
	case "$v" in
	'' | *[!0-9]* | 0) die "THREADS, REPS, NUM_PROMPTS, IN_LEN, OUT_LEN and CONC must be positive integers" ;;
	esac
done

OUT=${OUT:-$(mktemp -d /tmp/vs_peers_serve.XXXXXX)}
mkdir -p "$OUT"
res="$OUT/results.tsv" # rep side conc metric value
: >"$res"

pid=
stop() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	fi
	pid=
}
trap stop EXIT

# serve_and_run SIDE REP C CMD...: starts the server CMD (listening on $port), waits for it, runs
# the client at concurrency C, stops it
serve_and_run() {
	local side=$1 rep=$2 c=$3 log="$OUT/$1-server-c$3-r$2.log" j="$OUT/$1-c$3-r$2.json"
	shift 3
	echo "  $side, concurrency $c" >&2
	"$@" >"$log" 2>&1 &
	pid=$!
	local up=0
	for _ in $(seq 1 1200); do
		if curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
			up=1
			break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	[ "$up" = 1 ] || die "$side server did not start, see $log"
	"$MLASERVE" bench serve --base-url "http://127.0.0.1:$port" --tokenizer "$OUR_MODEL" \
		--num-prompts "$NUM_PROMPTS" --random-input-len "$IN_LEN" --random-output-len "$OUT_LEN" \
		--ignore-eos --max-concurrency "$c" --result-file "$j" >"$OUT/$side-client-c$c-r$rep.log" 2>&1 ||
		die "the client failed against $side, see $OUT/$side-client-c$c-r$rep.log"
	stop
	python3 - "$j" "$rep" "$side" >>"$res" <<'EOF'
import json, sys
j, rep, side = sys.argv[1:]
d = json.load(open(j))
for r in d if isinstance(d, list) else [d]:
    if r["failed"]:
        sys.exit("%s: %d requests failed" % (side, r["failed"]))
    for m in ("output_throughput", "median_ttft_ms", "median_tpot_ms"):
        print(rep, side, r["max_concurrency"], m, r[m], sep="\t")
EOF
}

# ours REP C / peer REP C
ours() {
	port=$((20000 + RANDOM % 20000))
	# shellcheck disable=SC2086 # OUR_FLAGS is a list of flags
	serve_and_run ours "$1" "$2" "$MLASERVE" serve "$OUR_MODEL" --host 127.0.0.1 --port "$port" \
		--threads "$THREADS" --max-num-seqs "$2" --max-model-len $((IN_LEN * 2 + OUT_LEN + 64)) \
		--disable-log-requests $OUR_FLAGS
}

peer() {
	port=$((20000 + RANDOM % 20000))
	# a slot per request in flight, each with room for a prompt (re-tokenized by the peer) and
	# its output
	# shellcheck disable=SC2086 # PEER_FLAGS is a list of flags
	serve_and_run peer "$1" "$2" env -C "$OUT" "$PEER_SERVER" -m "$PEER_GGUF" --host 127.0.0.1 --port "$port" \
		-t "$THREADS" -np "$2" -c $(($2 * (IN_LEN * 2 + OUT_LEN + 64))) $PEER_FLAGS
}

echo "vs_peers_serve: $REPS rounds, concurrency $CONC, $NUM_PROMPTS prompts of $IN_LEN + $OUT_LEN tokens," \
	"$THREADS threads, logs in $OUT" >&2
for rep in $(seq 1 "$REPS"); do
	echo "round $rep" >&2
	for c in $CONC; do
		if [ $((rep % 2)) = 0 ]; then
			peer "$rep" "$c"
			ours "$rep" "$c"
		else
			ours "$rep" "$c"
			peer "$rep" "$c"
		fi
	done
done

python3 - "$res" "$THREADS" "$REPS" "$NUM_PROMPTS" "$IN_LEN" "$OUT_LEN" "$PEER_SERVER" "$PEER_FLAGS" \
	"$OUR_FLAGS" <<'EOF'
import sys
from collections import defaultdict
res, threads, reps, n, il, ol, peer, pflags, oflags = sys.argv[1:]
v = defaultdict(list)
for line in open(res):
    _, side, c, m, x = line.rstrip("\n").split("\t")
    v[side, int(c), m].append(float(x))
def cell(k):
    x = v.get(k)
    if not x:
        return "-"
    return "%.1f" % x[0] if len(x) == 1 else "%.1f-%.1f" % (min(x), max(x))
def ratio(c, m, higher):
    a, b = v.get(("ours", c, m)), v.get(("peer", c, m))
    if not a or not b:
        return "-"
    return "%.2f" % (max(a) / max(b) if higher else min(b) / min(a))
print("%s requests of %s + %s tokens per concurrency, %s threads, %s rounds (range); ratio = ours/peer on the best"
      " round (for TTFT and TPOT: peer/ours, > 1 is ours faster)" % (n, il, ol, threads, reps))
head = ["concurrency", "ours tok/s", "peer tok/s", "ratio", "ours TTFT p50 ms", "peer TTFT p50 ms", "ratio",
        "ours TPOT p50 ms", "peer TPOT p50 ms", "ratio"]
table = [head]
for c in sorted({k[1] for k in v}):
    row = [str(c)]
    for m, hi in (("output_throughput", True), ("median_ttft_ms", False), ("median_tpot_ms", False)):
        row += [cell(("ours", c, m)), cell(("peer", c, m)), ratio(c, m, hi)]
    table.append(row)
w = [max(len(r[i]) for r in table) for i in range(len(head))]
for r in table:
    print("| " + " | ".join(x.ljust(w[i]) for i, x in enumerate(r)) + " |")
    if r is table[0]:
        print("|" + "|".join("-" * (x + 2) for x in w) + "|")
print("peer: %s %s; ours: %s" % (peer, pflags, oflags or "(as the checkpoint)"))
EOF
