#!/usr/bin/env bash
# Benchmarks (not tests): each section builds its program against build/libmlaserve.a and
# prints its numbers. `make bench` runs this after building everything (the quick version of
# every section, a few minutes on 2 cores) and ends with a summary; BUILD picks the build
# directory. Run one section with: bash bench/run.sh tokenizer. Sections: guide tokenizer forward
# gemm throughput scaling paths threshold blocksize prefix serve dcp spec v32 v4. BENCH_FULL=1 runs the sizes
# docs/PERFORMANCE.md reports (much longer). JSON results land in $BUILD/bench/.
set -eu -o pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PKGS="jansson libpcre2-8 libmicrohttpd libcurl icu-uc"
only=${1:-}
full=${BENCH_FULL:-0}
OUT="$BUILD/bench"
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
# note LINE: one line for the summary printed at the end
note() { echo "$*" >>"$summary"; }
want() { [ -z "$only" ] || [ "$only" = "$1" ]; }

# Compiles bench/NAME.c into $BUILD/bench/NAME with the library and the Makefile's flags.
bench_build() {
	mkdir -p "$BUILD/bench"
	cc -O2 -march=x86-64-v2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -pthread \
		-Isrc $(pkg-config --cflags $PKGS) -o "$BUILD/bench/$1" "bench/$1.c" "$BUILD/libmlaserve.a" \
		$(pkg-config --libs $PKGS) $(pkg-config --libs ompi-c 2>/dev/null) -lm -pthread
}

# Guided decoding: the allowed-token mask per step against feeding every token (same run).
if want guide; then
	echo "== guide"
	bench_build guide_mask
	"$BUILD/bench/guide_mask" tests/fixtures/tokenizer --reps 3 | tee "$OUT/guide.txt"
	note "guide: $(grep -E 'strings' "$OUT/guide.txt" | sed 's/ \{2,\}/ /g' | paste -sd ';' -)"
fi

# Tokenizer: encode MB/s (English prose, C source) on one core, decode, streaming detokenizer.
if [ -z "$only" ] || [ "$only" = tokenizer ]; then
	echo "== tokenizer"
	bench_build tokenizer_bench
	prose=$(find docs tests/fixtures -name '*.md' | sort; find src -name '*.[ch]' | sort)
	code=$(find src -name '*.[ch]' | sort)
	for dir in tests/fixtures/tokenizer tests/fixtures/tokenizer/deepseek-coder; do
		"$BUILD/bench/tokenizer_bench" "$dir" --min-seconds 1 --prose $prose --code $code
	done
fi

# GEMM per dispatch level (bench/gemm_levels.c): GFLOP/s of AVX2, AVX-512, AVX512_BF16 dot
# products and AMX tiles at several token counts, bf16 and fp8 weights, and the speedup over
# AVX2 (levels this CPU lacks are skipped; MLASERVE_BENCH_COPY_MB sizes the weight copies); int8
# (W8A8): its AVX2 and AVX-512 VNNI kernels.
if want gemm; then
	echo "== gemm (per dispatch level)"
	bench_build gemm_levels
	reps=3
	[ "$full" = 1 ] && reps=9
	for dt in bf16 fp8 int8; do
		"$BUILD/bench/gemm_levels" --dtype "$dt" --reps $reps --n 1,3,16,48,128,512 | tee "$OUT/gemm-$dt.txt"
	done
	note "gemm: $(grep -h -m1 -i 'n=512\|^ *512' "$OUT"/gemm-bf16.txt | tr -s ' ' | head -c 200)"
	# what bounds the AVX2 kernels: which instructions share pipes (bench/vec_pipes.c)
	bench_build vec_pipes
	"$BUILD/bench/vec_pipes" | tee "$OUT/vec-pipes.txt" || true
fi

# Decode MQA per dispatch level (bench/mqa_levels.c): one thread, AMX tiles against AVX512_BF16
# dot products on the same batch of paged caches, 16 and 128 heads (needs an AMX CPU).
if want mqa; then
	echo "== mqa (amx vs avx512_bf16)"
	bench_build mqa_levels
	"$BUILD/bench/mqa_levels" --seqs 64 --ctx 512 | tee "$OUT/mqa-levels.txt"
fi

# Decode attention over an fp8 latent cache against a bf16 one (bench/kv_fp8_decode.c): one
# thread, the same rows in both, alternating passes (docs/PERFORMANCE.md, "8-bit KV cache").
if want kvfp8; then
	echo "== kvfp8 (fp8 against bf16 KV cache, decode attention)"
	bench_build kv_fp8_decode
	"$BUILD/bench/kv_fp8_decode" --ctx 8192 --seqs 2 --reps 5 | tee "$OUT/kv-fp8-decode.txt"
fi

# Forward pass (bench/configs/bench-v2lite-4L, random weights): prefill of one 512-token prompt,
# decode at batch 1 and 16 with 512 tokens of context, measured DRAM read bandwidth and the
# decode roofline (bandwidth / weight bytes read per step). Quick version: 8 decode steps.
# FORWARD_OUT_LEN / FORWARD_JSON override the step count / the JSON report path.
if [ -z "$only" ] || [ "$only" = forward ]; then
	echo "== forward (bench-v2lite-4L, dummy weights)"
	mkdir -p "$BUILD/bench"
	"$BUILD/mlaserve" bench latency bench/configs/bench-v2lite-4L --load-format dummy \
		--batch-size 1,16 --input-len 512 --output-len "${FORWARD_OUT_LEN:-8}" \
		--output-json "${FORWARD_JSON:-$BUILD/bench/forward.json}"
fi

if want forward && [ -f "${FORWARD_JSON:-$BUILD/bench/forward.json}" ]; then
	note "$(python3 bench/summarize.py forward "${FORWARD_JSON:-$BUILD/bench/forward.json}")"
fi

# Offline throughput through the engine (`mlaserve bench throughput`): random prompts, exact
# lengths (ignore_eos), on the tiny-v3 fixture and on the attention-only config.
if want throughput; then
	echo "== throughput (bench throughput)"
	for m in tests/fixtures/tiny-v3 bench/configs/bench-attn-h16-1L; do
		n=$(basename "$m")
		fmt=""
		[ "$n" = tiny-v3 ] || fmt="--load-format dummy"
		# shellcheck disable=SC2086
		"$BUILD/mlaserve" bench throughput "$m" $fmt --num-prompts 64 --input-len 128 --output-len 64 \
			--output-json "$OUT/throughput-$n.json" 2>/dev/null
		note "$(python3 bench/summarize.py throughput "$OUT/throughput-$n.json")"
	done
fi

# Engine decode scaling: aggregate decode tokens/s at 1, 4, 16, 64 sequences (context 512)
# against the step's bound max(weight bytes / bandwidth, FLOPs / FMA peak).
if want scaling; then
	echo "== decode scaling (bench latency at each batch, dummy weights)"
	configs="bench/configs/bench-v2lite-4L"
	reps=1
	steps=2
	if [ "$full" = 1 ]; then
		configs="bench/configs/bench-v2lite-4L bench/configs/bench-v3attn-2L"
		reps=3
		steps=4
	fi
	for c in $configs; do
		n=$(basename "$c")
		BUILD="$BUILD" python3 bench/decode_scaling.py "$c" --batches 1,4,16,64 --context 512 --steps $steps \
			--reps $reps --json "$OUT/scaling-$n.json" -- --dtype auto
		note "$(python3 bench/summarize.py scaling "$OUT/scaling-$n.json")"
	done
fi

# MLA decode (absorbed) vs prefill (up-projected) path for one sequence of q_len q with
# context L: where the decode path is faster, FLASHMLA's reorder threshold should reach q.
if want paths; then
	echo "== MLA paths (decode vs prefill path per q_len; sets the reorder threshold)"
	bench_build mla_paths
	rm -f "$OUT"/paths-h*.json
	if [ "$full" = 1 ]; then
		"$BUILD/bench/mla_paths" bench/configs/bench-attn-h16-1L --q 1,16,64,128,256,512,1024 --ctx 1024,4096 \
			--reps 5 --json "$OUT/paths-h16.json"
		"$BUILD/bench/mla_paths" bench/configs/bench-attn-h128-1L --q 1,16,64,128,256,512 --ctx 1024 \
			--reps 3 --json "$OUT/paths-h128.json"
	else
		"$BUILD/bench/mla_paths" bench/configs/bench-attn-h16-1L --q 1,64,128,256,512 --ctx 1024 --reps 1 \
			--json "$OUT/paths-h16.json"
	fi
	note "$(python3 bench/summarize.py paths "$OUT"/paths-h*.json)"
fi

# Engine-level reorder-threshold sweep: every request after the first is an extend of Q
# tokens over a cached 1024-token prefix, so Q vs the threshold T picks the attention path.
# Needs the engine flag --reorder-batch-threshold; skipped (with a note) without it.
if want threshold; then
	echo "== reorder threshold (engine, extends of Q tokens over a cached prefix)"
	if "$BUILD/mlaserve" bench throughput --help 2>&1 | grep -q -- --reorder-batch-threshold; then
		ts="64 128 512"
		qs="64 256"
		[ "$full" = 1 ] && ts="1 16 64 128 256 512 1024" && qs="16 64 128 256 512"
		line="threshold h16 (tok/s):"
		for q in $qs; do
			for t in $ts; do
				"$BUILD/mlaserve" bench throughput bench/configs/bench-attn-h16-1L --load-format dummy \
					--num-prompts 16 --prefix-len 1024 --input-len "$q" --output-len 2 \
					--reorder-batch-threshold "$t" --output-json "$OUT/threshold-q$q-t$t.json" 2>/dev/null |
					grep throughput: | sed "s/^/q $q threshold $t:/"
				line="$line q$q/T$t $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['tokens_per_second']))" "$OUT/threshold-q$q-t$t.json")"
			done
		done
		note "$line"
	else
		echo "skipped: this build has no --reorder-batch-threshold (see the FLASHMLA threshold section of docs/PERFORMANCE.md)"
		note "threshold: skipped (no --reorder-batch-threshold flag)"
	fi
fi

# Block size: both attention paths at block sizes 16..128 (attention-only config, context
# 4096) and the engine end to end on tiny-v3.
if want blocksize; then
	echo "== block size"
	bench_build mla_paths
	for bs in 16 32 64 128; do
		"$BUILD/bench/mla_paths" bench/configs/bench-attn-h16-1L --q 1,256 --ctx 4096 --reps "$([ "$full" = 1 ] && echo 5 || echo 1)" \
			--block-size $bs --json "$OUT/blocksize-paths-$bs.json" | tail -n 2
		"$BUILD/mlaserve" bench throughput tests/fixtures/tiny-v3 --num-prompts 64 --input-len 256 --output-len 128 \
			--block-size $bs --output-json "$OUT/blocksize-tp-$bs.json" 2>/dev/null | grep throughput:
		note "$(python3 bench/summarize.py blocksize "$OUT/blocksize-paths-$bs.json" "$OUT/blocksize-tp-$bs.json")"
	done
fi

# Prefix caching: 32 requests sharing a 400-token prefix + 16 unique tokens, caching on/off.
if want prefix; then
	echo "== prefix caching (32 x (400 shared + 16 unique) tokens, 16 out)"
	for m in tests/fixtures/tiny-v3 bench/configs/bench-attn-h16-1L; do
		n=$(basename "$m")
		fmt=""
		[ "$n" = tiny-v3 ] || fmt="--load-format dummy"
		for pc in --enable-prefix-caching --no-enable-prefix-caching; do
			# shellcheck disable=SC2086
			"$BUILD/mlaserve" bench throughput "$m" $fmt --num-prompts 32 --prefix-len 400 --input-len 16 \
				--output-len 16 $pc --output-json "$OUT/prefix-$n$pc.json" 2>/dev/null | grep -E "throughput:|TTFT"
		done
		note "$(python3 bench/summarize.py prefix "$OUT/prefix-$n--enable-prefix-caching.json" "$OUT/prefix-$n--no-enable-prefix-caching.json")"
	done
fi

# Serving on loopback: mlaserve serve + mlaserve bench serve at concurrency 1, 4, 16, 64.
if want serve; then
	echo "== serve (tiny-v3 on loopback, bench serve sweep)"
	np=64
	[ "$full" = 1 ] && np=256
	BUILD="$BUILD" bash bench/serve_sweep.sh tests/fixtures/tiny-v3 "" --num-prompts $np --random-input-len 128 \
		--random-output-len 64 --ignore-eos --max-concurrency 1,4,16,64 --result-file "$OUT/serve-tiny-v3.json" \
		--plot "$OUT/serve-tiny-v3.png" >"$OUT/serve-tiny-v3.txt"
	note "$(python3 bench/summarize.py serve "$OUT/serve-tiny-v3.json")"
fi

# Decode context parallelism: KV capacity and decode attention time for D = 1, 2, 4.
if want dcp; then
	echo "== dcp (KV capacity and decode attention, D = 1, 2, 4)"
	BUILD="$BUILD" bash bench/dcp.sh
fi

# Speculative decoding (n-gram drafts; with BENCH_FULL=1 also MTP drafts) against plain
# decoding, same prompts, alternating.
if want spec; then
	echo "== spec (n-gram drafts vs plain decoding)"
	if [ "$full" = 1 ]; then
		BUILD="$BUILD" bash bench/spec_decode.sh bench/configs/bench-v3fp8-2L "1 4" 2 3 | tee "$OUT/spec.txt"
	else
		BUILD="$BUILD" bash bench/spec_decode.sh bench/configs/bench-v2lite-4L "1" 1 3 | tee "$OUT/spec.txt"
	fi
	note "spec: $(awk 'NR > 1 {printf "%s b%s %s; ", $1, $2, $6}' "$OUT/spec.txt")"
	if [ "$full" = 1 ]; then
		echo "== spec (DeepSeek MTP drafts vs plain decoding, V3's MoE)"
		REGIMES="free repeat one" SPEC_METHOD=mtp BUILD="$BUILD" bash bench/spec_decode.sh \
			bench/configs/bench-v3moe-fp8-3L "1 4" 2 | tee "$OUT/spec-mtp.txt"
		note "spec mtp: $(awk 'NR > 1 {printf "%s b%s %s; ", $1, $2, $6}' "$OUT/spec-mtp.txt")"
	fi
fi

# DeepSeek-V3.2 (sparse attention) against its dense twin, the same weights, per decode step
# at contexts up to 32K, alternating (bench/v32_decode.c).
if want v32; then
	echo "== v32 (sparse attention vs dense MLA at decode)"
	bench_build v32_decode
	ctx=1024,4096,16384,32768 reps=3
	[ "$full" = 1 ] && reps=7
	"$BUILD/bench/v32_decode" bench/configs/bench-v32-attn-1L bench/configs/bench-v32-attn-1L-dense \
		--ctx $ctx --batch 1,8 --reps $reps --json "$OUT/v32.json" | tee "$OUT/v32.txt"
	note "v32: $(awk '$1 ~ /^[0-9]+$/ && $2 == 32768 {printf "b%s 32K %s; ", $1, $7}' "$OUT/v32.txt")"
fi

# DeepSeek-V4 (docs/PERFORMANCE.md, "DeepSeek-V4"): V4-Flash's attention with a small MLP, one
# decode step against context (bench/v4_decode.c: the state filled, no prefill); with
# BENCH_FULL=1 also 128K and 1M, and the V4-Flash layer stack in fp4+fp8 against bf16 and V3.2
# of its widths (bench/v4_stacks.sh).
if want v4; then
	echo "== v4 (DeepSeek-V4 decode against context; the layer stack's formats)"
	bench_build v4_indexer
	"$BUILD/bench/v4_indexer" --keys 262144 | tee "$OUT/v4_indexer.txt"
	bench_build v4_decode
	ctx=4096,32768 reps=2
	[ "$full" = 1 ] && ctx=4096,32768,131072,1048448 reps=3
	"$BUILD/bench/v4_decode" bench/configs/v4-flash-attn-2L --ctx $ctx --batch 1,8 --reps $reps \
		--json "$OUT/v4_decode.json" | tee "$OUT/v4_decode.txt"
	note "v4: $(awk '$1 == "context" && $3 == "batch" {sub(":", "", $4); printf "%s b%s %s ms; ", $2, $4, $7}' "$OUT/v4_decode.txt")"
	if [ "$full" = 1 ]; then
		BUILD=$BUILD bash bench/v4_stacks.sh | tee "$OUT/v4_stacks.txt"
	fi
fi

if [ -s "$summary" ]; then
	echo "== summary ($summary)"
	cat "$summary"
fi
