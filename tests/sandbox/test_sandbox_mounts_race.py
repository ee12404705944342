"""A mount made or removed beneath a copy-on-write folder while a run starts
(design: "What it does").

The layers are planned on the mount table of one moment; another
program's mount that appears beneath a folder planned as one overlay
("bwrap: Can't make overlay mount on /newroot/tmp"), or that goes (with
its folder) after the plan gave it a layer of its own ("Can't find source
path"), made bubblewrap's set-up fail and the run with it: about one run
in four here while a mount comes and goes, the intermittent
``sandbox-unavailable`` of the sandboxed tests under ``pytest -n 2``, where
the tests bind-mount under ``/tmp``.  The layers are planned again when
the mount table moved, and a command whose namespaces could not be set up
(it did not run) is launched again, bounded; what bubblewrap said of the
failed attempt never reaches the command's output.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_helpers import isopatch, tmpfs

from git_isopatch.sandbox import layers

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")

#: Runs while the mounts come and go: before the fix, about one in two failed.
RUNS = 8

#: A tmpfs made and removed (with its folder) under ``$1``, over and over
#: (mounted 0.2 s, gone 0.1 s: another test's bind mount, sped up), until
#: ``$1/stop`` exists.
CHURN = """\
i=0
while [ ! -e "$1/stop" ] && [ "$i" -lt 4000 ]; do
  i=$((i+1)); mkdir -p "$1/m$i"; mount -t tmpfs -o size=64k none "$1/m$i"
  sleep 0.2; umount "$1/m$i"; rmdir "$1/m$i"; sleep 0.1
done
"""


@contextlib.contextmanager
def mounts_coming_and_going(where: Path) -> Iterator[None]:
    """:data:`CHURN` under ``where`` for the block (at most some minutes)."""
    where.mkdir(parents=True, exist_ok=True)
    churn = subprocess.Popen(["sh", "-c", CHURN, "churn", str(where)])
    try:
        time.sleep(0.1)
        yield
    finally:
        (where / "stop").touch()
        try:
            churn.wait(timeout=30)
        except subprocess.TimeoutExpired:
            churn.kill()
            churn.wait()
        for left in where.glob("m*"):
            subprocess.run(["umount", "-l", str(left)], check=False, capture_output=True)


@pytest.mark.hostile
def test_runs_succeed_while_mounts_come_and_go_beside_the_checkout(
    make_repo, env, tmp_path: Path
) -> None:
    """Beside the checkout (its folder is copy-on-write) and in ``$TMPDIR``
    (a temporary folder), a mount appears and goes with its folder every
    few tens of milliseconds: every run captures its patch, exits 0, and
    its standard error holds only what the command wrote there."""
    repo = make_repo({"a": "a\n"})
    script = "echo x >> a; echo said >&2"
    failed = []
    with (
        mounts_coming_and_going(tmp_path / "churn"),
        mounts_coming_and_going(Path(env["TMPDIR"]) / "churn"),
    ):
        for _ in range(RUNS):
            run = isopatch(
                "--sandbox", "--stdout", "-q", "--", "sh", "-c", script, cwd=repo, env=env
            )
            if run.returncode != 0 or run.err != "said\n" or "+x" not in run.out:
                failed.append((run.returncode, run.err))
    assert not failed, f"{len(failed)} of {RUNS} runs failed: {failed[:3]}"


def test_the_mount_table_says_it_moved_for_a_mount_made_and_removed(tmp_path: Path) -> None:
    """A mount made and removed again between two looks still counts
    (``POLLPRI`` on ``/proc/self/mountinfo``), and stays counted."""
    table = layers.MountTable()
    assert "/" in table.points
    assert not table.moved()
    where = tmp_path / "m"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "none", str(where)], check=True)
    subprocess.run(["umount", str(where)], check=True)
    assert table.moved()
    assert table.moved()
    table.close()


#: A folder made in ``$1`` and removed every few milliseconds, under a name
#: that sorts first there (``0<tag>-<n>``), until ``$2`` exists: another
#: run's private folder in ``/tmp``, made and removed as runs end.
FOLDERS = """\
i=0
while [ ! -e "$2" ] && [ "$i" -lt 20000 ]; do
  i=$((i+1)); mkdir "$1/0$3-$i"; sleep 0.01; rmdir "$1/0$3-$i"
done
"""


@pytest.mark.hostile
def test_runs_succeed_while_folders_come_and_go_in_tmp_with_a_mount_beneath(
    make_repo, env, tmp_path: Path
) -> None:
    """With a mount beneath ``/tmp`` (a test's), each of its subfolders is
    an overlay of its own (:mod:`git_isopatch.sandbox.layers`); another
    program removes one between the plan and bubblewrap's set-up ("Can't
    make overlay mount on /newroot/tmp/...: No such file or directory"):
    every run still captures its patch."""
    repo = make_repo({"a": "a\n"})
    stop, tag = tmp_path / "stop", f"isopatch-test-{os.getpid()}"
    failed = []
    with tmpfs(tmp_path / "mounted", "64k"):
        churn = subprocess.Popen(["sh", "-c", FOLDERS, "churn", "/tmp", str(stop), tag])
        try:
            for _ in range(RUNS):
                run = isopatch("--sandbox", "--stdout", "-q", "--", "sh", "-c", "echo x >> a",
                               cwd=repo, env=env)  # fmt: skip
                if run.returncode != 0 or "+x" not in run.out:
                    failed.append((run.returncode, run.err))
        finally:
            stop.touch()
            churn.wait(timeout=30)
            for left in Path("/tmp").glob(f"0{tag}-*"):
                left.rmdir()
    assert not failed, f"{len(failed)} of {RUNS} runs failed: {failed[:3]}"
