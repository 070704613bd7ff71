#!/usr/bin/env bash
# make model: SPIN explores model/hold.pml, the holder's protocol,
# model/line.pml, the line designed for hand-overs at every slot count,
# and model/mlease.pml, the lease made of messages designed for issue 43,
# and each of their known-bad variants. A protocol must show no violation
# in any configuration; every BUG_ variant must yield a counterexample, or
# the model has lost its teeth; every REACH_ point must be reached, or the
# model no longer makes the runs its properties speak of. Prints a TAP line
# per run (states, depth, time) and ends with "N passed, N failed"; exits
# non-zero on any failure.
#
#   model/run.sh [NAME...]   NAME: a configuration below (faults, adversary,
#                            both, evict, evict-faults, token,
#                            token-adversary, drain, drain-faults, line-faults,
#                            line-adversary, line-both, mlease-faults,
#                            mlease-adversary, mlease-both),
#                            a BUG_ variant or a REACH_ point; default: all
#                            but both
#
# Configurations of the protocol (FAULTS faults and ADV adversary acts per
# run, at any step of any tick):
#   faults      FAULTS=1 ADV=0   exhaustive (about 35 million states; not
#                                in make check, which runs tests/model.bats
#                                and tests/mlease.bats)
#   adversary   FAULTS=0 ADV=1   exhaustive (about 15 million states)
#   both        FAULTS=1 ADV=1   bitstate, only when named or for `make
#                                model` (MODEL_ALL=1): too large to keep
#   evict       FAULTS=0 ADV=0, an administrator's eviction  exhaustive
#                                (about 6 million states)
#   evict-faults FAULTS=1 ADV=0, the same  bitstate (its full search
#                                passes MODEL_MEMORY: about 129 million
#                                states, hash factor 16.6 in the 2^31-bit
#                                hash it had then; not in make check)
#   token       FAULTS=0 ADV=0, the fencing token  exhaustive (about 1.6
#                                million states)
#   token-adversary FAULTS=0 ADV=1, the same  exhaustive (about 16 million
#                                states; not in make check)
#   drain       FAULTS=0 ADV=0, an administrator's --drain shrink, then
#                                the slot made again  exhaustive (about 16
#                                million states)
#   drain-faults FAULTS=1 ADV=0, the same  (not in make check)
# and of the line (model/line.pml: 2 slots):
#   line-faults     FAULTS=1 ADV=0, 4 clients  exhaustive (about 21 million
#                                states; not in make check)
#   line-adversary  FAULTS=0 ADV=1, 3 clients  exhaustive (about 0.4 million)
#   line-both       FAULTS=1 ADV=1, 3 clients  exhaustive (about 1.5 million)
# and of the lease made of messages (model/mlease.pml: 2 lease queues,
# ended or handed over):
#   mlease-faults    FAULTS=1 ADV=0  bitstate (about 257 million states,
#                                hash factor 33, 6 minutes; since the
#                                keeper's last act its full search does
#                                not fit in 16 GB); not in make check
#   mlease-adversary FAULTS=0 ADV=1  exhaustive (about 35 million states,
#                                a minute and a half)
#   mlease-both      FAULTS=1 ADV=1  bitstate, only when named or for
#                                `make model`: too large to keep (about
#                                1.03 billion states, hash factor 8.3, 26
#                                minutes)
# A configuration is searched in full (compressed states, -DCOLLAPSE)
# within MODEL_MEMORY MB (default 5000); one that does not fit is searched
# again with a bitstate hash, and its coverage (hash factor) printed.
# A counterexample's trail stays in MODEL_KEEP (if set) for `spin -t -p`.
set -u
cd "$(dirname "$0")/.." || exit 2
command -v spin >/dev/null || { echo "model/run.sh: spin is missing (make deps installs it)" >&2; exit 2; }
CC=${CC:-cc}
MEMORY=${MODEL_MEMORY:-5000}
HOLD=$PWD/model/hold.pml LINE=$PWD/model/line.pml MLEASE=$PWD/model/mlease.pml

declare -A CONFIG=(
    [faults]="-DFAULTS=1 -DADV=0"
    [adversary]="-DFAULTS=0 -DADV=1"
    [both]="-DFAULTS=1 -DADV=1"
    [line-faults]="-DFAULTS=1 -DADV=0"
    [line-adversary]="-DFAULTS=0 -DADV=1 -DCLIENTS=3"
    [line-both]="-DFAULTS=1 -DADV=1 -DCLIENTS=3"
    [evict]="-DFAULTS=0 -DADV=0 -DEVICT"
    [evict-faults]="-DFAULTS=1 -DADV=0 -DEVICT"
    [token]="-DFAULTS=0 -DADV=0 -DTOKEN"
    [token-adversary]="-DFAULTS=0 -DADV=1 -DTOKEN"
    [drain]="-DFAULTS=0 -DADV=0 -DDRAIN"
    [drain-faults]="-DFAULTS=1 -DADV=0 -DDRAIN"
    [mlease-faults]="-DFAULTS=1 -DADV=0"
    [mlease-adversary]="-DFAULTS=0 -DADV=1"
    [mlease-both]="-DFAULTS=1 -DADV=1"
)
# Configurations searched with a bitstate hash at once: too large to keep
declare -A BITSTATE_ONLY=([both]=1 [mlease-both]=1)
# Each variant in the configuration that shows its fault.
declare -A BUG=(
    [BUG_ADOPT_OFFER]="-DSAFE_ONLY -DFAULTS=1 -DADV=1"
    [BUG_KEEPER_LATE]="-DSAFE_ONLY -DFAULTS=1 -DADV=0"
    [BUG_LATE_CLAIM]="-DSAFE_ONLY -DFAULTS=1 -DADV=0"
    [BUG_OFFERER_ENDS_LEASE]="-DSAFE_ONLY -DFAULTS=1 -DADV=0"
    [BUG_NO_WAKE]="-DFAULTS=0 -DADV=0"
    [BUG_ANY_ANSWER]="-DSAFE_ONLY -DFAULTS=1 -DADV=2"
    [BUG_EVICT_FREES]="-DSAFE_ONLY -DFAULTS=0 -DADV=0 -DEVICT"
    [BUG_TOKEN_EARLY]="-DSAFE_ONLY -DFAULTS=1 -DADV=0 -DTOKEN"
    [BUG_DRAIN_ADMITS]="-DSAFE_ONLY -DFAULTS=0 -DADV=0 -DDRAIN"
    [BUG_ACK_AT_GET]="-DFAULTS=1 -DADV=0"
    [BUG_SINGLE_OFFER]="-DFAULTS=1 -DADV=0"
    [BUG_WAKE_ACKS]="-DFAULTS=1 -DADV=0"
    [BUG_SKIP_COUNT]="-DFAULTS=1 -DADV=0"
    [BUG_ONE_QUEUE]="-DFAULTS=1 -DADV=0"
    [BUG_TAKE_LAST]="-DFAULTS=0 -DADV=1"
    [BUG_TAKE_UNKNOWN]="-DFAULTS=1 -DADV=0"
    [BUG_ADOPT_AGE0]="-DFAULTS=1 -DADV=0"
    [BUG_TAKE_BACK_OLD]="-DFAULTS=1 -DADV=1"
    [BUG_KEEPER_TOLD_LATE]="-DFAULTS=1 -DADV=0"
)
# Variants whose counterexample lies beyond an exhaustive search's memory:
# searched with a bitstate hash, built with -O2 (about a minute).
declare -A BUG_BITSTATE=([BUG_TAKE_BACK_OLD]=1)
# Points of model/line.pml (1-6) and model/mlease.pml (7, 8) that a run
# must reach (its -DREACH=N), and what each is. make check (tests/model.bats,
# tests/mlease.bats) searches for 1, 2, 4, 7 and 8 only: the other three are
# reached whenever a variant's counterexample is found, since each variant
# changes only what happens there (3: BUG_SINGLE_OFFER, 5: BUG_WAKE_ACKS, 6: BUG_SKIP_COUNT;
# 6 searched alone is 0.95 million states, 21 s of CPU in CI).
declare -A REACH=(
    [REACH_HANDOVER]="1 a lease handed over through #line"
    [REACH_TWO_AT_ONCE]="2 two releasers offering at once, one answering"
    [REACH_ADOPTED]="4 a waiter adopting a lease"
    [REACH_GONE_ENTRY]="3 a releaser passing an entry whose waiter is gone"
    [REACH_WOKEN]="5 a waiter woken for a slot freed without a hand-over"
    [REACH_JOIN_FREE]="6 a newcomer joining the line while a slot is free"
    [REACH_MADOPT]="7 an adopter's command started under the lease handed to it"
    [REACH_LAST_ACT]="8 a keeper's last act taking its killed amqplock's message"
)
# Which model each name explores
model_of() {
    case $1 in
    mlease-* | REACH_MADOPT | REACH_LAST_ACT | BUG_ONE_QUEUE | BUG_TAKE_LAST | BUG_TAKE_UNKNOWN | \
        BUG_TAKE_BACK_OLD | BUG_ADOPT_AGE0 | BUG_KEEPER_TOLD_LATE) echo "$MLEASE" ;;
    line-* | REACH_* | BUG_ACK_AT_GET | BUG_SINGLE_OFFER | BUG_WAKE_ACKS | BUG_SKIP_COUNT) echo "$LINE" ;;
    *) echo "$HOLD" ;;
    esac
}
ORDER=(faults adversary BUG_ADOPT_OFFER BUG_KEEPER_LATE BUG_LATE_CLAIM
    BUG_OFFERER_ENDS_LEASE BUG_NO_WAKE BUG_ANY_ANSWER evict evict-faults BUG_EVICT_FREES
    token token-adversary BUG_TOKEN_EARLY
    line-faults line-adversary line-both BUG_ACK_AT_GET BUG_SINGLE_OFFER BUG_WAKE_ACKS
    BUG_SKIP_COUNT REACH_HANDOVER REACH_TWO_AT_ONCE REACH_GONE_ENTRY
    REACH_ADOPTED REACH_WOKEN REACH_JOIN_FREE
    mlease-faults mlease-adversary BUG_ONE_QUEUE BUG_TAKE_LAST BUG_TAKE_UNKNOWN
    BUG_TAKE_BACK_OLD BUG_ADOPT_AGE0 BUG_KEEPER_TOLD_LATE REACH_MADOPT REACH_LAST_ACT)

work=$(mktemp -d "${TMPDIR:-/tmp}/amqplock-model.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0 failed=0 n=0

# pan DIR DEFINES CFLAGS MODEL [OPT]: pan built in DIR (cc OPT, -O2 unless
# given) and run; its output in DIR/out. A counterexample's search is
# short: built with -O0, it is built in a fifth of the time (2 s, not 10)
pan() {
    local dir=$1 defines=$2 cflags=$3 model=$4 opt=${5:--O2}
    mkdir -p "$dir"
    (
        cd "$dir" || exit 2
        # shellcheck disable=SC2086
        spin -a $defines "$model" >spin.out 2>&1 || { cat spin.out; exit 2; }
        # shellcheck disable=SC2086
        $CC "$opt" -w -DSAFETY -DMEMLIM="$MEMORY" $cflags -o pan pan.c || exit 2
        # (nice: beside make check's suites, which measure time, the
        # search is the one that can wait; a bitstate search has a
        # 2^33-bit hash, 1 GB: mlease-both's 1.03 billion states had a
        # hash factor of 8.3 in it; make check runs none)
        case $cflags in
        *BITSTATE*) nice -n 10 ./pan -m400000 -w33 >out 2>&1 ;;
        *) nice -n 10 ./pan -m400000 >out 2>&1 ;;
        esac
        exit 0
    )
}

# field OUT: "S states, depth D, T s" from pan's report
field() {
    awk '/states, stored/ { s = $1 } /depth reached/ { d = $6; sub(",", "", d) }
        /elapsed time/ { t = $4 } /hash factor/ { h = $3 }
        END { printf "%s states, depth %s, %s s%s", s, d, t, (h ? ", hash factor " h : "") }' "$1"
}

result() {
    n=$((n + 1))
    if [ "$1" = ok ]; then
        passed=$((passed + 1))
        echo "ok $n - $2"
    else
        failed=$((failed + 1))
        echo "not ok $n - $2"
    fi
}

protocol() {
    local name=$1 dir=$work/$1 out how=exhaustive model
    out=$dir/out model=$(model_of "$name")
    if [ -z "${BITSTATE_ONLY[$name]:-}" ]; then
        pan "$dir" "${CONFIG[$name]}" "-DCOLLAPSE" "$model" || { result fail "$name: spin or cc failed"; return; }
    fi
    if [ -n "${BITSTATE_ONLY[$name]:-}" ] || grep -qE 'pan: reached -DMEMLIM bound|max search depth too small' "$out"; then
        how=bitstate
        pan "$dir" "${CONFIG[$name]}" "-DBITSTATE" "$model" || { result fail "$name: spin or cc failed"; return; }
    fi
    if grep -q 'errors: 0' "$out" && ! grep -q 'assertion violated' "$out"; then
        result ok "the protocol, $name (${CONFIG[$name]}): no violation, $how: $(field "$out")"
    else
        result fail "the protocol, $name (${CONFIG[$name]}): $(grep -m1 -E 'violated|error' "$out")"
        keep "$dir" "$name" "$model"
    fi
}

variant() {
    local name=$1 dir=$work/$1 out cflags= opt=-O0
    [ -z "${BUG_BITSTATE[$name]:-}" ] || cflags=-DBITSTATE opt=-O2
    pan "$dir" "-D$name ${BUG[$name]}" "$cflags" "$(model_of "$name")" "$opt" || { result fail "$name: spin or cc failed"; return; }
    out=$dir/out
    if grep -q 'assertion violated' "$out"; then
        result ok "$name: a counterexample, $(grep -m1 -o 'assertion violated .*' "$out" | sed -E 's/ \(at depth [0-9]+\)$//' | cut -c1-48)... ($(field "$out"))"
    else
        result fail "$name: no counterexample ($(field "$out")): the model no longer sees this bug"
    fi
}

# reached NAME: the point is reached (its assertion, -DREACH=N, fails)
reached() {
    local name=$1 dir=$work/$1 out point what
    read -r point what <<<"${REACH[$name]}"
    pan "$dir" "-DREACH=$point -DFAULTS=1 -DADV=0" "-DCOLLAPSE" "$(model_of "$name")" -O0 || { result fail "$name: spin or cc failed"; return; }
    out=$dir/out
    if grep -q 'assertion violated' "$out"; then
        result ok "$name: the $(basename "$(model_of "$name")" .pml) model reaches $what ($(field "$out"))"
    else
        result fail "$name: never reached: $what ($(field "$out"))"
    fi
}

keep() {
    [ -n "${MODEL_KEEP:-}" ] || return 0
    mkdir -p "$MODEL_KEEP/$2" && cp "$1"/*.trail "$3" "$MODEL_KEEP/$2/" 2>/dev/null
    echo "# the trail is in $MODEL_KEEP/$2 (spin -t -p $(basename "$3"))"
}

[ $# -gt 0 ] || set -- "${ORDER[@]}"
[ -z "${MODEL_ALL:-}" ] || set -- "$@" both mlease-both
t0=$SECONDS
for name in "$@"; do
    if [ -n "${CONFIG[$name]:-}" ]; then
        protocol "$name"
    elif [ -n "${BUG[$name]:-}" ]; then
        variant "$name"
    elif [ -n "${REACH[$name]:-}" ]; then
        reached "$name"
    else
        result fail "$name: no such configuration or variant"
    fi
done
echo "# model/run.sh took $((SECONDS - t0)) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
