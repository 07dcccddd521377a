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
# Kimi's tokenizer (tiktoken.model, no tokenizer.json): special-token text is one id each; a bad
# rank file is one line naming the file and the line, exit 1 (tokenize and serve alike)
check "tokenize kimi (tiktoken.model) specials" "[771, 408, 257, 785, 104, 105, 770]" \
	"$($BIN tokenize $FX/tiny-kimi-k2 --text '<|im_user|>user<|im_middle|>hi<|im_end|>')"
check "tokenize kimi given the tiktoken.model path (its folder's specials)" "[97, 4098]" \
	"$($BIN tokenize $FX/kimi-tok/tiktoken.model --text 'a<|im_end|>')"
check "detokenize kimi, split characters joined" "你好 🙂" \
	"$($BIN detokenize $FX/kimi-tok --ids "$($BIN tokenize $FX/kimi-tok --text '你好 🙂' | tr -d '[] ')")"
mkdir "$tmp/kimi"
cp $FX/tiny-kimi-k2/*.json $FX/tiny-kimi-k2/*.safetensors $FX/tiny-kimi-k2/tiktoken.model "$tmp/kimi/"
sed -i '300s/.*/QUJD x/' "$tmp/kimi/tiktoken.model"
for cmd in "tokenize $tmp/kimi --text a" "serve $tmp/kimi --port 0"; do
	$BIN $cmd >/dev/null 2>"$tmp/err"; rc=$?
	check "bad tiktoken.model: ${cmd%% *} exits 1" "1" "$rc"
	check "bad tiktoken.model: ${cmd%% *} names file and line" \
		"$tmp/kimi/tiktoken.model: line 300: bad rank (expected an integer from 0 to 2147483646)" \
		"$(grep -v '^INFO ' "$tmp/err" | sed 's/^mlaserve [a-z]*: //')"
done
