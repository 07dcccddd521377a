#!/usr/bin/env bash
# Builds mlaserve and serves the bundled default model (or the MODEL_DIR given) on :8000.
set -eu
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
make -j"$(nproc)" build/mlaserve >/dev/null
exec build/mlaserve serve "$@"
