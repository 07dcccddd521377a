#!/usr/bin/env bash
# Benchmarks (not tests): each section builds its program against build/libmlaserve.a and
# prints its numbers. `make bench` runs this after building everything; BUILD picks the
# build directory. Run one section with: bash bench/run.sh tokenizer
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PKGS="jansson libpcre2-8 libmicrohttpd libcurl icu-uc"
only=${1:-}

# Compiles bench/NAME.c into $BUILD/bench/NAME with the library and the Makefile's flags.
bench_build() {
	mkdir -p "$BUILD/bench"
	cc -O2 -march=x86-64-v2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -pthread \
		-Isrc $(pkg-config --cflags $PKGS) -o "$BUILD/bench/$1" "bench/$1.c" "$BUILD/libmlaserve.a" \
		$(pkg-config --libs $PKGS) $(pkg-config --libs ompi-c 2>/dev/null) -lm -pthread
}

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
