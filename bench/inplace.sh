#!/bin/sh
# Running the command in place, the way lint-staged does: the baseline a user
# compares git isopatch with when they would otherwise not isolate at all.
#
#     cd <repository> && sh bench/inplace.sh [-o <patch>] [--] <command> [<arg>...]
#
# It puts every local change aside (`git stash push --include-untracked`),
# runs the command in the checkout itself, marks new files intent-to-add,
# writes the binary patch against HEAD, puts the checkout back to HEAD
# (`git reset --hard`, which also drops the intent-to-add files), and brings
# the put-aside changes back (`git stash pop`, only when something was
# stashed). It writes the user's work tree, index and stash while the command
# runs: exactly what git isopatch never does. Exits with the command's code.
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
before=$(git rev-parse -q --verify refs/stash || true)
git stash push --quiet --include-untracked
after=$(git rev-parse -q --verify refs/stash || true)
status=0
("$@") || status=$?
git add -N .
git diff --binary HEAD >"${patch:-$tmp/patch}"
git reset --quiet --hard HEAD
if [ "$before" != "$after" ]; then
    git stash pop --quiet --index
fi
exit "$status"
