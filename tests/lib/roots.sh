# shellcheck shell=bash
# Sourced by tests/lib/brokers.sh and tests/lib/deb-check.sh: minimal
# Debian roots made with debootstrap from the mirror the host's apt sources
# use, kept for the next run and reused when their set-up finished; the
# mounts in them, taken down whatever way a run ends; how long each phase
# took. (It sources procs.sh.)
#
# The script that sources it sets, before making or entering a root:
#   ROOTS   the directory the roots live in (ROOTS/SUITE each)
#   RECIPE  what a finished root's stamp says; a root made by another
#           recipe is made anew (bump it when the set-up changes)
#   PARENT  the directory its work directory goes in (TMPDIR, resolved)
#   MIRROR  the mirror (first line of `mirror`; roots_begin sets it)
#   LOCK    the descriptor of its lock, closed in what it starts (set by
#           roots_begin)
#   WORK    (optional) a work directory bind-mounted at the same path in
#           a root (mount_root)
# and defines our_pids: the processes kill_ours ends (see pids_rooted_in).
# Paths go into mountinfo and awk unquoted: they may only have letters,
# digits and ._/+- (the scripts check).

# shellcheck source=tests/lib/procs.sh
. "$(dirname "${BASH_SOURCE[0]}")/procs.sh"

die() {
    echo "${0##*/}: $*" >&2
    exit 1
}
say() { echo "# $*"; }

# roots_begin LOCKFILE WHO PACKAGES...: what a script does before it makes
# or enters a root: the paths checked (ROOTS and PARENT, the directory its
# work directory goes in), LOCKFILE taken (in LOCK; WHO says which script
# holds it when it is busy), PACKAGES installed on the host, MIRROR found,
# and the traps that run `cleanup` (the script's) whatever way it ends.
roots_begin() {
    local lockfile=$1 who=$2
    shift 2
    [[ $ROOTS =~ ^[A-Za-z0-9._/+-]+$ && $PARENT =~ ^[A-Za-z0-9._/+-]+$ ]] ||
        die "the paths of AMQPLOCK_ROOTS and TMPDIR may only have letters, digits and ._/+-"
    exec {LOCK}>"$lockfile"
    flock -n "$LOCK" || die "another $who uses $lockfile"
    tests/lib/install-deps.sh "$@"
    MIRROR=$(mirror | awk 'NR == 1')
    [ -n "$MIRROR" ] || die "no apt source for the host's own suite found in /etc/apt"
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
}

# --- time ---------------------------------------------------------------------------

# phase_start / phase_end NAME: how long a phase took, printed and kept (in
# PHASES) for the summary at the end.
PHASES=()
phase_start() { PHASE_T0=$SECONDS; }
phase_end() {
    local s=$((SECONDS - PHASE_T0))
    PHASES+=("$1: $s s")
    say "$1 took $s s"
}

# --- mounts and processes ------------------------------------------------------------

# mounts_under DIR: mount points at DIR or below it, deepest first.
mounts_under() {
    awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
mounted() { awk -v d="$1" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo; }

# pids_rooted_in DIR...: the processes whose root is one of the DIRs.
pids_rooted_in() {
    local p r d
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        for d in "$@"; do
            [ "$r" != "$d" ] || echo "${p#/proc/}"
        done
    done
}

# kill_ours: kills every process our_pids finds; bounded (10 s).
kill_ours() {
    local pids end=$((SECONDS + 10))
    while :; do
        mapfile -t pids < <(our_pids)
        [ ${#pids[@]} -gt 0 ] || return 0
        [ $SECONDS -lt $end ] || {
            echo "${0##*/}: processes left: ${pids[*]}" >&2
            return 1
        }
        kill -KILL "${pids[@]}" 2>/dev/null || true
        sleep 0.2
    done
}

# bind SRC DST: a bind mount, once. Private, so that nothing mounted later
# below SRC shows up in the root (or the other way round) on a host whose /
# is a shared mount.
bind() {
    mounted "$2" && return 0
    mount --bind "$1" "$2" || return 1
    mount --make-private "$2" 2>/dev/null || true
}

# mount_root ROOT: /proc (Erlang needs it), /dev (/dev/null, /dev/urandom),
# /dev/shm and the work directory, at the same path, in ROOT.
mount_root() {
    local root=$1
    mounted "$root/proc" || mount -t proc proc "$root/proc" || return 1
    bind /dev "$root/dev" || return 1
    # (the tmpfs where tests/run.sh keeps a node's data, if there is one)
    ! mountpoint -q /dev/shm || bind /dev/shm "$root/dev/shm" || return 1
    [ -z "${WORK:-}" ] || { mkdir -p "$root$WORK" && bind "$WORK" "$root$WORK"; }
}

# umount_under DIR: takes down every mount at or below DIR, deepest first;
# what keeps one busy is killed between tries (bounded: 20 tries).
umount_under() {
    local dir=$1 m
    local -a ms
    for _ in $(seq 1 20); do
        mapfile -t ms < <(mounts_under "$dir")
        [ ${#ms[@]} -gt 0 ] || return 0
        for m in "${ms[@]}"; do umount "$m" 2>/dev/null || true; done
        [ -n "$(mounts_under "$dir")" ] || return 0
        kill_ours || true
        sleep 0.5
    done
    echo "${0##*/}: could not unmount: $(mounts_under "$dir" | tr '\n' ' ')" >&2
    return 1
}

# safe_rm DIR: rm -rf DIR, refused while anything is mounted at or below it
# (a bind of /dev or of the work directory would be emptied through it).
safe_rm() {
    local m
    m=$(mounts_under "$1")
    [ -z "$m" ] || {
        echo "${0##*/}: not removing $1: mounted below it: $(tr '\n' ' ' <<<"$m")" >&2
        return 1
    }
    rm -rf --one-file-system -- "$1"
}

# --- the host's apt sources -----------------------------------------------------------

# mirror: the first URI of the host's apt sources (deb822 .sources files,
# then classic sources.list lines) that serves the host's own suite, e.g.
# bookworm (not bookworm-security).
mirror() {
    local suite f
    # shellcheck disable=SC1091
    suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$suite" ] || die "no VERSION_CODENAME in /etc/os-release"
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v want="$suite" '
            function check() {
                if (types ~ /(^| )deb( |$)/ && enabled != "no" && (" " suites " ") ~ (" " want " ") && uri != "") {
                    print uri; found = 1; exit
                }
                types = suites = uri = enabled = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { check(); next }
            # field names are case-insensitive
            { key = tolower($1); val = $0; sub(/^[^:]*:[ \t]*/, "", val) }
            key == "types:" { types = val }
            key == "suites:" { suites = val }
            key == "uris:" { split(val, u, /[ \t]+/); uri = u[1] }
            key == "enabled:" { enabled = tolower(val) }
            END { if (!found) check() }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [options] URI SUITE COMPONENTS...
        sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk -v want="$suite" '$1 == "deb" && $3 == want { print $2 }'
    done
}

# --- the roots ------------------------------------------------------------------------

# in_root ROOT CMD...: CMD in ROOT as root, with a plain environment;
# bounded (10 minutes: an apt-get from the mirror).
in_root() {
    local root=$1
    shift
    timeout -k 10 600 chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive "$@" {LOCK}>&-
}

# make_root SUITE PACKAGE...: ROOTS/SUITE with the PACKAGEs installed,
# reused if its stamp (ROOTS/SUITE/.amqplock-root) says so; returns non-zero
# (having said why) if it could not be made. A root just made is left
# mounted (mount_root).
make_root() {
    local suite=$1 root=$ROOTS/$1 want
    shift
    want="$RECIPE: $suite from $MIRROR"
    if [ "$(cat "$root/.amqplock-root" 2>/dev/null)" = "$want" ]; then
        say "reusing the $suite root $root"
        return 0
    fi
    # Half made (or by another recipe): made anew. Whatever an interrupted
    # debootstrap left mounted goes first.
    if [ -e "$root" ]; then
        say "making the $suite root $root anew"
        umount_under "$root" && safe_rm "$root" || return 1
    fi
    phase_start
    say "debootstrap --variant=minbase $suite $root $MIRROR"
    if ! timeout -k 10 600 debootstrap --variant=minbase "$suite" "$root" "$MIRROR" >"$ROOTS/$suite.log" 2>&1 \
        {LOCK}>&-; then
        tail -n 20 "$ROOTS/$suite.log" | sed 's/^/#   /'
        echo "${0##*/}: debootstrap of $suite failed (log in $ROOTS/$suite.log)" >&2
        return 1
    fi
    phase_end "$suite: debootstrap"
    phase_start
    # sid's Release file may be past its Valid-Until on the mirror; any
    # apt-get inside (tests/lib/install-deps.sh too) must accept it.
    echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99amqplock"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    # "localhost", which the nodes' names use, must resolve inside.
    cp /etc/hosts "$root/etc/hosts"
    # No service starts from a package's postinst.
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod 755 "$root/usr/sbin/policy-rc.d"
    mount_root "$root" || return 1
    if ! { in_root "$root" apt-get update -qq &&
        in_root "$root" apt-get install -y -qq --no-install-recommends "$@" >/dev/null; } \
        >"$ROOTS/$suite-install.log" 2>&1; then
        tail -n 20 "$ROOTS/$suite-install.log" | sed 's/^/#   /'
        echo "${0##*/}: installing $* in the $suite root failed" >&2
        return 1
    fi
    kill_ours
    echo "$want" >"$root/.amqplock-root"
    phase_end "$suite: $* installed"
}
