#!/usr/bin/env bash
# make check-deb: the Debian package checked as a user gets it. Builds it
# (make deb), runs lintian on it on the host (an error or a warning fails),
# then installs it with apt-get in a clean minimal Debian root of the host's
# own suite (debootstrap --variant=minbase, with man-db), where `amqplock
# --version` must print the package's version, `man -w amqplock` must find
# the manual page, and the bash, zsh and fish completions must be where
# those shells look. Prints one TAP line per test and how long each phase
# took, and ends with one line "N passed, N failed"; exits non-zero on any
# failure. Also: `dpkg -c` lists the README and docs/ under
# /usr/share/doc/amqplock. Runs as root (debootstrap, mount, chroot);
# about 15 s with the root kept from an earlier run, about a minute more
# without (debootstrap).
#
#   AMQPLOCK_ROOTS  where the roots live (default
#                   ${TMPDIR:-/tmp}/amqplock-roots), as for
#                   tests/lib/brokers.sh: ROOTS/SUITE (bookworm on Debian
#                   12) is reused when its set-up finished
#                   (ROOTS/SUITE/.amqplock-root), made anew otherwise; one
#                   run at a time uses it (ROOTS/SUITE.lock)
#
# The package goes into a copy of that root made for the run, so that the
# kept root stays clean. Whatever way this script ends, it takes its mounts
# down and removes its work directory, copy and all; it never removes a
# directory while something is mounted below it.
set -euo pipefail
# shellcheck source=tests/lib/roots.sh
. "$(dirname "${BASH_SOURCE[0]}")/roots.sh"
cd "$(dirname "$0")/../.."

ROOTS=${AMQPLOCK_ROOTS:-${TMPDIR:-/tmp}/amqplock-roots}
# What a finished root's stamp says (tests/lib/roots.sh); bump when the
# set-up changes.
RECIPE="amqplock-deb-root 1"

PASSED=0 FAILED=0
ok() {
    echo "ok - $*"
    PASSED=$((PASSED + 1))
}
not_ok() {
    echo "not ok - $*"
    FAILED=$((FAILED + 1))
}
# indent FILE: FILE's last lines, as TAP comments
indent() { tail -n "${2:-20}" "$1" | sed 's/^/#   /'; }

# The work directory (DEB_WORK, not WORK: mount_root would bind WORK into
# the root, and the copy of the root lies inside it) and the copy in it.
DEB_WORK='' COPY=''
our_pids() {
    local p
    pids_rooted_in "$ROOTS/$SUITE" ${COPY:+"$COPY"} | while read -r p; do
        if [ "$p" != $$ ] && ! ended "$p"; then echo "$p"; fi
    done
}

CLEANED=
cleanup() {
    local rc=$? ok=1
    set +e
    [ -z "$CLEANED" ] || return 0
    CLEANED=1
    trap '' INT TERM HUP
    kill_ours || ok=
    umount_under "$ROOTS/$SUITE" || ok=
    if [ -n "$DEB_WORK" ] && [ -d "$DEB_WORK" ]; then
        umount_under "$DEB_WORK" || ok=
        if [ -n "$ok" ]; then
            safe_rm "$DEB_WORK" || true
        else
            echo "deb-check.sh: leaving $DEB_WORK (processes or mounts left, see above)" >&2
        fi
    fi
    exit "$rc"
}

# in_copy CMD...: CMD in the copy of the root (tests/lib/roots.sh's in_root)
in_copy() { in_root "$COPY" "$@"; }

# installed_tests VERSION DEB: the package installed in the copy, and tried.
installed_tests() {
    local v=$1 deb=$2 out f got
    phase_start
    cp "$deb" "$COPY/tmp/"
    # shellcheck disable=SC2016
    if { in_copy apt-get update -qq &&
        in_copy apt-get install -y -qq --no-install-recommends "/tmp/${deb##*/}" &&
        got=$(in_copy dpkg-query -W -f '${Version} (Depends: ${Depends})' amqplock); } \
        >"$DEB_WORK/install.log" 2>&1 && [ "${got%% *}" = "$v" ]; then
        ok "apt-get install ./${deb##*/} in a clean $SUITE root: amqplock $got"
    else
        not_ok "apt-get install ./${deb##*/} in a clean $SUITE root (installed: ${got:-nothing})"
        indent "$DEB_WORK/install.log"
    fi
    phase_end "the package installed in the copy"
    out=$(in_copy amqplock --version 2>&1) || true
    if [ "$out" = "amqplock $v" ]; then
        ok "amqplock --version in the root prints '$out'"
    else
        not_ok "amqplock --version in the root prints '$out', not 'amqplock $v'"
    fi
    out=$(in_copy man -w amqplock 2>&1) || true
    if [ "$out" = /usr/share/man/man1/amqplock.1.gz ]; then
        ok "man -w amqplock in the root finds $out"
    else
        not_ok "man -w amqplock in the root says '$out', not /usr/share/man/man1/amqplock.1.gz"
    fi
    for f in /usr/share/bash-completion/completions/amqplock /usr/share/zsh/vendor-completions/_amqplock \
        /usr/share/fish/vendor_completions.d/amqplock.fish; do
        if [ -f "$COPY$f" ] && [ -s "$COPY$f" ]; then
            ok "the root has $f"
        else
            not_ok "the root has no $f"
        fi
    done
}

main() {
    [ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, mount, chroot)"
    # shellcheck disable=SC1091
    SUITE=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$SUITE" ] || die "no VERSION_CODENAME in /etc/os-release"
    mkdir -p "$ROOTS"
    ROOTS=$(cd "$ROOTS" && pwd -P)
    PARENT=$(cd "${TMPDIR:-/tmp}" && pwd -P)
    roots_begin "$ROOTS/$SUITE.lock" tests/lib/deb-check.sh lintian debootstrap
    local t0=$SECONDS v arch deb r
    DEB_WORK=$(mktemp -d "$PARENT/amqplock-deb.XXXXXX")
    say "roots in $ROOTS, mirror $MIRROR, work directory $DEB_WORK"

    phase_start
    v=$(dpkg-parsechangelog -S Version)
    arch=$(dpkg --print-architecture)
    deb=build/deb/amqplock_${v}_$arch.deb
    if make deb </dev/null >"$DEB_WORK/make-deb.log" 2>&1 {LOCK}>&- && [ -f "$deb" ]; then
        ok "make deb builds $deb"
    else
        not_ok "make deb builds $deb"
        indent "$DEB_WORK/make-deb.log" 30
    fi
    phase_end "make deb"

    # The package is self-contained: the README and docs/ that the man
    # page and the messages point to are in it.
    if [ -f "$deb" ]; then
        local listed missing=
        listed=$(dpkg -c "$deb" | awk '{ print $NF }')
        for r in README.md docs/operators.md docs/guarantees.md docs/design.md; do
            grep -qE "^\./usr/share/doc/amqplock/$r(\.gz)?$" <<<"$listed" || missing+=" $r"
        done
        if [ -z "$missing" ]; then
            ok "dpkg -c lists the README and docs/ under /usr/share/doc/amqplock"
        else
            not_ok "dpkg -c does not list under /usr/share/doc/amqplock:$missing"
        fi
    fi

    if [ -f "$deb" ]; then
        phase_start
        # Every tag shown; only errors and warnings fail.
        if lintian -I --pedantic --fail-on error,warning "build/deb/amqplock_${v}_$arch.changes" \
            >"$DEB_WORK/lintian.log" 2>&1; then
            ok "lintian: no errors or warnings on build/deb/amqplock_${v}_$arch.changes"
        else
            not_ok "lintian on build/deb/amqplock_${v}_$arch.changes"
        fi
        grep -v '^running with root privileges' "$DEB_WORK/lintian.log" | sed 's/^/#   /' || true
        phase_end "lintian"
    fi

    if [ -f "$deb" ] && make_root "$SUITE" man-db && umount_under "$ROOTS/$SUITE"; then
        phase_start
        COPY=$DEB_WORK/root
        cp -a --one-file-system "$ROOTS/$SUITE" "$COPY"
        phase_end "the root copied"
        if mount_root "$COPY"; then
            installed_tests "$v" "$deb"
        else
            not_ok "could not mount /proc and /dev in $COPY"
        fi
        umount_under "$COPY" || die "mounts left in $COPY"
    else
        not_ok "no clean $SUITE root to install the package in"
    fi

    say "times:"
    for r in "${PHASES[@]}"; do say "  $r"; done
    say "  total: $((SECONDS - t0)) s"
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
}

main "$@"
