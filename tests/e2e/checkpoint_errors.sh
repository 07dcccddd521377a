#!/usr/bin/env bash
# Broken checkpoints through the real binary: copies tests/fixtures/tiny-v3, corrupts it one way
# per case, runs `mlaserve logits` and expects exit status 1, exactly one line on stderr naming
# the file and the tensor (or config key), and no crash. Prints ok/not ok lines.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
BIN=$ROOT/${BUILD:-build}/mlaserve
FIX=$ROOT/tests/fixtures/tiny-v3

if [ ! -x "$BIN" ] || ! "$BIN" --help 2>/dev/null | grep -q '^ *logits '; then
	echo "not ok - mlaserve logits missing ($BIN)"
	exit 1
fi
command -v python3 >/dev/null || { echo "not ok - python3 missing"; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# st_edit FILE OP ARGS: rewrites a safetensors file with the standard library only.
#   set NAME FIELD JSON | del NAME | hdrlen N | garbage | truncate N |
#   index NAME=SHARD...  (writes model.safetensors.index.json: every tensor -> FILE, plus extras)
#   split  (FILE -> two shards + index) | extra  (adds an MTP layer-3 tensor and an inv_freq) |
#   nan NAME INDEX  (a NaN weight)
st_edit() {
	python3 - "$@" <<'EOF'
import json, os, struct, sys
path, op, args = sys.argv[1], sys.argv[2], sys.argv[3:]
raw = open(path, 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]

def write(h, hlen=None):
    text = json.dumps(h).encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text) if hlen is None else hlen) + text + data)

if op == 'set':
    header[args[0]][args[1]] = json.loads(args[2]); write(header)
elif op == 'del':
    del header[args[0]]; write(header)
elif op == 'hdrlen':
    with open(path, 'r+b') as f: f.write(struct.pack('<Q', int(args[0])))
elif op == 'garbage':
    with open(path, 'r+b') as f: f.seek(8); f.write(b'\x00\xffnot json' + b' ' * (n - 10))
elif op == 'truncate':
    with open(path, 'r+b') as f: f.truncate(int(args[0]))
elif op == 'index':
    shard = os.path.basename(path)
    wm = {k: shard for k in header if k != '__metadata__'}
    wm.update(dict(a.split('=', 1) for a in args))
    with open(os.path.join(os.path.dirname(path), 'model.safetensors.index.json'), 'w') as f:
        json.dump({'metadata': {}, 'weight_map': wm}, f)
elif op == 'split':
    names = sorted((k for k in header if k != '__metadata__'), key=lambda k: header[k]['data_offsets'])
    wm, d = {}, os.path.dirname(path)
    for i, part in enumerate((names[:len(names) // 2], names[len(names) // 2:])):
        shard, h, blob = 'model-%05d-of-00002.safetensors' % (i + 1), {}, b''
        for k in part:
            b, e = header[k]['data_offsets']
            h[k] = dict(header[k], data_offsets=[len(blob), len(blob) + e - b])
            blob += data[b:e]
            wm[k] = shard
        text = json.dumps(h).encode()
        open(os.path.join(d, shard), 'wb').write(struct.pack('<Q', len(text)) + text + blob)
    json.dump({'metadata': {}, 'weight_map': wm}, open(os.path.join(d, 'model.safetensors.index.json'), 'w'))
    os.remove(path)
elif op == 'nan':  # nan NAME INDEX: element INDEX of a bf16 tensor becomes a NaN
    b = header[args[0]]['data_offsets'][0] + 2 * int(args[1])
    data = data[:b] + b'\xc0\x7f' + data[b + 2:]; write(header)
elif op == 'extra':
    end = len(data)
    header['model.layers.3.enorm.weight'] = {'dtype': 'BF16', 'shape': [128], 'data_offsets': [end, end + 256]}
    header['model.layers.0.self_attn.rotary_emb.inv_freq'] = {'dtype': 'F32', 'shape': [8], 'data_offsets': [end + 256, end + 288]}
    data += b'\x80\x3f' * 128 + b'\0' * 32
    write(header)
elif op == 'add':  # add NAME DTYPE SHAPE: a zero tensor appended
    nb = {'I32': 4, 'F32': 4, 'BF16': 2, 'I64': 8}[args[1]]
    shape = json.loads(args[2])
    for d in shape: nb *= d
    header[args[0]] = {'dtype': args[1], 'shape': shape, 'data_offsets': [len(data), len(data) + nb]}
    data += b'\0' * nb
    write(header)
else:
    sys.exit('st_edit: unknown op ' + op)
EOF
}

# cfg_set KEY JSON: config.json[KEY] = JSON
cfg_set() {
	python3 - "$M/config.json" "$1" "$2" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c[sys.argv[2]] = json.loads(sys.argv[3])
json.dump(c, open(sys.argv[1], 'w'), indent=2)
EOF
}

# fresh [DIR]: $M a copy of DIR (default tiny-v3), $ST its model.safetensors
fresh() {
	rm -rf "$WORK/m"
	cp -r "${1:-$FIX}" "$WORK/m"
	M=$WORK/m
	ST=$M/model.safetensors
}

# check NAME SUBSTRING...: runs logits on $M; every substring must be in the one stderr line.
check() {
	local name=$1; shift
	local rc lines why=""
	if [ -n "${MTP_RUN:-}" ]; then
		(cd "$WORK" && timeout 60 "$BIN" generate "$M" --prompts-file "$WORK/p.jsonl" --max-tokens 2 \
			--speculative-config '{"method": "deepseek_mtp"}' >"$WORK/stdout" 2>"$WORK/stderr")
	else
		(cd "$WORK" && timeout 60 "$BIN" logits "$M" --tokens 0,1 --out "$WORK/out.bin" ${CHECK_ARGS:-} \
			>"$WORK/stdout" 2>"$WORK/stderr")
	fi
	rc=$?
	lines=$(wc -l <"$WORK/stderr")
	if [ "$rc" -ne 1 ]; then
		why="exit status $rc, expected 1"
	elif [ "$lines" -ne 1 ]; then
		why="$lines lines on stderr, expected 1"
	fi
	for s in "$@"; do
		[ -n "$why" ] && break
		grep -qF -- "$s" "$WORK/stderr" || why="stderr lacks '$s'"
	done
	if ls "$WORK"/core* >/dev/null 2>&1; then why="${why:-core dump}"; rm -f "$WORK"/core*; fi
	if [ -z "$why" ]; then
		echo "ok - $name"
	else
		echo "not ok - $name: $why; stderr: $(head -c 400 "$WORK/stderr" | tr '\n' '|')"
	fi
}

LM=lm_head.weight
fresh; st_edit "$ST" truncate 4
check "file shorter than 8 bytes" "$ST: header: file is 4 bytes"
fresh; st_edit "$ST" hdrlen "$(stat -c %s "$ST")"
check "header length beyond the file" "$ST: header: length" "runs past the end of the file"
fresh; st_edit "$ST" hdrlen $((1 << 40))
check "header length over 100 MB" "$ST: header: length 1099511627776 exceeds the 100 MB limit"
fresh; st_edit "$ST" garbage
check "garbage header" "$ST: header: invalid JSON"
fresh; st_edit "$ST" truncate 30000
check "truncated data section" "$ST: tensor model." "run past the data section"
fresh; st_edit "$ST" set $LM dtype '"F8_E5M2"'
check "unknown dtype" "$ST: tensor $LM: unknown dtype \"F8_E5M2\""
fresh; st_edit "$ST" set $LM dtype '"F32"'
check "size != dtype x shape" "$ST: tensor $LM: data_offsets" "but shape [1024, 128] of F32 needs 524288"
fresh; st_edit "$ST" set $LM shape '[1024, -128]'
check "negative shape" "$ST: tensor $LM: shape [1024,-128] is not a list of non-negative integers"
fresh; st_edit "$ST" set $LM data_offsets '[2104064, 1841920]'
check "begin > end" "$ST: tensor $LM: data_offsets [2104064, 1841920]: begin > end"
fresh; st_edit "$ST" set $LM data_offsets '[1842048, 2104192]'
check "offsets beyond the data section" "$ST: tensor $LM: data_offsets [1842048, 2104192] run past the data section"
fresh; st_edit "$ST" set $LM data_offsets '[192, 262336]'
check "overlapping offsets" "$ST: tensor $LM: data_offsets [192, 262336] overlap tensor model.embed_tokens.weight"
fresh; st_edit "$ST" del model.norm.weight
check "missing tensor" "$M: missing tensor model.norm.weight"
Q=model.layers.0.self_attn.q_a_proj.weight
fresh; st_edit "$ST" set $Q shape '[128, 96]'
check "wrong-shape tensor" "$ST: tensor $Q: shape [128, 96], expected [96, 128]"
N=model.layers.1.mlp.gate.e_score_correction_bias
fresh; st_edit "$ST" set $N dtype '"I32"'
check "wrong-dtype tensor" "$ST: tensor $N:" "dtype I32"
fresh; st_edit "$ST" index "extra.weight=model-00002-of-00002.safetensors"
check "index names a missing shard" "$M/model.safetensors.index.json: tensor extra.weight:" \
	"model-00002-of-00002.safetensors: cannot open"
fresh; st_edit "$ST" index "ghost.weight=model.safetensors"
check "index tensor not in its shard" "$M/model.safetensors.index.json: tensor ghost.weight: not found in its shard"
fresh; cfg_set scoring_func '"relu"'
check "config: unsupported value" "$M/config.json: key \"scoring_func\": unsupported value \"relu\" (expected softmax or sigmoid)"
fresh; cfg_set n_group 3
check "config: n_group not dividing n_routed_experts" "$M/config.json: key \"n_group\": invalid value 3"
fresh; cfg_set hidden_size '"128"'
check "config: wrong JSON type" "$M/config.json: key \"hidden_size\": expected an integer, got \"128\""
fresh; rm "$M/config.json"
check "config: missing file" "$M/config.json: cannot open: No such file or directory"

# --quantization fp8 cannot scale a block that holds a NaN: it names the weight
U=model.layers.1.mlp.experts.2.up_proj.weight
fresh; st_edit "$ST" nan $U 130
CHECK_ARGS="-q fp8" check "-q fp8: a NaN weight" "$ST: tensor $U: weight [1, 2] is not finite (nan)" "--quantization fp8"
# and --quantization int8 a row group
fresh; st_edit "$ST" nan $U 130
CHECK_ARGS="-q int8" check "-q int8: a NaN weight" "$ST: tensor $U: weight [1, 2] is not finite (nan)" \
	"--quantization int8"

# The MTP module, loaded for --speculative-config deepseek_mtp (its own shard in tiny-v3-mtp).
echo '{"prompt_token_ids": [0, 5, 6]}' >"$WORK/p.jsonl"
mtp_fresh() {
	rm -rf "$WORK/m"
	cp -rL "$ROOT/tests/fixtures/tiny-v3-mtp" "$WORK/m"
	M=$WORK/m
	ST=$M/model-00002-of-00002.safetensors
}
MTP_RUN=1
E=model.layers.3.eh_proj.weight
mtp_fresh; st_edit "$ST" set $E shape '[256, 128]'
check "MTP: wrong-shape eh_proj" "$ST: tensor $E: shape [256, 128], expected [128, 256]"
mtp_fresh; st_edit "$ST" del model.layers.3.enorm.weight; python3 - "$M/model.safetensors.index.json" <<'PY'
import json, sys
p = sys.argv[1]; d = json.load(open(p)); del d['weight_map']['model.layers.3.enorm.weight']; json.dump(d, open(p, 'w'))
PY
check "MTP: missing enorm" "$M: missing tensor model.layers.3.enorm.weight"
fresh
check "MTP: a checkpoint without the module" "$M/config.json: speculative method deepseek_mtp needs the checkpoint's MTP layer" \
	"num_nextn_predict_layers is 0"
MTP_RUN=

# DeepSeek-V3.2's indexer tensors (tiny-v32): missing, misshapen, of a wrong dtype; bad config
v32_fresh() {
	rm -rf "$WORK/m"
	cp -r "$ROOT/tests/fixtures/tiny-v32" "$WORK/m"
	M=$WORK/m
	ST=$M/model.safetensors
}
IX=model.layers.1.self_attn.indexer
v32_fresh; st_edit "$ST" del $IX.wk.weight
check "V3.2: missing indexer wk" "$M: missing tensor $IX.wk.weight"
v32_fresh; st_edit "$ST" set $IX.wq_b.weight shape '[96, 512]'
check "V3.2: wrong-shape indexer wq_b" "$ST: tensor $IX.wq_b.weight: shape [96, 512], expected [512, 96]"
v32_fresh; st_edit "$ST" set $IX.k_norm.bias dtype '"I32"'
check "V3.2: wrong-dtype indexer k_norm.bias" "$ST: tensor $IX.k_norm.bias:" "dtype I32"
v32_fresh; st_edit "$ST" del $IX.weights_proj.weight
check "V3.2: missing indexer weights_proj" "$M: missing tensor $IX.weights_proj.weight"
v32_fresh; cfg_set index_head_dim 48
check "V3.2 config: index_head_dim not a power of two" "$M/config.json: key \"index_head_dim\""
v32_fresh; cfg_set index_topk 2000000000
check "V3.2 config: index_topk out of range" "$M/config.json: key \"index_topk\"" "at most 1048576"
v32_fresh; cfg_set index_n_heads 0
check "V3.2 config: index_n_heads 0" "$M/config.json: key \"index_n_heads\""
v32_fresh; CHECK_ARGS="--attention-backend FLASHMLA" check "V3.2: a dense attention backend is refused" \
	"attention backend FLASHMLA serves dense MLA attention and the model needs sparse" "FLASHMLA_SPARSE"
fresh; CHECK_ARGS="--attention-backend FLASHMLA_SPARSE" check "a dense model refuses the sparse backend" \
	"attention backend FLASHMLA_SPARSE serves sparse"

# compressed-tensors pack-quantized int4 (tiny-v3-int4): what its config or tensors say that the
# int4 row does not read is refused with one line naming the key or the tensor
ct_fresh() { fresh "$ROOT/tests/fixtures/tiny-v3-int4"; }
# qcfg PY: a Python statement on q = config.json's quantization_config (w: its group's weights)
qcfg() {
	python3 - "$M/config.json" "$1" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); q = c['quantization_config']; w = q['config_groups']['group_0']['weights']
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], 'w'), indent=2)
EOF
}
CG="quantization_config.config_groups.group_0"
ct_fresh; qcfg "w['num_bits'] = 8"
check "int4: num_bits 8" "$M/config.json: key \"$CG.weights.num_bits\": unsupported value 8" "expected 4"
ct_fresh; qcfg "w['group_size'] = 128"
check "int4: group_size 128" "$M/config.json: key \"$CG.weights.group_size\": unsupported value 128" "expected 32"
ct_fresh; qcfg "w['symmetric'] = False"
check "int4: asymmetric (zero points)" "key \"$CG.weights.symmetric\": unsupported value false" "zero points"
ct_fresh; qcfg "w['actorder'] = 'group'"
check "int4: actorder group" "key \"$CG.weights.actorder\": unsupported value \"group\"" "activation ordering"
ct_fresh; qcfg "w['dynamic'] = True"
check "int4: dynamic" "key \"$CG.weights.dynamic\": unsupported value true"
ct_fresh; qcfg "w['strategy'] = 'channel'"
check "int4: channel strategy" "key \"$CG.weights.strategy\": unsupported value \"channel\"" "expected group"
ct_fresh; qcfg "q['format'] = 'int-quantized'"
check "int4: another format" "key \"quantization_config.format\": unsupported value \"int-quantized\"" \
	"expected pack-quantized"
ct_fresh; qcfg "q['config_groups']['group_0']['input_activations'] = {'num_bits': 8, 'type': 'int', 'dynamic': True}"
check "int4: quantized activations (W4A8)" "key \"$CG.input_activations\"" "W4A16"
ct_fresh; qcfg "q['quant_method'] = 'awq'"
check "int4: another quant_method" "key \"quantization_config.quant_method\": unsupported value \"awq\""
ct_fresh; qcfg "q['ignore'].append('re:(')"
check "int4: a bad ignore regex" "$M/config.json: quantization_config.ignore[4] \"re:(\""
ct_fresh; qcfg "q['ignore'][1] = 're:.*self_attn\\\\.(kv_a_proj_with_mqa|q_a_proj|q_b_proj|o_proj).*'"
check "int4: kv_b_proj not ignored" "model.layers.0.self_attn.kv_b_proj: pack-quantized int4 is not supported" \
	"quantization_config.ignore must list it"
X=model.layers.1.mlp.experts.2.down_proj
ct_fresh; st_edit "$ST" add $X.weight_zero_point I32 '[128, 1]'
check "int4: a zero-point tensor" "$ST: tensor $X.weight_zero_point: zero points (asymmetric int4) is not supported"
ct_fresh; st_edit "$ST" add $X.weight_g_idx I32 '[64]'
check "int4: a g_idx tensor" "$ST: tensor $X.weight_g_idx: activation order (g_idx) is not supported"
ct_fresh; st_edit "$ST" set $X.weight_packed shape '[64, 16]'
check "int4: wrong-shape weight_packed" "$ST: tensor $X.weight_packed: shape [64, 16], expected [128, 8]"
ct_fresh; st_edit "$ST" nan $X.weight_shape 0
check "int4: weight_shape not the module's" "$ST: tensor $X.weight_shape: [32704, 64], expected [128, 64]"
ct_fresh; st_edit "$ST" del $X.weight_scale
check "int4: missing weight_scale" "$M: missing tensor $X.weight_scale"
ct_fresh; st_edit "$ST" nan $X.weight_scale 5
check "int4: a NaN scale" "$ST: tensor $X.weight_scale: scale [2, 1] is nan"

# DeepSeek-V4-Flash-Base: routed experts fp8 e4m3 with e8m0 128x128 block scales
v4b_fresh() { fresh "$ROOT/tests/fixtures/tiny-v4-base"; }
VX=layers.1.ffn.experts.3
v4b_fresh; st_edit "$ST" set $VX.w2.scale shape '[1, 2]'
check "V4-Base: wrong-shape expert scale" "$ST: tensor $VX.w2.scale: shape [1, 2], expected [2, 1]"
v4b_fresh; st_edit "$ST" set $VX.w1.weight dtype '"I8"'
check "V4-Base: wrong-dtype expert weight" "$ST: tensor $VX.w1.weight:" "dtype I8"
v4b_fresh; st_edit "$ST" set $VX.w3.weight shape '[256, 128]'
check "V4-Base: wrong-shape expert weight" "$ST: tensor $VX.w3.weight: shape [256, 128], expected [128, 256]"
v4b_fresh; st_edit "$ST" del $VX.w3.scale
check "V4-Base: missing expert scale" "$M: missing tensor $VX.w3.scale"
fresh "$ROOT/tests/fixtures/tiny-v4"; cfg_set expert_dtype '"fp8"'
check "V4: MXFP4 experts under expert_dtype fp8" "tensor layers.0.ffn.experts.0.w1.weight: shape [128, 128], expected [128, 256]"

# Accepted variants must give the very same logits as the fixture itself.
same() {
	local name=$1 why=""
	(cd "$WORK" && timeout 60 "$BIN" logits "$M" --tokens 0,1 --out "$WORK/out.bin" \
		>/dev/null 2>"$WORK/stderr") || why="exit status $?: $(head -c 300 "$WORK/stderr")"
	[ -n "$why" ] || cmp -s "$WORK/ref.bin" "$WORK/out.bin" || why="logits differ from the fixture's"
	if [ -z "$why" ]; then echo "ok - $name"; else echo "not ok - $name: $why"; fi
}
if timeout 60 "$BIN" logits "$FIX" --tokens 0,1 --out "$WORK/ref.bin" >/dev/null 2>&1; then
	fresh; st_edit "$ST" split
	same "two shards + index load the same weights"
	fresh; st_edit "$ST" extra
	same "MTP layer and rotary_emb.inv_freq tensors are ignored"
else
	echo "not ok - logits on the intact fixture failed"
fi
# V4 without expert_dtype: the experts' dtype decides (FP8 here), the same logits as with the key
if timeout 60 "$BIN" logits "$ROOT/tests/fixtures/tiny-v4-base" --tokens 0,1 --out "$WORK/ref.bin" >/dev/null 2>&1; then
	v4b_fresh; python3 -c "import json, sys; c = json.load(open(sys.argv[1])); del c['expert_dtype']; json.dump(c, open(sys.argv[1], 'w'))" "$M/config.json"
	same "V4-Base without expert_dtype: FP8 experts by their dtype"
else
	echo "not ok - logits on the intact tiny-v4-base failed"
fi
