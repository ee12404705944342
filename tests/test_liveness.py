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
import subprocess
import sys
from pathlib import Path

from repo_helpers import ISOPATCH

from git_isopatch.isolation.command import KILL_GRACE_SECONDS

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


def test_timeout_does_not_wait_for_a_zombie(env, make_repo) -> None:
    """Compared with a plain command in the same run, the one that leaves a
    zombie must not cost the grace period (:data:`KILL_GRACE_SECONDS`)
    again."""
    repo = make_repo()
    plain = _run_under_careless_reaper(repo, env, "--timeout", "1", "--", "sleep", "30")
    zombie = _run_under_careless_reaper(
        repo, env, "--timeout", "1", "--", "sh", "-c", ORPHAN_THEN_ZOMBIE
    )
    for run in (plain, zombie):
        assert run["rc"] == 124, run["err"]
        assert "error: the command timed out after 1 second" in run["err"]
    assert zombie["zombies"] >= 1, "the harness did not get the zombie it needs"
    # Waiting out the grace for the zombie would add KILL_GRACE_SECONDS
    # (2 s) and the leftover grace (0.5 s).
    assert zombie["elapsed"] - plain["elapsed"] < KILL_GRACE_SECONDS / 2, (plain, zombie)
