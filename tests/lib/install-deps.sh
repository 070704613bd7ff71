#!/bin/sh
# Installs the Debian packages named as arguments that are not installed yet.
# As root on a fresh Debian machine; does nothing if all are present.
#
#   install-deps.sh PACKAGE...         the packages named
#   install-deps.sh --build-deps DIR   what DIR/debian/control's Build-Depends
#                                      name, and build-essential, through
#                                      apt-get build-dep (and dpkg-dev first)
set -eu
need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: need root to install:$1" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
}
if [ "${1:-}" = --build-deps ]; then
	[ $# -eq 2 ] || { echo "usage: install-deps.sh --build-deps DIR" >&2; exit 2; }
	sh "$0" dpkg-dev
	# (apt-get build-dep takes a directory only as a path with a slash)
	dir=$(cd "$2" && pwd)
	(cd "$dir" && dpkg-checkbuilddeps) 2>/dev/null && exit 0
	echo "installing the build dependencies of $dir/debian/control"
	need_root " the build dependencies of $dir/debian/control"
	apt-get build-dep -y -qq --no-install-recommends "$dir" >/dev/null
	exit 0
fi
missing=
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
need_root "$missing"
# policy-rc.d keeps the packaged rabbitmq-server service from starting:
# the tests run their own private node. ($missing unquoted: one word per
# package.)
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
