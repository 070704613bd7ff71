#!/usr/bin/env bats
# The man page, the shell completions and make install, against the
# binary's own option tables: every option that amqplock accepts is in its
# --help, in the man page and in the bash, zsh and fish completions. Needs
# no broker; needs groff, zsh, fish and bash-completion (make deps), and
# uses mandoc when it is installed.

bats_require_minimum_version 1.5.0
load lib/helper
export LC_ALL=C

MAN=$TOP/man/amqplock.1
BASH_COMP=$TOP/completions/amqplock.bash
ZSH_COMP=$TOP/completions/_amqplock
FISH_COMP=$TOP/completions/amqplock.fish

# --- what the sources say ----------------------------------------------------

# Asks the binary once (amqplock --list-options, which prints src/cli.c's
# option table against src/main.c's commands): $SRC/commands lists the
# commands, and $SRC/opts.COMMAND ($SRC/opts._ for none) has "long short"
# (short "-" if none) for every option that amqplock accepts with COMMAND
# (the global ones and the groups the command lists), or before any
# command.
setup_file() {
    export SRC=$BATS_FILE_TMPDIR/src
    mkdir -p "$SRC"
    local listing
    listing=$("$AMQPLOCK_BIN" --list-options) || return 1
    awk '$1 != "_" && !seen[$1]++ { print $1 }' <<<"$listing" >"$SRC/commands"
    local cmd
    for cmd in _ $(cat "$SRC/commands"); do
        awk -v c="$cmd" '$1 == c { print $2, $3 }' <<<"$listing" | sort >"$SRC/opts.$cmd"
    done
    # every option of any command
    sort -u "$SRC"/opts.* >"$SRC/all"
    groff -mdoc -Tascii -P-cbou "$TOP/man/amqplock.1" >"$SRC/man.txt" 2>/dev/null
}

src_options() { cat "$SRC/opts.${1:-_}"; }
src_commands() { cat "$SRC/commands"; }

# help_options [COMMAND]: the same pairs, read from amqplock [COMMAND] --help.
help_options() {
    amqplock ${1:+"$1"} --help | sed -nE 's/^  (-([A-Za-z]), )? *--([a-z-]+).*/\3 -\2/p'
}

# words of a multi-line list, one a line, sorted
sorted() { tr -s ' \n' '\n\n' | sed '/^$/d' | sort; }

# assert_none_missing WHAT EXPECTED FOUND: every line of EXPECTED is one of
# FOUND (both lists, one item a line).
assert_none_missing() {
    local missing
    missing=$(comm -23 <(sort -u <<<"$2") <(sort -u <<<"$3"))
    [ -z "$missing" ] || fail "$1: missing $(echo $missing)"
}

# --- querying the completions ------------------------------------------------

# bash_complete LINE...: the candidates that the bash completion gives for
# LINE, the cursor at its end, one a line; with more than one LINE, each
# candidate follows its LINE and a tab. LINE is split into COMP_WORDS as
# bash does (at blanks, with "=" and ":" words of their own). Runs in
# $BATS_TEST_TMPDIR; BASH_COMPLETION=1 loads bash-completion first.
bash_complete() {
    (cd "$BATS_TEST_TMPDIR" && bash --norc --noprofile -c '
        [ -n "${BASH_COMPLETION:-}" ] && . /usr/share/bash-completion/bash_completion
        . "$1"
        shift
        spec=$(complete -p amqplock) || exit 1
        fn=$(sed -E "s/.* -F ([^ ]+) .*/\1/" <<<"$spec")
        for line; do
            rest=$line
            COMP_WORDS=()
            while [ -n "$rest" ]; do
                if [[ $rest =~ ^[[:space:]]+ ]]; then
                    rest=${rest:${#BASH_REMATCH}}
                    continue
                fi
                [[ $rest =~ ^[=:]+ ]] || [[ $rest =~ ^[^=:[:space:]]+ ]]
                COMP_WORDS+=("$BASH_REMATCH")
                rest=${rest:${#BASH_REMATCH}}
            done
            [[ $line == *[[:space:]] ]] && COMP_WORDS+=("")
            COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
            COMP_LINE=$line COMP_POINT=${#line}
            COMPREPLY=()
            "$fn" amqplock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
            if [ $# -eq 1 ]; then
                printf "%s\n" "${COMPREPLY[@]}"
            else
                for c in "${COMPREPLY[@]}"; do printf "%s\t%s\n" "$line" "$c"; done
            fi
        done' _ "$BASH_COMP" "$@")
}

# fish_complete LINE...: fish's candidates for LINE, without descriptions;
# with more than one LINE, each follows its LINE and a tab.
fish_complete() {
    fish --no-config -c '
        source $argv[1]
        set -e argv[1]
        for line in $argv
            for c in (complete -C $line)
                set c (string split -m1 \t -- $c)[1]
                if set -q argv[2]
                    printf "%s\t%s\n" $line $c
                else
                    printf "%s\n" $c
                end
            end
        end' "$FISH_COMP" "$@"
}

# zsh_complete LINE...: for each LINE, the command line that LINE<TAB>
# leaves in an interactive zsh (on a pseudo-terminal, with compinit and the
# completion under test), one a line.
zsh_complete() {
    local out=$BATS_TEST_TMPDIR/zsh.out
    zsh -f -c '
        zmodload zsh/zpty || exit 1
        dir=$1 out=$2
        shift 2
        : >$out
        # only the base of the completion system: compinit is fast then
        zpty z zsh -f -i
        zpty -w z "PS1=\"%% \"; fpath=(${(q)dir} \${(M)fpath:#*/Completion(|/Base)})
            autoload -Uz compinit; compinit -u -D
            dump() { print -r -- \"\$BUFFER\" >>${(q)out}; }; zle -N dump; bindkey \"^T\" dump
            print REA\"\"DY"
        seen=
        for i in {1..400}; do
            zpty -r -t z chunk && seen+=$chunk
            [[ $seen == *READY*"% "* ]] && break
            sleep 0.025
        done
        # TAB, then ^T to write the line down, then ^U to clear it
        for line; do
            zpty -w -n z "$line"$'"'"'\t\x14\x15'"'"'
        done
        for i in {1..400}; do
            (( $(wc -l <$out) >= $# )) && break
            zpty -r -t z chunk
            sleep 0.025
        done
        zpty -d z' zsh "$(dirname "$ZSH_COMP")" "$out" "$@"
    cat "$out"
}

# assert_candidates LIST WORD...: every WORD is one of the lines of LIST.
assert_candidates() {
    local list=$1 w
    shift
    for w in "$@"; do
        grep -qxF -- "$w" <<<"$list" || fail "'$w' is not among the candidates: $(echo $list)"
    done
}

# refute_candidates LIST WORD...: no WORD is.
refute_candidates() {
    local list=$1 w
    shift
    for w in "$@"; do
        ! grep -qxF -- "$w" <<<"$list" || fail "'$w' is among the candidates: $(echo $list)"
    done
}

# The man page as text, without formatting.
man_text() { cat "$SRC/man.txt"; }

# --- the man page --------------------------------------------------------------

@test "man page renders without a warning (groff -mdoc -ww; mandoc -T lint if installed)" {
    run groff -mdoc -ww -z "$MAN"
    assert_success
    assert_output ""
    if command -v mandoc >/dev/null; then
        run mandoc -T lint -W warning "$MAN"
        assert_success
        assert_output ""
    fi
}

@test "man page: sections, environment, exit statuses by name, a synopsis line per command" {
    local text s code name
    text=$(man_text)
    assert_none_missing "sections" "$(printf '%s\n' NAME SYNOPSIS DESCRIPTION ENVIRONMENT \
        FILES 'EXIT STATUS' EXAMPLES 'GUARANTEES AND LIMITS' 'SEE ALSO')" \
        "$(grep -E '^[A-Z][A-Z ]+$' <<<"$text")"
    for s in AMQPLOCK_URL AMQP_URL AMQPLOCK_PREFIX AMQPLOCK_SEMAPHORE AMQPLOCK_SLOT \
        '#waiters' '#line' '#w' '#quorum' '-k-A' '-k-B' '-k-L' 'flock(1)' 'rabbitmqctl(8)'; do
        [[ $text == *"$s"* ]] || fail "the man page does not mention $s"
    done
    # the codes of status_exit_code (src/status.c, sysexits.h names
    # resolved) with their names from status_name
    assert_none_missing "exit statuses" "$(perl -e '
        my (%ex, %code);
        open(my $x, "<", "/usr/include/sysexits.h") or die;
        while (<$x>) { $ex{$1} = $2 if /^#define\s+(EX_\w+)\s+(\d+)/ }
        open(my $c, "<", $ARGV[0]) or die;
        my @lines = <$c>;
        for (@lines) { $code{$1} = $ex{$2} // $2 if /\[AL_(\w+)\]\s*=\s*(EX_\w+|\d+),/ }
        for (@lines) { print "$code{$1} $2\n" if /\[AL_(\w+)\]\s*=\s*"(\w+)"/ }
    ' "$TOP/src/status.c")" \
        "$(sed -nE 's/^ +([0-9]+) \(([a-z_]+)\).*/\1 \2/p' <<<"$text")"
    for code in 126 127 128; do
        [[ $text == *" $code "* ]] || fail "hold's exit status $code is not explained"
    done
    local text cmd
    text=$(man_text)
    [ "$(src_commands | sort)" = "$(amqplock --help | sed -nE 's/^  ([a-z]+) .*/\1/p' | grep -vx help | sort)" ] ||
        fail "amqplock --help does not list the commands of src/main.c"
    assert_none_missing "synopsis" "$(src_commands; echo help)" \
        "$(sed -nE 's/^ +amqplock( \[global-options\])? ([a-z]+)( .*)?$/\2/p' <<<"$text")"
}

# --- options: the binary, --help, the man page and the completions agree -----

@test "--help of each command lists exactly the options src/cli.c accepts with it" {
    local cmd
    [ "$(wc -l <"$SRC/all")" -gt 20 ] || fail "too few options found in src/cli.c"
    # "COMMAND long -short" for each command (_: none)
    diff <(for cmd in _ $(src_commands); do
        sed "s/^/$cmd /" "$SRC/opts.$cmd"
    done | sort) <(for cmd in _ $(src_commands); do
        help_options "${cmd#_}" | sed "s/^/$cmd /"
    done | sort) || fail "amqplock COMMAND --help (>) differs from src/cli.c (<)"
}

@test "every option, long and short, is in the man page and the zsh and fish completions" {
    # an entry of its own in a list of options: "--url url", "--json  Print..."
    assert_none_missing "long options" "$(cut -d' ' -f1 "$SRC/all")" \
        "$(sed -nE 's/^     (-[A-Za-z]( [a-z]+)?, )?--([a-z-]+)( [a-z]+)?( {2,}.*)?$/\3/p' \
            "$SRC/man.txt")"
    # the entries "-u url, --url url" and "-q, --quiet"
    assert_none_missing "short options" "$(grep -v ' -$' "$SRC/all")" \
        "$(sed -nE 's/^ +(-[A-Za-z])( [a-z]+)?, --([a-z-]+)( .*)?$/\3 \1/p' "$SRC/man.txt")"
    # zsh: '--json[...]' or {-q,--quiet}'[...]' or {-u+,--url=}'[...]'
    assert_none_missing "zsh" "$(cat "$SRC/all")" "$(
        sed -nE "s/.*['\"](\([^)]*\))?--([a-z-]+)=?\[.*/\2 -/p" "$ZSH_COMP"
        grep -oE -- '\{-[A-Za-z]\+?,--[a-z-]+=?\}' "$ZSH_COMP" |
            sed -E 's/\{(-[A-Za-z])\+?,--([a-z-]+)=?\}/\2 \1/')"
    # fish: complete ... -s q -l quiet, or -l json
    assert_none_missing "fish" "$(cat "$SRC/all")" "$(
        grep -E '^complete -c amqplock ' "$FISH_COMP" | grep -oE -- '(-s [A-Za-z] )?-l [a-z-]+' |
            sed -E 's/^-s (.) -l (.*)/\2 -\1/; s/^-l (.*)/\1 -/')"
}

@test "bash and fish complete exactly the commands, and each command's options and the global ones" {
    local cmd want lines=()
    for cmd in '' $(src_commands); do
        lines+=("amqplock ${cmd:+$cmd }--")
    done
    # "LINE<tab>--option" for each line, as src/cli.c has it
    want=$(for cmd in '' $(src_commands); do
        awk -v l="amqplock ${cmd:+$cmd }--" '{ print l "\t--" $1 }' "$SRC/opts.${cmd:-_}"
    done | sort)
    diff <(echo "$want") <(bash_complete "${lines[@]}" | sort) || fail "bash differs (>)"
    diff <(echo "$want") <(fish_complete "${lines[@]}" | sort) || fail "fish differs (>)"
    local want cmd
    want=$( (src_commands; echo help) | sort)
    diff <(echo "$want") <(bash_complete 'amqplock ' | sort) || fail "bash"
    diff <(echo "$want") <(fish_complete 'amqplock ' | sort) || fail "fish"
    assert_none_missing "zsh" "$want" "$(sed -nE "s/^ +['\"]([a-z]+):.*/\1/p" "$ZSH_COMP")"
}

# --- every command: --help, an unknown option, --version ------------------------

@test "every command answers --help with exit 0 and an unknown option with exit 64; --version is the Makefile's" {
    local cmd out rc
    out=$(amqplock --help 2>&1) || fail "amqplock --help exited $?"
    [[ $out == 'Usage: amqplock '* ]] || fail "amqplock --help: $out"
    for cmd in $(src_commands); do
        out=$(amqplock "$cmd" --help 2>&1) || fail "$cmd --help exited $?"
        [[ $out == "Usage: amqplock $cmd "* ]] || fail "$cmd --help: $out"
        out=$(amqplock help "$cmd" 2>&1) || fail "help $cmd exited $?"
        [[ $out == "Usage: amqplock $cmd "* ]] || fail "help $cmd: $out"
        rc=0
        out=$(amqplock "$cmd" --no-such-option 2>&1) || rc=$?
        [ "$rc" -eq 64 ] || fail "$cmd --no-such-option exited $rc"
        [ "$out" = 'amqplock: unknown option "--no-such-option"' ] || fail "$cmd: $out"
    done
    run -64 --separate-stderr amqplock --no-such-option
    refute_output
    assert_error_line
    local v
    v=$(sed -nE 's/^VERSION[[:space:]]*:?=[[:space:]]*//p' "$TOP/Makefile")
    [ -n "$v" ] || fail "no VERSION in the Makefile"
    run -0 amqplock --version
    assert_output "amqplock $v"
    run -0 amqplock -V
    assert_output "amqplock $v"
    run grep -rlF -- "$v" "$TOP/src" "$TOP/man" "$TOP/completions"
    assert_output ""
}

# --- bash ----------------------------------------------------------------------------

@test "bash completes commands, options, file names, and -- and a command after hold NAME" {
    mkdir "$BATS_TEST_TMPDIR/certs"
    touch "$BATS_TEST_TMPDIR/pw.txt" "$BATS_TEST_TMPDIR/client.key"
    # LINE, and then what bash completes for it ("" for nothing)
    local table=(
        'amqplock re' remove
        'amqplock hold --lo' --lost-signal
        'amqplock acquire --le' --lease
        'amqplock help h' hold
        # global options after the command, and only global ones before it
        'amqplock status --js' --json
        'amqplock hold -n jobs --pass' --password-file
        'amqplock --l' ''
        # past an option's value: a URL split at its colons, -w SECS
        'amqplock --url amqp://u:p@h:5672/v -q cr' create
        'amqplock --url=amqp://u:p@h:5672/ hold -w 5 jobs --g' --grace
        # file names where a file is due, and nothing where a name or a
        # number is
        'amqplock status --password-file=p' pw.txt
        'amqplock --cacert ce' certs
        'amqplock hold --cert cl' client.key
        'amqplock --key cl' client.key
        'amqplock hold --grace ' ''
        'amqplock hold jobs --lost-signal TERM --prefix ' ''
        'amqplock create --slot-type q' quorum
        'amqplock check jobs --rep' --repair
        'amqplock add jobs --slot-type=c' classic
        # -- after hold NAME, unless -c TEXT stands for the command
        'amqplock hold jobs ' --
        'amqplock hold -n -w 10 --grace 5 jobs ' --
        'amqplock hold -c true jobs ' ''
    )
    local i lines=() want=''
    for ((i = 0; i < ${#table[@]}; i += 2)); do
        lines+=("${table[i]}")
        [ -z "${table[i + 1]}" ] || want+="${table[i]}"$'\t'"${table[i + 1]}"$'\n'
    done
    run -0 bash_complete "${lines[@]}" 'amqplock --password-file '
    diff <( (printf '%s' "$want"
        printf 'amqplock --password-file \t%s\n' certs client.key pw.txt) | sort) \
        <(sort <<<"$output") || fail "bash completes otherwise (>)"

    run -0 bash_complete 'amqplock hold -w 10 jobs -'
    assert_candidates "$output" -- --nonblock --lost-signal --url
    run -0 bash_complete 'amqplock hold jobs -- ech'
    assert_candidates "$output" echo
    touch "$BATS_TEST_TMPDIR/notes.txt"
    run -0 bash_complete 'amqplock hold jobs -- cat no'
    assert_output notes.txt
    # with bash-completion, by the command's own completion, as for sudo
    BASH_COMPLETION=1 run -0 bash_complete 'amqplock hold jobs -- kill -s WI'
    assert_output WINCH
}

@test "bash completes the signals amqplock accepts for --lost-signal, and only those" {
    run -0 bash_complete 'amqplock hold --lost-signal '
    local sigs=$output sig err
    assert_candidates "$sigs" TERM INT HUP USR1 QUIT
    refute_candidates "$sigs" WINCH CONT TSTP TTIN TTOU URG KILL STOP CHLD
    # whatever bash or amqplock calls a signal: completed if and only if
    # amqplock takes it
    for sig in $( (kill -l | tr -s ' \t' '\n\n' | sed -nE 's/^SIG([A-Z0-9]+)$/\1/p' |
        grep -v '^RT'; echo "$sigs") | sort -u); do
        # a usage error in any case: about --heartbeat if SIG is accepted
        amqplock hold --lost-signal "$sig" --heartbeat x jobs -- true 2>"$BATS_TEST_TMPDIR/err" &&
            fail "exit 0"
        read -r err <"$BATS_TEST_TMPDIR/err"
        if [[ $'\n'$sigs$'\n' == *$'\n'$sig$'\n'* ]]; then
            [[ $err == *--heartbeat* ]] || fail "completed $sig is refused: $err"
        else
            [[ $err == *--lost-signal* ]] || fail "$sig is accepted but not completed"
        fi
    done
    run -0 bash_complete 'amqplock hold --lost-signal=T'
    assert_equal "$(sort <<<"$output")" "$(printf '%s\n' TERM TRAP)"
    run -0 bash_complete 'amqplock hold --lost-signal sigte'
    assert_output sigterm
    # the same list in zsh's and fish's completions
    diff <(echo "$sigs" | sort) <(fish_complete 'amqplock hold --lost-signal ' | sort) ||
        fail "fish completes other signals"
    diff <(echo "$sigs" | sort) \
        <(sed -n '/sigs=(/,/)/p' "$ZSH_COMP" | sed 's/.*sigs=(//; s/).*//' | sorted) ||
        fail "zsh completes other signals"
}

# --- zsh and fish ---------------------------------------------------------------------

@test "zsh -n passes, and at a zsh prompt TAB completes commands, options, signals and hold's command" {
    run zsh -n "$ZSH_COMP"
    assert_success
    assert_output ''
    [ "$(head -1 "$ZSH_COMP")" = '#compdef amqplock' ]
    local lines=(
        'amqplock re'
        'amqplock hold --lost-signal=TE'
        'amqplock hold --lost-signal WIN'
        'amqplock hold jobs '
        'amqplock status --js'
        'amqplock --url amqp://h/ --pass'
        'amqplock create jobs 3 --adm'
        'amqplock hold -nw 5 jobs --g'
        'amqplock help cr'
        'amqplock hold jobs -- amqplock cr'
        'amqplock add jobs --slot-type=q'
        'amqplock check --rep'
    )
    run -0 zsh_complete "${lines[@]}"
    assert_output "$(printf '%s\n' \
        'amqplock remove ' \
        'amqplock hold --lost-signal=TERM ' \
        'amqplock hold --lost-signal WIN' \
        'amqplock hold jobs -- ' \
        'amqplock status --json ' \
        'amqplock --url amqp://h/ --password-file=' \
        'amqplock create jobs 3 --admin-wait=' \
        'amqplock hold -nw 5 jobs --grace=' \
        'amqplock help create ' \
        'amqplock hold jobs -- amqplock create ' \
        'amqplock add jobs --slot-type=quorum ' \
        'amqplock check --repair ')"
}

@test "fish -n passes, and fish completes commands, options, files and hold's command" {
    run fish --no-config -n "$FISH_COMP"
    assert_success
    assert_output ''
    run -0 fish_complete 'amqplock cr'
    assert_output create
    run -0 fish_complete 'amqplock hold --lo'
    assert_output --lost-signal
    run -0 fish_complete 'amqplock acquire --le'
    assert_output --lease
    run -0 fish_complete 'amqplock --prefix x st'
    assert_output status
    run -0 fish_complete 'amqplock hold jobs '
    assert_output -- --
    run -0 fish_complete 'amqplock hold jobs -- amqplock re'
    assert_output remove
    touch "$BATS_TEST_TMPDIR/pw.txt"
    run -0 fish_complete "amqplock --password-file $BATS_TEST_TMPDIR/p"
    assert_output "$BATS_TEST_TMPDIR/pw.txt"
}

# --- make install -------------------------------------------------------------------------

# installed DIR: the files under DIR, relative to it, sorted.
installed() {
    (cd "$1" && find . -type f | sed 's|^\./||' | sort)
}

@test "make install and make uninstall, with PREFIX and DESTDIR" {
    local d=$BATS_TEST_TMPDIR/root bashdir fishdir
    # -o amqplock: install the binary as it is, never rebuild it here
    run -0 make -s -C "$TOP" -o amqplock install DESTDIR="$d" PREFIX=/usr
    bashdir=$(pkg-config --variable=completionsdir bash-completion)
    fishdir=$(pkg-config --variable=completionsdir fish)
    [ "$bashdir" = /usr/share/bash-completion/completions ] && [ -n "$fishdir" ] ||
        fail "unexpected pkg-config answers: '$bashdir' '$fishdir'"
    diff <(installed "$d") <(printf '%s\n' usr/bin/amqplock usr/share/man/man1/amqplock.1 \
        "${bashdir#/}/amqplock" "${fishdir#/}/amqplock.fish" \
        usr/share/zsh/vendor-completions/_amqplock | sort)
    cmp "$d/usr/bin/amqplock" "$TOP/amqplock"
    cmp "$d/usr/share/man/man1/amqplock.1" "$MAN"
    cmp "$d$bashdir/amqplock" "$BASH_COMP"
    cmp "$d$fishdir/amqplock.fish" "$FISH_COMP"
    cmp "$d/usr/share/zsh/vendor-completions/_amqplock" "$ZSH_COMP"
    [ "$(stat -c %a "$d/usr/bin/amqplock")" = 755 ]
    [ "$(stat -c %a "$d/usr/share/man/man1/amqplock.1")" = 644 ]
    run -0 make -s -C "$TOP" uninstall DESTDIR="$d" PREFIX=/usr
    assert_equal "$(installed "$d")" ""

    # /usr/local: fish's completion in /etc/fish/completions, as a new fish
    # reads nothing under /usr/local
    d=$BATS_TEST_TMPDIR/local
    run -0 make -s -C "$TOP" -o amqplock install DESTDIR="$d"
    diff <(installed "$d") <(printf '%s\n' usr/local/bin/amqplock \
        usr/local/share/man/man1/amqplock.1 \
        usr/local/share/bash-completion/completions/amqplock \
        etc/fish/completions/amqplock.fish \
        usr/local/share/zsh/site-functions/_amqplock | sort)
    run -0 make -s -C "$TOP" uninstall DESTDIR="$d"
    assert_equal "$(installed "$d")" ""

    # every directory given
    d=$BATS_TEST_TMPDIR/given
    local dirs=(PREFIX=/p BINDIR=/b MANDIR=/m BASH_COMPLETION_DIR=/cb ZSH_COMPLETION_DIR=/cz
        FISH_COMPLETION_DIR=/cf)
    run -0 make -s -C "$TOP" -o amqplock install DESTDIR="$d" "${dirs[@]}"
    diff <(installed "$d") <(printf '%s\n' b/amqplock m/man1/amqplock.1 cb/amqplock \
        cz/_amqplock cf/amqplock.fish | sort)
    run -0 make -s -C "$TOP" uninstall DESTDIR="$d" "${dirs[@]}"
    assert_equal "$(installed "$d")" ""
}

# fresh_shell COMMAND...: COMMAND as in a new login: a HOME of its own
# with no rc files in it, root's PATH on Debian, nothing else in the
# environment, no terminal.
fresh_shell() {
    mkdir -p "$BATS_TEST_TMPDIR/home"
    env -i HOME="$BATS_TEST_TMPDIR/home" TERM=dumb LC_ALL=C \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@" </dev/null
}

# search_dirs SHELL: the directories where a new SHELL looks for a
# completion, one a line, as the shell itself says: zsh's $fpath and
# fish's $fish_complete_path after the system's rc files, and for bash
# the directories that bash-completion tries when it looks up the
# completion of a command that has none (traced); not those under HOME.
search_dirs() {
    case $1 in
    zsh) fresh_shell zsh -i -c 'print -rl -- $fpath' ;;
    fish) fresh_shell fish -c 'printf "%s\n" $fish_complete_path' ;;
    bash)
        fresh_shell bash --norc --noprofile -c '
            . /usr/share/bash-completion/bash_completion
            set -x
            if declare -F _comp_load >/dev/null; then
                _comp_load amqplock-none
            else
                __load_completion amqplock-none
            fi' 2>&1 | sed -nE 's/^\++ \[\[ -d (.*) \]\]$/\1/p' | grep -v /amqplock-none
        ;;
    esac | grep -v "^$BATS_TEST_TMPDIR/home/"
}

@test "make install: for PREFIX=/usr and /usr/local, a new bash, zsh and fish each look where their completion is, and complete with it" {
    local shell prefix d f dir line
    declare -A looks dir_of
    for shell in bash zsh fish; do
        looks[$shell]=$(search_dirs $shell)
        [ -n "${looks[$shell]}" ] || fail "no search directories from $shell"
    done
    # the helpers below run their shells in a HOME of their own too
    mkdir -p "$BATS_TEST_TMPDIR/home"
    export HOME=$BATS_TEST_TMPDIR/home
    unset XDG_DATA_HOME XDG_DATA_DIRS XDG_CONFIG_HOME XDG_CONFIG_DIRS BASH_COMPLETION_USER_DIR
    # What a shell does at amqplock<TAB>: bash-completion looks the
    # completion up (here under BASH_COMPLETION_USER_DIR, which it searches
    # first); fish loads it from $fish_complete_path, once amqplock is a
    # command; zsh_complete puts the directory of $ZSH_COMP in $fpath.
    local bash_load=$BATS_TEST_TMPDIR/load.bash fish_load=$BATS_TEST_TMPDIR/load.fish
    echo 'if declare -F _comp_load >/dev/null; then _comp_load amqplock; else __load_completion amqplock; fi' \
        >"$bash_load"
    echo 'set -g fish_complete_path $FISH_DIR; type -q amqplock; or exit 1' >"$fish_load"
    local want
    want=$(printf '%s\t%s\n' 'amqplock cr' create 'amqplock hold --l' --label \
        'amqplock hold --l' --lease 'amqplock hold --l' --lost-signal)

    for prefix in /usr /usr/local; do
        d=$BATS_TEST_TMPDIR/root${prefix//\//-}
        run -0 make -s -C "$TOP" -o amqplock install DESTDIR="$d" PREFIX="$prefix"
        # the directory of each completion, without DESTDIR
        dir_of[bash]=$(cd "$d" && find . -type f -name amqplock ! -path "./${prefix#/}/bin/*")
        dir_of[zsh]=$(cd "$d" && find . -type f -name _amqplock)
        dir_of[fish]=$(cd "$d" && find . -type f -name amqplock.fish)
        for shell in bash zsh fish; do
            f=${dir_of[$shell]}
            [[ -n $f && $f != *$'\n'* ]] || fail "PREFIX=$prefix: not one $shell completion: $f"
            dir=${f#.}
            dir=${dir%/*}
            dir_of[$shell]=$dir
            grep -qxF -- "$dir" <<<"${looks[$shell]}" ||
                fail "PREFIX=$prefix: $dir, where the $shell completion is, is not where a new $shell looks: $(echo ${looks[$shell]})"
        done

        [[ ${dir_of[bash]} == */completions ]] || fail "bash: ${dir_of[bash]}"
        BASH_COMPLETION=1 BASH_COMPLETION_USER_DIR=$d${dir_of[bash]%/completions} \
            BASH_COMP=$bash_load run -0 bash_complete 'amqplock cr' 'amqplock hold --l'
        assert_equal "$(sort <<<"$output")" "$want"

        FISH_COMP=$fish_load FISH_DIR=$d${dir_of[fish]} PATH=$d$prefix/bin:$PATH \
            run -0 fish_complete 'amqplock cr' 'amqplock hold --l'
        assert_equal "$(sort <<<"$output")" "$want"

        ZSH_COMP=$d${dir_of[zsh]}/_amqplock run -0 zsh_complete 'amqplock cr' \
            'amqplock hold --le' 'amqplock hold --lo'
        assert_output "$(printf '%s\n' 'amqplock create ' 'amqplock hold --lease=' \
            'amqplock hold --lost-signal=')"

        run -0 make -s -C "$TOP" uninstall DESTDIR="$d" PREFIX="$prefix"
        assert_equal "$(installed "$d")" ""
    done
}

# completion_loaded SHELL [ARGS...]: a new SHELL (fresh_shell, interactive)
# has its completion system loaded: zsh's compinit has run (compdef is
# defined), bash-completion is loaded (its loader is defined).
completion_loaded() {
    local shell=$1
    shift
    case $shell in
    zsh) fresh_shell zsh "$@" -i -c '(( $+functions[compdef] ))' ;;
    bash) fresh_shell bash "$@" -i -c \
        'declare -F _comp_load >/dev/null || declare -F __load_completion >/dev/null' ;;
    esac 2>/dev/null
}

@test "README: a non-login bash and a new zsh on Debian complete only once set up as it says" {
    local home=$BATS_TEST_TMPDIR/home
    mkdir -p "$home"
    # zsh: Debian's /etc/zsh/zshrc runs no compinit; the README's line does
    run -1 completion_loaded zsh
    grep -qF 'autoload -Uz compinit && compinit' "$TOP/README.md" "$TOP/docs/operators.md" ||
        fail "README and docs/operators.md lost the compinit line"
    echo 'autoload -Uz compinit && compinit' >"$home/.zshrc"
    run -0 completion_loaded zsh
    rm -f "$home/.zshrc" "$home"/.zcompdump*
    # bash: a login shell has bash-completion (/etc/profile.d), a non-login
    # one only through ~/.bashrc or /etc/bash.bashrc's snippet, which
    # Debian ships commented out
    run -0 completion_loaded bash -l
    run -1 completion_loaded bash
    echo 'source /usr/share/bash-completion/bash_completion' >"$home/.bashrc"
    run -0 completion_loaded bash
    rm "$home/.bashrc"
    grep -qE '^#[[:space:]]*\. /usr/share/bash-completion/bash_completion' /etc/bash.bashrc ||
        skip "this /etc/bash.bashrc has no commented-out bash-completion snippet"
    # uncommented, it loads bash-completion (--rcfile: instead of both rc files)
    sed -E '/enable bash completion/,/^#?fi/ { /enable/! s/^#// }' /etc/bash.bashrc >"$BATS_TEST_TMPDIR/bash.bashrc"
    run -0 completion_loaded bash --rcfile "$BATS_TEST_TMPDIR/bash.bashrc"
}

@test "every link of README and docs/*.md names a file that exists, and a heading in it" {
    # [text](path#anchor): GitHub's anchors, the heading lower-cased,
    # without punctuation, blanks as dashes
    run -0 perl -e '
        use File::Basename;
        sub anchors { my %a; open(my $h, "<", $_[0]) or return;
            while (<$h>) { next unless /^#+ (.*)/; my $t = lc $1;
                $t =~ s/[^\w\- ]//g; $t =~ s/ /-/g; $a{$t} = 1 } return \%a }
        for my $f (@ARGV) { open(my $h, "<", $f) or die; my $n = 0;
            while (<$h>) { $n++;
                while (/\]\(([^)#\s]*)(?:#([^)\s]*))?\)/g) {
                    my ($p, $a) = ($1, $2); next if $p =~ /^[a-z]+:/;
                    my $t = $p eq "" ? $f : dirname($f) . "/$p";
                    if (!-e $t) { print "$f:$n: no file $p\n"; next }
                    print "$f:$n: no heading #$a in $p\n" if defined $a && !anchors($t)->{$a} } } }
    ' "$TOP/README.md" "$TOP"/docs/*.md
    assert_output ""
}

# --- docs/versions.md's table of tested versions ------------------------------

# version_of PACKAGE: its installed Debian version, upstream part only
# (3.10.8-1.1+deb12u1 -> 3.10.8, 1:25.2.3+dfsg-1 -> 25.2.3).
version_of() {
    dpkg-query -W -f='${Version}' "$1" 2>/dev/null | sed -E 's/^[0-9]+://; s/[-+~].*$//'
}

@test "docs/versions.md's table names this machine's RabbitMQ, Erlang and rabbitmq-c" {
    # (make check-brokers checks the trixie and sid rows against its roots)
    local row rmq erl rmqc
    row=$(grep -E '^\| host \(Debian 12\) \|' "$TOP/docs/versions.md") || fail "no host row in docs/versions.md"
    rmq=$(version_of rabbitmq-server)
    erl=$(version_of erlang-base)
    rmqc=$(version_of librabbitmq4)
    [ -n "$rmq" ] && [ -n "$erl" ] && [ -n "$rmqc" ] || skip "not a Debian machine with the test packages"
    [ "$(cut -d'|' -f3-5 <<<"$row" | tr -d ' ')" = "$rmq|$erl|$rmqc" ] ||
        fail "docs/versions.md says '$row'; this machine has RabbitMQ $rmq, Erlang $erl, rabbitmq-c $rmqc"
}

# hacking_rows: HACKING.md's layer table as "FILE<tab>MAY-INCLUDE" lines,
# one per file named in the first column.
hacking_rows() {
    sed -n '/^## The layers/,/^## /p' "$TOP/HACKING.md" | grep '^| `' |
        awk -F'|' '{ n = split($2, f, "`"); for (i = 2; i <= n; i += 2) print f[i] "\t" $4 }'
}

@test "HACKING.md's layer table names every source file once, and no file that is gone" {
    local rows f
    rows=$(hacking_rows)
    for f in "$TOP"/src/*.c; do
        f=${f##*/}
        [ "$(cut -f1 <<<"$rows" | grep -cxF "$f")" -eq 1 ] || fail "$f is not in exactly one row of HACKING.md's table"
    done
    for f in $(cut -f1 <<<"$rows"); do
        [ -e "$TOP/src/$f" ] || fail "HACKING.md's table names $f, which does not exist"
    done
}

@test "every #include of a source file is one its row of HACKING.md's table allows" {
    local file allowed inc stem bad=
    while IFS=$'\t' read -r file allowed; do
        stem=${file%.c}
        # its own header, whatever the file's stem implements (connect.c
        # and channels.c implement conn.h: their rows name conn)
        for inc in $(cat "$TOP/src/$file" $([ -e "$TOP/src/$stem.h" ] && echo "$TOP/src/$stem.h") |
            sed -nE 's/^#include "([a-z_]+)\.h".*/\1/p' | sort -u); do
            [ "$inc" = "$stem" ] && continue
            grep -qwF "$inc" <<<"$allowed" || bad+="$file includes $inc.h; "
        done
    done < <(hacking_rows)
    [ -z "$bad" ] || fail "not in HACKING.md's table: $bad"
}

@test "AMQP methods are named only where requests are built: conn.c, channels.c, messages.c, connect.c, request.c, probe.c, record.c" {
    local found
    found=$(grep -lE 'AMQP_[A-Z_]+_METHOD' "$TOP"/src/*.c | xargs -n1 basename |
        grep -vxE 'conn\.c|channels\.c|messages\.c|connect\.c|request\.c|probe\.c|record\.c' || true)
    [ -z "$found" ] || fail "AMQP methods named in $(echo $found) (HACKING.md, The layers)"
}
