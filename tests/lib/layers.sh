#!/usr/bin/env bash
# layers.sh [--strict] [BUILD_DIR [SRC_DIR]]: the shape of amqplock's
# sources, read from their objects (BUILD_DIR/*.o, default build/, as
# make amqplock leaves them; SRC_DIR default src/, HACKING.md beside it).
# An arrow a -> b when a.o uses a symbol (nm: undefined) that b.o, and no
# other object of SRC_DIR/*.c, defines (nm: global). It reports, and
# fails on:
#   - a circle: files that reach each other through arrows, with the
#     symbols that tie them;
#   - more than MAX_LAYERS layers: the longest path of arrows, counted in
#     files (a circle counts as one while there is one);
#   - a .c file of more than MAX_LINES lines.
# It also holds the arrows against HACKING.md's layer table: a symbol a
# file uses must be declared in a header its row names (its own header,
# and what a *_parts.h header of its row includes, count as named). That
# part only reports, unless --strict: the rows do not name the headers
# reached through those they name (status.h, through conn.h, above
# all); followed through every header, no use leaves its row.
# The last line sums up: "layers: 0 circles, 11 layers, longest file
# src/x.c 640 lines". Exit status 0 if it passes, 1 if not, 2 if it
# cannot tell (an object missing or older than its source). Runs in
# tests/layers.bats and `make layers`.
set -u
export LC_ALL=C
MAX_LAYERS=12
MAX_LINES=650

strict=0
[ "${1:-}" = --strict ] && { strict=1; shift; }
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build}
src=${2:-$top/src}
table=$src/../HACKING.md

objs=()
for c in "$src"/*.c; do
    o=$build/$(basename "$c" .c).o
    if [ ! -e "$o" ]; then
        echo "layers: no $o: build the objects first (make amqplock)" >&2
        exit 2
    fi
    if [ "$c" -nt "$o" ]; then
        echo "layers: $o is older than $c: build the objects again (make amqplock)" >&2
        exit 2
    fi
    objs+=("$o")
done
symbols=$(nm -A -P -g "${objs[@]}") || { echo "layers: nm could not read the objects in $build" >&2; exit 2; }

# One stream of tagged lines, sorted so that every D (a definition) comes
# before the U (uses) that need it, each kind in file and name order:
#   D FILE SYMBOL   FILE.o defines SYMBOL (global: T, D, B, R and the like)
#   F FILE LINES    src/FILE.c and its length
#   I HEADER INC    src/HEADER.h includes "INC.h"
#   M HEADER NAME   NAME appears in src/HEADER.h outside comments
#   R FILE NAMES    FILE's row in HACKING.md's table: what it may include
#   U FILE SYMBOL   FILE.o uses SYMBOL, defined elsewhere
{
    # ("DIR/FILE.o: SYMBOL TYPE [VALUE SIZE]")
    awk '{
        at = index($0, ".o: "); f = substr($0, 1, at - 1); sub(/^.*\//, "", f)
        split(substr($0, at + 4), w, " ")
        if (w[2] == "U") print "U", f, w[1]
        else if (w[2] ~ /^[TDBRCGSVW]$/) print "D", f, w[1]
    }' <<<"$symbols"
    awk 'FNR == 1 { if (f != "") print "F", f, n; f = FILENAME; sub(/^.*\//, "", f); sub(/\.c$/, "", f); n = 0 }
        { n++ }
        END { if (f != "") print "F", f, n }' "$src"/*.c
    awk '
        FNR == 1 { h = FILENAME; sub(/^.*\//, "", h); sub(/\.h$/, "", h); incomment = 0 }
        {
            # the line without its comments
            line = $0; code = ""
            while (line != "") {
                if (incomment) {
                    p = index(line, "*/")
                    if (!p) { line = ""; break }
                    line = substr(line, p + 2); incomment = 0
                    continue
                }
                p = index(line, "/*"); q = index(line, "//")
                if (q && (!p || q < p)) { code = code substr(line, 1, q - 1); line = "" }
                else if (p) { code = code substr(line, 1, p - 1) " "; line = substr(line, p + 2); incomment = 1 }
                else { code = code line; line = "" }
            }
            if (code ~ /^[ \t]*#[ \t]*include[ \t]*"/) {
                sub(/^[^"]*"/, "", code); sub(/\.h".*/, "", code)
                print "I", h, code
                next
            }
            gsub(/"([^"\\]|\\.)*"/, " ", code)
            gsub(/[^A-Za-z0-9_]+/, " ", code)
            n = split(code, w, " ")
            for (i = 1; i <= n; i++)
                if (w[i] ~ /^[A-Za-z_]/ && !seen[h, w[i]]++) print "M", h, w[i]
        }' "$src"/*.h
    # (as tests/docs.bats reads the table: files in the first column,
    # what they may include in the third)
    sed -n '/^## The layers/,/^## /p' "$table" | grep '^| `' |
        awk -F'|' '{
            names = $4; gsub(/[`,]/, " ", names)
            n = split($2, f, "`")
            for (i = 2; i <= n; i += 2) { g = f[i]; sub(/\.c$/, "", g); print "R", g, names }
        }'
} | sort | awk -v max_layers=$MAX_LAYERS -v max_lines=$MAX_LINES -v strict=$strict '
    $1 == "D" { definers[$3]++; definer[$3] = $2; next }
    $1 == "F" { n++; file[n] = $2; id[$2] = n; lines[n] = $3; next }
    $1 == "I" { includes[$2] = includes[$2] " " $3; next }
    $1 == "M" { declared_in[$3] = declared_in[$3] " " $2 ".h"; next }
    $1 == "R" { $1 = ""; g = $2; $2 = ""; row[g] = $0; has_row[g] = 1; next }
    $1 == "U" {
        if (definers[$3] != 1) next
        a = id[$2]; b = id[definer[$3]]
        if (!a || !b || a == b) next
        if (!((a, b) in ties)) { out[a] = out[a] " " b; ties[a, b] = $3; arrows++ }
        else ties[a, b] = ties[a, b] ", " $3
        uses[++nuses] = a SUBSEP b SUBSEP $3
        next
    }

    # Tarjan: the strongly connected parts, numbered so that a part only
    # reaches parts of lower numbers.
    function strong(v,    next_of, k, i, w) {
        index_of[v] = low[v] = ++counter
        stack[++depth] = v; on_stack[v] = 1
        k = split(out[v], next_of, " ")
        for (i = 1; i <= k; i++) {
            w = next_of[i] + 0
            if (!(w in index_of)) {
                strong(w)
                if (low[w] < low[v]) low[v] = low[w]
            } else if (on_stack[w] && index_of[w] < low[v]) low[v] = index_of[w]
        }
        if (low[v] == index_of[v]) {
            parts++
            do {
                w = stack[depth--]; on_stack[w] = 0
                part[w] = parts; size[parts]++
            } while (w != v)
        }
    }

    # allowed(FILE): the headers FILE may use, as " h1 h2 ... ": its row,
    # its own header, and what the *_parts.h headers among them include
    # (sem_parts.h pulls in conn, names, probe and sem).
    function allowed(f,    todo, k, i, h, got, more, m, j, list) {
        got = " " f " " row[f] " "
        todo = got
        while (todo != "") {
            k = split(todo, list, " "); todo = ""
            for (i = 1; i <= k; i++) {
                h = list[i]
                if (h !~ /_parts$/) continue
                m = split(includes[h], more, " ")
                for (j = 1; j <= m; j++)
                    if (index(got, " " more[j] " ") == 0) { got = got more[j] " "; todo = todo " " more[j] }
            }
        }
        return got
    }

    END {
        if (!arrows) { print "layers: no arrow between the objects: is nm'"'"'s output what layers.sh reads?" > "/dev/stderr"; exit 2 }
        fail = ""
        for (v = 1; v <= n; v++) if (!(v in index_of)) strong(v)
        for (v = 1; v <= n; v++)
            members[part[v]] = members[part[v]] (members[part[v]] == "" ? "" : " ") file[v] ".c"

        # circles, and what ties each
        circles = 0
        for (p = 1; p <= parts; p++) {
            if (size[p] < 2) continue
            circles++
            print "layers: circle " circles ", " size[p] " files: " members[p]
            for (a = 1; a <= n; a++) {
                if (part[a] != p) continue
                for (b = 1; b <= n; b++)
                    if (b != a && part[b] == p && (a, b) in ties)
                        print "  " file[a] ".c -> " file[b] ".c: " ties[a, b]
            }
        }
        if (circles) fail = fail ", circles"

        # layers: the longest path through the parts (a part only has
        # arrows to lower numbers, so those are counted first)
        for (p = 1; p <= parts; p++) height[p] = 1
        for (p = 1; p <= parts; p++)
            for (a = 1; a <= n; a++) {
                if (part[a] != p) continue
                k = split(out[a], next_of, " ")
                for (i = 1; i <= k; i++) {
                    q = part[next_of[i] + 0]
                    if (q != p && height[q] + 1 > height[p]) { height[p] = height[q] + 1; below[p] = q }
                }
            }
        layers = 0
        for (p = 1; p <= parts; p++) if (height[p] > layers) { layers = height[p]; top_part = p }
        path = ""
        for (p = top_part; p; p = below[p]) {
            m = members[p]; gsub(/ /, "+", m)
            path = path (path == "" ? "" : " > ") m
        }
        print "layers: the longest path, " layers " files" (circles ? " (a circle counted as one)" : "") ": " path
        if (layers > max_layers) fail = fail ", more than " max_layers " layers"

        # lengths
        longest = 1
        for (a = 1; a <= n; a++) {
            if (lines[a] > lines[longest]) longest = a
            if (lines[a] > max_lines) {
                print "layers: src/" file[a] ".c has " lines[a] " lines, more than " max_lines
                long_files++
            }
        }
        if (long_files) fail = fail ", files over " max_lines " lines"

        # HACKING.md: every symbol used through a header the row names;
        # what is not, one line per file, by the header that declares it
        outside = 0
        for (u = 1; u <= nuses; u++) {
            split(uses[u], t, SUBSEP)
            a = t[1] + 0; s = t[3]
            f = file[a]
            if (!has_row[f]) {
                if (!no_row[a]++) outside_files++
                continue
            }
            if (!(f in may)) may[f] = allowed(f)
            k = split(declared_in[s], hs, " ")
            ok = 0
            for (i = 1; i <= k; i++) {
                h = hs[i]; sub(/\.h$/, "", h)
                if (index(may[f], " " h " ")) ok = 1
            }
            if (ok) continue
            h = k ? hs[1] : "no header"
            if (!outside_of[a]) outside_files++
            if (!((a, h) in names_via)) {
                outside_of[a] = outside_of[a] SUBSEP h
                names_via[a, h] = s
            } else names_via[a, h] = names_via[a, h] ", " s
            outside++
        }
        for (a = 1; a <= n; a++) {
            if (no_row[a]) print "layers: " file[a] ".c has no row in HACKING.md'"'"'s table"
            if (!outside_of[a]) continue
            k = split(substr(outside_of[a], 2), hs, SUBSEP)
            line = ""
            for (i = 1; i <= k; i++) line = line (i > 1 ? "; " : "") hs[i] " (" names_via[a, hs[i]] ")"
            print "layers: " file[a] ".c uses, outside its row of HACKING.md: " line
        }
        if (outside_files && strict) fail = fail ", uses outside HACKING.md'"'"'s table"

        summary = "layers: " circles " circle" (circles == 1 ? "" : "s") ", " layers " layers, longest file src/" \
            file[longest] ".c " lines[longest] " lines"
        if (outside_files)
            summary = summary ", " outside_files " file" (outside_files == 1 ? "" : "s") " using names outside HACKING.md'"'"'s table" \
                (strict ? "" : " (reported only)")
        if (fail != "") { print summary ": FAILED (" substr(fail, 3) ")"; exit 1 }
        print summary
    }'
