#!/usr/bin/env bash
# Checks scripts/v4_reference.py (the float64 DeepSeek-V4 reference) against the goldens of
# tests/fixtures/tiny-v4 (an independent float64 oracle): prefill logits, MTP logits, indexer
# selections, routed experts, token-by-token decode logits and greedy.json, act-quant off and on.
# Prints one PASS/FAIL line per comparison; exits 1 on any FAIL.
#
#   scripts/check_v4_reference.sh            len1 len5 len17 len64 (about 2 minutes on one core)
#   V4_NAMES=len1,len5 scripts/check_v4_reference.sh
#   V4_NAMES=len1,len5,len17,len64,len300 scripts/check_v4_reference.sh   (len300: several minutes)
#   V4_TOL=1e-6 ...                          the max |logit - golden| allowed (default 1e-5)
set -eu
cd "$(dirname "$0")/.."
exec nice -n 10 python3 scripts/v4_reference.py --check tests/fixtures/tiny-v4 \
	--names "${V4_NAMES:-len1,len5,len17,len64}" --tol "${V4_TOL:-1e-5}" --aq
