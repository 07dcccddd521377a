#!/usr/bin/env bash
# Distributed layer end to end: `mlaserve dist-check` (groups, all-reduce, all-gathers,
# reduce-scatter, uneven column gather, plan broadcast, DCP decode attention with the LSE
# correction vs the single-process result) in a world of one, self-launched with -tp/-dcp,
# under an explicit mpirun, and with Open MPI forced onto TCP over loopback. Prints ok/not ok.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/mlaserve
. tests/e2e/mpi_env.inc
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

ok() { echo "ok - $1"; }
notok() { echo "not ok - $1: $2"; sed 's/^/    /' "$out" | tail -15; }

# run NAME N_RANKS CMD...: expects exit 0, "K passed, 0 failed on N_RANKS ranks" and one
# "rank R pid" line per rank (no double launch).
run() {
	local name=$1 n=$2; shift 2
	timeout 60 "$@" >"$out" 2>&1; local rc=$?
	if [ $rc -ne 0 ] && lsan_tool_crashed "$out"; then
		echo "# $name: LeakSanitizer's tracer crashed (the tool, not a leak): rerun without leak checking"
		ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" timeout 60 "$@" >"$out" 2>&1; rc=$?
	fi
	local ranks; ranks=$(grep -c '^dist-check: rank [0-9]* pid ' "$out")
	if [ $rc -ne 0 ]; then notok "$name" "exit status $rc"
	elif ! grep -qE "^dist-check: [0-9]+ passed, 0 failed on $n ranks" "$out"; then notok "$name" "no clean summary"
	elif [ "$ranks" -ne "$n" ]; then notok "$name" "$ranks ranks reported, expected $n"
	else ok "$name"; fi
}

# fails NAME PATTERN CMD...: expects a non-zero exit and PATTERN in the output.
fails() {
	local name=$1 pat=$2; shift 2
	timeout 60 "$@" >"$out" 2>&1; local rc=$?
	if [ $rc -eq 0 ]; then notok "$name" "exit status 0"
	elif ! grep -q -- "$pat" "$out"; then notok "$name" "no '$pat' in the output"
	else ok "$name"; fi
}

if ! command -v mpirun >/dev/null; then
	echo "not ok - mpirun not found (install openmpi-bin: scripts/install-deps.sh)"; exit 1
fi

run "world of one without mpi" 1 "$BIN" dist-check
grep -q 'mpi no' "$out" || echo "not ok - world of one initialised mpi"
run "self-launch -tp 2 -dcp 2" 2 "$BIN" dist-check -tp 2 -dcp 2
run "self-launch -tp 4 -dcp 2 (two dcp groups)" 4 "$BIN" dist-check -tp 4 -dcp 2
run "self-launch -tp 4 -dcp 4" 4 "$BIN" dist-check -tp 4 -dcp 4
run "self-launch -tp 3 (tp only, uneven vocab split)" 3 "$BIN" dist-check --tensor-parallel-size 3
run "self-launch -tp 2 -dcp 2 interleave 8" 2 "$BIN" dist-check -tp 2 -dcp 2 --dcp-kv-cache-interleave-size 8
run "explicit mpirun -np 4 keeps its ranks" 4 $MPIRUN -np 4 "$BIN" dist-check -tp 4 -dcp 2
grep -q 'mpi yes' "$out" || echo "not ok - explicit mpirun ranks did not use mpi"
run "tcp over loopback, shared memory off, -np 4" 4 $MPIRUN -np 4 --mca pml ob1 \
	--mca btl tcp,self --mca btl_tcp_if_include lo "$BIN" dist-check -tp 4 -dcp 2
run "shared memory without single-copy (the container fallback)" 4 \
	env OMPI_MCA_btl_vader_single_copy_mechanism=none "$BIN" dist-check -tp 4 -dcp 2
run "tcp over loopback, -np 2 -dcp 2" 2 $MPIRUN -np 2 --mca pml ob1 \
	--mca btl tcp,self --mca btl_tcp_if_include lo "$BIN" dist-check -tp 2 -dcp 2

fails "dcp must divide tp" "must divide tensor-parallel-size" "$BIN" dist-check -tp 4 -dcp 3
fails "world size must equal tp" "mpi world has 2 ranks but tensor-parallel-size is 4" \
	$MPIRUN -np 2 "$BIN" dist-check -tp 4
fails "no relaunch loop" "MLASERVE_DIST_LAUNCHED is set" env MLASERVE_DIST_LAUNCHED=1 "$BIN" dist-check -tp 2
fails "missing mpirun is a clear error" "cannot run /nonexistent/mpirun" \
	env MLASERVE_MPIRUN=/nonexistent/mpirun "$BIN" dist-check -tp 2
exit 0
