#!/usr/bin/env bash
# copy-tree.sh DEST: copies the project's files to DEST (made if missing),
# as a build from a clean clone would see them: in a git checkout, the
# tracked files as they are in the work tree and new files git does not
# ignore; elsewhere (an unpacked tarball), everything but .git, build/ and
# ./amqplock. Run from anywhere; DEST may lie under build/.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: copy-tree.sh DEST" >&2; exit 2; }
mkdir -p "$1"
dest=$(cd "$1" && pwd -P)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # (--ignore-failed-read: a tracked file deleted in the work tree)
    git ls-files -z --cached --others --exclude-standard |
        tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$dest"
else
    tar --exclude=./.git --exclude=./build --exclude=./amqplock -cf - . | tar -xf - -C "$dest"
fi
