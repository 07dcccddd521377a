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
# Inside a folder the files must not depend on each other in a cycle either. A unit is a
# file name without its extension (a.c, a.h and a.inc are the unit a); a.c or a.h including
# b.h is an arrow a -> b, and so is a.c calling a function that b.c defines (through a header
# shared by several files, such as x_internal.h, that the includes alone do not show).
# Arrows that come back to where they started (a -> b -> a, or longer) are a cycle: its
# units cannot be understood, tested or replaced one without the others. A cycle is refused
# unless a line of the allow-list (ALLOW, scripts/check_layers_cycles.txt) names all of its
# units, with the reason:
#     folder: unit unit ...   # why this cycle stays
#
# Usage: check_layers.sh [DESIGN.md] [SRC_DIR] [ALLOW]. Prints each refused arrow as
# FILE:LINE: FROM -> TO and each refused cycle as FOLDER: a cycle between units ...: with
# the includes and calls among them, and exits 1 when there is one; 0 and one summary line
# otherwise (after a note for each allow-list line whose cycle is gone).
set -u
design=${1:-docs/DESIGN.md}
src=${2:-src}
allow_file=${3:-$(dirname "$0")/check_layers_cycles.txt}
[ -f "$design" ] || { echo "check_layers: $design: no such file" >&2; exit 2; }
[ -d "$src" ] || { echo "check_layers: $src: no such folder" >&2; exit 2; }
allowed=""
if [ -e "$allow_file" ]; then
	[ -d "$allow_file" ] && { echo "check_layers: $allow_file: a folder" >&2; exit 2; }
	allowed=$(sed 's/#.*//' "$allow_file")
fi

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

# The calls between the files of a folder: each function a C file defines (its first line: a
# name at the start of a line followed by "(", not static, not ending in ";") as
# FILE LINE NAME, then each first use of one of them, comments and strings left out, by
# another C file of its folder (a .inc file is a part of the file that includes it):
# FILE LINE NAME DEFINING_FILE
files=$(cd "$src" && find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' \) | sed 's#^\./##' | sort)
defs=$(cd "$src" && printf '%s\n' "$files" | grep '\.c$' |
	xargs -r awk '/^[A-Za-z_]/ && !/^(static|typedef|extern|struct[^(]*[{;]|enum|union)/ && !/;[ \t]*$/ &&
		match($0, /[A-Za-z_][A-Za-z0-9_]*\(/) { print FILENAME, FNR, substr($0, RSTART, RLENGTH - 1) }')
calls=$(cd "$src" && printf '%s\n' "$files" | grep '\.c$' | xargs -r awk -v defs="$defs" '
	function folder(p) { if (p !~ /\//) return "."; sub(/\/[^\/]*$/, "", p); return p }
	BEGIN { # a name defined twice is local to each file (a static inline under a macro)
		n = split(defs, d, "\n")
		for (i = 1; i <= n; i++) if (split(d[i], w, " ") == 3) { if (w[3] in at) twice[w[3]] = 1; at[w[3]] = w[1] }
		for (name in twice) delete at[name]
	}
	FNR == 1 { delete seen; cmt = 0 }
	{
		t = $0; out = ""
		while (t != "") { # drop comments and string and character literals
			if (cmt) { if (!match(t, /\*\//)) { t = ""; break } t = substr(t, RSTART + 2); cmt = 0; continue }
			if (!match(t, /\/\*|\/\/|"([^"\\]|\\.)*"|\047([^\047\\]|\\.)*\047/)) { out = out t; break }
			out = out substr(t, 1, RSTART - 1) " "; m = substr(t, RSTART, 2); t = substr(t, RSTART + RLENGTH)
			if (m == "/*") cmt = 1; else if (m == "//") t = ""
		}
		while (match(out, /[A-Za-z_][A-Za-z0-9_]*/)) {
			name = substr(out, RSTART, RLENGTH); out = substr(out, RSTART + RLENGTH)
			if (!(name in at) || (name in seen) || at[name] == FILENAME || folder(at[name]) != folder(FILENAME)) continue
			seen[name] = 1; print FILENAME, FNR, name, at[name]
		}
	}')

printf '%s\n' "$rules" | awk -v incs="$incs" -v calls="$calls" -v design="$design" -v src="$src" -v allowed="$allowed" -v allow_file="$allow_file" '
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
	n_cyc = unit_cycles(lines, n)
	if (!bad) printf "check-layers: %d includes of %s follow %s; no cycle of units inside a folder%s\n", checked, src,
		design, n_cyc ? " but the " n_cyc " that " allow_file " allows" : ""
	exit bad
}
function unit(p) { sub(/^.*\//, "", p); sub(/\.[^.]*$/, "", p); return p }
# The include cycles inside each folder: the strongly connected components (Tarjan) of the unit
# graph; each component of two or more units is one cycle (or several that share units).
# Returns the number of allowed ones; sets bad for the others.
function unit_cycles(lines, n,    k, w, u, v, from, e, i, j, m, a, f, us, nal) {
	m = split(allowed, a, "\n")
	for (i = 1; i <= m; i++) {
		if (split(a[i], w, " ") < 1) continue
		if (w[1] !~ /:$/) { printf "%s:%d: not FOLDER: UNIT ...: %s\n", allow_file, i, a[i]; bad = 1; continue }
		f = w[1]; sub(/:$/, "", f); n_al++; al_folder[n_al] = f
		for (k = 2; k in w; k++) al_unit[n_al, w[k]] = 1
	}
	for (k = 1; k <= n; k++) {
		if (split(lines[k], w, " ") < 4) continue
		from = w[3]
		if (folder(w[4]) != from) continue
		u = from SUBSEP unit(w[1]); v = from SUBSEP unit(w[4])
		if (u == v) continue
		node[u] = 1; node[v] = 1
		if (!((u, v) in edge)) { edge[u, v] = w[1] ":" w[2] " -> " w[4]; n_adj[u]++; adj[u, n_adj[u]] = v }
	}
	m = split(calls, a, "\n")
	for (k = 1; k <= m; k++) {
		if (split(a[k], w, " ") < 4) continue
		from = folder(w[1]); u = from SUBSEP unit(w[1]); v = from SUBSEP unit(w[4])
		if (u == v) continue
		node[u] = 1; node[v] = 1
		if (!((u, v) in edge)) {
			edge[u, v] = w[1] ":" w[2] " calls " w[3] "() of " w[4]
			n_adj[u]++; adj[u, n_adj[u]] = v
		}
	}
	nal = 0
	for (u in node) if (!(u in idx)) tarjan(u)
	for (i = 1; i <= n_scc; i++) {
		f = scc_folder(i); us = scc_units(i)
		if (scc_allowed(i, f)) { nal++; continue }
		printf "%s/%s: a cycle between units %s:", src, f, us
		for (k = 1; k <= scc_n[i]; k++)
			for (e = 1; e <= n_adj[scc[i, k]]; e++)
				if (comp[adj[scc[i, k], e]] == i)
					printf " %s/%s;", src, edge[scc[i, k], adj[scc[i, k], e]]
		printf " not allowed by %s\n", allow_file
		bad = 1
	}
	for (j = 1; j <= n_al; j++)
		if (!(j in al_used)) printf "check-layers: note: %s allows a cycle in %s/%s that is no longer there\n", allow_file, src, al_folder[j]
	return nal
}
function tarjan(u,    e, v) {
	idx[u] = low[u] = ++t_next; tstack[++tsp] = u; on_stack[u] = 1
	for (e = 1; e <= n_adj[u]; e++) {
		v = adj[u, e]
		if (!(v in idx)) { tarjan(v); if (low[v] < low[u]) low[u] = low[v] }
		else if (on_stack[v] && idx[v] < low[u]) low[u] = idx[v]
	}
	if (low[u] != idx[u]) return
	if (tstack[tsp] == u) { on_stack[u] = 0; tsp--; return } # one unit: no cycle
	n_scc++
	do { v = tstack[tsp--]; on_stack[v] = 0; scc[n_scc, ++scc_n[n_scc]] = v; comp[v] = n_scc } while (v != u)
}
function scc_folder(i,    p) { split(scc[i, 1], p, SUBSEP); return p[1] }
function scc_units(i,    k, p, s, j, t, names) {
	for (k = 1; k <= scc_n[i]; k++) { split(scc[i, k], p, SUBSEP); names[k] = p[2] }
	for (k = 2; k <= scc_n[i]; k++) # insertion sort: a stable report
		for (j = k; j > 1 && names[j - 1] > names[j]; j--) { t = names[j]; names[j] = names[j - 1]; names[j - 1] = t }
	s = names[1]
	for (k = 2; k <= scc_n[i]; k++) s = s " " names[k]
	return s
}
function scc_allowed(i, f,    j, k, p, ok) {
	for (j = 1; j <= n_al; j++) {
		if (al_folder[j] != f) continue
		ok = 1
		for (k = 1; k <= scc_n[i] && ok; k++) { split(scc[i, k], p, SUBSEP); if (!((j, p[2]) in al_unit)) ok = 0 }
		if (ok) { al_used[j] = 1; return 1 }
	}
	return 0
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
