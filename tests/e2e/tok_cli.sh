#!/usr/bin/env bash
# The text commands of the real binary: tokenize, detokenize, chat-template.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/mlaserve
FX=tests/fixtures
check() { # name, expected, actual
	if [ "$2" == "$3" ]; then echo "ok - $1"; else echo "not ok - $1: got '$3', expected '$2'"; fi
}
check "tokenize deepseek-llm" "[17464, 1843]" "$($BIN tokenize $FX/tokenizer --text 'Hello world')"
check "tokenize with BOS" "[100000, 17464, 1843]" \
	"$($BIN tokenize $FX/tokenizer --text 'Hello world' --add-special-tokens)"
check "tokenize added token (Führer)" "[37, 100014, 71, 6245]" "$($BIN tokenize $FX/tokenizer --text 'Führer')"
check "detokenize" "Hello world" "$($BIN detokenize $FX/tokenizer --ids 17464,1843)"
check "detokenize skips special tokens" " Hello world" \
	"$($BIN detokenize $FX/tokenizer --ids 100000,37727,1843 --skip-special-tokens)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '[{"role":"system","content":"S"},{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"again"}]' >"$tmp/m.json"
check "chat-template v3 multi-turn" \
	"<｜begin▁of▁sentence｜>S<｜User｜>hi<｜Assistant｜>yo<｜end▁of▁sentence｜><｜User｜>again<｜Assistant｜>" \
	"$($BIN chat-template $FX/tiny-v3 --messages "$tmp/m.json" --add-generation-prompt)"
# a DeepSeek-V4 checkpoint (no chat_template): DeepSeek's encoder, on its first published example
mkdir "$tmp/v4"
printf '{"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4"}' >"$tmp/v4/config.json"
printf '{"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}' >"$tmp/v4/tokenizer_config.json"
check "chat-template v4 encoder (dsv4/test_output_1.txt)" "$(cat $FX/dsv4/test_output_1.txt)" \
	"$($BIN chat-template "$tmp/v4" --messages $FX/dsv4/test_input_1.json --kwargs '{"thinking": true}')"
out=$($BIN tokenize $FX/tokenizer --text $'bad \xff' 2>"$tmp/err"); rc=$?
check "invalid utf-8 rejected (exit 1)" "1" "$rc"
grep -q "invalid utf-8" "$tmp/err" && echo "ok - invalid utf-8 message" || echo "not ok - invalid utf-8 message: $(cat "$tmp/err")"
printf '{"model": ' >"$tmp/tokenizer.json"
$BIN tokenize "$tmp" --text a >/dev/null 2>"$tmp/err"; rc=$?
check "malformed tokenizer.json (exit 1)" "1" "$rc"
grep -q "tokenizer.json" "$tmp/err" && echo "ok - malformed tokenizer.json names the file" \
	|| echo "not ok - malformed tokenizer.json names the file: $(cat "$tmp/err")"
