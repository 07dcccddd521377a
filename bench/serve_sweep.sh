#!/usr/bin/env bash
# Serving benchmark on loopback: starts `mlaserve serve MODEL_DIR [serve flags]` on a free
# port, waits until it answers, runs `mlaserve bench serve` with the given client flags (a
# --max-concurrency list sweeps), then stops the server.
#   bash bench/serve_sweep.sh MODEL_DIR "SERVE FLAGS" CLIENT FLAGS...
# e.g. bash bench/serve_sweep.sh tests/fixtures/tiny-v3 "" --num-prompts 64 \
#        --random-input-len 128 --random-output-len 32 --ignore-eos --max-concurrency 1,4,16,64 \
#        --plot docs/bench-serve-tiny-v3.png --result-file build/bench/serve-tiny-v3.json
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
model=$1
serve_flags=$2
shift 2
port=$((20000 + RANDOM % 20000))
log="$BUILD/bench/serve-$port.log"
mkdir -p "$BUILD/bench"
# shellcheck disable=SC2086
"$BUILD/mlaserve" serve "$model" --host 127.0.0.1 --port "$port" --disable-log-requests $serve_flags >"$log" 2>&1 &
pid=$!
stop() { kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; }
trap stop EXIT
for _ in $(seq 1 600); do
	if curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
		break
	fi
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "serve_sweep: the server exited; its log:" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.5
done
"$BUILD/mlaserve" bench serve --base-url "http://127.0.0.1:$port" --tokenizer "$model" "$@"
