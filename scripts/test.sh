#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, runs unit + end-to-end tests.
set -eu
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ -f tests/e2e/package.json ] && [ ! -d tests/e2e/node_modules ]; then
	(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
fi
make -j"$(nproc)" all >/dev/null
exec bash tests/run.sh
