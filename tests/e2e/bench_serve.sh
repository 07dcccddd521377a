#!/usr/bin/env bash
# `mlaserve bench serve` against the real server (`mlaserve serve tests/fixtures/tiny-v3` on a
# free loopback port): with --ignore-eos every request must complete with exactly the asked
# lengths, the JSON result must carry vLLM's keys with p50 <= p99, a concurrency sweep gives
# one result per level and a PNG, and failures (unknown model -> 404, nothing listening,
# missing API key -> 401) are counted as failed, never dropped. Prints ok/not ok lines.
# BENCH may name another command line for the client (default: $BUILD/mlaserve bench serve).
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/mlaserve
read -r -a BENCH <<<"${BENCH:-$BIN bench serve}"
TOK=tests/fixtures/tiny-v3
export no_proxy=127.0.0.1 NO_PROXY=127.0.0.1
unset http_proxy HTTP_PROXY all_proxy ALL_PROXY OPENAI_API_KEY

WORK=$(mktemp -d)
SRV_PID=
stop_server() {
	if [ -n "$SRV_PID" ]; then
		kill "$SRV_PID" 2>/dev/null
		wait "$SRV_PID" 2>/dev/null
		SRV_PID=
	fi
}
trap 'stop_server; rm -rf "$WORK"' EXIT

ok() { echo "ok - $1"; }
notok() {
	echo "not ok - $1: $2"
	[ -f "$WORK/out" ] && sed 's/^/    /' "$WORK/out" | tail -15
}

if [ ! -x "$BIN" ]; then
	echo "not ok - $BIN missing (make first)"
	exit 1
fi
if ! "${BENCH[@]}" --help 2>/dev/null | grep -q -- '--max-concurrency'; then
	echo "not ok - '${BENCH[*]} --help' does not list the bench serve options (not routed?)"
	exit 1
fi

# start_server ARGS...: serve tiny-v3 on 127.0.0.1, port 0; sets PORT from the log line.
start_server() {
	"$BIN" serve "$TOK" --host 127.0.0.1 --port 0 "$@" >"$WORK/server.log" 2>&1 &
	SRV_PID=$!
	PORT=
	for _ in $(seq 1 300); do
		PORT=$(sed -n 's|.* on http://127\.0\.0\.1:\([0-9]*\)/v1.*|\1|p' "$WORK/server.log" | head -1)
		[ -n "$PORT" ] && return 0
		kill -0 "$SRV_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "not ok - server did not start"
	sed 's/^/    /' "$WORK/server.log" | tail -15
	exit 1
}

# check_json FILE PYTHON: runs the assertions with d = the parsed result file.
check_json() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
KEYS = ["completed", "failed", "duration", "total_input_tokens", "total_output_tokens",
        "request_throughput", "output_throughput", "total_token_throughput"]
for m in ("ttft", "tpot", "itl", "e2el"):
    KEYS += ["mean_%s_ms" % m, "median_%s_ms" % m, "p99_%s_ms" % m, "std_%s_ms" % m]
def schema(r, n):
    for k in KEYS:
        assert isinstance(r.get(k), (int, float)), "key %s: %r" % (k, r.get(k))
    for k in ("input_lens", "output_lens", "ttfts", "itls", "errors", "e2els"):
        assert isinstance(r.get(k), list) and len(r[k]) == n, "array %s" % k
    for m in ("ttft", "tpot", "itl", "e2el"):
        assert 0 <= r["median_%s_ms" % m] <= r["p99_%s_ms" % m], "%s: p50 %g > p99 %g" % (
            m, r["median_%s_ms" % m], r["p99_%s_ms" % m])
def good(r, n, out_len, in_len=None):
    schema(r, n)
    assert r["completed"] == n and r["failed"] == 0, (r["completed"], r["failed"], r["errors"][:2])
    assert all(e == "" for e in r["errors"])
    assert r["output_lens"] == [out_len] * n, r["output_lens"]
    assert r["total_output_tokens"] == n * out_len
    if in_len is not None:
        assert r["input_lens"] == [in_len] * n, r["input_lens"]
        assert r["total_input_tokens"] == n * in_len
    assert r["duration"] > 0 and r["mean_ttft_ms"] > 0 and r["mean_tpot_ms"] > 0
    assert r["output_throughput"] > 0
    assert all(0 < t <= e for t, e in zip(r["ttfts"], r["e2els"]))
    # TPOT of each request is (e2e - ttft) / (out - 1); the mean must match the arrays
    tp = [(e - t) / (out_len - 1) for t, e in zip(r["ttfts"], r["e2els"])]
    assert abs(sum(tp) / n * 1000 - r["mean_tpot_ms"]) < 1e-6 * max(1, r["mean_tpot_ms"])
    assert all(len(g) <= out_len - 1 for g in r["itls"])
exec(sys.argv[2])
EOF
}

start_server --max-num-seqs 16
BASE=http://127.0.0.1:$PORT

# 1. completions, random token-id prompts (exact lengths), concurrency 4
name="completions: every request completes with the requested lengths"
if timeout 120 "${BENCH[@]}" --base-url "$BASE" --tokenizer "$TOK" --num-prompts 12 \
	--random-input-len 24 --random-output-len 10 --ignore-eos --max-concurrency 4 \
	--result-file "$WORK/r1.json" >"$WORK/out" 2>&1 &&
	check_json "$WORK/r1.json" 'good(d, 12, 10, 24); assert d["max_concurrency"] == 4
assert d["max_concurrent_requests"] <= 4 and d["endpoint_type"] == "openai"' >>"$WORK/out" 2>&1; then
	ok "$name"
else
	notok "$name" "see output"
fi
name="the table has vLLM's lines"
if grep -q '^Successful requests: *12 *$' "$WORK/out" && grep -q '^Failed requests: *0 *$' "$WORK/out" &&
	grep -q '^Output token throughput (tok/s):' "$WORK/out" && grep -q '^P99 E2EL (ms):' "$WORK/out" &&
	grep -q '^Median TPOT (ms):' "$WORK/out" && grep -q '^Mean ITL (ms):' "$WORK/out"; then
	ok "$name"
else
	notok "$name" "lines missing"
fi

# 2. chat, text prompts re-tokenized to exact lengths, Poisson arrivals
name="chat: text prompts of exact token length, poisson arrivals"
if timeout 120 "${BENCH[@]}" --base-url "$BASE" --endpoint chat --tokenizer "$TOK" \
	--num-prompts 10 --random-input-len 20 --random-output-len 6 --ignore-eos \
	--request-rate 40 --seed 5 --result-file "$WORK/r2.json" >"$WORK/out" 2>&1 &&
	check_json "$WORK/r2.json" 'good(d, 10, 6, 20); assert d["request_rate"] == 40
assert d["endpoint_type"] == "openai-chat" and d["model_id"] == "tests/fixtures/tiny-v3"' >>"$WORK/out" 2>&1; then
	ok "$name"
else
	notok "$name" "see output"
fi

# 3. concurrency sweep with a plot
name="sweep 1,4: one result per level and a PNG"
if timeout 120 "${BENCH[@]}" --base-url "$BASE" --tokenizer "$TOK" --num-prompts 8 \
	--random-input-len 16 --random-output-len 8 --ignore-eos --max-concurrency 1,4 \
	--result-file "$WORK/sweep.json" --plot "$WORK/sweep.png" >"$WORK/out" 2>&1 &&
	check_json "$WORK/sweep.json" 'assert isinstance(d, list) and len(d) == 2
assert [r["max_concurrency"] for r in d] == [1, 4]
for r in d: good(r, 8, 8, 16)
assert d[0]["max_concurrent_requests"] == 1 and d[1]["max_concurrent_requests"] <= 4' >>"$WORK/out" 2>&1 &&
	[ "$(head -c 8 "$WORK/sweep.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
	[ "$(stat -c %s "$WORK/sweep.png")" -gt 5000 ]; then
	ok "$name"
else
	notok "$name" "see output"
fi

# 4. JSONL dataset with per-line output lengths
printf '%s\n' '{"prompt": "Hello there, how are you today?"}' '' \
	'{"prompt": "Write a short poem about the sea.", "output_len": 3}' >"$WORK/ds.jsonl"
name="dataset: prompts from JSONL, per-line output_len"
if timeout 120 "${BENCH[@]}" --base-url "$BASE" --endpoint chat --dataset "$WORK/ds.jsonl" \
	--tokenizer "$TOK" --num-prompts 4 --random-output-len 5 --ignore-eos \
	--result-file "$WORK/r4.json" >"$WORK/out" 2>&1 &&
	check_json "$WORK/r4.json" 'schema(d, 4); assert d["completed"] == 4 and d["output_lens"] == [5, 3, 5, 3]
assert d["input_lens"][0] == d["input_lens"][2] > 0' >>"$WORK/out" 2>&1; then
	ok "$name"
else
	notok "$name" "see output"
fi

# 5. unknown model: every request fails with the server's 404 message, exit status 1
name="unknown model: requests counted failed with the 404 message"
timeout 120 "${BENCH[@]}" --base-url "$BASE" --model no-such-model --tokenizer "$TOK" \
	--num-prompts 3 --random-input-len 8 --random-output-len 4 \
	--result-file "$WORK/r5.json" >"$WORK/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && check_json "$WORK/r5.json" 'schema(d, 3); assert d["completed"] == 0 and d["failed"] == 3
assert all(e.startswith("http 404: ") and "no-such-model" in e for e in d["errors"]), d["errors"]' >>"$WORK/out" 2>&1 &&
	grep -q '^Failed requests: *3 *$' "$WORK/out" && grep -q '^error (3 requests): http 404' "$WORK/out"; then
	ok "$name"
else
	notok "$name" "exit status $rc"
fi
stop_server

# 6. nothing listening: connection errors are failures
DEAD=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
name="nothing listening: connection errors counted failed"
timeout 60 "${BENCH[@]}" --base-url "http://127.0.0.1:$DEAD" --model m --tokenizer "$TOK" \
	--num-prompts 4 --random-input-len 8 --random-output-len 4 --max-concurrency 2 \
	--result-file "$WORK/r6.json" >"$WORK/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && check_json "$WORK/r6.json" 'schema(d, 4); assert d["completed"] == 0 and d["failed"] == 4
assert all("onnect" in e for e in d["errors"]), d["errors"]' >>"$WORK/out" 2>&1; then
	ok "$name"
else
	notok "$name" "exit status $rc"
fi
name="nothing listening, no --model: one error line, exit 1"
timeout 60 "${BENCH[@]}" --base-url "http://127.0.0.1:$DEAD" --tokenizer "$TOK" --num-prompts 2 \
	>"$WORK/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q 'v1/models' "$WORK/out"; then
	ok "$name"
else
	notok "$name" "exit status $rc"
fi

# 7. --api-key: without it 401 (failed), with it all succeed
start_server --api-key sekret
BASE=http://127.0.0.1:$PORT
name="api key: missing key -> 401 failures, --api-key -> success"
timeout 60 "${BENCH[@]}" --base-url "$BASE" --model "$TOK" --tokenizer "$TOK" --num-prompts 2 \
	--random-input-len 8 --random-output-len 4 --ignore-eos --result-file "$WORK/r7.json" \
	>"$WORK/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && check_json "$WORK/r7.json" 'assert d["failed"] == 2 and all(e.startswith("http 401") for e in d["errors"]), d["errors"]' >>"$WORK/out" 2>&1 &&
	timeout 60 "${BENCH[@]}" --base-url "$BASE" --api-key sekret --tokenizer "$TOK" \
		--num-prompts 2 --random-input-len 8 --random-output-len 4 --ignore-eos \
		--result-file "$WORK/r7.json" >>"$WORK/out" 2>&1 &&
	check_json "$WORK/r7.json" 'good(d, 2, 4, 8)' >>"$WORK/out" 2>&1; then
	ok "$name"
else
	notok "$name" "exit status $rc"
fi
stop_server

# 8. usage errors exit 2
name="usage errors exit 2"
"${BENCH[@]}" --endpoint nope --tokenizer "$TOK" >"$WORK/out" 2>&1; rc1=$?
"${BENCH[@]}" --max-concurrency 1,,4 --tokenizer "$TOK" >>"$WORK/out" 2>&1; rc2=$?
"${BENCH[@]}" --num-prompts 5 >>"$WORK/out" 2>&1; rc3=$? # random prompts need --tokenizer
if [ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && [ $rc3 -eq 2 ]; then
	ok "$name"
else
	notok "$name" "statuses $rc1 $rc2 $rc3"
fi

# 9. bench latency (offline, no server): the JSON's figures, with and without warm-up prefills,
# and a bad --num-iters-warmup refused with the option's name
name="bench latency: --num-iters-warmup 0 and 2 report a prefill, -1 is refused"
ok9=1
for w in 0 2; do
	timeout 120 "$BIN" bench latency "$TOK" --input-len 12 --output-len 4 --threads 2 \
		--num-iters-warmup "$w" --output-json "$WORK/lat$w.json" >>"$WORK/out" 2>&1 &&
		check_json "$WORK/lat$w.json" 'assert d["prefill_tokens_per_s"] > 0 and d["decode_tokens_per_s"] > 0, d' \
			>>"$WORK/out" 2>&1 || ok9=0
done
"$BIN" bench latency "$TOK" --num-iters-warmup -1 >"$WORK/err9" 2>&1; rc=$?
if [ $ok9 -eq 1 ] && [ $rc -eq 1 ] && grep -q -- "--num-iters-warmup: invalid value '-1'" "$WORK/err9"; then
	ok "$name"
else
	cat "$WORK/err9" >>"$WORK/out"
	notok "$name" "exit status $rc"
fi
