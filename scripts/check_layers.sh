#!/usr/bin/env bash
# The layering check (`make check-layers`): every `#include "dir/file.h"` of a file under
# src/ must be an arrow that the dependency list of docs/DESIGN.md allows. The list is the
# fenced block that starts with ```layers: one line per folder,
#     folder -> allowed folder or header ...
# A folder may include its own files; an arrow names a folder (any file in it) or one header
# (that header only). Folders absent from the list may include nothing outside themselves.
# The folder arrows must be acyclic, so that the include graph of src/ has a direction; an
# arrow to one header is a declared exception (an interface header that lower code reads,
# e.g. the KV cache's layout for the attention kernels) and is left out of that test.
#
# Usage: check_layers.sh [DESIGN.md] [SRC_DIR]. Prints each refused arrow as
# FILE:LINE: FROM -> TO, and exits 1 when there is one; 0 and one summary line otherwise.
set -u
design=${1:-docs/DESIGN.md}
src=${2:-src}
[ -f "$design" ] || { echo "check_layers: $design: no such file" >&2; exit 2; }
[ -d "$src" ] || { echo "check_layers: $src: no such folder" >&2; exit 2; }

rules=$(awk '/^```layers[ \t]*$/ {on = 1; next} on && /^```/ {exit} on' "$design")
[ -n "$rules" ] || { echo "check_layers: $design: no \`\`\`layers block" >&2; exit 2; }

# Every include of every source file: FILE LINE FROM TARGET
incs=$(cd "$src" && find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' \) | sed 's#^\./##' | sort |
	xargs -r awk '{
		if (match($0, /^[ \t]*#[ \t]*include[ \t]*"[^"]+"/)) {
			s = substr($0, RSTART, RLENGTH); sub(/^[^"]*"/, "", s); sub(/"$/, "", s)
			from = FILENAME; sub(/\/[^\/]*$/, "", from); if (from == FILENAME) from = "."
			print FILENAME, FNR, from, s
		}
	}')

printf '%s\n' "$rules" | awk -v incs="$incs" -v design="$design" -v src="$src" '
function folder(p) { if (p !~ /\//) return "."; sub(/\/[^\/]*$/, "", p); return p }
BEGIN { bad = 0 }
NF == 0 || $1 ~ /^#/ { next }
{
	if ($2 != "->") { printf "%s: layers: bad line: %s\n", design, $0; bad = 1; next }
	if ($1 in declared) { printf "%s: layers: %s listed twice\n", design, $1; bad = 1 }
	declared[$1] = 1
	for (i = 3; i <= NF; i++) { allow[$1, $i] = 1; n_out[$1]++; out[$1, n_out[$1]] = $i }
}
END {
	# the folder arrows are acyclic: depth-first search over folders
	for (f in declared) color[f] = 0
	for (f in declared) if (color[f] == 0 && dfs(f)) bad = 1
	n = split(incs, lines, "\n"); checked = 0
	for (k = 1; k <= n; k++) {
		if (split(lines[k], w, " ") < 4) continue
		file = w[1]; line = w[2]; from = w[3]; to = w[4]; tf = folder(to); checked++
		if (tf == from || (from, tf) in allow || (from, to) in allow) continue
		printf "%s/%s:%s: %s -> %s: not an arrow of %s\n", src, file, line, from, to, design
		bad = 1
	}
	if (!bad) printf "check-layers: %d includes of %s follow %s\n", checked, src, design
	exit bad
}
function dfs(f,    i, t, cyc) {
	color[f] = 1; stack[++sp] = f
	for (i = 1; i <= n_out[f]; i++) {
		t = out[f, i]
		if (!(t in declared) || t == f) continue
		if (color[t] == 1) { printf "%s: layers: a cycle through %s -> %s\n", design, f, t; sp--; return 1 }
		if (color[t] == 0 && dfs(t)) { sp--; return 1 }
	}
	color[f] = 2; sp--
	return 0
}'
