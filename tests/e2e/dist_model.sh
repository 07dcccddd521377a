#!/usr/bin/env bash
# Tensor parallelism and decode context parallelism end to end on the tiny fixtures:
# - `mlaserve logits -tp T -dcp D --dcp-kv-cache-interleave-size I` (self-launched ranks)
#   within 1e-3 of the golden float32 logits, through the decode path (--chunk 1), the
#   multi-token decode path (FLASHMLA / FLASH_ATTN_MLA with the global-position mask), the
#   prefill path with the cached context gathered across the DCP group (REFERENCE_MLA, and
#   FLASH_ATTN_MLA downgraded to threshold 1 at I > 1), fp8 slices inside scale blocks
#   (tiny-r1 at -tp 8), and Open MPI forced onto TCP over loopback;
# - tiny-v32 and tiny-v32-topk8 (sparse attention) logits under TP/DCP within 1e-3 of their
#   goldens; the relatives' (tiny-kimi-k2, tiny-kimi-k25, tiny-glm5) likewise;
# - tiny-v4 (DeepSeek-V4) logits under -tp 2, -tp 4, -tp 2 -dcp 2 and -tp 4 -dcp 4 within 1e-3
#   of its goldens (one sliding window excepted in one forward of 300 tokens without DCP,
#   below), greedy generate -tp 2 and -dcp 2 = one process (a mixed batch with a prefix-cache
#   hit, MTP drafts), its MTP module's logits under -tp 2 (tests/unit/test_model_v4_tp.c);
# - greedy `generate` of a mixed batch (decodes, a prefix-cache extend, a long chunked
#   prefill in the same steps) gives the same tokens with D = 1 and D > 1 for every backend;
# - `serve tests/fixtures/tiny-r1 -tp 8 -dcp 8` answers a chat completion with 200 under
#   FLASHMLA, and under FLASH_ATTN_MLA at I = block size (with the downgrade WARN);
# - bad layouts fail with one clear line before any rank starts.
# Prints ok/not ok lines.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/mlaserve
. tests/e2e/mpi_env.inc
unset MLASERVE_ATTENTION_BACKEND
tmp=$(mktemp -d)
out=$tmp/out
srv_pid=""
cleanup() {
	[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

if ! command -v mpirun >/dev/null; then
	echo "not ok - mpirun not found (install openmpi-bin: scripts/install-deps.sh)"; exit 1
fi

ok() { echo "ok - $1"; }
notok() { echo "not ok - $1: $2"; sed 's/^/    /' "$out" | tail -12; }

ids() { # MODEL PROMPT -> comma-separated golden prompt ids
	python3 -c 'import json,sys;p=json.load(open("tests/fixtures/%s/golden/prompts.json"%sys.argv[1]))["prompts"];print(",".join(map(str,[x for x in p if x["name"]==sys.argv[2]][0]["tokens"])))' "$1" "$2"
}

# cmp_logits MODEL PROMPT FILE: every row within 1e-3 of the golden logits (prints the worst)
cmp_logits() {
	python3 - "$@" <<'EOF'
import json, os, struct, sys
model, name, got = sys.argv[1:4]
d = "tests/fixtures/%s/golden/" % model
p = [x for x in json.load(open(d + "prompts.json"))["prompts"] if x["name"] == name][0]
g = open(d + (os.environ.get("GOLD") or p["logits_file"]), "rb").read()
try:
    o = open(got, "rb").read()
except OSError as err:
    print("no output: %s" % err); sys.exit(1)
if len(g) != len(o):
    print("%d bytes, golden %d" % (len(o), len(g))); sys.exit(1)
n = len(g) // 4
a, b = struct.unpack("<%df" % n, g), struct.unpack("<%df" % n, o)
worst = max(abs(x - y) for x, y in zip(a, b))
if os.environ.get("MEDIAN"):  # the median position's max |diff| (quantization noise, not exactness)
    V = n // len(p["tokens"])
    pos = sorted(max(abs(x - y) for x, y in zip(a[t * V:(t + 1) * V], b[t * V:(t + 1) * V])) for t in range(n // V))
    print("median position's max |diff| %.2e (max %.2e)" % (pos[len(pos) // 2], worst))
    sys.exit(0 if pos[len(pos) // 2] <= float(os.environ["MEDIAN"]) else 1)
if os.environ.get("V4_WINDOW") and 1e-3 < worst < 0.02:  # rows over 1e-3 in one sliding window of 16
    V = n // len(p["tokens"])
    off = [t for t in range(n // V) if max(abs(x - y) for x, y in zip(a[t * V:(t + 1) * V], b[t * V:(t + 1) * V])) > 1e-3]
    print("max |diff| %.2e, over 1e-3 on rows %d-%d only" % (worst, off[0], off[-1]))
    sys.exit(0 if off[-1] - off[0] < 16 else 1)
print("max |diff| %.2e" % worst)
sys.exit(0 if worst <= 1e-3 else 1)
EOF
}

# logits NAME MODEL PROMPT T D I [extra args...] (GOLD_OF=FIXTURE: that fixture's prompts and goldens)
logits() {
	local name=$1 model=$2 prompt=$3 t=$4 d=$5 i=$6; shift 6
	local gold_of=${GOLD_OF:-$model}
	rm -f "$tmp/l.f32"
	timeout 120 "$BIN" logits "tests/fixtures/$model" --tokens "$(ids "$gold_of" "$prompt")" \
		--out "$tmp/l.f32" --dtype float32 -tp "$t" -dcp "$d" \
		--dcp-kv-cache-interleave-size "$i" "$@" >"$out" 2>&1
	local rc=$? res
	if [ $rc -ne 0 ]; then notok "$name" "exit status $rc"; return; fi
	if res=$(cmp_logits "$gold_of" "$prompt" "$tmp/l.f32"); then ok "$name ($res)"
	else notok "$name" "$res"; fi
}

# ---- logits vs golden ----
logits "tiny-v3 -tp 2 -dcp 1, one forward" tiny-v3 len17 2 1 1
logits "tiny-v3 -tp 2 -dcp 1, FLASHMLA chunks of 4" tiny-v3 len17 2 1 1 --chunk 4
logits "tiny-v3 -tp 2 -dcp 2 I=1, decode path (chunk 1)" tiny-v3 len17 2 2 1 --chunk 1
logits "tiny-v3 -tp 2 -dcp 2 I=16, FLASHMLA multi-token decode (chunk 5)" tiny-v3 len17 2 2 16 --chunk 5
logits "tiny-v3 -tp 2 -dcp 2 I=1, REFERENCE_MLA prefill + context gather (chunk 6)" tiny-v3 len17 2 2 1 \
	--chunk 6 --attention-backend REFERENCE_MLA
logits "tiny-v3 -tp 4 -dcp 2 I=1, FLASH_ATTN_MLA multi-token decode (chunk 5)" tiny-v3 len17 4 2 1 \
	--chunk 5 --attention-backend FLASH_ATTN_MLA
logits "tiny-v3 -tp 4 -dcp 2 I=16, FLASH_ATTN_MLA downgraded: prefill + context (chunk 5)" tiny-v3 len17 4 2 16 \
	--chunk 5 --attention-backend FLASH_ATTN_MLA
if grep -q "WARN.*FLASH_ATTN_MLA" "$out"; then ok "FLASH_ATTN_MLA at I=16 under DCP logs the downgrade WARN"
else notok "FLASH_ATTN_MLA at I=16 under DCP logs the downgrade WARN" "no WARN naming the backend"; fi
logits "tiny-v3 -tp 4 -dcp 4 I=1, FLASHMLA chunk 21" tiny-v3 len64 4 4 1 --chunk 21
logits "tiny-v3 -tp 4 -dcp 4 I=16, REFERENCE_MLA chunk 20" tiny-v3 len64 4 4 16 --chunk 20 \
	--attention-backend REFERENCE_MLA
logits "tiny-v2 (no q_lora) -tp 2 -dcp 2 I=1, chunk 5" tiny-v2 len17 2 2 1 --chunk 5 \
	--attention-backend REFERENCE_MLA
logits "tiny-v3-fp8 -tp 4 -dcp 2 I=16, chunk 5" tiny-v3-fp8 len17 4 2 16 --chunk 5
# --quantization fp8 under TP: each rank quantizes the blocks that cover its slice (q_b cut at
# 48 rows, down_proj at 80 columns: inside 128x128 blocks), as one process does the whole
GOLD=len17.fp8q.f32 logits "tiny-v3 -q fp8 -tp 4 -dcp 2 I=1, chunk 5" tiny-v3 len17 4 2 1 --chunk 5 -q fp8
GOLD=len17.fp8q.f32 logits "tiny-v2 --quantization fp8 -tp 2, one forward" tiny-v2 len17 2 1 1 --quantization fp8
# --quantize-lm-head under TP: each rank quantizes its vocabulary rows of the head
GOLD=len17.fp8qh.f32 logits "tiny-v3 -q fp8 --quantize-lm-head -tp 2 -dcp 2 I=1, chunk 5" tiny-v3 len17 2 2 1 \
	--chunk 5 -q fp8 --quantize-lm-head
# --quantization int8 under TP: each rank quantizes its slice of the weights and, for the
# row-parallel o_proj and down_proj, its slice of the activations in groups of its own, so the
# logits part from -tp 1's by int8's noise (~0.2-0.3 a position on this model, as -tp 1 from
# the float golden; a wrong slice or scale moves them by the logits' scale, ~2.5)
MEDIAN=0.5 GOLD=len17.int8q.f32 logits "tiny-v3 -q int8 -tp 2 -dcp 2 I=1, chunk 5" tiny-v3 len17 2 2 1 --chunk 5 -q int8
MEDIAN=0.5 GOLD=len17.int8qh.f32 logits "tiny-v3 -q int8 --quantize-lm-head -tp 4, one forward" tiny-v3 len17 4 1 1 \
	-q int8 --quantize-lm-head
logits "tiny-r1 (fp8, 8 heads) -tp 8 -dcp 8 I=1, chunk 4" tiny-r1 len17 8 8 1 --chunk 4
logits "tiny-r1 -tp 8 -dcp 8 I=16, REFERENCE_MLA chunk 9" tiny-r1 len17 8 8 16 --chunk 9 \
	--attention-backend REFERENCE_MLA
# DeepSeek-V3.2 (sparse attention, index_topk 16): the indexer's top-k merged across the DCP
# group, each rank attending its own selected keys
logits "tiny-v32 -tp 2, one forward of 300 tokens" tiny-v32 len300 2 1 1
logits "tiny-v32 -tp 2 -dcp 2 I=1, chunks of 5" tiny-v32 len300 2 2 1 --chunk 5
logits "tiny-v32 -tp 4 -dcp 4 I=4, chunks of 9" tiny-v32 len300 4 4 4 --chunk 9
logits "tiny-v32 -tp 4 -dcp 2 I=16, decode path (chunk 1)" tiny-v32 len64 4 2 16 --chunk 1
logits "tiny-v32-mtp (fp8, 8 heads) -tp 8 -dcp 8 I=1, chunks of 7" tiny-v32-mtp len300 8 8 1 --chunk 7
# tiny-v32-topk8: 6 heads (3 a rank at -tp 2, 6 attended after the DCP q gather), index_topk 8
# among up to 300 keys, a 128-wide indexer, YaRN over 64 positions; rows where one rank holds
# all 8 selected keys of a layer and the other none
logits "tiny-v32-topk8 -tp 2 -dcp 2 I=1, one forward of 300 tokens" tiny-v32-topk8 len300 2 2 1
logits "tiny-v32-topk8 -tp 2 -dcp 2 I=4, one forward of 300 tokens" tiny-v32-topk8 len300 2 2 4
logits "tiny-v32-topk8 -tp 2 -dcp 2 I=1, chunks of 7" tiny-v32-topk8 len300 2 2 1 --chunk 7
logits "tiny-v32-topk8 -tp 2 -dcp 2 I=4, decode path (chunk 1)" tiny-v32-topk8 len64 2 2 4 --chunk 1
# The MLA relatives: Kimi K2 (tiny-kimi-k2: V3's forward, 8 heads, 12 experts top-4 in one
# group, fp8) and GLM-5 (tiny-glm5: V3.2's forward, qk_nope 48 != v_head 64, a 4 x 64 indexer
# with interleaved RoPE, index_topk 12 of up to 64 keys); Kimi K2.5 (tiny-kimi-k25: K2's text
# model under language_model.) against K2's goldens
logits "tiny-kimi-k2 -tp 2 -dcp 2 I=1, one forward" tiny-kimi-k2 len64 2 2 1
logits "tiny-kimi-k2 -tp 2 -dcp 2 I=1, chunks of 5" tiny-kimi-k2 len64 2 2 1 --chunk 5
logits "tiny-kimi-k2 -tp 2 -dcp 2 I=16, decode path (chunk 1)" tiny-kimi-k2 len17 2 2 16 --chunk 1
logits "tiny-kimi-k2 -tp 4 -dcp 4 I=1, REFERENCE_MLA chunks of 7" tiny-kimi-k2 len64 4 4 1 --chunk 7 \
	--attention-backend REFERENCE_MLA
GOLD_OF=tiny-kimi-k2 logits "tiny-kimi-k25 -tp 2 -dcp 2 I=1, chunks of 5" tiny-kimi-k25 len64 2 2 1 --chunk 5
logits "tiny-glm5 -tp 2 -dcp 2 I=1, one forward" tiny-glm5 len64 2 2 1
logits "tiny-glm5 -tp 2 -dcp 2 I=1, chunks of 5" tiny-glm5 len64 2 2 1 --chunk 5
logits "tiny-glm5 -tp 2 -dcp 2 I=4, decode path (chunk 1)" tiny-glm5 len17 2 2 4 --chunk 1
logits "tiny-glm5 -tp 4 -dcp 2 I=16, chunks of 9" tiny-glm5 len64 4 2 16 --chunk 9
# DeepSeek-V4 (tiny-v4: 4 heads, o_groups 2, moe_intermediate 128): -tp 2 runs 2 heads and one
# wo_a group a rank, half of each expert's columns. In one forward of 300 tokens the
# all-reduce's summation order flips one kv fp8 (e4m3) rounding: the 16 queries of that key's
# sliding window move by ~2e-3 (without the kv fp8 simulation -tp 2 is within 9e-6 of one
# process), so there one run of at most 16 rows may reach 0.02, as
# test_model_v4 allows the oracle's own f32 run on len300's MTP rows
V4_WINDOW=1 logits "tiny-v4 -tp 2, one forward of 300 tokens" tiny-v4 len300 2 1 1
logits "tiny-v4 -tp 2, chunks of 5" tiny-v4 len64 2 1 1 --chunk 5
logits "tiny-v4 -tp 2, chunks of 5 over 300 tokens" tiny-v4 len300 2 1 1 --chunk 5
logits "tiny-v4 -tp 2, decode path (chunk 1)" tiny-v4 len17 2 1 1 --chunk 1
# DCP (docs/mla-dcp.md §7): compressed entries and indexer keys sharded by entry index, window
# rows by position, the group's heads attend each rank's keys, partials merged by LSE with the
# sink once; the CSA top-k (index_topk 8) merged across the ranks
logits "tiny-v4 -tp 2 -dcp 2 I=1, one forward of 300 tokens" tiny-v4 len300 2 2 1
logits "tiny-v4 -tp 2 -dcp 2 I=1, chunks of 7" tiny-v4 len64 2 2 1 --chunk 7
logits "tiny-v4 -tp 2 -dcp 2 I=4, chunks of 7 over 300 tokens" tiny-v4 len300 2 2 4 --chunk 7
logits "tiny-v4 -tp 2 -dcp 2 I=4, decode path (chunk 1)" tiny-v4 len64 2 2 4 --chunk 1
# -tp 4: more ranks than o_groups (2): each group's wo_a cut by its heads' columns among 2 ranks,
# the partial products summed by the all-reduce after wo_b (the same fp8 flip as -tp 2 in one
# forward of 300 tokens)
V4_WINDOW=1 logits "tiny-v4 -tp 4 (a wo_a group on 2 ranks), one forward of 300 tokens" tiny-v4 len300 4 1 1
logits "tiny-v4 -tp 4 -dcp 4 I=4, one forward of 300 tokens" tiny-v4 len300 4 4 4
logits "tiny-v4 -tp 4 -dcp 4 I=4, chunks of 9 over 300 tokens" tiny-v4 len300 4 4 4 --chunk 9
logits "tiny-v4 -tp 4 -dcp 4 I=4, decode path (chunk 1)" tiny-v4 len64 4 4 4 --chunk 1
v4_gen() { # greedy generate on tiny-v4 at -tp T (prompt len17, 16 new tokens)
	timeout 120 "$BIN" generate tests/fixtures/tiny-v4 --prompt-ids "$(ids tiny-v4 len17)" --max-tokens 16 \
		--ignore-eos --dtype float32 "$@" 2>>"$out" </dev/null | tail -1
}
: >"$out"
g1=$(v4_gen) g2=$(v4_gen -tp 2) g3=$(v4_gen -tp 2 -dcp 2 --dcp-kv-cache-interleave-size 4)
if [ -n "$g1" ] && [ "$g1" = "$g2" ]; then ok "tiny-v4 generate -tp 2: the tokens of one process ($g2)"
else notok "tiny-v4 generate -tp 2: the tokens of one process" "-tp 1 '$g1', -tp 2 '$g2'"; fi
if [ -n "$g1" ] && [ "$g1" = "$g3" ]; then ok "tiny-v4 generate -tp 2 -dcp 2 I=4: the tokens of one process"
else notok "tiny-v4 generate -tp 2 -dcp 2 I=4: the tokens of one process" "-tp 1 '$g1', -dcp 2 '$g3'"; fi
# the MTP module under -tp 2, in process: rank 0's MTP logits vs golden (test_model_v4_tp.c)
timeout 200 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
	"${BUILD:-build}/tests/test_model_v4_tp" >"$out" 2>&1 </dev/null; rc=$?
if [ $rc -ne 0 ] && lsan_tool_crashed "$out"; then # mpi_env.inc: the tool, not a leak
	echo "# tiny-v4 MTP -tp 2: LeakSanitizer's tracer crashed: rerun without leak checking"
	ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" timeout 200 mpirun --allow-run-as-root --oversubscribe \
		--bind-to none -np 2 "${BUILD:-build}/tests/test_model_v4_tp" >"$out" 2>&1 </dev/null; rc=$?
fi
if [ $rc -eq 0 ] && grep -q '^ok - test_tp_mtp' "$out" && ! grep -q '^not ok' "$out"; then
	ok "tiny-v4 MTP logits -tp 2, one prefill and chunks of 5 ($(grep -c '^# -tp 2 MTP' "$out") checks)"
else notok "tiny-v4 MTP logits -tp 2" "exit status $rc"; fi
OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_pml=ob1 \
	logits "tiny-v3 -tp 2 -dcp 2 over TCP loopback (shared memory off)" tiny-v3 len17 2 2 1 --chunk 5
# started under mpirun: the given ranks are used (no second launch)
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2"
rm -f "$tmp/l.f32"
timeout 120 $MPIRUN "$BIN" logits tests/fixtures/tiny-v3 --tokens "$(ids tiny-v3 len17)" --out "$tmp/l.f32" \
	-tp 2 -dcp 2 --chunk 3 >"$out" 2>&1; rc=$?
if [ $rc -ne 0 ]; then notok "under an explicit mpirun -np 2" "exit status $rc"
elif res=$(cmp_logits tiny-v3 len17 "$tmp/l.f32"); then ok "under an explicit mpirun -np 2 ($res)"
else notok "under an explicit mpirun -np 2" "$res"; fi
timeout 60 $MPIRUN "$BIN" logits tests/fixtures/tiny-v3 --tokens 0,1 --out "$tmp/l.f32" -tp 4 >"$out" 2>&1
if [ $? -ne 0 ] && grep -q "mpi world has 2 ranks but tensor-parallel-size is 4" "$out"; then
	ok "mpirun -np 2 with -tp 4 is refused"
else notok "mpirun -np 2 with -tp 4 is refused" "no clear error"; fi

# -q fp8 with bf16 activations: the quantized weights are packed and their own bytes freed
# where a rank's view allows it (on avx512_bf16 and up), so -tp 2 and -tp 1 agree (to the
# all-reduce's summation order)
rm -f "$tmp/q1.f32" "$tmp/q2.f32"
if timeout 120 "$BIN" logits tests/fixtures/tiny-v3 --tokens "$(ids tiny-v3 len17)" --out "$tmp/q1.f32" \
	--dtype bfloat16 -q fp8 >"$out" 2>&1 &&
	timeout 120 "$BIN" logits tests/fixtures/tiny-v3 --tokens "$(ids tiny-v3 len17)" --out "$tmp/q2.f32" \
		--dtype bfloat16 -q fp8 -tp 2 --chunk 5 >>"$out" 2>&1 &&
	res=$(python3 - "$tmp/q1.f32" "$tmp/q2.f32" <<'EOF'
import struct, sys
a, b = (open(f, 'rb').read() for f in sys.argv[1:3])
n = len(a) // 4
assert n and len(a) == len(b), (len(a), len(b))
d = max(abs(x - y) for x, y in zip(struct.unpack('<%df' % n, a), struct.unpack('<%df' % n, b)))
print('max |diff| %.2e' % d)
sys.exit(0 if d <= 5e-2 else 1)
EOF
); then ok "tiny-v3 -q fp8 bf16: -tp 2 (chunks of 5) equals -tp 1 ($res)"
else notok "tiny-v3 -q fp8 bf16: -tp 2 (chunks of 5) equals -tp 1" "${res:-failed}"; fi

# ---- bad layouts: one clear line, non-zero status, before any rank starts ----
fails() { # NAME PATTERN ARGS...
	local name=$1 pat=$2; shift 2
	timeout 60 "$BIN" "$@" >"$out" 2>&1; local rc=$?
	if [ $rc -eq 0 ]; then notok "$name" "exit status 0"
	elif ! grep -q -- "$pat" "$out"; then notok "$name" "no '$pat' in the output"
	else ok "$name"; fi
}
fails "-tp 3 on 4 heads is refused" "must divide num_attention_heads 4" \
	logits tests/fixtures/tiny-v3 --tokens 0,1 --out "$tmp/x" -tp 3
fails "-dcp 4 with -tp 2 is refused" "must divide tensor-parallel-size 2" \
	generate tests/fixtures/tiny-v3 --prompt-ids 0,1 -tp 2 -dcp 4
fails "an interleave that does not divide the block size is refused" "must divide block-size 16" \
	serve tests/fixtures/tiny-v3 -tp 2 -dcp 2 --dcp-kv-cache-interleave-size 3
fails "tiny-v4 with a dense MLA backend is refused" "the model needs DeepSeek-V4: use DEEPSEEK_V4" \
	logits tests/fixtures/tiny-v4 --tokens 0,1 --out "$tmp/x" --dtype float32 --attention-backend FLASHMLA
fails "tiny-v3 with DEEPSEEK_V4 is refused" "DEEPSEEK_V4 serves DeepSeek-V4 attention and the model needs dense MLA" \
	logits tests/fixtures/tiny-v3 --tokens 0,1 --out "$tmp/x" --attention-backend DEEPSEEK_V4
fails "tiny-v4 -tp 4 -q int8 is refused (wo_a cut in both dimensions)" "above o_groups 2 is not supported" \
	logits tests/fixtures/tiny-v4 --tokens 0,1 --out "$tmp/x" --dtype float32 -tp 4 -q int8

# ---- greedy generation of a mixed batch: D = 1 and D > 1 agree, every backend ----
# The short prompts decode while the 300-token prompt prefills in chunks of the token budget
# (steps like [1, 1, 38]); the fourth shares its first 64 tokens (a prefix-cache hit, then an
# extend of 3 tokens next to decodes).
python3 - "$tmp/prompts.jsonl" <<'EOF'
import json, sys
p = [x for x in json.load(open("tests/fixtures/tiny-v3/golden/prompts.json"))["prompts"]]
long = [x for x in p if x["name"] == "len300"][0]["tokens"]
with open(sys.argv[1], "w") as f:
    for ids in ([0], [0, 5, 9], long, long[:64] + [7, 8, 9], [0, 3]):
        f.write(json.dumps({"prompt_token_ids": ids}) + "\n")
EOF
# gen T D I BACKEND: prints the token ids of every prompt, one line each
gen() {
	MLASERVE_ATTENTION_BACKEND=$4 timeout 120 "$BIN" generate "tests/fixtures/${GEN_MODEL:-tiny-v3}" --dtype float32 \
		--prompts-file "$tmp/prompts.jsonl" --max-tokens 6 --ignore-eos --max-num-batched-tokens 40 \
		-tp "$1" -dcp "$2" --dcp-kv-cache-interleave-size "$3" --output "$tmp/gen.jsonl" >"$out" 2>&1 &&
		python3 -c 'import json,sys;[print(json.loads(l)["token_ids"]) for l in open(sys.argv[1])]' "$tmp/gen.jsonl"
}
for be in FLASHMLA FLASH_ATTN_MLA REFERENCE_MLA; do
	want=$(gen 1 1 1 $be)
	if [ -z "$want" ]; then notok "generate $be single process" "no output"; continue; fi
	for cfg in "2 1 1" "2 2 1" "4 4 16" "4 2 1"; do
		set -- $cfg
		got=$(gen "$1" "$2" "$3" $be)
		name="generate mixed batch, $be, -tp $1 -dcp $2 I=$3, same greedy tokens as one process"
		if [ "$got" = "$want" ]; then ok "$name"
		else notok "$name" "got [$(echo $got)] want [$(echo $want)]"; fi
	done
done

# V4: the same mixed batch (its prefix-cache hit resumes from a boundary snapshot; under DCP
# the virtual block is 16 x W tokens, 64 a boundary of both)
want=$(GEN_MODEL=tiny-v4 gen 1 1 1 DEEPSEEK_V4)
if [ -z "$want" ]; then notok "generate tiny-v4 single process" "no output"; fi
for cfg in "2 2 1" "4 4 4"; do
	[ -z "$want" ] && break
	set -- $cfg
	got=$(GEN_MODEL=tiny-v4 gen "$1" "$2" "$3" DEEPSEEK_V4)
	hit=$(sed -n 's/.*prefix cache \([0-9]*\)\/.*/\1/p' "$out")
	name="generate tiny-v4 mixed batch, -tp $1 -dcp $2 I=$3, same greedy tokens as one process"
	if [ "$got" != "$want" ]; then notok "$name" "got [$(echo $got)] want [$(echo $want)]"
	elif ! grep -q "attention backend DEEPSEEK_V4, reorder threshold 512" "$out" || grep -q "WARN.*threshold" "$out"; then
		notok "$name" "DEEPSEEK_V4 did not keep its threshold 512 under DCP"
	elif [ "${hit:-0}" -lt 64 ]; then notok "$name" "${hit:-no} prefix-cache tokens hit, 64 expected"
	else ok "$name ($hit prompt tokens from the prefix cache)"; fi
done

# V3.2: the same mixed batch (prefix-cache hit, chunked 300-token prefill: sparse selection)
want=$(GEN_MODEL=tiny-v32 gen 1 1 1 FLASHMLA_SPARSE)
if [ -z "$want" ]; then notok "generate tiny-v32 single process" "no output"; fi
for cfg in "2 2 1" "4 4 16" "4 2 4"; do
	[ -z "$want" ] && break
	set -- $cfg
	got=$(GEN_MODEL=tiny-v32 gen "$1" "$2" "$3" FLASHMLA_SPARSE)
	name="generate tiny-v32 mixed batch, FLASHMLA_SPARSE, -tp $1 -dcp $2 I=$3, same greedy tokens as one process"
	if [ "$got" = "$want" ]; then ok "$name"
	else notok "$name" "got [$(echo $got)] want [$(echo $want)]"; fi
done

# ---- speculative decoding under DCP: drafts (multi-token decode queries, the case behind
# the threshold rule) change no token; logit biases make the outputs repeat so drafts are kept
printf '%s\n' '{"prompt_token_ids": [0, 5, 9, 5, 9], "logit_bias": {"100": 30, "107": 30, "114": 30}}' \
	'{"prompt_token_ids": [0, 3], "logit_bias": {"200": 30, "207": 30}, "temperature": 0.9, "seed": 4}' \
	'{"prompt_token_ids": [0, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 2]}' >"$tmp/spec.jsonl"
# spec_gen BACKEND I [--speculative-config JSON]: token ids, one line per prompt (SPEC_MODEL:
# the fixture, tiny-v3 by default; SPEC_TP: the parallel flags, -tp 2 -dcp 2 by default)
spec_gen() {
	local be=$1 i=$2; shift 2
	MLASERVE_ATTENTION_BACKEND=$be timeout 120 "$BIN" generate "${SPEC_MODEL:-tests/fixtures/tiny-v3}" --dtype float32 \
		--prompts-file "$tmp/spec.jsonl" --max-tokens 40 --ignore-eos ${SPEC_TP:--tp 2 -dcp 2} \
		--dcp-kv-cache-interleave-size "$i" --output "$tmp/spec_out.jsonl" "$@" >"$out" 2>&1 &&
		python3 -c 'import json,sys;[print(json.loads(l)["token_ids"]) for l in open(sys.argv[1])]' "$tmp/spec_out.jsonl"
}
for be in FLASHMLA FLASH_ATTN_MLA; do
	for i in 1 16; do
		name="generate -tp 2 -dcp 2 I=$i, $be, with 3 n-gram drafts per step: the tokens without them"
		want=$(spec_gen $be $i)
		got=$(spec_gen $be $i --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 2}')
		kept=$(sed -n 's/.*speculative decoding: \([0-9]*\) of.*/\1/p' "$out")
		if [ -z "$want" ] || [ "$got" != "$want" ]; then notok "$name" "got [$(echo $got)] want [$(echo $want)]"
		elif [ "${kept:-0}" -eq 0 ]; then notok "$name" "no draft was kept"
		else ok "$name ($kept drafts kept)"; fi
	done
done

# ---- the MTP module under TP + DCP (tiny-r1-mtp: fp8, its own head split by vocabulary): the
# tokens without drafts, and the drafts of one process (the same count kept, float32); one
# draft per step, and three (two chained passes of the module, at lookahead slots) ----
for k in 1 3; do
	MTP="{\"method\": \"deepseek_mtp\", \"num_speculative_tokens\": $k}"
	one=$(SPEC_MODEL=tests/fixtures/tiny-r1-mtp SPEC_TP="-tp 1" spec_gen FLASHMLA 1 --speculative-config "$MTP")
	kept1=$(sed -n 's/.*speculative decoding: \([0-9]*\) of.*/\1/p' "$out")
	for be in FLASHMLA FLASH_ATTN_MLA; do
		for i in 1 16; do
			name="generate tiny-r1-mtp -tp 2 -dcp 2 I=$i, $be, deepseek_mtp k=$k: the tokens without drafts"
			want=$(SPEC_MODEL=tests/fixtures/tiny-r1-mtp spec_gen $be $i)
			got=$(SPEC_MODEL=tests/fixtures/tiny-r1-mtp spec_gen $be $i --speculative-config "$MTP")
			kept=$(sed -n 's/.*speculative decoding: \([0-9]*\) of.*/\1/p' "$out")
			if [ -z "$want" ] || [ "$got" != "$want" ] || [ "$one" != "$want" ]; then
				notok "$name" "got [$(echo $got)] want [$(echo $want)] one process [$(echo $one)]"
			elif [ "${kept:-0}" -eq 0 ] || [ "$kept" != "$kept1" ]; then
				notok "$name" "$kept drafts kept, $kept1 in one process"
			else ok "$name ($kept drafts kept, as in one process)"; fi
		done
	done
done

# DeepSeek-V4's MTP module under -tp 2 -dcp 2 I=4: the tokens without drafts and those of one
# process with drafts. (How many drafts are kept is not compared: it moves between runs of one
# process too, 17 or 18 of ~184 here, with the steps' composition.)
MTP='{"method": "deepseek_mtp", "num_speculative_tokens": 2}'
one=$(SPEC_MODEL=tests/fixtures/tiny-v4 SPEC_TP="-tp 1" spec_gen "" 1 --speculative-config "$MTP")
want=$(SPEC_MODEL=tests/fixtures/tiny-v4 spec_gen "" 4)
got=$(SPEC_MODEL=tests/fixtures/tiny-v4 spec_gen "" 4 --speculative-config "$MTP")
kept=$(sed -n 's/.*speculative decoding: \([0-9]*\) of.*/\1/p' "$out")
name="generate tiny-v4 -tp 2 -dcp 2 I=4, deepseek_mtp k=2: the tokens without drafts and of one process"
if [ -z "$want" ] || [ "$got" != "$want" ] || [ "$one" != "$want" ]; then
	notok "$name" "got [$(echo $got)] want [$(echo $want)] one process [$(echo $one)]"
elif [ "${kept:-0}" -eq 0 ]; then notok "$name" "no draft was kept"
else ok "$name ($kept drafts kept)"; fi

# V3.2's MTP layer (with its own indexer) under -tp 2 -dcp 2: the tokens without drafts, and
# the drafts kept in one process
for k in 1 3; do
	MTP="{\"method\": \"deepseek_mtp\", \"num_speculative_tokens\": $k}"
	V=tests/fixtures/tiny-v32-mtp
	one=$(SPEC_MODEL=$V SPEC_TP="-tp 1" spec_gen FLASHMLA_SPARSE 1 --speculative-config "$MTP")
	kept1=$(sed -n 's/.*speculative decoding: \([0-9]*\) of.*/\1/p' "$out")
	for i in 1 4; do
		name="generate tiny-v32-mtp -tp 2 -dcp 2 I=$i, deepseek_mtp k=$k: the tokens without drafts"
		want=$(SPEC_MODEL=$V spec_gen FLASHMLA_SPARSE $i)
		got=$(SPEC_MODEL=$V spec_gen FLASHMLA_SPARSE $i --speculative-config "$MTP")
		kept=$(sed -n 's/.*speculative decoding: \([0-9]*\) of.*/\1/p' "$out")
		if [ -z "$want" ] || [ "$got" != "$want" ] || [ "$one" != "$want" ]; then
			notok "$name" "got [$(echo $got)] want [$(echo $want)] one process [$(echo $one)]"
		elif [ "$kept" != "$kept1" ]; then notok "$name" "$kept drafts kept, $kept1 in one process"
		else ok "$name (${kept:-0} drafts kept, as in one process)"; fi
	done
done

# ---- serve -tp 8 -dcp 8 (the original failure): a chat completion answers 200 ----
# serve_check NAME BACKEND [args...]
serve_check() {
	local name=$1 be=$2; shift 2
	MLASERVE_ATTENTION_BACKEND=$be "$BIN" serve tests/fixtures/tiny-r1 -tp 8 -dcp 8 --port 0 \
		--disable-log-stats "$@" >"$out" 2>&1 &
	srv_pid=$!
	local port=""
	for _ in $(seq 600); do
		port=$(sed -n 's/.*serving .* on http:\/\/[^:]*:\([0-9]*\)\/v1.*/\1/p' "$out" | head -1)
		[ -n "$port" ] && break
		kill -0 "$srv_pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$port" ]; then notok "$name" "the server did not start"; srv_pid=""; return; fi
	local code ranks left
	code=$(curl -s -o "$tmp/resp.json" -w '%{http_code}' --max-time 120 \
		-H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/chat/completions" \
		-d '{"messages": [{"role": "user", "content": "who is there"}], "temperature": 0.0, "max_tokens": 100}')
	ranks=$(rank_pids "$srv_pid")
	kill -TERM "$srv_pid" # mpirun forwards it: rank 0 drains and stops the workers
	ends_within "$srv_pid" 15
	wait "$srv_pid" 2>/dev/null
	srv_pid=""
	# ranks signalled by mpirun may still be finishing their exit (slow under sanitizers)
	for _ in $(seq 100); do left=$(alive $ranks); [ -z "$left" ] && break; sleep 0.1; done
	if [ "$code" != 200 ]; then notok "$name" "HTTP $code: $(head -c 300 "$tmp/resp.json")"
	elif ! python3 -c 'import json,sys;r=json.load(open(sys.argv[1]));assert r["choices"][0]["message"]["content"] is not None;assert r["usage"]["completion_tokens"]>0' "$tmp/resp.json"; then
		notok "$name" "bad body $(head -c 300 "$tmp/resp.json")"
	elif [ "$(echo $ranks | wc -w)" != 8 ]; then notok "$name" "$(echo $ranks | wc -w) ranks seen, expected 8"
	elif [ -n "$left" ]; then notok "$name" "ranks left after SIGTERM: $left"
	else ok "$name (then SIGTERM: every rank ended)"; fi
}
rank_pids() { # LAUNCHER: the ranks mpirun started
	local p
	for p in $(ps --ppid "$1" -o pid= 2>/dev/null); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=' && printf '%s ' "$p"
	done
}
rank_of() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p'; }
alive() { # PIDS...: those still running (a zombie has ended)
	local p st
	for p in "$@"; do
		st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) || continue
		[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ] && printf '%s ' "$p"
	done
}
ends_within() { # PID SECONDS
	local i
	for i in $(seq $(($2 * 10))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	return 1
}
serve_check "serve tiny-r1 -tp 8 -dcp 8 FLASHMLA: chat completion 200" FLASHMLA
if grep "WARN" "$out" | grep -q "FLASHMLA"; then notok "FLASHMLA keeps its threshold under DCP" "a WARN names it"
elif grep -q "reorder threshold 128" "$out"; then ok "FLASHMLA keeps its threshold 128 under DCP (global-position mask)"
else notok "FLASHMLA keeps its threshold 128 under DCP" "no 'reorder threshold 128' line"; fi
serve_check "serve tiny-r1 -tp 8 -dcp 8 FLASH_ATTN_MLA I=16 (downgraded): chat completion 200" FLASH_ATTN_MLA \
	--dcp-kv-cache-interleave-size 16
if [ "$(grep -c "WARN.*FLASH_ATTN_MLA.*reorder_batch_threshold 512 -> 1" "$out")" = 1 ]; then
	ok "FLASH_ATTN_MLA at I=16 under DCP: one WARN naming the backend, threshold 1"
else notok "FLASH_ATTN_MLA at I=16 under DCP: one WARN naming the backend" "no single WARN line"; fi

# ---- a worker rank that dies takes the job down: no rank is left behind ----
"$BIN" serve tests/fixtures/tiny-v3 -tp 4 -dcp 2 --port 0 --disable-log-stats >"$out" 2>&1 &
srv_pid=$!
for _ in $(seq 300); do grep -q 'serving .* on http' "$out" && break; sleep 0.1; done
ranks=$(rank_pids "$srv_pid")
victim=""
for p in $ranks; do [ "$(rank_of "$p")" = 2 ] && victim=$p; done
if [ -z "$victim" ]; then notok "SIGKILL of worker rank 2 ends every rank" "ranks did not start"
else
	kill -KILL "$victim"
	ends_within "$srv_pid" 20
	wait "$srv_pid" 2>/dev/null; rc=$?
	for _ in $(seq 100); do left=$(alive $ranks); [ -z "$left" ] && break; sleep 0.1; done
	if [ -n "$left" ]; then notok "SIGKILL of worker rank 2 ends every rank" "left: $left"
	elif [ $rc -eq 0 ]; then notok "SIGKILL of worker rank 2 ends every rank" "exit status 0"
	else ok "SIGKILL of worker rank 2 ends every rank (exit $rc)"; fi
fi
srv_pid=""
exit 0
