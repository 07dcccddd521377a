#!/usr/bin/env bash
# Runs one fuzz target (tests/fuzz/fuzz_NAME.c) under libFuzzer for SECONDS (default 60),
# after `make fuzz`. The inputs it finds grow build-fuzz/corpus/NAME (seeded from
# tests/fuzz/corpus/NAME, which it does not modify); a crash or a broken property is written
# to build-fuzz/artifacts/ and ends the run. To keep a failing input as a regression test,
# copy it to tests/fuzz/corpus/NAME/crash-WHAT once fixed: the suite replays it.
#   scripts/fuzz.sh NAME [SECONDS] [extra libFuzzer flags...]
set -eu
cd "$(dirname "$0")/.."
name=${1:?usage: scripts/fuzz.sh NAME [SECONDS] [libFuzzer flags...]}
secs=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
bin=build-fuzz/fuzz_$name
[ -x "$bin" ] || { echo "fuzz: $bin is missing: run 'make fuzz' first" >&2; exit 2; }
mkdir -p "build-fuzz/corpus/$name" build-fuzz/artifacts
exec "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1 \
	-artifact_prefix="build-fuzz/artifacts/$name-" "$@" "build-fuzz/corpus/$name" "tests/fuzz/corpus/$name"
