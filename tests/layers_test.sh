#!/usr/bin/env bash
# `make check-layers` on the tree, and the checker against small planted trees: an arrow the
# list does not allow, a folder missing from it, a cycle in the list, a one-header arrow.
set -u
cd "$(dirname "$0")/.."
ok() { echo "ok - $1"; }
no() { echo "not ok - $1"; }

if out=$(make -s check-layers 2>&1); then ok "make check-layers: $out"; else no "make check-layers"; echo "$out"; fi

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/src/base" "$t/src/ops" "$t/src/app"
printf '#include "base/b.h"\n' >"$t/src/ops/o.c"
printf '#include "ops/o.h"\n#include "base/b.h"\n' >"$t/src/app/a.c"
printf '/* */\n' >"$t/src/base/b.h"
list() { printf '# x\n\n```layers\n%s\n```\n' "$1" >"$t/D.md"; }
check() { bash scripts/check_layers.sh "$t/D.md" "$t/src" >"$t/out" 2>&1; }

list "$(printf 'app -> ops base\nops -> base\nbase ->')"
if check; then ok "a tree that follows its list passes"; else no "a tree that follows its list passes"; cat "$t/out"; fi

printf '#include "app/a.h"\n' >>"$t/src/ops/o.c"
if check; then no "an upward include is refused"; elif grep -q 'src/ops/o.c:2: ops -> app/a.h' "$t/out"; then
	ok "an upward include is refused, named by file and line"; else no "refusal names the arrow"; cat "$t/out"; fi
printf '#include "base/b.h"\n' >"$t/src/ops/o.c"

list "$(printf 'app -> ops base\nbase ->')"
if check; then no "a folder missing from the list may include nothing outside itself"; else
	ok "a folder missing from the list may include nothing outside itself"; fi

list "$(printf 'app -> ops base\nops -> app base\nbase ->')"
if check; then no "a cycle in the list is refused"; elif grep -q 'cycle' "$t/out"; then
	ok "a cycle in the list is refused"; else no "a cycle in the list is refused"; cat "$t/out"; fi

list "$(printf 'app -> ops/o.h base\nops -> base\nbase ->')"
if check; then ok "an arrow to one header allows that header"; else no "an arrow to one header allows that header"; cat "$t/out"; fi
printf '#include "ops/p.h"\n' >>"$t/src/app/a.c"
if check; then no "an arrow to one header allows only that header"; else ok "an arrow to one header allows only that header"; fi
