#!/bin/sh
# The floor of a sandboxed run over a base tree: the floor of the design
# card's libraries (bench/floor.py, started through git as
# `git isopatch-floor`), then bubblewrap running the command with the
# overlays a run sets up (copy-on-write /tmp and /var/tmp, and the base tree
# as the lower layer of a worktree whose upper and work folders are made for
# the run and removed after it), and nothing else: no git, no patch.
# With --checkout, the base tree is first made where <base tree> says, as a
# first run at a commit makes it (`git worktree add --detach`, with the
# configuration the tool gives it): the floor of a cold run.
#
#     cd <repository> && sh bench/floor_bwrap.sh <bwrap> [--checkout] <base tree> [--] <command> [<arg>...]
#
# Exits with the command's code.
set -eu

bwrap=$1
shift
checkout=
if [ "$1" = --checkout ]; then
    checkout=true
    shift
fi
base=$1
shift
if [ "${1-}" = -- ]; then
    shift
fi

git isopatch-floor -q -o /dev/null -- "$@"
if [ -n "$checkout" ]; then
    git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c checkout.workers=0 \
        worktree add --quiet --detach "$base" HEAD
fi
tmp=$(mktemp -d)
mkdir "$tmp/tmp-upper" "$tmp/tmp-work" "$tmp/var-upper" "$tmp/var-work" \
    "$tmp/upper" "$tmp/work" "$tmp/worktree"
status=0
"$bwrap" --die-with-parent --unshare-all --unshare-user --disable-userns --cap-drop ALL \
    --ro-bind / / --dev /dev --proc /proc --tmpfs /dev/shm --tmpfs /run \
    --overlay-src /tmp --overlay "$tmp/tmp-upper" "$tmp/tmp-work" /tmp \
    --overlay-src /var/tmp --overlay "$tmp/var-upper" "$tmp/var-work" /var/tmp \
    --overlay-src "$base" --overlay "$tmp/upper" "$tmp/work" "$tmp/worktree" \
    --chdir "$tmp/worktree" -- "$@" || status=$?
rm -rf "$tmp"
exit "$status"
