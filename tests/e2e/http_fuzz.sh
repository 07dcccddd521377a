#!/usr/bin/env bash
# A short run of scripts/http_fuzz.py (random and mutated requests on every route over raw
# HTTP/1.1: wrong lengths, chunked bodies, slow and half-closed clients, streams dropped
# midway) against `mlaserve serve tests/fixtures/tiny-v3` on a free loopback port: every whole
# request gets a status line, error bodies are JSON errors, and the server is healthy after;
# the framing cases of scripts/http_fuzz.py --cases (malformed lengths and codings, header
# syntax, sizes, versions: a JSON error and a close; pipelining and keep-alive still work);
# then it stops on SIGTERM with status 0 (under `make asan`: without a sanitizer report).
# HTTP_FUZZ_SECONDS sets the length of each of the two runs (default 10). Prints ok/not ok lines.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/mlaserve
SECS=${HTTP_FUZZ_SECONDS:-10}
export no_proxy=127.0.0.1 NO_PROXY=127.0.0.1
WORK=$(mktemp -d)
SRV_PID=
trap '[ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null; rm -rf "$WORK"' EXIT

"$BIN" serve tests/fixtures/tiny-v3 --host 127.0.0.1 --port 0 --disable-log-requests >"$WORK/server.log" 2>&1 &
SRV_PID=$!
PORT=
for _ in $(seq 1 300); do
	PORT=$(sed -n 's|.* on http://127\.0\.0\.1:\([0-9]*\)/v1.*|\1|p' "$WORK/server.log" | head -1)
	[ -n "$PORT" ] && break
	kill -0 "$SRV_PID" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$PORT" ]; then
	echo "not ok - server did not start"
	tail -15 "$WORK/server.log" | sed 's/^/    /'
	exit 1
fi

# the framing cases (RFC 9112: each a JSON error at once, then the close; keep-alive and
# pipelining go on working), one ok/not ok line each
python3 scripts/http_fuzz.py --port "$PORT" --cases 2>&1 | sed 's/^Traceback/not ok - framing cases: &/'

for seed in 1 2; do
	if python3 scripts/http_fuzz.py --port "$PORT" --seconds "$SECS" --seed "$seed" >"$WORK/out" 2>&1; then
		echo "ok - http fuzz, seed $seed: $(tail -1 "$WORK/out")"
	else
		echo "not ok - http fuzz, seed $seed"
		tail -5 "$WORK/out" | sed 's/^/    /'
		tail -15 "$WORK/server.log" | sed 's/^/    /'
	fi
done

kill -TERM "$SRV_PID"
wait "$SRV_PID"
rc=$?
SRV_PID=
if [ "$rc" -eq 0 ] && ! grep -q 'Sanitizer' "$WORK/server.log"; then
	echo "ok - the server stops cleanly after the fuzzing"
else
	echo "not ok - the server exited with status $rc after the fuzzing"
	grep -A20 'Sanitizer' "$WORK/server.log" | head -30 | sed 's/^/    /'
fi
