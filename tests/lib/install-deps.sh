#!/bin/sh
# Installs the Debian packages named as arguments that are not installed yet.
# As root on a fresh Debian machine; does nothing if all are present.
set -eu
missing=
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: need root to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d keeps the packaged rabbitmq-server service from starting:
# the tests run their own private node.
apt-get install -y -qq --no-install-recommends $missing >/dev/null
