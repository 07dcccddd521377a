#!/usr/bin/env bash
# Kimi K2 (fp8), K2-Thinking (compressed-tensors int4 experts) and GLM-5 (bf16) in their
# published widths with --load-format dummy: each two-layer stack of bench/configs runs
# `mlaserve bench latency` (prefill, decode at batch 1 and 2), and its load report's bytes per
# format equal the ones this script computes from config.json (int4 in groups of 32: 0.5625
# bytes a weight; fp8 with fp32 128x128 block scales; K2-Thinking's ignore list bf16); the
# published configs are refused in one line before allocating when MLASERVE_MEM_AVAILABLE
# is short. Prints ok/not ok.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/${BUILD:-build}/mlaserve
command -v python3 >/dev/null || { echo "not ok - python3 missing"; exit 1; }
[ -x "$BIN" ] || { echo "not ok - $BIN missing"; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. tests/e2e/refused.inc

for c in kimi-k2-2L-e16 kimi-k2-thinking-2L-e16 glm-5-2L-e16; do
	what="bench latency $c --load-format dummy"
	if ! timeout 600 "$BIN" bench latency "bench/configs/$c" --load-format dummy --batch-size 1,2 --input-len 8 \
		--output-len 3 --threads 2 --output-json "$WORK/$c.json" >"$WORK/$c.out" 2>&1; then
		echo "not ok - $what: $(tail -1 "$WORK/$c.out")"
		continue
	fi
	python3 - "bench/configs/$c/config.json" "$WORK/$c.json" "$WORK/$c.out" "$what" <<'PY'
import json, math, re, sys
c, d, log, what = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), open(sys.argv[3]).read(), sys.argv[4]
D, V, L = c['hidden_size'], c['vocab_size'], c['num_hidden_layers']
H, dn, dr, dv = c['num_attention_heads'], c['qk_nope_head_dim'], c['qk_rope_head_dim'], c['v_head_dim']
q = c.get('quantization_config', {})
fp8, ct = q.get('quant_method') == 'fp8', q.get('quant_method') == 'compressed-tensors'
by = {}
def add(fmt, n):
    by[fmt] = by.get(fmt, 0) + n
def mat(name, rows, cols, linear=True):
    ignored = any(re.match(p[3:], name) if p.startswith('re:') else p == name for p in q.get('ignore', []))
    if ct and linear and not ignored:  # 32x32 blocks of 512 nibble bytes + 32 bf16 scales
        add('int4 + group scales', math.ceil(rows / 32) * math.ceil(cols / 32) * 576)
    elif fp8 and linear:
        add('fp8 e4m3 + block scales', rows * cols + 4 * math.ceil(rows / 128) * math.ceil(cols / 128))
    else:
        add('bf16', 2 * rows * cols)
mat('model.embed_tokens', V, D, False)
mat('lm_head', V, D, False)
for i in range(L):
    p = 'model.layers.%d.' % i
    mat(p + 'self_attn.q_a_proj', c['q_lora_rank'], D)
    mat(p + 'self_attn.q_b_proj', H * (dn + dr), c['q_lora_rank'])
    mat(p + 'self_attn.kv_a_proj_with_mqa', c['kv_lora_rank'] + dr, D)
    mat(p + 'self_attn.kv_b_proj', H * (dn + dv), c['kv_lora_rank'])
    mat(p + 'self_attn.o_proj', D, H * dv)
    if 'index_n_heads' in c:
        mat(p + 'self_attn.indexer.wq_b', c['index_n_heads'] * c['index_head_dim'], c['q_lora_rank'])
        mat(p + 'self_attn.indexer.wk', c['index_head_dim'], D)
        mat(p + 'self_attn.indexer.weights_proj', c['index_n_heads'], D, False)
    if i < c['first_k_dense_replace']:
        for n, r, k in (('gate', c['intermediate_size'], D), ('up', c['intermediate_size'], D), ('down', D, c['intermediate_size'])):
            mat(p + 'mlp.%s_proj' % n, r, k)
        continue
    mat(p + 'mlp.gate', c['n_routed_experts'], D, False)
    I, S = c['moe_intermediate_size'], c['n_shared_experts'] * c['moe_intermediate_size']
    for e in range(c['n_routed_experts']):
        for n, r, k in (('gate', I, D), ('up', I, D), ('down', D, I)):
            mat(p + 'mlp.experts.%d.%s_proj' % (e, n), r, k)
    for n, r, k in (('gate', S, D), ('up', S, D), ('down', D, S)):
        mat(p + 'mlp.shared_experts.%s_proj' % n, r, k)
m = re.search(r'weights by format \(dummy\): (.*)', log)
got = {f.strip(): float(g) / (1000 if u == 'MB' else 1)
       for f, g, u in re.findall(r'([a-z0-9 +]+?) ([0-9.]+) (GB|MB)', m.group(1))} if m else {}
want = {f: round(b / 1e9, 2) for f, b in by.items()}
fmt_ok = all(abs(got.get(f, -1) - w) <= 0.011 for f, w in want.items()) and set(got) <= set(want) | {'f32'}
r = d['runs']
run_ok = (d['prefill_tokens_per_s'] > 0 and [x['batch_size'] for x in r] == [1, 2]
          and all(x['decode_tokens_per_s'] > 0 and x['weight_bytes_per_step'] > 0 for x in r))
print('%s - %s: decode %s tokens/s' % ('ok' if run_ok else 'not ok', what, [round(x['decode_tokens_per_s'], 2) for x in r]))
print('%s - %s: bytes by format %s, computed %s' % ('ok' if fmt_ok else 'not ok', what, got, want))
PY
done
if grep -q "compressed-tensors pack-quantized int4 (dummy weights): .* GB of linear layers repacked" \
	"$WORK/kimi-k2-thinking-2L-e16.out"; then
	echo "ok - K2-Thinking's dummy experts go through the pack-quantized repack"
else
	echo "not ok - K2-Thinking's dummy experts: $(grep 'int4' "$WORK/kimi-k2-thinking-2L-e16.out")"
fi
for c in kimi-k2 kimi-k2-thinking glm-5; do
	MLASERVE_MEM_AVAILABLE=16G refused "bench/configs/$c dummy on 16 GB" "dummy weights need .* GB (.*), .* GB available" \
		"$BIN" bench latency "bench/configs/$c" --load-format dummy --input-len 4 --output-len 2
done
