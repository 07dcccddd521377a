#!/usr/bin/env bash
# Kimi's published chat template (tests/fixtures/tiny-kimi-k2/chat_template.jinja, K2-Thinking's)
# rendered by `mlaserve chat-template` byte for byte as Python's jinja2 renders it the way
# transformers does (tests/e2e/chat_template_oracle.py), on the conversations of
# tests/e2e/kimi_chat/: system + multi-turn, the default system prompt, tools (tool_declare,
# keys sorted as tokenization_kimi.py does), tool calls with functions.NAME:IDX ids and their
# results, thinking. Needs python3-jinja2 (Debian); without it the checks say they skipped.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/mlaserve
FX=tests/fixtures/tiny-kimi-k2
if ! python3 -c 'import jinja2' 2>/dev/null; then
	echo "ok - kimi chat template # skip python3-jinja2 is not installed (the oracle)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in tests/e2e/kimi_chat/*.json; do
	name=$(basename "$f" .json)
	for agp in "" --add-generation-prompt; do
		python3 tests/e2e/chat_template_oracle.py $FX "$f" $agp --sort-tools >"$tmp/want" 2>"$tmp/err" ||
			{ echo "not ok - kimi template $name $agp: the oracle failed: $(cat "$tmp/err")"; continue; }
		"$BIN" chat-template $FX --messages "$f" $agp >"$tmp/got" 2>"$tmp/err" ||
			{ echo "not ok - kimi template $name $agp: mlaserve failed: $(cat "$tmp/err")"; continue; }
		if cmp -s "$tmp/want" "$tmp/got"; then
			echo "ok - kimi template $name $agp ($(wc -c <"$tmp/got") bytes)"
		else
			echo "not ok - kimi template $name $agp differs from jinja2:"
			diff <(cat "$tmp/want"; echo) <(cat "$tmp/got"; echo) | head -10
		fi
	done
done
# the sorting matters: unsorted tools render differently (keys in the request's order)
python3 tests/e2e/chat_template_oracle.py $FX tests/e2e/kimi_chat/tools.json >"$tmp/unsorted"
"$BIN" chat-template $FX --messages tests/e2e/kimi_chat/tools.json >"$tmp/got"
if ! cmp -s "$tmp/unsorted" "$tmp/got" && grep -q '"function": {"description"' "$tmp/got"; then
	echo "ok - kimi template sorts the tools' keys"
else
	echo "not ok - kimi template sorts the tools' keys: $(head -c 200 "$tmp/got")"
fi
# a tokenizer.json checkpoint's template gets the tools as given
mkdir "$tmp/plain"
cp $FX/chat_template.jinja "$tmp/plain/"
"$BIN" chat-template "$tmp/plain" --messages tests/e2e/kimi_chat/tools.json >"$tmp/got"
if cmp -s "$tmp/unsorted" "$tmp/got"; then
	echo "ok - other checkpoints keep the tools' key order"
else
	echo "not ok - other checkpoints keep the tools' key order: $(head -c 200 "$tmp/got")"
fi
