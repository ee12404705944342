#!/bin/sh
# The plain git sequence that `git isopatch` stands for: the baseline that
# bench/run.py times the tool against.
#
#     cd <repository> && sh bench/bare.sh [-o <patch>] [--] <command> [<arg>...]
#
# It creates a linked worktree at HEAD in a fresh temporary folder, runs the
# command there, marks new files intent-to-add, writes the binary patch against
# HEAD (to <patch>, or beside the worktree as <tmp>/patch) and removes the
# worktree. Deliberately plain: no parallel checkout (checkout.workers) or any
# other tuning, just what a person would type. Exits with the command's code.
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
git worktree add --quiet --detach "$tmp/wt" HEAD
status=0
(cd "$tmp/wt" && exec "$@") || status=$?
git -C "$tmp/wt" add -N .
git -C "$tmp/wt" diff --binary HEAD >"${patch:-$tmp/patch}"
git worktree remove --force "$tmp/wt"
exit "$status"
