#!/usr/bin/env bash
# Rank clean-up and idle CPU of a self-launched job (`mlaserve dist-check -tp 3 --hold`):
# whichever way rank 0 or the launcher ends (SIGTERM, SIGINT, SIGKILL), no rank is left, within
# a bound (no wait here is unbounded), an mpirun that outlives its ranks is killed after
# MLASERVE_MPIRUN_GRACE, ranks idle in the plan wait use ~0% CPU, and a worker rank of
# `serve -tp 2` that dies fails the open requests (an error event, a 500) before the job ends
# non-zero. Prints ok/not ok lines.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/mlaserve
. tests/e2e/mpi_env.inc
out=$(mktemp)
all_pids=""
trap 'for p in $all_pids; do kill -KILL $p 2>/dev/null; done; rm -f "$out"' EXIT

if ! command -v mpirun >/dev/null; then
	echo "not ok - mpirun not found (install openmpi-bin: scripts/install-deps.sh)"; exit 1
fi

# start N: self-launches N ranks holding; sets LAUNCHER, PIDS, RANK0.
start() {
	"$BIN" dist-check -tp "$1" --hold 60 >"$out" 2>&1 &
	LAUNCHER=$!
	for _ in $(seq 300); do grep -q '^dist-check: holding' "$out" && break; sleep 0.1; done
	PIDS=$(sed -n 's/^dist-check: rank [0-9]* pid \([0-9]*\):.*/\1/p' "$out" | tr '\n' ' ')
	RANK0=$(sed -n 's/^dist-check: rank 0 pid \([0-9]*\):.*/\1/p' "$out")
	all_pids="$all_pids $PIDS $LAUNCHER"
}

# alive PIDS...: prints the pids still running (a zombie has ended: it only awaits reaping).
alive() {
	local p st
	for p in "$@"; do
		st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) || continue
		[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ] && printf '%s ' "$p"
	done
}

# ends NAME WANT_RC(0|nonzero) SIGNAL TARGET_PID
ends() {
	local name=$1 want=$2 sig=$3 target=$4
	if [ -z "$RANK0" ] || [ "$(echo $PIDS | wc -w)" -ne 3 ]; then
		echo "not ok - $name: ranks did not start"; sed 's/^/    /' "$out" | tail -5; return
	fi
	kill "-$sig" "$target"
	local rc left t0=$SECONDS
	# the launcher is our child: wait for it, bounded (never an unbounded wait: mpirun once
	# hung after a SIGTERM; a watchdog now kills it MLASERVE_MPIRUN_GRACE (10) s after its
	# last rank ended)
	for _ in $(seq 400); do [ -z "$(alive "$LAUNCHER")" ] && break; sleep 0.1; done
	if [ -n "$(alive "$LAUNCHER")" ]; then
		echo "not ok - $name: the launched process did not end in 40 s"
		ps -o pid,ppid,stat,wchan:24,cmd --ppid "$LAUNCHER" 2>/dev/null | sed 's/^/    /'
		kill -KILL "$LAUNCHER" $PIDS 2>/dev/null
		wait "$LAUNCHER" 2>/dev/null
		return
	fi
	wait "$LAUNCHER" 2>/dev/null; rc=$?
	for _ in $(seq 100); do left=$(alive $PIDS); [ -z "$left" ] && break; sleep 0.1; done
	if [ -n "$left" ]; then echo "not ok - $name: ranks left behind: $left"
	elif [ "$want" = 0 ] && [ "$rc" -ne 0 ]; then
		echo "not ok - $name: exit status $rc, expected 0"; sed 's/^/    /' "$out" | tail -5
	elif [ "$want" != 0 ] && [ "$rc" -eq 0 ]; then echo "not ok - $name: exit status 0"
	else echo "ok - $name (exit $rc, $((SECONDS - t0)) s)"; fi
}

# Idle CPU: ranks waiting for a plan must sleep, not spin (MPI's blocking wait spins).
start 3
tck=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
declare -A t0
for p in $PIDS; do t0[$p]=$(ticks $p); done
sleep 2
worst=0
for p in $PIDS; do
	d=$(( $(ticks $p) - ${t0[$p]} )); pct=$(( d * 100 / (2 * tck) ))
	[ $pct -gt $worst ] && worst=$pct
done
if [ -n "$PIDS" ] && [ $worst -le 10 ]; then echo "ok - idle ranks sleep (worst ${worst}% cpu over 2 s)"
else echo "not ok - idle ranks use up to ${worst}% cpu over 2 s (pids: $PIDS)"; fi
ends "SIGTERM to rank 0 stops every rank cleanly" 0 TERM "$RANK0"

start 3; ends "SIGINT to rank 0 stops every rank cleanly" 0 INT "$RANK0"
start 3; ends "SIGKILL of rank 0 takes the other ranks down" nonzero KILL "$RANK0"
start 3; ends "SIGTERM to the launched process ends every rank" nonzero TERM "$LAUNCHER"
start 3; ends "SIGKILL of the launched process (mpirun) ends every rank" nonzero KILL "$LAUNCHER"

# An mpirun that does not end after its ranks did is killed once MLASERVE_MPIRUN_GRACE has
# passed (a stand-in that ignores SIGTERM and outlives its one "rank", as the hung one did).
fake=$(mktemp)
printf '#!/bin/sh\ntrap "" TERM INT\nOMPI_COMM_WORLD_RANK=0 sleep 1 &\nexec sleep 120\n' >"$fake"; chmod +x "$fake"
MLASERVE_MPIRUN=$fake MLASERVE_MPIRUN_GRACE=2 "$BIN" dist-check -tp 3 --hold 60 >"$out" 2>&1 &
LAUNCHER=$!; all_pids="$all_pids $LAUNCHER"
sleep 0.5

t0=$SECONDS
kill -TERM "$LAUNCHER"
for _ in $(seq 200); do [ -z "$(alive "$LAUNCHER")" ] && break; sleep 0.1; done
if [ -n "$(alive "$LAUNCHER")" ]; then
	echo "not ok - a hung mpirun is killed after the grace: still running after 20 s"; kill -KILL "$LAUNCHER"
else
	wait "$LAUNCHER"; rc=$?
	if [ "$rc" -ne 0 ] && grep -q "did not end 2 s after its last rank did" "$out"; then
		echo "ok - a hung mpirun is killed after the grace (exit $rc, $((SECONDS - t0)) s)"
	else
		echo "not ok - a hung mpirun is killed after the grace: exit $rc"
		sed 's/^/    /' "$out" | tail -3
	fi
fi
rm -f "$fake"

# A worker rank of `serve -tp 2` killed mid-request: rank 0 logs which rank ended and how,
# the open stream gets an error event and [DONE], the request waiting for its whole answer a
# 500 JSON error, the job exits non-zero and leaves no rank behind.
srv_log=$(mktemp); s_out=$(mktemp); w_out=$(mktemp)
"$BIN" serve tests/fixtures/tiny-v3 -tp 2 --host 127.0.0.1 --port 0 --disable-log-requests >"$srv_log" 2>&1 &
LAUNCHER=$!; all_pids="$all_pids $LAUNCHER"
port=
for _ in $(seq 600); do
	port=$(sed -n 's|.* on http://127\.0\.0\.1:\([0-9]*\)/v1.*|\1|p' "$srv_log" | head -1)
	[ -n "$port" ] && break; sleep 0.1
done
ranks=$(for p in $(pgrep -P "$LAUNCHER"); do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=' && echo "$p"; done | tr '\n' ' ')
victim=$(for p in $ranks; do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && echo "$p"; done)
all_pids="$all_pids $ranks"
if [ -z "$port" ] || [ -z "$victim" ]; then
	echo "not ok - a dead worker rank fails the open requests: the server did not start"; tail -5 "$srv_log" | sed 's/^/    /'
else
	body='{"prompt": "hi", "max_tokens": 500, "n": 128, "ignore_eos": true'
	curl -sN -m 60 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' -d "$body, \"stream\": true}" >"$s_out" 2>&1 &
	c1=$!
	for _ in $(seq 300); do grep -q '^data: {' "$s_out" && break; sleep 0.05; done
	curl -s -m 60 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' -d "$body}" >"$w_out" 2>&1 &
	c2=$!
	sleep 0.2
	t0=$SECONDS
	kill -KILL "$victim"
	for _ in $(seq 400); do [ -z "$(alive "$LAUNCHER")" ] && break; sleep 0.1; done
	if [ -n "$(alive "$LAUNCHER")" ]; then
		echo "not ok - a dead worker rank fails the open requests: the server did not exit in 40 s"
		kill -KILL "$LAUNCHER" $ranks 2>/dev/null
	else
		wait "$LAUNCHER"; rc=$?
		wait $c1 $c2
		left=$(alive $ranks)
		why=
		grep -q "rank 1 of 2 (pid $victim) \(was killed by signal 9\|ended\)" "$srv_log" || why="$why; rank 0 did not log the dead rank"
		grep -q "SIGTERM: shutting down" "$srv_log" && why="$why; rank 0 logged a SIGTERM shutdown"
		grep -q '^data: {"error":{"message":"the engine failed: rank 1 of the 2-rank job' "$s_out" || why="$why; the stream got no error event"
		[ "$(grep '^data: ' "$s_out" | tail -1)" = "data: [DONE]" ] || why="$why; the stream did not end with [DONE]"
		grep -q '"code":500' "$w_out" || why="$why; the waiting request got no 500: $(head -c 200 "$w_out")"
		[ "$rc" -ne 0 ] || why="$why; exit status 0"
		[ -z "$left" ] || why="$why; ranks left: $left"
		if [ -z "$why" ]; then echo "ok - a dead worker rank fails the open requests and ends the job (exit $rc, $((SECONDS - t0)) s)"
		else echo "not ok - a dead worker rank fails the open requests${why}"; grep -E 'ERROR|WARN' "$srv_log" | sed 's/^/    /' | tail -5; fi
	fi
fi
rm -f "$srv_log" "$s_out" "$w_out"
exit 0
