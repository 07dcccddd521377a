#!/usr/bin/env bash
# mlaserve against a peer engine (ik_llama.cpp or llama.cpp), same model, same CPU, one run.
#
# Measures, in tokens/s, batch 1, THREADS threads:
#   prefill 512     a 512-token prompt
#   decode @512     GEN decode steps after a 512-token prompt
#   decode @4096    GEN decode steps after a 4096-token prompt (LONG=N: after N tokens; LONG=0: not run)
# for bf16 weights (ours: the checkpoint as is; the peer: a bf16 GGUF) and the 1-byte formats
# (ours: --quantization fp8 --quantize-lm-head, every matrix in one byte as Q8_0 has it; the peer:
# a Q8_0 GGUF; OUR_Q8_FLAGS="--quantization fp8" keeps our lm_head bf16, OUR_Q8_FLAGS="" leaves
# the column out), and our W8A8
# (--quantization int8 --quantize-lm-head: int8 weights and activations, as Q8_0 multiplies;
# OUR_INT8_FLAGS="" leaves it out) against the same Q8_0 runs; and 4 bits (PEER_GGUF_Q4): ours
# --quantization int4 (OUR_INT4_FLAGS; several variants apart by ';', by default -q int4 and every
# matrix in int4 with --quantize-lm-head --quantize-embedding: the peer's bytes) against each of the peer's 4-bit
# GGUFs, each with and without run-time repacking to its _R4/_R8 rows (PEER_Q4_RTR="0 1"), the ratio
# taken against the peer's fastest setup per measure; with PEER_BATCHED (its llama-batched-bench) also
# decode at batch BATCHES (ours: --batch-size 1,B.. after a 512-token prompt, each sequence that
# context; the peer's: -npp 512 -ntg GEN -npl B.. -pps, one shared 512-token prompt, S_TG). Each
# side's model bytes are printed (ours: the load report's; the peer's: llama-bench's model_size), and
# our decode's fraction of its bound: weight bytes read per step x steps/s over the read bandwidth the
# same run measured (bench latency's probe). Ours is `mlaserve bench latency` (prefill of
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
#   PEER_BENCH=/path/llama-bench [PEER_GGUF_BF16=model-bf16.gguf] [PEER_GGUF_Q8=model-q8_0.gguf] \
#   [PEER_GGUF_Q4="IQ4_KS=model-iq4_ks.gguf Q4_0=model-q4_0.gguf ..."] [PEER_Q4_RTR="0 1"] \
#   [PEER_BATCHED=/path/llama-batched-bench] [BATCHES="4 16"] [PEER_BATCHED_FLAGS="-fa 1 -mla 3"] \
#   OUR_MODEL=hf_dir [THREADS=2] [REPS=2] [GEN=64] [PEER_FLAGS="-fa 1 -mla 3 -fmoe 1"] \
#   [OUR_Q8_FLAGS="--quantization fp8 --quantize-lm-head"] \
#   [OUR_INT8_FLAGS="--quantization int8 --quantize-lm-head"] [OUR_INT4_FLAGS="--quantization int4;..."] \
#   [MLASERVE=build/mlaserve] [OUT=dir for the raw logs and JSON] bash bench/vs_peers.sh
# PEER_FLAGS defaults to ik_llama.cpp's best flags for DeepSeek; llama.cpp (no MLA) takes "-fa 1".
# DeepSeek-V4 (ik_llama.cpp's deepseek4 graph; -mla does not apply to it): OUR_MODEL a bf16 V4
# checkpoint (`python3 bench/make_random_hf.py bench/configs/v4-flash-2L-e32-bf16 DIR`), the GGUFs
# converted from it (shared/peers/README.md), PEER_FLAGS="-fa 1 -fmoe 1", OUR_Q8_FLAGS="" (V4
# takes -q int8 / int4 only), LONG=0 where a 4096-token prefill per run costs too much.
# A row runs when its GGUF is given (bf16 and 1-byte: PEER_GGUF_BF16; without PEER_GGUF_Q8 the
# 1-byte columns show ours only; 4-bit: PEER_GGUF_Q4). MLASERVE_CPU_LEVEL etc. pass through.
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
OUR_Q8_FLAGS=${OUR_Q8_FLAGS-"--quantization fp8 --quantize-lm-head"}
LONG=${LONG:-4096}
OUR_INT8_FLAGS=${OUR_INT8_FLAGS-"--quantization int8 --quantize-lm-head"}
OUR_INT4_FLAGS=${OUR_INT4_FLAGS:---quantization int4;--quantization int4 --quantization-rest int4 --quantize-lm-head --quantize-embedding}
PEER_GGUF_Q4=${PEER_GGUF_Q4:-}
PEER_Q4_RTR=${PEER_Q4_RTR-0 1}
PEER_BATCHED=${PEER_BATCHED:-}
# llama-batched-bench takes the common flags: fused MoE is on by default there (no -fmoe), -rtr has no value
PEER_BATCHED_FLAGS=${PEER_BATCHED_FLAGS:--fa 1 -mla 3}
BATCHES=${BATCHES-4 16}

[ -n "$PEER_BENCH" ] || die "PEER_BENCH is not set: the peer's llama-bench binary (see shared/peers/README.md)"
[ -x "$PEER_BENCH" ] || die "PEER_BENCH=$PEER_BENCH: no such executable"
[ -n "$PEER_GGUF_BF16$PEER_GGUF_Q4" ] || die "neither PEER_GGUF_BF16 nor PEER_GGUF_Q4 is set: the peer's GGUFs of OUR_MODEL"
[ -z "$PEER_GGUF_BF16" ] || [ -f "$PEER_GGUF_BF16" ] || die "PEER_GGUF_BF16=$PEER_GGUF_BF16: no such file"
[ -z "$PEER_GGUF_Q8" ] || [ -n "$PEER_GGUF_BF16" ] || die "PEER_GGUF_Q8 needs PEER_GGUF_BF16 (the 1-byte row runs with the bf16 one)"
q4_setups=() # NAME=PATH or NAME+rtr=PATH: the peer's 4-bit setups
for g in $PEER_GGUF_Q4; do
	case $g in [A-Za-z0-9_]*=?*) ;; *) die "PEER_GGUF_Q4: '$g' is not NAME=PATH" ;; esac
	[ -f "${g#*=}" ] || die "PEER_GGUF_Q4: ${g#*=}: no such file"
	for r in $PEER_Q4_RTR; do
		case $r in
		0) q4_setups+=("$g") ;;
		1) q4_setups+=("${g%%=*}+rtr=${g#*=}") ;;
		*) die "PEER_Q4_RTR: '$r' is not 0 or 1" ;;
		esac
	done
done
[ -z "$PEER_GGUF_Q4" ] || [ ${#q4_setups[@]} -gt 0 ] || die "PEER_Q4_RTR is empty: 0, 1 or both"
[ -z "$PEER_BATCHED" ] || [ -x "$PEER_BATCHED" ] || die "PEER_BATCHED=$PEER_BATCHED: no such executable"
for b in $BATCHES; do case $b in *[!0-9]* | 0 | 1) die "BATCHES: '$b' is not a batch size above 1" ;; esac; done
IFS=';' read -r -a int4_variants <<<"$OUR_INT4_FLAGS"
[ -z "$PEER_GGUF_Q8" ] || [ -f "$PEER_GGUF_Q8" ] || die "PEER_GGUF_Q8=$PEER_GGUF_Q8: no such file"
[ -n "$OUR_MODEL" ] || die "OUR_MODEL is not set: the HF checkpoint directory the GGUFs were converted from"
[ -f "$OUR_MODEL/config.json" ] || die "OUR_MODEL=$OUR_MODEL: no config.json there"
[ -x "$MLASERVE" ] || die "MLASERVE=$MLASERVE: no such executable (make all first)"
case "$THREADS$REPS$GEN$LONG" in *[!0-9]*) die "THREADS, REPS, GEN and LONG must be integers" ;; esac
if [ "$THREADS" -eq 0 ] || [ "$REPS" -eq 0 ] || [ "$GEN" -le 2 ]; then die "THREADS, REPS > 0 and GEN > 2 please"; fi

ctxs=(512) long_gp=() # the decode contexts; the peer's -gp for LONG
if [ "$LONG" -gt 0 ]; then
	ctxs+=("$LONG")
	long_gp=(-gp "$LONG,$GEN")
fi

OUT=${OUT:-$(mktemp -d /tmp/vs_peers.XXXXXX)}
mkdir -p "$OUT"
res="$OUT/results.tsv" # rep side format metric tokens/s
: >"$res"

# ours REP FORMAT (bf16, fp8, int8 or int4.N, OUR_INT4_FLAGS' variant N): prefill 512 + decode
# @512 (int4 also at BATCHES), then decode @LONG
ours() {
	local rep=$1 fmt=$2 q=() ctx j bs b
	# shellcheck disable=SC2206 # the flags are lists
	case $fmt in fp8) q=($OUR_Q8_FLAGS) ;; int8) q=($OUR_INT8_FLAGS) ;; int4.*) q=(${int4_variants[${fmt#int4.}]}) ;; esac
	for ctx in "${ctxs[@]}"; do
		j="$OUT/ours-$fmt-$ctx-r$rep.json"
		bs=1
		case $fmt$ctx in int4.*512) for b in $BATCHES; do bs="$bs,$b"; done ;; esac
		echo "  ours $fmt, context $ctx, batch $bs" >&2
		# the LONG-token prompt is only context for the decode: no warm-up prefill before it
		"$MLASERVE" bench latency "$OUR_MODEL" --batch-size "$bs" --input-len "$ctx" --output-len "$GEN" \
			--num-iters-warmup $((ctx == 512)) --threads "$THREADS" "${q[@]}" --output-json "$j" \
			>"${j%.json}.log" 2>&1 ||
			die "mlaserve failed, see ${j%.json}.log"
		python3 - "$j" "$rep" "$fmt" "$ctx" >>"$res" <<'EOF'
import json, sys
j, rep, fmt, ctx = sys.argv[1:]
d = json.load(open(j))
if ctx == "512":
    print(rep, "ours", fmt, "pp512", d["prefill_tokens_per_s"], sep="\t")
    # the model's bytes, the step's and the bandwidth: the bound of the decode
    print(rep, "ours", fmt, "model_bytes", d.get("model_weight_bytes", 0), sep="\t")
    print(rep, "ours", fmt, "step_bytes", d["weight_bytes_per_step"], sep="\t")
    print(rep, "ours", fmt, "bw_gb_s", d["read_bandwidth_gb_s"], sep="\t")
    for r in d["runs"][1:]:
        print(rep, "ours", fmt, "tgB%d@512" % r["batch_size"], r["decode_tokens_per_s"], sep="\t")
print(rep, "ours", fmt, "tg@" + ctx, d["decode_tokens_per_s"], sep="\t")
EOF
	done
}

# peer REP FORMAT GGUF [FLAGS...] (FORMAT q4:NAME also runs the batched decode)
peer() {
	local rep=$1 fmt=$2 gguf=$3 j="$OUT/peer-${2//[:+]/_}-r$1.json" npl="" b
	shift 3
	echo "  peer $fmt $*" >&2
	# shellcheck disable=SC2086 # PEER_FLAGS is a list of flags
	# the prompt twice, the better kept: llama-bench's own warm-up is a 1-token prompt, ours
	# (bench latency --num-iters-warmup 1) the whole prompt, so each side gets one warm prefill
	"$PEER_BENCH" -m "$gguf" -t "$THREADS" -r 2 -o json -p 512 -n 0 \
		$PEER_FLAGS "$@" >"${j%.json}-pp.json" 2>"${j%.json}-pp.log" || die "llama-bench failed, see ${j%.json}-pp.log"
	# shellcheck disable=SC2086
	"$PEER_BENCH" -m "$gguf" -t "$THREADS" -r 1 -o json -p 0 -n 0 -gp "512,$GEN" ${long_gp[@]+"${long_gp[@]}"} \
		$PEER_FLAGS "$@" >"$j" 2>"${j%.json}.log" || die "llama-bench failed, see ${j%.json}.log"
	if [ -n "$PEER_BATCHED" ] && [ -n "$BATCHES" ] && [ "${fmt#q4:}" != "$fmt" ]; then
		for b in $BATCHES; do npl="$npl${npl:+,}$b"; done
		# shellcheck disable=SC2086
		"$PEER_BATCHED" -m "$gguf" -t "$THREADS" -c $((512 + ${BATCHES##* } * GEN + 64)) -npp 512 -ntg "$GEN" \
			-npl "$npl" -pps $PEER_BATCHED_FLAGS ${1:+-rtr} >"${j%.json}-batched.log" 2>&1 ||
			die "llama-batched-bench failed, see ${j%.json}-batched.log"
	fi
	python3 - "${j%.json}-pp.json" "$j" "$rep" "$fmt" "${j%.json}-batched.log" >>"$res" <<'EOF'
import json, os, sys
pp, j, rep, fmt, batched = sys.argv[1:]
for t in json.load(open(pp)) + json.load(open(j)):
    m = "pp%d" % t["n_prompt"] if t["n_gen"] == 0 else "tg@%d" % t["n_prompt"]
    print(rep, "peer", fmt, m, max(t["samples_ts"]), sep="\t")
print(rep, "peer", fmt, "model_bytes", t["model_size"], sep="\t")
if os.path.exists(batched):  # its table: | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | ...
    for line in open(batched):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) >= 8 and c[0].isdigit() and c[2].isdigit():
            print(rep, "peer", fmt, "tgB%s@%s" % (c[2], c[0]), c[7], sep="\t")
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
# q4_round: ours on each int4 variant and the peer on each 4-bit setup, the peer first in even rounds
q4_round() {
	local s i
	if [ $((rep % 2)) = 1 ]; then for i in "${!int4_variants[@]}"; do ours "$rep" "int4.$i"; done; fi
	for s in "${q4_setups[@]}"; do
		case ${s%%=*} in
		*+rtr) peer "$rep" "q4:${s%%=*}" "${s#*=}" -rtr 1 ;;
		*) peer "$rep" "q4:${s%%=*}" "${s#*=}" ;;
		esac
	done
	if [ $((rep % 2)) = 0 ]; then for i in "${!int4_variants[@]}"; do ours "$rep" "int4.$i"; done; fi
}
for rep in $(seq 1 "$REPS"); do
	echo "round $rep" >&2
	if [ -n "$PEER_GGUF_BF16" ]; then
		pair bf16 "$PEER_GGUF_BF16" bf16
		q8_ours=()
		[ -z "$OUR_Q8_FLAGS" ] || q8_ours+=(fp8)
		[ -z "$OUR_INT8_FLAGS" ] || q8_ours+=(int8)
		pair q8 "$PEER_GGUF_Q8" ${q8_ours[@]+"${q8_ours[@]}"}
	fi
	[ ${#q4_setups[@]} = 0 ] || q4_round
done

python3 - "$res" "$THREADS" "$REPS" "$GEN" "$PEER_BENCH" "$PEER_FLAGS" "$OUR_Q8_FLAGS" "$OUR_INT8_FLAGS" \
	"$PEER_GGUF_BF16" "$OUR_INT4_FLAGS" "$BATCHES" "$LONG" <<'EOF'
import sys
from collections import defaultdict
res, threads, reps, gen, peer, flags, q8, i8, bf16, i4, batches, long = sys.argv[1:]
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
def show(table):
    w = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |")
        if r is table[0]:
            print("|" + "|".join("-" * (x + 2) for x in w) + "|")
print("tokens/s, %s threads, %s rounds (range), decode %s steps; ratio = ours/peer, best of rounds"
      % (threads, reps, gen))
rows = [("prefill 512", "pp512"), ("decode @512", "tg@512")] + ([("decode @" + long, "tg@" + long)] if int(long) else [])
if bf16:
    ours8 = (["fp8"] if q8 else []) + (["int8"] if i8 else [])
    cols = ["ours bf16", "peer bf16", "ratio", "peer Q8_0"]
    for o in ours8:
        cols += ["ours " + o, "ratio"]
    table = [["", *cols]]
    for label, m in rows + [("model GB", "model_bytes")]:
        if m == "model_bytes":
            gb = lambda k: "%.3f" % (max(v[k]) / 1e9) if v.get(k) else "-"
            table.append([label, gb(("ours", "bf16", m)), gb(("peer", "bf16", m)), "", gb(("peer", "q8", m))]
                         + sum([[gb(("ours", o, m)), ""] for o in ours8], []))
            continue
        table.append([label, cell(("ours", "bf16", m)), cell(("peer", "bf16", m)),
                      ratio(("ours", "bf16", m), ("peer", "bf16", m)), cell(("peer", "q8", m))]
                     + sum([[cell(("ours", o, m)), ratio(("ours", o, m), ("peer", "q8", m))] for o in ours8], []))
    show(table)
    print("peer: %s %s%s%s" % (peer, flags, "; ours fp8: " + q8 if q8 else "", "; ours int8: " + i8 if i8 else ""))
q4 = sorted({f for s, f, _ in v if s == "peer" and f.startswith("q4:")})
ours4 = sorted({f for s, f, _ in v if s == "ours" and f.startswith("int4.")})
if q4:
    rows4 = rows + [("decode B=%s @512" % b, "tgB%s@512" % b) for b in batches.split()]
    def best(m):  # the peer's fastest setup on measure m (best of rounds)
        have = [f for f in q4 if v.get(("peer", f, m))]
        return max(have, key=lambda f: max(v["peer", f, m])) if have else None
    print()
    print("4 bits, the peer's setups (tokens/s, range over rounds; model bytes: llama-bench's model_size)")
    show([["setup", *[l for l, _ in rows4], "model GB"]] +
         [[f[3:], *[cell(("peer", f, m)) for _, m in rows4], "%.3f" % (max(v["peer", f, "model_bytes"]) / 1e9)]
          for f in q4])
    print()
    print("4 bits, ours against the peer's fastest setup on each measure (ratio = ours / that setup's best)")
    cols = ["peer best", "setup"]
    for o in ours4:
        cols += ["ours " + o, "ratio"]
    table = [["", *cols]]
    for label, m in rows4:
        b = best(m)
        r = [label, cell(("peer", b, m)) if b else "-", b[3:] if b else "-"]
        for o in ours4:
            r += [cell(("ours", o, m)), ratio(("ours", o, m), ("peer", b, m)) if b else "-"]
        table.append(r)
    show(table)
    for o in ours4:
        mb, sb, bw = (max(v["ours", o, k]) for k in ("model_bytes", "step_bytes", "bw_gb_s"))
        tps = max(v["ours", o, "tg@512"])
        print("ours %s = %s: model %.3f GB, %.3f GB read per decode step; decode @512 %.1f steps/s x %.3f GB = "
              "%.1f GB/s = %.0f%% of the best read bandwidth measured (%.1f GB/s)"
              % (o, i4.split(";")[int(o[5:])].strip(), mb / 1e9, sb / 1e9, tps, sb / 1e9, tps * sb / 1e9,
                 100 * tps * sb / 1e9 / bw, bw))
    print("peer: %s %s (+rtr: -rtr 1)" % (peer, flags))
EOF
