#!/bin/sh
# Running the command in a throw-away clone that borrows the repository's
# objects (`git clone --shared`): the other isolation a user would pick.
#
#     cd <repository> && sh bench/clone.sh [-o <patch>] [--] <command> [<arg>...]
#
# It clones the repository into a fresh temporary folder (objects through
# alternates, the work tree checked out at HEAD), runs the command there,
# marks new files intent-to-add, writes the binary patch against HEAD (to
# <patch>, or beside the clone as <tmp>/patch) and deletes the clone. Plain,
# as a person would type it. Exits with the command's code.
set -eu

patch=
if [ "${1-}" = -o ]; then
    patch=$2
    shift 2
fi
if [ "${1-}" = -- ]; then
    shift
fi

tmp=$(mktemp -d)
git clone --quiet --shared . "$tmp/clone"
status=0
(cd "$tmp/clone" && exec "$@") || status=$?
git -C "$tmp/clone" add -N .
git -C "$tmp/clone" diff --binary HEAD >"${patch:-$tmp/patch}"
rm -rf "$tmp/clone"
exit "$status"
