#!/usr/bin/env bash
# `make check-layers` on the tree, and the checker against small planted trees: an arrow the
# list does not allow, a folder missing from it, a cycle in the list, a one-header arrow, and
# cycles of units inside a folder (by include, by call through a shared header, allowed).
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
check() { bash scripts/check_layers.sh "$t/D.md" "$t/src" "$t/allow" >"$t/out" 2>&1; }
: >"$t/allow"

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

# cycles of units inside one folder (app: a, b, c)
list "$(printf 'app -> ops base\nops -> base\nbase ->')"
printf '#include "app/b.h"\nint a_run(void) { return b_get(); }\n' >"$t/src/app/a.c"
printf '/* */\n' >"$t/src/app/a.h"
printf 'int b_get(void);\n' >"$t/src/app/b.h"
printf '#include "app/b.h"\n/* a_run() is not called here */\nint b_get(void) { return 1; }\n' >"$t/src/app/b.c"
if check; then ok "a.c including b.h, b.c not a.h: no cycle"; else no "a.c including b.h, b.c not a.h: no cycle"; cat "$t/out"; fi
printf '#include "app/a.h"\n' >>"$t/src/app/b.c"
if check; then no "b.c including a.h back is a refused cycle"; elif grep -q 'src/app: a cycle between units a b:.*src/app/b.c:4 -> app/a.h' "$t/out"; then
	ok "b.c including a.h back is a refused cycle, named with its includes"; else no "the cycle names its includes"; cat "$t/out"; fi
printf 'app: a b c  # planted\n' >"$t/allow"
if check; then ok "a cycle the allow-list names passes"; else no "a cycle the allow-list names passes"; cat "$t/out"; fi
printf 'app: a c  # planted\n' >"$t/allow"
if check; then no "an allow-list line must name every unit of the cycle"; else ok "an allow-list line must name every unit of the cycle"; fi
: >"$t/allow"
# a header shared by both (x_internal.h): the includes show no cycle, the calls do
printf '#include "app/shared_internal.h"\nint a_run(void) { return b_get(); }\n' >"$t/src/app/a.c"
printf '#include "app/shared_internal.h"\nint b_get(void) { return 1; }\n' >"$t/src/app/b.c"
printf 'int a_run(void);\nint b_get(void);\n' >"$t/src/app/shared_internal.h"
rm -f "$t/src/app/a.h" "$t/src/app/b.h"
if check; then ok "one file calling another through a shared header: no cycle"; else no "a call one way: no cycle"; cat "$t/out"; fi
printf 'int c_twice(void) { return 2 * a_run(); }\n' >>"$t/src/app/b.c"
if check; then no "calls both ways through a shared header are a cycle"; elif grep -q 'src/app/b.c:3 calls a_run() of app/a.c' "$t/out"; then
	ok "calls both ways through a shared header are a refused cycle"; else no "the cycle names its calls"; cat "$t/out"; fi
