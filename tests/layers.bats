#!/usr/bin/env bats
# The shape of the sources, counted on the calls between their objects
# (tests/lib/layers.sh reads build/*.o with nm): no circle among src/*.c,
# at most 12 layers, no src/*.c over 650 lines. Needs no broker; needs the
# objects make amqplock leaves in build/.

load lib/helper

@test "src/*.c, counted on the calls between their objects, has no circle, at most 12 layers and no file over 650 lines" {
    run "$TOP/tests/lib/layers.sh" "$TOP/build"
    echo "$output"
    note "${output##*$'\n'}"
    [ "$status" -eq 0 ]
}

# plant DIR FILE TEXT...: DIR/FILE with one line per TEXT
plant() {
    local dir=$1 file=$2
    shift 2
    printf '%s\n' "$@" >"$dir/$file"
}

@test "layers.sh finds a planted circle and its symbols, a 13th layer, a file of 651 lines and a call its table row does not name" {
    local t=$BATS_TEST_TMPDIR i next
    mkdir -p "$t/src" "$t/build"
    # a.c and b.c call each other; l01.c to l13.c call down a chain
    plant "$t/src" a.h 'int a_f(void);'
    plant "$t/src" b.h 'int b_f(void);'
    plant "$t/src" a.c '#include "b.h"' '#include "a.h"' 'int a_f(void) { return b_f(); }'
    plant "$t/src" b.c '#include "a.h"' '#include "b.h"' 'int b_f(void) { return a_f() + 1; }'
    for i in $(seq -w 1 12); do
        next=$(printf 'l%02d' $((10#$i + 1)))
        plant "$t/src" "l$i.c" "int $next(void);" "int l$i(void) { return $next() + 1; }"
    done
    plant "$t/src" l13.c 'int l13(void) { return 0; }'
    { echo 'int long_f(void);' && yes '/* a line */' | head -n 649 && echo 'int long_f(void) { return 0; }'; } >"$t/src/long.c"
    plant "$t" HACKING.md '## The layers' '| file | owns | may include |' '|---|---|---|' \
        '| `a.c` | a | |' '| `b.c` | b | a |' '## Next'
    (cd "$t/build" && cc -c "$t"/src/*.c)

    run "$TOP/tests/lib/layers.sh" "$t/build" "$t/src"
    echo "$output"
    [ "$status" -eq 1 ]
    grep -qxF 'layers: circle 1, 2 files: a.c b.c' <<<"$output"
    grep -qxF '  a.c -> b.c: b_f' <<<"$output"
    grep -qxF '  b.c -> a.c: a_f' <<<"$output"
    grep -qxF 'layers: the longest path, 13 files (a circle counted as one): l01.c > l02.c > l03.c > l04.c > l05.c > l06.c > l07.c > l08.c > l09.c > l10.c > l11.c > l12.c > l13.c' <<<"$output"
    grep -qxF 'layers: src/long.c has 651 lines, more than 650' <<<"$output"
    grep -qxF 'layers: a.c uses, outside its row of HACKING.md: b.h (b_f)' <<<"$output"
    [[ ${output##*$'\n'} == 'layers: 1 circle, 13 layers, longest file src/long.c 651 lines, '*' (reported only): FAILED (circles, more than 12 layers, files over 650 lines)' ]]

    run "$TOP/tests/lib/layers.sh" --strict "$t/build" "$t/src"
    [ "$status" -eq 1 ]
    [[ ${output##*$'\n'} == *', uses outside HACKING.md'"'"'s table)' ]]

    # without the circle, the 13th file and the long file: it passes
    plant "$t/src" b.c '#include "b.h"' 'int b_f(void) { return 1; }'
    rm "$t/src/l13.c" "$t/build/l13.o" "$t/src/long.c" "$t/build/long.o"
    plant "$t/src" l12.c 'int l12(void);' 'int l12(void) { return 0; }'
    (cd "$t/build" && cc -c "$t/src/b.c" "$t/src/l12.c")
    run "$TOP/tests/lib/layers.sh" "$t/build" "$t/src"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ ${output##*$'\n'} == 'layers: 0 circles, 12 layers, longest file src/a.c 3 lines, '*' (reported only)' ]]

    # an object older than its source: it cannot tell
    touch -d '1 hour ago' "$t/build/a.o"
    run "$TOP/tests/lib/layers.sh" "$t/build" "$t/src"
    [ "$status" -eq 2 ]
    [[ $output == *"a.o is older than $t/src/a.c: build the objects again (make amqplock)" ]]
}
