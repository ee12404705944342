"""A zombie is not alive (design: procedure step 5, ``--timeout`` and
forwarded signals).  When the command is a shell whose child is orphaned
and then ends, the child is reparented to PID 1 or to the nearest
subreaper; if that one never reaps it (a container without an init), the
zombie stays in the command's process group for ever.  git-isopatch must
not wait its whole grace period for it.

The harness below is that careless reaper: it marks itself a child
subreaper (prctl(2), ``PR_SET_CHILD_SUBREAPER``), starts git-isopatch, and
waits for git-isopatch alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from repo_helpers import ISOPATCH

from git_isopatch.sandbox.command import _group_alive

HARNESS = r"""
import ctypes, json, os, subprocess, sys, time
PR_SET_CHILD_SUBREAPER = 36
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    sys.exit(77)
start = time.monotonic()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out, err = child.communicate()  # waits for git-isopatch only, never for orphans
elapsed = time.monotonic() - start
zombies = 0
for pid in os.listdir("/proc"):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        continue
    if fields[0] == b"Z" and int(fields[1]) == os.getpid():
        zombies += 1
print(json.dumps({"rc": child.returncode, "elapsed": elapsed, "zombies": zombies,
                  "err": err.decode(errors="replace")}))
"""


def _run_under_careless_reaper(repo: Path, env, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", HARNESS, str(ISOPATCH), *args],
        cwd=repo,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


#: A shell whose child outlives it by a moment and then ends: the shell
#: leaves on the timeout's SIGTERM (at 1 s); its subshell ignores SIGTERM,
#: is orphaned, ends at 1.3 s and becomes a zombie that its new parent (the
#: harness) never reaps.
ORPHAN_THEN_ZOMBIE = "trap 'exit 0' TERM; (trap '' TERM; sleep 1.3) & wait"


def test_timeout_with_a_zombie_left_in_the_group_ends(env, make_repo) -> None:
    """The command's shell leaves on the timeout and its orphaned child
    becomes a zombie nobody reaps: the run still ends with the timeout's
    status and message.  (How long it waits is not asserted here, tests do
    not time; that the zombie does not count as a live member, which is
    what spares the grace period, is the test below.)"""
    repo = make_repo()
    zombie = _run_under_careless_reaper(
        repo, env, "--timeout", "1", "--", "sh", "-c", ORPHAN_THEN_ZOMBIE
    )
    assert zombie["rc"] == 124, zombie["err"]
    assert "error: the command timed out after 1 second" in zombie["err"]
    assert zombie["zombies"] >= 1, "the harness did not get the zombie it needs"


def _state(pid: int) -> bytes:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0]


def test_a_group_whose_only_member_is_a_zombie_is_not_alive() -> None:
    """:func:`_group_alive` decides when git-isopatch stops waiting for the
    command's group: a running member counts, a zombie (ended, not reaped,
    still in its group for ``kill(-pgid, 0)``) does not."""
    running = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert _group_alive(running.pid)
    finally:
        running.kill()
        running.wait()
    ended = subprocess.Popen(["true"], start_new_session=True)
    for _ in range(3000):  # until the kernel shows it ended, without reaping it
        if _state(ended.pid) == b"Z":
            break
        time.sleep(0.01)
    assert _state(ended.pid) == b"Z"
    os.killpg(ended.pid, 0)  # the zombie still makes its group exist for kill(2)
    assert not _group_alive(ended.pid)
    ended.wait()
    assert not _group_alive(ended.pid)
