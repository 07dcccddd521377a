#!/usr/bin/env bash
# Runs every unit test binary, then every end-to-end test (tests/e2e/*.sh, tests/e2e/*.test.mjs),
# and prints "N passed, M failed" last. A binary that crashes counts as one failure.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
pass=0; fail=0
log=$(mktemp)
# The layering check, and the check itself refusing a planted upward include.
bash tests/layers_test.sh >"$log" 2>&1
p=$(grep -c '^ok - ' "$log"); f=$(grep -c '^not ok - ' "$log")
grep -A3 '^not ok - ' "$log" | sed 's/^/[check-layers] /'
echo "check-layers: $p passed, $f failed"
pass=$((pass + p)); fail=$((fail + f))
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	timeout 900 "$t" >"$log" 2>&1; rc=$?
	p=$(grep -c '^ok - ' "$log"); f=$(grep -c '^not ok - ' "$log")
	grep '^not ok - ' "$log" | sed "s/^/[$name] /"
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "[$name] not ok - exited with status $rc"; tail -5 "$log" | sed "s/^/[$name]   /"
		f=1
	fi
	echo "$name: $p passed, $f failed"
	pass=$((pass + p)); fail=$((fail + f))
done
# End-to-end shell tests: each prints ok/not ok lines like the unit tests.
for t in tests/e2e/*.sh; do
	[ -f "$t" ] || continue
	name=$(basename "$t")
	BUILD="$BUILD" timeout 900 bash "$t" >"$log" 2>&1; rc=$?
	p=$(grep -c '^ok - ' "$log"); f=$(grep -c '^not ok - ' "$log")
	grep '^not ok - ' "$log" | sed "s/^/[$name] /"
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "[$name] not ok - exited with status $rc"; tail -5 "$log" | sed "s/^/[$name]   /"; f=1
	fi
	echo "$name: $p passed, $f failed"
	pass=$((pass + p)); fail=$((fail + f))
done
# End-to-end tests through the official openai npm client (node's test runner). Without
# tests/e2e/node_modules (the openai package) or node they cannot run: say so, count nothing.
if ls tests/e2e/*.test.mjs >/dev/null 2>&1 && ! [ -d tests/e2e/node_modules ]; then
	echo "node e2e: skipped: tests/e2e/node_modules is missing" \
		"(cd tests/e2e && npm ci; scripts/test.sh does it)"
elif ls tests/e2e/*.test.mjs >/dev/null 2>&1 && ! command -v node >/dev/null; then
	echo "node e2e: skipped: node is not on PATH (scripts/install-deps.sh installs it)"
elif ls tests/e2e/*.test.mjs >/dev/null 2>&1; then
	BUILD="$BUILD" timeout 1200 node --test --test-reporter=tap tests/e2e/ >"$log" 2>&1
	p=$(grep -cE '^ *ok [0-9]+ ' "$log"); f=$(grep -cE '^ *not ok [0-9]+ ' "$log")
	grep -E '^ *not ok [0-9]+ ' "$log" | sed 's/^/[node] /'
	# what failed and where (the TAP blocks of the failures), so that a rare failure can be read
	grep -E "^ +(location|error|expected|actual|message): " "$log" | head -20 | sed 's/^ */[node]   /'
	echo "node e2e: $p passed, $f failed"
	pass=$((pass + p)); fail=$((fail + f))
fi
rm -f "$log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
