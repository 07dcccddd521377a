#!/usr/bin/env bash
# mlaserve against a peer engine (ik_llama.cpp or llama.cpp), same model, same CPU, one run.
#
# Measures, in tokens/s, batch 1, THREADS threads:
#   prefill 512     a 512-token prompt
#   decode @512     GEN decode steps after a 512-token prompt
#   decode @4096    GEN decode steps after a 4096-token prompt
# for bf16 weights (ours: the checkpoint as is; the peer: a bf16 GGUF) and the 1-byte formats
# (ours: --quantization fp8 --quantize-lm-head, every matrix in one byte as Q8_0 has it; the peer:
# a Q8_0 GGUF; OUR_Q8_FLAGS="--quantization fp8" keeps our lm_head bf16), and our W8A8
# (--quantization int8 --quantize-lm-head: int8 weights and activations, as Q8_0 multiplies;
# OUR_INT8_FLAGS="" leaves it out) against the same Q8_0 runs. Ours is `mlaserve bench latency` (prefill of
# --input-len tokens after one untimed warm-up prefill, then --output-len decode steps, the first
# one left out of the mean); the peer's is `llama-bench -p 512 -r 2` (the better of two, its own
# warm-up being a 1-token prompt) and `-gp 512,GEN -gp 4096,GEN` (-gp times the GEN tokens after
# the prompt only). Ours and the peer alternate, the peer first in even rounds, REPS rounds; each cell
# shows the range over the rounds and each ratio is ours / peer on the best of the rounds (a
# co-tenant only slows a run).
#
# Peers are never part of this repository: /work/shared/peers/README.md (shared/peers/README.md
# where the project's shared folder is mounted) says how to fetch and build them outside it and
# how to convert OUR_MODEL (a HF checkpoint) to the GGUFs they read.
#
# Usage (environment):
#   PEER_BENCH=/path/llama-bench PEER_GGUF_BF16=model-bf16.gguf [PEER_GGUF_Q8=model-q8_0.gguf] \
#   OUR_MODEL=hf_dir [THREADS=2] [REPS=2] [GEN=64] [PEER_FLAGS="-fa 1 -mla 3 -fmoe 1"] \
#   [OUR_Q8_FLAGS="--quantization fp8 --quantize-lm-head"] \
#   [OUR_INT8_FLAGS="--quantization int8 --quantize-lm-head"] \
#   [MLASERVE=build/mlaserve] [OUT=dir for the raw logs and JSON] bash bench/vs_peers.sh
# PEER_FLAGS defaults to ik_llama.cpp's best flags for DeepSeek; llama.cpp (no MLA) takes "-fa 1".
# Without PEER_GGUF_Q8 the 1-byte columns show ours only. MLASERVE_CPU_LEVEL etc. pass through.
set -eu -o pipefail
cd "$(dirname "$0")/.."

die() {
	echo "vs_peers: $*" >&2
	exit 2
}

PEER_BENCH=${PEER_BENCH:-}
PEER_GGUF_BF16=${PEER_GGUF_BF16:-}
PEER_GGUF_Q8=${PEER_GGUF_Q8:-}
OUR_MODEL=${OUR_MODEL:-}
THREADS=${THREADS:-2}
REPS=${REPS:-2}
GEN=${GEN:-64}
PEER_FLAGS=${PEER_FLAGS:--fa 1 -mla 3 -fmoe 1}
MLASERVE=${MLASERVE:-build/mlaserve}
OUR_Q8_FLAGS=${OUR_Q8_FLAGS:---quantization fp8 --quantize-lm-head}
OUR_INT8_FLAGS=${OUR_INT8_FLAGS-"--quantization int8 --quantize-lm-head"}

[ -n "$PEER_BENCH" ] || die "PEER_BENCH is not set: the peer's llama-bench binary (see shared/peers/README.md)"
[ -x "$PEER_BENCH" ] || die "PEER_BENCH=$PEER_BENCH: no such executable"
[ -n "$PEER_GGUF_BF16" ] || die "PEER_GGUF_BF16 is not set: the bf16 GGUF of OUR_MODEL for the peer"
[ -f "$PEER_GGUF_BF16" ] || die "PEER_GGUF_BF16=$PEER_GGUF_BF16: no such file"
[ -z "$PEER_GGUF_Q8" ] || [ -f "$PEER_GGUF_Q8" ] || die "PEER_GGUF_Q8=$PEER_GGUF_Q8: no such file"
[ -n "$OUR_MODEL" ] || die "OUR_MODEL is not set: the HF checkpoint directory the GGUFs were converted from"
[ -f "$OUR_MODEL/config.json" ] || die "OUR_MODEL=$OUR_MODEL: no config.json there"
[ -x "$MLASERVE" ] || die "MLASERVE=$MLASERVE: no such executable (make all first)"
case "$THREADS$REPS$GEN" in *[!0-9]*) die "THREADS, REPS and GEN must be positive integers" ;; esac
if [ "$THREADS" -eq 0 ] || [ "$REPS" -eq 0 ] || [ "$GEN" -le 2 ]; then die "THREADS, REPS > 0 and GEN > 2 please"; fi

OUT=${OUT:-$(mktemp -d /tmp/vs_peers.XXXXXX)}
mkdir -p "$OUT"
res="$OUT/results.tsv" # rep side format metric tokens/s
: >"$res"

# ours REP FORMAT (bf16, fp8 or int8): prefill 512 + decode @512, then decode @4096
ours() {
	local rep=$1 fmt=$2 q=() ctx j
	# shellcheck disable=SC2206 # the flags are lists
	case $fmt in fp8) q=($OUR_Q8_FLAGS) ;; int8) q=($OUR_INT8_FLAGS) ;; esac
	for ctx in 512 4096; do
		j="$OUT/ours-$fmt-$ctx-r$rep.json"
		echo "  ours $fmt, context $ctx" >&2
		# the 4096-token prompt is only context for the decode: no warm-up prefill before it
		"$MLASERVE" bench latency "$OUR_MODEL" --batch-size 1 --input-len "$ctx" --output-len "$GEN" \
			--num-iters-warmup $((ctx == 512)) --threads "$THREADS" "${q[@]}" --output-json "$j" \
			>"${j%.json}.log" 2>&1 ||
			die "mlaserve failed, see ${j%.json}.log"
		python3 - "$j" "$rep" "$fmt" "$ctx" >>"$res" <<'EOF'
import json, sys
j, rep, fmt, ctx = sys.argv[1:]
d = json.load(open(j))
if ctx == "512":
    print(rep, "ours", fmt, "pp512", d["prefill_tokens_per_s"], sep="\t")
print(rep, "ours", fmt, "tg@" + ctx, d["decode_tokens_per_s"], sep="\t")
EOF
	done
}

# peer REP FORMAT GGUF
peer() {
	local rep=$1 fmt=$2 gguf=$3 j="$OUT/peer-$2-r$1.json"
	echo "  peer $fmt" >&2
	# shellcheck disable=SC2086 # PEER_FLAGS is a list of flags
	# the prompt twice, the better kept: llama-bench's own warm-up is a 1-token prompt, ours
	# (bench latency --num-iters-warmup 1) the whole prompt, so each side gets one warm prefill
	"$PEER_BENCH" -m "$gguf" -t "$THREADS" -r 2 -o json -p 512 -n 0 \
		$PEER_FLAGS >"${j%.json}-pp.json" 2>"${j%.json}-pp.log" || die "llama-bench failed, see ${j%.json}-pp.log"
	# shellcheck disable=SC2086
	"$PEER_BENCH" -m "$gguf" -t "$THREADS" -r 1 -o json -p 0 -n 0 -gp "512,$GEN" -gp "4096,$GEN" \
		$PEER_FLAGS >"$j" 2>"${j%.json}.log" || die "llama-bench failed, see ${j%.json}.log"
	python3 - "${j%.json}-pp.json" "$j" "$rep" "$fmt" >>"$res" <<'EOF'
import json, sys
pp, j, rep, fmt = sys.argv[1:]
for t in json.load(open(pp)) + json.load(open(j)):
    m = "pp%d" % t["n_prompt"] if t["n_gen"] == 0 else "tg@%d" % t["n_prompt"]
    print(rep, "peer", fmt, m, max(t["samples_ts"]), sep="\t")
EOF
}

echo "vs_peers: $REPS rounds, $THREADS threads, logs in $OUT" >&2
# pair FORMAT GGUF OUR_FORMATS...: ours on each format and the peer on one, the peer first in
# even rounds
pair() {
	local fmt=$1 gguf=$2 f
	shift 2
	if [ $((rep % 2)) = 0 ] && [ -n "$gguf" ]; then
		peer "$rep" "$fmt" "$gguf"
		for f in "$@"; do ours "$rep" "$f"; done
	else
		for f in "$@"; do ours "$rep" "$f"; done
		[ -z "$gguf" ] || peer "$rep" "$fmt" "$gguf"
	fi
}
for rep in $(seq 1 "$REPS"); do
	echo "round $rep" >&2
	pair bf16 "$PEER_GGUF_BF16" bf16
	if [ -n "$OUR_INT8_FLAGS" ]; then pair q8 "$PEER_GGUF_Q8" fp8 int8; else pair q8 "$PEER_GGUF_Q8" fp8; fi
done

python3 - "$res" "$THREADS" "$REPS" "$GEN" "$PEER_BENCH" "$PEER_FLAGS" "$OUR_Q8_FLAGS" "$OUR_INT8_FLAGS" <<'EOF'
import sys
from collections import defaultdict
res, threads, reps, gen, peer, flags, q8, i8 = sys.argv[1:]
v = defaultdict(list)
for line in open(res):
    _, side, fmt, metric, ts = line.split("\t")
    v[side, fmt, metric].append(float(ts))
def cell(k):
    x = v.get(k)
    if not x:
        return "-"
    return "%.1f" % x[0] if len(x) == 1 else "%.1f-%.1f" % (min(x), max(x))
def ratio(a, b):
    return "%.2f" % (max(v[a]) / max(v[b])) if v.get(a) and v.get(b) else "-"
print("tokens/s, batch 1, %s threads, %s rounds (range), decode %s steps; ratio = ours/peer, best of rounds"
      % (threads, reps, gen))
cols = ["ours bf16", "peer bf16", "ratio", "ours fp8", "peer Q8_0", "ratio"] + (["ours int8", "ratio"] if i8 else [])
rows = [("prefill 512", "pp512"), ("decode @512", "tg@512"), ("decode @4096", "tg@4096")]
table = [["", *cols]]
for label, m in rows:
    table.append([label, cell(("ours", "bf16", m)), cell(("peer", "bf16", m)),
                  ratio(("ours", "bf16", m), ("peer", "bf16", m)), cell(("ours", "fp8", m)),
                  cell(("peer", "q8", m)), ratio(("ours", "fp8", m), ("peer", "q8", m))]
                 + ([cell(("ours", "int8", m)), ratio(("ours", "int8", m), ("peer", "q8", m))] if i8 else []))
w = [max(len(r[i]) for r in table) for i in range(len(cols) + 1)]
for r in table:
    print("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |")
    if r is table[0]:
        print("|" + "|".join("-" * (x + 2) for x in w) + "|")
print("peer: %s %s; ours fp8: %s%s" % (peer, flags, q8, "; ours int8: " + i8 if i8 else ""))
EOF
